// Tests of include/attention_plasticity/multiple_testing.hpp: Benjamini-Hochberg q-values and
// Holm's adjusted p-values.
//
// Reference values: closed forms worked by hand below (each step written out), and the published
// example of Benjamini & Hochberg (1995, J. R. Stat. Soc. B 57, section 4.2): 15 p-values of a
// study of myocardial infarction, where at level 0.05 the step-up procedure rejects the 4
// smallest and the Bonferroni-type procedures (Holm's included) reject 3.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/multiple_testing.hpp>

namespace ap = attention_plasticity;

namespace
{
template <class T>
xt::xtensor<T, 1> values(std::initializer_list<double> list)
{
    xt::xtensor<T, 1> out = xt::xtensor<T, 1>::from_shape({list.size()});
    std::size_t i = 0;
    for (double x : list)
    {
        out(i++) = static_cast<T>(x);
    }
    return out;
}

std::size_t count_at_most(const xt::xtensor<double, 1>& x, double alpha)
{
    std::size_t n = 0;
    for (double v : x)
    {
        n += v <= alpha ? 1 : 0;
    }
    return n;
}
}  // namespace

TEMPLATE_TEST_CASE("adjust_p_values: the closed forms of BH and Holm, in the order given", "[multiple_testing]",
                   float, double)
{
    // Given out of order: 0.04, 0.01, 0.05, 0.02, 0.03. Sorted p_(i) = 0.01 .. 0.05, m = 5.
    // BH: p_(i) m / i = 0.05, 0.05, 0.05, 0.05, 0.05 -> running minimum from the top: all 0.05.
    // Holm: min(1, p_(i) (m - i + 1)) = 0.05, 0.08, 0.09, 0.08, 0.05 -> running maximum:
    // 0.05, 0.08, 0.09, 0.09, 0.09.
    const auto p = values<TestType>({0.04, 0.01, 0.05, 0.02, 0.03});
    const ap::adjusted_p_values a = ap::adjust_p_values(p);
    const double tol = std::is_same<TestType, float>::value ? 1e-7 : 1e-15;
    const double bh[] = {0.05, 0.05, 0.05, 0.05, 0.05};
    const double holm[] = {0.09, 0.05, 0.09, 0.08, 0.09};
    for (std::size_t i = 0; i < 5; ++i)
    {
        CHECK(std::abs(a.benjamini_hochberg(i) - bh[i]) < tol);
        CHECK(std::abs(a.holm(i) - holm[i]) < tol);
    }
}

TEST_CASE("adjust_p_values: Benjamini and Hochberg's published example", "[multiple_testing]")
{
    const auto p = values<double>({0.0201, 0.0001, 0.3240, 0.0004, 0.0019, 0.0095, 0.0278, 0.0298, 0.0344, 0.0459,
                                   0.4262, 0.5719, 0.6528, 0.7590, 1.0000});
    const ap::adjusted_p_values a = ap::adjust_p_values(p);
    CHECK(count_at_most(a.benjamini_hochberg, 0.05) == 4);  // p <= 0.0095 rejected
    CHECK(count_at_most(a.holm, 0.05) == 3);                // p <= 0.0019 rejected
    // The fourth smallest, 0.0095, by hand: BH min over j >= 4 of p_(j) 15 / j: 0.0095 * 15 / 4 =
    // 0.035625 (every later ratio is larger); Holm: max(0.0015, 0.0056, 0.0247, 0.0095 * 12 = 0.114).
    CHECK(a.benjamini_hochberg(5) == Approx(0.035625).epsilon(1e-12));
    CHECK(a.holm(5) == Approx(0.114).epsilon(1e-12));
    CHECK(a.holm(14) == 1.0);  // capped at 1
}

TEST_CASE("adjust_p_values: NaN is no test, ties share their value, one test is itself", "[multiple_testing]")
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto p = values<double>({nan, 0.02, 0.02, nan, 0.5});
    const ap::adjusted_p_values a = ap::adjust_p_values(p);
    CHECK(std::isnan(a.benjamini_hochberg(0)));
    CHECK(std::isnan(a.holm(3)));
    // m = 3 (the NaN do not count): BH 0.02 * 3 / 2 = 0.03 for both ties; Holm 0.02 * 3 = 0.06 for both.
    CHECK(a.benjamini_hochberg(1) == Approx(0.03).epsilon(1e-14));
    CHECK(a.benjamini_hochberg(2) == a.benjamini_hochberg(1));
    CHECK(a.holm(1) == Approx(0.06).epsilon(1e-14));
    CHECK(a.holm(2) == a.holm(1));
    CHECK(a.benjamini_hochberg(4) == 0.5);
    CHECK(a.holm(4) == 0.5);
    const ap::adjusted_p_values one = ap::adjust_p_values(values<double>({0.3}));
    CHECK(one.benjamini_hochberg(0) == 0.3);
    CHECK(one.holm(0) == 0.3);
    const ap::adjusted_p_values none = ap::adjust_p_values(xt::xtensor<double, 1>::from_shape({0}));
    CHECK(none.holm.size() == 0);
}
