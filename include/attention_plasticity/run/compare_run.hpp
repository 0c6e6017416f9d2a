#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_RUN_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_RUN_HPP

// One comparison from its options to its result set (docs/method.md §8.6), for ap_compare and
// the Python package's compare_runs alike: the output folder checked, the sets compared, the
// writer opened (nothing written yet: every refusal comes before any file), then the files
// committed as one set; the lines a front end prints.

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "compare_config.hpp"
#include "compare_result_sets.hpp"
#include "result_set.hpp"

namespace attention_plasticity::run
{
class compare_run
{
public:
    /// Checks the output folder (when given), compares the sets and opens the writer. Throws
    /// compare_error / usage_error (nothing written) or the writer's errors. `given`: the sets
    /// the caller loads (compare_result_sets; their options.folders entries only label them, so
    /// the output folder is checked against the other sets' folders).
    compare_run(const compare_options& options, std::optional<std::string> output_dir,
                std::vector<set_loader> given = {})
        : m_options(options), m_output_dir(std::move(output_dir))
    {
        if (m_output_dir)
        {
            compare_options on_disk = m_options;
            on_disk.folders.clear();
            for (std::size_t i = 0; i < m_options.folders.size(); ++i)
            {
                if (!(i < given.size() && given[i]))
                {
                    on_disk.folders.push_back(m_options.folders[i]);
                }
            }
            check_output_folder(on_disk, *m_output_dir);
        }
        m_result = compare_result_sets(m_options, given);
        if (m_output_dir)
        {
            m_writer.emplace(*m_output_dir, m_result.names);
        }
    }

    const compare_result& result() const { return m_result; }

    /// What the front end shows before writing: the writer's notes, then the comparison's.
    std::vector<std::string> notes() const
    {
        std::vector<std::string> notes = m_writer ? m_writer->notes() : std::vector<std::string>{};
        notes.insert(notes.end(), m_result.notes.begin(), m_result.notes.end());
        return notes;
    }

    /// Writes the files as one set (nothing without an output folder); throws when they cannot be.
    void commit()
    {
        if (m_writer)
        {
            m_writer->commit(compare_files(m_result));
        }
    }

    /// After a failed commit: what is left of the output folder (result_set_writer's words).
    std::string unchanged_text() const { return m_writer ? m_writer->unchanged_text(false) : std::string(); }

    /// The closing line: sets, heads, design, changes and where the results are.
    std::string report_line() const
    {
        char alpha[32];
        std::snprintf(alpha, sizeof(alpha), "%g", m_options.alpha);
        return std::to_string(m_options.folders.size()) + " sets, " + std::to_string(m_result.compared_heads)
               + " heads compared, design " + design_name(m_result.design) + "; "
               + std::to_string(m_result.changed_heads) + " changed heads (false discovery rate <= " + alpha
               + " over the list, docs/method.md §8.6); results in "
               + m_output_dir.value_or("");
    }

private:
    compare_options m_options;
    std::optional<std::string> m_output_dir;
    compare_result m_result;
    std::optional<result_set_writer> m_writer;
};
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_RUN_HPP
