// Unit tests of the merge of shards (include/attention_plasticity/run/shard_merge.hpp;
// docs/method.md §8.4): three shard folders of a run of five heads (two written as result
// sets with the library's writer, one as a plain folder of files, as a copy of a shard is),
// each with a manifest written by manifest_json and small hand-written tables; the merged
// tables are checked against their expected bytes written out by hand (each file's header line,
// then every analyzed head's rows in (layer, q_head) order, whatever the order the folders are
// given in). Then each refusal of §8.4, with its message naming the shard folder; and the run
// facade of ap_merge (run/merge_run.hpp): its output folder refused first, in ap_merge's words.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <attention_plasticity/run/merge_run.hpp>
#include <attention_plasticity/run/shard_merge.hpp>

#include "run_files.hpp"

using namespace attention_plasticity::run;
namespace io = attention_plasticity::io;
using namespace ap_test;
using strings = std::vector<std::string>;

namespace
{
namespace fs = std::filesystem;

/// The six tables of docs/method.md §3.2-§3.7, in that order.
const strings table_names = {"head_metrics.csv",           "head_bucket_plasticity.csv",
                             "head_profile.csv",           "head_component_weights.csv",
                             "head_distance_plasticity.csv", "head_sequence_influence.csv"};
const char* const table_list = "[head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv, "
                               "head_component_weights.csv, head_distance_plasticity.csv, "
                               "head_sequence_influence.csv]";

/// A head of the test run: its shard, and its rows in each table (or its error).
struct test_head
{
    std::size_t shard;
    std::size_t layer;
    std::size_t q_head;
    std::size_t k_head;
    strings rows;  // per table, whole lines
    std::string error;
};

// Layers 0-1 of 3 query heads (the key head is made up: the merge moves it as bytes), head (0, 2) not in the
// dump; head (1, 2) failed in shard 1. Row counts differ per head and table (0 to 2).
const std::vector<test_head> run_heads = {
    {1, 0, 0, 0, {"0,0,0,m00\n", "0,0,0,b1\n0,0,0,b2\n", "0,0,0,p\n", "", "0,0,0,d\n", "0,0,0,i\n"}, ""},
    {0, 0, 1, 0, {"0,1,0,m01\n", "0,1,0,b\n", "", "0,1,0,c1\n0,1,0,c2\n", "0,1,0,d\n", ""}, ""},
    {2, 1, 0, 1, {"1,0,1,m10\n", "", "1,0,1,p1\n1,0,1,p2\n", "1,0,1,c\n", "", "1,0,1,i1\n1,0,1,i2\n"}, ""},
    {0, 1, 1, 1, {"1,1,1,m11\n", "1,1,1,b\n", "1,1,1,p\n", "1,1,1,c\n", "1,1,1,d1\n1,1,1,d2\n", ""}, ""},
    {1, 1, 2, 1, {}, "l01h02q/vector.npy: file not found"},
};
const strings headers = {"layer,q_head,k_head,m\n", "layer,q_head,k_head,b\n", "layer,q_head,k_head,p\n",
                         "layer,q_head,k_head,c\n", "layer,q_head,k_head,d\n", "layer,q_head,k_head,i\n"};

// What an unsharded run writes: each header, then the rows of heads (0,0), (0,1), (1,0), (1,1).
const strings merged_tables = {
    "layer,q_head,k_head,m\n0,0,0,m00\n0,1,0,m01\n1,0,1,m10\n1,1,1,m11\n",
    "layer,q_head,k_head,b\n0,0,0,b1\n0,0,0,b2\n0,1,0,b\n1,1,1,b\n",
    "layer,q_head,k_head,p\n0,0,0,p\n1,0,1,p1\n1,0,1,p2\n1,1,1,p\n",
    "layer,q_head,k_head,c\n0,1,0,c1\n0,1,0,c2\n1,0,1,c\n1,1,1,c\n",
    "layer,q_head,k_head,d\n0,0,0,d\n0,1,0,d\n1,1,1,d1\n1,1,1,d2\n",
    "layer,q_head,k_head,i\n0,0,0,i\n1,0,1,i1\n1,0,1,i2\n",
};

/// One shard of the test run before it is written: its manifest and its tables' text.
struct test_shard
{
    shard_manifest manifest;
    strings tables;  // per file of the manifest
};

test_shard shard_of(std::size_t index, std::size_t count = 3)
{
    test_shard s;
    shard_manifest& m = s.manifest;
    m.program = "ap_analyze 0.1.0";
    m.shard = {index, count};
    m.options = {{"seed", "1"}, {"max_tokens_per_head", "4096"}};
    m.dump_fingerprint = "0123456789abcdef";
    m.data_root = "dump";
    m.run_heads = 5;
    m.present_heads = 5;
    m.layout_heads = 6;
    m.host = "h";
    m.files = table_names;
    s.tables = headers;
    for (const auto& h : run_heads)
    {
        if (h.shard != index)
        {
            continue;
        }
        shard_head head;
        head.layer = h.layer;
        head.q_head = h.q_head;
        head.k_head = h.k_head;
        head.tokens = 100;
        head.analyzed = h.error.empty();
        head.error = h.error;
        for (std::size_t f = 0; f < h.rows.size(); ++f)
        {
            head.rows.push_back(static_cast<std::uint64_t>(std::count(h.rows[f].begin(), h.rows[f].end(), '\n')));
            s.tables[f] += h.rows[f];
        }
        m.heads.push_back(head);
    }
    return s;
}

/// Writes a shard into `folder`: as a result set (as ap_analyze --shard does) or as plain files;
/// `extra`: a file of the set that its manifest does not list.
void write_shard(const test_shard& s, const std::string& folder, bool as_set, const io::result_file* extra = nullptr)
{
    const std::string manifest = manifest_json(s.manifest);
    if (!as_set)
    {
        fs::create_directories(folder);
        for (std::size_t f = 0; f < s.manifest.files.size(); ++f)
        {
            write_text(fs::path(folder) / s.manifest.files[f], s.tables[f]);
        }
        write_text(fs::path(folder) / "shard.json", manifest);
        return;
    }
    strings names = s.manifest.files;
    names.push_back("shard.json");
    std::vector<io::result_file> files;
    for (std::size_t f = 0; f < s.manifest.files.size(); ++f)
    {
        files.push_back({s.manifest.files[f], {s.tables[f]}});
    }
    files.push_back({"shard.json", {manifest}});
    if (extra != nullptr)
    {
        files.push_back(*extra);
        names.push_back(extra->name);
    }
    result_set_writer writer(folder, names);
    writer.commit(files);
}

/// The message of the merge_error that merging `folders` throws ("" when it throws none).
std::string merge_error_of(const strings& folders)
{
    try
    {
        shard_merge merge(folders);
    }
    catch (const merge_error& e)
    {
        return e.what();
    }
    return "";
}

/// The three shards of the run: 0 and 2 as result sets, 1 as a plain folder.
struct three_shards
{
    temp_folder dir{"merge"};
    std::string s0 = dir / "s0";
    std::string s1 = dir / "s1";
    std::string s2 = dir / "s2";
    std::string out = dir / "merged";

    explicit three_shards(test_shard first = shard_of(0), test_shard second = shard_of(1),
                          test_shard third = shard_of(2))
    {
        write_shard(first, s0, true);
        write_shard(second, s1, false);
        write_shard(third, s2, true);
    }
};
}  // namespace

TEST_CASE("shard_merge: the merged tables are the shards' rows in (layer, q_head) order", "[shard_merge]")
{
    three_shards run;
    const std::string s0_set = link_text(run.s0 + "/.ap_results/current");
    {
        shard_merge merge({run.s2, run.s0, run.s1});  // any order
        CHECK(merge.file_names() == table_names);
        CHECK(merge.analyzed() == 4);
        REQUIRE(merge.failed().size() == 1);
        CHECK(merge.failed()[0].layer == 1);
        CHECK(merge.failed()[0].q_head == 2);
        CHECK(merge.failed()[0].error == "l01h02q/vector.npy: file not found");
        CHECK(merge.failed()[0].folder == run.s1);
        const auto files = merge.files();
        REQUIRE(files.size() == 6);
        for (std::size_t f = 0; f < files.size(); ++f)
        {
            std::string bytes;
            for (const auto piece : files[f].pieces)
            {
                bytes += piece;
            }
            CHECK(files[f].name == table_names[f]);
            CHECK(bytes == merged_tables[f]);
        }

        result_set_writer writer(run.out, merge.file_names());
        const run_report report = finish_merge(merge, writer, run.out);
        CHECK(report.lines
              == strings{"error: layer 1 q_head 2: l01h02q/vector.npy: file not found (in shard folder '" + run.s1 + "')",
                         "3 shards; 5 of the 6 query heads of the layout present: 4 analyzed, 1 failed; results in "
                             + run.out});
        CHECK(report.exit_status == 1);
    }
    // Only the tables are written (no shard.json), each whole; the shards are left as they were.
    strings expected_names = table_names;
    expected_names.push_back(".ap_results");
    std::sort(expected_names.begin(), expected_names.end());
    CHECK(names_in(run.out) == expected_names);
    for (std::size_t f = 0; f < table_names.size(); ++f)
    {
        CHECK(read_text(run.out + "/" + table_names[f]) == merged_tables[f]);
    }
    CHECK(link_text(run.s0 + "/.ap_results/current") == s0_set);
    CHECK(read_text(run.s1 + "/head_metrics.csv") == "layer,q_head,k_head,m\n0,0,0,m00\n");

    // Given in the order of the shards: the same bytes.
    shard_merge again({run.s0, run.s1, run.s2});
    const auto files = again.files();
    for (std::size_t f = 0; f < files.size(); ++f)
    {
        std::string bytes;
        for (const auto piece : files[f].pieces)
        {
            bytes += piece;
        }
        CHECK(bytes == merged_tables[f]);
    }
}

TEST_CASE("shard_merge: shards of another run, missing or given twice are refused, naming the folders",
          "[shard_merge]")
{
    SECTION("a missing shard")
    {
        three_shards run;
        CHECK(merge_error_of({run.s0, run.s2})
              == "shard 1 of 3 (0-2) is missing: no folder given holds it (run it, e.g. sbatch --array=1 "
                 "ap_array.sbatch ..., and merge again)");
    }
    SECTION("a shard folder that does not exist")
    {
        three_shards run;
        const std::string gone = run.dir / "s9";
        CHECK(merge_error_of({run.s0, run.s1, run.s2, gone}) == "shard folder '" + gone + "': folder not found");
    }
    SECTION("a shard given twice")
    {
        three_shards run;
        const std::string copy = run.dir / "s0-copy";
        write_shard(shard_of(0), copy, false);
        CHECK(merge_error_of({run.s0, run.s1, copy, run.s2})
              == "shard 0 of 3 is given twice: '" + run.s0 + "' and '" + copy + "' (give each shard once)");
    }
    SECTION("a shard of a run with another number of shards")
    {
        three_shards run(shard_of(0), shard_of(1), shard_of(2, 4));
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "'" + run.s2 + "' is shard 2/4 but '" + run.s0
                     + "' is shard 0/3: shards of runs with a different number of shards cannot be merged");
    }
    SECTION("other options and another dump: every problem listed")
    {
        test_shard other_options = shard_of(1);
        other_options.manifest.options[0].second = "2";
        test_shard other_dump = shard_of(2);
        other_dump.manifest.dump_fingerprint = "fedcba9876543210";
        three_shards run(shard_of(0), other_options, other_dump);
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "cannot merge, 2 problems:\n  '" + run.s1 + "' was run with other options than '" + run.s0
                     + "': seed is 2 there but 1 here\n  '" + run.s2 + "' analyzed another dump than '" + run.s0
                     + "' (data_root 'dump' and 'dump'; dump fingerprint fedcba9876543210 and 0123456789abcdef, 5 "
                       "and 5 heads): the heads or their vector files differ");
    }
    SECTION("another program")
    {
        test_shard other = shard_of(2);
        other.manifest.program = "ap_analyze 0.2.0";
        three_shards run(shard_of(0), shard_of(1), other);
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "'" + run.s2 + "' was written by ap_analyze 0.2.0 but '" + run.s0 + "' by ap_analyze 0.1.0");
    }
}

TEST_CASE("shard_merge: a shard's own files are checked: the §3 tables only, rows as announced, a finished run",
          "[shard_merge]")
{
    SECTION("a manifest that lists a file that is not a table of §3")
    {
        test_shard edited = shard_of(1);
        edited.manifest.files[4] = "notes.csv";
        three_shards run(shard_of(0), edited, shard_of(2));
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "shard folder '" + run.s1
                     + "': shard.json lists the files [head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv, "
                       "head_component_weights.csv, notes.csv, head_sequence_influence.csv], but a shard's set holds exactly "
                     + table_list
                     + " (docs/method.md §3); it was not written by this version of ap_analyze, or edited");
    }
    SECTION("a table with fewer rows than its manifest announces")
    {
        test_shard cut = shard_of(1);
        cut.tables[0] = headers[0];
        three_shards run(shard_of(0), cut, shard_of(2));
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "shard folder '" + run.s1
                     + "': head_metrics.csv ends at line 1, before the rows its manifest announces for layer 0 q_head 0");
    }
    SECTION("a row of another head than the manifest announces")
    {
        test_shard wrong = shard_of(0);
        wrong.tables[2] = headers[2] + "1,0,1,p\n";  // head (1, 1)'s one profile row, as (1, 0)'s
        three_shards run(wrong, shard_of(1), shard_of(2));
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "shard folder '" + run.s0
                     + "': head_profile.csv: line 2 is not a row of layer 1 q_head 1, as its manifest announces");
    }
    SECTION("a file in a shard's set that its manifest does not list")
    {
        three_shards run;
        const std::string extra = run.dir / "s3";
        const io::result_file x = {"x.csv", {"x\n"}};
        write_shard(shard_of(2), extra, true, &x);
        CHECK(merge_error_of({run.s0, run.s1, extra})
              == "shard folder '" + extra
                     + "': holds x.csv, which its manifest does not list (a file of another run?)");
    }
    SECTION("a shard whose run did not finish")
    {
        three_shards run;
        const std::string unfinished = run.dir / "s2-unfinished";
        {
            result_set_writer writer(unfinished, {"head_metrics.csv"});  // dropped before its commit
        }
        CHECK(merge_error_of({run.s0, run.s1, unfinished})
              == "shard folder '" + unfinished
                     + "': holds no complete result set: its run did not finish (rerun that shard)");
    }
    SECTION("a shard whose lock is not a regular file, or whose `current` leads out of it")
    {
        three_shards run;
        const std::string lock = run.s2 + "/.ap_results/lock";
        fs::remove(lock);
        fs::create_symlink(run.dir / "elsewhere", lock);
        fs::remove(run.s0 + "/.ap_results/current");
        fs::create_directory_symlink("../../s1", run.s0 + "/.ap_results/current");
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "cannot merge, 2 problems:\n  shard folder '" + run.s0 + "': " + run.s0
                     + "/.ap_results/current names '../../s1', not a result set\n  shard folder '" + run.s2 + "': "
                     + lock + ": is a symbolic link (to '" + run.dir / "elsewhere"
                     + "'), not this program's lock file; it is not followed (move it away)");
        CHECK_FALSE(fs::exists(fs::symlink_status(run.dir / "elsewhere")));
    }
    SECTION("a plain folder without a manifest")
    {
        three_shards run;
        const std::string plain = run.dir / "plain";
        write_text(plain + "/head_metrics.csv", headers[0]);
        CHECK(merge_error_of({run.s0, run.s1, plain})
              == "shard folder '" + plain
                     + "': shard.json: file not found (its results come from a run without --shard, or it is not an "
                       "output folder of ap_analyze --shard)");
    }
}

TEST_CASE("shard_merge: a shard being written is refused, and the merge's output cannot be a shard it reads",
          "[shard_merge]")
{
    three_shards run;
    const std::string host = plain_host_name();
    {
        // A run writing into shard 2's folder holds its lock: the merge does not read it.
        result_set_writer writing(run.s2, {"head_metrics.csv"});
        CHECK(merge_error_of({run.s0, run.s1, run.s2})
              == "shard folder '" + run.s2 + "': a run is writing into it (pid " + std::to_string(::getpid())
                     + " on " + host + "); wait for it to finish, then merge");
    }
    // The merge holds each shard's lock while it reads: writing the merged set into a shard
    // folder (a set) is refused at once; the shard's set stays current.
    const std::string s0_set = link_text(run.s0 + "/.ap_results/current");
    shard_merge merge({run.s0, run.s1, run.s2});
    std::string refused;
    try
    {
        result_set_writer writer(run.s0, merge.file_names());
    }
    catch (const output_error& e)
    {
        refused = e.what();
    }
    CHECK(refused == "output_dir '" + run.s0 + "' is in use by another run (pid " + std::to_string(::getpid()) + " on "
                         + host + "); wait for it to finish or choose another --output-dir");
    CHECK(link_text(run.s0 + "/.ap_results/current") == s0_set);
}

/// The message of the usage_error that a merge_run of `folders` into `output_dir` throws ("" when
/// it throws none).
static std::string merge_run_refusal(const strings& folders, const std::string& output_dir)
{
    try
    {
        merge_run run(folders, output_dir);
    }
    catch (const usage_error& e)
    {
        return e.what();
    }
    return "";
}

TEST_CASE("merge_run: the output folder refused in ap_merge's words, then the shards merged and written",
          "[shard_merge]")
{
    three_shards run;
    // One of the shards, or inside one (the words are ap_merge's, tests/e2e/test_shards.py).
    CHECK(merge_run_refusal({run.s0, run.s1, run.s2}, run.s1)
          == "--output-dir '" + run.s1 + "' is the shard folder '" + run.s1
                 + "'; write the merged results into another folder (outside every shard)");
    CHECK(merge_run_refusal({run.s0, run.s1, run.s2}, run.s2 + "/merged")
          == "--output-dir '" + run.s2 + "/merged' is inside the shard folder '" + run.s2
                 + "'; write the merged results into another folder (outside every shard)");
    // A folder holding another program's set: the merged set would strand its links.
    const std::string foreign = run.dir / "foreign";
    {
        result_set_writer writer(foreign, {"notes.csv"});
        writer.commit({{"notes.csv", {std::string("a\n")}}});
    }
    CHECK(merge_run_refusal({run.s0, run.s1, run.s2}, foreign)
          == "--output-dir '" + foreign + "' holds the results of another program (notes.csv): the merged set would "
                                          "replace them as its current set and leave their links dangling; write the "
                                          "merged results into another folder");
    CHECK(!fs::exists(run.s2 + "/merged"));
    // A folder holding the shards as subfolders is fine (the Slurm layout); the facade merges,
    // writes and reports as finish_merge.
    const std::string out = run.dir.path.string();
    {
        merge_run merging({run.s2, run.s0, run.s1}, out);
        CHECK(merging.merge().analyzed() == 4);
        const run_report report = merging.finish();
        CHECK(report.lines
              == strings{"error: layer 1 q_head 2: l01h02q/vector.npy: file not found (in shard folder '" + run.s1 + "')",
                         "3 shards; 5 of the 6 query heads of the layout present: 4 analyzed, 1 failed; results in "
                             + out});
        CHECK(report.exit_status == 1);
    }
    for (std::size_t f = 0; f < table_names.size(); ++f)
    {
        CHECK(read_text(out + "/" + table_names[f]) == merged_tables[f]);
    }
}
