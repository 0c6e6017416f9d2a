// The tables of docs/method.md §3 as csv_rows.hpp's column lists (issue 26, item 2): every row of
// every table of a real head (the pipeline on a synthetic head with every extension on) has its
// header's width and the types the list declares, in the sink and in the CSV text; and each
// header, with the column types, equals the table documented in docs/method.md §3.2-§3.7 (read
// from the file, an independent source), so that header, rows and docs cannot drift apart.

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/pipeline.hpp>

namespace ap = attention_plasticity;
namespace io = attention_plasticity::io;

namespace
{
std::vector<std::string> split(const std::string& text, char separator)
{
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(text);
    while (std::getline(in, part, separator))
    {
        parts.push_back(part);
    }
    if (!text.empty() && text.back() == separator)
    {
        parts.emplace_back();
    }
    return parts;
}

// n tokens of d dims in sequences of `length` positions (example_id = i / length), 8 buckets:
// each component a drift with position (every third one) plus a deterministic scramble of
// (seed, i, j) in [-1, 1) (a splitmix64 step: independent-looking values, no generator needed).
ap::head_tokens<double> synthetic_tokens(std::size_t n, std::size_t d, std::uint64_t seed, std::size_t length)
{
    auto scramble = [seed](std::uint64_t i, std::uint64_t j) {
        std::uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + j * 0x94d049bb133111ebULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
    };
    using ids = xt::xtensor<std::int64_t, 1>;
    ap::head_tokens<double> t{xt::xtensor<double, 2>::from_shape({n, d}), ids::from_shape({n}), ids::from_shape({n}),
                              ids::from_shape({n})};
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t pos = i % length;
        t.position(i) = static_cast<std::int64_t>(pos);
        t.bucket(i) = static_cast<std::int64_t>(pos * 8 / length);
        t.example_id(i) = static_cast<std::int64_t>(i / length);
        for (std::size_t j = 0; j < d; ++j)
        {
            const double drift = j % 3 == 0 ? 0.008 * static_cast<double>(pos) : 0.3;
            t.vectors(i, j) = drift + (1.0 + 0.1 * static_cast<double>(j)) * scramble(i, j);
        }
    }
    return t;
}

// A head with a row in every table: distance map, empirical AP, intervals with sequence
// influences (20 sequences), PCA roles.
const ap::head_result& full_head()
{
    static const ap::head_result result = [] {
        ap::head_options options;
        options.distance_map = true;
        options.empirical_ap = true;
        options.confidence_intervals = true;
        options.sequence_influences = true;
        options.pca_roles = true;
        options.num_pairs_per_bucket = 32;
        return ap::analyze_head(synthetic_tokens(2000, 6, 11, 100), synthetic_tokens(2000, 6, 12, 100), {2, 3, 1},
                                options);
    }();
    return result;
}

/// Records every value emit_head gives, by table: its type and count per row.
struct recording_sink
{
    struct table_record
    {
        std::size_t rows = 0;
        std::vector<std::string> problems;
    };
    std::map<std::size_t, table_record> tables;
    std::size_t table = 0;
    std::vector<io::column_type> row_types;

    void row(io::table_index t)
    {
        table = t;
        row_types.clear();
    }
    void integer(std::int64_t) { row_types.push_back(io::column_type::integer); }
    void real(double) { row_types.push_back(io::column_type::real); }
    void text(std::string_view) { row_types.push_back(io::column_type::text); }
    void end()
    {
        const io::csv_table& csv = io::result_tables()[table];
        table_record& record = tables[table];
        ++record.rows;
        const std::vector<std::string> names = split(csv.header, ',');
        if (row_types.size() != names.size())
        {
            record.problems.push_back(std::string(csv.file) + ": a row of " + std::to_string(row_types.size())
                                      + " values under a header of " + std::to_string(names.size()));
            return;
        }
        for (std::size_t i = 0; i < names.size(); ++i)
        {
            if (row_types[i] != csv.columns.at(i).type || names[i] != csv.columns.at(i).name)
            {
                record.problems.push_back(std::string(csv.file) + ": column " + names[i] + " got a value of type "
                                          + io::column_type_name(row_types[i]) + ", declared "
                                          + io::column_type_name(csv.columns.at(i).type));
            }
        }
    }
};

/// The type a CSV field's text has: an integer, a real ("%.17g", nan, inf) or a name.
io::column_type field_type(const std::string& field)
{
    static const std::regex integer("-?[0-9]+");
    static const std::regex real("-?(([0-9]+\\.?[0-9]*|\\.[0-9]+)(e[-+]?[0-9]+)?|inf|nan)");
    if (std::regex_match(field, integer))
    {
        return io::column_type::integer;
    }
    return std::regex_match(field, real) ? io::column_type::real : io::column_type::text;
}

/// The documented tables of docs/method.md §3.2-§3.7: file name -> the columns of its table
/// (names from the first cell of each row, in order; the type from the unit cell).
std::map<std::string, std::vector<std::pair<std::string, io::column_type>>> documented_tables()
{
    std::ifstream in(std::string(AP_DOCS_DIR) + "/method.md");
    REQUIRE(in);
    std::map<std::string, std::vector<std::pair<std::string, io::column_type>>> tables;
    static const std::regex section("^### 3\\.[2-9] `([a-z_]+\\.csv)`.*");
    static const std::regex name("`([A-Za-z0-9_]+)`");
    std::string line;
    std::string file;
    while (std::getline(in, line))
    {
        std::smatch m;
        if (std::regex_match(line, m, section))
        {
            file = m[1];
            continue;
        }
        if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0)
        {
            file.clear();
            continue;
        }
        if (file.empty() || line.rfind("| `", 0) != 0)
        {
            continue;
        }
        const std::vector<std::string> cells = split(line, '|');  // "", column, meaning, unit, §, ""
        REQUIRE(cells.size() >= 4);
        // A unit that is a count, an index, an id or a flag is an integer column, a name a text
        // column; every other unit (plasticity, tokens, dimensionless, ...) a real one.
        const std::string unit = cells[3].substr(cells[3].find_first_not_of(' '));
        const io::column_type type =
            std::regex_search(unit, std::regex("^(count|index|bucket id|id|flag)\\b")) ? io::column_type::integer
            : std::regex_search(unit, std::regex("^name\\b"))                           ? io::column_type::text
                                                                                         : io::column_type::real;
        const std::string& names = cells[1];
        for (auto it = std::sregex_iterator(names.begin(), names.end(), name); it != std::sregex_iterator(); ++it)
        {
            tables[file].emplace_back((*it)[1], type);
        }
    }
    return tables;
}
}  // namespace

TEST_CASE("csv_rows: every row of every table of a real head has its header's width and declared types",
          "[csv_rows]")
{
    const ap::head_result& r = full_head();
    REQUIRE(r.cells.size() > 0);
    REQUIRE(r.profile.size() > 0);
    REQUIRE(r.distance_map.size() > 0);
    REQUIRE(r.component_r2.size() == 6);
    REQUIRE(r.sequence_influences.size() > 0);
    REQUIRE(r.metrics.pca_class != ap::pca_class::undefined);
    REQUIRE(std::isfinite(r.metrics.ap_empirical_overall));

    recording_sink sink;
    io::emit_head(r, sink);
    REQUIRE(sink.tables.size() == io::table_count);
    for (const auto& [table, record] : sink.tables)
    {
        INFO(io::result_tables()[table].file);
        CHECK(record.rows > 0);
        CHECK(record.problems == std::vector<std::string>{});
    }

    // The CSV text: as many fields as the header, each of the declared type.
    const io::head_rows rows = io::format_head(r);
    for (const io::csv_table& table : io::result_tables())
    {
        INFO(table.file);
        const std::vector<std::string> names = split(table.header, ',');
        REQUIRE(names.size() == table.columns.size());
        const std::vector<std::string> lines = split(rows.*(table.rows), '\n');
        REQUIRE(lines.size() >= 2);
        CHECK(lines.back().empty());  // every row ends in '\n'
        for (std::size_t l = 0; l + 1 < lines.size(); ++l)
        {
            const std::vector<std::string> fields = split(lines[l], ',');
            REQUIRE(fields.size() == names.size());
            for (std::size_t i = 0; i < fields.size(); ++i)
            {
                const io::column_type declared = table.columns[i].type;
                const io::column_type seen = field_type(fields[i]);
                // An integer text is a valid real ("%.17g" of 2.0 is "2").
                const bool fits = seen == declared || (declared == io::column_type::real && seen == io::column_type::integer);
                if (!fits)
                {
                    FAIL_CHECK(names[i] << " = '" << fields[i] << "' is not " << io::column_type_name(declared));
                }
            }
        }
    }
}

TEST_CASE("csv_rows: each header and its column types equal the table documented in docs/method.md §3",
          "[csv_rows]")
{
    const auto documented = documented_tables();
    REQUIRE(documented.size() == io::result_tables().size());
    for (const io::csv_table& table : io::result_tables())
    {
        INFO(table.file);
        REQUIRE(documented.count(table.file) == 1);
        std::vector<std::string> doc_names;
        std::vector<std::string> doc_types;
        for (const auto& [name, type] : documented.at(table.file))
        {
            doc_names.push_back(name);
            doc_types.push_back(io::column_type_name(type));
        }
        CHECK(split(table.header, ',') == doc_names);
        std::vector<std::string> types;
        for (const io::column_schema& c : table.columns)
        {
            types.push_back(io::column_type_name(c.type));
        }
        CHECK(types == doc_types);
    }
}
