// Tests of include/attention_plasticity/normal.hpp: Phi, 1 - Phi and 4 p (1 - p) through erfc,
// the spline of normal_cdf_fast, and the quantile Phi^-1.
//
// Reference values: tests/reference/core_reference.hpp (/usr/bin/python3
// tests/reference/gen_core_reference.py), tests/reference/normality_reference.hpp
// (/usr/bin/python3 tests/reference/gen_normality.py) and tests/reference/extensions_reference.hpp
// (/usr/bin/python3 tests/reference/gen_extensions_reference.py): SciPy, and mpmath at 50 digits.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>

#include <attention_plasticity/normal.hpp>

#include "test_util.hpp"
#include "reference/core_reference.hpp"
#include "reference/extensions_reference.hpp"
#include "reference/normality_reference.hpp"

namespace ap = attention_plasticity;
using ap_test::near_rel;
using ap_test::sci;

using ap_test::rel_err;

namespace
{
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_d = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("normal_cdf, normal_sf and plasticity_from_z match SciPy and mpmath for |z| <= 37", "[normal]")
{
    double worst_scipy = 0.0;
    double worst_mp = 0.0;
    for (std::size_t i = 0; i < core_ref::tail_count; ++i)
    {
        const double z = core_ref::tail_z[i];
        CAPTURE(z);
        const double cdf = ap::normal_cdf(z);
        const double sf = ap::normal_sf(z);
        const double pp = ap::plasticity_from_z(z);
        const double e_scipy = std::max({rel_err(cdf, core_ref::tail_cdf[i]), rel_err(sf, core_ref::tail_sf[i]),
                                         rel_err(pp, core_ref::tail_pp[i])});
        const double e_mp = std::max({rel_err(cdf, core_ref::tail_cdf_mp[i]), rel_err(sf, core_ref::tail_sf_mp[i]),
                                      rel_err(pp, core_ref::tail_pp_mp[i])});
        CHECK(e_scipy < 1e-12);
        CHECK(e_mp < 1e-12);
        worst_scipy = std::max(worst_scipy, e_scipy);
        worst_mp = std::max(worst_mp, e_mp);
    }
    // Reported with -s: the worst relative errors over the table.
    CAPTURE(sci(worst_scipy));
    CHECK(worst_scipy < 1e-12);
    CAPTURE(sci(worst_mp));
    CHECK(worst_mp < 1e-12);
}

TEST_CASE("plasticity_from_z: no NaN for any finite z, +-inf give 0, symmetric and decreasing in |z|",
          "[normal]")
{
    const double big = std::numeric_limits<double>::max();
    for (double z : {37.5, 38.0, 38.5, 40.0, 1e3, 1e10, 1e154, 1e300, big})
    {
        CAPTURE(z);
        for (double s : {z, -z})
        {
            const double pp = ap::plasticity_from_z(s);
            CHECK_FALSE(std::isnan(pp));
            CHECK(pp >= 0.0);
            CHECK(pp < 1e-300);
            CHECK_FALSE(std::isnan(ap::normal_cdf(s)));
            CHECK_FALSE(std::isnan(ap::normal_sf(s)));
        }
    }
    CHECK(ap::plasticity_from_z(inf) == 0.0);
    CHECK(ap::plasticity_from_z(-inf) == 0.0);
    CHECK(ap::plasticity_from_z(1e300) == 0.0);
    CHECK(ap::plasticity_from_z(-big) == 0.0);
    CHECK(ap::plasticity_from_z(0.0) == 1.0);
    CHECK(ap::plasticity_from_z(-0.0) == 1.0);
    CHECK(ap::plasticity_from_z(std::numeric_limits<double>::denorm_min()) == 1.0);
    CHECK(ap::normal_cdf(inf) == 1.0);
    CHECK(ap::normal_cdf(-inf) == 0.0);
    CHECK(ap::normal_sf(inf) == 0.0);
    CHECK(ap::normal_sf(-inf) == 1.0);
    CHECK(ap::normal_cdf(-big) == 0.0);
    CHECK(ap::normal_cdf(big) == 1.0);
    CHECK(ap::normal_cdf(0.0) == 0.5);
    // NaN propagates (documented).
    CHECK(std::isnan(ap::plasticity_from_z(nan_d)));

    double previous = 1.0;
    for (double z = 0.0; z <= 40.0; z += 0.0625)
    {
        const double pp = ap::plasticity_from_z(z);
        CAPTURE(z);
        CHECK(pp == ap::plasticity_from_z(-z));   // exact symmetry
        CHECK(pp <= previous);                     // non-increasing in |z|
        CHECK(ap::normal_cdf(z) + ap::normal_sf(z) == Approx(1.0).epsilon(1e-15));
        previous = pp;
    }
}

TEST_CASE("normal_cdf / normal_sf tails match scipy.stats.norm", "[normal]")
{
    double worst = 0.0, worst_mp = 0.0;
    for (const auto& r : normality_ref::normal_rows)
    {
        INFO("z = " << r.z);
        const double c = ap::normal_cdf(r.z);
        if (r.z < -37.5)
        {
            CHECK(std::fabs(c - r.cdf) <= 1e-320);  // subnormal range: absolute only
            continue;
        }
        CHECK(near_rel(c, r.cdf, 1e-12));
        // erfc(-z / sqrt 2) inherits ~z^2 eps from rounding the argument: 1.4e-13 at z = -37.
        CHECK(near_rel(c, r.cdf_mpmath, 1e-12));
        worst_mp = std::max(worst_mp, std::fabs(c - r.cdf_mpmath) / r.cdf_mpmath);
        // log Phi near 1 needs the upper tail: log1p(-sf).
        const double logc = r.z <= 0.0 ? std::log(c) : std::log1p(-ap::normal_sf(r.z));
        CHECK(near_rel(logc, r.logcdf, 1e-12, 1e-300));
        CHECK(near_rel(ap::normal_sf(r.z), r.sf, 1e-12));
        worst = std::max(worst, std::fabs(c - r.cdf) / r.cdf);
    }
    std::printf("[normality] normal_cdf: worst relative difference to scipy = %.3g, to mpmath = %.3g\n", worst,
                worst_mp);
}

TEST_CASE("normal_cdf_fast: within 2e-15 of normal_cdf everywhere, exact (erfc) in the tails", "[normal]")
{
    double worst = 0.0;
    ap::rng g(11);
    for (int i = 0; i < 200000; ++i)
    {
        const double z = -9.0 + 18.0 * g.uniform();
        const double e = std::fabs(ap::normal_cdf_fast(z) - ap::normal_cdf(z));
        worst = std::max(worst, e);
    }
    CAPTURE(sci(worst));
    CHECK(worst <= 2e-15);
    for (double z : {-40.0, -8.5, -8.500001, 8.5, 9.0, 40.0})
    {
        CAPTURE(z);
        CHECK(ap::normal_cdf_fast(z) == ap::normal_cdf(z));
    }
    CHECK(ap::normal_cdf_fast(-inf) == 0.0);
    CHECK(ap::normal_cdf_fast(inf) == 1.0);
    // Monotone across nodes (the KS statistic sorts by it).
    double previous = 0.0;
    for (double z = -8.6; z <= 8.6; z += 1.0 / 4096.0)
    {
        const double c = ap::normal_cdf_fast(z);
        CHECK(c >= previous);
        previous = c;
    }
}

TEST_CASE("normal_quantile: Phi^-1 matches scipy.stats.norm.ppf, in the centre and both tails", "[normal]")
{
    for (std::size_t i = 0; i < 10; ++i)
    {
        CAPTURE(extensions_ref::quantile_p[i]);
        CHECK(near_rel(ap::normal_quantile(extensions_ref::quantile_p[i]), extensions_ref::quantile_z[i], 1e-13, 1e-15));
    }
    // Still reachable under its earlier name, detail::normal_quantile (it lived in intervals.hpp).
    CHECK(ap::detail::normal_quantile(0.975) == ap::normal_quantile(0.975));
}
