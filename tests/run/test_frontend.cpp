// Unit tests of the front end's pieces that decide something on their own: index lists,
// folder names, the layout rules, head selection, option tables, and the run identity of
// result sets. (What the programs do with them is tested end to end by tests/e2e/*.py.)

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <unistd.h>

#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/compare_config.hpp>
#include <attention_plasticity/run/config.hpp>
#include <attention_plasticity/run/dump_layout.hpp>
#include <attention_plasticity/run/result_set.hpp>

using namespace attention_plasticity::run;
using Catch::Matchers::Contains;

TEST_CASE("parse_index_set: numbers and ranges, merged and canonical", "[frontend]")
{
    const index_set s = parse_index_set("--layers", " 7, 0-3 ,2-4,9", 9999);
    CHECK(s.text() == "0-4,7,9");
    CHECK(s.count() == 7);
    CHECK(s.largest() == 9);
    CHECK(s.contains(0));
    CHECK(s.contains(4));
    CHECK_FALSE(s.contains(5));
    CHECK_FALSE(s.contains(8));
    CHECK(parse_index_set("--heads", "1,2,3", 9999).text() == "1-3");
    CHECK(parse_index_set("--heads", "5,6", 9999).text() == "5,6");
    CHECK(parse_index_set("--heads", "0-9999", 9999).count() == 10000);
}

TEST_CASE("parse_index_set: errors name the option and the item", "[frontend]")
{
    CHECK_THROWS_WITH(parse_index_set("--layers", "", 9999), Contains("--layers: missing value"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "1,,2", 9999), Contains("'1,,2' has an empty item"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "3-1", 9999), Contains("'3-1' is a descending range (write 1-3)"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "-1", 9999), Contains("'-1' is not a non-negative index"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "x", 9999), Contains("'x' is not a non-negative integer"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "10000", 9999), Contains("10000 must be >= 0 and <= 9999"));
    CHECK_THROWS_WITH(parse_index_set("--layers", "0-99999999999999999999", 9999),
                      Contains("'99999999999999999999' is out of range"));
    CHECK_THROWS_AS(parse_index_set("--layers", "1-2-3", 9999), usage_error);
}

TEST_CASE("head folder names: format, bounds, and names that are not head folders", "[frontend]")
{
    CHECK(head_folder_name(0, 1, 'q') == "l00h01q");
    CHECK(head_folder_name(100, 7, 'k') == "l100h07k");
    auto ok = [](const std::string& name, std::size_t layer, std::size_t head, char kind) {
        const parsed_folder_name p = parse_head_folder_name(name);
        return p.is_head_folder && p.problem.empty() && p.layer == layer && p.head == head && p.kind == kind;
    };
    CHECK(ok("l00h00q", 0, 0, 'q'));
    CHECK(ok("l35h31k", 35, 31, 'k'));
    CHECK(ok("l100h07q", 100, 7, 'q'));
    CHECK(ok("l9999h9999k", 9999, 9999, 'k'));
    for (const char* name : {"l00h00", "l00h00x", "x00h00q", "l00h00qq", "lh00q", "l00hq", "l00h00q.bak", "", "l"})
    {
        INFO(name);
        CHECK_FALSE(parse_head_folder_name(name).is_head_folder);
    }
    auto problem = [](const std::string& name) {
        const parsed_folder_name p = parse_head_folder_name(name);
        REQUIRE(p.is_head_folder);
        return p.problem;
    };
    CHECK_THAT(problem("l000h00q"), Contains("not in the dump's format (expected 'l00h00q'"));
    CHECK_THAT(problem("l0h0k"), Contains("expected 'l00h00k'"));
    CHECK_THAT(problem("l4000000000h00q"), Contains("layer number 4000000000 is above the limit 9999"));
    CHECK_THAT(problem("l00h10000q"), Contains("head number 10000 is above the limit 9999"));
    CHECK_THAT(problem("l99999999999999999999999999999h00q"),
               Contains("layer number 999999999999999999999999... is above the limit"));
}

namespace
{
dump_scan grid(std::size_t layers, std::size_t q_heads, std::size_t k_heads)
{
    dump_scan scan;
    scan.data_root = "DUMP";
    for (std::size_t l = 0; l < layers; ++l)
    {
        for (std::size_t h = 0; h < q_heads; ++h)
        {
            scan.query.emplace_back(l, h);
        }
        for (std::size_t h = 0; h < k_heads; ++h)
        {
            scan.key.emplace_back(l, h);
        }
    }
    return scan;
}

layout_counts counts(std::optional<std::size_t> l, std::optional<std::size_t> q, std::optional<std::size_t> k)
{
    layout_counts c;
    c.num_layers = l;
    c.num_q_heads = q;
    c.num_k_heads = k;
    return c;
}
}  // namespace

TEST_CASE("resolve_layout: head counts never guessed from the folder names", "[frontend]")
{
    // Issue 19: an 8-query/2-key model with query heads 0-5 captured (and their key heads 0-1)
    // looks like a complete 6/2 grid; analyzed as 6/2, query head 3 would read key head 1
    // instead of 0. Without counts from somewhere, refused; the message asks for them.
    dump_scan sampled_grid = grid(3, 6, 2);
    CHECK_THROWS_WITH(resolve_layout(sampled_grid, {}, {}),
                      Contains("data_root: num_q_heads and num_k_heads are not known")
                          && Contains("give --num-q-heads and --num-k-heads, or --model-config"));
    CHECK_THROWS_WITH(resolve_layout(grid(3, 8, 2), {}, {}), Contains("are not known"));  // even a complete one
    CHECK_THROWS_WITH(resolve_layout(sampled_grid, counts(std::nullopt, 8, std::nullopt), {}),
                      Contains("data_root: num_k_heads is not known"));
    const dump_layout right = resolve_layout(sampled_grid, counts(std::nullopt, 8, 2), {});
    CHECK(right.k_head_of(3) == 0);
    CHECK(right.num_layers == 3);
    CHECK(right.origin == "num_layers from the folder names, num_q_heads given, num_k_heads given");
    // The model's config.json: the same, with its path as the origin.
    layout_counts model;
    model.num_q_heads = 8;
    model.num_k_heads = 2;
    model.num_layers = 3;
    const dump_layout from_model = resolve_layout(sampled_grid, {}, {}, model, "M/config.json");
    CHECK(from_model.k_head_of(3) == 0);
    CHECK(from_model.origin == "layout from M/config.json");
    CHECK_THROWS_WITH(resolve_layout(sampled_grid, counts(std::nullopt, 6, std::nullopt), {}, model, "M/config.json"),
                      Contains("num_q_heads: --num-q-heads (or the --config file) says 6 but --model-config "
                               "M/config.json says 8"));
    // The highest query head captured is 27 of 32: never "28 heads".
    dump_scan sampled;
    sampled.data_root = "DUMP";
    sampled.query = {{0, 3}, {0, 27}};
    sampled.key = {{0, 0}, {0, 6}};
    CHECK_THROWS_WITH(resolve_layout(sampled, {}, {}), Contains("give --num-q-heads and --num-k-heads"));
    // A front end of keywords (analyze_dump) reads its own words: no flag, no file to write.
    const option_words keywords{false};
    CHECK_THROWS_WITH(resolve_layout(sampled, {}, {}, {}, "", keywords),
                      Contains("give the keywords num_q_heads and num_k_heads") && !Contains("--")
                          && !Contains("metadata.json"));
    CHECK_THROWS_WITH(resolve_layout(sampled, counts(std::nullopt, 6, std::nullopt), {}, counts(std::nullopt, 8, 2),
                                     "M/config.json", keywords),
                      Contains("num_q_heads: num_q_heads (or the config file) says 6 but model_config M/config.json "
                               "says 8"));
    const dump_layout given = resolve_layout(sampled, counts(std::nullopt, 32, 8), {});
    CHECK(given.k_head_of(27) == 6);
    CHECK(given.num_layers == 1);
    const dump_layout meta = resolve_layout(sampled, {}, counts(4, 32, 8));
    CHECK(meta.num_layers == 4);
    CHECK(meta.origin == "layout from metadata.json");
    CHECK(resolve_layout(sampled, counts(std::nullopt, 32, std::nullopt), counts(std::nullopt, 32, 8)).num_k_heads == 8);
}

namespace
{
/// A fresh folder for model config files written by a test, removed at its end.
struct config_folder
{
    std::filesystem::path dir;

    explicit config_folder(const std::string& name)
        : dir(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid())))
    {
        std::filesystem::create_directories(dir);
    }
    ~config_folder()
    {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
    /// Writes `text` into the file `name` of the folder; returns its path.
    std::string write(const std::string& name, const std::string& text) const
    {
        std::ofstream((dir / name).string(), std::ios::binary) << text;
        return (dir / name).string();
    }
};
}  // namespace

TEST_CASE("read_model_config: a transformers config.json", "[frontend]")
{
    const config_folder folder("ap_model_config");
    const auto& dir = folder.dir;
    auto write = [&](const std::string& name, const std::string& text) { return folder.write(name, text); };
    const layout_counts gqa = read_model_config(
        write("qwen.json", R"({"architectures": ["Qwen2ForCausalLM"], "num_attention_heads": 14, )"
                           R"("num_key_value_heads": 2, "num_hidden_layers": 24, "hidden_size": 896})"));
    CHECK(gqa.num_q_heads == std::optional<std::size_t>(14));
    CHECK(gqa.num_k_heads == std::optional<std::size_t>(2));
    CHECK(gqa.num_layers == std::optional<std::size_t>(24));
    // No num_key_value_heads: transformers reads it as num_attention_heads (no GQA).
    const layout_counts mha = read_model_config(write("bert.json", R"({"num_attention_heads": 12, "num_hidden_layers": 6})"));
    CHECK(mha.num_k_heads == std::optional<std::size_t>(12));
    CHECK_THROWS_WITH(read_model_config(write("none.json", R"({"hidden_size": 8})")), Contains("no num_attention_heads"));
    CHECK_THROWS_WITH(read_model_config(write("twice.json", R"({"num_attention_heads": 8, "num_attention_heads": 4})")),
                      Contains("key 'num_attention_heads' is given twice"));
    CHECK_THROWS_WITH(read_model_config((dir / "absent.json").string()), Contains("file not found"));
    CHECK_FALSE(read_model_config("").num_q_heads);
}

TEST_CASE("read_model_config: text_config, GPT-2 names, multi-query, conflicts", "[frontend]")
{
    const config_folder folder("ap_model_config_families");
    auto write = [&](const std::string& name, const std::string& text) { return folder.write(name, text); };
    auto layout = [](const layout_counts& c) {
        return std::make_tuple(c.num_q_heads.value_or(0), c.num_k_heads.value_or(0), c.num_layers.value_or(0));
    };
    using counts3 = std::tuple<std::size_t, std::size_t, std::size_t>;
    // A multimodal config (LLaVA, Gemma 3): the language model's counts are in text_config; the
    // top level's own keys (here the vision tower's in vision_config) are not read.
    CHECK(layout(read_model_config(write(
              "llava.json", R"({"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", )"
                            R"("vision_config": {"num_attention_heads": 16, "num_hidden_layers": 24}, )"
                            R"("text_config": {"model_type": "llama", "num_attention_heads": 32, )"
                            R"("num_key_value_heads": 8, "num_hidden_layers": 40}})")))
          == counts3{32, 8, 40});
    // The same counts at the top and in text_config agree; different ones are refused, naming both.
    CHECK(layout(read_model_config(write("both.json", R"({"num_attention_heads": 16, "num_key_value_heads": 2, )"
                                                      R"("text_config": {"num_attention_heads": 16}})")))
          == counts3{16, 2, 0});
    CHECK_THROWS_WITH(read_model_config(write("clash.json", R"({"num_attention_heads": 16, )"
                                                            R"("text_config": {"num_attention_heads": 32}})")),
                      Contains("clash.json: text_config.num_attention_heads says 32 but num_attention_heads says 16"));
    // GPT-2: n_head, n_layer (n_embd is not a count); no multi-query: as many key heads.
    CHECK(layout(read_model_config(write("gpt2.json", R"({"model_type": "gpt2", "n_head": 12, "n_layer": 12, )"
                                                      R"("n_embd": 768})")))
          == counts3{12, 12, 12});
    CHECK_THROWS_WITH(read_model_config(write("alias.json", R"({"n_head": 12, "num_attention_heads": 16})")),
                      Contains("alias.json: num_attention_heads says 16 but n_head says 12"));
    // GPT-BigCode: multi_query (its default) means one key head.
    CHECK(layout(read_model_config(write("santacoder.json", R"({"model_type": "gpt_bigcode", "n_head": 16, )"
                                                            R"("n_layer": 24, "multi_query": true})")))
          == counts3{16, 1, 24});
    CHECK(layout(read_model_config(write("bigcode_default.json", R"({"model_type": "gpt_bigcode", "n_head": 16})")))
          == counts3{16, 1, 0});
    CHECK(layout(read_model_config(write("bigcode_mha.json", R"({"model_type": "gpt_bigcode", "n_head": 16, )"
                                                             R"("multi_query": false})")))
          == counts3{16, 16, 0});
    CHECK_THROWS_WITH(read_model_config(write("mq_clash.json", R"({"num_attention_heads": 8, "multi_query": true, )"
                                                               R"("num_key_value_heads": 4})")),
                      Contains("mq_clash.json: multi_query is true (one key head) but num_key_value_heads says 4"));
    // Falcon-7B as transformers saves it: multi_query wins over num_kv_heads (kept = 71).
    CHECK(layout(read_model_config(write("falcon7b.json", R"({"model_type": "falcon", "num_attention_heads": 71, )"
                                                          R"("num_kv_heads": 71, "multi_query": true, )"
                                                          R"("new_decoder_architecture": false, "num_hidden_layers": 32})")))
          == counts3{71, 1, 32});
    // Falcon-40B: the new decoder architecture reads num_kv_heads (old name n_head_kv).
    CHECK(layout(read_model_config(write("falcon40b.json", R"({"model_type": "falcon", "num_attention_heads": 128, )"
                                                           R"("num_kv_heads": 8, "new_decoder_architecture": true, )"
                                                           R"("num_hidden_layers": 60})")))
          == counts3{128, 8, 60});
    CHECK(layout(read_model_config(write("rw40b.json", R"({"model_type": "falcon", "n_head": 128, "n_head_kv": 8, )"
                                                       R"("new_decoder_architecture": true, "n_layer": 60})")))
          == counts3{128, 8, 60});
    CHECK_THROWS_WITH(read_model_config(write("mq_text.json", R"({"multi_query": "yes please", "n_head": 4})")),
                      Contains("mq_text.json: multi_query: expected true or false"));
    CHECK_THROWS_WITH(read_model_config(write("text_list.json", R"({"text_config": [1, 2]})")),
                      Contains("text_list.json: text_config: expected a JSON object"));
    CHECK_THROWS_WITH(read_model_config(write("text_twice.json", R"({"text_config": {"n_head": 4, "n_head": 8}})")),
                      Contains("key 'text_config.n_head' is given twice"));
    CHECK_THROWS_WITH(read_model_config(write("vision_only.json", R"({"vision_config": {"num_attention_heads": 16}})")),
                      Contains("vision_only.json: no num_attention_heads (nor n_head"));
    }

TEST_CASE("resolve_layout: contradictions, folders outside the layout, GQA divisibility", "[frontend]")
{
    CHECK_THROWS_WITH(resolve_layout(grid(1, 4, 2), counts(std::nullopt, 4, 2), counts(std::nullopt, 8, 2)),
                      Contains("num_q_heads: --num-q-heads (or the --config file) says 4 but DUMP/metadata.json says 8"));
    CHECK_THROWS_WITH(resolve_layout(grid(2, 4, 2), counts(1, 4, 2), {}),
                      Contains("folder 'l01h00q' is outside the layout (num_layers = 1, layers 0)"));
    CHECK_THROWS_WITH(resolve_layout(grid(1, 4, 2), counts(1, 3, 1), {}),
                      Contains("folder 'l00h03q' is outside the layout (num_q_heads = 3, heads 0-2)"));
    // The counts named are the ones given, with where they come from.
    CHECK_THROWS_WITH(resolve_layout(grid(1, 4, 2), counts(1, 4, 3), {}),
                      Contains("num_q_heads (4, given) must be a multiple of num_k_heads (3, given)"));
    CHECK_THROWS_WITH(resolve_layout(grid(1, 4, 2), counts(1, std::nullopt, 3), counts(std::nullopt, 4, std::nullopt)),
                      Contains("num_q_heads (4, from metadata.json) must be a multiple of num_k_heads (3, given)"));
    CHECK_THROWS_WITH(resolve_layout(grid(1, 0, 2), {}, {}), Contains("no query folders"));
}

TEST_CASE("plan_heads: present heads, selection, key heads", "[frontend]")
{
    dump_scan scan = grid(2, 4, 2);
    scan.query.erase(scan.query.begin() + 1);  // (0, 1) not captured
    const dump_layout layout = resolve_layout(scan, counts(std::nullopt, 4, 2), {});
    head_selection all;
    const head_plan plan = plan_heads(scan, layout, all);
    REQUIRE(plan.heads.size() == 7);
    CHECK(plan.layout_heads == 8);
    CHECK(plan.present_heads == 7);
    CHECK(plan.heads[1].layer == 0);
    CHECK(plan.heads[1].q_head == 2);
    CHECK(plan.heads[1].k_head == 1);
    head_selection some;
    some.layers = parse_index_set("--layers", "1", 9999);
    some.q_heads = parse_index_set("--heads", "1-3", 9999);
    const head_plan selected = plan_heads(scan, layout, some);
    REQUIRE(selected.heads.size() == 3);
    CHECK(selected.selected_heads == 3);
    CHECK(selected.heads[0].q_head == 1);
    head_selection outside;
    outside.layers = parse_index_set("--layers", "0,2", 9999);
    CHECK_THROWS_WITH(plan_heads(scan, layout, outside), Contains("--layers: layer 2 is outside the layout (2 layers: 0-1)"));
    head_selection absent;
    absent.layers = parse_index_set("--layers", "0", 9999);
    absent.q_heads = parse_index_set("--heads", "1", 9999);
    CHECK_THROWS_WITH(plan_heads(scan, layout, absent),
                      Contains("the selection --layers 0 --heads 1 matches no query head present in 'DUMP' (query folders "
                               "are present in layers 0,1)"));
}

TEST_CASE("option table: flags and YAML set the same keys, errors name the option as written", "[frontend]")
{
    CHECK(flag_of("num_pairs_per_bucket") == "--num-pairs-per-bucket");
    const char* argv[] = {"ap_analyze", "--data-root", "D", "--seed=7", "--layers", "0-1", "--seed", "9"};
    const auto config = parse_analyze_command_line(8, argv);
    REQUIRE(config);
    CHECK(config->data_root == "D");
    CHECK(config->options.seed == 9);  // a later flag overrides an earlier one
    CHECK(config->selection.layers->text() == "0,1");  // two indices: canonically "0,1"
    analyze_config c;
    apply_yaml(c, analyze_options(), "heads: [0-1, 5]\nseed: 3\n", "f.yaml");
    CHECK(c.selection.q_heads->text() == "0,1,5");
    CHECK(c.selection.heads_label == "f.yaml: heads");
    CHECK(c.options.seed == 3);
    CHECK_THROWS_WITH(apply_yaml(c, analyze_options(), "seed: 1\nseed: 2\n", "f.yaml"), Contains("f.yaml: seed: given twice"));
    CHECK_THROWS_WITH(apply_yaml(c, analyze_options(), "seed: [1]\n", "f.yaml"),
                      Contains("f.yaml: seed: expected a single value"));
    CHECK_THROWS_WITH(apply_yaml(c, analyze_options(), "heads: []\n", "f.yaml"), Contains("f.yaml: heads: empty list"));
    const char* bad[] = {"ap_analyze", "--data-root", "D", "--num_q_heads", "4"};
    CHECK_THROWS_WITH(parse_analyze_command_line(5, bad), Contains("did you mean --num-q-heads?"));
    const char* help[] = {"ap_analyze", "--seed", "1", "--help"};
    CHECK_FALSE(parse_analyze_command_line(4, help));
}

TEST_CASE("option table: the extensions of docs/method.md §8, their defaults and bounds", "[frontend]")
{
    const char* plain[] = {"ap_analyze", "--data-root", "D"};
    const auto defaults = parse_analyze_command_line(3, plain);
    REQUIRE(defaults);
    // ap_analyze: the distance map and the intervals on, the empirical AP off.
    CHECK(defaults->options.distance_map);
    CHECK(defaults->options.confidence_intervals);
    CHECK_FALSE(defaults->options.empirical_ap);
    CHECK(defaults->options.confidence_level == 0.95);
    CHECK(defaults->options.distance_bins_per_octave == 1);
    const char* argv[] = {"ap_analyze", "--data-root", "D", "--empirical-ap", "on", "--confidence-intervals=off",
                          "--distance-map", "off", "--empirical-max-queries", "500", "--distance-map-extra-pairs",
                          "64", "--distance-bins-per-octave", "4", "--confidence-level", "0.8"};
    const auto config = parse_analyze_command_line(static_cast<int>(sizeof argv / sizeof argv[0]), argv);
    REQUIRE(config);
    CHECK(config->options.empirical_ap);
    CHECK_FALSE(config->options.confidence_intervals);
    CHECK_FALSE(config->options.distance_map);
    CHECK(config->options.empirical_max_queries == 500);
    CHECK(config->options.distance_map_extra_pairs == 64);
    CHECK(config->options.distance_bins_per_octave == 4);
    CHECK(config->options.confidence_level == 0.8);
    analyze_config c;
    apply_yaml(c, analyze_options(), "empirical_ap: on\nconfidence_level: 0.9\n", "f.yaml");
    CHECK(c.options.empirical_ap);
    CHECK(c.options.confidence_level == 0.9);
    CHECK_THROWS_WITH(apply_yaml(c, analyze_options(), "empirical_ap: yes\n", "f.yaml"),
                      Contains("f.yaml: empirical_ap: 'yes' is not on or off"));
    const char* level[] = {"ap_analyze", "--data-root", "D", "--confidence-level", "1"};
    CHECK_THROWS_WITH(parse_analyze_command_line(5, level), Contains("--confidence-level: 1 is not strictly between 0 and 1"));
    const char* bins[] = {"ap_analyze", "--data-root", "D", "--distance-bins-per-octave", "0"};
    CHECK_THROWS_WITH(parse_analyze_command_line(5, bins), Contains("--distance-bins-per-octave"));
}

TEST_CASE("result sets: the run identity tells a gone process from a live one", "[frontend]")
{
    const process_identity& self = this_process();
    const auto parsed = parse_process_token(self.token());
    REQUIRE(parsed);
    CHECK(parsed->pid == self.pid);
    CHECK(parsed->start_ticks == self.start_ticks);
    CHECK(parsed->host == self.host);
    CHECK_FALSE(process_is_gone(self));
    process_identity other = self;
    other.start_ticks += 1;  // the pid now belongs to another process
    CHECK(process_is_gone(other));
    other = self;
    other.boot_id = "00000000";
    CHECK(process_is_gone(other));
    other = self;
    other.pid = 4194304 + 17;  // above Linux's largest pid
    CHECK(process_is_gone(other));
    other = self;
    other.host = "some-other-host";
    other.pid = 4194304 + 17;
    CHECK_FALSE(process_is_gone(other));  // never decided for another host
    CHECK_FALSE(parse_process_token("12-34-abcd"));
    CHECK_FALSE(parse_process_token("x-34-abcd-host"));
    CHECK_FALSE(parse_process_token("1234567890123-34-abcd-host"));
    const auto dashed = parse_process_token("12-34-abcd-node-7.cluster");
    REQUIRE(dashed);
    CHECK(dashed->host == "node-7.cluster");
    // The second and later sets of one process: "~N" after the host.
    const auto later = parse_process_token("12-34-abcd-node-7.cluster~3");
    REQUIRE(later);
    CHECK(later->host == "node-7.cluster");
    CHECK(later->token() == dashed->token());
    CHECK_FALSE(parse_process_token("12-34-abcd-host~"));
    CHECK_FALSE(parse_process_token("12-34-abcd-host~x"));
}

namespace
{
/// A text of a value other than `value` (the option's default), inside every option's domain.
std::string other_value_text(const head_option_value& value)
{
    struct other
    {
        std::string operator()(std::uint64_t v) const { return std::to_string(v + 1); }
        std::string operator()(std::int64_t v) const { return std::to_string(v + 7); }
        std::string operator()(double v) const { return v == 0.5 ? "0.25" : "0.5"; }
        std::string operator()(bool v) const { return v ? "off" : "on"; }
        std::string operator()(const std::string& v) const { return v == "sequence" ? "token" : "sequence"; }
    };
    return std::visit(other{}, value);
}

/// The rows of the markdown table that starts after the line starting with `intro`, in
/// docs/method.md, whose first cell is a backquoted name (the table ends at its first line that is
/// not a row).
std::vector<std::string> documented_table_lines(const std::string& intro)
{
    std::ifstream in(std::string(AP_DOCS_DIR) + "/method.md");
    REQUIRE(in);
    std::vector<std::string> lines;
    std::string line;
    bool found = false;
    while (std::getline(in, line))
    {
        if (!found)
        {
            found = line.rfind(intro, 0) == 0;
            continue;
        }
        if (line.rfind("| `", 0) == 0)
        {
            lines.push_back(line);
        }
        else if (!lines.empty() && line.rfind("|", 0) != 0)
        {
            break;
        }
    }
    REQUIRE(found);
    return lines;
}

/// The backquoted name of a documented_table_lines row's first cell.
std::string documented_name(const std::string& line)
{
    const std::size_t start = 3;  // after "| `"
    return line.substr(start, line.find('`', start) - start);
}

/// The backquoted names of the first cells of that table, in its order.
std::vector<std::string> documented_table_names(const std::string& intro)
{
    std::vector<std::string> names;
    for (const std::string& line : documented_table_lines(intro))
    {
        names.push_back(documented_name(line));
    }
    return names;
}
}  // namespace

TEST_CASE("head option table: each option is set, read and written canonically through its own field",
          "[frontend]")
{
    const attention_plasticity::head_options defaults;
    const dump_layout layout{2, 4, 2, "test"};
    analyze_config all;  // every ap_analyze option of the table set to another value
    for (const head_option_spec& option : head_option_table())
    {
        INFO(option.name);
        const std::string text = other_value_text(option.get(defaults));
        attention_plasticity::head_options set = defaults;
        option.set(set, option.name, text);
        // The value read back is the text given, canonical ...
        CHECK(head_option_text(option.get(set)) == text);
        // ... and no other option reads it: each entry has a field of its own.
        for (const head_option_spec& other : head_option_table())
        {
            if (other.name != option.name)
            {
                CHECK(head_option_text(other.get(set)) == head_option_text(other.get(defaults)));
            }
        }
        // ap_analyze has the method's and the extensions' options, and a manifest records them
        // canonically (not "given as", docs/method.md §8.4).
        // (A library option may share its name with a run option: threads.)
        const auto* flag = find_option(analyze_options(), option.name);
        CHECK((flag != nullptr && !is_run_option(option.name)) == (option.group != head_option_group::library));
        if (option.group != head_option_group::library)
        {
            REQUIRE(flag != nullptr);
            CHECK(std::string(flag->help) == head_option_help(option, analyze_default_options()));
            analyze_config config;
            flag->set(config, option.name, text);
            const auto recorded = result_options(config, layout);
            const auto it = std::find_if(recorded.begin(), recorded.end(),
                                         [&](const auto& entry) { return entry.first == option.name; });
            REQUIRE(it != recorded.end());
            CHECK(it->second == text);
            flag->set(all, option.name, text);
        }
    }
    for (const auto& [key, value] : result_options(all, layout))
    {
        INFO(key);
        CHECK(value.rfind("given as", 0) == std::string::npos);
        CHECK(value != "(default)");
    }
    // covariance_epsilon, a library option, is recorded too (it changes the numbers).
    analyze_config ridge;
    find_option(head_option_table(), "covariance_epsilon")->set(ridge.options, "covariance_epsilon", "0.5");
    CHECK(result_options(ridge, layout).back() == std::pair<std::string, std::string>("covariance_epsilon", "0.5"));
}

TEST_CASE("head option table: its groups are the options documented in docs/method.md §2 and §8", "[frontend]")
{
    std::map<head_option_group, std::vector<std::string>> groups;
    for (const head_option_spec& option : head_option_table())
    {
        groups[option.group].push_back(option.name);
    }
    // §2's parameters table, but its ridge (a library option, below), in the table's order.
    std::vector<std::string> method = documented_table_names("**Parameters**");
    CHECK(groups[head_option_group::method] == method);
    // §8's options, as a set.
    std::vector<std::string> extension = documented_table_names("| option (`head_options` field");
    std::vector<std::string> listed = groups[head_option_group::extension];
    std::sort(extension.begin(), extension.end());
    std::sort(listed.begin(), listed.end());
    CHECK(listed == extension);
    // The library's own, named in §2's sentence after the table.
    std::ifstream in(std::string(AP_DOCS_DIR) + "/method.md");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t start = text.find("Options of the library only (`HeadOptions`), not of the driver:");
    REQUIRE(start != std::string::npos);
    const std::string sentence = text.substr(start, text.find(". With", start) - start);
    std::vector<std::string> library;
    for (std::size_t at = sentence.find("driver:"); (at = sentence.find('`', at)) != std::string::npos;)
    {
        const std::size_t end = sentence.find('`', at + 1);
        library.push_back(sentence.substr(at + 1, end - at - 1));
        at = end + 1;
    }
    CHECK(groups[head_option_group::library] == library);
}

namespace
{
/// The default a help text states: the text in the brackets that end it ("... [0.05]"), or "".
std::string stated_default(const std::string& help)
{
    if (help.empty() || help.back() != ']')
    {
        return "";
    }
    const std::size_t open = help.rfind('[');
    return open == std::string::npos ? "" : help.substr(open + 1, help.size() - open - 2);
}

/// Everything an analyze_config holds that an option sets, as text (but `given`, the record of
/// what was set).
std::vector<std::string> analyze_fingerprint(const analyze_config& c)
{
    std::vector<std::string> out = {c.data_root, c.model_config, c.output_dir, std::to_string(c.threads),
                                    c.shard ? std::to_string(c.shard->index) + "/" + std::to_string(c.shard->count)
                                            : "none",
                                    c.selection.layers ? c.selection.layers->text() : "all",
                                    c.selection.q_heads ? c.selection.q_heads->text() : "all"};
    for (const auto* count : {&c.layout.num_layers, &c.layout.num_q_heads, &c.layout.num_k_heads})
    {
        out.push_back(*count ? std::to_string(**count) : "unset");
    }
    for (const head_option_spec& option : head_option_table())
    {
        out.push_back(option.name + std::string("=") + head_option_text(option.get(c.options)));
    }
    return out;
}

std::vector<std::string> compare_fingerprint(const compare_config& c)
{
    std::vector<std::string> out = {c.output_dir, attention_plasticity::io::format_number(c.options.alpha),
                                    c.options.common_heads ? "on" : "off", c.options.same_dump ? "on" : "off",
                                    c.options.design == compare_design::paired ? "paired" : "unpaired"};
    out.insert(out.end(), c.options.names.begin(), c.options.names.end());
    return out;
}

/// Each option of `table` whose help states a default ("[X]") is set to X on a fresh `Config`:
/// nothing changes (the stated default is the real one). An option whose stated default is not
/// a value it takes ("[all]", "[metadata.json, ...]") must be in `described`.
template <class Config, class Fingerprint>
void check_stated_defaults(const option_table<Config>& table, Fingerprint fingerprint,
                           const std::vector<std::string>& described, std::size_t values)
{
    const auto fresh = fingerprint(Config{});
    std::size_t checked = 0;
    for (const auto& option : table)
    {
        INFO(option.name << ": " << option.help);
        const std::string stated = stated_default(option.help);
        const bool is_described = std::find(described.begin(), described.end(), option.name) != described.end();
        if (stated.empty() || is_described)
        {
            CHECK_FALSE(stated.empty() == is_described);  // a described default is stated
            continue;
        }
        Config config;
        option.set(config, option.name, stated);
        CHECK(fingerprint(config) == fresh);
        ++checked;
    }
    CHECK(checked == values);
}
}  // namespace

TEST_CASE("option tables: every default a help text states is the real one", "[frontend]")
{
    // ap_analyze (its --help): each value stated is the default of a default-constructed config.
    check_stated_defaults(analyze_options(), analyze_fingerprint,
                          {"num_layers", "num_q_heads", "num_k_heads", "layers", "heads", "shard"}, 20);
    // ... its head options' defaults are rendered from analyze_default_options() (not typed), so
    // confidence_intervals shows [on] there and [off] in HeadOptions' docstrings (head_options{}).
    CHECK_THAT(find_option(analyze_options(), "confidence_intervals")->help, Catch::Matchers::EndsWith("(§8.3) [on]"));
    const auto* intervals = find_option(head_option_table(), "confidence_intervals");
    CHECK(head_option_help(*intervals, attention_plasticity::head_options{})
          == "standard errors, bias and intervals of AP_j and ap_* (§8.3) [off]");
    // the analysis' own defaults are the library's but the intervals (docs/method.md §8.3)
    const attention_plasticity::head_options library;
    for (const head_option_spec& option : head_option_table())
    {
        INFO(option.name);
        CHECK((head_option_text(option.get(library)) == head_option_text(option.get(analyze_default_options())))
              == (option.name != std::string("confidence_intervals")));
    }
    // ap_compare
    check_stated_defaults(compare_option_table(), compare_fingerprint, {}, 4);
    // A planted wrong default is caught: the check above fails on it.
    compare_config planted;
    compare_option_table()[2].set(planted, "alpha", "0.1");
    CHECK(compare_fingerprint(planted) != compare_fingerprint(compare_config{}));
}

namespace
{
/// The cells of the rows of the markdown table after the line starting with `intro` in
/// docs/method.md whose first cell is a backquoted name: name -> cells (the first one included).
std::map<std::string, std::vector<std::string>> documented_table_rows(const std::string& intro)
{
    std::map<std::string, std::vector<std::string>> rows;
    for (const std::string& line : documented_table_lines(intro))
    {
        std::vector<std::string> cells;
        for (std::size_t at = 1, bar; (bar = line.find(" |", at)) != std::string::npos; at = bar + 2)
        {
            cells.push_back(trim(line.substr(at, bar - at)));
        }
        rows[documented_name(line)] = cells;
    }
    return rows;
}

/// Whether a default as docs/method.md writes it ("0.05", "on", "sequence", "$10^{-12}$") is `value`.
bool documents(const std::string& cell, const head_option_value& value)
{
    if (const double* real = std::get_if<double>(&value))
    {
        return std::strtod(cell.c_str(), nullptr) == *real;
    }
    return cell == head_option_text(value);
}
}  // namespace

TEST_CASE("docs/method.md states the real defaults: §2's parameters, §8's library and ap_analyze columns",
          "[frontend]")
{
    const attention_plasticity::head_options library;
    const auto parameters = documented_table_rows("**Parameters**");
    const auto extensions = documented_table_rows("| option (`head_options` field");
    std::size_t checked = 0;
    for (const head_option_spec& option : head_option_table())
    {
        INFO(option.name);
        if (const auto row = parameters.find(option.name); row != parameters.end())
        {
            REQUIRE(row->second.size() == 3);  // name, meaning, default (the library's and ap_analyze's)
            CHECK(documents(row->second[2], option.get(library)));
            CHECK(documents(row->second[2], option.get(analyze_default_options())));
            ++checked;
        }
        if (const auto row = extensions.find(option.name); row != extensions.end())
        {
            REQUIRE(row->second.size() == 5);  // option, what, library default, ap_analyze default, cost
            CHECK(documents(row->second[2], option.get(library)));
            CHECK(documents(row->second[3], option.get(analyze_default_options())));
            ++checked;
        }
    }
    CHECK(checked == 7 + 11);
    CHECK_FALSE(documents("on", head_option_value(false)));  // a wrong statement is seen
    CHECK_FALSE(documents("0.5", head_option_value(0.05)));
}

namespace
{
/// Whether option `option` of `table` takes `text` (set on a fresh Config).
template <class Config>
bool takes(const option_spec<Config>& option, const std::string& text)
{
    Config config;
    try
    {
        option.set(config, option.name, text);
        return true;
    }
    catch (const usage_error&)
    {
        return false;
    }
}

/// Each domain an option's help or metavar states is the one its setter checks: "in [a, b]"
/// takes a and b and refuses just outside, "in (a, b)" refuses a and b, "A-B" (integers) takes A
/// and B and refuses A - 1 and B + 1, a metavar "x|y" takes each choice and refuses another word.
/// Returns how many domains were checked.
template <class Config>
std::size_t check_stated_domains(const option_table<Config>& table)
{
    std::size_t checked = 0;
    for (const auto& option : table)
    {
        INFO(option.name << ": " << option.help);
        const std::string help = option.help;
        for (const char* open : {"in [", "in ("})
        {
            const std::size_t at = help.find(open);
            if (at == std::string::npos)
            {
                continue;
            }
            const std::size_t comma = help.find(", ", at), close = help.find_first_of("])", comma);
            const std::string low = help.substr(at + 4, comma - at - 4), high = help.substr(comma + 2, close - comma - 2);
            const bool closed = open[3] == '[';
            CHECK(help[close] == (closed ? ']' : ')'));
            const double a = std::stod(low), b = std::stod(high);
            CHECK(takes(option, low) == closed);
            CHECK(takes(option, high) == closed);
            CHECK(takes(option, attention_plasticity::io::format_number((a + b) / 2)));
            CHECK_FALSE(takes(option, attention_plasticity::io::format_number(a - 0.125)));
            CHECK_FALSE(takes(option, attention_plasticity::io::format_number(b + 0.125)));
            ++checked;
        }
        // "..., A-B (§...)": an integer range (not the "e.g. 0-3,7" of a list)
        for (std::size_t at = help.find(", "); at != std::string::npos; at = help.find(", ", at + 1))
        {
            const std::size_t dash = help.find('-', at);
            const std::size_t end = help.find_first_not_of("0123456789", dash + 1);
            if (dash == std::string::npos || dash == at + 2 || end == dash + 1
                || help.find_first_not_of("0123456789", at + 2) != dash || (end < help.size() && help[end] == ','))
            {
                continue;
            }
            const std::uint64_t a = std::stoull(help.substr(at + 2, dash - at - 2));
            const std::uint64_t b = std::stoull(help.substr(dash + 1, end - dash - 1));
            CHECK(takes(option, std::to_string(a)));
            CHECK(takes(option, std::to_string(b)));
            CHECK_FALSE(takes(option, std::to_string(b + 1)));
            if (a > 0)
            {
                CHECK_FALSE(takes(option, std::to_string(a - 1)));
            }
            ++checked;
        }
        const std::string metavar = option.metavar;
        if (metavar.find('|') != std::string::npos)
        {
            for (std::size_t start = 0;;)
            {
                const std::size_t bar = metavar.find('|', start);
                CHECK(takes(option, metavar.substr(start, bar - start)));
                if (bar == std::string::npos)
                {
                    break;
                }
                start = bar + 1;
            }
            CHECK_FALSE(takes(option, "neither"));
            ++checked;
        }
    }
    return checked;
}
}  // namespace

TEST_CASE("option tables: every domain a help text or metavar states is the one checked", "[frontend]")
{
    // p_alpha, max_rel_dist [0, 1]; confidence_level (0, 1); distance_bins_per_octave 1-1024;
    // six on|off and sampling_unit
    CHECK(check_stated_domains(analyze_options()) == 2 + 1 + 1 + 7);
    // alpha (0, 1); common_heads, same_dump on|off; design auto|paired|unpaired
    CHECK(check_stated_domains(compare_option_table()) == 1 + 3);
    // a planted wrong statement would be seen: alpha's setter refuses 0, so "in [0, 1]" fails the check
    CHECK_FALSE(takes(compare_option_table()[2], "0"));
}
