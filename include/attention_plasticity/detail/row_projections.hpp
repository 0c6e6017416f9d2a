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
#include <cstdint>
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


#ifdef AP_SIMD_DISPATCH
    /// One component c of eight rows (lo: rows 0-3, hi: 4-7) as row_source::load makes it:
    /// the sign, then the reflection with the rows' factors; stored as one line at
    /// out + (c - c0) ld (float_rows8_columns).
    struct column_store
    {
        const double* sign;
        const double* v;
        __m256d f_lo, f_hi;
        double* out;
        std::size_t c0, ld;

        AP_SIMD_AVX2 void operator()(std::size_t c, __m256d lo, __m256d hi) const noexcept
        {
            if (sign != nullptr)
            {
                const __m256d s = _mm256_broadcast_sd(sign + c);
                lo = _mm256_mul_pd(s, lo);
                hi = _mm256_mul_pd(s, hi);
            }
            if (v != nullptr)
            {
                const __m256d vc = _mm256_broadcast_sd(v + c);
                lo = _mm256_sub_pd(lo, _mm256_mul_pd(f_lo, vc));
                hi = _mm256_sub_pd(hi, _mm256_mul_pd(f_hi, vc));
            }
            double* dst = out + (c - c0) * ld;
            if ((reinterpret_cast<std::uintptr_t>(dst) & 63u) == 0)
            {
                _mm256_stream_pd(dst, lo);
                _mm256_stream_pd(dst + 4, hi);
            }
            else
            {
                _mm256_storeu_pd(dst, lo);
                _mm256_storeu_pd(dst + 4, hi);
            }
        }
    };

    /// Components [c0, c1) of eight float rows (pointers) as the pipeline's source reads them,
    /// laid out by component: out[(c - c0) ld + r] = x_r(c) for r < 8, with x_r(c) = s_c x (the
    /// signs when given), then x - f_r v_c (the reflection when given, f_r = factors[r]): the
    /// operations of row_source::load in their order (the same bits), the rows transposed in
    /// registers. A component's eight values are stored as one line, without reading it into the
    /// cache when the line is 64-byte aligned (store_line).
    AP_SIMD_AVX2 inline void float_rows8_columns(const float* const* rows, std::size_t c0, std::size_t c1,
                                                 const double* sign, const double* v, const double* factors,
                                                 double* out, std::size_t ld) noexcept
    {
        const __m256d f_lo = v != nullptr ? _mm256_loadu_pd(factors) : _mm256_setzero_pd();
        const __m256d f_hi = v != nullptr ? _mm256_loadu_pd(factors + 4) : _mm256_setzero_pd();
        const column_store put{sign, v, f_lo, f_hi, out, c0, ld};
        std::size_t c = c0;
        for (; c + 8 <= c1; c += 8)
        {
            __m256 col[8];
            transpose_float_rows8(rows, c, col);
            for (std::size_t k = 0; k < 8; ++k)
            {
                put(c + k, _mm256_cvtps_pd(_mm256_castps256_ps128(col[k])),
                    _mm256_cvtps_pd(_mm256_extractf128_ps(col[k], 1)));
            }
        }
        for (; c < c1; ++c)
        {
            put(c, _mm256_setr_pd(rows[0][c], rows[1][c], rows[2][c], rows[3][c]),
                _mm256_setr_pd(rows[4][c], rows[5][c], rows[6][c], rows[7][c]));
        }
    }
#endif

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
                        if (x.index != nullptr && i0 + r + k + row_prefetch_distance < x.rows)
                        {
                            x.prefetch(i0 + r + k + row_prefetch_distance);  // a subsample's rows are scattered
                        }
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
