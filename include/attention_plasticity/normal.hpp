#ifndef ATTENTION_PLASTICITY_NORMAL_HPP
#define ATTENTION_PLASTICITY_NORMAL_HPP

// The standard normal distribution: its distribution function Phi and 1 - Phi, accurate in both
// tails, and its quantile function Phi^-1.

#include <cmath>
#include <cstddef>
#include <vector>

namespace attention_plasticity
{
/// Phi(z) = P(Z <= z). Through erfc, so the lower tail keeps full relative accuracy
/// down to z = -37 (Phi ~ 1e-299) instead of cancelling in 1 - something.
inline double normal_cdf(double z) noexcept
{
    return 0.5 * std::erfc(-z * 0.70710678118654752440);
}

namespace detail
{
    /// Phi on [lo, hi] as a cubic Hermite spline through exact values and slopes at nodes
    /// 2^-10 apart: interpolation error <= h^4/384 max|Phi^(4)| ~ 1.5e-15 (plus a few ulp of
    /// evaluation); 278 KB of nodes, built once. For the KS statistic, where each of the n
    /// Phi values of a sample enters D_n = sup |F_n - Phi| with an absolute tolerance.
    class normal_cdf_spline
    {
    public:
        static constexpr double lo = -8.5;
        static constexpr double hi = 8.5;
        static constexpr double per_unit = 1024.0;
        static constexpr std::size_t intervals = 17 * 1024;

        normal_cdf_spline() : m_nodes(2 * (intervals + 1))
        {
            constexpr double inv_sqrt_2pi = 0.39894228040143267794;
            for (std::size_t i = 0; i <= intervals; ++i)
            {
                const double z = lo + static_cast<double>(i) / per_unit;  // exact
                m_nodes[2 * i] = 0.5 * std::erfc(-z * 0.70710678118654752440);
                m_nodes[2 * i + 1] = inv_sqrt_2pi * std::exp(-0.5 * z * z) / per_unit;  // h Phi'(z)
            }
        }

        double operator()(double z) const noexcept
        {
            if (!(z > lo && z < hi))
            {
                return 0.5 * std::erfc(-z * 0.70710678118654752440);  // tails (and NaN): exact
            }
            const double s = (z - lo) * per_unit;
            std::size_t i = static_cast<std::size_t>(s);
            i = i < intervals ? i : intervals - 1;
            const double t = s - static_cast<double>(i);
            const double* p = m_nodes.data() + 2 * i;
            const double f0 = p[0], m0 = p[1], f1 = p[2], m1 = p[3];
            const double df = f1 - f0;
            const double c2 = 3.0 * df - 2.0 * m0 - m1;
            const double c3 = m0 + m1 - 2.0 * df;
            return f0 + t * (m0 + t * (c2 + t * c3));
        }

    private:
        std::vector<double> m_nodes;  // Phi(z_i), h Phi'(z_i), interleaved
    };

    inline const normal_cdf_spline& normal_cdf_table()
    {
        static const normal_cdf_spline table;
        return table;
    }
}  // namespace detail

/// Phi(z) within ~2e-15 absolute (spline on [-8.5, 8.5], erfc outside), several times faster
/// than normal_cdf: for maxima or sums of many Phi values such as the KS statistic.
/// normal_cdf keeps full relative accuracy in the tails.
inline double normal_cdf_fast(double z) noexcept
{
    return detail::normal_cdf_table()(z);
}

/// 1 - Phi(z) = P(Z > z), accurate in the upper tail.
inline double normal_sf(double z) noexcept
{
    return 0.5 * std::erfc(z * 0.70710678118654752440);
}

/// 4 p (1 - p) with p = Phi(z), the Bernoulli variance scaled to [0, 1]. Uses the smaller
/// tail probability so that the relative error stays at a few ulp for |z| up to 37;
/// +-inf give 0 and NaN stays NaN.
inline double plasticity_from_z(double z) noexcept
{
    const double tail = normal_sf(std::fabs(z));
    return 4.0 * tail * (1.0 - tail);
}

/// Phi^-1(p) for p in (0, 1): Acklam's rational approximation (relative error 1.2e-9), then
/// one Halley step on Phi through erfc, which brings it to a few ulp.
inline double normal_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    const double low = 0.02425;
    double x;
    if (p < low)
    {
        const double q = std::sqrt(-2.0 * std::log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    else if (p <= 1.0 - low)
    {
        const double q = p - 0.5;
        const double r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    else
    {
        const double q = std::sqrt(-2.0 * std::log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    // Halley: e = Phi(x) - p (from the smaller tail), u = e sqrt(2 pi) exp(x^2 / 2).
    const double e = x < 0.0 ? normal_cdf(x) - p : (1.0 - p) - normal_sf(x);
    const double u = e * 2.50662827463100050242 * std::exp(0.5 * x * x);
    return x - u / (1.0 + 0.5 * x * u);
}

namespace detail
{
    using attention_plasticity::normal_quantile;  // its earlier name (it lived in intervals.hpp)
}  // namespace detail
}  // namespace attention_plasticity

#endif
