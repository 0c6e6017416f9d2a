#ifndef ATTENTION_PLASTICITY_RUN_PROGRESS_HPP
#define ATTENTION_PLASTICITY_RUN_PROGRESS_HPP

// Progress of a run on stderr: heads done / total, elapsed time and ETA. On a terminal one
// line redrawn with a carriage return (at most ten times a second); otherwise plain lines,
// one per tenth of the heads done (and at least every 30 s). Error lines are printed
// whole, never mixed with the progress line. Thread-safe.

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include <unistd.h>

#include "run_report.hpp"  // format_seconds

namespace attention_plasticity::run
{
class progress_reporter
{
public:
    using clock = std::chrono::steady_clock;

    explicit progress_reporter(std::size_t total, bool enabled = true)
        : m_total(total), m_tty(enabled && ::isatty(STDERR_FILENO) == 1), m_enabled(enabled), m_start(clock::now()),
          m_last_line(m_start)
    {
    }

    double elapsed() const { return std::chrono::duration<double>(clock::now() - m_start).count(); }

    /// A head finished (analyzed or failed).
    void head_done(bool failed)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_done;
        m_failed += failed ? 1 : 0;
        if (!m_enabled)
        {
            return;
        }
        const auto now = clock::now();
        const double since = std::chrono::duration<double>(now - m_last_line).count();
        if (m_tty)
        {
            if (since >= 0.1 || m_done == m_total)
            {
                draw_line();
                m_last_line = now;
            }
        }
        else
        {
            const std::size_t tenth = m_total ? 10 * m_done / m_total : 10;
            if (tenth > m_last_tenth || since >= 30.0 || m_done == m_total)
            {
                std::fprintf(stderr, "%s\n", status().c_str());
                std::fflush(stderr);
                m_last_tenth = tenth;
                m_last_line = now;
            }
        }
    }

    /// Prints a whole line (an error), keeping the terminal progress line below it.
    void message(const std::string& line)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_tty && m_drawn)
        {
            std::fprintf(stderr, "\r\033[K");
        }
        std::fprintf(stderr, "%s\n", line.c_str());
        if (m_tty && m_drawn)
        {
            draw_line();
        }
        std::fflush(stderr);
    }

    /// Ends the terminal line so that what follows starts on a fresh one.
    void finish()
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_tty && m_drawn)
        {
            std::fprintf(stderr, "\n");
            std::fflush(stderr);
            m_drawn = false;
        }
    }

    std::size_t failed() const { return m_failed; }

private:
    std::string status() const
    {
        const double t = elapsed();
        std::string s = "progress: " + std::to_string(m_done) + "/" + std::to_string(m_total) + " heads";
        if (m_failed)
        {
            s += " (" + std::to_string(m_failed) + " failed)";
        }
        s += ", " + format_seconds(t) + " elapsed";
        if (m_done > 0 && m_done < m_total)
        {
            s += ", ETA " + format_seconds(t / static_cast<double>(m_done) * static_cast<double>(m_total - m_done));
        }
        return s;
    }

    void draw_line()
    {
        std::fprintf(stderr, "\r\033[K%s", status().c_str());
        std::fflush(stderr);
        m_drawn = true;
    }

    std::mutex m_mutex;
    std::size_t m_total;
    std::size_t m_done = 0;
    std::size_t m_failed = 0;
    std::size_t m_last_tenth = 0;
    bool m_tty;
    bool m_enabled;
    bool m_drawn = false;
    clock::time_point m_start;
    clock::time_point m_last_line;
};
}  // namespace attention_plasticity::run

#endif
