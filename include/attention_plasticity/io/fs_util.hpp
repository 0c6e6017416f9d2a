#ifndef ATTENTION_PLASTICITY_IO_FS_UTIL_HPP
#define ATTENTION_PLASTICITY_IO_FS_UTIL_HPP

// What is wrong with a path read from outside, in words: not found, a dangling symbolic
// link, a symbolic link loop, permission denied, a FIFO where a file was expected. Every
// front end (ap_analyze, ap_synth, the Python module) reports paths through these, so that
// no problem is reported as "not found" when it is something else. POSIX only.

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attention_plasticity::io
{
/// The outcome of stat() on a path, following symbolic links.
struct path_info
{
    bool exists = false;
    bool is_directory = false;
    bool is_regular = false;
    std::uintmax_t size = 0;
    bool absent = false;    // nothing at all at that path (not even a dangling link)
    int error = 0;          // errno of the failed stat (0 when it exists)
    std::string problem;    // why it cannot be used, "" when it exists
    std::string kind;       // "a folder", "a regular file", "a FIFO", ...
};

inline std::string errno_text(int err)
{
    return std::strerror(err);
}

namespace detail
{
    inline std::string kind_of(mode_t mode)
    {
        if (S_ISDIR(mode))
        {
            return "a folder";
        }
        if (S_ISREG(mode))
        {
            return "a regular file";
        }
        if (S_ISFIFO(mode))
        {
            return "a FIFO";
        }
        if (S_ISSOCK(mode))
        {
            return "a socket";
        }
        if (S_ISCHR(mode))
        {
            return "a character device";
        }
        if (S_ISBLK(mode))
        {
            return "a block device";
        }
        return "not a regular file";
    }

    inline std::string link_target(const std::string& path)
    {
        char buffer[4096];
        const ssize_t n = ::readlink(path.c_str(), buffer, sizeof(buffer) - 1);
        if (n < 0)
        {
            return "?";
        }
        return std::string(buffer, static_cast<std::size_t>(n));
    }
}  // namespace detail

/// stat(path); on failure `problem` says why in words ("not found" is only ENOENT without a
/// dangling link). `what` names the thing looked for ("file", "folder") in "X not found".
inline path_info inspect_path(const std::string& path, const char* what = "file")
{
    path_info info;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0)
    {
        info.exists = true;
        info.is_directory = S_ISDIR(st.st_mode);
        info.is_regular = S_ISREG(st.st_mode);
        info.size = info.is_regular ? static_cast<std::uintmax_t>(st.st_size) : 0;
        info.kind = detail::kind_of(st.st_mode);
        return info;
    }
    info.error = errno;
    struct stat link;
    switch (info.error)
    {
        case ENOENT:
            if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
            {
                info.problem = "dangling symbolic link (to '" + detail::link_target(path) + "', which does not exist)";
            }
            else
            {
                info.absent = true;
                info.problem = std::string(what) + " not found";
            }
            break;
        case ELOOP: info.problem = "symbolic link loop (too many levels of symbolic links)"; break;
        case EACCES: info.problem = "permission denied (a folder on the path cannot be searched)"; break;
        case ENOTDIR: info.problem = std::string(what) + " not found (a part of the path is not a folder)"; break;
        case ENAMETOOLONG: info.problem = "path too long"; break;
        default: info.problem = "cannot access: " + errno_text(info.error); break;
    }
    return info;
}

/// "" when the current user may enter `folder` (search permission), else the reason.
inline std::string folder_access_problem(const std::string& folder)
{
    if (::faccessat(AT_FDCWD, folder.c_str(), X_OK, AT_EACCESS) != 0)
    {
        const int err = errno;
        return err == EACCES ? std::string("permission denied (the folder cannot be entered)")
                             : "cannot enter the folder: " + errno_text(err);
    }
    return "";
}
}  // namespace attention_plasticity::io

#endif
