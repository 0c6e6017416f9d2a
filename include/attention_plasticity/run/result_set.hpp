#ifndef ATTENTION_PLASTICITY_RUN_RESULT_SET_HPP
#define ATTENTION_PLASTICITY_RUN_RESULT_SET_HPP

// Writing the files of a run as one set: a reader of the output folder sees either the whole
// earlier set or the whole new one, never a mix, whatever happens to the run (a full disk,
// kill -9 at any point, a second run into the same folder). Layout of the output folder:
//
//   OUT/head_metrics.csv -> .ap_results/current/head_metrics.csv   symbolic links, made once
//   OUT/.ap_results/current -> set-<run>                          replaced by one rename(2)
//   OUT/.ap_results/set-<run>/head_metrics.csv ...                a complete set, never changed
//   OUT/.ap_results/set-<run>/run.json                            the version that wrote it
//   OUT/.ap_results/previous -> set-<run>                         the set before, kept one run
//   OUT/.ap_results/lock                                          flock: one run at a time
//
// A run (1) checks the output folder before any work: creates it if needed, takes the lock
// (a second run into the same folder stops with an error naming the first), checks that the
// result names in it are its own (absent, its links, or regular files of an earlier version),
// removes leftovers of runs whose process is gone, and creates its temporary set folder
// (which proves the folder writable); (2) writes every file of the set into that folder
// (fsync'd), and (3) makes it current with one atomic rename of the `current` link; the
// earlier set is then named by OUT/.ap_results/previous and kept until the next run's step
// (3), so that a reader who resolved `current` once reads a whole set even when a run
// finishes meanwhile; older sets are deleted. Files other than the result names in OUT are
// never touched, and nothing is written through a symbolic link: the lock and every file
// are opened with O_NOFOLLOW (and O_NONBLOCK: a FIFO is never waited for) and checked with
// fstat.
//
// <run> names the process: pid, start time (clock ticks since boot), boot id and host, and
// "~N" after it for the (N+1)-th set of one process (the Python module may write several). A
// leftover (tmp-, set-, link-, name-, legacy- <run>) is removed only when that process is gone:
// same host and another boot, or no such pid, or a pid with another start time.
//
// Nothing here knows about CSVs: a set is a list of named files (the sharding merge writes
// its set with the same writer). POSIX: the file primitives (a new file written whole and
// fsync'd, a link replaced atomically) are io/durable_files.hpp's; the run identity and
// liveness (process_identity.hpp) use Linux's /proc.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../io/durable_files.hpp"
#include "../io/errors.hpp"
#include "../io/fs_util.hpp"
#include "../io/json.hpp"
#include "../io/result_file.hpp"
#include "../version.hpp"
#include "errors.hpp"
#include "process_identity.hpp"
#include "result_set_lock.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

namespace detail
{
    /// Rethrows the exception being handled, an io::output_error of the file primitives
    /// (io/durable_files.hpp) as the run layer's output_error, word for word.
    [[noreturn]] inline void rethrow_as_output_error()
    {
        try
        {
            throw;
        }
        catch (const io::output_error& e)
        {
            throw output_error(e.what());
        }
    }
}  // namespace detail

/// The writer of one run's result set into one output folder; see the top of this file.
class result_set_writer
{
public:
    static constexpr const char* state_folder = result_state_folder;
    /// The set's own description, in the set folder only (OUT/.ap_results/current/run.json, not
    /// linked into OUT): the version of the library that wrote it and its files, so that a user
    /// can tell which version made the results.
    static constexpr const char* run_json_file = result_run_json_file;

    /// run.json's text: {"attention_plasticity_version": "0.1.0", "files": ["a.csv", ...]}
    /// (strings quoted by io::json_string, the writers' one quoting), then `members` (", "key":
    /// value, ...": an analysis run's "units" and "capture", docs/method.md §8.3) when given.
    static std::string run_json(const std::vector<io::result_file>& files, const std::string& members = "")
    {
        std::string text = "{\"attention_plasticity_version\": " + io::json_string(attention_plasticity::version)
                           + ", \"files\": [";
        for (std::size_t i = 0; i < files.size(); ++i)
        {
            text += (i == 0 ? "" : ", ") + io::json_string(files[i].name);
        }
        return text + "]" + members + "}\n";
    }

    /// Checks and prepares `output_dir` for a set of files named `names` (step 1 above).
    /// Throws output_error before any work is done when the folder cannot be used.
    result_set_writer(std::string output_dir, std::vector<std::string> names)
        : m_out(std::move(output_dir)), m_names(std::move(names))
    {
        try
        {
            prepare();
        }
        catch (...)
        {
            release();
            throw;
        }
    }

    result_set_writer(const result_set_writer&) = delete;
    result_set_writer& operator=(const result_set_writer&) = delete;

    ~result_set_writer() { release(); }

    /// Whether the folder already holds a set (of this version or an earlier one).
    bool has_earlier_set() const { return m_had_current || !m_legacy.empty(); }

    /// The folder after a run that made no new set, as every front end ends its last message:
    /// with `nothing_to_write` (no head analyzed) "the earlier results in DIR are left as they
    /// were" or "nothing was written to DIR"; else (the set could not be written) "the earlier
    /// results in DIR are unchanged" or "no results were written to DIR".
    std::string unchanged_text(bool nothing_to_write) const
    {
        if (has_earlier_set())
        {
            return "the earlier results in " + m_out + (nothing_to_write ? " are left as they were" : " are unchanged");
        }
        return (nothing_to_write ? "nothing was written to " : "no results were written to ") + m_out;
    }

    /// Throws output_error (before any work) when the output folder's file system has not
    /// room for files of `sizes` bytes together (in whole blocks; a lower bound, since file
    /// systems that keep small files inline need no more): a full disk is refused at once,
    /// not after the work. A set that passes and still does not fit fails at its writing,
    /// the earlier set staying current.
    void require_free_space(const std::vector<std::uint64_t>& sizes) const
    {
        struct statvfs fs;
        if (::statvfs(m_state.c_str(), &fs) != 0 || fs.f_frsize == 0)
        {
            return;  // unknown: the writing itself will tell
        }
        const std::uint64_t block = fs.f_frsize;
        std::uint64_t bytes = 0;
        for (const std::uint64_t size : sizes)
        {
            bytes += size;
        }
        const std::uint64_t need = (bytes + block - 1) / block * block;
        const std::uint64_t available = static_cast<std::uint64_t>(fs.f_bavail) * block;
        if (available < need)
        {
            throw output_error("output_dir '" + m_out + "': not enough free space (" + io::errno_text(ENOSPC) + "): "
                               + std::to_string(available) + " bytes free, the results need at least "
                               + std::to_string(need) + "; nothing was analyzed, so " + unchanged_text(true));
        }
    }

    /// Messages about the folder worth showing (leftovers left alone, locking unavailable).
    const std::vector<std::string>& notes() const { return m_notes; }

    /// Writes `files` (their names must be the constructor's, each once) and makes them the
    /// current set. Throws output_error; then the earlier set is still the current one.
    void commit(const std::vector<io::result_file>& files, const std::string& run_json_members = "")
    {
        if (!m_have_temp)
        {
            throw output_error("output_dir '" + m_out + "': the set was already written or abandoned");
        }
        const std::string token = this_process().token();
        const std::string set_path = in_state(m_set_name);
        bool renamed = false;
        try
        {
            for (const auto& file : files)
            {
                io::write_new_file((std::filesystem::path(m_temp) / file.name).string(), file.pieces);
            }
            const std::string run = run_json(files, run_json_members);
            io::write_new_file((std::filesystem::path(m_temp) / run_json_file).string(), {run});
            io::fsync_path(m_temp);
            if (::rename(m_temp.c_str(), set_path.c_str()) != 0)
            {
                throw output_error(set_path + ": cannot rename the new set into place: " + io::errno_text(errno));
            }
            renamed = true;
            io::fsync_path(m_state);
            const std::string current = in_state("current");
            if (!m_legacy.empty() && !m_had_current)
            {
                adopt_legacy_files(token, current);
            }
            link_names(token);
            // The one step that changes what a reader sees: `current` now names the new set.
            io::replace_with_link(m_set_name, in_state("link-" + token), current);
            io::fsync_path(m_state);
        }
        catch (...)
        {
            std::error_code ignored;
            std::filesystem::remove_all(renamed ? set_path : m_temp, ignored);
            m_have_temp = false;
            detail::rethrow_as_output_error();
        }
        m_have_temp = false;
        // The earlier set stays, named by `previous`, until the next run's commit: a reader
        // that resolved `current` just before the switch reads it to the end. Older sets go.
        std::string kept = m_kept;
        if (is_set_name(m_previous) && m_previous != m_set_name)
        {
            try
            {
                io::replace_with_link(m_previous, in_state("link-" + token), in_state("previous"));
                kept = m_previous;
            }
            catch (const io::output_error&)
            {
                // the new set is current: a `previous` link that cannot be made only ends the keeping
            }
        }
        remove_old_sets(kept);
    }

    /// Drops the temporary set; the earlier set stays current. Safe to call twice.
    void abandon() noexcept
    {
        if (m_have_temp)
        {
            std::error_code ignored;
            std::filesystem::remove_all(m_temp, ignored);
            m_have_temp = false;
        }
    }

private:
    void prepare()
    {
        prepare_folder();
        m_state = (std::filesystem::path(m_out) / state_folder).string();
        make_state_folder();
        take_lock();
        check_names();
        const std::string previous = io::link_text(in_state("previous"));
        m_kept = is_set_name(previous) ? previous : std::string();
        remove_leftovers();
        // A process may write several sets into one folder (the Python module): each run of
        // it names its own ("~N" from the second on), never the one `current` names.
        static std::atomic<unsigned long> runs{0};
        const unsigned long run = runs++;
        const std::string token = this_process().token() + (run == 0 ? "" : "~" + std::to_string(run));
        m_temp = in_state("tmp-" + token);
        m_set_name = "set-" + token;
        if (::mkdir(m_temp.c_str(), 0755) != 0)
        {
            throw output_error("output_dir '" + m_out + "': cannot write into it: " + io::errno_text(errno));
        }
        m_have_temp = true;
        const std::string probe = in_state("link-" + token);
        ::unlink(probe.c_str());
        if (::symlink("probe", probe.c_str()) != 0)
        {
            const int err = errno;
            throw output_error("output_dir '" + m_out + "': cannot create symbolic links there (" + io::errno_text(err)
                               + "); the results are replaced as a set through one; use a folder on another file "
                                 "system");
        }
        ::unlink(probe.c_str());
    }

    /// Drops the temporary set and the lock.
    void release() noexcept
    {
        abandon();
        if (m_lock_fd >= 0)
        {
            ::close(m_lock_fd);
            m_lock_fd = -1;
        }
    }

    /// A set name of ours that `current` may name (result_set_lock.hpp).
    static bool is_set_name(const std::string& name) { return is_result_set_name(name); }

    std::string in_state(const std::string& name) const { return (std::filesystem::path(m_state) / name).string(); }
    std::string in_out(const std::string& name) const { return (std::filesystem::path(m_out) / name).string(); }
    std::string link_text_of(const std::string& name) const
    {
        return std::string(state_folder) + "/current/" + name;
    }

    void prepare_folder()
    {
        const io::path_info info = io::inspect_path(m_out, "folder");
        if (!info.exists && !info.absent)
        {
            throw output_error("output_dir '" + m_out + "': " + info.problem);
        }
        if (info.exists && !info.is_directory)
        {
            throw output_error("output_dir '" + m_out + "' is " + info.kind + ", not a folder");
        }
        if (!info.exists)
        {
            std::error_code ec;
            std::filesystem::create_directories(m_out, ec);
            if (ec)
            {
                throw output_error("output_dir '" + m_out + "': cannot create the folder: " + ec.message());
            }
        }
        if (::faccessat(AT_FDCWD, m_out.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
        {
            const int err = errno;
            throw output_error("output_dir '" + m_out + "': not writable ("
                               + (err == EACCES ? std::string("permission denied") : io::errno_text(err)) + ")");
        }
    }

    void make_state_folder()
    {
        if (::mkdir(m_state.c_str(), 0755) != 0 && errno != EEXIST)
        {
            throw output_error("output_dir '" + m_out + "': cannot write into it: cannot create " + m_state + ": "
                               + io::errno_text(errno));
        }
        struct stat st;
        if (::lstat(m_state.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        {
            throw output_error(m_state + ": is not a folder; this program keeps its result sets there (move it away)");
        }
    }

    void take_lock()
    {
        const std::string path = in_state("lock");
        m_lock_fd = open_lock_file(path, m_out, O_RDWR | O_CREAT);
        if (::flock(m_lock_fd, LOCK_EX | LOCK_NB) != 0)
        {
            const int err = errno;
            if (err == EWOULDBLOCK)
            {
                throw output_error("output_dir '" + m_out + "' is in use by another run (" + lock_holder_text(m_lock_fd)
                                   + "); wait for it to finish or choose another --output-dir");
            }
            m_notes.push_back("note: cannot lock " + path + " (" + io::errno_text(err)
                              + "); make sure no other run writes into '" + m_out + "'");
            return;
        }
        const process_identity& self = this_process();
        const std::string owner = "pid " + std::to_string(self.pid) + " on " + self.host + "\n";
        if (::ftruncate(m_lock_fd, 0) == 0)
        {
            (void)!::pwrite(m_lock_fd, owner.data(), owner.size(), 0);  // diagnostics only
        }
    }

    void check_names()
    {
        for (const auto& name : m_names)
        {
            const std::string path = in_out(name);
            struct stat st;
            if (::lstat(path.c_str(), &st) != 0)
            {
                continue;  // absent: linked at the first commit
            }
            if (S_ISLNK(st.st_mode) && io::link_text(path) == link_text_of(name))
            {
                continue;
            }
            if (S_ISREG(st.st_mode))
            {
                m_legacy.push_back(name);  // written by an earlier version: adopted at commit
                continue;
            }
            throw output_error(path + ": exists and is not a result file of this program ("
                               + (S_ISLNK(st.st_mode) ? "a symbolic link to '" + io::link_text(path) + "'"
                                                      : io::detail::kind_of(st.st_mode))
                               + "); move it away or choose another --output-dir");
        }
        const std::string current = in_state("current");
        struct stat st;
        if (::lstat(current.c_str(), &st) == 0)
        {
            if (!S_ISLNK(st.st_mode))
            {
                throw output_error(current + ": is not a symbolic link; move it away");
            }
            m_had_current = true;
            m_previous = io::link_text(current);
        }
    }

    void remove_leftovers()
    {
        std::error_code ec;
        for (std::filesystem::directory_iterator it(m_state, ec), end; !ec && it != end; it.increment(ec))
        {
            const std::string name = it->path().filename().string();
            if (name == "lock" || name == "current" || name == "previous" || name == m_previous || name == m_kept)
            {
                continue;
            }
            const std::size_t dash = name.find('-');
            const std::string kind = name.substr(0, dash == std::string::npos ? 0 : dash);
            if (kind != "tmp" && kind != "set" && kind != "link" && kind != "legacy" && kind != "name")
            {
                continue;  // not ours
            }
            const auto owner = parse_process_token(name.substr(dash + 1));
            if (!owner)
            {
                continue;
            }
            if (process_is_gone(*owner))
            {
                std::error_code ignored;
                std::filesystem::remove_all(it->path(), ignored);
            }
            else if (owner->host != this_process().host)
            {
                m_notes.push_back("note: " + it->path().string() + " was left by a run on host " + owner->host
                                  + " and is left alone (remove it if no run there writes into this folder)");
            }
        }
    }

    /// After a commit: deletes the sets (set-, legacy-) other than the current one and `kept`
    /// whose run is gone (those of a run on another host are left alone).
    void remove_old_sets(const std::string& kept) noexcept
    {
        std::error_code ec;
        for (std::filesystem::directory_iterator it(m_state, ec), end; !ec && it != end; it.increment(ec))
        {
            const std::string name = it->path().filename().string();
            if (!is_set_name(name) || name == m_set_name || name == kept)
            {
                continue;
            }
            const auto owner = parse_process_token(name.substr(name.find('-') + 1));
            if (owner && (process_is_gone(*owner) || owner->token() == this_process().token()))
            {
                std::error_code ignored;
                std::filesystem::remove_all(it->path(), ignored);
            }
        }
    }

    /// Result files of an earlier version (regular files): become the current set as they
    /// are (hard links, or copies), so that linking the names changes no byte a reader sees.
    void adopt_legacy_files(const std::string& token, const std::string& current)
    {
        const std::string legacy_name = "legacy-" + token;
        const std::string legacy = in_state(legacy_name);
        if (::mkdir(legacy.c_str(), 0755) != 0)
        {
            throw output_error(legacy + ": cannot create: " + io::errno_text(errno));
        }
        for (const auto& name : m_legacy)
        {
            const std::string from = in_out(name);
            const std::string to = (std::filesystem::path(legacy) / name).string();
            if (::link(from.c_str(), to.c_str()) != 0)
            {
                std::error_code ec;
                std::filesystem::copy_file(from, to, ec);
                if (ec)
                {
                    throw output_error(to + ": cannot keep the earlier " + name + ": " + ec.message());
                }
            }
        }
        io::fsync_path(legacy);
        io::replace_with_link(legacy_name, in_state("link-" + token), current);
        io::fsync_path(m_state);
        m_previous = legacy_name;
    }

    /// Makes every result name of the output folder our link (each change atomic; what a
    /// reader sees through it is still the earlier set).
    void link_names(const std::string& token)
    {
        bool changed = false;
        for (const auto& name : m_names)
        {
            const std::string path = in_out(name);
            struct stat st;
            if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && io::link_text(path) == link_text_of(name))
            {
                continue;
            }
            io::replace_with_link(link_text_of(name), in_state("name-" + token), path);
            changed = true;
        }
        if (changed)
        {
            io::fsync_path(m_out);
        }
    }

    std::string m_out;
    std::vector<std::string> m_names;
    std::string m_state;
    std::string m_temp;
    std::string m_set_name;
    std::string m_previous;             // the set `current` named before this run
    std::string m_kept;                 // the set `previous` names (kept for readers)
    std::vector<std::string> m_legacy;  // result names that are regular files
    std::vector<std::string> m_notes;
    bool m_had_current = false;
    bool m_have_temp = false;
    int m_lock_fd = -1;
};
}  // namespace attention_plasticity::run

#endif
