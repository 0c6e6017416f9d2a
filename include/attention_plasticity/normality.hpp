#ifndef ATTENTION_PLASTICITY_NORMALITY_HPP
#define ATTENTION_PLASTICITY_NORMALITY_HPP

// Normality summaries of SPEC 2.7 and 2.8: bias-corrected skewness and excess kurtosis
// (as scipy.stats.skew / kurtosis with bias=False), the one-sample Kolmogorov-Smirnov test
// against N(0, 1) with the exact distribution of D_n (a port of SciPy 1.10's
// scipy.stats.kstwo, i.e. scipy/stats/_ksstats.py, and of scipy.special.smirnov from
// cephes/kolmogorov.c), and the per-component summaries used by the pipeline.
//
// Every statistic accumulates in double whatever the input value type.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xutils.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "random.hpp"
#include "normal.hpp"

namespace attention_plasticity
{
/// Moments of a sample. `zero_variance` is SciPy's "all values equal" rule
/// (m2 <= (1e-15 * mean)^2, m2 the 1/n central moment); then skewness and kurtosis are 0
/// where SciPy would return NaN.
struct moments_result
{
    double mean;
    double std_ddof1;
    double skewness;         // scipy.stats.skew(x, bias=False)
    double excess_kurtosis;  // scipy.stats.kurtosis(x, fisher=True, bias=False)
    bool zero_variance;
};

struct ks_result
{
    double statistic;  // D_n = sup |F_n - Phi|
    double p_value;    // P(D_n >= statistic) under H0, as scipy.stats.kstest(x, 'norm')
};

/// SPEC 2.7 summary of one standardized sample.
struct residual_normality_result
{
    double skewness;
    double excess_kurtosis;
    double ks_p_value;
};

/// SPEC 2.8 summary of the noise components (columns of an n x m matrix).
struct noise_normality_result
{
    double median_abs_skewness;
    double median_abs_kurtosis;
    double median_ks_p_value;
    double fraction_ks_p_below_alpha;
    std::size_t n_components;
    std::size_t n_ks_tested;
};

/// Scratch buffers of the raw-pointer overloads, reusable across calls (and columns) so
/// that the pipeline does not allocate per call. Contents between calls are unspecified.
struct normality_workspace
{
    std::vector<double> values;           // gathered (and standardized) samples
    std::vector<double> sorted;           // ascending copy for the KS statistic
    std::vector<std::size_t> bucket_end;  // distribution sort bookkeeping
    std::vector<std::size_t> bucket_of;
    std::vector<double> cdf;              // Phi of each value (KS statistic)
    std::vector<double> sorted_cdf;       // ... in sorted order
    std::vector<double> columns;          // noise_normality: the matrix, column after column
};

namespace detail
{
    // M_PI and M_LN2 are POSIX, not standard C++.
    constexpr double pi_v = 3.141592653589793238462643383279502884;
    constexpr double ln2_v = 0.693147180559945309417232121458176568;

    // ------------------------------------------------------------------------------------
    // Double-double arithmetic, ported from the QD-derived dd_real used by
    // scipy/special/cephes/kolmogorov.c, so that smirnov() sums exactly as SciPy does.
    // ------------------------------------------------------------------------------------
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

    // ------------------------------------------------------------------------------------
    // Two-sided Kolmogorov distribution of D_n: port of scipy/stats/_ksstats.py (1.10).
    // ------------------------------------------------------------------------------------
    inline double clip_prob(double p) noexcept { return std::min(std::max(p, 0.0), 1.0); }

    inline double select_prob(double cdfprob, double sfprob, bool cdf) noexcept
    {
        return clip_prob(cdf ? cdfprob : sfprob);
    }

    // log(n! / n^n) by Stirling with n log n removed up front (no cancellation).
    inline double log_nfactorial_div_n_pow_n(double n) noexcept
    {
        static constexpr double coeffs[] = {-2.955065359477124183e-2, 6.4102564102564102564e-3,
                                            -1.9175269175269175269e-3, 8.4175084175084175084e-4,
                                            -5.952380952380952381e-4,  7.9365079365079365079e-4,
                                            -2.7777777777777777778e-3, 8.3333333333333333333e-2};
        const double rn = 1.0 / n;
        const double u = rn / n;
        double poly = 0.0;
        for (double c : coeffs)
        {
            poly = poly * u + c;
        }
        const double log_2pi = std::log(2 * pi_v);
        return std::log(n) / 2 - n + log_2pi / 2 + rn * poly;
    }

    // Square matrices, row-major, m x m; c = a * b (c distinct from a and b).
    inline void square_matmul(const double* a, const double* b, double* c, std::size_t m) noexcept
    {
        std::fill(c, c + m * m, 0.0);
        for (std::size_t i = 0; i < m; ++i)
        {
            double* ci = c + i * m;
            const double* ai = a + i * m;
            for (std::size_t k = 0; k < m; ++k)
            {
                const double aik = ai[k];
                if (aik == 0.0)
                {
                    continue;  // H is lower Hessenberg: skips about half of the work early on
                }
                const double* bk = b + k * m;
                for (std::size_t j = 0; j < m; ++j)
                {
                    ci[j] += aik * bk[j];
                }
            }
        }
    }

    // Durbin matrix, Marsaglia-Tsang-Wang evaluation: P(D_n <= d). Memory O(m^2) with
    // m = 2 ceil(n d) - 1, time O(m^3 log n).
    inline double kolmogn_dmtw(std::size_t n, double d, bool cdf)
    {
        constexpr double ep128 = 0x1.0p128;
        constexpr double em128 = 0x1.0p-128;
        if (d >= 1.0)
        {
            return select_prob(1.0, 0.0, cdf);
        }
        const double nd = static_cast<double>(n) * d;
        if (nd <= 0.5)
        {
            return select_prob(0.0, 1.0, cdf);
        }
        const std::size_t k = static_cast<std::size_t>(std::ceil(nd));
        const double h = static_cast<double>(k) - nd;
        const std::size_t m = 2 * k - 1;

        std::vector<double> v(m), w(m);
        double fac = 1.0;
        for (std::size_t j = 1; j <= m; ++j)
        {
            v[j - 1] = 1.0 - std::pow(h, static_cast<double>(j));
            w[j - 1] = fac;
            fac /= static_cast<double>(j);  // may underflow, harmless
            v[j - 1] *= fac;
        }
        const double tt = std::pow(std::max(2 * h - 1.0, 0.0), static_cast<double>(m))
                          - 2 * std::pow(h, static_cast<double>(m));
        v[m - 1] = (1.0 + tt) * fac;

        std::vector<double> H(m * m, 0.0), Hpwr(m * m, 0.0), tmp(m * m);
        for (std::size_t i = 1; i < m; ++i)
        {
            for (std::size_t r = i - 1; r < m; ++r)
            {
                H[r * m + i] = w[r - (i - 1)];
            }
        }
        for (std::size_t r = 0; r < m; ++r)
        {
            H[r * m] = v[r];
        }
        for (std::size_t c = 0; c < m; ++c)
        {
            H[(m - 1) * m + c] = v[m - 1 - c];
        }
        for (std::size_t i = 0; i < m; ++i)
        {
            Hpwr[i * m + i] = 1.0;
        }

        std::size_t nn = n;
        long long expnt = 0;   // scaling of Hpwr
        long long hexpnt = 0;  // scaling of H
        while (nn > 0)
        {
            if (nn % 2)
            {
                square_matmul(Hpwr.data(), H.data(), tmp.data(), m);
                Hpwr.swap(tmp);
                expnt += hexpnt;
            }
            nn /= 2;
            if (nn == 0)
            {
                break;  // SciPy squares once more here; the result is unused
            }
            square_matmul(H.data(), H.data(), tmp.data(), m);
            H.swap(tmp);
            hexpnt *= 2;
            if (std::fabs(H[(k - 1) * m + (k - 1)]) > ep128)
            {
                for (double& x : H)
                {
                    x /= ep128;
                }
                hexpnt += 128;
            }
        }

        double p = Hpwr[(k - 1) * m + (k - 1)];
        const double ndbl = static_cast<double>(n);
        // times n!/n^n
        for (std::size_t i = 1; i <= n; ++i)
        {
            p = static_cast<double>(i) * p / ndbl;
            if (std::fabs(p) < em128)
            {
                p *= ep128;
                expnt -= 128;
            }
        }
        if (expnt != 0)
        {
            p = std::ldexp(p, static_cast<int>(std::max<long long>(std::min<long long>(expnt, 1 << 20),
                                                                   -(1 << 20))));
        }
        return select_prob(p, 1.0 - p, cdf);
    }

    inline void pomeranz_j1j2(long long i, long long n, long long ll, long long ceilf, long long roundf,
                              long long& j1, long long& j2) noexcept
    {
        long long a, b;
        if (i == 0)
        {
            a = -ll - ceilf - 1;
            b = ll + ceilf - 1;
        }
        else
        {
            const long long ip1div2 = (i + 1) / 2;
            const long long ip1mod2 = (i + 1) % 2;
            if (ip1mod2 == 0)
            {
                if (ip1div2 == n + 1)
                {
                    a = n - ll - ceilf - 1;
                    b = n + ll + ceilf - 1;
                }
                else
                {
                    a = ip1div2 - 1 - ll - roundf - 1;
                    b = ip1div2 + ll - 1 + ceilf - 1;
                }
            }
            else
            {
                a = ip1div2 - 1 - ll - 1;
                b = ip1div2 + ll + roundf - 1;
            }
        }
        j1 = std::max(a + 2, 0LL);
        j2 = std::min(b, n);
    }

    // Pomeranz recursion: P(D_n <= x). Used by SciPy for n <= 140 only.
    inline double kolmogn_pomeranz(std::size_t n_, double x, bool cdf)
    {
        constexpr double ep128 = 0x1.0p128;
        constexpr double em128 = 0x1.0p-128;
        const long long n = static_cast<long long>(n_);
        const double nd = static_cast<double>(n);
        const double t = nd * x;
        const long long ll = static_cast<long long>(std::floor(t));
        const double f = t - static_cast<double>(ll);
        const double g = std::min(f, 1.0 - f);
        const long long ceilf = f > 0 ? 1 : 0;
        const long long roundf = f > 0.5 ? 1 : 0;
        const long long npwrs = 2 * (ll + 1);
        const std::size_t np = static_cast<std::size_t>(npwrs);
        // (g/n)^m/m!, (2g/n)^m/m!, ((1-2g)/n)^m/m!: Poisson probabilities up to a factor
        std::vector<double> gpower(np), twogpower(np), onem2gpower(np);
        gpower[0] = twogpower[0] = onem2gpower[0] = 1.0;
        const double g_over_n = g / nd, two_g_over_n = 2 * g / nd, one_minus_two_g_over_n = (1 - 2 * g) / nd;
        for (std::size_t m = 1; m < np; ++m)
        {
            const double md = static_cast<double>(m);
            gpower[m] = gpower[m - 1] * g_over_n / md;
            twogpower[m] = twogpower[m - 1] * two_g_over_n / md;
            onem2gpower[m] = onem2gpower[m - 1] * one_minus_two_g_over_n / md;
        }
        std::vector<double> V0(np, 0.0), V1(np, 0.0);
        V1[0] = 1;
        long long V0s = 0, V1s = 0;
        long long expnt = 0;
        long long j1, j2;
        pomeranz_j1j2(0, n, ll, ceilf, roundf, j1, j2);
        for (long long i = 1; i < 2 * n + 2; ++i)
        {
            const long long k1 = j1;
            V0.swap(V1);
            std::swap(V0s, V1s);
            std::fill(V1.begin(), V1.end(), 0.0);
            pomeranz_j1j2(i, n, ll, ceilf, roundf, j1, j2);
            const std::vector<double>& pwrs =
                (i == 1 || i == 2 * n + 1) ? gpower : ((i % 2) ? twogpower : onem2gpower);
            const long long ln2 = j2 - k1 + 1;
            if (ln2 > 0)
            {
                // conv = convolve(V0[k1 - V0s : k1 - V0s + ln2], pwrs[:ln2]); only the entries
                // conv[conv_start : conv_start + conv_len] are kept.
                const long long a0 = k1 - V0s;
                const long long la = std::max(0LL, std::min(a0 + ln2, npwrs) - std::max(a0, 0LL));
                const long long lb = std::min(ln2, npwrs);
                const long long conv_start = j1 - k1;
                const long long conv_len = j2 - j1 + 1;
                double vmax = -std::numeric_limits<double>::infinity();
                for (long long c = 0; c < conv_len; ++c)
                {
                    const long long idx = conv_start + c;
                    double s = 0.0;
                    const long long qlo = std::max(0LL, idx - (lb - 1));
                    const long long qhi = std::min(la - 1, idx);
                    for (long long q = qlo; q <= qhi; ++q)
                    {
                        s += V0[static_cast<std::size_t>(a0 + q)] * pwrs[static_cast<std::size_t>(idx - q)];
                    }
                    if (c < npwrs)
                    {
                        V1[static_cast<std::size_t>(c)] = s;
                    }
                }
                for (double vv : V1)
                {
                    vmax = std::max(vmax, vv);
                }
                // rescale to avoid underflow
                if (0 < vmax && vmax < em128)
                {
                    for (double& vv : V1)
                    {
                        vv *= ep128;
                    }
                    expnt -= 128;
                }
                V1s = V0s + j1 - k1;
            }
        }
        double ans = V1[static_cast<std::size_t>(n - V1s)];
        // times n!
        for (long long m = 1; m <= n; ++m)
        {
            if (std::fabs(ans) > ep128)
            {
                ans *= em128;
                expnt += 128;
            }
            ans *= static_cast<double>(m);
        }
        if (expnt != 0)
        {
            ans = std::ldexp(ans, static_cast<int>(expnt));
        }
        return select_prob(ans, 1.0 - ans, cdf);
    }

    // Pelz-Good approximation of P(D_n <= x) (transformed Li-Chien/Korolyuk expansion).
    inline double kolmogn_pelz_good(std::size_t n, double x, bool cdf) noexcept
    {
        constexpr double pi = pi_v;
        const double sqrt2pi = std::sqrt(2 * pi);
        const double pi_squared = pi * pi;
        const double pi_four = std::pow(pi, 4);
        const double pi_six = std::pow(pi, 6);
        const double sqrt3 = std::sqrt(3.0);
        if (x <= 0.0)
        {
            return select_prob(0.0, 1.0, cdf);
        }
        if (x >= 1.0)
        {
            return select_prob(1.0, 0.0, cdf);
        }
        const double nd = static_cast<double>(n);
        const double z = std::sqrt(nd) * x;
        const double zsquared = z * z, zthree = std::pow(z, 3), zfour = std::pow(z, 4), zsix = std::pow(z, 6);
        const double qlog = -pi_squared / 8 / zsquared;
        if (qlog < -708)
        {
            return select_prob(0.0, 1.0, cdf);
        }
        double q = std::exp(qlog);

        const double k1a = -zsquared;
        const double k1b = pi_squared / 4;
        const double k2a = 6 * zsix + 2 * zfour;
        const double k2b = (2 * zfour - 5 * zsquared) * pi_squared / 4;
        const double k2c = pi_four * (1 - 2 * zsquared) / 16;
        const double k3d = pi_six * (5 - 30 * zsquared) / 64;
        const double k3c = pi_four * (-60 * zsquared + 212 * zfour) / 16;
        const double k3b = pi_squared * (135 * zfour - 96 * zsix) / 4;
        const double k3a = -30 * zsix - 90 * std::pow(z, 8);

        double K[4] = {0.0, 0.0, 0.0, 0.0};
        // Horner scheme in q^(8k) over odd integers m = 2k - 1
        const long long maxk = static_cast<long long>(std::ceil(16 * z / pi));
        for (long long k = maxk; k > 0; --k)
        {
            const double m = static_cast<double>(2 * k - 1);
            const double msquared = m * m, mfour = std::pow(m, 4), msix = std::pow(m, 6);
            const double qpower = std::pow(q, static_cast<double>(8 * k));
            const double coeffs[4] = {1.0, k1a + k1b * msquared, k2a + k2b * msquared + k2c * mfour,
                                      k3a + k3b * msquared + k3c * mfour + k3d * msix};
            for (int i = 0; i < 4; ++i)
            {
                K[i] = K[i] * qpower + coeffs[i];
            }
        }
        const double denom[4] = {z, 6 * zfour, 72 * std::pow(z, 7), 6480 * std::pow(z, 10)};
        for (int i = 0; i < 4; ++i)
        {
            K[i] = K[i] * q * sqrt2pi / denom[i];
        }
        // Remaining sums over all integers k for K2 and K3.
        q = std::exp(-pi_squared / 2 / zsquared);
        const double sqrt3z = sqrt3 * z;
        double k2extra = 0.0, k3extra = 0.0;
        for (long long k = maxk; k > 0; --k)
        {
            const double kd = static_cast<double>(k);
            const double ksq = kd * kd;
            const double kspi = pi * kd;
            const double qp = std::pow(q, ksq);
            k2extra += ksq * qp;
            k3extra += (sqrt3z + kspi) * (sqrt3z - kspi) * ksq * qp;
        }
        k2extra *= pi_squared * sqrt2pi / (-36 * zthree);
        K[2] += k2extra;
        k3extra *= pi_squared * sqrt2pi / (216 * zsix);
        K[3] += k3extra;
        for (int i = 0; i < 4; ++i)
        {
            K[i] /= std::pow(nd, i / 2.0);
        }
        if (!cdf)
        {
            for (double& v : K)
            {
                v *= -1;
            }
            K[0] += 1;
        }
        return ((K[0] + K[1]) + K[2]) + K[3];
    }

    // Above this n, the 2*smirnov(n, x) branch of the SF (n x^2 in [2.2, 370)) would sum
    // O(n) double-double terms (~0.7 us each here; SciPy itself takes ~60 ms at n = 50000).
    // There we use 1 - PelzGood + the asymptotic P(D+ >= x and D- >= x)
    // = 2 sum_{k>=2} (-1)^k e^{-2k^2 n x^2}, which we measured within 2e-8 of SciPy 1.10's
    // 2*smirnov for n > 1000 (within 2e-9 for n > 10^4).
    constexpr std::size_t ks_exact_smirnov_max_n = 1000;

    inline double two_smirnov_sf_fast(std::size_t n, double x) noexcept
    {
        const double a2 = static_cast<double>(n) * x * x;
        double inter = 0.0;
        for (int k = 6; k >= 2; --k)
        {
            inter += ((k % 2) ? -1.0 : 1.0) * std::exp(-2.0 * k * k * a2);
        }
        return clip_prob(1.0 - kolmogn_pelz_good(n, x, true) + 2.0 * inter);
    }

    inline double two_smirnov_sf(std::size_t n, double x) noexcept
    {
        return 2 * smirnov_impl(static_cast<long long>(n), x).sf;
    }

    // _kolmogn of SciPy: CDF (cdf = true) or SF of the two-sided statistic D_n at x.
    // exact_smirnov = false takes the two shortcuts (fast 2*smirnov above
    // ks_exact_smirnov_max_n, skipped matrix power when the SF is 1.0 anyway); true runs
    // SciPy's algorithm in every branch.
    inline double kolmogn(std::size_t n, double x, bool cdf, bool exact_smirnov)
    {
        if (x >= 1.0)
        {
            return select_prob(1.0, 0.0, cdf);
        }
        if (x <= 0.0)
        {
            return select_prob(0.0, 1.0, cdf);
        }
        const double nd = static_cast<double>(n);
        const double t = nd * x;
        if (t <= 1.0)
        {
            // Ruben-Gambino: 1/2n <= x <= 1/n
            if (t <= 0.5)
            {
                return select_prob(0.0, 1.0, cdf);
            }
            double prob;
            if (n <= 140)
            {
                prob = 1.0;
                for (std::size_t i = 1; i <= n; ++i)
                {
                    prob *= static_cast<double>(i) * (1.0 / nd) * (2 * t - 1);
                }
            }
            else
            {
                prob = std::exp(log_nfactorial_div_n_pow_n(nd) + nd * std::log(2 * t - 1));
            }
            return select_prob(prob, 1.0 - prob, cdf);
        }
        if (t >= nd - 1)
        {
            // Ruben-Gambino
            const double prob = 2 * std::pow(1.0 - x, nd);
            return select_prob(1 - prob, prob, cdf);
        }
        if (x >= 0.5)
        {
            // exact: the two one-sided events are disjoint
            const double prob = two_smirnov_sf(n, x);
            return select_prob(1.0 - prob, prob, cdf);
        }
        const double nxsquared = t * x;
        if (n <= 140)
        {
            if (nxsquared <= 0.754693)
            {
                const double prob = kolmogn_dmtw(n, x, true);
                return select_prob(prob, 1.0 - prob, cdf);
            }
            if (nxsquared <= 4)
            {
                const double prob = kolmogn_pomeranz(n, x, true);
                return select_prob(prob, 1.0 - prob, cdf);
            }
            const double prob = two_smirnov_sf(n, x);
            return select_prob(1.0 - prob, prob, cdf);
        }
        // CDF and SF have different cutoffs on n x^2.
        if (!cdf)
        {
            if (nxsquared >= 370.0)
            {
                return 0.0;
            }
            if (nxsquared >= 2.2)
            {
                if (!exact_smirnov && n > ks_exact_smirnov_max_n)
                {
                    return two_smirnov_sf_fast(n, x);
                }
                return clip_prob(two_smirnov_sf(n, x));
            }
            // fall through: SF as 1 - CDF
        }
        double cdfprob;
        if (nxsquared >= 18.0)
        {
            cdfprob = 1.0;
        }
        else if (n <= 100000 && nd * std::pow(x, 1.5) <= 1.4)
        {
            // The SF is 1 - CDF and the CDF here is astronomically small (sqrt(n) x < 0.2):
            // when Pelz-Good puts it below 1e-30 (it tracks the exact value within a factor
            // ~30 there), 1 - CDF rounds to 1.0 whatever it is exactly, so skip the O(m^3 log n)
            // matrix power (~20 ms at n = 1e5).
            if (!cdf && !exact_smirnov && kolmogn_pelz_good(n, x, true) < 1e-30)
            {
                return 1.0;
            }
            cdfprob = kolmogn_dmtw(n, x, true);
        }
        else
        {
            cdfprob = kolmogn_pelz_good(n, x, true);
        }
        return select_prob(cdfprob, 1.0 - cdfprob, cdf);
    }

    inline void check_kolmogorov_args(const char* function, std::size_t n, double d)
    {
        if (n == 0)
        {
            throw_invalid(function, "sample size n must be positive, got n = 0");
        }
        if (is_nan(d))
        {
            throw_domain(function, "statistic d is NaN (n = ", n, ")");
        }
    }

    // ------------------------------------------------------------------------------------
    // Access to xtensor expressions as (pointer, strides) without copying when possible.
    // ------------------------------------------------------------------------------------
    template <class E, class = void>
    struct has_data_offset : std::false_type
    {
    };

    template <class E>
    struct has_data_offset<E, std::void_t<decltype(std::declval<const E&>().data_offset())>> : std::true_type
    {
    };

    template <class E>
    constexpr bool is_strided_expression_v = xt::has_data_interface<E>::value && xt::has_strides<E>::value
                                             && has_data_offset<E>::value
                                             && std::is_arithmetic<typename E::value_type>::value;

    // Calls f(pointer, strides) on e, evaluating e into a temporary container first when it
    // has no strided storage (e.g. an xfunction).
    template <std::size_t N, class E, class F>
    decltype(auto) with_strided(const E& e, F&& f)
    {
        if constexpr (is_strided_expression_v<E>)
        {
            const auto* p = e.data() + e.data_offset();
            return f(p, e.strides());
        }
        else
        {
            using value_type = std::decay_t<typename E::value_type>;
            const xt::xtensor<value_type, N> tmp = e;
            return f(tmp.data(), tmp.strides());
        }
    }

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

    // SciPy's "all values equal" rule of skew / kurtosis.
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

    inline bool is_zero_variance(const central_sums& c) noexcept
    {
        const double r = 1e-15 * c.mean;  // np.finfo(float64).resolution
        return c.m2 <= r * r;
    }

    inline double skewness_from(const central_sums& c, std::size_t n) noexcept
    {
        if (is_zero_variance(c))
        {
            return 0.0;  // SciPy: NaN; SPEC: zero std gives 0
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

    template <class T>
    void gather(const T* data, std::size_t n, std::ptrdiff_t stride, std::vector<double>& out)
    {
        out.resize(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            out[i] = static_cast<double>(data[static_cast<std::ptrdiff_t>(i) * stride]);
        }
    }

    // D_n = max_i max((i+1)/n - u_i, u_i - i/n) of ascending Phi values u.
    inline double ks_statistic_from_cdf(const double* cdf, std::size_t n) noexcept
    {
        const double nd = static_cast<double>(n);
        double dplus = -std::numeric_limits<double>::infinity();
        double dminus = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < n; ++i)
        {
            dplus = std::max(dplus, static_cast<double>(i + 1) / nd - cdf[i]);
            dminus = std::max(dminus, cdf[i] - static_cast<double>(i) / nd);
        }
        return std::max(dplus, dminus);
    }

    // KS statistic of an already sorted, finite sample. Phi through the spline of
    // normal_cdf_fast (within ~2e-15 of erfc): D_n is a maximum of differences, so its error
    // is that of Phi, and the p-value moves by far less than SciPy agreement needs.
    inline double ks_statistic_sorted_unchecked(const double* sorted, std::size_t n)
    {
        const normal_cdf_spline& phi = normal_cdf_table();
        double dplus = -std::numeric_limits<double>::infinity();
        double dminus = -std::numeric_limits<double>::infinity();
        const double nd = static_cast<double>(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            const double cdf = phi(sorted[i]);
            dplus = std::max(dplus, static_cast<double>(i + 1) / nd - cdf);
            dminus = std::max(dminus, cdf - static_cast<double>(i) / nd);
        }
        return std::max(dplus, dminus);
    }

    // D_n of an unsorted finite sample, identical to sorting it first. D_n depends only on
    // the ascending sequence of u = Phi(x) (Phi through the monotone spline of
    // normal_cdf_fast, so ties in x stay ties in u), so only u is sorted, never x: a counting
    // sort by the bin floor(u nb) with nb = n / 2 bins (uniform under H0: about two values
    // per bin, histogram and scatter stay in L2), then an insertion sort inside each bin
    // (std::sort for bins of more than 32 values: ties, saturated tails, clusters). The bin
    // index is non-decreasing in u, so the bins in order and sorted inside are the full
    // ascending order, and D_n is evaluated on exactly the values and ranks a full sort gives.
    inline double ks_statistic_unsorted(const double* x, std::size_t n, normality_workspace& ws)
    {
        if (n < 64)
        {
            ws.sorted.resize(n);
            double* out = ws.sorted.data();
            std::copy(x, x + n, out);
            std::sort(out, out + n);
            return ks_statistic_sorted_unchecked(out, n);
        }
        const normal_cdf_spline& phi = normal_cdf_table();
        const std::size_t nb = n / 2;
        const double nbd = static_cast<double>(nb);
        ws.bucket_end.assign(nb + 1, 0);
        ws.cdf.resize(n);
        ws.sorted_cdf.resize(n);
        std::size_t* e = ws.bucket_end.data();
        double* u = ws.cdf.data();
        double* su = ws.sorted_cdf.data();
        const auto bin_of = [&](double v) { return std::min(nb - 1, static_cast<std::size_t>(v * nbd)); };
        for (std::size_t i = 0; i < n; ++i)
        {
            const double v = phi(x[i]);
            u[i] = v;
            ++e[bin_of(v) + 1];
        }
        for (std::size_t k = 1; k <= nb; ++k)
        {
            e[k] += e[k - 1];
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            const double v = u[i];
            su[e[bin_of(v)]++] = v;
        }
        // Sort inside each bin (e[k] is now the end of bin k) and take the terms of D_n of
        // its values while they are in cache; max is exact, so the order of the terms does
        // not matter. Bins of 2 or 3 values: branch-free min/max networks.
        const double nd = static_cast<double>(n);
        double dplus = -std::numeric_limits<double>::infinity();
        double dminus = -std::numeric_limits<double>::infinity();
        std::size_t first = 0;
        for (std::size_t k = 0; k < nb; ++k)
        {
            const std::size_t last = e[k];
            const std::size_t size = last - first;
            double* b = su + first;
            if (size == 2)
            {
                const double a0 = b[0], a1 = b[1];
                b[0] = std::min(a0, a1);
                b[1] = std::max(a0, a1);
            }
            else if (size == 3)
            {
                double a0 = b[0], a1 = b[1], a2 = b[2];
                const double l01 = std::min(a0, a1), h01 = std::max(a0, a1);
                a0 = std::min(l01, a2);
                const double t = std::max(l01, a2);
                a1 = std::min(h01, t);
                a2 = std::max(h01, t);
                b[0] = a0;
                b[1] = a1;
                b[2] = a2;
            }
            else if (size > 32)
            {
                std::sort(b, b + size);
            }
            else if (size > 3)
            {
                for (std::size_t i = 1; i < size; ++i)
                {
                    const double v = b[i];
                    std::size_t j = i;
                    while (j > 0 && b[j - 1] > v)
                    {
                        b[j] = b[j - 1];
                        --j;
                    }
                    b[j] = v;
                }
            }
            for (std::size_t i = first; i < last; ++i)
            {
                dplus = std::max(dplus, static_cast<double>(i + 1) / nd - su[i]);
                dminus = std::max(dminus, su[i] - static_cast<double>(i) / nd);
            }
            first = last;
        }
        return std::max(dplus, dminus);
    }

    // Zero variance in the sense of SPEC 2.7 / 2.8: SciPy's all-equal rule (also catches
    // constant data whose mean is not exactly representable).
    inline bool zero_std(const central_sums& c, std::size_t n) noexcept
    {
        return n < 2 || is_zero_variance(c) || c.m2 <= 0.0;
    }

    // x <- (x - mean) / std(ddof=1), divisor 1 under zero variance (SPEC 2.8).
    inline void standardize_in_place(double* x, std::size_t n, const central_sums& c) noexcept
    {
        const double sd = zero_std(c, n) ? 1.0
                                         : std::sqrt(c.m2 * static_cast<double>(n) / static_cast<double>(n - 1));
        for (std::size_t i = 0; i < n; ++i)
        {
            x[i] = (x[i] - c.mean) / sd;
        }
    }

    // numpy.median of a scratch copy (partially reorders v).
    inline double median_in_place(std::vector<double>& v) noexcept
    {
        const std::size_t n = v.size();
        if (n == 0)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        const std::size_t mid = n / 2;
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
        const double upper = v[mid];
        if (n % 2)
        {
            return upper;
        }
        const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
        return lower + (upper - lower) * 0.5;  // numpy's lerp of the two middle values
    }
}  // namespace detail

// ----------------------------------------------------------------------------------------
// Kolmogorov distributions
// ----------------------------------------------------------------------------------------

/// scipy.special.smirnov(n, d): P(D_n^+ >= d) of the one-sided statistic (faithful port,
/// exact double-double summation up to n = 10^6, O(n) terms).
inline double smirnov_sf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("smirnov_sf", n, d);
    return detail::smirnov_impl(static_cast<long long>(n), d).sf;
}

/// scipy.stats.kstwo.sf(d, n) = P(D_n >= d) of the two-sided statistic. Follows SciPy's
/// branch structure exactly except (a) for n > 1000 with n d^2 in [2.2, 370), where SciPy's
/// O(n) exact 2*smirnov(n, d) is replaced by an O(1) evaluation within 2e-8 of it, and
/// (b) where the result is 1.0 in double anyway (see kolmogn).
/// n = 0: std::invalid_argument; NaN d: std::domain_error.
inline double kolmogorov_sf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_sf", n, d);
    return detail::kolmogn(n, d, false, false);
}

/// kolmogorov_sf without its two shortcuts: SciPy's algorithm in every branch (slow for
/// large n: O(n) double-double terms in the 2*smirnov branch, ~1 s at n = 10^6).
inline double kolmogorov_sf_exact(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_sf_exact", n, d);
    return detail::kolmogn(n, d, false, true);
}

/// scipy.stats.kstwo.cdf(d, n) = P(D_n <= d).
inline double kolmogorov_cdf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_cdf", n, d);
    return detail::kolmogn(n, d, true, false);
}

// ----------------------------------------------------------------------------------------
// Kolmogorov-Smirnov test against N(0, 1)
// ----------------------------------------------------------------------------------------

/// D_n = max_i max(i/n - Phi(x_(i)), Phi(x_(i)) - (i-1)/n) of an ascending sample.
/// Precondition: sorted ascending. Throws on n = 0 and on non-finite values.
inline double ks_statistic_normal_sorted(const double* sorted, std::size_t n)
{
    if (n == 0)
    {
        detail::throw_invalid("ks_statistic_normal_sorted", "empty sample (n = 0)");
    }
    detail::require_finite("ks_statistic_normal_sorted", "sample", sorted, n);
    return detail::ks_statistic_sorted_unchecked(sorted, n);
}

/// KS test of an ascending sample against N(0, 1), p from the exact distribution of D_n.
inline ks_result ks_test_normal_sorted(const double* sorted, std::size_t n)
{
    const double d = ks_statistic_normal_sorted(sorted, n);
    return {d, detail::kolmogn(n, d, false, false)};
}

/// KS test of a strided, unsorted sample (element i at data[i * stride]; not modified).
template <class T>
ks_result ks_test_normal(const T* data, std::size_t n, std::ptrdiff_t stride, normality_workspace& ws)
{
    if (n == 0)
    {
        detail::throw_invalid("ks_test_normal", "empty sample (n = 0)");
    }
    detail::gather(data, n, stride, ws.values);
    detail::require_finite("ks_test_normal", "sample", ws.values.data(), n);
    const double d = detail::ks_statistic_unsorted(ws.values.data(), n, ws);
    return {d, detail::kolmogn(n, d, false, false)};
}

/// As scipy.stats.kstest(x, 'norm') (SciPy 1.10: method 'exact', kstwo.sf(D, n)).
template <class E>
ks_result ks_test_normal(const xt::xexpression<E>& x)
{
    const E& e = x.derived_cast();
    if (e.dimension() != 1)
    {
        detail::throw_invalid("ks_test_normal", "expected a 1-D sample, got ", e.dimension(), " dimensions");
    }
    normality_workspace ws;
    return detail::with_strided<1>(e, [&](const auto* p, const auto& strides) {
        return ks_test_normal(p, e.shape()[0], static_cast<std::ptrdiff_t>(strides[0]), ws);
    });
}

// ----------------------------------------------------------------------------------------
// Moments
// ----------------------------------------------------------------------------------------

/// Mean, ddof=1 std (NaN for n = 1), bias-corrected skewness and excess kurtosis of a
/// strided sample. Empty: std::invalid_argument; non-finite: std::domain_error.
template <class T>
moments_result sample_moments(const T* data, std::size_t n, std::ptrdiff_t stride, normality_workspace& ws)
{
    if (n == 0)
    {
        detail::throw_invalid("sample_moments", "empty sample (n = 0)");
    }
    detail::gather(data, n, stride, ws.values);
    detail::require_finite("sample_moments", "sample", ws.values.data(), n);
    return detail::moments_from(detail::central_moments(ws.values.data(), n), n);
}

template <class E>
moments_result sample_moments(const xt::xexpression<E>& x)
{
    const E& e = x.derived_cast();
    if (e.dimension() != 1)
    {
        detail::throw_invalid("sample_moments", "expected a 1-D sample, got ", e.dimension(), " dimensions");
    }
    normality_workspace ws;
    return detail::with_strided<1>(e, [&](const auto* p, const auto& strides) {
        return sample_moments(p, e.shape()[0], static_cast<std::ptrdiff_t>(strides[0]), ws);
    });
}

/// scipy.stats.skew(x, bias=False); 0 where SciPy returns NaN (all values equal).
template <class E>
double skewness(const xt::xexpression<E>& x)
{
    const E& e = x.derived_cast();
    if (e.dimension() != 1)
    {
        detail::throw_invalid("skewness", "expected a 1-D sample, got ", e.dimension(), " dimensions");
    }
    if (e.size() == 0)
    {
        detail::throw_invalid("skewness", "empty sample (n = 0)");
    }
    std::vector<double> scratch;
    return detail::with_strided<1>(e, [&](const auto* p, const auto& strides) {
        const std::size_t n = e.shape()[0];
        detail::gather(p, n, static_cast<std::ptrdiff_t>(strides[0]), scratch);
        detail::require_finite("skewness", "sample", scratch.data(), n);
        return detail::skewness_from(detail::central_moments(scratch.data(), n), n);
    });
}

/// scipy.stats.kurtosis(x, fisher=True, bias=False); 0 where SciPy returns NaN.
template <class E>
double excess_kurtosis(const xt::xexpression<E>& x)
{
    const E& e = x.derived_cast();
    if (e.dimension() != 1)
    {
        detail::throw_invalid("excess_kurtosis", "expected a 1-D sample, got ", e.dimension(), " dimensions");
    }
    if (e.size() == 0)
    {
        detail::throw_invalid("excess_kurtosis", "empty sample (n = 0)");
    }
    std::vector<double> scratch;
    return detail::with_strided<1>(e, [&](const auto* p, const auto& strides) {
        const std::size_t n = e.shape()[0];
        detail::gather(p, n, static_cast<std::ptrdiff_t>(strides[0]), scratch);
        detail::require_finite("excess_kurtosis", "sample", scratch.data(), n);
        return detail::excess_kurtosis_from(detail::central_moments(scratch.data(), n), n);
    });
}

// ----------------------------------------------------------------------------------------
// SPEC 2.7: first-component summary
// ----------------------------------------------------------------------------------------

/// Standardizes x with its mean and ddof=1 std, then skewness, excess kurtosis and the KS
/// p-value against N(0, 1). Zero variance (SciPy's all-equal rule) or n < 2: {0, 0, 1}.
/// Non-finite values: std::domain_error. Skewness and kurtosis are scale-free, so they come
/// from the central moments of x itself.
template <class T>
residual_normality_result standardized_normality(const T* data, std::size_t n, std::ptrdiff_t stride,
                                                 normality_workspace& ws)
{
    detail::gather(data, n, stride, ws.values);
    detail::require_finite("standardized_normality", "sample", ws.values.data(), n);
    if (n < 2)
    {
        return {0.0, 0.0, 1.0};
    }
    const detail::central_sums c = detail::central_moments(ws.values.data(), n);
    if (detail::zero_std(c, n))
    {
        return {0.0, 0.0, 1.0};
    }
    residual_normality_result r;
    r.skewness = detail::skewness_from(c, n);
    r.excess_kurtosis = detail::excess_kurtosis_from(c, n);
    detail::standardize_in_place(ws.values.data(), n, c);
    const double d = detail::ks_statistic_unsorted(ws.values.data(), n, ws);
    r.ks_p_value = detail::kolmogn(n, d, false, false);
    return r;
}

template <class E>
residual_normality_result standardized_normality(const xt::xexpression<E>& x)
{
    const E& e = x.derived_cast();
    if (e.dimension() != 1)
    {
        detail::throw_invalid("standardized_normality", "expected a 1-D sample, got ", e.dimension(),
                              " dimensions");
    }
    normality_workspace ws;
    return detail::with_strided<1>(e, [&](const auto* p, const auto& strides) {
        return standardized_normality(p, e.shape()[0], static_cast<std::ptrdiff_t>(strides[0]), ws);
    });
}

// ----------------------------------------------------------------------------------------
// SPEC 2.8: noise-subspace summary
// ----------------------------------------------------------------------------------------

/// Column summaries of an n x m strided matrix (element (i, j) at
/// data[i * row_stride + j * col_stride]). Each column is standardized with its mean and
/// ddof=1 std (divisor 1 under zero variance, whose skewness and kurtosis are 0).
/// Medians (numpy.median) of |skewness| and |excess kurtosis| over all m columns; KS
/// p-values over k = min(max_ks_dims, m) columns: all of them when k = m, otherwise the
/// first k of a partial Fisher-Yates shuffle of 0..m-1 with rng(seed)
/// (for i < k: swap(idx[i], idx[i + rng.below(m - i)])). m = 0: NaNs and zero counts.
/// n < 2: std::invalid_argument; non-finite values: std::domain_error; NaN p_alpha:
/// std::invalid_argument. `ws` holds about (m + 6) n doubles after the call.
template <class T>
noise_normality_result noise_normality(const T* data, std::size_t n, std::size_t m, std::ptrdiff_t row_stride,
                                       std::ptrdiff_t col_stride, std::size_t max_ks_dims, double p_alpha,
                                       std::uint64_t seed, normality_workspace& ws)
{
    constexpr const char* fn = "noise_normality";
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (detail::is_nan(p_alpha))
    {
        detail::throw_invalid(fn, "p_alpha is NaN");
    }
    if (m == 0)
    {
        return {nan, nan, nan, nan, 0, 0};
    }
    if (n < 2)
    {
        detail::throw_invalid(fn, "needs at least 2 rows, got n = ", n);
    }

    // Which columns get a KS test.
    const std::size_t k = std::min(max_ks_dims, m);
    std::vector<char> tested(m, 0);
    rng generator(seed);
    for (std::size_t j : sample_without_replacement(m, k, generator))
    {
        tested[j] = 1;
    }

    std::vector<double> abs_skew(m), abs_kurt(m), pvals;
    pvals.reserve(k);
    // Columns contiguous: one transpose of the whole block, in tiles of 8 rows (a tile of a
    // row-major source is read once, and each column receives whole cache lines), instead of
    // strided gathers that miss the cache on every row.
    ws.columns.resize(m * n);
    double* columns = ws.columns.data();
    constexpr std::size_t tile = 8;
    for (std::size_t i0 = 0; i0 < n; i0 += tile)
    {
        const std::size_t i1 = std::min(n, i0 + tile);
        for (std::size_t j = 0; j < m; ++j)
        {
            const T* src = data + static_cast<std::ptrdiff_t>(j) * col_stride;
            double* dst = columns + j * n;
            for (std::size_t i = i0; i < i1; ++i)
            {
                dst[i] = static_cast<double>(src[static_cast<std::ptrdiff_t>(i) * row_stride]);
            }
        }
    }
    if (detail::any_non_finite(columns, m * n))
    {
        // The first in row-major order, as the caller sees the matrix.
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t j = 0; j < m; ++j)
            {
                if (detail::is_non_finite(columns[j * n + i]))
                {
                    detail::throw_non_finite(fn, "X", columns[j * n + i], i, j);
                }
            }
        }
    }
    // Central sums of the raw columns, four columns at a time (same values as one by one).
    std::vector<detail::central_sums> sums(m);
    {
        constexpr std::size_t group = 4;
        std::size_t j = 0;
        for (; j + group <= m; j += group)
        {
            const double* cols[group];
            for (std::size_t k = 0; k < group; ++k)
            {
                cols[k] = columns + (j + k) * n;
            }
            detail::central_moments_k<group>(cols, n, sums.data() + j);
        }
        for (; j < m; ++j)
        {
            sums[j] = detail::central_moments(columns + j * n, n);
        }
    }
    for (std::size_t j = 0; j < m; ++j)
    {
        double* col = columns + j * n;
        // Skewness and kurtosis are scale-free: take them from the raw column.
        const detail::central_sums c = sums[j];
        const bool zero = detail::zero_std(c, n);
        abs_skew[j] = zero ? 0.0 : std::fabs(detail::skewness_from(c, n));
        abs_kurt[j] = zero ? 0.0 : std::fabs(detail::excess_kurtosis_from(c, n));
        if (tested[j])
        {
            detail::standardize_in_place(col, n, c);
            const double d = detail::ks_statistic_unsorted(col, n, ws);
            pvals.push_back(detail::kolmogn(n, d, false, false));
        }
    }

    noise_normality_result r;
    r.n_components = m;
    r.n_ks_tested = pvals.size();
    std::size_t below = 0;
    for (double p : pvals)
    {
        below += p < p_alpha ? 1 : 0;
    }
    r.fraction_ks_p_below_alpha = pvals.empty() ? nan : static_cast<double>(below) / static_cast<double>(pvals.size());
    r.median_ks_p_value = detail::median_in_place(pvals);
    r.median_abs_skewness = detail::median_in_place(abs_skew);
    r.median_abs_kurtosis = detail::median_in_place(abs_kurt);
    return r;
}

/// SPEC 2.8 on a 2-D expression X (n x m, each column a component), e.g. the view of
/// columns 1..d-1 of the rotated n x d matrix; strided views are read in place.
template <class E>
noise_normality_result noise_normality(const xt::xexpression<E>& X, std::size_t max_ks_dims, double p_alpha,
                                       std::uint64_t seed)
{
    const E& e = X.derived_cast();
    if (e.dimension() != 2)
    {
        detail::throw_invalid("noise_normality", "expected an n x m matrix, got ", e.dimension(), " dimensions");
    }
    normality_workspace ws;
    return detail::with_strided<2>(e, [&](const auto* p, const auto& strides) {
        return noise_normality(p, e.shape()[0], e.shape()[1], static_cast<std::ptrdiff_t>(strides[0]),
                               static_cast<std::ptrdiff_t>(strides[1]), max_ks_dims, p_alpha, seed, ws);
    });
}

}  // namespace attention_plasticity

#endif
