#ifndef ATTENTION_PLASTICITY_DETAIL_REFLECTION_HPP
#define ATTENTION_PLASTICITY_DETAIL_REFLECTION_HPP

// The row kernels of the Householder reflection of docs/method.md §2.5, below rotation.hpp so
// that the row sources (row_source.hpp), which reflect rows as they read them, need no public
// header.

#include <cstddef>

#include "dots.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// 2 (row . v), the factor of the reflection row H = row - 2 (row . v) v of a unit v
    /// (docs/method.md §2.5): the dot product in double, in the order of the components.
    template <class T>
    double reflection_scale(const T* row, const double* v, std::size_t d) noexcept
    {
        double dot = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            dot += static_cast<double>(row[j]) * v[j];
        }
        return 2.0 * dot;
    }

    /// reflection_scale of `count` rows of doubles (ld apart) at once: the same values, with
    /// the rows' sums interleaved (detail/dots.hpp).
    inline void reflection_scales(const double* rows, std::size_t ld, std::size_t count, const double* v,
                                  std::size_t d, double* out) noexcept
    {
        row_dots(rows, ld, count, v, d, out);
        for (std::size_t r = 0; r < count; ++r)
        {
            out[r] = 2.0 * out[r];
        }
    }

    /// Component j of the reflected row: x_j - scale v_j, scale from reflection_scale.
    inline double reflected(double x, double scale, double v) noexcept
    {
        return x - scale * v;
    }

    /// row <- row H = row - 2 (row . v) v for a unit v of d entries, in double: the one
    /// implementation of the reflection, used by householder::apply and by the pipeline's
    /// passes that reflect rows as they read them.
    template <class T>
    void reflect_row(T* row, const double* v, std::size_t d) noexcept
    {
        const double scale = reflection_scale(row, v, d);
        for (std::size_t j = 0; j < d; ++j)
        {
            row[j] = static_cast<T>(reflected(static_cast<double>(row[j]), scale, v[j]));
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
