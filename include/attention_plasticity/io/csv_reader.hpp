#ifndef ATTENTION_PLASTICITY_IO_CSV_READER_HPP
#define ATTENTION_PLASTICITY_IO_CSV_READER_HPP

// Reading back the tables a program wrote (docs/method.md §3.1: a header line, rows of its
// width, fields split at every comma, no quoting, every line ended): the inverse of writing
// them. Values are got by column name (the names of the schema, csv_rows.hpp), so a reader does
// not depend on the columns' order and needs no second list of them. Every problem is an
// input_error naming the file, and the line and the column where there is one:
//
//   io::parsed_table t(text, "set/head_metrics.csv");
//   for (std::size_t i = 0; i < t.size(); ++i) { const io::csv_row row = t.row(i); row.real("ap_overall"); }
//
// parsed_table holds a whole text; table_lines reads a large table line by line (io::line_reader).

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bounded_read.hpp"
#include "errors.hpp"

namespace attention_plasticity::io
{
/// The fields of one line into `fields` (its earlier content replaced): split at every comma.
inline void split_fields(std::string_view line, std::vector<std::string>& fields)
{
    fields.clear();
    std::size_t start = 0;
    while (true)
    {
        const std::size_t comma = line.find(',', start);
        fields.emplace_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos)
        {
            return;
        }
        start = comma + 1;
    }
}

/// The header of a table: its columns by name (a name given twice is refused: which of the
/// two would be read?), its width and the file it is of.
class csv_header
{
public:
    csv_header() = default;

    /// The header line `fields` of `file`. `missing_note` ends the message of a column asked
    /// for and absent (e.g. which program writes the file).
    csv_header(const std::vector<std::string>& fields, std::string file, std::string missing_note = "")
        : m_file(std::move(file)), m_missing_note(std::move(missing_note)), m_width(fields.size())
    {
        for (std::size_t i = 0; i < fields.size(); ++i)
        {
            const auto [it, fresh] = m_column.emplace(fields[i], i);
            if (!fresh)
            {
                throw input_error(m_file, "line 1: column '" + fields[i] + "' appears twice (columns "
                                              + std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
            }
        }
    }

    const std::string& file() const { return m_file; }
    std::size_t width() const { return m_width; }
    bool has(const std::string& name) const { return m_column.count(name) != 0; }

    /// The index of column `name`; input_error "has no column 'NAME'" (and the note) when absent.
    std::size_t index(const std::string& name) const
    {
        const auto it = m_column.find(name);
        if (it == m_column.end())
        {
            throw input_error(m_file, "has no column '" + name + "'" + m_missing_note);
        }
        return it->second;
    }

    /// Refuses a row of another width than the header's (line `line` of the file).
    void check_width(const std::vector<std::string>& fields, std::size_t line) const
    {
        if (fields.size() != m_width)
        {
            throw input_error(m_file, "line " + std::to_string(line) + " has " + std::to_string(fields.size())
                                          + " fields, the header " + std::to_string(m_width));
        }
    }

private:
    std::string m_file;
    std::string m_missing_note;
    std::map<std::string, std::size_t> m_column;
    std::size_t m_width = 0;
};

/// One row of a table (a view: the header and the fields must outlive it): its values by
/// column name, typed, each problem an input_error "line N: column C: ...".
class csv_row
{
public:
    csv_row(const csv_header& header, const std::vector<std::string>& fields, std::size_t line)
        : m_header(&header), m_fields(&fields), m_line(line)
    {
    }

    /// The line of the file the row is (the header is line 1).
    std::size_t line() const { return m_line; }
    const csv_header& header() const { return *m_header; }

    /// The field of column `column` as written.
    const std::string& text(const std::string& column) const { return (*m_fields)[m_header->index(column)]; }

    /// The number in column `column`: "nan" is NaN, else the whole field is a number (strtod).
    double real(const std::string& column) const
    {
        const std::string& field = text(column);
        if (field == "nan")
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        char* end = nullptr;
        const double x = std::strtod(field.c_str(), &end);
        if (field.empty() || end != field.c_str() + field.size())
        {
            throw error(column, "'" + field + "' is not a number");
        }
        return x;
    }

    /// The integer in column `column` (a number with no fraction, within +-9e15).
    std::int64_t integer(const std::string& column) const
    {
        const double x = real(column);
        if (!(std::floor(x) == x) || std::abs(x) > 9e15)
        {
            throw error(column, "'" + text(column) + "' is not an integer");
        }
        return static_cast<std::int64_t>(x);
    }

    /// An input_error about this row: "FILE: line N: what".
    input_error error(const std::string& what) const
    {
        return input_error(m_header->file(), "line " + std::to_string(m_line) + ": " + what);
    }

    /// An input_error about one value of this row: "FILE: line N: column C: what".
    input_error error(const std::string& column, const std::string& what) const
    {
        return error("column " + column + ": " + what);
    }

private:
    const csv_header* m_header;
    const std::vector<std::string>* m_fields;
    std::size_t m_line;
};

/// A whole table of `text` (the file named `file`): the header and rows of its width, each line
/// ended; row i is line i + 2. Throws input_error: empty, a row of another width, a column named
/// twice, a last line without its end (a truncated file).
class parsed_table
{
public:
    parsed_table(const std::string& text, const std::string& file, std::string missing_note = "")
    {
        std::size_t start = 0, line_number = 0;
        std::vector<std::string> fields;
        while (start < text.size())
        {
            const std::size_t end = text.find('\n', start);
            if (end == std::string::npos)
            {
                throw input_error(file, "the last line has no end (a truncated file?)");
            }
            split_fields(std::string_view(text).substr(start, end - start), fields);
            ++line_number;
            if (line_number == 1)
            {
                m_header = csv_header(fields, file, missing_note);
            }
            else
            {
                m_header.check_width(fields, line_number);
                m_rows.push_back(std::move(fields));
                fields = {};
            }
            start = end + 1;
        }
        if (line_number == 0)
        {
            throw input_error(file, "is empty (no header line)");
        }
    }

    const csv_header& header() const { return m_header; }
    std::size_t size() const { return m_rows.size(); }
    csv_row row(std::size_t i) const { return csv_row(m_header, m_rows[i], i + 2); }

private:
    csv_header m_header;
    std::vector<std::vector<std::string>> m_rows;
};

/// A table read line by line (a large one is not held as text): the header at construction,
/// then next() row by row. Throws input_error as parsed_table does (a truncated last line once it
/// has been read).
class table_lines
{
public:
    explicit table_lines(line_reader in, std::string missing_note = "") : m_in(std::move(in))
    {
        if (!m_in.next(m_line))
        {
            throw input_error(m_in.name(), "is empty (no header line)");
        }
        split_fields(m_line, m_fields);
        m_header = csv_header(m_fields, m_in.name(), std::move(missing_note));
    }

    const csv_header& header() const { return m_header; }

    /// The next row into row() (valid until the next call); false at the end of the file.
    bool next()
    {
        if (!m_in.next(m_line))
        {
            if (!m_in.last_line_ended())
            {
                throw input_error(m_in.name(), "the last line has no end (a truncated file?)");
            }
            return false;
        }
        ++m_line_number;
        split_fields(m_line, m_fields);
        m_header.check_width(m_fields, m_line_number);
        return true;
    }

    csv_row row() const { return csv_row(m_header, m_fields, m_line_number); }

    /// The rows read so far.
    std::size_t rows() const { return m_line_number - 1; }

private:
    line_reader m_in;
    csv_header m_header;
    std::string m_line;
    std::vector<std::string> m_fields;
    std::size_t m_line_number = 1;
};
}  // namespace attention_plasticity::io

#endif  // ATTENTION_PLASTICITY_IO_CSV_READER_HPP
