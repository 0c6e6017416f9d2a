#ifndef ATTENTION_PLASTICITY_MOMENTS_HPP
#define ATTENTION_PLASTICITY_MOMENTS_HPP

// Sample moments: mean, ddof=1 standard deviation, the bias-corrected skewness and excess
// kurtosis of scipy.stats.skew / kurtosis (bias=False), accumulated in double whatever the
// input's value type (docs/method.md §2.7, §7).

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
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
    // Two-pass moments of a contiguous double range (finite values, n >= 1).
    struct central_sums
    {
        double mean;
        double m2;  // 1/n central moments
        double m3;
        double m4;
    };

    inline central_sums central_moments(const double* x, std::size_t n) noexcept
    {
        const double nd = static_cast<double>(n);
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            s += x[i];
        }
        double mean = s / nd;
        // One correction step: makes the mean exact for constant data, so that zero
        // variance is detected reliably.
        double c = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            c += x[i] - mean;
        }
        mean += c / nd;
        double s2 = 0.0, s3 = 0.0, s4 = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            const double d = x[i] - mean;
            const double d2 = d * d;
            s2 += d2;
            s3 += d2 * d;
            s4 += d2 * d2;
        }
        return {mean, s2 / nd, s3 / nd, s4 / nd};
    }

    // central_moments of K columns at once, each with exactly the operations and order of
    // central_moments (identical results): K independent accumulation chains instead of
    // one latency-bound chain per column.
    template <std::size_t K>
    void central_moments_k(const double* const* x, std::size_t n, central_sums* out) noexcept
    {
        const double nd = static_cast<double>(n);
        double s[K] = {};
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t k = 0; k < K; ++k)
            {
                s[k] += x[k][i];
            }
        }
        double mean[K];
        for (std::size_t k = 0; k < K; ++k)
        {
            mean[k] = s[k] / nd;
        }
        double c[K] = {};
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t k = 0; k < K; ++k)
            {
                c[k] += x[k][i] - mean[k];
            }
        }
        for (std::size_t k = 0; k < K; ++k)
        {
            mean[k] += c[k] / nd;
        }
        double s2[K] = {}, s3[K] = {}, s4[K] = {};
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t k = 0; k < K; ++k)
            {
                const double d = x[k][i] - mean[k];
                const double d2 = d * d;
                s2[k] += d2;
                s3[k] += d2 * d;
                s4[k] += d2 * d2;
            }
        }
        for (std::size_t k = 0; k < K; ++k)
        {
            out[k] = {mean[k], s2[k] / nd, s3[k] / nd, s4[k] / nd};
        }
    }

    // SciPy's "all values equal" rule of skew / kurtosis.
    inline bool is_zero_variance(const central_sums& c) noexcept
    {
        const double r = 1e-15 * c.mean;  // np.finfo(float64).resolution
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
        r.std_ddof1 = n > 1 ? std::sqrt(c.m2 * static_cast<double>(n) / static_cast<double>(n - 1))
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
