#ifndef ATTENTION_PLASTICITY_DETAIL_SMIRNOV_HPP
#define ATTENTION_PLASTICITY_DETAIL_SMIRNOV_HPP

// The one-sided Smirnov survival function P(D_n^+ >= x), ported from SciPy 1.10's
// scipy/special/cephes/kolmogorov.c with its double-double summation (docs/method.md §7).

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "double_double.hpp"

namespace attention_plasticity
{
namespace detail
{
    // M_PI and M_LN2 are POSIX, not standard C++.
    constexpr double pi_v = 3.141592653589793238462643383279502884;
    constexpr double ln2_v = 0.693147180559945309417232121458176568;

    // ------------------------------------------------------------------------------------
    // scipy.special.smirnov: one-sided Smirnov survival function P(D_n^+ >= x), ported from
    // SciPy's cephes/kolmogorov.c (_smirnov and helpers; the pdf part is dropped because
    // nothing here needs it and it does not influence sf or cdf).
    // ------------------------------------------------------------------------------------
    struct smirnov_probs
    {
        double sf;
        double cdf;
    };

    // cephes MINLOG as SciPy builds it (denormals allowed): log(2^-1075).
    constexpr double smirnov_minlog = -7.451332191019412076235E2;
    constexpr long long smirnov_max_compute_n = 1000000;

    // Computes floor(n*x) and the remainder exactly.
    inline double smirnov_mod_nx(long long n, double x, long long& nx_floor, double& nx) noexcept
    {
        const dd nxd = dd_mul_d_d(static_cast<double>(n), x);
        const dd floord = dd_floor(nxd);
        const dd alphad = dd_sub(nxd, floord);
        double alpha = alphad.hi;
        long long fl = static_cast<long long>(floord.hi);
        if (alpha == 1)
        {
            fl += 1;
            alpha = 0;
        }
        nx = nxd.hi;
        nx_floor = fl;
        return alpha;
    }

    // Binomial coefficient as (mantissa in [0.5, 1), binary exponent): it overflows double.
    inline void smirnov_update_binomial(dd& cman, long long& cexpt, long long n, long long j) noexcept
    {
        int expt;
        const dd rat = dd_div_d_d(static_cast<double>(n - j), static_cast<double>(j) + 1.0);
        const dd man2 = dd_frexp(dd_mul(cman, rat), expt);
        cexpt += expt;
        cman = man2;
    }

    // a^m trading some accuracy for time exactly as SciPy's pow_D does.
    inline dd smirnov_pow_d(dd a, long long m) noexcept
    {
        if (m <= 0)
        {
            if (m == 0)
            {
                return dd_make(1.0);
            }
            return dd_inv(smirnov_pow_d(a, -m));
        }
        if (a.hi == 0.0)
        {
            return dd_make(0.0);
        }
        const double md = static_cast<double>(m);
        const double ans = std::pow(a.hi, md);
        const double r = a.lo / a.hi;
        double adj = md * r;
        if (std::fabs(adj) > 1e-8)
        {
            if (std::fabs(adj) < 1e-4)
            {
                adj += (md * r) * ((md - 1) / 2.0 * r);
            }
            else
            {
                adj = std::expm1(md * std::log1p(r));
            }
        }
        return dd_add_d_d(ans, ans * adj);
    }

    inline double smirnov_pow2(double a, double b, long long m) noexcept
    {
        return smirnov_pow_d(dd_add_d_d(a, b), m).hi;
    }

    inline double smirnov_next_power_of_2(double x) noexcept
    {
        const double q = std::ldexp(x, 1 - DBL_MANT_DIG);
        double l = std::fabs(q + x);
        if (l == 0)
        {
            l = std::fabs(x);
        }
        else
        {
            const int lint = static_cast<int>(l);
            if (lint == l)
            {
                l = lint;
            }
        }
        return l;
    }

    // a^m = significand * 2^exponent, split so that no intermediate under/overflows.
    inline dd smirnov_pow2_scaled(dd a, long long m, long long& exponent) noexcept
    {
        constexpr int max_exponent = 960;  // < 1023 - 52: keeps both words normalized
        if (m <= 0)
        {
            if (m == 0)
            {
                exponent = 0;
                return dd_make(1.0);
            }
            long long e1;
            int e2;
            dd ans = smirnov_pow2_scaled(a, -m, e1);
            ans = dd_frexp(dd_inv(ans), e2);
            exponent = -e1 + e2;
            return ans;
        }
        int ye;
        const dd y = dd_frexp(a, ye);
        if (m == 1)
        {
            exponent = ye;
            return y;
        }
        long long max_expt = max_exponent;
        const double md = static_cast<double>(m);
        if (md * (y.hi - 1) / y.hi < -max_exponent * ln2_v)
        {
            const double lg2y = std::log(y.hi) / ln2_v;
            const double lg_ans = md * lg2y;
            if (lg_ans <= -max_exponent)
            {
                max_expt = static_cast<long long>(smirnov_next_power_of_2(-max_exponent / lg2y + 1) / 2);
            }
        }
        if (m <= max_expt)
        {
            int ans_e;
            const dd ans = dd_frexp(smirnov_pow_d(y, m), ans_e);
            exponent = ans_e + m * ye;
            return ans;
        }
        const long long q = m / max_expt;
        const long long r = m % max_expt;
        long long y2r_e, y2m_e, y2mq_e;
        const dd y2r = smirnov_pow2_scaled(y, r, y2r_e);
        const dd y2m = smirnov_pow2_scaled(y, max_expt, y2m_e);
        const dd y2mq = smirnov_pow2_scaled(y2m, q, y2mq_e);
        int ans_e;
        const dd ans = dd_frexp(dd_mul(y2r, y2mq), ans_e);
        y2mq_e += y2m_e * q;
        exponent = ans_e + y2mq_e + y2r_e + m * ye;
        return ans;
    }

    // ((a + b) / (c + d))^m
    inline dd smirnov_pow4_d(double a, double b, double c, double d, long long m) noexcept
    {
        if (m <= 0)
        {
            if (m == 0)
            {
                return dd_make(1.0);
            }
            return smirnov_pow4_d(c, d, a, b, -m);
        }
        const dd A = dd_add_d_d(a, b);
        const dd C = dd_add_d_d(c, d);
        if (A.hi == 0.0)
        {
            return C.hi == 0.0 ? dd_make(std::numeric_limits<double>::quiet_NaN()) : dd_make(0.0);
        }
        if (C.hi == 0.0)
        {
            return dd_make(A.hi < 0 ? -std::numeric_limits<double>::infinity()
                                    : std::numeric_limits<double>::infinity());
        }
        return smirnov_pow_d(dd_div(A, C), m);
    }

    // One term A_v(n, x) = C(n, v) (1 - x - v/n)^(n - v) (x + v/n)^(v - 1).
    inline dd smirnov_term(long long n, double x, long long v, dd cman, long long cexpt) noexcept
    {
        const double nd = static_cast<double>(n);
        long long t1e, t2e;
        const dd t2x = dd_sub_dd_d(dd_div_d_d(static_cast<double>(n - v), nd), x);
        const dd t2 = smirnov_pow2_scaled(t2x, n - v, t2e);
        const dd t1x = dd_add_dd_d(dd_div_d_d(static_cast<double>(v), nd), x);
        const dd t1 = smirnov_pow2_scaled(t1x, v - 1, t1e);
        const dd ans = dd_mul(dd_mul(t1, t2), cman);
        const long long e = cexpt + t1e + t2e;
        // ldexp saturates anyway far before int limits.
        const int ei = static_cast<int>(std::max<long long>(std::min<long long>(e, 1 << 20), -(1 << 20)));
        return dd_ldexp(ans, ei);
    }

    inline smirnov_probs smirnov_impl(long long n, double x) noexcept
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        if (!(n > 0 && x >= 0.0 && x <= 1.0))
        {
            return {nan, nan};
        }
        if (n == 1)
        {
            return {1 - x, x};
        }
        if (x == 0.0)
        {
            return {1.0, 0.0};
        }
        if (x == 1.0)
        {
            return {0.0, 1.0};
        }
        const double nd = static_cast<double>(n);
        long long nxfl;
        double nx;
        const double alpha = smirnov_mod_nx(n, x, nxfl, nx);
        long long n1mxfl = n - nxfl - (alpha == 0 ? 0 : 1);
        long long n1mxceil = n - nxfl;
        // alpha == 0: the last term belongs to neither sum.
        if (alpha == 0)
        {
            n1mxfl -= 1;
            n1mxceil += 1;
        }
        double cdf, sf;
        // x <= 1/n
        if (nxfl == 0 || (nxfl == 1 && alpha == 0))
        {
            const double t = smirnov_pow2(1, x, n - 1);
            cdf = x * t;
            sf = 1 - cdf;
            return {sf, cdf};
        }
        // sf underflows
        if (-2 * nd * x * x < smirnov_minlog)
        {
            return {0, 1};
        }
        // x >= 1 - 1/n
        if (nxfl >= n - 1)
        {
            sf = smirnov_pow2(1, -x, n);
            cdf = 1 - sf;
            return {sf, cdf};
        }
        // n too big to sum: SciPy's approximation p ~ exp(-(6nx+1)^2 / 18n)
        if (n > smirnov_max_compute_n)
        {
            const double logp = -std::pow(6.0 * nd * x + 1, 2) / 18.0 / nd;
            if (logp < -ln2_v)
            {
                sf = std::exp(logp);
                cdf = 1 - sf;
            }
            else
            {
                cdf = -std::expm1(logp);
                sf = 1 - cdf;
            }
            return {sf, cdf};
        }
        // The alternating upper sum only when it has very few terms.
        const long long n_upper_terms = n - n1mxceil + 1;
        bool use_upper = (n_upper_terms <= 1 && x < 0.5);
        use_upper = use_upper || ((n >= 10) && (n_upper_terms <= 3) && (x <= 0.5 / std::sqrt(nd)));

        long long start = 0, step = 1, n_terms = n1mxfl + 1;
        const long long vmid = n / 2;
        dd cman = dd_make(1.0);
        long long cexpt = 0;
        dd aj;
        dd aj_sum = dd_make(0.0);
        if (use_upper)
        {
            start = n;
            step = -1;
            n_terms = n - n1mxceil + 1;
            aj = smirnov_pow4_d(1, x, 1, 0, n - 1);
        }
        else
        {
            const dd t2 = smirnov_pow4_d(1, -x, 1, 0, n);
            aj = dd_div_dd_d(t2, x);
        }
        aj_sum = dd_add(aj_sum, aj);
        smirnov_update_binomial(cman, cexpt, n, 0);
        for (long long j = 1; j < n_terms; ++j)
        {
            const long long v = start + j * step;
            aj = smirnov_term(n, x, v, cman, cexpt);
            if (std::isfinite(aj.hi) && aj.hi != 0.0)
            {
                aj_sum = dd_add(aj_sum, aj);
            }
            if (aj.hi != 0.0)
            {
                if ((4 * static_cast<double>(n_terms - j) * std::fabs(aj.hi) < DBL_EPSILON * aj_sum.hi)
                    && (j != n_terms - 1))
                {
                    break;
                }
            }
            else if (j > vmid)
            {
                break;
            }
            smirnov_update_binomial(cman, cexpt, n, j);
        }
        const double prob = dd_mul_d_dd(x, aj_sum).hi;
        if (step < 0)
        {
            cdf = prob;
            sf = 1 - prob;
        }
        else
        {
            cdf = 1 - prob;
            sf = prob;
        }
        cdf = std::min(std::max(cdf, 0.0), 1.0);
        sf = std::min(std::max(sf, 0.0), 1.0);
        return {sf, cdf};
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
