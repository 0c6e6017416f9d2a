// The tables of docs/method.md §3 as columns of NumPy arrays, for attention_plasticity.tables()
// and DumpResult: the values are those csv_rows.hpp's emit_head gives the CSV writer (the one
// definition of every column, its name from the table's header and its type from what is
// emitted), collected as float64 / int64 arrays (a column of names, e.g. pca_class, as a list of
// str) instead of text. No column is listed here.

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

    std::vector<std::string> split_header(const std::string& header)
    {
        std::vector<std::string> names;
        std::size_t start = 0;
        for (;;)
        {
            const std::size_t comma = header.find(',', start);
            names.push_back(header.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
            if (comma == std::string::npos)
            {
                return names;
            }
            start = comma + 1;
        }
    }

    /// Collects emit_head's values into columns; with `learn_types`, the type of each column is
    /// taken from the values (the schema), otherwise checked against it.
    class column_sink
    {
    public:
        column_sink(std::vector<table_columns> tables, bool learn_types)
            : m_tables(std::move(tables)), m_learn(learn_types)
        {
        }

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
            if (m_learn)
            {
                c.type = type;
            }
            else if (c.type != type)
            {
                throw std::logic_error("csv_rows.hpp: column " + c.name + " of " + m_table->name
                                       + " changes type between rows");
            }
            return c;
        }

        std::vector<table_columns> m_tables;
        bool m_learn;
        table_columns* m_table = nullptr;
        std::size_t m_next = 0;
    };

    /// The tables with their column names (from the headers) and no type yet.
    std::vector<table_columns> named_tables()
    {
        std::vector<table_columns> tables;
        for (const auto& table : io::result_tables())
        {
            table_columns t;
            t.name = table_name(table.file);
            for (const std::string& name : split_header(table.header))
            {
                t.columns.push_back(column{name, column_type::real, {}, {}, {}});
            }
            tables.push_back(std::move(t));
        }
        return tables;
    }

    /// The columns' names and types, learnt once from a head with one row in every table.
    const std::vector<table_columns>& schema()
    {
        static const std::vector<table_columns> tables = [] {
            ap::head_result sample;
            sample.cells.resize(1);
            sample.profile.resize(1);
            sample.distance_map.resize(1);
            sample.sequence_influences.resize(1);
            sample.component_r2 = xt::zeros<double>({std::size_t{1}});
            sample.component_weight = xt::zeros<double>({std::size_t{1}});
            column_sink sink(named_tables(), true);
            io::emit_head(sample, sink);
            std::vector<table_columns> out = std::move(sink.tables());
            for (auto& t : out)
            {
                for (auto& c : t.columns)
                {
                    c.integers.clear();
                    c.reals.clear();
                    c.texts.clear();
                }
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
        column_sink sink(schema(), false);
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
    /// The function `name` of attention_plasticity.results (imported when first called: the
    /// package imports this module first).
    nb::object results_function(const char* name)
    {
        return nb::module_::import_("attention_plasticity.results").attr(name);
    }

    bool has_own(nb::handle type, const char* name)
    {
        return nb::cast<bool>(type.attr("__dict__").attr("__contains__")(name));
    }

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

void install_result_methods(nb::module_& m)
{
    // Every class with fields (read-only or read-write properties) that has no repr of its own
    // gets one listing its fields, and to_dict(): attention_plasticity.results._repr / _to_dict,
    // so that a struct bound later is readable without more code.
    const nb::dict attributes = nb::borrow<nb::dict>(PyModule_GetDict(m.ptr()));
    for (const auto& [name, value] : attributes)
    {
        if (!nb::type_check(value))
        {
            continue;
        }
        bool has_fields = false;
        for (nb::handle attribute : value.attr("__dict__").attr("values")())
        {
            has_fields = has_fields || PyObject_TypeCheck(attribute.ptr(), &PyProperty_Type);
        }
        if (!has_fields)
        {
            continue;
        }
        if (!has_own(value, "__repr__"))
        {
            nb::setattr(value, "__repr__",
                        nb::cpp_function(
                            [](nb::handle self) { return nb::cast<std::string>(results_function("_repr")(self)); },
                            nb::scope(value), nb::name("__repr__"), nb::is_method()));
        }
        if (!has_own(value, "to_dict"))
        {
            nb::setattr(value, "to_dict",
                        nb::cpp_function(
                            [](nb::handle self) { return nb::cast<nb::dict>(results_function("_to_dict")(self)); },
                            nb::scope(value), nb::name("to_dict"), nb::is_method(),
                            "The fields by name (numbers as numbers, arrays as arrays, nested results as they are)."));
        }
    }
}

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
