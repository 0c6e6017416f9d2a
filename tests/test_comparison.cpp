// Tests of include/attention_plasticity/comparison.hpp: the statistics of the comparison of two
// analyses head by head (docs/method.md §8.6).
//
// References: closed forms worked by hand below (each step written out), and
// tests/reference/comparison_reference.hpp, written by the independent NumPy/SciPy implementation
// of §8.6 (regenerate with /usr/bin/python3 tests/reference/gen_comparison_reference.py): dense
// influence matrices over the union of the ids, sqrt(G var(x, ddof=1)), 2 norm.sf(|z|), R's
// p.adjust written out with accumulate, norm.ppf for the intervals.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <attention_plasticity/comparison.hpp>

#include "reference/comparison_reference.hpp"

namespace ap = attention_plasticity;
namespace ref = comparison_reference;

namespace
{
constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
constexpr double infinite = std::numeric_limits<double>::infinity();

/// x == expected to 1e-12 relative (a few ulps of float64 arithmetic in another order), or both NaN.
bool same(double x, double expected)
{
    if (std::isnan(expected))
    {
        return std::isnan(x);
    }
    return x == Approx(expected).epsilon(1e-12).margin(1e-300);
}

#define AP_CHECK_SAME(x, expected)                                                                                     \
    do                                                                                                                 \
    {                                                                                                                  \
        INFO(#x " = " << (x) << ", expected " << (expected));                                                          \
        CHECK(same((x), (expected)));                                                                                  \
    } while (false)

/// The reference case's two analyses: per head, its estimate and its influence list.
struct reference_case
{
    std::vector<ap::estimate> a, b;
    std::vector<ap::influence_list> influence_a, influence_b;
};

reference_case make_reference_case()
{
    reference_case c;
    const std::size_t na = std::size(ref::ids_a), nb = std::size(ref::ids_b);
    for (std::size_t h = 0; h < ref::num_heads; ++h)
    {
        c.a.push_back({ref::value_a[h], ref::bias_a[h], ref::se_a[h], ref::df_a});
        c.b.push_back({ref::value_b[h], ref::bias_b[h], ref::se_b[h], ref::df_b});
        ap::influence_list la, lb;
        for (std::size_t i = 0; i < na; ++i)
        {
            la.emplace_back(ref::ids_a[i], ref::phi_a[h * na + i]);
        }
        for (std::size_t i = 0; i < nb; ++i)
        {
            lb.emplace_back(ref::ids_b[i], ref::phi_b[h * nb + i]);
        }
        c.influence_a.push_back(la);
        c.influence_b.push_back(lb);
    }
    return c;
}
}  // namespace

TEST_CASE("sequence_se is sqrt(G/(G-1) sum of squared deviations), NaN under 2 units", "[comparison]")
{
    // x = 1, 2, 3, 4: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, G = 4:
    // sqrt(4/3 * 5) = sqrt(20/3).
    const ap::influence_list x = {{0, 1.0}, {5, 2.0}, {7, 3.0}, {9, 4.0}};
    AP_CHECK_SAME(ap::sequence_se(x), std::sqrt(20.0 / 3.0));
    CHECK(std::isnan(ap::sequence_se(ap::influence_list{{3, 1.0}})));
    CHECK(std::isnan(ap::sequence_se(ap::influence_list{})));
}

TEST_CASE("paired_se takes the differences over the union of the ids, an absent id 0", "[comparison]")
{
    // D = Phi^B - Phi^A: id 1: 0 - 1 = -1; id 2: 3 - 2 = 1; id 3: 1 - 0 = 1. Mean 1/3; squared
    // deviations 16/9 + 4/9 + 4/9 = 24/9; G = 3: sqrt(3/2 * 24/9) = 2.
    const ap::influence_list a = {{1, 1.0}, {2, 2.0}}, b = {{2, 3.0}, {3, 1.0}};
    AP_CHECK_SAME(ap::paired_se(&a, &b), 2.0);
    CHECK(std::isnan(ap::paired_se(&a, nullptr)));
    CHECK(std::isnan(ap::paired_se(nullptr, &b)));
}

TEST_CASE("compare_quantity: the bias-corrected difference, its error by design, z and p", "[comparison]")
{
    const ap::estimate x{0.5, 0.01, 0.03}, y{0.6, 0.02, 0.04};
    SECTION("unpaired: sqrt(s_A^2 + s_B^2)")
    {
        // (0.6 - 0.02) - (0.5 - 0.01) = 0.09; se sqrt(0.0009 + 0.0016) = 0.05; z 1.8;
        // p = 2 (1 - Phi(1.8)) (scipy.stats.norm.sf).
        const ap::quantity_change c = ap::compare_quantity(x, y, nullptr, nullptr, ap::change_design::unpaired);
        AP_CHECK_SAME(c.difference, 0.09);
        AP_CHECK_SAME(c.se, 0.05);
        AP_CHECK_SAME(c.z, 1.8);
        AP_CHECK_SAME(c.p, 0.07186063822585158);
        CHECK(std::isnan(c.q_bh));
        CHECK(c.a.value == 0.5);
        CHECK(c.b.se == 0.04);
    }
    SECTION("paired: the influences' differences; no test without both errors or both lists")
    {
        const ap::influence_list a = {{1, 1.0}, {2, 2.0}}, b = {{2, 3.0}, {3, 1.0}};
        const ap::quantity_change c = ap::compare_quantity(x, y, &a, &b, ap::change_design::paired);
        AP_CHECK_SAME(c.se, 2.0);
        AP_CHECK_SAME(c.z, 0.045);
        CHECK(c.influence_a == &a);
        CHECK(c.influence_b == &b);
        const ap::quantity_change no_error =
            ap::compare_quantity(x, ap::estimate{0.6, 0.02, no_value}, &a, &b, ap::change_design::paired);
        CHECK(std::isnan(no_error.se));
        CHECK(std::isnan(no_error.p));
        const ap::quantity_change no_list = ap::compare_quantity(x, y, &a, nullptr, ap::change_design::paired);
        CHECK(std::isnan(no_list.se));
        CHECK(std::isnan(no_list.z));
    }
    SECTION("a zero error or a NaN difference is no test")
    {
        const ap::quantity_change zero =
            ap::compare_quantity({0.5, 0.0, 0.0}, {0.6, 0.0, 0.0}, nullptr, nullptr, ap::change_design::unpaired);
        CHECK(zero.se == 0.0);
        CHECK(std::isnan(zero.z));
        CHECK(std::isnan(zero.p));
        const ap::quantity_change missing =
            ap::compare_quantity({no_value, 0.0, 0.01}, y, nullptr, nullptr, ap::change_design::unpaired);
        CHECK(std::isnan(missing.difference));
        CHECK(std::isnan(missing.p));
    }
}

TEST_CASE("compare_quantity: no test below the rounding bound, each untested change with its reason", "[comparison]")
{
    // resolution_bound = 2^-20 (|A_A| + |b_A| + |A_B| + |b_B|): here 2^-20 (0.5 + 0.01 + 0.5 + 0.02) = 1.03 2^-20.
    const ap::estimate x{0.5, 0.01, 1e-9}, y{0.5, 0.02, 1e-9};
    AP_CHECK_SAME(ap::resolution_bound(x, y), 1.03 * 0x1p-20);
    SECTION("a set compared with itself: identical, not NaN without a word")
    {
        const ap::quantity_change c = ap::compare_quantity(x, x, nullptr, nullptr, ap::change_design::unpaired);
        CHECK(c.difference == 0.0);
        CHECK(std::isnan(c.p));
        CHECK(c.reason == ap::untested_reason::identical);
        CHECK(std::string(ap::untested_reason_text(c.reason)) == "identical");
    }
    SECTION("a difference at rounding level (3.3e-9, the issue's rescale) is not tested, however small its error")
    {
        const ap::quantity_change c = ap::compare_quantity({0.5, 0.01, 1e-10}, {0.5 + 3.3e-9, 0.01, 1e-10}, nullptr,
                                                           nullptr, ap::change_design::unpaired);
        CHECK(std::isnan(c.z));
        CHECK(std::isnan(c.p));
        CHECK(c.reason == ap::untested_reason::within_rounding);
        CHECK(std::string(ap::untested_reason_text(c.reason)) == "equal within rounding");
        AP_CHECK_SAME(c.resolution, (0.5 + 0.01 + (0.5 + 3.3e-9) + 0.01) * 0x1p-20);
        // An exact 0 from other numbers: the same.
        const ap::quantity_change zero = ap::compare_quantity({0.5, 0.01, 0.1}, {0.51, 0.02, 0.1}, nullptr, nullptr,
                                                              ap::change_design::unpaired);
        CHECK(std::abs(zero.difference) < 1e-15);
        CHECK(zero.reason == ap::untested_reason::within_rounding);
    }
    SECTION("just beyond the bound: tested")
    {
        const double bound = ap::resolution_bound({0.5, 0.0, 0.1}, {0.5, 0.0, 0.1});
        const ap::quantity_change c = ap::compare_quantity({0.5, 0.0, 0.1}, {0.5 + 2.0 * bound, 0.0, 0.1}, nullptr,
                                                           nullptr, ap::change_design::unpaired);
        CHECK(c.reason == ap::untested_reason::tested);
        CHECK(std::isfinite(c.p));
    }
    SECTION("the other reasons")
    {
        CHECK(ap::compare_quantity({no_value, 0.0, 0.1}, y, nullptr, nullptr, ap::change_design::unpaired).reason
              == ap::untested_reason::no_estimate);
        CHECK(ap::compare_quantity({0.4, 0.0, no_value}, y, nullptr, nullptr, ap::change_design::unpaired).reason
              == ap::untested_reason::no_error);
        CHECK(ap::compare_quantity({0.4, 0.0, 0.0}, {0.6, 0.0, 0.0}, nullptr, nullptr, ap::change_design::unpaired)
                  .reason
              == ap::untested_reason::zero_error);
        CHECK(std::string(ap::untested_reason_text(ap::untested_reason::tested)).empty());
    }
}

TEST_CASE("simes_p: min over i of m p_(i) / i of the tested p-values", "[comparison]")
{
    // Tested 0.04, 0.01, 0.03 (m = 3): sorted 0.01, 0.03, 0.04 -> 0.03, 0.045, 0.04: min 0.03.
    AP_CHECK_SAME(ap::simes_p({0.04, no_value, 0.01, 0.03}), 0.03);
    AP_CHECK_SAME(ap::simes_p({0.2}), 0.2);
    AP_CHECK_SAME(ap::simes_p({0.9, 0.8}), 0.9);  // 2 x 0.8 / 1 = 1.6, 2 x 0.9 / 2 = 0.9
    CHECK(std::isnan(ap::simes_p({no_value})));
    CHECK(std::isnan(ap::simes_p({})));
}

TEST_CASE("select_changes agrees with the NumPy reference (Benjamini-Bogomolov)", "[comparison]")
{
    std::vector<std::vector<double>> p(ref::hier_heads);
    for (std::size_t h = 0; h < ref::hier_heads; ++h)
    {
        p[h].assign(ref::hier_p + h * ref::hier_tests, ref::hier_p + (h + 1) * ref::hier_tests);
    }
    const ap::change_selection s = ap::select_changes(p, ref::alpha);
    AP_CHECK_SAME(s.within_level, ref::hier_within_level);
    CHECK(s.heads_tested == ref::hier_heads - 1);
    std::size_t changed = 0;
    for (std::size_t h = 0; h < ref::hier_heads; ++h)
    {
        INFO("head " << h);
        AP_CHECK_SAME(s.head_p[h], ref::hier_head_p[h]);
        AP_CHECK_SAME(s.head_q[h], ref::hier_head_q[h]);
        CHECK(s.head_changed[h] == (ref::hier_changed[h] == 1));
        changed += ref::hier_changed[h];
        bool any = false;
        for (std::size_t i = 0; i < ref::hier_tests; ++i)
        {
            INFO("test " << i);
            AP_CHECK_SAME(s.q_within[h][i], ref::hier_q_within[h * ref::hier_tests + i]);
            CHECK(s.selected[h][i] == (ref::hier_selected[h * ref::hier_tests + i] == 1));
            any = any || s.selected[h][i];
        }
        CHECK(any == s.head_changed[h]);  // a changed head has a selected test, the others none
    }
    CHECK(s.heads_changed == changed);
    CHECK(changed >= 2);  // the case selects something, and not everything
    CHECK(changed < ref::hier_heads - 1);
}

TEST_CASE("select_changes: with no change anywhere, any head is reported in at most alpha of the cases", "[comparison]")
{
    // 4000 global nulls of 48 heads x 20 independent uniform p-values (std::mt19937_64, seeded):
    // P(any head changed) = FDR <= alpha = 0.05; the union of per-family BH selections (the
    // former "changed") reports a head far more often. Binomial(4000, 0.05): SD 0.0034, so the
    // bound 0.05 + 4 SD = 0.064 fails with probability < 1e-4 when the guarantee holds.
    std::mt19937_64 rng(20261128);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    const std::size_t reps = 4000, heads = 48, tests = 20;
    std::size_t any_changed = 0, any_union = 0;
    std::vector<std::vector<double>> p(heads, std::vector<double>(tests));
    for (std::size_t r = 0; r < reps; ++r)
    {
        for (auto& head : p)
        {
            for (double& v : head)
            {
                v = uniform(rng);
            }
        }
        any_changed += ap::select_changes(p, 0.05).heads_changed > 0 ? 1 : 0;
        bool any = false;
        for (std::size_t i = 0; i < tests && !any; ++i)
        {
            std::vector<double> family(heads);
            for (std::size_t h = 0; h < heads; ++h)
            {
                family[h] = p[h][i];
            }
            for (const double q : ap::adjust_family(family).q_bh)
            {
                any = any || q <= 0.05;
            }
        }
        any_union += any ? 1 : 0;
    }
    const double share = static_cast<double>(any_changed) / reps;
    INFO("share of null cases with a changed head: " << share << "; union of per-test BH: "
                                                     << static_cast<double>(any_union) / reps);
    CHECK(share <= 0.05 + 4.0 * std::sqrt(0.05 * 0.95 / reps));
    CHECK(share >= 0.02);  // Simes + BH is exact for independent tests, not vacuous
    CHECK(static_cast<double>(any_union) / reps > 0.3);
}

TEST_CASE("adjust_family: BH and Holm over the tested p-values of the family", "[comparison]")
{
    // Tested: 0.01, 0.04, 0.03 (m = 3; the NaN is no test). Sorted 0.01, 0.03, 0.04.
    // BH: 0.04 * 3/3 = 0.04; 0.03 * 3/2 = 0.045 -> min 0.04; 0.01 * 3/1 = 0.03.
    // Holm: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> max 0.06.
    const ap::family_adjustment f = ap::adjust_family(std::vector<double>{0.01, no_value, 0.04, 0.03});
    AP_CHECK_SAME(f.q_bh[0], 0.03);
    CHECK(std::isnan(f.q_bh[1]));
    AP_CHECK_SAME(f.q_bh[2], 0.04);
    AP_CHECK_SAME(f.q_bh[3], 0.04);
    AP_CHECK_SAME(f.p_holm[0], 0.03);
    CHECK(std::isnan(f.p_holm[1]));
    AP_CHECK_SAME(f.p_holm[2], 0.06);
    AP_CHECK_SAME(f.p_holm[3], 0.06);
    // The changes' form sets their q_bh and p_holm.
    ap::quantity_change c1, c2;
    c1.p = 0.02;
    c2.p = 0.5;
    ap::adjust_family(std::vector<ap::quantity_change*>{&c1, &c2});
    AP_CHECK_SAME(c1.q_bh, 0.04);
    AP_CHECK_SAME(c2.q_bh, 0.5);
    AP_CHECK_SAME(c1.p_holm, 0.04);
    AP_CHECK_SAME(c2.p_holm, 0.5);
}

TEST_CASE("mean_se_of_set averages the influences over the heads first", "[comparison]")
{
    // Heads {(0, 1), (1, 3)} and {(1, 1), (2, 2)}, averaged: id 0: 0.5, id 1: 2, id 2: 1. Mean 7/6;
    // squared deviations 4/9 + 25/36 + 1/36 = 7/6; G = 3: sqrt(3/2 * 7/6) = sqrt(7) / 2.
    const ap::influence_list h1 = {{0, 1.0}, {1, 3.0}}, h2 = {{1, 1.0}, {2, 2.0}};
    AP_CHECK_SAME(ap::mean_se_of_set({&h1, &h2}), std::sqrt(7.0) / 2.0);
    CHECK(std::isnan(ap::mean_se_of_set({&h1, nullptr})));
}

TEST_CASE("mean_change: the mean over heads, the error with or without influences", "[comparison]")
{
    // Differences 1 and 3 (errors 3 and 4), independent heads: mean 2, se sqrt(9 + 16) / 2 = 2.5,
    // z 0.8, p = 2 (1 - Phi(0.8)), sd of the differences sqrt(2), interval 2 -+ 1.959963984540054 * 2.5.
    ap::quantity_change c1 = ap::compare_quantity({0.2, 0.0, 3.0}, {1.2, 0.0, 0.0}, nullptr, nullptr,
                                                  ap::change_design::unpaired);
    ap::quantity_change c2 = ap::compare_quantity({0.1, 0.0, 0.0}, {3.1, 0.0, 4.0}, nullptr, nullptr,
                                                  ap::change_design::unpaired);
    c1.q_bh = 0.01;
    c2.q_bh = 0.2;
    const ap::mean_change_result m = ap::mean_change({&c1, &c2}, ap::change_design::unpaired, 0.05, false);
    CHECK(m.n_heads == 2);
    AP_CHECK_SAME(m.mean_a, 0.15);
    AP_CHECK_SAME(m.mean_b, 2.15);
    AP_CHECK_SAME(m.mean_difference, 2.0);
    AP_CHECK_SAME(m.se, 2.5);
    AP_CHECK_SAME(m.z, 0.8);
    AP_CHECK_SAME(m.p, 0.4237107971667934);
    AP_CHECK_SAME(m.sd_difference, std::sqrt(2.0));
    AP_CHECK_SAME(m.ci_low, 2.0 - 1.959963984540054 * 2.5);
    AP_CHECK_SAME(m.ci_high, 2.0 + 1.959963984540054 * 2.5);
    CHECK(m.n_significant == 1);
    // One head: no spread. Sequence-level without influences: NaN (no interval, no test).
    const ap::mean_change_result one = ap::mean_change({&c1}, ap::change_design::paired, 0.05, true);
    CHECK(std::isnan(one.sd_difference));
    CHECK(std::isnan(one.se));
    CHECK(std::isnan(one.p));
}

TEST_CASE("independent_mean_error and t_interval_of: sqrt(sum s^2)/n with Satterthwaite's df, t's interval",
          "[comparison]")
{
    // Errors 0.3 and 0.4 with known variances: se 0.5 / 2 = 0.25, df infinite (the normal law:
    // t_{0.975, inf} = 1.959963984540054).
    const std::vector<std::pair<double, double>> known = {{0.3, infinite}, {0.4, infinite}};
    const ap::sequence_error e = ap::independent_mean_error(known);
    AP_CHECK_SAME(e.se, 0.25);
    CHECK(std::isinf(e.df));
    const ap::t_interval normal = ap::t_interval_of(1.0, e, 0.05);
    AP_CHECK_SAME(normal.low, 1.0 - 1.959963984540054 * 0.25);
    AP_CHECK_SAME(normal.high, 1.0 + 1.959963984540054 * 0.25);
    // Errors 1 and 1 with 3 and 5 df: Satterthwaite (1 + 1)^2 / (1/3 + 1/5) = 7.5; se sqrt(2) / 2.
    const std::vector<std::pair<double, double>> estimated = {{1.0, 3.0}, {1.0, 5.0}};
    const ap::sequence_error f = ap::independent_mean_error(estimated);
    AP_CHECK_SAME(f.se, std::sqrt(2.0) / 2.0);
    AP_CHECK_SAME(f.df, 7.5);
    // One degree of freedom: Cauchy's quantile, t_{0.975, 1} = tan(0.475 pi) (closed form).
    const ap::t_interval cauchy = ap::t_interval_of(0.0, {2.0, 1.0}, 0.05);
    CHECK(cauchy.high == Approx(2.0 * std::tan(0.475 * std::acos(-1.0))).epsilon(1e-12));
    CHECK(cauchy.low == Approx(-2.0 * std::tan(0.475 * std::acos(-1.0))).epsilon(1e-12));
    // No error: no interval.
    const ap::t_interval none = ap::t_interval_of(0.0, {}, 0.05);
    CHECK(std::isnan(none.low));
    CHECK(std::isnan(none.high));
}

TEST_CASE("mean_over_heads: one set's mean and its error", "[comparison]")
{
    // Values 0.2 and 0.4 (errors 0.3 and 0.4), independent heads: mean 0.3, se 0.5 / 2 = 0.25.
    const ap::influence_list h1 = {{0, 1.0}, {1, 3.0}}, h2 = {{1, 1.0}, {2, 2.0}};
    const ap::set_mean_result m = ap::mean_over_heads({{{0.2, 0.0, 0.3}, &h1}, {{0.4, 0.0, 0.4}, &h2}}, 0.05, false);
    CHECK(m.n_heads == 2);
    AP_CHECK_SAME(m.mean, 0.3);
    AP_CHECK_SAME(m.se, 0.25);
    AP_CHECK_SAME(m.ci_low, 0.3 - 1.959963984540054 * 0.25);
    // Sequence-level: mean_se_of_set of the lists; a member without an error has none.
    AP_CHECK_SAME(ap::mean_over_heads({{{0.2, 0.0, 0.3}, &h1}, {{0.4, 0.0, 0.4}, &h2}}, 0.05, true).se,
                  std::sqrt(7.0) / 2.0);
    CHECK(std::isnan(ap::mean_over_heads({{{0.2, 0.0, 0.3}, &h1}, {{0.4, 0.0, no_value}, &h2}}, 0.05, true).se));
}

TEST_CASE("the comparison agrees with the NumPy reference, both designs", "[comparison]")
{
    const reference_case c = make_reference_case();
    for (const ap::change_design design : {ap::change_design::unpaired, ap::change_design::paired})
    {
        const bool paired = design == ap::change_design::paired;
        INFO((paired ? "paired" : "unpaired"));
        const double* se = paired ? ref::paired_se : ref::unpaired_se;
        const double* df = paired ? ref::paired_df : ref::unpaired_df;
        const double* z = paired ? ref::paired_z : ref::unpaired_z;
        const double* p = paired ? ref::paired_p : ref::unpaired_p;
        const double* q = paired ? ref::paired_q_bh : ref::unpaired_q_bh;
        const double* holm = paired ? ref::paired_p_holm : ref::unpaired_p_holm;
        const double* summary = paired ? ref::paired_summary : ref::unpaired_summary;
        std::vector<ap::quantity_change> changes;
        for (std::size_t h = 0; h < ref::num_heads; ++h)
        {
            changes.push_back(ap::compare_quantity(c.a[h], c.b[h], &c.influence_a[h], &c.influence_b[h], design));
        }
        std::vector<ap::quantity_change*> family;
        for (auto& change : changes)
        {
            family.push_back(&change);
        }
        ap::adjust_family(family);
        for (std::size_t h = 0; h < ref::num_heads; ++h)
        {
            INFO("head " << h);
            AP_CHECK_SAME(changes[h].difference, ref::difference[h]);
            AP_CHECK_SAME(changes[h].se, se[h]);
            if (std::isfinite(se[h]))
            {
                AP_CHECK_SAME(changes[h].df, df[h]);
            }
            AP_CHECK_SAME(changes[h].z, z[h]);
            AP_CHECK_SAME(changes[h].p, p[h]);
            AP_CHECK_SAME(changes[h].q_bh, q[h]);
            AP_CHECK_SAME(changes[h].p_holm, holm[h]);
        }
        // The tested heads: all layers, layer 0, layer 1; sequence-level, then independent.
        std::size_t row = 0;
        for (const std::int64_t layer : {-1, 0, 1})
        {
            std::vector<const ap::quantity_change*> members;
            for (std::size_t h = 0; h < ref::num_heads; ++h)
            {
                if (std::isfinite(changes[h].se) && (layer < 0 || ref::layers[h] == layer))
                {
                    members.push_back(&changes[h]);
                }
            }
            for (const bool sequence_level : {true, false})
            {
                INFO("layer " << layer << (sequence_level ? ", sequence-level" : ", independent heads"));
                const ap::mean_change_result m = ap::mean_change(members, design, ref::alpha, sequence_level);
                const double* r = summary + 12 * row++;
                CHECK(static_cast<double>(m.n_heads) == r[0]);
                AP_CHECK_SAME(m.mean_a, r[1]);
                AP_CHECK_SAME(m.mean_b, r[2]);
                AP_CHECK_SAME(m.mean_difference, r[3]);
                AP_CHECK_SAME(m.se, r[4]);
                AP_CHECK_SAME(m.df, r[5]);
                AP_CHECK_SAME(m.ci_low, r[6]);
                AP_CHECK_SAME(m.ci_high, r[7]);
                AP_CHECK_SAME(m.z, r[8]);
                AP_CHECK_SAME(m.p, r[9]);
                AP_CHECK_SAME(m.sd_difference, r[10]);
                CHECK(static_cast<double>(m.n_significant) == r[11]);
            }
        }
    }
    // The trajectory: B's mean over all heads (head 5 has no error: no sequence-level error),
    // then over heads 0-2.
    std::size_t row = 0;
    for (const std::size_t heads : {std::size_t(6), std::size_t(3)})
    {
        std::vector<ap::head_estimate> members;
        for (std::size_t h = 0; h < heads; ++h)
        {
            members.push_back({c.b[h], &c.influence_b[h]});
        }
        for (const bool sequence_level : {true, false})
        {
            INFO(heads << " heads" << (sequence_level ? ", sequence-level" : ", independent heads"));
            const ap::set_mean_result m = ap::mean_over_heads(members, ref::alpha, sequence_level);
            const double* r = ref::trajectory + 6 * row++;
            CHECK(static_cast<double>(m.n_heads) == r[0]);
            AP_CHECK_SAME(m.mean, r[1]);
            AP_CHECK_SAME(m.se, r[2]);
            if (std::isfinite(r[2]))
            {
                AP_CHECK_SAME(m.df, r[3]);
            }
            AP_CHECK_SAME(m.ci_low, r[4]);
            AP_CHECK_SAME(m.ci_high, r[5]);
        }
    }
}
