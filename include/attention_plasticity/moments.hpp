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
    /// Pairwise summation of M sums at once, as NumPy sums: blocks of 128 terms, each summed in
    /// 8 interleaved partial sums (independent chains that vectorize) combined as a tree, and
    /// the block sums combined pairwise (a binary counter): rounding error O((16 + log2(n / 128))
    /// eps) instead of the O(n eps) of one running sum. term(i, t) writes the M terms of i.
    template <std::size_t M, class Term>
    std::array<double, M> pairwise_sum(std::size_t n, Term&& term)
    {
        constexpr std::size_t block = 128;
        constexpr std::size_t lanes = 8;
        std::array<double, M> level[64];  // level[k]: the sum of 2^k blocks, when bit k of `blocks` is set
        std::uint64_t blocks = 0;
        for (std::size_t start = 0; start < n; start += block)
        {
            const std::size_t length = std::min(block, n - start);
            double lane[lanes][M] = {};
            std::size_t i = 0;
            for (; i + lanes <= length; i += lanes)
            {
                for (std::size_t k = 0; k < lanes; ++k)
                {
                    double t[M];
                    term(start + i + k, t);
                    for (std::size_t m = 0; m < M; ++m)
                    {
                        lane[k][m] += t[m];
                    }
                }
            }
            std::array<double, M> sum;
            for (std::size_t m = 0; m < M; ++m)
            {
                sum[m] = ((lane[0][m] + lane[1][m]) + (lane[2][m] + lane[3][m]))
                       + ((lane[4][m] + lane[5][m]) + (lane[6][m] + lane[7][m]));
            }
            for (; i < length; ++i)
            {
                double t[M];
                term(start + i, t);
                for (std::size_t m = 0; m < M; ++m)
                {
                    sum[m] += t[m];
                }
            }
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

    /// Central moments of a finite sample, formed on exactly rescaled values so that nothing
    /// overflows or underflows for any finite data (skewness and kurtosis are scale-free):
    /// values are taken as x 2^value_exponent (only when |x| approaches DBL_MAX or the subnormal
    /// range), deviations as
    /// d = (x 2^value_exponent - scaled_mean) 2^deviation_exponent, near 1. Sums are pairwise.
    struct central_sums
    {
        double mean;             // of x
        double m2;               // 1/n central moments of the scaled deviations d
        double m3;
        double m4;
        double scaled_mean;      // mean 2^value_exponent = scaled_mean + scaled_mean_low, to twice the
        double scaled_mean_low;  // precision of a double: deviations are (x - scaled_mean) - scaled_mean_low
        int value_exponent;
        int deviation_exponent;
    };

    /// Two passes for the mean: the second sums the residuals from the first, which are exact
    /// near the mean, and keeps their mean as a low-order part (a double mean is off by up to
    /// half an ulp of itself, which would cost m3 ~ 3 ulp(mean) m2 of an offset sample; the
    /// correction also makes constant data exactly zero variance). One pass for the powers of
    /// the deviations. x: n >= 1 finite values.
    inline central_sums central_moments(const double* x, std::size_t n) noexcept
    {
        const double nd = static_cast<double>(n);
        double lowest = x[0], highest = x[0];
        for (std::size_t i = 1; i < n; ++i)
        {
            lowest = std::min(lowest, x[i]);
            highest = std::max(highest, x[i]);
        }
        central_sums c;
        const double largest = std::max(std::fabs(lowest), std::fabs(highest));
        // Values near 1 when sums of n of them could overflow, or their mean lose digits to
        // the subnormal range; as they are otherwise.
        c.value_exponent = largest > 0x1.0p960 || largest < 0x1.0p-960 ? power_of_two_exponent(largest) : 0;
        const power_of_two value_scale(c.value_exponent);
        const double mean = pairwise_sum<1>(n, [&](std::size_t i, double* t) { t[0] = value_scale(x[i]); })[0] / nd;
        const double low =
            pairwise_sum<1>(n, [&](std::size_t i, double* t) { t[0] = value_scale(x[i]) - mean; })[0] / nd;
        c.scaled_mean = mean;
        c.scaled_mean_low = low;
        c.mean = std::ldexp(mean + low, -c.value_exponent);
        c.deviation_exponent =
            power_of_two_exponent(std::max(value_scale(highest) - mean, mean - value_scale(lowest)));
        const power_of_two deviation_scale(c.deviation_exponent);
        const std::array<double, 3> powers = pairwise_sum<3>(n, [&](std::size_t i, double* t) {
            const double d = deviation_scale((value_scale(x[i]) - mean) - low);
            const double d2 = d * d;
            t[0] = d2;
            t[1] = d2 * d;
            t[2] = d2 * d2;
        });
        c.m2 = powers[0] / nd;
        c.m3 = powers[1] / nd;
        c.m4 = powers[2] / nd;
        return c;
    }

    /// The ddof=1 standard deviation of the scaled deviations (of x: times 2^-(value_exponent +
    /// deviation_exponent)).
    inline double scaled_std_ddof1(const central_sums& c, std::size_t n) noexcept
    {
        return std::sqrt(c.m2 * static_cast<double>(n) / static_cast<double>(n - 1));
    }

    // SciPy's "all values equal" rule of skew / kurtosis.
    inline bool is_zero_variance(const central_sums& c) noexcept
    {
        // m2 of x <= (1e-15 mean)^2 (1e-15: np.finfo(float64).resolution), in the units of d.
        const double r = power_of_two(c.deviation_exponent)(1e-15 * (c.scaled_mean + c.scaled_mean_low));
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
