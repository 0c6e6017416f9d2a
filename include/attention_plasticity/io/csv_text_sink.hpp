#ifndef ATTENTION_PLASTICITY_IO_CSV_TEXT_SINK_HPP
#define ATTENTION_PLASTICITY_IO_CSV_TEXT_SINK_HPP

// The CSV text of a table's rows (docs/method.md §3.1): the sink of table_columns.hpp that
// writes each value as every program writes it (integers in decimal, reals by append_double,
// names as they are), comma-separated, each row ended by '\n'; and the whole text of a table
// from its column list and its rows.

#include <cstdint>
#include <string>
#include <string_view>

#include "csv_rows.hpp"
#include "table_columns.hpp"

namespace attention_plasticity::io
{
/// Appends the rows given to it to `out` as CSV text.
class csv_text_sink
{
public:
    explicit csv_text_sink(std::string& out) : m_out(&out) {}

    template <class Table>
    void row(const Table&)
    {
        m_first = true;
    }
    void integer(std::int64_t i)
    {
        next();
        *m_out += std::to_string(i);
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

#endif  // ATTENTION_PLASTICITY_IO_CSV_TEXT_SINK_HPP
