#ifndef ATTENTION_PLASTICITY_IO_MAPPED_FILE_HPP
#define ATTENTION_PLASTICITY_IO_MAPPED_FILE_HPP

// A read-only memory mapping of a whole file (POSIX mmap), so that the NPY reader can hand
// out the vectors of a dump in place instead of copying them (issue 16, item 7).
//
// Mapping is an optimisation, never a requirement: map() returns an empty mapping whenever
// the file cannot be mapped (no mmap on its file system, a size other than the one the caller
// validated, a file of 0 bytes, AP_NPY_MMAP=off in the environment) and the caller then reads
// the file as before. The caller validates the file's size against what it announces before
// mapping, so no page of the mapping lies past the end of the file. A file truncated by
// another process while it is mapped is out of scope: reading a page that no longer exists
// raises SIGBUS, as for every program that maps files.
//
// A sparse file (one with holes: pages never written, e.g. made by truncate) is read, not
// mapped (issue 25, item 8): touching a hole page of a mapping makes the file system allocate
// it, and where it cannot (a full tmpfs) the process gets SIGBUS, whereas read() returns the
// hole's zeros without allocating. The holes are found with lseek(SEEK_HOLE) when the file is
// opened; a file system that cannot answer counts as sparse (read, the safe way).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include <fcntl.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attention_plasticity::io
{
/// Whether files are mapped: yes unless AP_NPY_MMAP=off (then they are read into memory, as
/// before mapping existed; the A/B benchmark and file systems where mapping misbehaves).
inline bool file_mapping_enabled()
{
    const char* value = std::getenv("AP_NPY_MMAP");
    return value == nullptr || strcasecmp(value, "off") != 0;
}

/// Whether the first `size` bytes of the open file `fd` have a hole (a range never written,
/// which reads as zeros): lseek(SEEK_HOLE) from 0 finds the first hole, which is the end of the
/// file when there is none. True also when the file system cannot tell (lseek fails), so that
/// the caller takes the safe path.
inline bool file_has_holes(int fd, std::uintmax_t size) noexcept
{
#if defined(SEEK_HOLE)
    constexpr int seek_hole = SEEK_HOLE;
#elif defined(__linux__)
    constexpr int seek_hole = 4;  // Linux's value, which <unistd.h> hides without _GNU_SOURCE
#else
    constexpr int seek_hole = -1;
#endif
    if (seek_hole < 0)
    {
        return false;  // a platform without SEEK_HOLE cannot tell: mapped as before
    }
    const off_t hole = ::lseek(fd, 0, seek_hole);
    return hole < 0 || static_cast<std::uintmax_t>(hole) < size;
}

/// A read-only, private mapping of a whole file, unmapped when destroyed. Move-only: the
/// address of the mapped bytes does not change when the object moves, and views of them are
/// valid exactly as long as the object (or the one it was moved into) lives.
class mapped_file
{
public:
    mapped_file() = default;

    /// The whole of `path` mapped, if it is a regular file of exactly `expected_size` bytes
    /// (> 0) without holes (file_has_holes) and mapping is enabled and possible; otherwise an
    /// empty mapping (valid() false).
    /// Never throws: the caller reads the file instead, and reports its problems as it does.
    static mapped_file map(const std::string& path, std::uintmax_t expected_size) noexcept
    {
        mapped_file out;
        if (expected_size == 0 || expected_size > static_cast<std::uintmax_t>(static_cast<std::size_t>(-1))
            || !file_mapping_enabled())
        {
            return out;
        }
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
        {
            return out;
        }
        struct stat st
        {
        };
        // The size checked here is the one the caller validated the header against.
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uintmax_t>(st.st_size) == expected_size
            && !file_has_holes(fd, expected_size))
        {
            const auto size = static_cast<std::size_t>(expected_size);
            void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | populate_flag, fd, 0);
            if (address != MAP_FAILED)
            {
                out.m_address = address;
                out.m_size = size;
            }
        }
        ::close(fd);  // the mapping keeps the file
        return out;
    }

    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    mapped_file(mapped_file&& other) noexcept
        : m_address(std::exchange(other.m_address, nullptr)), m_size(std::exchange(other.m_size, 0))
    {
    }

    mapped_file& operator=(mapped_file&& other) noexcept
    {
        if (this != &other)
        {
            unmap();
            m_address = std::exchange(other.m_address, nullptr);
            m_size = std::exchange(other.m_size, 0);
        }
        return *this;
    }

    ~mapped_file() { unmap(); }

    bool valid() const noexcept { return m_address != nullptr; }
    const unsigned char* data() const noexcept { return static_cast<const unsigned char*>(m_address); }
    std::size_t size() const noexcept { return m_size; }

private:
    // Linux: the pages are read in by the one mmap call instead of one page fault each (the
    // analysis reads every vector anyway); elsewhere, on demand.
#ifdef MAP_POPULATE
    static constexpr int populate_flag = MAP_POPULATE;
#else
    static constexpr int populate_flag = 0;
#endif

    void unmap() noexcept
    {
        if (m_address != nullptr)
        {
            ::munmap(m_address, m_size);
            m_address = nullptr;
            m_size = 0;
        }
    }

    void* m_address = nullptr;
    std::size_t m_size = 0;
};
}  // namespace attention_plasticity::io

#endif
