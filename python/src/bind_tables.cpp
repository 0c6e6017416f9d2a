// The tables of docs/method.md §3 as columns of NumPy arrays, for attention_plasticity.tables()
// and DumpResult: the values are those csv_rows.hpp's emit_head gives the CSV writer (the one
// definition of every column: its name and type from the table's column list, so a table with
// no rows has its types too), collected as float64 / int64 arrays (a column of names, e.g.
// pca_class, as a list of str) instead of text. No column is listed here.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <attention_plasticity/io/csv_rows.hpp>

#include "columns.hpp"
#include "common.hpp"
#include "head_bindings.hpp"

namespace ap_python
{
namespace
{
    namespace run = attention_plasticity::run;
    namespace io = attention_plasticity::io;

    // The columns' values and their NumPy form: columns.hpp (shared with the comparison's tables).
    using column_type = io::column_type;
    using column = column_values;
    using table_columns = table_values;

    /// Collects emit_head's values into columns, each value's type checked against the column's.
    class column_sink
    {
    public:
        explicit column_sink(std::vector<table_columns> tables) : m_tables(std::move(tables)) {}

        void row(io::table_index table)
        {
            m_table = &m_tables[table];
            m_next = 0;
        }
        void integer(std::int64_t i) { next(column_type::integer).integers.push_back(i); }
        void real(double x) { next(column_type::real).reals.push_back(x); }
        void text(std::string_view name) { next(column_type::text).texts.emplace_back(name); }
        void end()
        {
            if (m_next != m_table->columns.size())
            {
                throw std::logic_error("csv_rows.hpp: " + m_table->name + " has " + std::to_string(m_next)
                                       + " values in a row but " + std::to_string(m_table->columns.size())
                                       + " columns in its header");
            }
        }

        std::vector<table_columns>& tables() { return m_tables; }

    private:
        column& next(column_type type)
        {
            if (m_next >= m_table->columns.size())
            {
                throw std::logic_error("csv_rows.hpp: " + m_table->name + " has more values in a row than the "
                                       + std::to_string(m_table->columns.size()) + " columns of its header");
            }
            column& c = m_table->columns[m_next++];
            if (c.type != type)
            {
                throw std::logic_error("csv_rows.hpp: column " + c.name + " of " + m_table->name
                                       + " is given a value of another type than its list declares");
            }
            return c;
        }

        std::vector<table_columns> m_tables;
        table_columns* m_table = nullptr;
        std::size_t m_next = 0;
    };

    /// The tables with their columns' names and types (csv_rows.hpp's lists) and no values.
    const std::vector<table_columns>& schema()
    {
        static const std::vector<table_columns> tables = [] {
            std::vector<table_columns> out;
            for (const auto& table : io::result_tables())
            {
                table_columns t;
                t.name = table_name(table.file);
                for (const io::column_schema& c : table.columns)
                {
                    t.columns.push_back(column{c.name, c.type, {}, {}, {}});
                }
                out.push_back(std::move(t));
            }
            return out;
        }();
        return tables;
    }
}  // namespace

nb::dict tables_text(const std::vector<const io::head_rows*>& heads)
{
    nb::dict out;
    for (const io::result_file& file : io::result_files(heads))
    {
        std::string text;
        for (const auto& piece : file.pieces)
        {
            text.append(piece.data(), piece.size());
        }
        out[table_name(file.name).c_str()] = text;
    }
    return out;
}

nb::dict result_columns(const std::vector<const ap::head_result*>& results)
{
    std::vector<table_columns> tables = without_gil([&] {
        column_sink sink(schema());
        for (const ap::head_result* r : results)
        {
            io::emit_head(*r, sink);
        }
        return std::move(sink.tables());
    });
    nb::dict out;
    for (auto& t : tables)
    {
        out[t.name.c_str()] = columns_dict(t);
    }
    return out;
}

namespace
{
    /// The head results of `results` (HeadResult items; `fn` names the function in the error).
    std::vector<const ap::head_result*> head_results(nb::iterable results, const char* fn)
    {
        std::vector<const ap::head_result*> heads;
        std::size_t index = 0;
        for (nb::handle item : results)
        {
            py_head_result* r = nullptr;
            if (!nb::try_cast(item, r, false) || r == nullptr)
            {
                const nb::handle type(reinterpret_cast<PyObject*>(Py_TYPE(item.ptr())));
                throw nb::type_error((std::string(fn) + ": item " + std::to_string(index) + " is a "
                                      + nb::cast<std::string>(type.attr("__name__")) + ", not a HeadResult")
                                         .c_str());
            }
            heads.push_back(&r->result);
            ++index;
        }
        return heads;
    }
}  // namespace

void bind_tables(nb::module_& m)
{
    m.def(
        "result_tables",
        [] {
            nb::list out;
            for (const auto& table : io::result_tables())
            {
                out.append(nb::make_tuple(table_name(table.file), table.file, table.header));
            }
            return out;
        },
        "The CSVs of docs/method.md §3 as ap_analyze writes them: a list of (table name, file name, header).");
    m.def(
        "result_schema",
        [] {
            nb::dict out;
            for (const auto& t : schema())
            {
                nb::list columns;
                for (const auto& c : t.columns)
                {
                    columns.append(nb::make_tuple(c.name, c.type == column_type::integer ? "int64"
                                                          : c.type == column_type::real  ? "float64"
                                                                                         : "str"));
                }
                out[t.name.c_str()] = columns;
            }
            return out;
        },
        "The columns of each table of docs/method.md §3 as ap_analyze writes them: {table name: [(column,\n"
        "'int64', 'float64' or 'str')]}, from the C++ CSV writer's own definition (include/attention_plasticity/io/csv_rows.hpp).");
    m.def(
        "result_columns",
        [](nb::iterable results) { return result_columns(head_results(results, "tables")); },
        "results"_a,
        "The rows of the head results `results` (HeadResult, in the order given) in every table of\n"
        "docs/method.md §3, as columns: {table name: {column: NumPy array}} (float64 or int64, the very\n"
        "numbers the CSV writer formats). attention_plasticity.tables() makes DataFrames of them.");
    m.def(
        "_tables_text",
        [](nb::iterable results) {
            const std::vector<const ap::head_result*> heads = head_results(results, "_tables_text");
            const std::vector<io::head_rows> rows = without_gil([&] {
                std::vector<io::head_rows> formatted;
                formatted.reserve(heads.size());
                for (const ap::head_result* r : heads)
                {
                    formatted.push_back(io::format_head(*r));
                }
                return formatted;
            });
            std::vector<const io::head_rows*> pointers;
            for (const io::head_rows& r : rows)
            {
                pointers.push_back(&r);
            }
            return tables_text(pointers);
        },
        "results"_a,
        "{table name: the CSV's text} of the head results `results` (HeadResult, in the order given), as\n"
        "ap_analyze writes the files (attention_plasticity.capture_sniffer's in-memory profile).");
}
}  // namespace ap_python
