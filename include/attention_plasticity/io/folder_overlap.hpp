#ifndef ATTENTION_PLASTICITY_IO_FOLDER_OVERLAP_HPP
#define ATTENTION_PLASTICITY_IO_FOLDER_OVERLAP_HPP

// Whether an output folder is one of the input folders, lies inside one, or holds one, by
// the folders themselves (device and inode), not by their paths' text: a symbolic link, "..",
// a bind mount or a second mount of an input are seen through. Used by the front ends that
// read result folders and write one (ap_merge, ap_compare, compare_runs), so that writing the
// output never replaces or strands what they read. Linux (O_PATH).

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unique_fd.hpp"

namespace attention_plasticity::io
{
/// How an output folder lies to an input folder.
enum class folder_relation
{
    apart,     // neither holds the other
    same,      // the same folder
    inside,    // the output lies inside the input
    contains,  // the input lies inside the output
};

/// The first input folder the output overlaps, and how.
struct folder_overlap
{
    folder_relation relation = folder_relation::apart;
    std::size_t input = 0;  // index into the inputs
};

namespace detail
{
    /// (device, inode) of the folder open as `fd` and of each of its parents up to the root,
    /// the folder first. Stops (with what it has) when a parent cannot be opened.
    inline std::vector<std::pair<dev_t, ino_t>> folder_chain(unique_fd fd)
    {
        std::vector<std::pair<dev_t, ino_t>> chain;
        struct stat st;
        while (fd && ::fstat(fd.get(), &st) == 0 && chain.size() < 4096)
        {
            const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
            if (!chain.empty() && chain.back() == id)
            {
                break;  // the root is its own parent
            }
            chain.push_back(id);
            fd.reset(::openat(fd.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
        }
        return chain;
    }

    inline unique_fd open_folder_path(const std::string& path)
    {
        return unique_fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
}  // namespace detail

/// How `output` lies to the first of `inputs` it overlaps. An output that does not exist yet
/// is judged by the nearest folder above it that does (it would be created there); an input
/// that cannot be opened as a folder is apart (its reading reports it).
inline folder_overlap find_folder_overlap(const std::string& output, const std::vector<std::string>& inputs)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path existing = fs::absolute(output, ec).lexically_normal();
    bool output_exists = true;
    unique_fd out = detail::open_folder_path(existing.string());
    while (!out && existing.has_relative_path())
    {
        output_exists = false;
        existing = existing.parent_path();
        out = detail::open_folder_path(existing.string());
    }
    if (!out)
    {
        return {};
    }
    const auto out_chain = detail::folder_chain(std::move(out));
    if (out_chain.empty())
    {
        return {};
    }
    for (std::size_t i = 0; i < inputs.size(); ++i)
    {
        const auto in_chain = detail::folder_chain(detail::open_folder_path(inputs[i]));
        if (in_chain.empty())
        {
            continue;
        }
        if (output_exists && out_chain.front() == in_chain.front())
        {
            return {folder_relation::same, i};
        }
        for (const auto& id : out_chain)
        {
            if (id == in_chain.front())
            {
                return {folder_relation::inside, i};
            }
        }
        if (output_exists)
        {
            for (const auto& id : in_chain)
            {
                if (id == out_chain.front())
                {
                    return {folder_relation::contains, i};
                }
            }
        }
    }
    return {};
}

/// Whether writing a result set into the output folder would replace or strand an input: the
/// output is the input or lies inside it. An output folder that holds inputs as subfolders (the
/// Slurm layout of examples/slurm: OUT/shard-I, merged into OUT) is not: a writer touches only its
/// own file names and its state folder (run/result_set.hpp), never another folder in it.
inline bool output_endangers_input(folder_relation relation)
{
    return relation == folder_relation::same || relation == folder_relation::inside;
}

/// "is", "is inside", "holds": the output folder's relation in words ("" when apart).
inline const char* relation_words(folder_relation relation)
{
    switch (relation)
    {
        case folder_relation::same: return "is";
        case folder_relation::inside: return "is inside";
        case folder_relation::contains: return "holds";
        case folder_relation::apart: break;
    }
    return "";
}
}  // namespace attention_plasticity::io

#endif
