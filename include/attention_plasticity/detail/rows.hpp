#ifndef ATTENTION_PLASTICITY_DETAIL_ROWS_HPP
#define ATTENTION_PLASTICITY_DETAIL_ROWS_HPP

// Pieces shared by the steps that read matrices row by row: the value type a step reads in
// place, and the error for a row that a fused pass found to hold a non-finite value.

#include <cstddef>
#include <type_traits>

#include "finite.hpp"
#include "matrix.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// float for float expressions (read in place), double for every other value type.
    template <class E>
    using float_or_double_t =
        std::conditional_t<std::is_same<std::decay_t<expression_value_t<E>>, float>::value, float, double>;

    /// Throws "<fn>: <name> has a non-finite value (v) at row r, column j" for the first
    /// non-finite value of `row`, row r of the caller's matrix (which any_non_finite flagged).
    template <class T>
    [[noreturn]] void throw_non_finite_row(const char* fn, const char* name, const T* row, std::size_t r,
                                           std::size_t d)
    {
        const std::size_t j = first_non_finite(row, d);
        throw_non_finite(fn, name, j < d ? row[j] : T(0), r, j);
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
