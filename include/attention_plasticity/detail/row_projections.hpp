#ifndef ATTENTION_PLASTICITY_DETAIL_ROW_PROJECTIONS_HPP
#define ATTENTION_PLASTICITY_DETAIL_ROW_PROJECTIONS_HPP

// The dot products of the oriented rows of a source with one or two vectors (docs/method.md
// §2.4-2.5: the projection on beta and the reflection factor 2 x.v), each summed in the order
// of the components, as row_dot does: the same bits. The float rows of the pipeline are read
// eight at a time straight from the caller's buffer, transposed in registers so that one AVX2
// vector holds a component of four rows: the rows' sums then go side by side, four to an
// instruction, without a double copy of the rows and without changing any row's order. The
// signs of §2.1 are folded into the vectors (s_j x_j w_j = x_j (s_j w_j) exactly: a sign
// change is exact and rounding is symmetric).

#include <cstddef>
#include <type_traits>
#include <vector>

#include "dots.hpp"
#include "row_source.hpp"
#include "simd.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// The vectors of row_projections: w1 (and w2 when given) with the source's signs folded in.
    struct projection_vectors
    {
        std::vector<double> w1, w2;  // s_j w_j; w2 empty when there is none
        const double* plain1;        // w1 and w2 as given (for rows loaded with their signs)
        const double* plain2;
        double sign0 = 1.0;          // s_0, for component 0

        template <class T>
        projection_vectors(const row_source<T>& x, const double* beta, const double* v) : plain1(beta), plain2(v)
        {
            const std::size_t d = x.cols;
            w1.resize(d);
            for (std::size_t j = 0; j < d; ++j)
            {
                w1[j] = x.sign != nullptr ? x.sign[j] * beta[j] : beta[j];
            }
            if (v != nullptr)
            {
                w2.resize(d);
                for (std::size_t j = 0; j < d; ++j)
                {
                    w2[j] = x.sign != nullptr ? x.sign[j] * v[j] : v[j];
                }
            }
            sign0 = x.sign != nullptr && d > 0 ? x.sign[0] : 1.0;
        }
    };


    /// For rows [i0, i0 + count) of x (no reflection): out1[r] = sum_j x(i0 + r, j) w1_j and,
    /// when p.w2 is given, out2[r] = sum_j x(i0 + r, j) w2_j, each in the order of j (the bits of
    /// row_dot on the oriented row); first[r] = x(i0 + r, 0). `block` (count x d) is scratch.
    template <class T>
    void row_projections(const row_source<T>& x, std::size_t i0, std::size_t count, const projection_vectors& p,
                         double* out1, double* out2, double* first, double* block) noexcept
    {
        const std::size_t d = x.cols;
        const bool two = !p.w2.empty();
        std::size_t r = 0;
#ifdef AP_SIMD_DISPATCH
        if constexpr (std::is_same<T, float>::value)
        {
            if (x.reflection == nullptr && cpu_has_avx2())
            {
                const std::size_t d8 = d - d % 8;
                for (; r + 8 <= count; r += 8)
                {
                    const float* rows[8];
                    for (std::size_t k = 0; k < 8; ++k)
                    {
                        rows[k] = x.raw(i0 + r + k);
                    }
                    if (two)
                    {
                        float_rows8_dots<true>(rows, d8, p.w1.data(), p.w2.data(), out1 + r, out2 + r);
                    }
                    else
                    {
                        float_rows8_dots<false>(rows, d8, p.w1.data(), nullptr, out1 + r, nullptr);
                    }
                    for (std::size_t k = 0; k < 8; ++k)
                    {
                        // The components past the last multiple of 8, in order.
                        for (std::size_t j = d8; j < d; ++j)
                        {
                            const double xj = static_cast<double>(rows[k][j]);
                            out1[r + k] += xj * p.w1[j];
                            if (two)
                            {
                                out2[r + k] += xj * p.w2[j];
                            }
                        }
                        first[r + k] = p.sign0 * static_cast<double>(rows[k][0]);
                    }
                }
            }
        }
#endif
        if (r == count)
        {
            return;
        }
        // The rows as the step reads them, then their sums (the same bits).
        const std::size_t rest = count - r;
        for (std::size_t k = 0; k < rest; ++k)
        {
            x.load(i0 + r + k, block + k * d);
        }
        // The signs are in the loaded rows: the plain vectors.
        row_dots(block, d, rest, p.plain1, d, out1 + r);
        if (two)
        {
            row_dots(block, d, rest, p.plain2, d, out2 + r);
        }
        for (std::size_t k = 0; k < rest; ++k)
        {
            first[r + k] = block[k * d];
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
