#ifndef ATTENTION_PLASTICITY_RUN_RESULT_SET_LOCK_HPP
#define ATTENTION_PLASTICITY_RUN_RESULT_SET_LOCK_HPP

// What the writer (result_set.hpp) and the reader (result_set_reader.hpp) of a result folder
// share: the names of its state folder and of its sets, and its lock file
// (OUT/.ap_results/lock), opened without following a symbolic link or waiting on a FIFO, and
// who holds it. A writer holds the lock exclusively; a reader shared, so that no run replaces
// the set it reads. POSIX; the holder's name uses Linux's /proc/locks.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../io/fs_util.hpp"
#include "errors.hpp"
#include "process_identity.hpp"

namespace attention_plasticity::run
{
/// The folder of a result folder that holds its sets, `current`, `previous` and the lock.
inline constexpr const char* result_state_folder = ".ap_results";
/// The set's own description in every set folder (OUT/.ap_results/<set>/run.json, not linked into
/// OUT; result_set_writer writes it): not a result file of any program.
inline constexpr const char* result_run_json_file = "run.json";

/// A set name that `current` may name: "set-..." or "legacy-...", no '/' (it cannot lead out
/// of the state folder).
inline bool is_result_set_name(const std::string& name)
{
    return (name.rfind("set-", 0) == 0 || name.rfind("legacy-", 0) == 0) && name.find('/') == std::string::npos;
}

/// Opens the lock file `path` of output folder `out` (flags: O_RDONLY, or O_RDWR | O_CREAT)
/// without following a symbolic link or waiting on a FIFO, and checks that it is a regular
/// file with one name (a hard link to a file elsewhere would be truncated). Throws
/// output_error naming it.
inline int open_lock_file(const std::string& path, const std::string& out, int flags)
{
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
    {
        const int err = errno;
        struct stat link;
        if (err == ELOOP && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
        {
            throw output_error(path + ": is a symbolic link (to '" + io::detail::link_target(path)
                               + "'), not this program's lock file; it is not followed (move it away)");
        }
        throw output_error("output_dir '" + out + "': "
                           + ((flags & O_CREAT) != 0 ? "cannot write into it: cannot create " : "cannot open ") + path
                           + ": " + io::errno_text(err));
    }
    struct stat st;
    std::string problem;
    if (::fstat(fd, &st) != 0)
    {
        problem = "cannot be examined: " + io::errno_text(errno);
    }
    else if (!S_ISREG(st.st_mode))
    {
        problem = "is " + io::detail::kind_of(st.st_mode) + ", not this program's lock file (move it away)";
    }
    else if (st.st_nlink != 1)
    {
        problem = "has " + std::to_string(st.st_nlink)
                  + " names (a hard link to a file elsewhere?), not this program's lock file; it is not written "
                    "(move it away)";
    }
    if (!problem.empty())
    {
        ::close(fd);
        throw output_error(path + ": " + problem);
    }
    return fd;
}

namespace detail
{
    /// The pids holding a flock on the file open as `fd` (from /proc/locks; none when the
    /// holder is on another host or /proc is not there).
    inline std::vector<long> lock_holders(int fd)
    {
        std::vector<long> pids;
        struct stat st;
        if (::fstat(fd, &st) != 0)
        {
            return pids;
        }
        char id[64];
        std::snprintf(id, sizeof(id), "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                      static_cast<unsigned long long>(st.st_ino));
        std::ifstream in("/proc/locks");
        std::string line;
        for (int lines = 0; lines < 100000 && std::getline(in, line); ++lines)
        {
            // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; "1: -> FLOCK ..." is a waiter.
            char type[16], mode[16], access[16], file[64];
            long pid = 0;
            if (line.find("->") == std::string::npos
                && std::sscanf(line.c_str(), "%*[^:]: %15s %15s %15s %ld %63s", type, mode, access, &pid, file) == 5
                && std::strcmp(file, id) == 0 && pid > 0)
            {
                pids.push_back(pid);
            }
        }
        return pids;
    }

    /// The short command name of a process, "" when it is gone.
    inline std::string process_command(long pid)
    {
        std::string comm = read_small_file("/proc/" + std::to_string(pid) + "/comm");
        while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0'))
        {
            comm.pop_back();
        }
        return comm;
    }
}  // namespace detail

/// Who holds the lock file open as `fd`, for "in use by another run (...)": the owner line a
/// run writes into it ("pid N on HOST") when that process holds it or may (another host);
/// else the process that really holds it (a stale line never names a finished run).
inline std::string lock_holder_text(int fd)
{
    std::string owner(256, '\0');
    const ssize_t n = ::pread(fd, owner.data(), owner.size(), 0);
    owner.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    owner = owner.substr(0, owner.find('\n'));
    long recorded = 0;
    char host[200] = {};
    const bool parsed = std::sscanf(owner.c_str(), "pid %ld on %199s", &recorded, host) == 2;
    const std::vector<long> holders = detail::lock_holders(fd);
    if (parsed && std::find(holders.begin(), holders.end(), recorded) != holders.end())
    {
        return owner;
    }
    if (!holders.empty())
    {
        const std::string comm = detail::process_command(holders.front());
        return "pid " + std::to_string(holders.front()) + (comm.empty() ? "" : " (" + comm + ")") + " on "
               + this_process().host + " holds its lock";
    }
    if (parsed && host != this_process().host)
    {
        return owner;  // another host (a network file system): its process cannot be checked from here
    }
    return "a process that cannot be identified holds its lock";
}
}  // namespace attention_plasticity::run

#endif
