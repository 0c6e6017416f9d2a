// ap_analyze: the attention plasticity of the heads of a qk dump (docs/method.md §1) -> the
// CSVs of docs/method.md §3 (and §8.1). The front end only: the options are analyze_config.hpp's,
// the run from its configuration to its result set analysis_run.hpp's (shared with the Python
// module: which heads, of which shard, the run over them, the files written), the reading
// npy_dump.hpp's, and the analysis is the library's analyze_head.
//
// Order of a run: configuration and the dump's layout (usage errors: exit 2), the output
// folder (checked and locked before any work: exit 2), the heads, then the result set.
// Heads run on `threads` workers. A worker loads one query head (and the key head of its GQA
// group, shared with the other query heads of the group and freed after the last of them),
// analyzes it and keeps only the formatted rows, so memory stays near `threads` heads' data.
// With fewer heads than threads, each head's analysis shares its work among the threads left
// (head_options::threads; the results are the same). The OpenBLAS kernels in use are
// chosen by the library's kernel policy and reported (attention_plasticity/blas_policy.hpp,
// docs/method.md §7.7), the same in every front end.
//
// With --shard I/N (docs/method.md §8.4) the run analyzes only the heads shard_plan.hpp gives
// shard I, and its result set holds, besides their rows, the manifest shard.json
// (shard_manifest.hpp) that ap_merge needs; a shard writes its set even when none of its
// heads succeeded (or it has none), so that the merge sees it finished.

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/run/analysis_run.hpp>
#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/head_runner.hpp>
#include <attention_plasticity/run/progress.hpp>
#include <attention_plasticity/run/run_report.hpp>

using namespace attention_plasticity::run;

int main(int argc, char** argv)
{
    if (asks_version(argc, argv))
    {
        std::puts(version_line("ap_analyze").c_str());
        return 0;
    }
    std::optional<analysis_run> run;
    try
    {
        const auto parsed = parse_analyze_command_line(argc, argv);
        if (!parsed)
        {
            std::fputs(analyze_help("ap_analyze").c_str(), stdout);
            return 0;
        }
        attention_plasticity::select_blas_kernels();  // before any BLAS call; OpenBLAS on one thread
        run.emplace(*parsed);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }
    // The output folder is checked (and locked) before any work.
    try
    {
        run->open_output();
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }
    for (const auto& note : run->notes())
    {
        std::fprintf(stderr, "ap_analyze: %s\n", note.c_str());
    }

    std::fprintf(stderr, "ap_analyze: %s\n", run->plan_line().c_str());
    if (run->config().options.threads > 1)
    {
        std::fprintf(stderr, "ap_analyze: each head on %zu threads\n", run->config().options.threads);
    }
    std::fprintf(stderr, "%s\n", attention_plasticity::blas_report("ap_analyze").c_str());
    if (run->shard())
    {
        std::fprintf(stderr, "ap_analyze: %s\n", run->shard_line().c_str());
    }

    const std::size_t total = run->plan().heads.size();
    progress_reporter progress(total);
    run->run(load_npy_folder, [&](std::size_t, const head_task& task, const head_failure* failure) {
        if (failure != nullptr)
        {
            progress.message(failure_line(task, *failure));
        }
        progress.head_done(failure != nullptr);
    });
    progress.finish();

    // The set written (or not) and the closing report (run_report.hpp), as every front end ends.
    const run_report report = run->finish();
    for (const auto& line : report.lines)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", line.c_str());
    }
    return report.exit_status;
}
