#ifndef ATTENTION_PLASTICITY_STUDENT_T_HPP
#define ATTENTION_PLASTICITY_STUDENT_T_HPP

// Student's t distribution, the reference law of a change whose standard error comes from G
// sampling units (documents): its two-sided tail P(|T| >= |t|) with nu degrees of freedom,
// accurate in the far tail, and the quantile of that tail (docs/method.md §8.6), plus the
// Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates.
// nu = +inf is the standard normal law (normal.hpp).

#include <cmath>
#include <limits>

#include "normal.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// The continued fraction of the regularized incomplete beta function I_x(a, b) (modified
    /// Lentz; it converges fast for x < (a + 1) / (a + b + 2)): I_x(a, b) = front x cf, where
    /// front = x^a (1 - x)^b / (a B(a, b)). NaN when it has not converged (never for the a, b of
    /// student_t_two_sided_p up to student_t_normal_df: about sqrt(max(a, b)) terms).
    inline double incomplete_beta_fraction(double x, double a, double b)
    {
        constexpr double tiny = 1e-300;
        constexpr double eps = 1e-16;
        const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
        double c = 1.0;
        double d = 1.0 - qab * x / qap;
        d = 1.0 / (std::fabs(d) < tiny ? tiny : d);
        double h = d;
        for (int m = 1; m <= 100000; ++m)
        {
            const double m2 = 2.0 * m;
            double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
            d = 1.0 + aa * d;
            d = 1.0 / (std::fabs(d) < tiny ? tiny : d);
            c = 1.0 + aa / c;
            c = std::fabs(c) < tiny ? tiny : c;
            h *= d * c;
            aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
            d = 1.0 + aa * d;
            d = 1.0 / (std::fabs(d) < tiny ? tiny : d);
            c = 1.0 + aa / c;
            c = std::fabs(c) < tiny ? tiny : c;
            const double step = d * c;
            h *= step;
            if (std::fabs(step - 1.0) < eps)
            {
                return h;
            }
        }
        return std::numeric_limits<double>::quiet_NaN();
    }

    /// log(Gamma(a + 1/2) / Gamma(a)) for a > 0: lgamma's difference below a = 30 (absolute
    /// error about 1e-14 there), beyond it the asymptotic series 1/2 log a - 1/(8a) + 1/(192 a^3)
    /// - 1/(640 a^5) + 17/(14336 a^7) (next term -31/(18432 a^9) < 1e-16), which does not lose
    /// the digits the difference of two large lgamma values would (4e-13 at a = 500).
    inline double log_gamma_ratio_half(double a)
    {
        if (a < 30.0)
        {
            return std::lgamma(a + 0.5) - std::lgamma(a);
        }
        const double r = 1.0 / (a * a);
        return 0.5 * std::log(a) - 1.0 / (8.0 * a) + (1.0 / 192.0 - (1.0 / 640.0 - 17.0 / 14336.0 * r) * r) * r / a;
    }

    /// I_x(a, 1/2) with x = p and 1 - x = q given separately (so that neither tail cancels in
    /// 1 - something) and log_inverse_p = log(1 / p) = log1p(q / p) computed by the caller: the
    /// fraction on the side where it converges fast.
    inline double incomplete_beta_half(double p, double q, double log_inverse_p, double a)
    {
        if (p <= 0.0)
        {
            return 0.0;
        }
        if (q <= 0.0)
        {
            return 1.0;
        }
        constexpr double log_gamma_half = 0.57236494292470008707;  // log Gamma(1/2) = log sqrt(pi)
        // front = p^a q^(1/2) / B(a, 1/2), B(a, 1/2) = Gamma(a) Gamma(1/2) / Gamma(a + 1/2).
        const double log_front = log_gamma_ratio_half(a) - log_gamma_half - a * log_inverse_p + 0.5 * std::log(q);
        const double b = 0.5;
        if (p < (a + 1.0) / (a + b + 2.0))
        {
            return std::exp(log_front) * incomplete_beta_fraction(p, a, b) / a;
        }
        return 1.0 - std::exp(log_front) * incomplete_beta_fraction(q, b, a) / b;
    }
}  // namespace detail

/// Beyond these degrees of freedom the t law is taken as the normal law: their tails differ by a
/// relative amount of order t^4 / (4 df), below 1e-5 for |t| < 8 (p > 1e-15).
inline constexpr double student_t_normal_df = 1e8;

/// P(|T| >= |t|) for T ~ Student t with `df` degrees of freedom, df > 0 (above
/// student_t_normal_df and +inf: the normal law, erfc(|t| / sqrt 2)): I_{df / (df + t^2)}(df / 2,
/// 1 / 2), to a relative 1e-13 up to 1000 df, 1e-10 up to 1e6 and 2e-9 up to 1e8 (the continued
/// fraction's many steps), far tails included. NaN for a NaN t or df <= 0 (or NaN); 0 for an
/// infinite t.
inline double student_t_two_sided_p(double t, double df)
{
    if (std::isnan(t) || !(df > 0.0))
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    const double x = std::fabs(t);
    if (std::isinf(x))
    {
        return 0.0;
    }
    if (df > student_t_normal_df)
    {
        return std::erfc(x / std::sqrt(2.0));
    }
    // p = df / (df + t^2) and q = t^2 / (df + t^2), each computed directly (no 1 - p), and
    // log(1 / p) = log1p(t^2 / df).
    const double denominator = df + x * x;
    return detail::incomplete_beta_half(df / denominator, x * x / denominator, std::log1p(x * x / df), 0.5 * df);
}

/// The t with P(|T| >= t) = `p` (0 < p <= 1) for `df` degrees of freedom (+inf: the normal
/// law): the half-width factor of a two-sided 1 - p interval, t_{1 - p/2, df}. By bisection on
/// student_t_two_sided_p to the last bits; NaN for p outside (0, 1] or df <= 0.
inline double student_t_two_sided_quantile(double p, double df)
{
    if (!(p > 0.0 && p <= 1.0) || !(df > 0.0))
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    if (p == 1.0)
    {
        return 0.0;
    }
    if (df > student_t_normal_df)
    {
        return normal_quantile(1.0 - 0.5 * p);
    }
    // The t tail is heavier than the normal one: the normal quantile is a lower end.
    double low = normal_quantile(1.0 - 0.5 * p);
    double high = 2.0 * low + 1.0;
    while (student_t_two_sided_p(high, df) > p)
    {
        low = high;
        high *= 2.0;
        if (std::isinf(high))
        {
            return high;
        }
    }
    for (int i = 0; i < 200 && low < high; ++i)
    {
        const double mid = 0.5 * (low + high);
        if (mid <= low || mid >= high)
        {
            break;
        }
        (student_t_two_sided_p(mid, df) > p ? low : high) = mid;
    }
    return high;
}

/// The Welch-Satterthwaite degrees of freedom of s^2 = s1^2 + s2^2, the two variance
/// estimates independent with df1 and df2 degrees of freedom (+inf: known variance):
/// s^4 / (s1^4 / df1 + s2^4 / df2); +inf when both terms are known; NaN for a NaN input.
inline double welch_df(double s1, double df1, double s2, double df2)
{
    if (std::isnan(s1) || std::isnan(s2) || std::isnan(df1) || std::isnan(df2))
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    const double v1 = s1 * s1, v2 = s2 * s2;
    const double denominator = (std::isinf(df1) ? 0.0 : v1 * v1 / df1) + (std::isinf(df2) ? 0.0 : v2 * v2 / df2);
    if (denominator == 0.0)
    {
        return std::numeric_limits<double>::infinity();
    }
    return (v1 + v2) * (v1 + v2) / denominator;
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_STUDENT_T_HPP
