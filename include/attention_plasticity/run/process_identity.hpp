#ifndef ATTENTION_PLASTICITY_RUN_PROCESS_IDENTITY_HPP
#define ATTENTION_PLASTICITY_RUN_PROCESS_IDENTITY_HPP

// Which process wrote something, and whether it still runs: the result sets (result_set.hpp)
// name their temporary entries after the process that made them, and remove a leftover only
// when that process is gone. The identity is the pid, its start time (clock ticks since boot),
// the boot id and the host; a forked child gets its own. Linux's /proc.

#include <cerrno>
#include <fstream>
#include <optional>
#include <string>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace attention_plasticity::run
{
/// Who wrote a leftover: enough to tell whether that process still runs.
struct process_identity
{
    long pid = 0;
    unsigned long long start_ticks = 0;  // field 22 of /proc/<pid>/stat
    std::string boot_id;                 // first 8 characters of /proc/sys/kernel/random/boot_id
    std::string host;

    /// "<pid>-<start>-<boot>-<host>".
    std::string token() const
    {
        return std::to_string(pid) + "-" + std::to_string(start_ticks) + "-" + boot_id + "-" + host;
    }
};

namespace detail
{
    inline std::string read_small_file(const std::string& path)
    {
        std::ifstream in(path, std::ios::binary);
        std::string text(4096, '\0');
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        text.resize(static_cast<std::size_t>(in.gcount()));
        return text;
    }

    /// Start time of a process in clock ticks since boot; nullopt when there is no such process.
    inline std::optional<unsigned long long> process_start_ticks(long pid)
    {
        const std::string stat = read_small_file("/proc/" + std::to_string(pid) + "/stat");
        const std::size_t paren = stat.rfind(')');  // the command name may hold spaces and ')'
        if (paren == std::string::npos)
        {
            return std::nullopt;
        }
        std::size_t pos = paren + 1;
        for (int field = 3; field <= 22; ++field)
        {
            while (pos < stat.size() && stat[pos] == ' ')
            {
                ++pos;
            }
            const std::size_t end = stat.find(' ', pos);
            if (field == 22)
            {
                try
                {
                    return std::stoull(stat.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
                }
                catch (const std::exception&)
                {
                    return std::nullopt;
                }
            }
            if (end == std::string::npos)
            {
                return std::nullopt;
            }
            pos = end;
        }
        return std::nullopt;
    }

    inline std::string host_name()
    {
        char buffer[256] = {};
        if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0')
        {
            return "localhost";
        }
        std::string host = buffer;
        for (char& c : host)
        {
            const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
            c = plain ? c : '_';
        }
        return host;
    }

    inline std::string boot_id()
    {
        std::string id = read_small_file("/proc/sys/kernel/random/boot_id");
        std::string out;
        for (const char c : id)
        {
            if (out.size() == 8)
            {
                break;
            }
            if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
            {
                out += c;
            }
        }
        return out.empty() ? "noboot" : out;
    }
}  // namespace detail

namespace detail
{
    inline process_identity identity_of_this_process()
    {
        process_identity p;
        p.pid = static_cast<long>(::getpid());
        p.start_ticks = process_start_ticks(p.pid).value_or(0);
        p.boot_id = boot_id();
        p.host = host_name();
        return p;
    }

    inline process_identity& cached_identity()
    {
        static process_identity self = [] {
            // A forked child is another process: its sets, temporary names and owner line must
            // not carry its parent's pid. The handler runs in the child right after fork, while
            // it has a single thread, so the identity is replaced before anything can read it.
            ::pthread_atfork(nullptr, nullptr, [] { cached_identity() = identity_of_this_process(); });
            return identity_of_this_process();
        }();
        return self;
    }
}  // namespace detail

/// The running process as result sets name it (pid, start time, boot, host); a forked child
/// gets its own.
inline const process_identity& this_process()
{
    return detail::cached_identity();
}

/// Parses a token written by process_identity::token().
inline std::optional<process_identity> parse_process_token(const std::string& token)
{
    process_identity p;
    std::size_t pos = 0;
    std::string fields[3];
    for (auto& field : fields)
    {
        const std::size_t dash = token.find('-', pos);
        if (dash == std::string::npos || dash == pos)
        {
            return std::nullopt;
        }
        field = token.substr(pos, dash - pos);
        pos = dash + 1;
    }
    if (pos >= token.size() || fields[0].size() > 12 || fields[1].size() > 20)
    {
        return std::nullopt;
    }
    // "~N" after the host: the (N+1)-th set of one process (host names hold no '~').
    const std::size_t tilde = token.find('~', pos);
    if (tilde != std::string::npos
        && (tilde + 1 == token.size() || token.find_first_not_of("0123456789", tilde + 1) != std::string::npos))
    {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < 2; ++i)
    {
        if (fields[i].find_first_not_of("0123456789") != std::string::npos)
        {
            return std::nullopt;
        }
    }
    p.pid = std::stol(fields[0]);
    p.start_ticks = std::stoull(fields[1]);
    p.boot_id = fields[2];
    p.host = token.substr(pos, tilde == std::string::npos ? std::string::npos : tilde - pos);
    return p;
}

/// Whether the process that wrote a leftover is gone for sure (never true for another host).
inline bool process_is_gone(const process_identity& p)
{
    const process_identity& self = this_process();
    if (p.host != self.host)
    {
        return false;
    }
    if (p.boot_id != self.boot_id)
    {
        return true;
    }
    if (p.pid <= 0)
    {
        return true;
    }
    if (::kill(static_cast<pid_t>(p.pid), 0) != 0 && errno == ESRCH)
    {
        return true;
    }
    const auto start = detail::process_start_ticks(p.pid);
    return start && *start != p.start_ticks;
}
}  // namespace attention_plasticity::run

#endif
