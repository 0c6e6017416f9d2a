#ifndef ATTENTION_PLASTICITY_RUN_MERGE_RUN_HPP
#define ATTENTION_PLASTICITY_RUN_MERGE_RUN_HPP

// One merge of shards from its folders to its result set (docs/method.md §8.4), for ap_merge:
// the output folder checked (output_folder.hpp), the shards read and checked (shard_merge.hpp),
// the writer opened and the free space for the merged files checked (nothing written yet: every
// refusal comes before any file), then the set written and the closing report made
// (finish_merge, run_report.hpp); the lines a front end prints.

#include <cstdint>
#include <string>
#include <vector>

#include "errors.hpp"
#include "output_folder.hpp"
#include "result_set.hpp"
#include "run_report.hpp"
#include "../io/examples_table.hpp"
#include "shard_merge.hpp"

namespace attention_plasticity::run
{
/// The words of ap_merge's refusals of its output folder (refuse_output_folder).
inline output_folder_words merge_output_words()
{
    output_folder_words words;
    words.output = "--output-dir";
    words.input = "the shard folder";
    words.input_noun = "shard";
    words.replacement = "the merged set would replace them as its current set";
    words.advice = "write the merged results into another folder";
    return words;
}

class merge_run
{
public:
    /// Checks the output folder `output_dir` (usage_error: one of the shard folders, inside one,
    /// or holding another program's results), reads and checks the shards (merge_error), opens
    /// the writer and checks the free space for the merged files (the writer's errors). Nothing
    /// is written.
    merge_run(const std::vector<std::string>& folders, const std::string& output_dir)
        : m_output_dir(check_output(folders, output_dir)), m_merge(folders), m_writer(m_output_dir, m_merge.file_names())
    {
        std::vector<std::uint64_t> sizes;  // known exactly: a full disk is refused before writing
        for (const auto& file : m_merge.files())
        {
            std::uint64_t size = 0;
            for (const auto piece : file.pieces)
            {
                size += piece.size();
            }
            sizes.push_back(size);
        }
        m_writer.require_free_space(sizes);
    }

    const shard_merge& merge() const { return m_merge; }

    /// What the front end shows before writing: the writer's notes.
    std::vector<std::string> notes() const { return m_writer.notes(); }

    /// Writes the merged set (when some head was analyzed) and makes the closing report: the
    /// failed heads, the counts, where the results are (finish_merge). Call once.
    run_report finish() { return finish_merge(m_merge, m_writer, m_output_dir); }

private:
    static std::string check_output(const std::vector<std::string>& folders, const std::string& output_dir)
    {
        std::vector<std::string> own = io::result_file_names();
        own.emplace_back(io::examples_csv);  // the dump's examples.csv, carried (docs/method.md §1.1)
        refuse_output_folder<usage_error>(output_dir, folders, own, merge_output_words());
        return output_dir;
    }

    std::string m_output_dir;
    shard_merge m_merge;
    result_set_writer m_writer;
};
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_MERGE_RUN_HPP
