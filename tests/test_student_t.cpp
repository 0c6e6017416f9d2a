// Tests of include/attention_plasticity/student_t.hpp: the two-sided tail of Student's t law, its
// quantile and the Welch-Satterthwaite degrees of freedom (docs/method.md §8.6).
//
// Reference values: tests/reference/student_t_reference.hpp (/usr/bin/python3
// tests/reference/gen_student_t_reference.py: mpmath at 60 digits), and closed forms (1 and 2
// degrees of freedom, the normal law).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>

#include <attention_plasticity/student_t.hpp>

#include "reference/student_t_reference.hpp"

namespace ap = attention_plasticity;
namespace ref = student_t_reference;

namespace
{
double rel_err(double got, double want)
{
    return want == 0.0 ? std::fabs(got) : std::fabs(got / want - 1.0);
}

// The tolerance the header documents: 1e-13 relative up to 1000 degrees of freedom, 1e-10 up
// to 1e6 (the continued fraction's many steps near x = 1).
double tolerance(double df)
{
    return df <= 1000.0 ? 1e-13 : 1e-10;
}
}  // namespace

TEST_CASE("student_t_two_sided_p agrees with mpmath to its tolerance, far tails included", "[student_t]")
{
    for (std::size_t i = 0; i < ref::num_two_sided; ++i)
    {
        const double df = ref::two_sided[3 * i], t = ref::two_sided[3 * i + 1], want = ref::two_sided[3 * i + 2];
        const double got = ap::student_t_two_sided_p(t, df);
        INFO("df " << df << ", t " << t << ": " << got << " against " << want);
        if (want < 1e-300)
        {
            CHECK(got < 1e-290);
        }
        else
        {
            CHECK(rel_err(got, want) <= tolerance(df));
        }
        CHECK(ap::student_t_two_sided_p(-t, df) == got);  // two-sided: symmetric in t
    }
}

TEST_CASE("student_t_two_sided_p: the closed forms of 1 and 2 degrees of freedom", "[student_t]")
{
    const double pi = 3.14159265358979323846;
    for (const double t : {0.01, 0.5, 1.0, 3.0, 12.0, 1e3, 1e6})
    {
        // Cauchy: P(|T| >= t) = 2 atan(1 / t) / pi; 2 df: 1 - t / sqrt(t^2 + 2) = 2 / (s (s + t)).
        const double s = std::sqrt(t * t + 2.0);
        INFO("t " << t);
        CHECK(rel_err(ap::student_t_two_sided_p(t, 1.0), 2.0 * std::atan(1.0 / t) / pi) <= 1e-13);
        CHECK(rel_err(ap::student_t_two_sided_p(t, 2.0), 2.0 / (s * (s + t))) <= 1e-13);
    }
}

TEST_CASE("student_t_two_sided_p: the normal law at infinite degrees of freedom, heavier tails below", "[student_t]")
{
    const double inf = std::numeric_limits<double>::infinity();
    for (const double t : {0.0, 0.7, 1.96, 4.0, 9.0, 30.0})
    {
        const double normal = std::erfc(t / std::sqrt(2.0));
        INFO("t " << t);
        CHECK(ap::student_t_two_sided_p(t, inf) == normal);
        CHECK(ap::student_t_two_sided_p(t, 2.0 * ap::student_t_normal_df) == normal);
        // Every t law has heavier tails than the normal one, and lighter the more df it has.
        double previous = 1.0;
        for (const double df : {1.0, 3.0, 10.0, 100.0, 1e4})
        {
            const double p = ap::student_t_two_sided_p(t, df);
            CHECK(p >= normal * (1.0 - 1e-12));
            CHECK(p <= previous * (1.0 + 1e-12));
            previous = p;
        }
    }
}

TEST_CASE("student_t_two_sided_p: edges", "[student_t]")
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(ap::student_t_two_sided_p(0.0, 5.0) == 1.0);
    CHECK(ap::student_t_two_sided_p(inf, 5.0) == 0.0);
    CHECK(ap::student_t_two_sided_p(-inf, 5.0) == 0.0);
    CHECK(std::isnan(ap::student_t_two_sided_p(nan, 5.0)));
    CHECK(std::isnan(ap::student_t_two_sided_p(1.0, 0.0)));
    CHECK(std::isnan(ap::student_t_two_sided_p(1.0, -3.0)));
    CHECK(std::isnan(ap::student_t_two_sided_p(1.0, nan)));
}

TEST_CASE("student_t_two_sided_quantile agrees with mpmath and inverts the tail", "[student_t]")
{
    for (std::size_t i = 0; i < ref::num_quantiles; ++i)
    {
        const double df = ref::quantiles[3 * i], p = ref::quantiles[3 * i + 1], want = ref::quantiles[3 * i + 2];
        const double got = ap::student_t_two_sided_quantile(p, df);
        INFO("df " << df << ", p " << p << ": " << got << " against " << want);
        CHECK(rel_err(got, want) <= tolerance(df));
    }
    CHECK(ap::student_t_two_sided_quantile(1.0, 7.0) == 0.0);
    CHECK(rel_err(ap::student_t_two_sided_quantile(0.05, std::numeric_limits<double>::infinity()),
                  1.959963984540054) <= 1e-14);
    CHECK(std::isnan(ap::student_t_two_sided_quantile(0.0, 7.0)));
    CHECK(std::isnan(ap::student_t_two_sided_quantile(1.5, 7.0)));
    CHECK(std::isnan(ap::student_t_two_sided_quantile(0.05, 0.0)));
}

TEST_CASE("welch_df: the Welch-Satterthwaite degrees of freedom", "[student_t]")
{
    const double inf = std::numeric_limits<double>::infinity();
    // Equal errors with nu each: 2 nu; one known variance (inf): the other's nu scaled up by the
    // share of its variance, (v1 + v2)^2 / (v1^2 / nu1).
    CHECK(ap::welch_df(0.3, 9.0, 0.3, 9.0) == Approx(18.0).epsilon(1e-15));
    CHECK(ap::welch_df(1.0, 4.0, 2.0, inf) == Approx(25.0 * 4.0).epsilon(1e-15));
    CHECK(ap::welch_df(1.0, 4.0, 2.0, 29.0) == Approx(25.0 / (1.0 / 4.0 + 16.0 / 29.0)).epsilon(1e-15));
    CHECK(std::isinf(ap::welch_df(1.0, inf, 2.0, inf)));
    // Bounded by min(nu1, nu2) and nu1 + nu2.
    const double df = ap::welch_df(0.02, 29.0, 0.05, 59.0);
    CHECK(df >= 29.0);
    CHECK(df <= 88.0);
    CHECK(std::isnan(ap::welch_df(std::numeric_limits<double>::quiet_NaN(), 3.0, 1.0, 3.0)));
}
