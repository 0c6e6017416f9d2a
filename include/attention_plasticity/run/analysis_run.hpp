#ifndef ATTENTION_PLASTICITY_RUN_ANALYSIS_RUN_HPP
#define ATTENTION_PLASTICITY_RUN_ANALYSIS_RUN_HPP

// One run of the dump analysis, from its configuration to its result set: what ap_analyze and
// the Python module (analyze_dump, `python -m attention_plasticity`) share, so that for the
// same options both analyze the same heads and write the same files, byte for byte:
//   - the plan: the configuration's checks, the layout (dump_layout.hpp), the selection and,
//     with `shard`, the heads of that shard (shard_plan.hpp, docs/method.md §8.4);
//   - the output folder, checked and locked before any work (result_set.hpp);
//   - the run over the heads (head_runner.hpp);
//   - the result set: the CSVs (csv_rows.hpp) and, for a shard, its manifest shard.json
//     (shard_manifest.hpp). A shard writes its set even when none of its heads was analyzed
//     (or it has none), so that ap_merge sees that it finished; an unsharded run without an
//     analyzed head writes nothing and leaves an earlier set as it was.
// The closing report (its lines and exit status) is finish()'s, made by run_report.hpp. The
// front ends add how they show progress and how they read a folder (a folder_loader, a
// folder_probe: the Python module adds qk-sniffer's Parquet).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../io/csv_rows.hpp"
#include "../io/dump_folder.hpp"
#include "../io/examples_table.hpp"
#include "analyze_config.hpp"
#include "dump_layout.hpp"
#include "head_runner.hpp"
#include "output_folder.hpp"
#include "result_set.hpp"
#include "result_set_reader.hpp"
#include "run_report.hpp"
#include "shard_manifest.hpp"
#include "shard_plan.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// The run report's note for a dump without examples.csv (docs/method.md §8.3).
inline constexpr const char* no_examples_note =
    "no examples.csv: each example is taken as its own document (docs/method.md §8.3)";

/// The program a shard's manifest names: ap_analyze's analysis at this version, whichever
/// front end ran it (shards of ap_analyze and of the Python module merge together).
inline std::string analysis_program()
{
    return std::string("ap_analyze ") + attention_plasticity::version;
}

class analysis_run
{
public:
    /// Checks the configuration, reads the dump's layout and plans the heads (the shard's,
    /// with `shard`; `probe`: how the shard plan reads a folder). Throws usage_error or
    /// input_error, before any work.
    explicit analysis_run(analyze_config config, const folder_probe& probe = probe_npy_folder)
        : m_config(std::move(config))
    {
        check_analyze_config(m_config);
        m_scan = scan_dump(m_config.data_root);
        const dump_layout layout = resolve_layout(m_scan, m_config.layout, read_dump_metadata(m_config.data_root),
                                                  read_model_config(m_config.model_config), m_config.model_config,
                                                  m_config.words);
        // §1.1: the documents of the examples and how they were chosen, when the dump says.
        io::examples_table examples;
        if (io::read_examples_csv(m_config.data_root, examples))
        {
            set_examples(std::move(examples),
                         (std::filesystem::path(m_config.data_root) / io::examples_csv).string());
        }
        m_capture = io::read_dump_capture(m_config.data_root);
        plan(layout, probe);
    }

    /// A run over head folders that are not on disk (the Python module's in-memory captures,
    /// profile_model): `folders` lists the (layer, head) folders the loader will be asked for,
    /// by head_folder_path under config.data_root (a name for the messages, never opened); the
    /// layout is the configuration's (every count given), no metadata or model config is read.
    /// No shard (a shard's manifest names a dump on disk). `examples_csv`: the text of the
    /// dump's examples.csv (docs/method.md §1.1; none: each example is its own document);
    /// `capture_json`: the text of a JSON object recorded in run.json's "capture" ("" none).
    /// Throws usage_error, or input_error naming "examples_csv" / "capture_json".
    analysis_run(analyze_config config, dump_scan folders, const std::optional<std::string>& examples_csv = std::nullopt,
                 const std::string& capture_json = "")
        : m_config(std::move(config)), m_scan(std::move(folders))
    {
        check_analyze_config(m_config);
        if (examples_csv)
        {
            set_examples(io::parse_examples_csv(*examples_csv, "examples_csv"), "examples_csv");
        }
        if (!capture_json.empty())
        {
            m_capture = io::capture_object_text(capture_json, "capture_json");
        }
        if (m_config.shard)
        {
            throw usage_error("shard: a run over folders held in memory has no shards");
        }
        if (!m_config.layout.num_layers || !m_config.layout.num_q_heads || !m_config.layout.num_k_heads)
        {
            throw std::invalid_argument("analysis_run: a run over folders held in memory needs every layout count");
        }
        m_scan.data_root = m_config.data_root;
        std::sort(m_scan.query.begin(), m_scan.query.end());
        std::sort(m_scan.key.begin(), m_scan.key.end());
        plan(resolve_layout(m_scan, m_config.layout, layout_counts{}, layout_counts{}, "", m_config.words),
             probe_npy_folder);
    }

private:
    /// The run's examples table: the documents of its examples in every head's options.
    void set_examples(io::examples_table table, const std::string& source)
    {
        m_config.options.documents =
            std::make_shared<const example_documents>(io::documents_of_table(table, source));
        m_examples = std::move(table);
    }

    /// The heads of the run (those of its shard, with `shard`) and its threads.
    void plan(const dump_layout& layout, const folder_probe& probe)
    {
        m_plan = plan_heads(m_scan, layout, m_config.selection);
        if (m_config.shard)
        {
            m_shard = select_shard(m_config.data_root, m_plan.heads, m_config.options.max_tokens_per_head,
                                   *m_config.shard, probe);
            m_plan.heads = m_shard->heads;
        }
        m_threads = std::max<std::size_t>(1, std::min(m_config.worker_threads(), m_plan.heads.size()));
        // Fewer heads than threads: the threads left share each head's work (the same results).
        m_config.options.threads = std::max<std::size_t>(1, m_config.worker_threads() / m_threads);
    }

public:

    /// Checks and locks the output folder (result_set_writer's errors), and that its file
    /// system has room for at least the smallest set this run can write: before any work.
    void open_output()
    {
        refuse_foreign_set(m_config.output_dir);
        m_writer.emplace(m_config.output_dir, file_names());
        m_writer->require_free_space(minimum_set_sizes());
    }

    /// A lower bound on the size of each file of the set: the header lines and, per head,
    /// one metrics row of at least one character per column (a full disk is refused before
    /// the work; a larger set that does not fit fails at its writing, leaving the earlier set
    /// current).
    std::vector<std::uint64_t> minimum_set_sizes() const
    {
        std::vector<std::uint64_t> sizes;
        for (const auto& table : io::result_tables())
        {
            const std::string header = table.header;
            sizes.push_back(header.size() + 1);
        }
        if (!sizes.empty())
        {
            const std::string metrics = io::result_tables().front().header;
            const auto columns = static_cast<std::uint64_t>(std::count(metrics.begin(), metrics.end(), ',') + 1);
            sizes.front() += 2 * columns * m_plan.heads.size();
        }
        if (m_shard)
        {
            sizes.push_back(100 * (m_plan.heads.size() + 1));
        }
        return sizes;
    }

    const analyze_config& config() const { return m_config; }
    /// The heads of the run (of its shard, when sharded), in (layer, q_head) order.
    const head_plan& plan() const { return m_plan; }
    const std::optional<shard_selection>& shard() const { return m_shard; }
    /// The dump's examples.csv (docs/method.md §1.1), when it has one.
    const std::optional<io::examples_table>& examples() const { return m_examples; }
    /// "documents" with an examples table, else "examples" (each example its own document).
    const char* units() const { return m_examples ? "documents" : "examples"; }
    /// The JSON text of the capture's description (metadata.json "capture"), "" without one.
    const std::string& capture() const { return m_capture; }
    /// run.json's members of this run: "units" and, when given, "capture".
    std::string run_json_members() const
    {
        std::string members = ", " + io::json_string("units") + ": " + io::json_string(units());
        if (!m_capture.empty())
        {
            members += ", " + io::json_string("capture") + ": " + m_capture;
        }
        return members;
    }
    std::size_t threads() const { return m_threads; }
    bool writes() const { return m_writer.has_value(); }
    bool has_earlier_set() const { return m_writer && m_writer->has_earlier_set(); }
    /// result_set_writer::unchanged_text of the output folder ("" when the run does not write).
    std::string unchanged_text(bool nothing_to_write) const
    {
        return m_writer ? m_writer->unchanged_text(nothing_to_write) : std::string();
    }
    std::vector<std::string> notes() const { return m_writer ? m_writer->notes() : std::vector<std::string>{}; }

    /// The files of the result set: the CSVs, examples.csv when the dump has one, and
    /// shard.json for a shard.
    std::vector<std::string> file_names() const
    {
        std::vector<std::string> names = io::result_file_names();
        if (m_examples)
        {
            names.emplace_back(io::examples_csv);
        }
        if (m_shard)
        {
            names.emplace_back(shard_manifest_file);
        }
        return names;
    }

    /// Analyzes the heads (head_runner.hpp's run_heads on threads() threads).
    void run(const folder_loader& loader, const head_done_callback& on_done, const std::atomic<bool>* stop = nullptr)
    {
        if (m_has_run)
        {
            throw std::logic_error("analysis_run: a run is analyzed once");
        }
        m_has_run = true;
        const auto start = std::chrono::steady_clock::now();
        run_heads(m_config, m_scan, m_plan, m_threads, loader, on_done, m_state, stop);
        m_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    bool has_run() const { return m_has_run; }
    const run_state& state() const { return m_state; }
    /// Wall time of run(), in seconds.
    double seconds() const { return m_seconds; }

    std::size_t analyzed() const
    {
        const auto& results = m_state.results;
        return static_cast<std::size_t>(
            std::count_if(results.begin(), results.end(), [](const auto& r) { return r.has_value(); }));
    }

    std::size_t failed() const
    {
        const auto& failures = m_state.failures;
        return static_cast<std::size_t>(
            std::count_if(failures.begin(), failures.end(), [](const auto& f) { return f.has_value(); }));
    }

    /// Whether the run has a result set to write: some head analyzed, or a shard.
    bool has_results() const { return m_shard.has_value() || analyzed() > 0; }

    /// Writes the result set into the output folder; when there is none to write, drops the
    /// temporary set (an earlier set stays) and returns false.
    bool commit()
    {
        if (!m_writer)
        {
            throw std::logic_error("analysis_run: the output folder is not open");
        }
        if (!has_results())
        {
            m_writer->abandon();
            return false;
        }
        write(*m_writer);
        return true;
    }

    /// Writes the result set into another folder (a writer of its own); false when there is
    /// none to write.
    bool write_to(const std::string& output_dir) const
    {
        if (!has_results())
        {
            return false;
        }
        refuse_foreign_set(output_dir);
        result_set_writer writer(output_dir, file_names());
        write(writer);
        return true;
    }

    /// refuse_foreign_result_set (output_folder.hpp) for this run's files; a shard's manifest
    /// is this program's own (an unsharded run may follow a shard into its folder).
    void refuse_foreign_set(const std::string& output_dir) const
    {
        std::vector<std::string> own = file_names();
        own.emplace_back(shard_manifest_file);
        if (!m_examples)
        {
            own.emplace_back(io::examples_csv);  // an earlier run's, of a dump that had one
        }
        refuse_foreign_result_set(output_dir, own);
    }

    /// Releases the output folder (its lock and an unwritten temporary set).
    void close() { m_writer.reset(); }

    /// The text of shard.json (a shard that has run).
    std::string manifest_text() const
    {
        if (!m_shard)
        {
            throw std::logic_error("analysis_run: a run without a shard has no manifest");
        }
        std::vector<const io::head_rows*> rows;
        std::vector<std::string> errors;
        for (std::size_t i = 0; i < m_plan.heads.size(); ++i)
        {
            const bool analyzed = i < m_state.results.size() && m_state.results[i];
            const bool failed = i < m_state.failures.size() && m_state.failures[i];
            rows.push_back(analyzed ? &*m_state.results[i] : nullptr);
            errors.push_back(failed ? m_state.failures[i]->message() : std::string());
        }
        return manifest_json(
            make_shard_manifest(analysis_program(), m_config, m_plan, *m_shard, rows, errors, m_seconds));
    }

    /// The first line of a run: the layout, where it comes from, the heads present and to analyze.
    std::string plan_line() const
    {
        const dump_layout& layout = m_plan.layout;
        return plural(layout.num_layers, "layer", "layers") + " x "
               + plural(layout.num_q_heads, "query head", "query heads") + " ("
               + plural(layout.num_k_heads, "key head", "key heads") + "; " + layout.origin + ") in "
               + m_config.data_root + ": " + plural(m_plan.present_heads, "query head", "query heads") + " present, "
               + std::to_string(m_plan.heads.size()) + " to analyze, "
               + std::to_string(m_config.options.num_pairs_per_bucket) + " pairs per cell, "
               + plural(m_threads, "thread", "threads");
    }

    /// "shard I/N: K heads of the run's R (T of U tokens)"; empty when not sharded.
    std::string shard_line() const
    {
        if (!m_shard)
        {
            return "";
        }
        return "shard " + m_config.shard->text() + ": " + plural(m_plan.heads.size(), "head", "heads")
               + " of the run's " + std::to_string(m_shard->run_heads) + " (" + std::to_string(m_shard->shard_tokens)
               + " of " + std::to_string(m_shard->run_tokens) + " tokens)";
    }

    /// The heads of the run as its report counts them (run_report.hpp).
    head_counts counts() const
    {
        head_counts c;
        c.present_heads = m_plan.present_heads;
        c.layout_heads = m_plan.layout_heads;
        c.run_heads = m_shard ? m_shard->run_heads : m_plan.heads.size();
        if (m_shard)
        {
            c.shard = m_config.shard->text();
            c.shard_heads = m_plan.heads.size();
        }
        c.analyzed = analyzed();
        c.failed = failed();
        return c;
    }

    /// "P of the L query heads of the layout present[, S of them selected][; shard I/N: K
    /// heads]: A analyzed, F failed" (S: the heads of the whole run).
    std::string counts_text() const { return run::counts_text(counts()); }

    /// The end of a run that has run: writes its result set (commit; a failed writing is
    /// reported, not thrown) and makes the closing report every front end prints.
    run_report finish()
    {
        run_outcome outcome;
        if (!m_state.thread_note.empty())
        {
            outcome.notes.push_back(m_state.thread_note);
        }
        if (!m_examples)
        {
            outcome.notes.push_back(no_examples_note);
        }
        const std::size_t few = std::count_if(m_state.results.begin(), m_state.results.end(), [](const auto& rows) {
            return rows && rows->undefined_sequence_errors;
        });
        if (few > 0)
        {
            outcome.notes.push_back(
                "warning: " + plural(few, "head has", "heads have")
                + " fewer than 10 documents (n_documents; the examples when the dump has no examples.csv) or "
                  "queries without example ids: "
                  "the sequence-level standard errors and intervals are NaN (docs/method.md §8.3; "
                  "sampling_unit token gives the errors conditional on the keys, for independent synthetic tokens)");
        }
        outcome.counts = counts();
        outcome.has_results = has_results();
        outcome.output_dir = m_config.output_dir;
        outcome.timing = timing_text(m_seconds, m_state.seconds, m_plan.heads.size());
        try
        {
            commit();
        }
        catch (const std::exception& e)
        {
            outcome.write_failed = true;
            outcome.write_error = e.what();
        }
        if (!outcome.has_results || outcome.write_failed)
        {
            outcome.unchanged_text = unchanged_text(!outcome.has_results);
        }
        return make_run_report(outcome);
    }

private:
    void write(result_set_writer& writer) const
    {
        std::vector<io::result_file> files = io::result_files(analyzed_rows(m_state));
        std::string examples;  // outlives the commit: the files hold views
        if (m_examples)
        {
            examples = io::examples_csv_text(*m_examples);
            files.push_back({io::examples_csv, {examples}});
        }
        std::string manifest;
        if (m_shard)
        {
            manifest = manifest_text();
            files.push_back({shard_manifest_file, {manifest}});
        }
        writer.commit(files, run_json_members());
    }

    analyze_config m_config;
    dump_scan m_scan;
    head_plan m_plan;
    std::optional<shard_selection> m_shard;
    std::optional<io::examples_table> m_examples;  // §1.1
    std::string m_capture;                          // run.json "capture"
    std::size_t m_threads = 1;
    std::optional<result_set_writer> m_writer;
    run_state m_state;
    bool m_has_run = false;
    double m_seconds = 0.0;
};
}  // namespace attention_plasticity::run

#endif
