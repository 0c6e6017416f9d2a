#ifndef ATTENTION_PLASTICITY_RUN_RUN_REPORT_HPP
#define ATTENTION_PLASTICITY_RUN_RUN_REPORT_HPP

// The closing report of a run: the lines every front end prints at its end (ap_analyze, `python
// -m attention_plasticity`, ap_merge), each after the program's name, and the exit status. Made
// here only, from what the run came to (run_outcome), so that the front ends say the same words
// and end with the same status:
//   - "P of the L query heads of the layout present[, S of them selected][; shard I/N: K heads]:
//     A analyzed, F failed" (counts_text; ap_merge's starts with "N shards; ");
//   - no set to write (no head analyzed, not a shard): "COUNTS; no head was analyzed, so <the
//     output folder as it stays>", status 1;
//   - the set could not be written: "error: WHAT; <the output folder as it stays>", status 1;
//   - written: "COUNTS[, in T (X s per head)]; results in DIR", status 1 when a head failed, else 0.
// analysis_run::finish and finish_merge (shard_merge.hpp) write the set and make the report.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace attention_plasticity::run
{
/// "1 head", "2 heads".
inline std::string plural(std::uint64_t n, const char* one, const char* many)
{
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

/// A duration as the progress line and the report give it: "12.3 s", "4m05s", "2h07m".
inline std::string format_seconds(double s)
{
    char buf[32];
    if (s < 60.0)
    {
        std::snprintf(buf, sizeof(buf), "%.1f s", s);
    }
    else if (s < 3600.0)
    {
        std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s / 60.0), static_cast<int>(s) % 60);
    }
    else
    {
        std::snprintf(buf, sizeof(buf), "%dh%02dm", static_cast<int>(s / 3600.0), (static_cast<int>(s) / 60) % 60);
    }
    return buf;
}

/// The heads of a run, as its report counts them.
struct head_counts
{
    std::uint64_t present_heads = 0;  // query heads of the layout present in the dump
    std::uint64_t layout_heads = 0;   // num_layers x num_q_heads
    std::uint64_t run_heads = 0;      // heads of the whole run (every shard): the selection
    std::uint64_t merged_shards = 0;  // ap_merge: the shards merged; 0 for a run of the analysis
    std::string shard;                // "I/N" for a run of one shard, else ""
    std::uint64_t shard_heads = 0;    // the heads of that shard
    std::uint64_t analyzed = 0;
    std::uint64_t failed = 0;
};

/// "[N shards; ]P of the L query heads of the layout present[, S of them selected][; shard I/N:
/// K heads]: A analyzed, F failed".
inline std::string counts_text(const head_counts& c)
{
    std::string counts;
    if (c.merged_shards > 0)
    {
        counts = plural(c.merged_shards, "shard", "shards") + "; ";
    }
    counts += std::to_string(c.present_heads) + " of the " + std::to_string(c.layout_heads)
              + " query heads of the layout present";
    if (c.run_heads != c.present_heads)
    {
        counts += ", " + std::to_string(c.run_heads) + " of them selected";
    }
    if (!c.shard.empty())
    {
        counts += "; shard " + c.shard + ": " + plural(c.shard_heads, "head", "heads");
    }
    return counts + ": " + std::to_string(c.analyzed) + " analyzed, " + std::to_string(c.failed) + " failed";
}

/// What a run came to, once its heads are analyzed (or merged) and its set written or not.
struct run_outcome
{
    std::vector<std::string> notes;  // lines before the counts (failures, a thread note)
    head_counts counts;
    bool has_results = false;        // there was a set to write (a head analyzed, or a shard)
    bool write_failed = false;       // its writing failed (write_error says why)
    std::string write_error;
    std::string unchanged_text;      // result_set_writer::unchanged_text(!has_results) when not written
    std::string timing;              // ", in T (X s per head)" or "" (appended to the counts)
    std::string output_dir;
};

/// The closing report: the lines a front end prints (each after "PROGRAM: ") and its exit status.
struct run_report
{
    std::vector<std::string> lines;
    int exit_status = 0;
};

/// The report of `outcome` (the formats at the top of this header).
inline run_report make_run_report(const run_outcome& outcome)
{
    run_report report{outcome.notes, 0};
    const std::string counts = counts_text(outcome.counts);
    if (!outcome.has_results)
    {
        report.lines.push_back(counts + "; no head was analyzed, so " + outcome.unchanged_text);
        report.exit_status = 1;
    }
    else if (outcome.write_failed)
    {
        report.lines.push_back("error: " + outcome.write_error + "; " + outcome.unchanged_text);
        report.exit_status = 1;
    }
    else
    {
        report.lines.push_back(counts + outcome.timing + "; results in " + outcome.output_dir);
        report.exit_status = outcome.counts.failed > 0 ? 1 : 0;
    }
    return report;
}

/// ", in T (X s per head)": the wall time of a run and its mean time per head (`head_seconds`:
/// each head's analysis time, over `heads` heads).
inline std::string timing_text(double wall_seconds, const std::vector<double>& head_seconds, std::size_t heads)
{
    double sum = 0.0;
    for (double s : head_seconds)
    {
        sum += s;
    }
    char per_head[48];
    std::snprintf(per_head, sizeof(per_head), "%.3f", heads ? sum / static_cast<double>(heads) : 0.0);
    return ", in " + format_seconds(wall_seconds) + " (" + per_head + " s per head)";
}
}  // namespace attention_plasticity::run

#endif
