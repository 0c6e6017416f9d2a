// Unit tests of the closing report of a run (run/run_report.hpp): the counts line of
// ap_analyze, of a shard's run and of ap_merge, and the lines and exit status of each way a run
// ends. The expected texts are written out by hand, as the messages the front ends have printed
// (tests/e2e/test_hostile_matrix.py and tests/python/test_bindings_dump.py pin some of them too).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <attention_plasticity/run/run_report.hpp>

using namespace attention_plasticity::run;

namespace
{
head_counts eight_heads(std::uint64_t analyzed, std::uint64_t failed)
{
    head_counts c;
    c.present_heads = 8;
    c.layout_heads = 8;
    c.run_heads = 8;
    c.analyzed = analyzed;
    c.failed = failed;
    return c;
}
}  // namespace

TEST_CASE("counts_text: a run, a selection, a shard, a merge", "[run_report]")
{
    CHECK(counts_text(eight_heads(8, 0)) == "8 of the 8 query heads of the layout present: 8 analyzed, 0 failed");

    head_counts selected = eight_heads(3, 0);
    selected.run_heads = 3;
    CHECK(counts_text(selected) == "8 of the 8 query heads of the layout present, 3 of them selected: 3 analyzed, 0 failed");

    head_counts shard = eight_heads(1, 0);
    shard.layout_heads = 72;
    shard.shard = "2/4";
    shard.shard_heads = 1;
    CHECK(counts_text(shard) == "8 of the 72 query heads of the layout present; shard 2/4: 1 head: 1 analyzed, 0 failed");
    shard.shard_heads = 2;
    shard.analyzed = 0;
    shard.failed = 2;
    CHECK(counts_text(shard) == "8 of the 72 query heads of the layout present; shard 2/4: 2 heads: 0 analyzed, 2 failed");

    head_counts merged = eight_heads(11, 1);
    merged.present_heads = 12;
    merged.layout_heads = 12;
    merged.run_heads = 12;
    merged.merged_shards = 3;
    CHECK(counts_text(merged) == "3 shards; 12 of the 12 query heads of the layout present: 11 analyzed, 1 failed");
    merged.merged_shards = 1;
    CHECK(counts_text(merged) == "1 shard; 12 of the 12 query heads of the layout present: 11 analyzed, 1 failed");
}

TEST_CASE("make_run_report: the lines and exit status of each end of a run", "[run_report]")
{
    run_outcome outcome;
    outcome.counts = eight_heads(8, 0);
    outcome.has_results = true;
    outcome.output_dir = "out";
    outcome.timing = ", in 1.5 s (0.188 s per head)";

    SECTION("written, every head analyzed: 0")
    {
        const run_report r = make_run_report(outcome);
        CHECK(r.lines == std::vector<std::string>{"8 of the 8 query heads of the layout present: 8 analyzed, 0 failed, "
                                                  "in 1.5 s (0.188 s per head); results in out"});
        CHECK(r.exit_status == 0);
    }
    SECTION("written, a head failed: 1, the notes first")
    {
        outcome.counts = eight_heads(7, 1);
        outcome.notes = {"error: layer 0 q_head 3: x.npy: bad (in shard folder 's1')"};
        outcome.timing.clear();
        const run_report r = make_run_report(outcome);
        CHECK(r.lines == std::vector<std::string>{
                             "error: layer 0 q_head 3: x.npy: bad (in shard folder 's1')",
                             "8 of the 8 query heads of the layout present: 7 analyzed, 1 failed; results in out"});
        CHECK(r.exit_status == 1);
    }
    SECTION("nothing to write: 1, the folder as it stays")
    {
        outcome.counts = eight_heads(0, 8);
        outcome.has_results = false;
        outcome.unchanged_text = "the earlier results in out are left as they were";
        const run_report r = make_run_report(outcome);
        CHECK(r.lines == std::vector<std::string>{"8 of the 8 query heads of the layout present: 0 analyzed, 8 failed; no "
                                                  "head was analyzed, so the earlier results in out are left as they were"});
        CHECK(r.exit_status == 1);
    }
    SECTION("the writing failed: 1, the error and the folder as it stays")
    {
        outcome.write_failed = true;
        outcome.write_error = "out: No space left on device";
        outcome.unchanged_text = "no results were written to out";
        const run_report r = make_run_report(outcome);
        CHECK(r.lines
              == std::vector<std::string>{"error: out: No space left on device; no results were written to out"});
        CHECK(r.exit_status == 1);
    }
}

TEST_CASE("format_seconds and timing_text: seconds, minutes, hours and the mean per head", "[run_report]")
{
    CHECK(format_seconds(0.04) == "0.0 s");
    CHECK(format_seconds(59.94) == "59.9 s");
    CHECK(format_seconds(61.0) == "1m01s");
    CHECK(format_seconds(3599.0) == "59m59s");
    CHECK(format_seconds(3600.0 + 7 * 60 + 5) == "1h07m");
    CHECK(timing_text(2.26, {0.5, 0.25, 0.0}, 3) == ", in 2.3 s (0.250 s per head)");
    CHECK(timing_text(0.0, {}, 0) == ", in 0.0 s (0.000 s per head)");
}
