// io/examples_table.hpp: examples.csv of docs/method.md §1.1, parsed strictly (exact int64 ids,
// 16 lowercase hex digits or empty, errors naming the file, the line and the value) and written
// (rows by example_id); the example -> document table the analysis takes.

#include <cstdint>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include <attention_plasticity/io/examples_table.hpp>

namespace io = attention_plasticity::io;

namespace
{
const std::string header = "example_id,document_id,chunk,fingerprint,document_fingerprint\n";

std::string refusal(const std::string& text)
{
    try
    {
        io::parse_examples_csv(text, "dump/examples.csv");
    }
    catch (const io::input_error& e)
    {
        CHECK(e.file() == "dump/examples.csv");
        return e.what();
    }
    FAIL("not refused: " << text);
    return "";
}
}  // namespace

TEST_CASE("examples_table: rows parsed, sorted by example_id, written back")
{
    const std::string text = header + "22,0,1,00ff00ff00ff00ff,0123456789abcdef\n5,0,0,,0123456789abcdef\n-7,3,0,,\n";
    const io::examples_table t = io::parse_examples_csv(text, "examples.csv");
    REQUIRE(t.rows.size() == 3);
    CHECK(t.rows[0].example_id == -7);
    CHECK(t.rows[0].document_id == 3);
    CHECK(t.rows[1].example_id == 5);
    CHECK(t.rows[1].fingerprint.empty());
    CHECK(t.rows[2].example_id == 22);
    CHECK(t.rows[2].chunk == 1);
    CHECK(t.rows[2].fingerprint == "00ff00ff00ff00ff");
    CHECK(t.rows[2].document_fingerprint == "0123456789abcdef");
    CHECK(t.document_count() == 2);
    CHECK(io::examples_csv_text(t)
          == header + "-7,3,0,,\n5,0,0,,0123456789abcdef\n22,0,1,00ff00ff00ff00ff,0123456789abcdef\n");
    // The analysis's table: example -> document.
    const auto documents = io::documents_of_table(t, "examples.csv");
    REQUIRE(documents.find(22) != nullptr);
    CHECK(*documents.find(22) == 0);
    CHECK(documents.find(6) == nullptr);
    CHECK(documents.source == "examples.csv");
    // No final newline, and a header alone.
    CHECK(io::parse_examples_csv(header + "1,1,0,,", "f").rows.size() == 1);
    CHECK(io::parse_examples_csv(header, "f").rows.empty());
}

TEST_CASE("examples_table: ids near 2^63 are written and read exactly (never through a double)")
{
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    const std::int64_t small = std::numeric_limits<std::int64_t>::min();
    io::example_row a, b, c;
    a.example_id = big;
    a.document_id = big - 1;
    b.example_id = big - 1;  // 2^63 - 2: no double holds it
    b.document_id = small;
    c.example_id = small;
    c.document_id = (std::int64_t{1} << 53) + 1;
    const std::string text = io::examples_csv_text({a, b, c});
    CHECK(text == header + "-9223372036854775808,9007199254740993,0,,\n9223372036854775806,-9223372036854775808,0,,\n"
                           "9223372036854775807,9223372036854775806,0,,\n");
    const io::examples_table t = io::parse_examples_csv(text, "f");
    REQUIRE(t.rows.size() == 3);
    CHECK(t.rows[0].example_id == small);
    CHECK(t.rows[0].document_id == (std::int64_t{1} << 53) + 1);
    CHECK(t.rows[1].example_id == big - 1);
    CHECK(t.rows[1].document_id == small);
    CHECK(t.rows[2].example_id == big);
    CHECK(t.rows[2].document_id == big - 1);
    CHECK(io::examples_csv_text(t) == text);
    // One past the range is refused, not rounded.
    CHECK_THAT(refusal(header + "9223372036854775808,0,0,,\n"),
               Catch::Contains("line 2: example_id '9223372036854775808' is not a 64-bit integer"));
}

TEST_CASE("examples_table: refusals name the file, the line and the value")
{
    CHECK_THAT(refusal("example_id,document_id,chunk,fingerprint\n"),
               Catch::Contains("dump/examples.csv: line 1: header 'example_id,document_id,chunk,fingerprint'"));
    CHECK_THAT(refusal(""), Catch::Contains("line 1: empty"));
    CHECK_THAT(refusal(header + "5,0,0,,\n7,1,0,,\n5,2,0,,\n"),
               Catch::Contains("line 4: example_id 5 has two rows (lines 2 and 4)"));
    CHECK_THAT(refusal(header + "5,0,0,0123456789ABCDEF,\n"),
               Catch::Contains("line 2: fingerprint '0123456789ABCDEF' is not 16 lowercase hex digits"));
    CHECK_THAT(refusal(header + "5,0,0,,0123456789abcde\n"),
               Catch::Contains("line 2: document_fingerprint '0123456789abcde' is not 16 lowercase hex digits"));
    CHECK_THAT(refusal(header + "5,0,0,,0123456789abcdeg\n"), Catch::Contains("'0123456789abcdeg'"));
    CHECK_THAT(refusal(header + "5,0,-1,,\n"), Catch::Contains("line 2: chunk -1 is negative"));
    CHECK_THAT(refusal(header + "5,0,0,\n"), Catch::Contains("line 2: '5,0,0,' has 4 fields, expected 5"));
    CHECK_THAT(refusal(header + "5,0,0,,,\n"), Catch::Contains("has 6 fields"));
    CHECK_THAT(refusal(header + "5.0,0,0,,\n"), Catch::Contains("line 2: example_id '5.0' is not a 64-bit integer"));
    CHECK_THAT(refusal(header + " 5,0,0,,\n"), Catch::Contains("example_id ' 5'"));
    CHECK_THAT(refusal(header + "+5,0,0,,\n"), Catch::Contains("example_id '+5'"));
    CHECK_THAT(refusal(header + "5,1e3,0,,\n"), Catch::Contains("document_id '1e3'"));
    CHECK_THAT(refusal(header + "5,0,,,\n"), Catch::Contains("chunk ''"));
    CHECK_THAT(refusal(header + "5,0,0,,\r\n"), Catch::Contains("document_fingerprint '\r'"));
    CHECK_THAT(refusal(header + "5,0,0,,\n\n"), Catch::Contains("line 3: '' has 1 fields"));
    // The writer refuses what the reader would.
    io::example_row r;
    r.chunk = -1;
    CHECK_THROWS_AS(io::examples_csv_text({r}), std::invalid_argument);
    io::example_row s;
    s.fingerprint = "xyz";
    CHECK_THROWS_AS(io::examples_csv_text({s}), std::invalid_argument);
    CHECK_THROWS_WITH(io::examples_csv_text({io::example_row{}, io::example_row{}}),
                      Catch::Contains("example_id 0 has two rows"));
}

TEST_CASE("examples_table: a dump's examples.csv is read when present")
{
    io::examples_table t;
    CHECK_FALSE(io::read_examples_csv("no/such/dump/folder", t));
}
