#ifndef ATTENTION_PLASTICITY_MOMENTS_HPP
#define ATTENTION_PLASTICITY_MOMENTS_HPP

// Sample moments: mean, ddof=1 standard deviation, the bias-corrected skewness and excess
// kurtosis of scipy.stats.skew / kurtosis (bias=False), accumulated in double whatever the
// input's value type (docs/method.md §2.7, §7).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
#include "detail/scaling.hpp"
#include "detail/simd.hpp"
#include "detail/strided.hpp"

namespace attention_plasticity
{
/// Moments of a sample. `zero_variance` is SciPy's "all values equal" rule
/// (m2 <= (1e-15 * mean)^2, m2 the 1/n central moment); then skewness and kurtosis are 0
/// where SciPy would return NaN.
struct moments_result
{
    double mean;
    double std_ddof1;        // NaN for n = 1
    double skewness;         // scipy.stats.skew(x, bias=False)
    double excess_kurtosis;  // scipy.stats.kurtosis(x, fisher=True, bias=False)
    bool zero_variance;
};

namespace detail
{
    /// Pairwise summation of M sums at once, as NumPy sums: block(start, length) returns the M
    /// sums of a block of at most 128 terms (taken in a few interleaved partial sums: independent
    /// chains that vectorize, combined as a tree), and the block sums are combined pairwise (a
    /// binary counter): rounding error O((32 + log2(n / 128)) eps) instead of the O(n eps) of
    /// one running sum.
    template <std::size_t M, class Block>
    AP_SIMD_INLINE std::array<double, M> pairwise_sum(std::size_t n, Block&& block)
    {
        constexpr std::size_t block_size = 128;
        std::array<double, M> level[64];  // level[k]: the sum of 2^k blocks, when bit k of `blocks` is set
        std::uint64_t blocks = 0;
        for (std::size_t start = 0; start < n; start += block_size)
        {
            std::array<double, M> sum = block(start, std::min(block_size, n - start));
            std::size_t k = 0;
            for (; (blocks >> k) & 1u; ++k)
            {
                for (std::size_t m = 0; m < M; ++m)
                {
                    sum[m] = level[k][m] + sum[m];
                }
            }
            level[k] = sum;
            ++blocks;
        }
        std::array<double, M> total{};
        for (std::size_t k = 0; k < 64; ++k)
        {
            if ((blocks >> k) & 1u)
            {
                for (std::size_t m = 0; m < M; ++m)
                {
                    total[m] += level[k][m];
                }
            }
        }
        return total;
    }

    template <std::size_t L>
    inline double lane_total(const double (&lane)[L]) noexcept
    {
        static_assert(L == 4 || L == 8, "4 or 8 lanes");
        if constexpr (L == 4)
        {
            return (lane[0] + lane[1]) + (lane[2] + lane[3]);
        }
        else
        {
            return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
    }

    /// Central moments of a finite sample, formed on exactly rescaled values so that nothing
    /// overflows or underflows for any finite data (skewness and kurtosis are scale-free):
    /// values are taken as x 2^value_exponent (only when their sum approaches DBL_MAX or the
    /// subnormal range), deviations as d = (x 2^value_exponent - mean 2^value_exponent)
    /// 2^deviation_exponent, at most 1. Sums are pairwise.
    struct central_sums
    {
        double mean;             // of x
        double m2;               // 1/n central moments of the scaled deviations d
        double m3;
        double m4;
        double scaled_mean;      // mean 2^value_exponent = scaled_mean + scaled_mean_low, to twice the
        double scaled_mean_low;  // precision of a double: deviations are (x - scaled_mean) - scaled_mean_low
        int value_exponent;      // both in [-1022, 1000]: 2^e is one exact double factor
        int deviation_exponent;
    };

    /// A power-of-two exponent that brings x (> 0) to at most 1, in [-1022, 1000].
    inline int bounded_exponent(double x) noexcept
    {
        return std::min(1000, std::max(-1022, power_of_two_exponent(x)));
    }

    /// Two passes for the mean: the second sums the residuals from the first, which are exact
    /// near the mean, and keeps their mean as a low-order part (a double mean is off by up to
    /// half an ulp of itself, which would cost m3 ~ 3 ulp(mean) m2 of an offset sample; the
    /// correction also makes constant data exactly zero variance). One pass for the powers of
    /// the deviations, scaled by a power of two from sum |x| + |mean| >= max |x - mean|.
    /// `Scaled`: the values are multiplied by 2^value_exponent (only for extreme data).
    template <bool Scaled>
    central_sums central_moments_of(const double* x, std::size_t n, int value_exponent) noexcept;

    /// The body of central_moments_of (its sums have a fixed number of lanes: detail/simd.hpp).
    template <bool Scaled>
    AP_SIMD_INLINE central_sums central_moments_body(const double* x, std::size_t n, int value_exponent) noexcept
    {
        const double nd = static_cast<double>(n);
        const double value_factor = std::ldexp(1.0, value_exponent);
        const auto value = [value_factor](double v) AP_SIMD_LAMBDA { return Scaled ? v * value_factor : v; };
        const std::array<double, 2> sums = pairwise_sum<2>(n, [&](std::size_t start, std::size_t length) AP_SIMD_LAMBDA {
            const double* p = x + start;
            double s[8] = {}, a[8] = {};
            std::size_t i = 0;
            for (; i + 8 <= length; i += 8)
            {
                for (std::size_t k = 0; k < 8; ++k)
                {
                    s[k] += value(p[i + k]);
                    a[k] += std::fabs(value(p[i + k]));
                }
            }
            std::array<double, 2> r{lane_total(s), lane_total(a)};
            for (; i < length; ++i)
            {
                r[0] += value(p[i]);
                r[1] += std::fabs(value(p[i]));
            }
            return r;
        });
        if constexpr (!Scaled)
        {
            // Sums near overflow, or values in the subnormal range: take them near 1.
            if (!(sums[1] <= 0x1.0p1000) || (sums[1] < 0x1.0p-900 && sums[1] > 0.0))
            {
                double largest = 0.0;
                for (std::size_t i = 0; i < n; ++i)
                {
                    largest = std::max(largest, std::fabs(x[i]));
                }
                return central_moments_of<true>(x, n, bounded_exponent(largest));
            }
        }
        const double mean = sums[0] / nd;
        const double low = pairwise_sum<1>(n, [&](std::size_t start, std::size_t length) AP_SIMD_LAMBDA {
            const double* p = x + start;
            double s[8] = {};
            std::size_t i = 0;
            for (; i + 8 <= length; i += 8)
            {
                for (std::size_t k = 0; k < 8; ++k)
                {
                    s[k] += value(p[i + k]) - mean;
                }
            }
            std::array<double, 1> r{lane_total(s)};
            for (; i < length; ++i)
            {
                r[0] += value(p[i]) - mean;
            }
            return r;
        })[0] / nd;
        central_sums c;
        c.scaled_mean = mean;
        c.scaled_mean_low = low;
        c.mean = std::ldexp(mean + low, -value_exponent);
        c.value_exponent = value_exponent;
        c.deviation_exponent = sums[1] > 0.0 ? bounded_exponent(sums[1] + std::fabs(mean)) : 0;
        const double deviation_factor = std::ldexp(1.0, c.deviation_exponent);
        // Three sums of four lanes: three of eight would not fit the 16 SSE registers.
        const std::array<double, 3> powers = pairwise_sum<3>(n, [&](std::size_t start, std::size_t length) AP_SIMD_LAMBDA {
            const double* p = x + start;
            double s2[4] = {}, s3[4] = {}, s4[4] = {};
            std::size_t i = 0;
            for (; i + 4 <= length; i += 4)
            {
                for (std::size_t k = 0; k < 4; ++k)
                {
                    const double d = ((value(p[i + k]) - mean) - low) * deviation_factor;
                    const double d2 = d * d;
                    s2[k] += d2;
                    s3[k] += d2 * d;
                    s4[k] += d2 * d2;
                }
            }
            std::array<double, 3> r{lane_total(s2), lane_total(s3), lane_total(s4)};
            for (; i < length; ++i)
            {
                const double d = ((value(p[i]) - mean) - low) * deviation_factor;
                const double d2 = d * d;
                r[0] += d2;
                r[1] += d2 * d;
                r[2] += d2 * d2;
            }
            return r;
        });
        c.m2 = powers[0] / nd;
        c.m3 = powers[1] / nd;
        c.m4 = powers[2] / nd;
        return c;
    }

#ifdef AP_SIMD_DISPATCH
    template <bool Scaled>
    AP_SIMD_AVX2 central_sums central_moments_avx2(const double* x, std::size_t n, int value_exponent) noexcept
    {
        return central_moments_body<Scaled>(x, n, value_exponent);
    }
#endif

    /// Central moments (the AVX2 copy of the body where the CPU has it: the same bits).
    template <bool Scaled>
    central_sums central_moments_of(const double* x, std::size_t n, int value_exponent) noexcept
    {
#ifdef AP_SIMD_DISPATCH
        if (cpu_has_avx2())
        {
            return central_moments_avx2<Scaled>(x, n, value_exponent);
        }
#endif
        return central_moments_body<Scaled>(x, n, value_exponent);
    }

    /// x: n >= 1 finite values.
    inline central_sums central_moments(const double* x, std::size_t n) noexcept
    {
        return central_moments_of<false>(x, n, 0);
    }

    /// The ddof=1 standard deviation of the scaled deviations (of x: times 2^-(value_exponent +
    /// deviation_exponent)).
    inline double scaled_std_ddof1(const central_sums& c, std::size_t n) noexcept
    {
        return std::sqrt(c.m2 * static_cast<double>(n) / static_cast<double>(n - 1));
    }

    /// x -> (x - mean) / std(ddof=1) through the scaled deviations of c (the same values as
    /// unscaled arithmetic where it does not overflow): ((x 2^value_exponent - scaled_mean) -
    /// scaled_mean_low) times factor, divided by divisor (by 1, exactly, for a unit divisor).
    struct standardization
    {
        double value_factor;
        double scaled_mean;
        double scaled_mean_low;
        double factor;
        double divisor;

        AP_SIMD_INLINE double operator()(double x) const noexcept
        {
            return (((x * value_factor - scaled_mean) - scaled_mean_low) * factor) / divisor;
        }
    };

    /// The standardization of a sample with central sums c; divisor 1 when `unit_divisor`.
    inline standardization standardization_of(const central_sums& c, std::size_t n, bool unit_divisor) noexcept
    {
        const double value_factor = std::ldexp(1.0, c.value_exponent);
        if (unit_divisor)
        {
            return {value_factor, c.scaled_mean, c.scaled_mean_low, std::ldexp(1.0, -c.value_exponent), 1.0};
        }
        return {value_factor, c.scaled_mean, c.scaled_mean_low, std::ldexp(1.0, c.deviation_exponent),
                scaled_std_ddof1(c, n)};
    }

    /// x <- standardization_of(c, n, unit_divisor)(x).
    inline void standardize_in_place(double* x, std::size_t n, const central_sums& c, bool unit_divisor) noexcept
    {
        const standardization z = standardization_of(c, n, unit_divisor);
        for (std::size_t i = 0; i < n; ++i)
        {
            x[i] = z(x[i]);
        }
    }

    // SciPy's "all values equal" rule of skew / kurtosis.
    inline bool is_zero_variance(const central_sums& c) noexcept
    {
        // m2 of x <= (1e-15 mean)^2 (1e-15: np.finfo(float64).resolution), in the units of d.
        const double r = std::ldexp(1e-15 * (c.scaled_mean + c.scaled_mean_low), c.deviation_exponent);
        return c.m2 <= r * r;
    }

    inline double skewness_from(const central_sums& c, std::size_t n) noexcept
    {
        if (is_zero_variance(c))
        {
            return 0.0;  // SciPy: NaN; docs/method.md §2.7: zero std gives 0
        }
        if (n > 2)
        {
            const double nd = static_cast<double>(n);
            return std::sqrt((nd - 1.0) * nd) / (nd - 2.0) * c.m3 / std::pow(c.m2, 1.5);
        }
        return c.m3 / std::pow(c.m2, 1.5);
    }

    inline double excess_kurtosis_from(const central_sums& c, std::size_t n) noexcept
    {
        if (is_zero_variance(c))
        {
            return 0.0;
        }
        const double ratio = c.m4 / (c.m2 * c.m2);
        if (n > 3)
        {
            const double nd = static_cast<double>(n);
            const double nval = 1.0 / (nd - 2) / (nd - 3) * ((nd * nd - 1.0) * ratio - 3 * (nd - 1) * (nd - 1));
            return (nval + 3.0) - 3.0;  // SciPy adds and removes the 3: same rounding
        }
        return ratio - 3.0;
    }

    inline moments_result moments_from(const central_sums& c, std::size_t n) noexcept
    {
        moments_result r;
        r.mean = c.mean;
        r.std_ddof1 = n > 1 ? std::ldexp(scaled_std_ddof1(c, n), -(c.value_exponent + c.deviation_exponent))
                            : std::numeric_limits<double>::quiet_NaN();
        r.skewness = skewness_from(c, n);
        r.excess_kurtosis = excess_kurtosis_from(c, n);
        r.zero_variance = is_zero_variance(c);
        return r;
    }

    /// Central sums of the non-empty 1-D sample x, checked as gather_sample does.
    template <class E>
    central_sums sample_sums(const char* function, const xt::xexpression<E>& x, std::size_t& n)
    {
        std::vector<double> values;
        gather_sample(function, "x", x, values);
        n = values.size();
        if (n == 0)
        {
            throw_invalid(function, "x is empty (n = 0)");
        }
        return central_moments(values.data(), n);
    }
}  // namespace detail

/// Mean, ddof=1 std, skewness and excess kurtosis of the 1-D sample x. Not 1-D or empty:
/// std::invalid_argument; a non-finite value: std::domain_error.
template <class E>
moments_result sample_moments(const xt::xexpression<E>& x)
{
    std::size_t n = 0;
    const detail::central_sums c = detail::sample_sums("sample_moments", x, n);
    return detail::moments_from(c, n);
}

/// scipy.stats.skew(x, bias=False); 0 where SciPy returns NaN (all values equal).
template <class E>
double skewness(const xt::xexpression<E>& x)
{
    std::size_t n = 0;
    const detail::central_sums c = detail::sample_sums("skewness", x, n);
    return detail::skewness_from(c, n);
}

/// scipy.stats.kurtosis(x, fisher=True, bias=False); 0 where SciPy returns NaN.
template <class E>
double excess_kurtosis(const xt::xexpression<E>& x)
{
    std::size_t n = 0;
    const detail::central_sums c = detail::sample_sums("excess_kurtosis", x, n);
    return detail::excess_kurtosis_from(c, n);
}
}  // namespace attention_plasticity

#endif
