#ifndef ATTENTION_PLASTICITY_DETAIL_DOTS_HPP
#define ATTENTION_PLASTICITY_DETAIL_DOTS_HPP

// Dot products of rows with one vector, each summed in the order of the components (the
// order a plain loop gives, so every result is bit for bit that loop's): several rows at
// once, whose independent sums overlap in the pipeline instead of waiting on one another
// (one row's sum is a chain of d dependent additions).

#include <cstddef>

namespace attention_plasticity
{
namespace detail
{
    /// sum_j row[j] w[j], in increasing j.
    inline double row_dot(const double* row, const double* w, std::size_t d) noexcept
    {
        double dot = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            dot += row[j] * w[j];
        }
        return dot;
    }

    /// out[r] = row_dot(rows + r ld, w, d) for r in [0, count), four rows at a time.
    inline void row_dots(const double* rows, std::size_t ld, std::size_t count, const double* w, std::size_t d,
                         double* out) noexcept
    {
        std::size_t r = 0;
        for (; r + 4 <= count; r += 4)
        {
            const double* a = rows + r * ld;
            const double* b = a + ld;
            const double* c = b + ld;
            const double* e = c + ld;
            double sa = 0.0, sb = 0.0, sc = 0.0, se = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                const double wj = w[j];
                sa += a[j] * wj;
                sb += b[j] * wj;
                sc += c[j] * wj;
                se += e[j] * wj;
            }
            out[r] = sa;
            out[r + 1] = sb;
            out[r + 2] = sc;
            out[r + 3] = se;
        }
        for (; r < count; ++r)
        {
            out[r] = row_dot(rows + r * ld, w, d);
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
