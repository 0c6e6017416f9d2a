#ifndef AP_PYTHON_HEAD_BINDINGS_HPP
#define AP_PYTHON_HEAD_BINDINGS_HPP

// The types of the per-head analysis shared by bind_head.cpp and bind_dump.cpp.

#include <optional>
#include <string>
#include <vector>

#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/run/config.hpp>

#include "common.hpp"

namespace ap_python
{
/// Tokens: the arrays of one kind of one head, held (read in place or converted once).
struct py_tokens
{
    py_tokens(const array_like& vectors, const array_like& position, const array_like& bucket, nb::handle example_id);

    array_arg vectors;
    array_arg position;
    array_arg bucket;
    array_arg example_id;  // data == nullptr when not given
};

/// HeadResult: the library's head_result and, when asked for, the stage timings.
struct py_head_result
{
    ap::head_result result;
    std::optional<ap::stage_timings> timings;
};

/// "head_metrics.csv" -> "head_metrics".
std::string table_name(const std::string& file);

/// {table name: header + '\n' + the head's rows}, formatted by csv_rows.hpp.
nb::dict csv_rows_of(const ap::head_result& result);

/// {table name: {column: NumPy array}}: the rows of `results` in every table of §3, as columns
/// (bind_tables.cpp, from csv_rows.hpp's emit_head).
nb::dict result_columns(const std::vector<const ap::head_result*>& results);
/// {table name: the CSV's text}: the header and the rows of `heads` in the order given, composed by
/// csv_rows.hpp's result_files as ap_analyze writes its files (bind_tables.cpp).
nb::dict tables_text(const std::vector<const attention_plasticity::io::head_rows*>& heads);
/// The text an option's value is read from (the option tables' setters parse text, as for the
/// command line and the --config file): numbers, paths, and for list options a list of them.
std::string option_text(const std::string& key, nb::handle value, bool takes_list);

/// Sets `option` of `config` from a Python value through the option table's setter (the one
/// check of every front end: include/attention_plasticity/run/analyze_config.hpp); on|off options take True / False
/// too. Its usage_error is prefixed with `fn`, the function the user called.
template <class Config>
void set_option_value(const attention_plasticity::run::option_spec<Config>& option, Config& config, const std::string& key,
                      nb::handle value, const char* fn)
{
    try
    {
        if (PyBool_Check(value.ptr()) && std::string(option.metavar) == "on|off")
        {
            option.set(config, key, value.ptr() == Py_True ? "on" : "off");  // distance_map=False, ...
        }
        else
        {
            option.set(config, key, option_text(key, value, option.takes_list));
        }
    }
    catch (const attention_plasticity::run::usage_error& e)
    {
        throw attention_plasticity::run::usage_error(std::string(fn) + ": " + e.what());
    }
}
}  // namespace ap_python

#endif
