#ifndef ATTENTION_PLASTICITY_IO_BOUNDED_READ_HPP
#define ATTENTION_PLASTICITY_IO_BOUNDED_READ_HPP

// Reading a file named from outside without waiting and without bound: the file is opened
// with O_NONBLOCK and checked with fstat on the descriptor opened (so a FIFO, a device such
// as /dev/zero or a folder in its place, or a symbolic link to one, is reported, never waited
// for or read), its size is checked against a limit before anything is read, and no more than
// that size is ever read (a file that grows meanwhile is reported as changed). Every problem is
// an input_error naming the file and saying what is wrong in words. POSIX.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.hpp"
#include "fs_util.hpp"
#include "unique_fd.hpp"

namespace attention_plasticity::io
{
/// Physical memory of the machine in bytes (the bound on what one file may bring into memory).
inline std::uintmax_t physical_memory_bytes()
{
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0)
    {
        return std::numeric_limits<std::uintmax_t>::max();
    }
    return static_cast<std::uintmax_t>(pages) * static_cast<std::uintmax_t>(page_size);
}

/// A regular file opened for reading and its size when opened.
struct opened_file
{
    unique_fd fd;
    std::uintmax_t size = 0;
};

/// Opens `path` for reading: a regular file (a symbolic link to one is followed) of at most
/// `max_bytes` bytes. Throws input_error(display, reason): not found, a dangling link, a link
/// loop, permission denied, "is a FIFO, not a regular file", "is a folder, ...", too large.
/// `display` names the file in messages (the path as the user knows it; default `path`).
inline opened_file open_regular_file(const std::string& path, std::uintmax_t max_bytes, const std::string& display = "")
{
    const std::string& name = display.empty() ? path : display;
    opened_file f;
    // O_NONBLOCK: opening a FIFO returns at once (a blocking open waits for a writer); the
    // descriptor's own fstat then says what was opened, whatever was at the path before.
    f.fd.reset(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (!f.fd)
    {
        const int err = errno;
        const path_info info = inspect_path(path, "file");
        if (!info.exists)
        {
            throw input_error(name, info.problem);
        }
        throw input_error(name, err == EACCES ? std::string("permission denied (the file cannot be read)")
                                              : "cannot open: " + errno_text(err));
    }
    struct stat st;
    if (::fstat(f.fd.get(), &st) != 0)
    {
        throw input_error(name, "cannot be examined: " + errno_text(errno));
    }
    if (!S_ISREG(st.st_mode))
    {
        throw input_error(name, "is " + detail::kind_of(st.st_mode) + ", not a regular file");
    }
    f.size = static_cast<std::uintmax_t>(st.st_size);
    if (f.size > max_bytes)
    {
        throw input_error(name, std::to_string(f.size) + " bytes, more than the " + std::to_string(max_bytes)
                                    + " accepted");
    }
    return f;
}

/// Reads up to `size` bytes of `fd` into `out` (from its current offset); fewer only at the
/// end of the file. Throws input_error(name, ...) on a read error.
inline std::size_t read_up_to(int fd, char* out, std::size_t size, const std::string& name)
{
    std::size_t done = 0;
    while (done < size)
    {
        const ssize_t n = ::read(fd, out + done, size - done);
        if (n < 0 && errno == EINTR)
        {
            continue;
        }
        if (n < 0)
        {
            throw input_error(name, "cannot read: " + errno_text(errno));
        }
        if (n == 0)
        {
            break;
        }
        done += static_cast<std::size_t>(n);
    }
    return done;
}

/// The whole content of the regular file `path` of at most `max_bytes` bytes (see
/// open_regular_file); input_error also when it changes size while it is read.
inline std::string read_regular_file(const std::string& path, std::uintmax_t max_bytes, const std::string& display = "")
{
    const std::string& name = display.empty() ? path : display;
    opened_file f = open_regular_file(path, max_bytes, name);
    std::string out(static_cast<std::size_t>(f.size), '\0');
    char extra = 0;
    if (read_up_to(f.fd.get(), out.data(), out.size(), name) != out.size()
        || read_up_to(f.fd.get(), &extra, 1, name) != 0)
    {
        throw input_error(name, "changed while it was read");
    }
    return out;
}

/// The lines of a regular file, one at a time (a large table is never held whole): at most
/// the size the file had when opened is read, and a line longer than `max_line_bytes` is an
/// error (a file of one endless line, such as zeros, is not read into memory).
class line_reader
{
public:
    line_reader(const std::string& path, std::uintmax_t max_bytes, std::size_t max_line_bytes,
                const std::string& display = "")
        : m_name(display.empty() ? path : display), m_file(open_regular_file(path, max_bytes, m_name)),
          m_left(m_file.size), m_max_line(max_line_bytes)
    {
    }

    /// The next line without its '\n' into `line`; false at the end of the file.
    bool next(std::string& line)
    {
        line.clear();
        while (true)
        {
            const std::size_t end = m_buffer.find('\n', m_pos);
            if (end != std::string::npos)
            {
                line.append(m_buffer, m_pos, end - m_pos);
                m_pos = end + 1;
                m_ended = true;
                return check_length(line);
            }
            line.append(m_buffer, m_pos, std::string::npos);
            m_pos = m_buffer.size();
            check_length(line);
            if (!fill())
            {
                if (line.empty())
                {
                    return false;  // the end: m_ended says whether the last line had its '\n'
                }
                m_ended = false;
                return true;
            }
        }
    }

    /// Whether the last line read ended with '\n' (false: the file was cut short).
    bool last_line_ended() const { return m_ended; }
    const std::string& name() const { return m_name; }

private:
    bool check_length(const std::string& line) const
    {
        if (line.size() > m_max_line)
        {
            throw input_error(m_name, "a line longer than " + std::to_string(m_max_line)
                                          + " bytes (not a table of this program)");
        }
        return true;
    }

    bool fill()
    {
        if (m_left == 0)
        {
            char extra = 0;
            if (read_up_to(m_file.fd.get(), &extra, 1, m_name) != 0)
            {
                throw input_error(m_name, "changed while it was read");
            }
            return false;
        }
        m_buffer.resize(static_cast<std::size_t>(std::min<std::uintmax_t>(m_left, 1 << 16)));
        const std::size_t n = read_up_to(m_file.fd.get(), m_buffer.data(), m_buffer.size(), m_name);
        if (n < m_buffer.size())
        {
            throw input_error(m_name, "changed while it was read");
        }
        m_left -= n;
        m_pos = 0;
        return true;
    }

    std::string m_name;
    opened_file m_file;
    std::uintmax_t m_left = 0;
    std::size_t m_max_line = 0;
    std::string m_buffer;
    std::size_t m_pos = 0;
    bool m_ended = true;
};
}  // namespace attention_plasticity::io

#endif
