// ap_analyze: the attention plasticity of the heads of a qk dump (docs/method.md §1) -> the
// four CSVs of docs/method.md §3. The front end only: the options are analyze_config.hpp's,
// which heads to analyze dump_layout.hpp's, the reading npy_dump.hpp's, the run over the heads
// head_runner.hpp's (shared with the Python module), the rows csv_rows.hpp's, the writing
// result_set.hpp's, and the analysis is the library's analyze_head.
//
// Order of a run: configuration and the dump's layout (usage errors: exit 2), the output
// folder (checked and locked before any work: exit 2), the heads, then the result set.
// Heads run on `threads` workers. A worker loads one query head (and the key head of its GQA
// group, shared with the other query heads of the group and freed after the last of them),
// analyzes it and keeps only the formatted rows, so memory stays near `threads` heads' data.
//
// With --shard I/N (docs/method.md §8.4) the run analyzes only the heads shard_plan.hpp gives
// shard I, and its result set holds, besides their rows, the manifest shard.json
// (shard_manifest.hpp) that ap_merge needs; a shard writes its set even when none of its
// heads succeeded (or it has none), so that the merge sees it finished.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "analyze_config.hpp"
#include "csv_rows.hpp"
#include "dump_layout.hpp"
#include "head_runner.hpp"
#include "progress.hpp"
#include "result_set.hpp"
#include "shard_manifest.hpp"
#include "shard_plan.hpp"

// From OpenBLAS; declared here because the system <cblas.h> clashes with xtensor-blas.
extern "C" void openblas_set_num_threads(int);

using namespace ap_examples;

int main(int argc, char** argv)
{
    analyze_config config;
    std::optional<dump_scan> scan;
    std::optional<head_plan> plan;
    std::optional<shard_selection> shard;
    try
    {
        const auto parsed = parse_analyze_command_line(argc, argv);
        if (!parsed)
        {
            std::fputs(analyze_help("ap_analyze").c_str(), stdout);
            return 0;
        }
        config = *parsed;
        scan = scan_dump(config.data_root);
        const dump_layout layout = resolve_layout(*scan, config.layout, read_dump_metadata(config.data_root));
        plan = plan_heads(*scan, layout, config.selection);
        if (config.shard)
        {
            shard = select_shard(config.data_root, plan->heads, config.options.max_tokens_per_head, *config.shard);
            plan->heads = shard->heads;
        }
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }

    // The output folder is checked (and locked) before any work.
    std::optional<result_set_writer> writer;
    try
    {
        std::vector<std::string> names = result_file_names();
        if (shard)
        {
            names.emplace_back(shard_manifest_file);
        }
        writer.emplace(config.output_dir, names);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }
    for (const auto& note : writer->notes())
    {
        std::fprintf(stderr, "ap_analyze: %s\n", note.c_str());
    }

    // Parallelism is over heads; a multithreaded BLAS underneath would oversubscribe.
    openblas_set_num_threads(1);

    const std::size_t total = plan->heads.size();
    const std::size_t threads = std::max<std::size_t>(1, std::min(config.worker_threads(), total));
    std::fprintf(stderr, "ap_analyze: %s\n", run_plan_line(config, *plan, threads).c_str());
    if (shard)
    {
        std::fprintf(stderr, "ap_analyze: shard %s: %s of the run's %zu (%llu of %llu tokens)\n",
                     config.shard->text().c_str(), plural(total, "head", "heads").c_str(), shard->run_heads,
                     static_cast<unsigned long long>(shard->shard_tokens),
                     static_cast<unsigned long long>(shard->run_tokens));
    }

    progress_reporter progress(total);
    run_state state;
    run_heads(config, *scan, *plan, threads, load_npy_folder,
              [&](std::size_t, const head_task& task, const head_failure* failure) {
                  if (failure != nullptr)
                  {
                      progress.message(failure_line(task, *failure));
                  }
                  progress.head_done(failure != nullptr);
              },
              state);
    progress.finish();

    const std::size_t failed = progress.failed();
    const std::size_t analyzed = total - failed;
    std::string counts = std::to_string(plan->present_heads) + " of the " + std::to_string(plan->layout_heads)
                         + " query heads of the layout present";
    const std::size_t run_heads = shard ? shard->run_heads : total;
    if (run_heads != plan->present_heads)
    {
        counts += ", " + std::to_string(run_heads) + " of them selected";
    }
    if (shard)
    {
        counts += "; shard " + config.shard->text() + ": " + plural(total, "head", "heads");
    }
    counts += ": " + std::to_string(analyzed) + " analyzed, " + std::to_string(failed) + " failed";
    if (analyzed == 0 && !shard)
    {
        writer->abandon();
        std::fprintf(stderr, "ap_analyze: %s; no head was analyzed, so %s\n", counts.c_str(),
                     writer->has_earlier_set() ? ("the earlier results in " + config.output_dir + " are left as they were").c_str()
                                               : ("nothing was written to " + config.output_dir).c_str());
        return 1;
    }
    std::string manifest_text;
    try
    {
        std::vector<result_file> files = result_files(analyzed_rows(state));
        if (shard)
        {
            std::vector<const head_rows*> head_rows_or_null;
            std::vector<std::string> errors;
            for (std::size_t i = 0; i < total; ++i)
            {
                head_rows_or_null.push_back(state.results[i] ? &*state.results[i] : nullptr);
                errors.push_back(state.failures[i] ? state.failures[i]->file + ": " + state.failures[i]->reason
                                                   : std::string());
            }
            manifest_text = manifest_json(make_shard_manifest(std::string("ap_analyze ") + AP_VERSION, config, *plan,
                                                              *shard, head_rows_or_null, errors, progress.elapsed()));
            files.push_back({shard_manifest_file, {manifest_text}});
        }
        writer->commit(files);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: error: %s; %s\n", e.what(),
                     writer->has_earlier_set() ? ("the earlier results in " + config.output_dir + " are unchanged").c_str()
                                               : ("no results were written to " + config.output_dir).c_str());
        return 1;
    }
    double head_seconds = 0.0;
    for (double s : state.seconds)
    {
        head_seconds += s;
    }
    std::fprintf(stderr, "ap_analyze: %s, in %s (%.3f s per head); results in %s\n", counts.c_str(),
                 format_seconds(progress.elapsed()).c_str(), total ? head_seconds / static_cast<double>(total) : 0.0,
                 config.output_dir.c_str());
    return failed > 0 ? 1 : 0;
}
