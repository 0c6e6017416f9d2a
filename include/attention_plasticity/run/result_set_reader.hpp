#ifndef ATTENTION_PLASTICITY_RUN_RESULT_SET_READER_HPP
#define ATTENTION_PLASTICITY_RUN_RESULT_SET_READER_HPP

// Reading a result folder (the output folder of ap_analyze, ap_merge, ap_compare or the Python
// package; layout in result_set.hpp): the one reader behind ap_merge (shard_merge.hpp),
// ap_compare and compare_runs (compare_result_sets.hpp).
//
// The reader (1) takes the folder's lock shared (result_set_lock.hpp: never through a symbolic
// link, never waiting on a FIFO), so that no run starts replacing the set while it is read, and
// refuses a folder a run is writing into; (2) resolves `current` once, so that every file read
// comes from one set; a folder without a state folder (plain copies of the files) is read as
// it is; (3) reads each file bounded (io/bounded_read.hpp): a regular file, or a link to one,
// of at most a given size, never a FIFO, a device or a folder, each problem naming the file as
// the user knows it (FOLDER/NAME). The lock is released with the reader.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/bounded_read.hpp"
#include "../io/errors.hpp"
#include "../io/fs_util.hpp"
#include "../io/unique_fd.hpp"
#include "result_set_lock.hpp"

namespace attention_plasticity::run
{
/// Why a result folder cannot be read at all (the files of a readable one fail as io::input_error).
enum class result_folder_problem
{
    unusable,    // not a folder, cannot be examined, a lock or `current` that is not ours
    busy,        // a run is writing into it now
    incomplete,  // a state folder without a complete set: its run did not finish
};

/// A result folder that cannot be read; the message does not name the folder (the caller
/// says which folder, as the user gave it, and what to do: "then merge", "then compare").
class result_folder_error : public std::runtime_error
{
public:
    result_folder_error(result_folder_problem problem, const std::string& text)
        : std::runtime_error(text), m_problem(problem)
    {
    }
    result_folder_problem problem() const noexcept { return m_problem; }

private:
    result_folder_problem m_problem;
};

class result_set_reader
{
public:
    /// Locks and resolves `folder`. Throws result_folder_error.
    explicit result_set_reader(std::string folder) : m_folder(std::move(folder))
    {
        namespace fs = std::filesystem;
        const io::path_info info = io::inspect_path(m_folder, "folder");
        if (!info.exists || !info.is_directory)
        {
            throw result_folder_error(result_folder_problem::unusable,
                                      info.exists ? "is " + info.kind + ", not a folder" : info.problem);
        }
        const std::string state = (fs::path(m_folder) / result_state_folder).string();
        struct stat st;
        if (::lstat(state.c_str(), &st) != 0)
        {
            m_files_dir = m_folder;  // plain copies of the files
            return;
        }
        const std::string lock = (fs::path(state) / "lock").string();
        if (::lstat(lock.c_str(), &st) == 0)
        {
            try
            {
                m_lock.reset(open_lock_file(lock, m_folder, O_RDONLY));
            }
            catch (const output_error& e)
            {
                throw result_folder_error(result_folder_problem::unusable, e.what());
            }
            if (::flock(m_lock.get(), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
            {
                throw result_folder_error(result_folder_problem::busy,
                                          "a run is writing into it (" + lock_holder_text(m_lock.get())
                                              + "); wait for it to finish");
            }
        }
        const std::string current = (fs::path(state) / "current").string();
        if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
        {
            throw result_folder_error(result_folder_problem::incomplete,
                                      "holds no complete result set: its run did not finish");
        }
        const std::string set = io::detail::link_target(current);
        if (!is_result_set_name(set))
        {
            throw result_folder_error(result_folder_problem::unusable, current + " names '" + set + "', not a result set");
        }
        m_files_dir = (fs::path(state) / set).string();
        m_is_set = true;
    }

    result_set_reader(result_set_reader&&) = default;
    result_set_reader& operator=(result_set_reader&&) = default;

    /// The folder as given.
    const std::string& folder() const { return m_folder; }
    /// Where its files are read: its current set, or the folder itself.
    const std::string& files_dir() const { return m_files_dir; }
    /// Whether the folder holds result sets (else: plain copies of the files).
    bool is_set() const { return m_is_set; }

    /// FOLDER/NAME: how messages name a file of the folder.
    std::string display(const std::string& name) const { return (std::filesystem::path(m_folder) / name).string(); }

    /// Whether an entry `name` is there (of any kind: reading it says what is wrong with it).
    bool holds(const std::string& name) const
    {
        struct stat st;
        return ::lstat(path(name).c_str(), &st) == 0;
    }

    /// The names of the entries where the files are read, sorted. Throws input_error.
    std::vector<std::string> entries() const
    {
        std::vector<std::string> names;
        std::error_code ec;
        for (std::filesystem::directory_iterator it(m_files_dir, ec), end; !ec && it != end; it.increment(ec))
        {
            names.push_back(it->path().filename().string());
        }
        if (ec)
        {
            throw io::input_error(m_files_dir, "cannot list: " + ec.message());
        }
        std::sort(names.begin(), names.end());
        return names;
    }

    /// The whole file `name`, at most `max_bytes` bytes. Throws input_error naming FOLDER/NAME.
    std::string read(const std::string& name, std::uintmax_t max_bytes) const
    {
        return io::read_regular_file(path(name), max_bytes, display(name));
    }

    /// The lines of the file `name`, its lines at most `max_line_bytes` long. Throws input_error.
    io::line_reader lines(const std::string& name, std::size_t max_line_bytes) const
    {
        return io::line_reader(path(name), std::numeric_limits<std::uintmax_t>::max(), max_line_bytes, display(name));
    }

private:
    std::string path(const std::string& name) const { return (std::filesystem::path(m_files_dir) / name).string(); }

    std::string m_folder;
    std::string m_files_dir;
    bool m_is_set = false;
    io::unique_fd m_lock;  // shared lock on the folder (none for plain copies)
};
/// The files of the set current in the output folder `output_dir` that are not among `names`:
/// the results of another program (an ap_analyze folder given to ap_compare), which a set of
/// `names` written there would replace as the current set, leaving their links dangling (and the
/// next run would delete them). Empty when the folder holds no set, or one of `names` only, or
/// cannot be read (the writer then says why).
inline std::vector<std::string> foreign_result_files(const std::string& output_dir,
                                                     const std::vector<std::string>& names)
{
    struct stat st;
    if (::lstat((std::filesystem::path(output_dir) / result_state_folder).c_str(), &st) != 0)
    {
        return {};
    }
    std::vector<std::string> foreign;
    try
    {
        const result_set_reader reader(output_dir);
        for (const auto& entry : reader.entries())
        {
            if (entry != result_run_json_file && std::find(names.begin(), names.end(), entry) == names.end())
            {
                foreign.push_back(entry);
            }
        }
    }
    catch (const std::exception&)
    {
        return {};
    }
    return foreign;
}

/// "a, b, c" (at most `shown` names, then "and N more").
inline std::string name_list(const std::vector<std::string>& names, std::size_t shown = 4)
{
    std::string text;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i)
    {
        text += (i == 0 ? "" : ", ") + names[i];
    }
    if (names.size() > shown)
    {
        text += " and " + std::to_string(names.size() - shown) + " more";
    }
    return text;
}
}  // namespace attention_plasticity::run

#endif
