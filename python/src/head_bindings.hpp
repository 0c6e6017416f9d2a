#ifndef AP_PYTHON_HEAD_BINDINGS_HPP
#define AP_PYTHON_HEAD_BINDINGS_HPP

// The types of the per-head analysis shared by bind_head.cpp and bind_dump.cpp.

#include <optional>
#include <string>

#include <attention_plasticity/pipeline.hpp>

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
}  // namespace ap_python

#endif
