// Unit tests of io/json.hpp, the project's one JSON home: the strict reader (size, depth,
// repeated keys, NaN and Infinity, bad UTF-8, numbers as written, "---" documents) and the
// writers' quoting, json_string. The expected values are what RFC 8259 and Python's json.loads
// say of each text (json.loads('[9007199254740993]')[0] == 9007199254740993, json.loads(
// '"\\ud83d\\ude00"') == '\U0001F600'); the messages are this reader's own.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <attention_plasticity/io/json.hpp>

namespace io = attention_plasticity::io;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

namespace
{
/// The reason of the input_error parse_json throws for `text` ("(no error)" when none).
std::string reason_of(const std::string& text, const io::json_limits& limits = {})
{
    try
    {
        (void)io::parse_json(text, "f.json", limits);
    }
    catch (const io::input_error& e)
    {
        CHECK(e.file() == "f.json");
        return e.reason();
    }
    return "(no error)";
}
}  // namespace

TEST_CASE("json: values as RFC 8259 reads them, keys in their order, integers exact", "[json]")
{
    const io::json_document d = io::parse_json(
        "\xEF\xBB\xBF {\"z\": 1, \"a\": [true, false, null, \"\\u00e9\\ud83d\\ude00\\n\"], \"m\": -2.5e-3,\n"
        " \"big\": 9007199254740993, \"u64\": 18446744073709551615, \"neg\": -9223372036854775808}",
        "f.json");
    const io::json& v = d.value;
    REQUIRE(v.is_object());
    CHECK(v.begin().key() == "z");  // the order of the text
    CHECK(v["a"][0] == true);
    CHECK(v["a"][2].is_null());
    CHECK(v["a"][3].get<std::string>() == "\xc3\xa9\xf0\x9f\x98\x80\n");
    CHECK(v["m"].get<double>() == -2.5e-3);
    // 2^53 + 1 is no double: read as an integer, exactly.
    CHECK(v["big"].get<std::uint64_t>() == 9007199254740993u);
    CHECK(v["u64"].get<std::uint64_t>() == 18446744073709551615u);
    CHECK(v["neg"].get<std::int64_t>() == INT64_MIN);
    // A float keeps the text it was written with (messages quote it).
    CHECK(d.number_text("/m", v["m"]) == "-2.5e-3");
    CHECK(d.number_text("/big", v["big"]) == "9007199254740993");
    const io::json_document over = io::parse_json("{\"n\": 99999999999999999999, \"x/y\": [0.50]}", "f.json");
    CHECK(over.number_text("/n", over.value["n"]) == "99999999999999999999");
    CHECK(over.number_text("/x~1y/0", over.value["x/y"][0]) == "0.50");
    CHECK(io::json_scalar_text(io::json("s")) == "s");
    CHECK(io::json_scalar_text(io::json(true)) == "true");
    CHECK(io::json_scalar_text(io::json(12)) == "12");
    CHECK(io::json_scalar_text(io::json::array()).empty());
    // White space only reads as null (the readers then say that they expected an object).
    CHECK(io::parse_json(" \n", "f.json").value.is_null());
}

TEST_CASE("json: a key given twice is refused at any depth, naming its path", "[json]")
{
    CHECK_THAT(reason_of("{\"a\": 1, \"a\": 1}"), Equals("key 'a' is given twice; keep one value"));
    CHECK_THAT(reason_of("{\"t\": {\"n\": 4, \"n\": 8}}"), Equals("key 't.n' is given twice; keep one value"));
    CHECK_THAT(reason_of("{\"a\": {\"b\": [1, {\"c\": 1, \"c\": 2}]}}"),
               Equals("key 'a.b[1].c' is given twice; keep one value"));
    // The same key in two objects is no repetition.
    CHECK(reason_of("[{\"a\": 1}, {\"a\": 2}]") == "(no error)");
}

TEST_CASE("json: not JSON is refused with the parser's place and words", "[json]")
{
    CHECK_THAT(reason_of("[NaN]"), StartsWith("not valid JSON: line 1, column 2: "));
    CHECK_THAT(reason_of("[Infinity]"), StartsWith("not valid JSON: line 1, column 2: "));
    CHECK_THAT(reason_of("[-Infinity]"), StartsWith("not valid JSON: line 1, column 3: "));
    CHECK_THAT(reason_of("[1e400]"), Equals("not valid JSON: number overflow parsing '1e400'"));
    CHECK_THAT(reason_of("{\"a\": 1} // note"), StartsWith("not valid JSON: line 1, column 10: "));
    CHECK_THAT(reason_of("{\"a\": 1,}"), StartsWith("not valid JSON: line 1, column 9: "));
    CHECK_THAT(reason_of("{'a': 1}"), StartsWith("not valid JSON: line 1, column 2: "));
    CHECK_THAT(reason_of("[\"\xff\"]"), StartsWith("not valid JSON: line 1, column 3: "));          // bad UTF-8
    CHECK_THAT(reason_of("[\"\xed\xa0\x80\"]"), StartsWith("not valid JSON: line 1, column 4: "));  // a surrogate
    // A raw newline in a string (nlohmann places it at column 0 of the next line).
    CHECK_THAT(reason_of("[\"a\nb\"]"), StartsWith("not valid JSON: line 2, column 0: "));
    CHECK_THAT(reason_of(std::string("[1]\0", 4)), Equals("not valid JSON: it holds a NUL byte"));
    CHECK_THAT(reason_of("{\"a\": 1}\n---\n{}\n---\n{}"), Equals("holds 3 YAML documents (separated by '---'); give one"));
    // "---" that does not follow a whole JSON value is a syntax error, not a second document.
    CHECK_THAT(reason_of("{\"a\":\n---\n1}"), StartsWith("not valid JSON: line 2, column "));
}

TEST_CASE("json: size and depth are bounded, never a stack overflow", "[json]")
{
    io::json_limits small;
    small.max_bytes = 8;
    CHECK_THAT(reason_of("[1, 2, 3, 4]", small), Equals("12 bytes; a JSON text read may have at most 8"));
    CHECK(reason_of("[1, 22]", small) == "(no error)");
    // 64 levels below the top-level value are read; the 65th is refused where it opens.
    CHECK(reason_of(std::string(65, '[') + std::string(65, ']')) == "(no error)");
    CHECK_THAT(reason_of(std::string(66, '[') + std::string(66, ']')),
               Equals("not valid JSON: line 1, column 66: values nested deeper than 64 levels"));
    // Brackets in strings do not count: the 65th '[' is at byte 82.
    CHECK_THAT(reason_of("{\"a\": \"[[[\", \"b\": " + std::string(1000000, '[')),
               Equals("not valid JSON: line 1, column 83: values nested deeper than 64 levels"));
}

TEST_CASE("json_string: escapes, UTF-8 kept, other bytes replaced", "[json]")
{
    using io::json_string;
    CHECK(json_string("plain") == "\"plain\"");
    CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
    CHECK(json_string(std::string("x\ny\t\x01\x7f", 6)) == "\"x\\u000ay\\u0009\\u0001\\u007f\"");
    CHECK(json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    const std::string r = "\xef\xbf\xbd";  // U+FFFD
    CHECK(json_string("\xff\xc3(\xc2\x85\xed\xa0\x80\xe0\x80\xaf") == "\"" + r + r + "(" + r + r + r + r + r + r + r + r + "\"");
    CHECK(json_string(r) == "\"" + r + "\"");
    // What json_string writes, the reader reads back as the text (valid UTF-8 kept).
    const std::string text = std::string("a\"\\\n\x01\x7f \xc3\xa9", 10);
    CHECK(io::parse_json(json_string(text), "f.json").value.get<std::string>() == text);
}
