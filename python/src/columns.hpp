#ifndef AP_PYTHON_COLUMNS_HPP
#define AP_PYTHON_COLUMNS_HPP

// Tables handed to Python as columns instead of CSV text: each column's values collected in
// C++ (int64, float64, or names), then given to NumPy without a copy (a column of names as a
// list of str). The values are those the CSV writer formats, so a DataFrame built from them
// holds the same numbers as the file, exactly. Shared by the §3 tables (bind_tables.cpp) and the
// comparison's (bind_companion.cpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <attention_plasticity/io/table_columns.hpp>

#include "common.hpp"

namespace ap_python
{
/// The values of one column.
struct column_values
{
    std::string name;
    attention_plasticity::io::column_type type = attention_plasticity::io::column_type::real;
    std::vector<std::int64_t> integers;
    std::vector<double> reals;
    std::vector<std::string> texts;
};

/// The columns of one table.
struct table_values
{
    std::string name;  // "head_metrics"
    std::vector<column_values> columns;
};

/// {column name: int64 or float64 array, or list of str}, in the order of the columns; the
/// values are moved out of `t`.
inline nb::dict columns_dict(table_values& t)
{
    nb::dict columns;
    for (column_values& c : t.columns)
    {
        switch (c.type)
        {
            case attention_plasticity::io::column_type::integer:
                columns[c.name.c_str()] = vector_to_numpy(std::move(c.integers));
                break;
            case attention_plasticity::io::column_type::real:
                columns[c.name.c_str()] = vector_to_numpy(std::move(c.reals));
                break;
            case attention_plasticity::io::column_type::text:
            {
                nb::list names;
                for (const std::string& name : c.texts)
                {
                    names.append(nb::str(name.data(), name.size()));
                }
                columns[c.name.c_str()] = names;
                break;
            }
        }
    }
    return columns;
}

/// The sink of io/table_columns.hpp that collects a table's rows as columns (the column list
/// gives the types, so a value goes to its column's vector).
class column_collector
{
public:
    explicit column_collector(table_values& t) : m_table(&t) {}

    template <class Table>
    void row(const Table&)
    {
        m_next = 0;
    }
    void integer(std::int64_t i) { m_table->columns[m_next++].integers.push_back(i); }
    void real(double x) { m_table->columns[m_next++].reals.push_back(x); }
    void text(std::string_view name) { m_table->columns[m_next++].texts.emplace_back(name); }
    void end() {}

private:
    table_values* m_table;
    std::size_t m_next = 0;
};

/// The columns of `rows` under the column list `columns` (io/table_columns.hpp).
template <class Columns, class Rows>
table_values collect_columns(std::string name, const Columns& columns, const Rows& rows)
{
    table_values t;
    t.name = std::move(name);
    for (const auto& c : columns)
    {
        t.columns.push_back(column_values{c.name, c.type, {}, {}, {}});
    }
    column_collector sink(t);
    for (const auto& r : rows)
    {
        attention_plasticity::io::emit_row(columns, 0, r, sink);
    }
    return t;
}
}  // namespace ap_python

#endif  // AP_PYTHON_COLUMNS_HPP
