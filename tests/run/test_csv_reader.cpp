// Unit tests of the io layer's table reader (include/attention_plasticity/io/csv_reader.hpp):
// the inverse of the §3 tables' writing (docs/method.md §3.1), behind compare_input.hpp's reading
// of result sets (§8.6). Every expected message is written out by hand.

#include <cmath>
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include <attention_plasticity/io/csv_reader.hpp>

#include "run_files.hpp"

namespace io = attention_plasticity::io;
using namespace ap_test;

namespace
{
/// Every row of `text` read through a parsed_table, each value of `column` read as a real.
void read_all(const std::string& text, const std::string& column, const std::string& note = "")
{
    const io::parsed_table t(text, "t.csv", note);
    for (std::size_t i = 0; i < t.size(); ++i)
    {
        t.row(i).real(column);
    }
}

/// The same through table_lines (the file `path`, read line by line).
void read_all_lines(const std::string& path, const std::string& column)
{
    io::table_lines t(io::line_reader(path, 1 << 20, 1000, "t.csv"));
    while (t.next())
    {
        t.row().real(column);
    }
}
}  // namespace

TEST_CASE("csv_reader: values by column name, whatever the columns' order, with line numbers",
          "[csv_reader]")
{
    const io::parsed_table t("b,a,name\n1.5,7,x\nnan,-3,y z\n", "t.csv");
    REQUIRE(t.size() == 2);
    CHECK(t.header().width() == 3);
    CHECK(t.header().has("a"));
    CHECK_FALSE(t.header().has("c"));
    CHECK(t.row(0).line() == 2);
    CHECK(t.row(0).real("b") == 1.5);
    CHECK(t.row(0).integer("a") == 7);
    CHECK(t.row(1).integer("a") == -3);
    CHECK(std::isnan(t.row(1).real("b")));
    CHECK(t.row(1).text("name") == "y z");
    CHECK(t.row(1).line() == 3);
    // A header only: no rows.
    CHECK(io::parsed_table("a,b\n", "t.csv").size() == 0);
}

TEST_CASE("csv_reader: a column named twice is refused, naming both places", "[csv_reader]")
{
    CHECK(input_error_of([] { io::parsed_table("a,b,a\n1,2,3\n", "t.csv"); })
          == "t.csv: line 1: column 'a' appears twice (columns 1 and 3)");
}

TEST_CASE("csv_reader: a short or long row is refused, naming its line and both widths", "[csv_reader]")
{
    CHECK(input_error_of([] { io::parsed_table("a,b\n1,2\n3\n", "t.csv"); })
          == "t.csv: line 3 has 1 fields, the header 2");
    CHECK(input_error_of([] { io::parsed_table("a,b\n1,2,3\n", "t.csv"); })
          == "t.csv: line 2 has 3 fields, the header 2");
}

TEST_CASE("csv_reader: a missing column is refused when asked for, with the table's note", "[csv_reader]")
{
    CHECK(input_error_of([] { read_all("a,b\n1,2\n", "c"); }) == "t.csv: has no column 'c'");
    CHECK(input_error_of([] { read_all("a,b\n1,2\n", "c", " (not a table of this program)"); })
          == "t.csv: has no column 'c' (not a table of this program)");
}

TEST_CASE("csv_reader: a value that is no number or no integer is refused, naming line and column",
          "[csv_reader]")
{
    CHECK(input_error_of([] { read_all("a,b\n1,2\n1,x2\n", "b"); })
          == "t.csv: line 3: column b: 'x2' is not a number");
    CHECK(input_error_of([] { read_all("a,b\n1,\n", "b"); }) == "t.csv: line 2: column b: '' is not a number");
    CHECK(input_error_of([] { read_all("a,b\n1,2 \n", "b"); }) == "t.csv: line 2: column b: '2 ' is not a number");
    CHECK(input_error_of([] { io::parsed_table("a\n1.5\n", "t.csv").row(0).integer("a"); })
          == "t.csv: line 2: column a: '1.5' is not an integer");
    CHECK(input_error_of([] { io::parsed_table("a\n1e16\n", "t.csv").row(0).integer("a"); })
          == "t.csv: line 2: column a: '1e16' is not an integer");
    CHECK(input_error_of([] { io::parsed_table("a\nnan\n", "t.csv").row(0).integer("a"); })
          == "t.csv: line 2: column a: 'nan' is not an integer");
}

TEST_CASE("csv_reader: nan as the writers write it is NaN, and NaN in other spellings is the number strtod reads",
          "[csv_reader]")
{
    const io::parsed_table t("a\nnan\nNaN\n-nan\ninf\n", "t.csv");
    CHECK(std::isnan(t.row(0).real("a")));
    CHECK(std::isnan(t.row(1).real("a")));
    CHECK(std::isnan(t.row(2).real("a")));
    CHECK(std::isinf(t.row(3).real("a")));
}

TEST_CASE("csv_reader: an empty file or an unterminated last line is refused", "[csv_reader]")
{
    CHECK(input_error_of([] { io::parsed_table("", "t.csv"); }) == "t.csv: is empty (no header line)");
    CHECK(input_error_of([] { io::parsed_table("a,b\n1,2", "t.csv"); })
          == "t.csv: the last line has no end (a truncated file?)");
    CHECK(input_error_of([] { io::parsed_table("a,b", "t.csv"); })
          == "t.csv: the last line has no end (a truncated file?)");
}

TEST_CASE("csv_reader: table_lines reads line by line with the same checks and messages", "[csv_reader]")
{
    temp_folder dir("csv_reader");
    const std::string path = dir / "t.csv";
    write_text(path, "a,b\n1,2\n3,4\n");
    {
        io::table_lines t(io::line_reader(path, 1 << 20, 1000, "t.csv"));
        REQUIRE(t.next());
        CHECK(t.row().line() == 2);
        CHECK(t.row().integer("b") == 2);
        REQUIRE(t.next());
        CHECK(t.row().real("a") == 3.0);
        CHECK_FALSE(t.next());
        CHECK(t.rows() == 2);
    }
    write_text(path, "");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: is empty (no header line)");
    write_text(path, "a,a\n");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: line 1: column 'a' appears twice (columns 1 and 2)");
    write_text(path, "a,b\n1,2\n3\n");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: line 3 has 1 fields, the header 2");
    write_text(path, "a,b\n1,2\n");
    CHECK(input_error_of([&] { read_all_lines(path, "c"); }) == "t.csv: has no column 'c'");
    write_text(path, "a,b\n1,2\nz,2\n");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: line 3: column a: 'z' is not a number");
    // The cut last line is read (its values are checked first), then refused.
    write_text(path, "a,b\n1,2\n3,4");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: the last line has no end (a truncated file?)");
    write_text(path, "a,b\n1,2\nq,4");
    CHECK(input_error_of([&] { read_all_lines(path, "a"); }) == "t.csv: line 3: column a: 'q' is not a number");
}
