#ifndef ATTENTION_PLASTICITY_DETAIL_ROWS_HPP
#define ATTENTION_PLASTICITY_DETAIL_ROWS_HPP

// Pieces shared by the steps that read matrices row by row: the value type a step reads in
// place, and the non-finite check of a row with its error.

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "errors.hpp"
#include "matrix.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// float for float expressions (read in place), double for every other value type.
    template <class E>
    using float_or_double_t =
        std::conditional_t<std::is_same<std::decay_t<expression_value_t<E>>, float>::value, float, double>;

    /// 0 when every value of the row is finite, NaN otherwise (x - x is +0 for finite x and
    /// NaN for +-inf and NaN); vectorizes, unlike a branch per value.
    template <class T>
    double row_finite_check(const T* row, std::size_t d) noexcept
    {
        double check = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            const double v = static_cast<double>(row[j]);
            check += v - v;
        }
        return check;
    }

    /// Throws std::domain_error "<fn>: <subject> a non-finite value (v) at row r, column j"
    /// for the first non-finite value of `row` (row r of the caller's matrix).
    template <class T>
    [[noreturn]] void throw_non_finite_row(const char* fn, const char* subject, const T* row, std::size_t r,
                                           std::size_t d)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            if (!std::isfinite(static_cast<double>(row[j])))
            {
                throw_domain(fn, subject, " a non-finite value (", static_cast<double>(row[j]), ") at row ", r,
                             ", column ", j);
            }
        }
        throw_domain(fn, subject, " a non-finite value at row ", r);  // not reached
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
