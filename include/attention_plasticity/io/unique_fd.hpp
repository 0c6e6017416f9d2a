#ifndef ATTENTION_PLASTICITY_IO_UNIQUE_FD_HPP
#define ATTENTION_PLASTICITY_IO_UNIQUE_FD_HPP

// An open file descriptor owned by one object and closed with it: a descriptor (and the flock
// on it) is never leaked when the code between open and close throws. POSIX.

#include <utility>

#include <unistd.h>

namespace attention_plasticity::io
{
/// Owns a file descriptor (-1: none); closes it when destroyed or reset.
class unique_fd
{
public:
    unique_fd() = default;
    explicit unique_fd(int fd) noexcept : m_fd(fd) {}
    unique_fd(unique_fd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    unique_fd& operator=(unique_fd&& other) noexcept
    {
        if (this != &other)
        {
            reset(std::exchange(other.m_fd, -1));
        }
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    /// Closes the descriptor held, if any, and holds `fd`.
    void reset(int fd = -1) noexcept
    {
        if (m_fd >= 0)
        {
            ::close(m_fd);
        }
        m_fd = fd;
    }
    /// Gives up the descriptor without closing it.
    int release() noexcept { return std::exchange(m_fd, -1); }
    int get() const noexcept { return m_fd; }
    explicit operator bool() const noexcept { return m_fd >= 0; }

private:
    int m_fd = -1;
};
}  // namespace attention_plasticity::io

#endif
