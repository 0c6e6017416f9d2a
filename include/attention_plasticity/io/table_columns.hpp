#ifndef ATTENTION_PLASTICITY_IO_TABLE_COLUMNS_HPP
#define ATTENTION_PLASTICITY_IO_TABLE_COLUMNS_HPP

// A table's columns as one list: each column's name, its type and how its value is got from a
// row. The header, the rows (through a sink: CSV text, or the Python package's arrays) and the
// reading back by column name all come from the one list, so a column is added in one place and
// header and rows cannot drift apart (docs/method.md §3.1).
//
//   struct point { std::int64_t id; double x; };
//   inline const io::column<point> point_columns[] = {
//       io::integer_column<point>("id", [](const point& p) -> std::int64_t { return p.id; }),
//       io::real_column<point>("x", [](const point& p) { return p.x; })};
//   io::header_text(point_columns)          // "id,x"
//   io::emit_row(point_columns, 0, p, sink)  // sink.row(0); sink.integer(p.id); sink.real(p.x); sink.end()
//
// A sink has row(table), integer(std::int64_t), real(double), text(std::string_view) and end().

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attention_plasticity::io
{
/// What a column holds: integers, reals (written by append_double), or names written as they
/// are (no comma, quote or line break: the tables are not quoted, §3.1).
enum class column_type
{
    integer,
    real,
    text
};

inline const char* column_type_name(column_type type)
{
    switch (type)
    {
        case column_type::integer:
            return "integer";
        case column_type::real:
            return "real";
        case column_type::text:
            return "text";
    }
    return "?";
}

/// One column of a table of `Row`s: its name, its type, and the getter of that type (the other
/// two are null). Made by integer_column, real_column or text_column.
template <class Row>
struct column
{
    const char* name = nullptr;
    column_type type = column_type::real;
    std::int64_t (*integer)(const Row&) = nullptr;
    double (*real)(const Row&) = nullptr;
    std::string_view (*text)(const Row&) = nullptr;
};

template <class Row>
constexpr column<Row> integer_column(const char* name, std::int64_t (*get)(const Row&))
{
    return column<Row>{name, column_type::integer, get, nullptr, nullptr};
}

template <class Row>
constexpr column<Row> real_column(const char* name, double (*get)(const Row&))
{
    return column<Row>{name, column_type::real, nullptr, get, nullptr};
}

template <class Row>
constexpr column<Row> text_column(const char* name, std::string_view (*get)(const Row&))
{
    return column<Row>{name, column_type::text, nullptr, nullptr, get};
}

/// The header line of `columns` (without its line end): the names joined by commas.
template <class Columns>
std::string header_text(const Columns& columns)
{
    std::string header;
    for (const auto& c : columns)
    {
        if (!header.empty())
        {
            header += ',';
        }
        header += c.name;
    }
    return header;
}

/// A column's name and type without its getter (the same type whatever the row): what a reader
/// of the table needs, e.g. the Python package's typed arrays of a table with no rows.
struct column_schema
{
    const char* name = nullptr;
    column_type type = column_type::real;
};

/// The names and types of `columns`, in order.
template <class Columns>
std::vector<column_schema> schema_of(const Columns& columns)
{
    std::vector<column_schema> schema;
    for (const auto& c : columns)
    {
        schema.push_back(column_schema{c.name, c.type});
    }
    return schema;
}

/// One row of table `table` into `sink`: sink.row(table), each column's value in order, sink.end().
template <class Columns, class Row, class Sink, class Table>
void emit_row(const Columns& columns, Table table, const Row& row, Sink& sink)
{
    sink.row(table);
    for (const auto& c : columns)
    {
        switch (c.type)
        {
            case column_type::integer:
                sink.integer(c.integer(row));
                break;
            case column_type::real:
                sink.real(c.real(row));
                break;
            case column_type::text:
                sink.text(c.text(row));
                break;
        }
    }
    sink.end();
}

namespace detail
{
    template <const auto& Columns, std::size_t I, class Row, class Sink>
    void emit_static_value(const Row& row, Sink& sink)
    {
        constexpr auto c = Columns[I];
        if constexpr (c.type == column_type::integer)
        {
            sink.integer(c.integer(row));
        }
        else if constexpr (c.type == column_type::real)
        {
            sink.real(c.real(row));
        }
        else
        {
            sink.text(c.text(row));
        }
    }

    template <const auto& Columns, class Row, class Sink, std::size_t... I>
    void emit_static_values(const Row& row, Sink& sink, std::index_sequence<I...>)
    {
        (emit_static_value<Columns, I>(row, sink), ...);
    }
}  // namespace detail

/// emit_row() of a list known at compile time (an inline constexpr array of columns, given as the
/// template argument): the same values in the same order, each getter called directly instead
/// of through a pointer, so that a table written row by row for every head costs what
/// hand-written code would (the A/B of benchmarks/README.md section 12).
template <const auto& Columns, class Row, class Sink, class Table>
void emit_static_row(Table table, const Row& row, Sink& sink)
{
    sink.row(table);
    detail::emit_static_values<Columns>(row, sink, std::make_index_sequence<std::size(Columns)>{});
    sink.end();
}
}  // namespace attention_plasticity::io

#endif  // ATTENTION_PLASTICITY_IO_TABLE_COLUMNS_HPP
