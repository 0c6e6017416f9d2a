// ap_compare: two or more result sets (ap_analyze's output folders, in order: checkpoints or
// variants) compared head by head with significance (docs/method.md §8.6). The options are
// compare_config.hpp's, the run (check, compare, write) compare_run.hpp's, both also behind
// attention_plasticity.compare_runs; the writing is result_set.hpp's (one set: a reader sees the
// whole earlier set or the whole new one). Here: parse, run, report.
//
// Exit status: 0 compared and written, 1 the results could not be written, 2 a usage error or
// sets that cannot be compared (nothing written).

#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/compare_config.hpp>
#include <attention_plasticity/run/compare_run.hpp>
#include <attention_plasticity/run/config.hpp>

using namespace attention_plasticity::run;

int main(int argc, char** argv)
{
    if (asks_version(argc, argv))
    {
        std::puts(version_line("ap_compare").c_str());
        return 0;
    }
    compare_config config;
    std::optional<compare_run> run;
    try
    {
        if (!parse_command_line(argc, argv, compare_option_table(), config, false, &config.options.folders))
        {
            std::fputs(compare_help().c_str(), stdout);
            return 0;
        }
        if (config.output_dir.empty())
        {
            throw usage_error("--output-dir DIR is required (where the comparison goes)");
        }
        if (config.options.folders.size() < 2)
        {
            throw usage_error("needs at least 2 result sets (ap_compare --output-dir DIR SET_A SET_B ...; see --help)");
        }
        run.emplace(config.options, config.output_dir);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_compare: %s\n", e.what());
        return 2;
    }
    for (const auto& note : run->notes())
    {
        std::fprintf(stderr, "ap_compare: %s\n", note.c_str());
    }
    try
    {
        run->commit();
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_compare: error: %s; %s\n", e.what(), run->unchanged_text().c_str());
        return 1;
    }
    std::fprintf(stderr, "ap_compare: %s\n", run->report_line().c_str());
    return 0;
}
