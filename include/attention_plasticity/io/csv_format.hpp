#ifndef ATTENTION_PLASTICITY_IO_CSV_FORMAT_HPP
#define ATTENTION_PLASTICITY_IO_CSV_FORMAT_HPP

// The text of every CSV a program writes (docs/method.md §3.1): numbers by append_double (the
// one formatting of every program), and csv_text_sink, the sink of table_columns.hpp that
// writes rows as comma-separated text (integers in decimal, reals by append_double, names as
// they are), each row ended by '\n'. csv_rows.hpp's §3 tables and the comparison's tables
// (run/compare_tables.hpp) are written through it.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include "table_columns.hpp"

namespace attention_plasticity::io
{
/// "%.17g" (round-trips a double); NaN (of either sign) as "nan", infinities as "inf" and
/// "-inf". Every number a program writes in a CSV goes through here.
inline void append_double(std::string& out, double x)
{
    if (std::isnan(x))
    {
        out += "nan";
        return;
    }
    char buf[40];
    const int n = std::snprintf(buf, sizeof(buf), "%.17g", x);
    out.append(buf, static_cast<std::size_t>(n));
}

/// ",x1,x2,..." (each through append_double): the tail of a row of numbers.
inline void append_doubles(std::string& out, std::initializer_list<double> values)
{
    for (double x : values)
    {
        out += ',';
        append_double(out, x);
    }
}

inline std::string format_number(double x)
{
    std::string s;
    append_double(s, x);
    return s;
}

/// Appends the rows given to it as CSV text to a string (write_to() changes which: a sink of
/// several tables).
class csv_text_sink
{
public:
    explicit csv_text_sink(std::string& out) : m_out(&out) {}

    /// The rows that follow go to `out`.
    void write_to(std::string& out) { m_out = &out; }

    template <class Table>
    void row(const Table&)
    {
        m_first = true;
    }
    void integer(std::int64_t i)
    {
        next();
        char digits[24];  // std::to_string's text, without its temporary string
        m_out->append(digits, std::to_chars(digits, digits + sizeof(digits), i).ptr);
    }
    void real(double x)
    {
        next();
        append_double(*m_out, x);
    }
    void text(std::string_view name)
    {
        next();
        *m_out += name;
    }
    void end() { *m_out += '\n'; }

private:
    void next()
    {
        if (!m_first)
        {
            *m_out += ',';
        }
        m_first = false;
    }

    std::string* m_out;
    bool m_first = true;
};

/// The CSV text of `rows` (any range of Row) under `columns`: the header line, then a line per row.
template <class Columns, class Rows>
std::string csv_text(const Columns& columns, const Rows& rows)
{
    std::string out = header_text(columns);
    out += '\n';
    csv_text_sink sink(out);
    for (const auto& r : rows)
    {
        emit_row(columns, 0, r, sink);
    }
    return out;
}
}  // namespace attention_plasticity::io

#endif  // ATTENTION_PLASTICITY_IO_CSV_FORMAT_HPP
