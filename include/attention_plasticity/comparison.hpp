#ifndef ATTENTION_PLASTICITY_COMPARISON_HPP
#define ATTENTION_PLASTICITY_COMPARISON_HPP

// The comparison of two analyses head by head (docs/method.md §8.6), over estimates held in
// memory (value, bias, standard error) and, when the analyses wrote them, the per-sequence
// influences of §8.3:
//
//   compare_quantity    the change of one quantity of one head: the bias-corrected difference,
//                       its standard error by design (unpaired: sqrt(s_A^2 + s_B^2); paired: the
//                       sequence-level error of the per-sequence differences), its degrees of
//                       freedom (G - 1; unpaired: Welch's), z and p (Student's t law)
//   sequence_se         the sequence-level standard error of a sum of per-sequence terms
//   paired_se           the paired error of a change: sequence_se of D_e = Phi^B_e - Phi^A_e
//   adjust_family       Benjamini-Hochberg q-values and Holm's adjusted p-values of one family
//                       (one quantity across heads; multiple_testing.hpp)
//   resolution_bound    the smallest change the computation resolves (float32 inputs, float64
//                       sums); a smaller one is not tested: "equal within rounding"
//   simes_p             Simes' combination of the p-values of one head's quantities
//   select_changes      "changed": the hierarchical selection (Benjamini-Bogomolov): BH over the
//                       heads' Simes p-values, then BH within each selected head at alpha R / m
//   mean_se_of_set      the error of one set's mean over heads from the influences averaged
//                       over the heads (they share their sequences); mean_error_of_set with its df
//   mean_se_of_changes  the error of the mean change over heads, by design (mean_error_of_changes)
//   satterthwaite_df    the degrees of freedom of a sum of independent variance estimates
//   independent_mean_error  the error of a mean of independent estimates, sqrt(sum s^2)/n,
//                       with satterthwaite_df (the means without influences)
//   t_interval_of       the 1 - alpha interval of Student's t law around an estimate
//   mean_change         the model-level summary: the mean change over heads, its error
//                       (sequence-level with influences, sqrt(sum s^2)/n without), its degrees of
//                       freedom, interval, z, p (Student's t law, student_t.hpp)
//   mean_over_heads     one set's mean over heads and its error (a point of the trajectory)
//
// The influences are keyed by the sampling unit's id (unit_id: the example_id of §8.3): the
// sequences are the units whose sampling the errors cover. Every function takes them sorted by
// that id; an id one list lacks counts 0 there.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "multiple_testing.hpp"
#include "normal.hpp"
#include "student_t.hpp"

namespace attention_plasticity
{
/// One estimate: the reported value, its estimated bias and standard error (§8.3), and the
/// degrees of freedom of that error (§8.6): G - 1 for a sequence-level error over G documents,
/// infinity (the default) for an error referred to the normal law.
struct estimate
{
    double value = std::numeric_limits<double>::quiet_NaN();
    double bias = std::numeric_limits<double>::quiet_NaN();
    double se = std::numeric_limits<double>::quiet_NaN();
    double df = std::numeric_limits<double>::infinity();
};

/// The id of a sampling unit of the influences: the example_id of head_sequence_influence.csv.
using unit_id = std::int64_t;

/// The per-unit influences Phi_e of one quantity of one head, (id, Phi_e) in increasing id.
using influence_list = std::vector<std::pair<unit_id, double>>;

/// How the standard error of a head's change is made (§8.6).
enum class change_design
{
    unpaired,  // the analyses are independent samples of sequences: s = sqrt(s_A^2 + s_B^2)
    paired,    // they share their sequences: the per-sequence differences of the influences
};

/// f(id, Phi^A_e, Phi^B_e) over the union of the ids of `a` and `b` (each in increasing id), in
/// increasing id; an id of one list only has 0 in the other.
template <class F>
void for_union(const influence_list& a, const influence_list& b, F&& f)
{
    std::size_t i = 0, k = 0;
    while (i < a.size() || k < b.size())
    {
        if (k == b.size() || (i < a.size() && a[i].first < b[k].first))
        {
            f(a[i].first, a[i].second, 0.0);
            ++i;
        }
        else if (i == a.size() || b[k].first < a[i].first)
        {
            f(b[k].first, 0.0, b[k].second);
            ++k;
        }
        else
        {
            f(a[i].first, a[i].second, b[k].second);
            ++i;
            ++k;
        }
    }
}

/// The sequence-level standard error of a sum of per-unit terms x_e (influences, or their
/// differences): sqrt(G/(G-1) sum_e (x_e - mean x)^2) over the G units; NaN when G < 2.
/// `x`: a sequence of (id, x_e) pairs (an influence_list, a std::map).
template <class Values>
double sequence_se(const Values& x)
{
    const double g = static_cast<double>(x.size());
    if (x.size() < 2)
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    double mean = 0.0;
    for (const auto& v : x)
    {
        mean += v.second;
    }
    mean /= g;
    double sum = 0.0;
    for (const auto& v : x)
    {
        sum += (v.second - mean) * (v.second - mean);
    }
    return std::sqrt(g / (g - 1.0) * sum);
}

/// The paired standard error of a change: sequence_se of D_e = Phi^B_e - Phi^A_e over the union
/// of the two lists' ids; NaN when either is absent (nullptr: no influences for the quantity).
inline double paired_se(const influence_list* a, const influence_list* b)
{
    if (a == nullptr || b == nullptr)
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    influence_list d;
    d.reserve(a->size() > b->size() ? a->size() : b->size());
    for_union(*a, *b, [&](unit_id id, double x, double y) { d.emplace_back(id, y - x); });
    return sequence_se(d);
}

/// The relative resolution of a change (§8.6): 2^-20 = 16 u, u = 2^-24 the unit roundoff of the
/// float32 inputs (an allowance of 16 for the quantity's condition and the float64 sums).
constexpr double change_resolution = 0x1p-20;

/// The smallest change of a quantity that the computation resolves (§8.6): change_resolution x
/// (|A_A| + |b_A| + |A_B| + |b_B|), the magnitudes the bias-corrected difference is made of (a NaN
/// bias counts 0). A difference at most this large is rounding, not a change.
inline double resolution_bound(const estimate& a, const estimate& b)
{
    const auto magnitude = [](double v) { return std::isfinite(v) ? std::abs(v) : 0.0; };
    return change_resolution * (magnitude(a.value) + magnitude(a.bias) + magnitude(b.value) + magnitude(b.bias));
}

/// Why a change has no p-value (§8.6; compare_heads.csv `reason`).
enum class untested_reason
{
    tested,             // it has one
    identical,          // the two estimates are the same numbers (value and bias)
    within_rounding,    // |difference| <= resolution_bound: equal within rounding (exact 0 too)
    no_estimate,        // a value or bias is NaN (e.g. a bucket of one set only)
    no_error,           // no standard error (a set without one; paired: without influences, G < 2)
    zero_error,         // a standard error of 0 for a difference beyond rounding
};

/// The text of `reason` in the tables: "" when tested.
inline const char* untested_reason_text(untested_reason reason)
{
    switch (reason)
    {
        case untested_reason::tested:
            return "";
        case untested_reason::identical:
            return "identical";
        case untested_reason::within_rounding:
            return "equal within rounding";
        case untested_reason::no_estimate:
            return "no estimate";
        case untested_reason::no_error:
            return "no standard error";
        case untested_reason::zero_error:
            return "zero standard error";
    }
    return "";
}

/// The change of one quantity of one head between two analyses (A, then B).
struct quantity_change
{
    estimate a, b;                                // the two estimates
    const influence_list* influence_a = nullptr;  // their influences (nullptr: none)
    const influence_list* influence_b = nullptr;
    double difference = std::numeric_limits<double>::quiet_NaN();  // (b - bias_b) - (a - bias_a)
    double se = std::numeric_limits<double>::quiet_NaN();
    double df = std::numeric_limits<double>::quiet_NaN();  // of se: paired G - 1; unpaired Welch's
    double z = std::numeric_limits<double>::quiet_NaN();  // difference / se, when se > 0
    double p = std::numeric_limits<double>::quiet_NaN();  // two-sided, of Student's t with df
    double q_bh = std::numeric_limits<double>::quiet_NaN();    // set by adjust_family
    double p_holm = std::numeric_limits<double>::quiet_NaN();  // set by adjust_family
    double resolution = std::numeric_limits<double>::quiet_NaN();  // resolution_bound(a, b)
    untested_reason reason = untested_reason::tested;               // why p is NaN (tested: it is not)
};

/// The change from estimate `x` (influences `ia`) to `y` (`ib`): the bias-corrected difference,
/// its standard error by `design` and that error's degrees of freedom (paired: G - 1 over the G
/// units of the differences; unpaired: welch_df of the two errors and their df), z and the
/// two-sided p of Student's t law with those df (student_t.hpp; infinite df: the normal law).
/// p is NaN unless the difference is finite, beyond resolution_bound(x, y), and the error > 0;
/// `reason` says which. Paired, both estimates need an error of their own (a quantity without
/// one is not tested in either design) and both their influences. The lists are referenced, not
/// copied.
inline quantity_change compare_quantity(const estimate& x, const estimate& y, const influence_list* ia,
                                        const influence_list* ib, change_design design)
{
    quantity_change c;
    c.a = x;
    c.b = y;
    c.influence_a = ia;
    c.influence_b = ib;
    c.difference = (y.value - y.bias) - (x.value - x.bias);
    if (design == change_design::paired)
    {
        c.se = std::isfinite(x.se) && std::isfinite(y.se) ? paired_se(ia, ib) : std::numeric_limits<double>::quiet_NaN();
        if (ia != nullptr && ib != nullptr)
        {
            std::size_t units = 0;
            for_union(*ia, *ib, [&](unit_id, double, double) { ++units; });
            c.df = units >= 2 ? static_cast<double>(units - 1) : std::numeric_limits<double>::quiet_NaN();
        }
    }
    else
    {
        c.se = std::sqrt(x.se * x.se + y.se * y.se);
        c.df = welch_df(x.se, x.df, y.se, y.df);
    }
    c.resolution = resolution_bound(x, y);
    if (!std::isfinite(c.difference))
    {
        c.reason = untested_reason::no_estimate;
    }
    else if (x.value == y.value && x.bias == y.bias)
    {
        c.reason = untested_reason::identical;
    }
    else if (std::abs(c.difference) <= c.resolution)
    {
        c.reason = untested_reason::within_rounding;
    }
    else if (!(c.se >= 0.0))
    {
        c.reason = untested_reason::no_error;
    }
    else if (c.se == 0.0)
    {
        c.reason = untested_reason::zero_error;
    }
    else
    {
        c.z = c.difference / c.se;
        c.p = student_t_two_sided_p(c.z, c.df);  // two-sided, accurate in the far tail
    }
    return c;
}

/// The adjusted p-values of one family, in the order of its p-values; NaN where p is NaN.
struct family_adjustment
{
    std::vector<double> q_bh;    // Benjamini-Hochberg q-values
    std::vector<double> p_holm;  // Holm's adjusted p-values
};

/// Benjamini-Hochberg q-values and Holm's adjusted p-values of a family of p-values (one
/// quantity across heads; multiple_testing.hpp: a NaN p is no test and not counted).
inline family_adjustment adjust_family(const std::vector<double>& p)
{
    xt::xtensor<double, 1> values = xt::xtensor<double, 1>::from_shape({p.size()});
    for (std::size_t i = 0; i < p.size(); ++i)
    {
        values(i) = p[i];
    }
    const adjusted_p_values adjusted = adjust_p_values(values);
    family_adjustment out;
    out.q_bh.assign(p.size(), std::numeric_limits<double>::quiet_NaN());
    out.p_holm.assign(p.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t i = 0; i < p.size(); ++i)
    {
        if (!std::isnan(p[i]))
        {
            out.q_bh[i] = adjusted.benjamini_hochberg(i);
            out.p_holm[i] = adjusted.holm(i);
        }
    }
    return out;
}

/// adjust_family over the changes of `family`, their q_bh and p_holm set.
inline void adjust_family(const std::vector<quantity_change*>& family)
{
    std::vector<double> p(family.size());
    for (std::size_t i = 0; i < family.size(); ++i)
    {
        p[i] = family[i]->p;
    }
    const family_adjustment adjusted = adjust_family(p);
    for (std::size_t i = 0; i < family.size(); ++i)
    {
        family[i]->q_bh = adjusted.q_bh[i];
        family[i]->p_holm = adjusted.p_holm[i];
    }
}

/// Simes' combined p-value of a family (the tests of one head): min over i of m p_(i) / i, the
/// m non-NaN p-values ordered; NaN when there is none. Valid (P(p <= t) <= t under the family's
/// null) for independent or positively dependent (PRDS) tests.
inline double simes_p(const std::vector<double>& p)
{
    std::vector<double> tested;
    for (const double v : p)
    {
        if (!std::isnan(v))
        {
            tested.push_back(v);
        }
    }
    if (tested.empty())
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    std::sort(tested.begin(), tested.end());
    const double m = static_cast<double>(tested.size());
    double out = 1.0;
    for (std::size_t i = 0; i < tested.size(); ++i)
    {
        out = std::min(out, m * tested[i] / static_cast<double>(i + 1));
    }
    return out;
}

/// The hierarchical selection of changes (select_changes; §8.6).
struct change_selection
{
    std::vector<double> head_p;                 // per head: simes_p of its tests (NaN: none tested)
    std::vector<double> head_q;                 // per head: BH q-value of head_p across the heads
    std::vector<bool> head_changed;             // head_q <= alpha
    std::size_t heads_tested = 0;               // m: heads with a head_p
    std::size_t heads_changed = 0;              // R
    double within_level = 0.0;                  // alpha R / m (0 when R = 0)
    std::vector<std::vector<double>> q_within;  // per head and test: BH q-value within the head
    std::vector<std::vector<bool>> selected;    // per head and test: head changed, q_within <= within_level
};

/// "Changed" (§8.6), Benjamini and Bogomolov's hierarchical selection over `p` (per head, the
/// p-values of its tests, NaN: not tested): each head's tests combined by simes_p; the heads
/// selected by BH at level `alpha` over the m heads with a combined p (R selected); within each
/// selected head, its tests selected by BH at level alpha R / m. Guarantees (Benjamini and
/// Bogomolov 2014, Theorem 1, for independent or PRDS heads and tests): the false discovery rate
/// over the heads is at most alpha, so with no change anywhere the chance that any head is
/// reported changed is at most alpha; the expected mean over the selected heads of the false
/// discovery proportion of their selected tests is at most alpha. A selected head has at least
/// one selected test (its Simes p is at most alpha R / m).
inline change_selection select_changes(const std::vector<std::vector<double>>& p, double alpha)
{
    change_selection s;
    const std::size_t n = p.size();
    s.head_p.resize(n);
    for (std::size_t h = 0; h < n; ++h)
    {
        s.head_p[h] = simes_p(p[h]);
        s.heads_tested += std::isnan(s.head_p[h]) ? 0 : 1;
    }
    s.head_q = adjust_family(s.head_p).q_bh;
    s.head_changed.assign(n, false);
    for (std::size_t h = 0; h < n; ++h)
    {
        s.head_changed[h] = s.head_q[h] <= alpha;
        s.heads_changed += s.head_changed[h] ? 1 : 0;
    }
    s.within_level = s.heads_tested > 0 ? alpha * static_cast<double>(s.heads_changed)
                                              / static_cast<double>(s.heads_tested)
                                        : 0.0;
    s.q_within.resize(n);
    s.selected.resize(n);
    for (std::size_t h = 0; h < n; ++h)
    {
        s.q_within[h] = adjust_family(p[h]).q_bh;
        s.selected[h].assign(p[h].size(), false);
        for (std::size_t i = 0; i < p[h].size(); ++i)
        {
            s.selected[h][i] = s.head_changed[h] && s.q_within[h][i] <= s.within_level;
        }
    }
    return s;
}

/// A sequence-level standard error and its degrees of freedom (G - 1 over G units; §8.6).
struct sequence_error
{
    double se = std::numeric_limits<double>::quiet_NaN();
    double df = std::numeric_limits<double>::quiet_NaN();
};

/// sequence_se of per-unit terms and its degrees of freedom, the units less one.
template <class Values>
sequence_error sequence_error_of(const Values& x)
{
    sequence_error e;
    e.se = sequence_se(x);
    e.df = x.size() >= 2 ? static_cast<double>(x.size() - 1) : std::numeric_limits<double>::quiet_NaN();
    return e;
}

/// The sequence-level standard error of the mean over `members` (n heads) of one analysis'
/// estimates: the per-unit influences averaged over the heads (an id a head lacks contributes
/// 0), then sequence_error_of (df: the union of the heads' units, less one). NaN when a member
/// has no influences (nullptr).
inline sequence_error mean_error_of_set(const std::vector<const influence_list*>& members)
{
    const double n = static_cast<double>(members.size());
    std::map<unit_id, double> sum;
    for (const influence_list* list : members)
    {
        if (list == nullptr)
        {
            return {};
        }
        for (const auto& [id, phi] : *list)
        {
            sum[id] += phi / n;
        }
    }
    return sequence_error_of(sum);
}

/// mean_error_of_set's standard error.
inline double mean_se_of_set(const std::vector<const influence_list*>& members)
{
    return mean_error_of_set(members).se;
}

/// The standard error of the mean change over heads from the per-unit influences, the heads
/// sharing their sequences, and its degrees of freedom: paired, sequence_error_of the per-unit
/// mean over heads of D_e (G - 1); unpaired, each analysis' mean_error_of_set, variances added,
/// welch_df of the two. NaN when a member lacks influences.
inline sequence_error mean_error_of_changes(const std::vector<const quantity_change*>& members, change_design design)
{
    if (design == change_design::unpaired)
    {
        std::vector<const influence_list*> a, b;
        for (const quantity_change* c : members)
        {
            a.push_back(c->influence_a);
            b.push_back(c->influence_b);
        }
        const sequence_error ea = mean_error_of_set(a), eb = mean_error_of_set(b);
        return {std::hypot(ea.se, eb.se), welch_df(ea.se, ea.df, eb.se, eb.df)};
    }
    const double n = static_cast<double>(members.size());
    std::map<unit_id, double> sum;
    for (const quantity_change* c : members)
    {
        if (c->influence_a == nullptr || c->influence_b == nullptr)
        {
            return {};
        }
        for_union(*c->influence_a, *c->influence_b, [&](unit_id id, double x, double y) { sum[id] += (y - x) / n; });
    }
    return sequence_error_of(sum);
}

/// mean_error_of_changes' standard error.
inline double mean_se_of_changes(const std::vector<const quantity_change*>& members, change_design design)
{
    return mean_error_of_changes(members, design).se;
}

/// The Satterthwaite degrees of freedom of sum_i s_i^2, independent variance estimates with df_i
/// each (infinite: known): (sum s_i^2)^2 / sum (s_i^4 / df_i); infinity when every df_i is.
template <class Errors>
double satterthwaite_df(const Errors& errors)
{
    double total = 0.0, denominator = 0.0;
    for (const auto& [se, df] : errors)
    {
        const double v = se * se;
        total += v;
        denominator += std::isinf(df) ? 0.0 : v * v / df;
    }
    if (std::isnan(total) || std::isnan(denominator))
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return denominator == 0.0 ? std::numeric_limits<double>::infinity() : total * total / denominator;
}

/// The standard error of the mean of n independent estimates with errors s_i and df_i degrees of
/// freedom each (`errors`: (s_i, df_i) pairs): sqrt(sum s_i^2) / n, with satterthwaite_df of the
/// errors. The means over heads without influences (mean_change, mean_over_heads) take it.
template <class Errors>
sequence_error independent_mean_error(const Errors& errors)
{
    double variance = 0.0;
    for (const auto& [se, df] : errors)
    {
        variance += se * se;
    }
    return {std::sqrt(variance) / static_cast<double>(errors.size()), satterthwaite_df(errors)};
}

/// The 1 - alpha interval centre -/+ t_{1 - alpha/2, df} se of Student's t law (the normal law
/// for df = +inf): the intervals of compare_summary.csv and compare_trajectory.csv (§8.6).
struct t_interval
{
    double low = std::numeric_limits<double>::quiet_NaN(), high = std::numeric_limits<double>::quiet_NaN();
};

inline t_interval t_interval_of(double centre, const sequence_error& e, double alpha)
{
    const double t_level = student_t_two_sided_quantile(alpha, e.df);
    return {centre - t_level * e.se, centre + t_level * e.se};
}

/// The mean change of one quantity over heads (a row of compare_summary.csv).
struct mean_change_result
{
    std::size_t n_heads = 0;
    double mean_a = 0, mean_b = 0, mean_difference = 0;  // means over heads of the values, differences
    double se = std::numeric_limits<double>::quiet_NaN();
    double df = std::numeric_limits<double>::quiet_NaN();  // of se (§8.6)
    double ci_low = std::numeric_limits<double>::quiet_NaN(), ci_high = std::numeric_limits<double>::quiet_NaN();
    double z = std::numeric_limits<double>::quiet_NaN(), p = std::numeric_limits<double>::quiet_NaN();
    double sd_difference = std::numeric_limits<double>::quiet_NaN();  // of the heads' differences; NaN for 1
    std::size_t n_significant = 0;                                    // members with q_bh <= alpha
};

/// The mean over `members` (n heads, each tested: finite difference and error) of their changes:
/// the means of the two values and of the differences, the standard error of the mean difference
/// and its degrees of freedom (`sequence_level`: mean_error_of_changes, the heads sharing their
/// sequences; otherwise sqrt(sum s^2) / n, the heads taken as independent, with
/// satterthwaite_df of their errors), the 1 - alpha interval of Student's t law with those df,
/// z, the two-sided p of that law, the standard deviation of the heads' differences and how many
/// have q_bh <= alpha.
inline mean_change_result mean_change(const std::vector<const quantity_change*>& members, change_design design,
                                      double alpha, bool sequence_level)
{
    mean_change_result r;
    const double n = static_cast<double>(members.size());
    double significant = 0.0;
    std::vector<std::pair<double, double>> errors;
    for (const quantity_change* c : members)
    {
        r.mean_a += c->a.value / n;
        r.mean_b += c->b.value / n;
        r.mean_difference += c->difference / n;
        significant += c->q_bh <= alpha ? 1.0 : 0.0;
        errors.emplace_back(c->se, c->df);
    }
    double spread = 0.0;
    for (const quantity_change* c : members)
    {
        spread += (c->difference - r.mean_difference) * (c->difference - r.mean_difference);
    }
    r.n_heads = members.size();
    const sequence_error e = sequence_level ? mean_error_of_changes(members, design) : independent_mean_error(errors);
    r.se = e.se;
    r.df = e.df;
    const t_interval ci = t_interval_of(r.mean_difference, e, alpha);
    r.z = r.se > 0.0 ? r.mean_difference / r.se : std::numeric_limits<double>::quiet_NaN();
    r.ci_low = ci.low;
    r.ci_high = ci.high;
    r.p = student_t_two_sided_p(r.z, r.df);
    r.sd_difference = members.size() > 1 ? std::sqrt(spread / (n - 1.0)) : std::numeric_limits<double>::quiet_NaN();
    r.n_significant = static_cast<std::size_t>(significant);
    return r;
}

/// One analysis' mean of one quantity over heads (a point of the trajectory).
struct set_mean_result
{
    std::size_t n_heads = 0;
    double mean = 0;
    double se = std::numeric_limits<double>::quiet_NaN();
    double df = std::numeric_limits<double>::quiet_NaN();  // of se (§8.6)
    double ci_low = std::numeric_limits<double>::quiet_NaN(), ci_high = std::numeric_limits<double>::quiet_NaN();
};

/// A head's estimate of one quantity and its influences (nullptr: none), a member of a mean.
struct head_estimate
{
    estimate e;
    const influence_list* influences = nullptr;
};

/// The mean over `members` (n heads, each with a finite value) of their values, its standard
/// error and degrees of freedom (`sequence_level`: mean_error_of_set of the members' influences, a
/// member without an error counting as without influences; otherwise sqrt(sum s^2) / n with
/// satterthwaite_df of the members' errors) and the 1 - alpha interval of Student's t law.
inline set_mean_result mean_over_heads(const std::vector<head_estimate>& members, double alpha, bool sequence_level)
{
    set_mean_result r;
    const double n = static_cast<double>(members.size());
    std::vector<const influence_list*> lists;
    std::vector<std::pair<double, double>> errors;
    for (const head_estimate& m : members)
    {
        r.mean += m.e.value / n;
        lists.push_back(std::isfinite(m.e.se) ? m.influences : nullptr);
        errors.emplace_back(m.e.se, m.e.df);
    }
    r.n_heads = members.size();
    const sequence_error e = sequence_level ? mean_error_of_set(lists) : independent_mean_error(errors);
    r.se = e.se;
    r.df = e.df;
    const t_interval ci = t_interval_of(r.mean, e, alpha);
    r.ci_low = ci.low;
    r.ci_high = ci.high;
    return r;
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_COMPARISON_HPP
