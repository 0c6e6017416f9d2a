#ifndef ATTENTION_PLASTICITY_DETAIL_DOUBLE_DOUBLE_HPP
#define ATTENTION_PLASTICITY_DETAIL_DOUBLE_DOUBLE_HPP

// Double-double arithmetic (a value as an unevaluated sum hi + lo of two doubles), ported from
// the QD-derived dd_real used by scipy/special/cephes/kolmogorov.c, so that the one-sided
// Smirnov sum is carried out exactly as SciPy does (docs/method.md §7).

#include <cmath>

namespace attention_plasticity
{
namespace detail
{
    struct dd
    {
        double hi;
        double lo;
    };

    inline dd dd_make(double hi, double lo = 0.0) noexcept { return dd{hi, lo}; }

    inline double quick_two_sum(double a, double b, double& err) noexcept
    {
        const double s = a + b;
        err = b - (s - a);
        return s;
    }

    inline double two_sum(double a, double b, double& err) noexcept
    {
        const double s = a + b;
        const double c = s - a;
        const double d = b - c;
        const double e = s - c;
        err = (a - e) + d;
        return s;
    }

    inline double two_diff(double a, double b, double& err) noexcept
    {
        const double s = a - b;
        const double c = s - a;
        const double d = b + c;
        const double e = s - c;
        err = (a - e) - d;
        return s;
    }

#if defined(__FMA__) || defined(__FMA4__)
    // A hardware fma gives the exact product error directly (and it is also what the
    // compiler may contract a Dekker split into, which would break the split).
    inline double two_prod(double a, double b, double& err) noexcept
    {
        const double p = a * b;
        err = std::fma(a, b, -p);
        return p;
    }
#else
    inline void two_split(double a, double& hi, double& lo) noexcept
    {
        constexpr double splitter = 134217729.0;               // 2^27 + 1
        constexpr double split_thresh = 6.69692879491417e+299;  // 2^996
        if (a > split_thresh || a < -split_thresh)
        {
            a *= 3.7252902984619140625e-09;  // 2^-28
            const double temp = splitter * a;
            hi = temp - (temp - a);
            lo = a - hi;
            hi *= 268435456.0;  // 2^28
            lo *= 268435456.0;
        }
        else
        {
            const double temp = splitter * a;
            hi = temp - (temp - a);
            lo = a - hi;
        }
    }

    inline double two_prod(double a, double b, double& err) noexcept
    {
        double a_hi, a_lo, b_hi, b_lo;
        const double p = a * b;
        two_split(a, a_hi, a_lo);
        two_split(b, b_hi, b_lo);
        err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
        return p;
    }
#endif

    inline dd dd_add_d_d(double a, double b) noexcept
    {
        double e;
        const double s = two_sum(a, b, e);
        return dd{s, e};
    }

    inline dd dd_add_dd_d(dd a, double b) noexcept
    {
        double s2;
        double s1 = two_sum(a.hi, b, s2);
        s2 += a.lo;
        s1 = quick_two_sum(s1, s2, s2);
        return dd{s1, s2};
    }

    inline dd dd_add(dd a, dd b) noexcept
    {
        // IEEE-style error bound (Briggs and Kahan), as dd_ieee_add.
        double s2, t2;
        double s1 = two_sum(a.hi, b.hi, s2);
        const double t1 = two_sum(a.lo, b.lo, t2);
        s2 += t1;
        s1 = quick_two_sum(s1, s2, s2);
        s2 += t2;
        s1 = quick_two_sum(s1, s2, s2);
        return dd{s1, s2};
    }

    inline dd dd_neg(dd a) noexcept { return dd{-a.hi, -a.lo}; }
    inline dd dd_sub(dd a, dd b) noexcept { return dd_add(a, dd_neg(b)); }

    inline dd dd_sub_dd_d(dd a, double b) noexcept
    {
        double s2;
        double s1 = two_sum(a.hi, -b, s2);
        s2 += a.lo;
        s1 = quick_two_sum(s1, s2, s2);
        return dd{s1, s2};
    }

    inline dd dd_mul_d_d(double a, double b) noexcept
    {
        double e;
        const double p = two_prod(a, b, e);
        return dd{p, e};
    }

    inline dd dd_mul(dd a, dd b) noexcept
    {
        double p2;
        double p1 = two_prod(a.hi, b.hi, p2);
        p2 += (a.hi * b.lo + a.lo * b.hi);
        p1 = quick_two_sum(p1, p2, p2);
        return dd{p1, p2};
    }

    inline dd dd_mul_dd_d(dd a, double b) noexcept
    {
        double e1, e2;
        double p1 = two_prod(a.hi, b, e1);
        const double p2 = two_prod(a.lo, b, e2);
        p1 = quick_two_sum(p1, e2 + p2 + e1, e1);
        return dd{p1, e1};
    }

    inline dd dd_mul_d_dd(double a, dd b) noexcept { return dd_mul_dd_d(b, a); }

    inline dd dd_div(dd a, dd b) noexcept
    {
        // dd_accurate_div
        double q1 = a.hi / b.hi;
        dd r = dd_sub(a, dd_mul_dd_d(b, q1));
        double q2 = r.hi / b.hi;
        r = dd_sub(r, dd_mul_dd_d(b, q2));
        const double q3 = r.hi / b.hi;
        q1 = quick_two_sum(q1, q2, q2);
        return dd_add_dd_d(dd{q1, q2}, q3);
    }

    inline dd dd_div_d_d(double a, double b) noexcept { return dd_div(dd_make(a), dd_make(b)); }
    inline dd dd_div_dd_d(dd a, double b) noexcept { return dd_div(a, dd_make(b)); }
    inline dd dd_inv(dd a) noexcept { return dd_div(dd_make(1.0), a); }

    inline dd dd_floor(dd a) noexcept
    {
        double hi = std::floor(a.hi);
        double lo = 0.0;
        if (hi == a.hi)
        {
            lo = std::floor(a.lo);
            hi = quick_two_sum(hi, lo, lo);
        }
        return dd{hi, lo};
    }

    inline dd dd_ldexp(dd a, int e) noexcept { return dd{std::ldexp(a.hi, e), std::ldexp(a.lo, e)}; }

    inline dd dd_frexp(dd a, int& expt) noexcept
    {
        int exponent;
        double man = std::frexp(a.hi, &exponent);
        double b1 = std::ldexp(a.lo, -exponent);
        if (std::fabs(man) == 0.5 && man * b1 < 0)
        {
            man *= 2;
            b1 *= 2;
            exponent -= 1;
        }
        expt = exponent;
        return dd{man, b1};
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
