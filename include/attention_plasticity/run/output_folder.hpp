#ifndef ATTENTION_PLASTICITY_RUN_OUTPUT_FOLDER_HPP
#define ATTENTION_PLASTICITY_RUN_OUTPUT_FOLDER_HPP

// The refusal of an output folder, before any work, for every program that writes a result set
// (ap_analyze and the Python package's analysis, ap_merge, ap_compare and compare_runs): the
// output folder must not be one of the folders the program reads nor lie inside one (by the
// folders themselves, io/folder_overlap.hpp: writing there would replace or strand what is
// read), must not be nor lie inside the state folder of a result folder (OUT/.ap_results, its
// sets set-<run>, its links current and previous: result_state_owner; a set written there would
// change a set that is never changed, and every later run into OUT would be refused), and must
// not hold the results of another program (foreign_result_files, result_set_reader.hpp: the new
// set would replace theirs as the folder's current set and leave their links dangling). One
// check; each program gives the words of its messages (output_folder_words) and the error it
// throws.

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "../io/folder_overlap.hpp"
#include "errors.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run
{
/// How a program names things in the refusals of refuse_output_folder:
///   "<output> '<dir>' is inside <input> '<folder>'; <advice> (outside every <input_noun>)"
///   "<output> '<dir>' holds the results of another program (<files>): <replacement> and leave
///    their links dangling; <advice>"
struct output_folder_words
{
    const char* output = "output_dir";    // the output folder, as the user named it
    const char* input = "the input folder";  // one folder the program reads
    const char* input_noun = "input folder";  // what every folder it reads is
    const char* replacement = "the new set would replace them as the current set";
    const char* advice = "write into another folder";
};

/// The result folder whose state folder (result_state_folder, ".ap_results") `output_dir` is or
/// lies inside, or "" when none: the folder's path with the symbolic links of its existing part
/// resolved (so OUT/.ap_results/current, a link to a set, and a link elsewhere that leads into a
/// state folder are seen through), then the folder above the first part named ".ap_results". The
/// name is the result layout's own (result_set.hpp): a folder of that name is refused as an output
/// folder even when its parent holds no result set yet. The other direction is fine: an output
/// folder may hold result folders as subfolders (the Slurm layout of examples/slurm).
inline std::string result_state_owner(const std::string& output_dir)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path absolute = fs::absolute(fs::path(output_dir), ec);
    if (ec)
    {
        return {};
    }
    const fs::path resolved = fs::weakly_canonical(absolute, ec);
    const fs::path path = ec ? absolute.lexically_normal() : resolved;
    fs::path owner;
    for (const fs::path& part : path)
    {
        if (part == result_state_folder)
        {
            return owner.empty() ? std::string("/") : owner.string();
        }
        owner /= part;
    }
    return {};
}

/// Throws Error (made from the message) when `output_dir` is or lies inside the state folder of
/// a result folder (result_state_owner), naming that folder:
///   "<output> '<dir>' is inside the state folder of the result folder '<owner>' (.ap_results: ...);
///    <advice> (outside every .ap_results)"
/// The first check of refuse_output_folder; alone for writers of other folders (a capture's dump).
template <class Error>
void refuse_result_state_folder(const std::string& output_dir, const output_folder_words& words)
{
    const std::string owner = result_state_owner(output_dir);
    if (!owner.empty())
    {
        throw Error(std::string(words.output) + " '" + output_dir + "' is inside the state folder of the result folder '"
                    + owner + "' (" + result_state_folder + ": its sets and the links of its current set, which no "
                    + "run may write into); " + words.advice + " (outside every " + result_state_folder + ")");
    }
}

/// Throws Error (made from the message) when the output folder `output_dir` is or lies inside
/// the state folder of a result folder (result_state_owner, naming that folder), is one of
/// `inputs` or lies inside one, or when its current set holds files other than `own_files` (the results
/// of another program). A folder holding the inputs as subfolders is fine (the Slurm layout of
/// examples/slurm: OUT/shard-I merged into OUT).
template <class Error>
void refuse_output_folder(const std::string& output_dir, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& own_files, const output_folder_words& words)
{
    refuse_result_state_folder<Error>(output_dir, words);
    if (!inputs.empty())
    {
        const io::folder_overlap overlap = io::find_folder_overlap(output_dir, inputs);
        if (io::output_endangers_input(overlap.relation))
        {
            throw Error(std::string(words.output) + " '" + output_dir + "' " + io::relation_words(overlap.relation)
                        + " " + words.input + " '" + inputs[overlap.input] + "'; " + words.advice
                        + " (outside every " + words.input_noun + ")");
        }
    }
    const std::vector<std::string> foreign = foreign_result_files(output_dir, own_files);
    if (!foreign.empty())
    {
        throw Error(std::string(words.output) + " '" + output_dir + "' holds the results of another program ("
                    + name_list(foreign) + "): " + words.replacement + " and leave their links dangling; "
                    + words.advice);
    }
}

/// Throws output_error when `output_dir`'s current set holds files other than `names` (the
/// refusal of an analysis, whose input is a dump, not a result folder): a set of `names` written
/// there would replace another program's set as the current one, leave its links dangling, and
/// the next run would delete it.
inline void refuse_foreign_result_set(const std::string& output_dir, const std::vector<std::string>& names)
{
    refuse_output_folder<output_error>(output_dir, {}, names, output_folder_words{});
}
}  // namespace attention_plasticity::run

#endif
