#ifndef ATTENTION_PLASTICITY_DETAIL_DOTS_HPP
#define ATTENTION_PLASTICITY_DETAIL_DOTS_HPP

// Dot products of rows with one vector, each summed in the order of the components (the
// order a plain loop gives, so every result is bit for bit that loop's): several rows at
// once, whose independent sums overlap in the pipeline instead of waiting on one another
// (one row's sum is a chain of d dependent additions).

#include <cstddef>

#include "simd.hpp"

#ifdef AP_SIMD_DISPATCH
#include <immintrin.h>
#endif

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
#ifdef AP_SIMD_DISPATCH

    /// Components [j, j + 8) of eight float rows (pointers), transposed in registers:
    /// out[k] holds component j + k of rows 0-7 (the 8 x 8 transpose by unpack, shuffle and
    /// lane permutes; exact: values are only moved).
    AP_SIMD_AVX2 inline void transpose_float_rows8(const float* const* rows, std::size_t j, __m256* out) noexcept
    {
        const __m256 t0 = _mm256_unpacklo_ps(_mm256_loadu_ps(rows[0] + j), _mm256_loadu_ps(rows[1] + j));
        const __m256 t1 = _mm256_unpackhi_ps(_mm256_loadu_ps(rows[0] + j), _mm256_loadu_ps(rows[1] + j));
        const __m256 t2 = _mm256_unpacklo_ps(_mm256_loadu_ps(rows[2] + j), _mm256_loadu_ps(rows[3] + j));
        const __m256 t3 = _mm256_unpackhi_ps(_mm256_loadu_ps(rows[2] + j), _mm256_loadu_ps(rows[3] + j));
        const __m256 t4 = _mm256_unpacklo_ps(_mm256_loadu_ps(rows[4] + j), _mm256_loadu_ps(rows[5] + j));
        const __m256 t5 = _mm256_unpackhi_ps(_mm256_loadu_ps(rows[4] + j), _mm256_loadu_ps(rows[5] + j));
        const __m256 t6 = _mm256_unpacklo_ps(_mm256_loadu_ps(rows[6] + j), _mm256_loadu_ps(rows[7] + j));
        const __m256 t7 = _mm256_unpackhi_ps(_mm256_loadu_ps(rows[6] + j), _mm256_loadu_ps(rows[7] + j));
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
        const __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
        const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
        const __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
        const __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        out[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
        out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
        out[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
        out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
        out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
        out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
        out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
        out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
    }

    /// Eight float rows (pointers), components [0, d8) with d8 a multiple of 8: the sums of
    /// x_j w1_j (and x_j w2_j when Two) in the order of j, into out1 (and out2). The rows are
    /// transposed in registers (one vector: a component of four rows), so the eight sums go
    /// side by side without changing any row's order: row_dot's bits.
    template <bool Two>
    AP_SIMD_AVX2 inline void float_rows8_dots(const float* const* rows, std::size_t d8, const double* w1,
                                              const double* w2, double* out1, double* out2) noexcept
    {
        __m256d a_lo = _mm256_setzero_pd(), a_hi = _mm256_setzero_pd();
        __m256d b_lo = _mm256_setzero_pd(), b_hi = _mm256_setzero_pd();
        for (std::size_t j = 0; j < d8; j += 8)
        {
            __m256 c[8];  // c[k]: component j + k of the 8 rows
            transpose_float_rows8(rows, j, c);
            for (int k = 0; k < 8; ++k)
            {
                const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c[k]));
                const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c[k], 1));
                const __m256d p = _mm256_broadcast_sd(w1 + j + k);
                a_lo = _mm256_add_pd(a_lo, _mm256_mul_pd(lo, p));
                a_hi = _mm256_add_pd(a_hi, _mm256_mul_pd(hi, p));
                if (Two)
                {
                    const __m256d q = _mm256_broadcast_sd(w2 + j + k);
                    b_lo = _mm256_add_pd(b_lo, _mm256_mul_pd(lo, q));
                    b_hi = _mm256_add_pd(b_hi, _mm256_mul_pd(hi, q));
                }
            }
        }
        _mm256_storeu_pd(out1, a_lo);
        _mm256_storeu_pd(out1 + 4, a_hi);
        if (Two)
        {
            _mm256_storeu_pd(out2, b_lo);
            _mm256_storeu_pd(out2 + 4, b_hi);
        }
    }
#endif
}  // namespace detail
}  // namespace attention_plasticity

#endif
