// ap_merge: the output folders of `ap_analyze --shard I/N` (I = 0..N-1) -> the CSVs of an
// unsharded run of the same options, byte for byte (docs/method.md §8.4). Here: the command
// line, then run/merge_run.hpp (the output folder checked, the shards merged, shard_merge.hpp,
// the set written, result_set.hpp: a reader sees the whole earlier set or the whole new one) and
// its report printed.
//
// Exit status as ap_analyze's: 0 every head analyzed, 1 some head failed in its shard (it is
// reported, its rows are absent as in an unsharded run) or the set could not be written, 2 a
// usage error or shards that cannot be merged (nothing written).

#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/config.hpp>
#include <attention_plasticity/run/errors.hpp>
#include <attention_plasticity/run/merge_run.hpp>
#include <attention_plasticity/run/run_report.hpp>

namespace
{
using namespace attention_plasticity::run;

struct merge_config
{
    std::string output_dir;
};

const option_table<merge_config>& merge_options()
{
    static const option_table<merge_config> table = {
        {"output_dir", "DIR", "where the merged CSVs are written (created if needed; required)",
         set_option::path(&merge_config::output_dir)},
    };
    return table;
}

std::string merge_help()
{
    return "usage: ap_merge --output-dir DIR SHARD_DIR...\n\n"
           "Merges the output folders of 'ap_analyze --shard I/N' (every I from 0 to N-1, once) into\n"
           "the CSVs an unsharded run of the same options writes, byte for byte, as one set in DIR.\n"
           "Refuses, naming the folder and the problem: a missing or duplicated shard, shards of\n"
           "another N, of other options, of another dump or program, a shard whose run did not\n"
           "finish or is still running, missing, unknown or different files.\n\n"
           + options_help(merge_options(), false)
           + "\nExit status: 0 every head analyzed, 1 some head failed in its shard (reported as\n"
             "'error: layer L q_head H: FILE: reason'; its rows are left out, as in an unsharded run)\n"
             "or the results could not be written, 2 a usage error or shards that cannot be merged\n"
             "(nothing written).\n";
}

}  // namespace

int main(int argc, char** argv)
{
    if (asks_version(argc, argv))
    {
        std::puts(version_line("ap_merge").c_str());
        return 0;
    }
    merge_config config;
    std::vector<std::string> folders;
    try
    {
        if (!parse_command_line(argc, argv, merge_options(), config, false, &folders))
        {
            std::fputs(merge_help().c_str(), stdout);
            return 0;
        }
        if (config.output_dir.empty())
        {
            throw usage_error("--output-dir DIR is required (where the merged CSVs go)");
        }
        if (folders.empty())
        {
            throw usage_error("no shard folder given (ap_merge --output-dir DIR SHARD_DIR...; see --help)");
        }
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_merge: %s\n", e.what());
        return 2;
    }

    std::optional<merge_run> run;
    try
    {
        run.emplace(folders, config.output_dir);  // the output folder, the shards, the writer: nothing written
    }
    catch (const std::bad_alloc&)
    {
        std::fprintf(stderr, "ap_merge: out of memory while reading the shards\n");
        return 2;
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_merge: %s\n", e.what());
        return 2;
    }
    for (const auto& note : run->notes())
    {
        std::fprintf(stderr, "ap_merge: %s\n", note.c_str());
    }

    // The merged set written (or not) and the closing report (run_report.hpp), as ap_analyze's.
    const run_report report = run->finish();
    for (const auto& line : report.lines)
    {
        std::fprintf(stderr, "ap_merge: %s\n", line.c_str());
    }
    return report.exit_status;
}
