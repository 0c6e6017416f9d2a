// Unit tests of the dump folder format in the io layer (io/dump_folder.hpp): metadata.json read
// by the project's JSON reader (io/json.hpp), the scan of a data root, errors as io::input_error; and the run
// layer's view of them (run/dump_layout.hpp), the same messages as usage errors (exit status 2).
// The expected counts of each metadata text are what Python's json.loads gives for it.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <attention_plasticity/io/dump_folder.hpp>
#include <attention_plasticity/io/durable_files.hpp>
#include <attention_plasticity/run/dump_layout.hpp>
#include <attention_plasticity/run/errors.hpp>

#include "run_files.hpp"

namespace io = attention_plasticity::io;
namespace run = attention_plasticity::run;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

namespace
{
/// The message of the usage error run::parse_dump_metadata throws for `text`.
std::string run_message(const std::string& text)
{
    try
    {
        (void)run::parse_dump_metadata(text, "m.json");
    }
    catch (const run::usage_error& e)
    {
        return e.what();
    }
    return "(no error)";
}
}  // namespace

TEST_CASE("dump metadata: the counts of a JSON object, other keys skipped whatever they hold", "[dump_folder]")
{
    // json.loads: {'num_layers': 2, 'model': 'a "b"\\é', 'shape': [1, {'x': [None, True]}], ...}
    const io::layout_counts c = io::parse_dump_metadata(
        "\xEF\xBB\xBF { \"num_layers\" : 2, \"model\": \"a \\\"b\\\"\\\\\\u00e9\\ud83d\\ude00\", "
        "\"shape\": [1, {\"x\": [null, true]}], \"num_q_heads\": \"8\",\n\t\"ratio\": -1.5e-3, "
        "\"num_k_heads\": 2, \"empty\": {}, \"none\": []}\n",
        "m.json");
    CHECK(c.num_layers == std::optional<std::size_t>(2));
    CHECK(c.num_q_heads == std::optional<std::size_t>(8));  // a quoted number, as before
    CHECK(c.num_k_heads == std::optional<std::size_t>(2));
    const io::layout_counts none = io::parse_dump_metadata("{\"num_layers\": null, \"capture\": \"x\"}", "m.json");
    CHECK_FALSE(none.num_layers);
    CHECK_FALSE(none.num_q_heads);
    CHECK_FALSE(none.num_k_heads);
    CHECK_FALSE(io::parse_dump_metadata("{}", "m.json").num_layers);
}

TEST_CASE("dump metadata: io errors name the file, and the run layer's say 'metadata FILE' as before", "[dump_folder]")
{
    CHECK_THROWS_MATCHES(io::parse_dump_metadata("[1, 2]", "d/metadata.json"), io::input_error,
                         Catch::Matchers::Predicate<io::input_error>([](const io::input_error& e) {
                             return e.file() == "d/metadata.json"
                                    && e.reason() == "expected a JSON object ({\"num_layers\": ..., ...})";
                         }));
    // The messages of the run layer, word for word as the YAML-based reader gave them.
    CHECK_THAT(run_message("[1, 2]"), Equals("metadata m.json: expected a JSON object ({\"num_layers\": ..., ...})"));
    CHECK_THAT(run_message(""), Equals("metadata m.json: expected a JSON object ({\"num_layers\": ..., ...})"));
    CHECK_THAT(run_message("{\"num_q_heads\": 4, \"num_q_heads\": 8}"),
               Equals("metadata m.json: key 'num_q_heads' is given twice; keep one value"));
    CHECK_THAT(run_message("{\"num_layers\": [2]}"), Equals("metadata m.json: num_layers: expected a number"));
    CHECK_THAT(run_message("{\"num_layers\": 0}"), Equals("metadata m.json: num_layers: 0 must be >= 1 and <= 10000"));
    CHECK_THAT(run_message("{\"num_k_heads\": 10001}"),
               Equals("metadata m.json: num_k_heads: 10001 must be >= 1 and <= 10000"));
    CHECK_THAT(run_message("{\"num_k_heads\": 12345678901234567890}"),
               Equals("metadata m.json: num_k_heads: 12345678901234567890 must be >= 1 and <= 10000"));
    CHECK_THAT(run_message("{\"num_k_heads\": 99999999999999999999}"),
               Equals("metadata m.json: num_k_heads: '99999999999999999999' is out of range"));
    CHECK_THAT(run_message("{\"num_q_heads\": 2.5}"),
               Equals("metadata m.json: num_q_heads: '2.5' is not a non-negative integer"));
    CHECK_THAT(run_message("{\"num_q_heads\": -2}"),
               Equals("metadata m.json: num_q_heads: '-2' is not a non-negative integer"));
    CHECK_THAT(run_message("{\"num_q_heads\": true}"),
               Equals("metadata m.json: num_q_heads: 'true' is not a non-negative integer"));
    CHECK_THAT(run_message("{\"num_q_heads\": \"\"}"),
               Equals("metadata m.json: num_q_heads: missing value (expected an integer)"));
    CHECK_THAT(run_message(std::string("{\"a\": 1}\0", 9)), Equals("metadata m.json: not valid JSON: it holds a NUL byte"));
    // Not JSON: the reader says where (the words after "line L, column C: " are nlohmann/json's).
    CHECK_THAT(run_message("{\"num_layers\": 2"),
               Equals("metadata m.json: not valid JSON: line 1, column 17: syntax error while parsing object - "
                      "unexpected end of input; expected '}'"));
    CHECK_THAT(run_message("{\"a\": 1,\n \"b\": x}"),
               Equals("metadata m.json: not valid JSON: line 2, column 7: syntax error while parsing value - "
                      "invalid literal; last read: '\"b\": x'"));
    CHECK_THAT(run_message("{\"a\": 1} {}"),
               Equals("metadata m.json: not valid JSON: line 1, column 10: syntax error while parsing value - "
                      "unexpected '{'; expected end of input"));
    // Documents after the first, as YAML separates them: said as the YAML-based reader said it.
    CHECK_THAT(run_message("{\"num_q_heads\": 4}\n---\n{\"num_q_heads\": 8}\n"),
               Equals("metadata m.json: holds 2 YAML documents (separated by '---'); give one"));
    CHECK_THAT(run_message("{\"a\": 1}\n---\n{}\n---\n{}"),
               Equals("metadata m.json: holds 3 YAML documents (separated by '---'); give one"));
    CHECK_THAT(run_message("{\"a\": 01}"), StartsWith("metadata m.json: not valid JSON: line 1, column 8"));  // after the 0
    CHECK_THAT(run_message("{\"a\": \"\\q\"}"), StartsWith("metadata m.json: not valid JSON: "));
    // A key given twice is refused at any depth (json.hpp), NaN is not JSON.
    CHECK_THAT(run_message("{\"capture\": {\"x\": 1, \"x\": 2}}"),
               Equals("metadata m.json: key 'capture.x' is given twice; keep one value"));
    CHECK_THAT(run_message("{\"num_layers\": NaN}"), StartsWith("metadata m.json: not valid JSON: line 1, column 16: "));
    // Nesting is bounded: a deep array is refused, never a stack overflow.
    CHECK_THAT(run_message("{\"a\": " + std::string(100000, '[') + "}"),
               Equals("metadata m.json: not valid JSON: line 1, column 71: values nested deeper than 64 levels"));
}

TEST_CASE("dump metadata: read from the data root's metadata.json, none when absent", "[dump_folder]")
{
    ap_test::temp_folder root("dump_folder_meta");
    CHECK_FALSE(io::read_dump_metadata(root.path.string()).num_q_heads);
    const std::string meta = (root.path / "metadata.json").string();
    ap_test::write_text(meta, "{\"num_layers\": 3, \"num_q_heads\": 4, \"num_k_heads\": 1}");
    const io::layout_counts c = io::read_dump_metadata(root.path.string());
    CHECK(c.num_layers == std::optional<std::size_t>(3));
    CHECK(c.num_q_heads == std::optional<std::size_t>(4));
    CHECK(c.num_k_heads == std::optional<std::size_t>(1));
    std::filesystem::remove(meta);
    std::filesystem::create_directory(meta);
    CHECK_THROWS_WITH(run::read_dump_metadata(root.path.string()),
                      Equals("metadata " + meta + ": is a folder, not a configuration file"));
    CHECK_THROWS_AS(io::read_dump_metadata(root.path.string()), io::input_error);
}

TEST_CASE("dump scan: the head folders present, and names that cannot be used are input errors", "[dump_folder]")
{
    ap_test::temp_folder root("dump_folder_scan");
    for (const char* name : {"l01h00q", "l00h01q", "l00h00k", "notes", "l00h00x"})
    {
        std::filesystem::create_directory(root.path / name);
    }
    const io::dump_scan scan = io::scan_dump_folder(root.path.string(), "data_root");
    CHECK(scan.query == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 0}});
    CHECK(scan.key == std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}});
    CHECK(scan.has_query(1, 0));
    CHECK_FALSE(scan.has_key(1, 0));

    std::filesystem::create_directory(root.path / "l1h00q");
    std::filesystem::create_directory(root.path / "l000h00q");
    const std::string expected = "data_root: " + (root.path / "l000h00q").string()
                                 + ": not in the dump's format (expected 'l00h00q': numbers two-digit, zero-padded, "
                                   "without further leading zeros) (and 1 more such folders)";
    CHECK_THROWS_MATCHES(io::scan_dump_folder(root.path.string(), "data_root"), io::input_error,
                         Catch::Matchers::Predicate<io::input_error>(
                             [&](const io::input_error& e) { return e.file() == "data_root" && e.what() == expected; }));
    CHECK_THROWS_WITH(run::scan_dump(root.path.string()), Equals(expected));
    CHECK_THROWS_AS(run::scan_dump(root.path.string()), run::usage_error);
    const std::string missing = (root.path / "missing").string();
    CHECK_THROWS_WITH(run::scan_dump(missing), Equals("data_root: '" + missing + "': folder not found"));
    CHECK_THROWS_WITH(io::scan_dump_folder(missing, "dump"), Equals("dump: '" + missing + "': folder not found"));
}

TEST_CASE("dump folder names: the shared list, tests/data/dump_folder_names.txt, as Python reads it too",
          "[dump_folder]")
{
    // The same list is read by tests/python/test_layout_names.py (attention_plasticity.layout).
    std::ifstream in(std::string(AP_RUN_TEST_DATA_DIR) + "/dump_folder_names.txt");
    REQUIRE(in);
    std::string line;
    std::size_t names = 0;
    while (std::getline(in, line))
    {
        if (line.empty() || line[0] == '#')
        {
            continue;
        }
        const auto tab = line.find('\t');
        REQUIRE(tab != std::string::npos);
        const std::string name = line.substr(0, tab);
        const std::string expected = line.substr(tab + 1);
        const io::parsed_folder_name p = io::parse_head_folder_name(name);
        std::string got = "none";
        if (p.is_head_folder && !p.problem.empty())
        {
            got = "problem: " + p.problem;
        }
        else if (p.is_head_folder)
        {
            got = "head " + std::to_string(p.layer) + " " + std::to_string(p.head) + " " + p.kind;
            CHECK(io::head_folder_name(p.layer, p.head, p.kind) == name);  // the writer writes it back
        }
        INFO("name '" << name << "'");
        CHECK(got == expected);
        ++names;
    }
    CHECK(names >= 30);
}

TEST_CASE("durable files: a new file is written whole, never over a name already there", "[dump_folder]")
{
    ap_test::temp_folder root("durable_files");
    const std::string path = (root.path / "a.csv").string();
    io::write_new_file(path, {"x,y\n", "", "1,2\n"});
    CHECK(ap_test::read_text(path) == "x,y\n1,2\n");
    CHECK_THROWS_MATCHES(io::write_new_file(path, {"z"}), io::output_error,
                         Catch::Matchers::Predicate<io::output_error>([&](const io::output_error& e) {
                             return e.file() == path && e.reason() == "cannot create: File exists";
                         }));
    io::replace_with_link("a.csv", (root.path / "link-tmp").string(), (root.path / "b.csv").string());
    CHECK(io::link_text((root.path / "b.csv").string()) == "a.csv");
    CHECK(io::link_text(path).empty());  // a regular file is no link
}
