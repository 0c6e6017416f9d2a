#ifndef ATTENTION_PLASTICITY_IO_EXAMPLES_TABLE_HPP
#define ATTENTION_PLASTICITY_IO_EXAMPLES_TABLE_HPP

// <data_root>/examples.csv (docs/method.md §1.1): the document of each example, its place in
// it and the fingerprints of their texts. The one home of its schema: parsed strictly here
// (exact int64 ids, never through a double; 16 lowercase hex digits or empty; errors naming the
// file, the line and the value) and written here (rows by example_id), for the dump reader, the
// in-memory runs (DumpRun.from_memory's examples_csv), the result set and ap_merge.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../example_documents.hpp"
#include "bounded_read.hpp"
#include "errors.hpp"
#include "fs_util.hpp"

namespace attention_plasticity::io
{
inline constexpr const char* examples_csv = "examples.csv";
inline constexpr const char* examples_header = "example_id,document_id,chunk,fingerprint,document_fingerprint";
/// The largest examples.csv read (a row is a few dozen bytes).
inline constexpr std::uintmax_t max_examples_csv_bytes = std::uintmax_t{1} << 32;

/// One row of examples.csv.
struct example_row
{
    std::int64_t example_id = 0;
    std::int64_t document_id = 0;
    std::int64_t chunk = 0;                // the example's 0-based place among its document's chunks
    std::string fingerprint;               // 16 lowercase hex digits, or empty (unknown)
    std::string document_fingerprint;      // idem, of the whole document
};

/// The rows of an examples.csv, by increasing example_id (distinct).
struct examples_table
{
    std::vector<example_row> rows;

    /// The number of distinct documents.
    std::size_t document_count() const
    {
        std::vector<std::int64_t> ids;
        ids.reserve(rows.size());
        for (const example_row& r : rows)
        {
            ids.push_back(r.document_id);
        }
        std::sort(ids.begin(), ids.end());
        return static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
    }
};

namespace detail
{
    /// An int64 in decimal, exactly (no sign '+', no spaces, no exponent); false otherwise.
    inline bool parse_int64_exact(std::string_view field, std::int64_t& out)
    {
        if (field.empty())
        {
            return false;
        }
        const char* end = field.data() + field.size();
        const auto [ptr, ec] = std::from_chars(field.data(), end, out);
        return ec == std::errc() && ptr == end;
    }

    /// Empty, or 16 lowercase hex digits.
    inline bool valid_fingerprint(std::string_view field)
    {
        if (field.empty())
        {
            return true;
        }
        return field.size() == 16 && std::all_of(field.begin(), field.end(), [](char c) {
                   return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
               });
    }
}  // namespace detail

/// The rows of examples.csv text (`file` names it in messages), checked: the header exactly
/// examples_header, five fields a row, example_id and document_id int64, chunk an integer
/// >= 0, fingerprints empty or 16 lowercase hex digits, example_id unique. input_error(file,
/// "line L: ...") naming the value otherwise. Rows returned by example_id.
inline examples_table parse_examples_csv(std::string_view text, const std::string& file)
{
    examples_table out;
    std::vector<std::size_t> lines;  // each row's line, for a duplicate's message
    std::size_t line = 0;
    std::size_t start = 0;
    bool header_seen = false;
    while (start < text.size())
    {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos)
        {
            end = text.size();
        }
        const std::string_view row = text.substr(start, end - start);
        start = end + 1;
        ++line;
        const std::string where = "line " + std::to_string(line) + ": ";
        if (!header_seen)
        {
            if (row != examples_header)
            {
                throw input_error(file, where + "header '" + std::string(row) + "', expected '" + examples_header
                                            + "' (docs/method.md §1.1)");
            }
            header_seen = true;
            continue;
        }
        std::string_view fields[5];
        std::size_t count = 0, from = 0;
        for (;;)
        {
            const std::size_t comma = row.find(',', from);
            if (count < 5)
            {
                fields[count] = row.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
            }
            ++count;
            if (comma == std::string_view::npos)
            {
                break;
            }
            from = comma + 1;
        }
        if (count != 5)
        {
            throw input_error(file, where + "'" + std::string(row) + "' has " + std::to_string(count)
                                        + " fields, expected 5 (" + examples_header + ")");
        }
        example_row r;
        const char* names[3] = {"example_id", "document_id", "chunk"};
        std::int64_t* values[3] = {&r.example_id, &r.document_id, &r.chunk};
        for (std::size_t c = 0; c < 3; ++c)
        {
            if (!detail::parse_int64_exact(fields[c], *values[c]))
            {
                throw input_error(file, where + names[c] + " '" + std::string(fields[c])
                                            + "' is not a 64-bit integer in decimal");
            }
        }
        if (r.chunk < 0)
        {
            throw input_error(file, where + "chunk " + std::string(fields[2]) + " is negative");
        }
        for (std::size_t c = 3; c < 5; ++c)
        {
            if (!detail::valid_fingerprint(fields[c]))
            {
                throw input_error(file, where + (c == 3 ? "fingerprint" : "document_fingerprint") + " '"
                                            + std::string(fields[c])
                                            + "' is not 16 lowercase hex digits (nor empty)");
            }
        }
        r.fingerprint = std::string(fields[3]);
        r.document_fingerprint = std::string(fields[4]);
        out.rows.push_back(std::move(r));
        lines.push_back(line);
    }
    if (!header_seen)
    {
        throw input_error(file, "line 1: empty, expected the header '" + std::string(examples_header)
                                    + "' (docs/method.md §1.1)");
    }
    std::vector<std::size_t> order(out.rows.size());
    for (std::size_t i = 0; i < order.size(); ++i)
    {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return out.rows[a].example_id < out.rows[b].example_id; });
    examples_table sorted;
    sorted.rows.reserve(order.size());
    for (std::size_t k = 0; k < order.size(); ++k)
    {
        const std::size_t i = order[k];
        if (k > 0 && out.rows[order[k - 1]].example_id == out.rows[i].example_id)
        {
            throw input_error(file, "line " + std::to_string(std::max(lines[i], lines[order[k - 1]])) + ": example_id "
                                        + std::to_string(out.rows[i].example_id) + " has two rows (lines "
                                        + std::to_string(std::min(lines[i], lines[order[k - 1]])) + " and "
                                        + std::to_string(std::max(lines[i], lines[order[k - 1]])) + ")");
        }
        sorted.rows.push_back(std::move(out.rows[i]));
    }
    return sorted;
}

/// The text of examples.csv for `rows` (any order; written by example_id): the header, then a
/// line per row, '\n' line ends. std::invalid_argument for a row parse_examples_csv would
/// refuse (a negative chunk, a bad fingerprint, an example_id twice).
inline std::string examples_csv_text(std::vector<example_row> rows)
{
    std::stable_sort(rows.begin(), rows.end(),
                     [](const example_row& a, const example_row& b) { return a.example_id < b.example_id; });
    std::string out = std::string(examples_header) + "\n";
    for (std::size_t i = 0; i < rows.size(); ++i)
    {
        const example_row& r = rows[i];
        if (i > 0 && rows[i - 1].example_id == r.example_id)
        {
            throw std::invalid_argument("examples_csv_text: example_id " + std::to_string(r.example_id)
                                        + " has two rows");
        }
        if (r.chunk < 0 || !detail::valid_fingerprint(r.fingerprint)
            || !detail::valid_fingerprint(r.document_fingerprint))
        {
            throw std::invalid_argument("examples_csv_text: example_id " + std::to_string(r.example_id)
                                        + ": chunk must be >= 0 and fingerprints 16 lowercase hex digits or empty");
        }
        out += std::to_string(r.example_id);
        out += ',';
        out += std::to_string(r.document_id);
        out += ',';
        out += std::to_string(r.chunk);
        out += ',';
        out += r.fingerprint;
        out += ',';
        out += r.document_fingerprint;
        out += '\n';
    }
    return out;
}

/// examples_csv_text of a table's rows.
inline std::string examples_csv_text(const examples_table& table) { return examples_csv_text(table.rows); }

/// The examples.csv of a dump: <data_root>/examples.csv, parsed (nullopt-like: false when
/// there is none). input_error naming the file when it cannot be read or is refused.
inline bool read_examples_csv(const std::string& data_root, examples_table& out)
{
    const std::string path = (std::filesystem::path(data_root) / examples_csv).string();
    if (inspect_path(path).absent)
    {
        return false;
    }
    out = parse_examples_csv(read_regular_file(path, max_examples_csv_bytes), path);
    return true;
}

/// The example -> document table of the analysis (docs/method.md §8.3), its messages naming `source`.
inline attention_plasticity::example_documents documents_of_table(const examples_table& table, std::string source)
{
    attention_plasticity::example_documents out;
    out.source = std::move(source);
    out.example_id.reserve(table.rows.size());
    out.document_id.reserve(table.rows.size());
    for (const example_row& r : table.rows)
    {
        out.example_id.push_back(r.example_id);
        out.document_id.push_back(r.document_id);
    }
    return out;
}
}  // namespace attention_plasticity::io

#endif  // ATTENTION_PLASTICITY_IO_EXAMPLES_TABLE_HPP
