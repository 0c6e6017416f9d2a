#ifndef ATTENTION_PLASTICITY_IO_DURABLE_FILES_HPP
#define ATTENTION_PLASTICITY_IO_DURABLE_FILES_HPP

// The POSIX primitives of writing files that survive a crash (run/result_set.hpp builds its
// sets with them): a new file written whole and fsync'd, never through a name already there; a
// folder fsync'd; a symbolic link replaced atomically (made beside it, renamed over it); the
// text of a link. Nothing here waits on a FIFO (O_NONBLOCK) or writes through a planted link
// (O_EXCL | O_NOFOLLOW).

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "errors.hpp"
#include "fs_util.hpp"

namespace attention_plasticity::io
{
/// fsyncs a folder (best effort): O_DIRECTORY | O_NONBLOCK, so that nothing else (a FIFO put in its
/// place) is opened or waited for.
inline void fsync_path(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0)
    {
        (void)::fsync(fd);  // best effort for folders (some file systems refuse it)
        ::close(fd);
    }
}

/// The text of the symbolic link `path` ("" when it is none or cannot be read).
inline std::string link_text(const std::string& path)
{
    char buffer[4096];
    const ssize_t n = ::readlink(path.c_str(), buffer, sizeof(buffer) - 1);
    return n < 0 ? std::string() : std::string(buffer, static_cast<std::size_t>(n));
}

/// Writes `pieces` to a new file `path` and fsyncs it; throws output_error(path, reason).
inline void write_new_file(const std::string& path, const std::vector<std::string_view>& pieces)
{
    // O_EXCL | O_NOFOLLOW: a name already there (a symbolic link planted to a file
    // elsewhere, a FIFO) is never opened, truncated or written through.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
    {
        throw output_error(path, "cannot create: " + errno_text(errno));
    }
    auto fail = [&](const char* what) {
        const int err = errno;
        ::close(fd);
        throw output_error(path, std::string(what) + ": " + errno_text(err));
    };
    // writev: one system call for many pieces; a short write resumes where it stopped.
    std::vector<struct iovec> vectors;
    for (const std::string_view piece : pieces)
    {
        if (!piece.empty())
        {
            vectors.push_back({const_cast<char*>(piece.data()), piece.size()});
        }
    }
    std::size_t next = 0;
    while (next < vectors.size())
    {
        const int count = static_cast<int>(std::min<std::size_t>(vectors.size() - next, IOV_MAX));
        const ssize_t n = ::writev(fd, vectors.data() + next, count);
        if (n < 0)
        {
            if (errno == EINTR)
            {
                continue;
            }
            fail("write failed");
        }
        auto written = static_cast<std::size_t>(n);
        while (next < vectors.size() && written >= vectors[next].iov_len)
        {
            written -= vectors[next].iov_len;
            ++next;
        }
        if (written > 0)
        {
            vectors[next].iov_base = static_cast<char*>(vectors[next].iov_base) + written;
            vectors[next].iov_len -= written;
        }
    }
    if (::fsync(fd) != 0)
    {
        fail("write failed (fsync)");
    }
    if (::close(fd) != 0)
    {
        throw output_error(path, "write failed (close): " + errno_text(errno));
    }
}

/// Replaces `target` by a symbolic link to `text`, atomically (link beside it, rename).
inline void replace_with_link(const std::string& text, const std::string& temp, const std::string& target)
{
    ::unlink(temp.c_str());
    if (::symlink(text.c_str(), temp.c_str()) != 0)
    {
        throw output_error(temp, "cannot create a symbolic link: " + errno_text(errno));
    }
    if (::rename(temp.c_str(), target.c_str()) != 0)
    {
        const int err = errno;
        ::unlink(temp.c_str());
        throw output_error(target, "cannot replace: " + errno_text(err));
    }
}
}  // namespace attention_plasticity::io

#endif
