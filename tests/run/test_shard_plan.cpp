// Unit tests of sharding (docs/method.md §8.4): the --shard value, the assignment rule, what
// the plan reads of the NPY headers (or through a front end's folder probe), the manifest's
// JSON both ways, the options that determine the results, and the positional arguments of
// ap_merge's command line. (The programs end to end: tests/e2e/test_shards.py and
// test_slurm.py; from Python: tests/python/test_bindings_shards.py.)

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/config.hpp>
#include <attention_plasticity/run/shard_manifest.hpp>
#include <attention_plasticity/run/shard_plan.hpp>

using namespace attention_plasticity::run;
using Catch::Matchers::Contains;

TEST_CASE("parse_shard_spec: I/N, bounded, errors name the option", "[shard]")
{
    const shard_spec s = parse_shard_spec("--shard", " 3/8 ");
    CHECK(s.index == 3);
    CHECK(s.count == 8);
    CHECK(s.text() == "3/8");
    CHECK(parse_shard_spec("--shard", "0/1").count == 1);
    CHECK(parse_shard_spec("--shard", "99999/100000").index == 99999);
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "8/8"), Contains("--shard: shard 8 of 8 does not exist (shards are "
                                                                   "numbered 0-7)"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "3"), Contains("--shard: '3' is not I/N"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", ""), Contains("is not I/N"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "1/0"), Contains("--shard (N): 0 must be >= 1 and <= 100000"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "1/100001"), Contains("--shard (N): 100001 must be"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "a/4"), Contains("--shard (I): 'a' is not a non-negative integer"));
    CHECK_THROWS_WITH(parse_shard_spec("--shard", "1/2/3"), Contains("--shard (N): '2/3' is not a non-negative integer"));
    CHECK_THROWS_WITH(parse_shard_spec("my.yaml: shard", "/4"), Contains("my.yaml: shard (I): missing value"));
}

TEST_CASE("assign_shards: greedy longest-processing-time, worked by hand", "[shard]")
{
    // Heads by decreasing weight (ties in order): 0 (5) -> s0, 1 (5) -> s1, 2 (4) -> s2,
    // 3 (4) -> s2 (load 4, the least), 4 (3) -> s0 (5 = 5, lower index), 5 (3) -> s1,
    // 6 (3) -> s0 (8 = 8 = 8, lowest index).
    CHECK(assign_shards({5, 5, 4, 4, 3, 3, 3}, 3) == std::vector<std::size_t>{0, 1, 2, 2, 0, 1, 0});
    // Equal weights: round robin in (layer, q_head) order.
    CHECK(assign_shards({7, 7, 7, 7, 7, 7, 7}, 3) == std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0});
    // More shards than heads: one head each, heaviest first; shards 3 and 4 hold none.
    CHECK(assign_shards({1, 3, 2}, 5) == std::vector<std::size_t>{2, 0, 1});
    CHECK(assign_shards({}, 4).empty());
    CHECK(assign_shards({9, 0, 0}, 1) == std::vector<std::size_t>{0, 0, 0});
    // Weights near the top of the range saturate instead of wrapping around.
    const std::uint64_t huge = ~std::uint64_t{0} - 1;
    CHECK(assign_shards({huge, huge, 1}, 1) == std::vector<std::size_t>{0, 0, 0});
}

TEST_CASE("assign_shards: every head once, loads within one head of each other", "[shard]")
{
    std::mt19937_64 random(17);
    for (int trial = 0; trial < 200; ++trial)
    {
        const std::size_t heads = random() % 300;
        const std::size_t count = 1 + random() % 40;
        std::vector<std::uint64_t> weights(heads);
        for (auto& w : weights)
        {
            w = random() % 100001;
        }
        const auto shard_of = assign_shards(weights, count);
        REQUIRE(shard_of.size() == heads);
        CHECK(shard_of == assign_shards(weights, count));  // a function of its input alone
        std::vector<std::uint64_t> load(count, 0);
        for (std::size_t i = 0; i < heads; ++i)
        {
            REQUIRE(shard_of[i] < count);
            load[shard_of[i]] += weights[i];
        }
        // LPT: when the last head joined the heaviest shard, that shard was the lightest.
        const std::uint64_t heaviest = weights.empty() ? 0 : *std::max_element(weights.begin(), weights.end());
        CHECK(*std::max_element(load.begin(), load.end()) <= *std::min_element(load.begin(), load.end()) + heaviest);
    }
}

namespace
{
/// A version 1.0 NPY file of `descr` and shape (rows, cols) with `payload` bytes after the header.
void write_npy(const std::string& path, const std::string& descr, std::size_t rows, std::size_t cols,
               const std::string& payload)
{
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", "
                         + std::to_string(cols) + "), }";
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const char len[2] = {static_cast<char>(header.size() & 0xFF), static_cast<char>(header.size() >> 8)};
    out.write(len, 2);
    out << header << payload;
}

std::string floats(std::size_t count, float value)
{
    std::vector<float> v(count, value);
    return std::string(reinterpret_cast<const char*>(v.data()), count * sizeof(float));
}

struct temp_dump
{
    std::filesystem::path root;
    temp_dump()
    {
        char pattern[] = "/tmp/ap-shard-test-XXXXXX";
        root = ::mkdtemp(pattern);
    }
    ~temp_dump() { std::filesystem::remove_all(root); }
    std::string vector_file(std::size_t layer, std::size_t head, char kind) const
    {
        const auto folder = root / head_folder_name(layer, head, kind);
        std::filesystem::create_directories(folder);
        return (folder / "vector.npy").string();
    }
};
}  // namespace

TEST_CASE("weigh_heads: rows from the NPY headers, capped, and the dump's fingerprint", "[shard]")
{
    temp_dump dump;
    write_npy(dump.vector_file(0, 0, 'q'), "<f4", 700, 2, floats(1400, 1.0f));
    write_npy(dump.vector_file(0, 1, 'q'), "<f8", 30, 2, std::string(30 * 2 * 8, '\0'));
    write_npy(dump.vector_file(0, 0, 'k'), "<f4", 2000, 2, floats(4000, 2.0f));
    write_npy(dump.vector_file(1, 0, 'q'), "<f4", 50, 2, floats(99, 1.0f));  // truncated: unreadable
    const std::vector<head_task> heads = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}};  // layer 1 has no key folder
    const head_weights w = weigh_heads(dump.root.string(), heads, 500);
    CHECK(w.tokens == std::vector<std::uint64_t>{500 + 500, 30 + 500, 0});
    CHECK(weigh_heads(dump.root.string(), heads, 100000).tokens == std::vector<std::uint64_t>{700 + 2000, 30 + 2000, 0});

    // The same files elsewhere: the same fingerprint (the path is not part of it).
    temp_dump copy;
    for (const char* name : {"l00h00q", "l00h01q", "l00h00k", "l01h00q"})
    {
        std::filesystem::create_directories(copy.root / name);
        std::filesystem::copy_file(dump.root / name / "vector.npy", copy.root / name / "vector.npy");
    }
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint == w.dump_fingerprint);
    CHECK(weigh_heads(dump.root.string(), {heads[0], heads[1]}, 500).dump_fingerprint != w.dump_fingerprint);
    // Any byte changed, anywhere in a file (here the last value of the key file, past the
    // first 4 KiB): another dump. The same bytes again: the same dump.
    std::string values = floats(4000, 2.0f);
    values[values.size() - 1] = 7;
    write_npy(copy.vector_file(0, 0, 'k'), "<f4", 2000, 2, values);
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint != w.dump_fingerprint);
    write_npy(copy.vector_file(0, 0, 'k'), "<f4", 2000, 2, floats(4000, 2.0f));
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint == w.dump_fingerprint);
    // Another size (one row more) with the same first bytes: another dump.
    write_npy(copy.vector_file(0, 0, 'k'), "<f4", 2000, 2, floats(4002, 2.0f));
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint != w.dump_fingerprint);
    write_npy(copy.vector_file(0, 0, 'k'), "<f4", 2000, 2, floats(4000, 2.0f));
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint == w.dump_fingerprint);
    // Every file of the folder counts, not only vector.npy (issue 19: two dumps that differed
    // only in bucket.npy were merged).
    {
        std::ofstream extra(copy.root / "l00h01q" / "bucket.npy", std::ios::binary);
        extra << "x";
    }
    const std::uint64_t with_bucket = weigh_heads(copy.root.string(), heads, 500).dump_fingerprint;
    CHECK(with_bucket != w.dump_fingerprint);
    {
        std::ofstream extra(copy.root / "l00h01q" / "bucket.npy", std::ios::binary);
        extra << "y";
    }
    CHECK(weigh_heads(copy.root.string(), heads, 500).dump_fingerprint != with_bucket);
    // A FIFO in place of a file is named, never opened for reading: no wait (issue 19).
    std::filesystem::remove(copy.root / "l00h01q" / "vector.npy");
    REQUIRE(::mkfifo((copy.root / "l00h01q" / "vector.npy").c_str(), 0644) == 0);
    const head_weights fifo = weigh_heads(copy.root.string(), heads, 500);
    CHECK(fifo.tokens[1] == 500);  // the FIFO weighs 0, its key folder 500
    CHECK(fifo.dump_fingerprint != with_bucket);
}

TEST_CASE("weigh_heads, select_shard: a front end's folder probe", "[shard]")
{
    // The Python module reads qk-sniffer folders: it weighs them by a probe of its own. Here a
    // probe that announces 100 x (layer + 1) + 10 x head rows for folder l{LL}h{HH}{q|k}.
    std::map<std::string, int> calls;
    const folder_probe probe = [&](const std::string& folder) {
        const std::string name = std::filesystem::path(folder).filename().string();
        ++calls[name];
        vector_file_probe p;
        const auto layer = static_cast<std::uint64_t>(std::stoi(name.substr(1, 2)));
        const auto head = static_cast<std::uint64_t>(std::stoi(name.substr(4, 2)));
        p.rows = 100 * (layer + 1) + 10 * head;
        return p;
    };
    // 2 layers x 4 query heads on 2 key heads (GQA groups of 2)
    std::vector<head_task> heads;
    for (std::size_t layer = 0; layer < 2; ++layer)
    {
        for (std::size_t q = 0; q < 4; ++q)
        {
            heads.push_back({layer, q, q / 2});
        }
    }
    const head_weights w = weigh_heads("/nowhere", heads, 215, probe);
    // query rows 100 + 10 q (layer 0), 200 + 10 q (layer 1), capped at 215; key rows 100 + 10 k, 200 + 10 k
    CHECK(w.tokens == std::vector<std::uint64_t>{100 + 100, 110 + 100, 120 + 110, 130 + 110,
                                                 200 + 200, 210 + 200, 215 + 210, 215 + 210});
    CHECK(calls.size() == 12);  // 8 query folders, 4 key folders, each probed once
    CHECK(std::all_of(calls.begin(), calls.end(), [](const auto& c) { return c.second == 1; }));
    CHECK(calls.count("l01h01k") == 1);
    CHECK(w.dump_fingerprint == weigh_heads("/nowhere", heads, 215).dump_fingerprint);  // the folders' bytes, not the probe
    // LPT over these weights, worked by hand for N = 3: 425 (1,2) -> 0, 425 (1,3) -> 1, 410 (1,1) -> 2,
    // 400 (1,0) -> 2 (810), 240 (0,3) -> 0 (665), 230 (0,2) -> 1 (655), 210 (0,1) -> 1 (865), 200 (0,0) -> 0 (865).
    const shard_selection s0 = select_shard("/nowhere", heads, 215, parse_shard_spec("--shard", "0/3"), probe);
    std::vector<std::pair<std::size_t, std::size_t>> got;
    for (const auto& h : s0.heads)
    {
        got.emplace_back(h.layer, h.q_head);
    }
    CHECK(got == std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {0, 3}, {1, 2}});
    CHECK(s0.tokens == std::vector<std::uint64_t>{200, 240, 425});
    CHECK(s0.shard_tokens == 865);
    CHECK(s0.run_tokens == 865 + 865 + 810);
    CHECK(s0.run_heads == 8);
}

namespace
{
shard_manifest sample_manifest()
{
    shard_manifest m;
    m.program = "ap_analyze 0.1.0";
    m.shard = {2, 5};
    m.options = {{"seed", "7"}, {"layers", "0-3,7"}, {"odd", "given as 'a: \"b\"'"}};
    m.dump_fingerprint = "0123456789abcdef";
    m.data_root = "/data/caf\xc3\xa9";
    m.run_heads = 40;
    m.present_heads = 44;
    m.layout_heads = 48;
    m.host = "node07";
    m.seconds = 12.5;
    m.files = {"head_metrics.csv", "head_extra.csv"};
    shard_head a;
    a.layer = 0, a.q_head = 3, a.k_head = 1, a.tokens = 900, a.analyzed = true, a.rows = {1, 36};
    shard_head b;
    b.layer = 2, b.q_head = 0, b.k_head = 0, b.tokens = 0, b.analyzed = false;
    b.error = "/data/l02h00q/vector.npy: truncated: \"x\"\nnext line \xff";
    m.heads = {a, b};
    return m;
}
}  // namespace

TEST_CASE("manifest: written and read back", "[shard]")
{
    const shard_manifest m = sample_manifest();
    const shard_manifest r = parse_manifest(manifest_json(m), "shard.json");
    CHECK(r.program == m.program);
    CHECK(r.shard.index == 2);
    CHECK(r.shard.count == 5);
    CHECK(r.options == m.options);
    CHECK(r.options_fingerprint() == m.options_fingerprint());
    CHECK(r.dump_fingerprint == m.dump_fingerprint);
    CHECK(r.data_root == m.data_root);
    CHECK(r.run_heads == 40);
    CHECK(r.present_heads == 44);
    CHECK(r.layout_heads == 48);
    CHECK(r.host == "node07");
    CHECK(r.files == m.files);
    REQUIRE(r.heads.size() == 2);
    CHECK(r.heads[0].rows == std::vector<std::uint64_t>{1, 36});
    CHECK(r.heads[0].tokens == 900);
    CHECK(r.heads[0].analyzed);
    CHECK_FALSE(r.heads[1].analyzed);
    CHECK(r.heads[1].error == "/data/l02h00q/vector.npy: truncated: \"x\"\nnext line \xef\xbf\xbd");
    shard_manifest none = m;
    none.heads.clear();
    CHECK(parse_manifest(manifest_json(none), "shard.json").heads.empty());
}

TEST_CASE("manifest: what is refused", "[shard]")
{
    const std::string good = manifest_json(sample_manifest());
    auto edited = [&](const std::string& from, const std::string& to) {
        std::string text = good;
        const std::size_t at = text.find(from);
        REQUIRE(at != std::string::npos);
        return text.replace(at, from.size(), to);
    };
    auto refused = [](const std::string& text, const std::string& needle) {
        CHECK_THROWS_WITH(parse_manifest(text, "S/shard.json"), Contains("S/shard.json: not a valid shard manifest: " + needle));
    };
    refused("[1, 2]", "expected a JSON object");
    refused("{", "not valid JSON");
    refused(edited("\"ap_shard_manifest\": 1", "\"ap_shard_manifest\": 2"), "format 2 (this program reads format 1)");
    refused(edited("\"shard\": 2", "\"shard\": 5"), "shard 5 of 5");
    refused(edited("\"num_shards\": 5", "\"num_shards\": -5"), "num_shards: '-5' is not a non-negative integer");
    refused(edited("\"seed\": \"7\"", "\"seed\": \"8\""), "'options_fingerprint' does not match 'options'");
    refused(edited("\"program\": \"ap_analyze 0.1.0\",", ""), "'program' is missing");
    refused(edited("\"head_extra.csv\"", "\"../etc/passwd\""), "'files' names '../etc/passwd', which is not the name");
    refused(edited("\"head_extra.csv\"", "\"shard.json\""), "'files' names 'shard.json'");
    refused(edited("\"head_extra.csv\"", "\"..\""), "'files' names '..'");
    refused(edited("\"head_extra.csv\"", "\"head_metrics.csv\""), "'files' names 'head_metrics.csv' twice");
    refused(edited("\"rows\": [1, 36]", "\"rows\": [1]"), "heads[0].rows has 1 counts for 2 files");
    refused(edited("\"analyzed\": true", "\"analyzed\": 1"), "'heads[0].analyzed' is not true or false");
    refused(edited("\"layer\": 2", "\"layer\": 0"), "heads[1] is out of order");
    refused(edited("\"layer\": 2", "\"layer\": 10000"), "heads[1].layer: 10000 must be >= 0 and <= 9999");
    refused(edited("\"run_heads\": 40", "\"run_heads\": 1"), "2 heads in a run of 1");
}

TEST_CASE("result_options: canonical values of the options that determine the results", "[shard]")
{
    const char* defaults[] = {"ap_analyze", "--data-root", "D"};
    const char* explicit_defaults[] = {"ap_analyze", "--data-root", "E", "--seed", "0", "--p-alpha", "1e-2",
                                       "--threads", "3", "--output-dir", "O", "--shard", "1/4"};
    const auto a = parse_analyze_command_line(3, defaults);
    const auto b = parse_analyze_command_line(13, explicit_defaults);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(b->shard->text() == "1/4");
    CHECK(b->given.at("shard") == "1/4");
    dump_layout layout;
    layout.num_layers = 6, layout.num_q_heads = 8, layout.num_k_heads = 2;
    const auto options = result_options(*a, layout);
    CHECK(options == result_options(*b, layout));  // run options and spellings of a value do not count
    auto value = [&](const std::string& key) {
        for (const auto& [k, v] : options)
        {
            if (k == key)
            {
                return v;
            }
        }
        return std::string("(absent)");
    };
    CHECK(value("num_q_heads") == "8");
    CHECK(value("layers") == "all");
    CHECK(value("p_alpha") == "0.01");
    CHECK(value("max_rel_dist") == "0.050000000000000003");
    CHECK(value("covariance_epsilon") == "9.9999999999999998e-13");
    for (const char* run : {"data_root", "output_dir", "threads", "shard"})
    {
        CHECK(value(run) == "(absent)");
    }
    const char* other[] = {"ap_analyze", "--data-root", "D", "--heads", "3,1-2"};
    CHECK(result_options(*parse_analyze_command_line(5, other), layout) != options);
}

TEST_CASE("parse_command_line: positional arguments where a program takes them", "[shard]")
{
    struct merge_like
    {
        std::string output_dir;
    };
    const option_table<merge_like> table = {{"output_dir", "DIR", "out", set_option::path(&merge_like::output_dir)}};
    const char* argv[] = {"ap_merge", "a", "--output-dir", "o", "b", "--", "--c", "-h"};
    merge_like config;
    std::vector<std::string> positional;
    REQUIRE(parse_command_line(8, argv, table, config, false, &positional));
    CHECK(config.output_dir == "o");
    CHECK(positional == std::vector<std::string>{"a", "b", "--c", "-h"});
    const char* unknown[] = {"ap_merge", "--outputdir", "o"};
    CHECK_THROWS_WITH(parse_command_line(3, unknown, table, config, false, &positional), Contains("unknown option"));
    const char* without[] = {"ap_analyze", "--data-root", "D", "stray"};
    CHECK_THROWS_WITH(parse_analyze_command_line(4, without), Contains("unexpected argument 'stray'"));
}
