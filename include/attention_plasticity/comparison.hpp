#ifndef ATTENTION_PLASTICITY_COMPARISON_HPP
#define ATTENTION_PLASTICITY_COMPARISON_HPP

// The comparison of two analyses head by head (docs/method.md §8.6), over estimates held in
// memory (value, bias, standard error) and, when the analyses wrote them, the per-sequence
// influences of §8.3:
//
//   compare_quantity    the change of one quantity of one head: the bias-corrected difference,
//                       its standard error by design (unpaired: sqrt(s_A^2 + s_B^2); paired: the
//                       sequence-level error of the per-sequence differences), z and p
//   sequence_se         the sequence-level standard error of a sum of per-sequence terms
//   paired_se           the paired error of a change: sequence_se of D_e = Phi^B_e - Phi^A_e
//   adjust_family       Benjamini-Hochberg q-values and Holm's adjusted p-values of one family
//                       (one quantity across heads; multiple_testing.hpp)
//   mean_se_of_set      the error of one set's mean over heads from the influences averaged
//                       over the heads (they share their sequences)
//   mean_se_of_changes  the error of the mean change over heads, by design
//   mean_change         the model-level summary: the mean change over heads, its error
//                       (sequence-level with influences, sqrt(sum s^2)/n without), interval, z, p
//   mean_over_heads     one set's mean over heads and its error (a point of the trajectory)
//
// The influences are keyed by the sampling unit's id (unit_id: the example_id of §8.3): the
// sequences are the units whose sampling the errors cover. Every function takes them sorted by
// that id; an id one list lacks counts 0 there.

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

namespace attention_plasticity
{
/// One estimate: the reported value, its estimated bias and standard error (§8.3).
struct estimate
{
    double value = std::numeric_limits<double>::quiet_NaN();
    double bias = std::numeric_limits<double>::quiet_NaN();
    double se = std::numeric_limits<double>::quiet_NaN();
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

/// The change of one quantity of one head between two analyses (A, then B).
struct quantity_change
{
    estimate a, b;                                // the two estimates
    const influence_list* influence_a = nullptr;  // their influences (nullptr: none)
    const influence_list* influence_b = nullptr;
    double difference = std::numeric_limits<double>::quiet_NaN();  // (b - bias_b) - (a - bias_a)
    double se = std::numeric_limits<double>::quiet_NaN();
    double z = std::numeric_limits<double>::quiet_NaN();  // difference / se, when se > 0
    double p = std::numeric_limits<double>::quiet_NaN();  // two-sided, erfc(|z| / sqrt 2)
    double q_bh = std::numeric_limits<double>::quiet_NaN();    // set by adjust_family
    double p_holm = std::numeric_limits<double>::quiet_NaN();  // set by adjust_family
};

/// The change from estimate `x` (influences `ia`) to `y` (`ib`): the bias-corrected difference,
/// its standard error by `design`, z and the two-sided p (NaN unless the difference is finite and
/// the error > 0). Paired, both estimates need an error of their own (a quantity without one is
/// not tested in either design) and both their influences. The lists are referenced, not copied.
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
    }
    else
    {
        c.se = std::sqrt(x.se * x.se + y.se * y.se);
    }
    if (std::isfinite(c.difference) && c.se > 0.0)
    {
        c.z = c.difference / c.se;
        c.p = std::erfc(std::abs(c.z) / std::sqrt(2.0));  // two-sided, accurate in the tail
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

/// The sequence-level standard error of the mean over `members` (n heads) of one analysis'
/// estimates: the per-unit influences averaged over the heads (an id a head lacks contributes
/// 0), then sequence_se. NaN when a member has no influences (nullptr).
inline double mean_se_of_set(const std::vector<const influence_list*>& members)
{
    const double n = static_cast<double>(members.size());
    std::map<unit_id, double> sum;
    for (const influence_list* list : members)
    {
        if (list == nullptr)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        for (const auto& [id, phi] : *list)
        {
            sum[id] += phi / n;
        }
    }
    return sequence_se(sum);
}

/// The standard error of the mean change over heads from the per-unit influences, the heads
/// sharing their sequences: paired, sequence_se of the per-unit mean over heads of D_e; unpaired,
/// each analysis' mean_se_of_set, variances added. NaN when a member lacks influences.
inline double mean_se_of_changes(const std::vector<const quantity_change*>& members, change_design design)
{
    if (design == change_design::unpaired)
    {
        std::vector<const influence_list*> a, b;
        for (const quantity_change* c : members)
        {
            a.push_back(c->influence_a);
            b.push_back(c->influence_b);
        }
        return std::hypot(mean_se_of_set(a), mean_se_of_set(b));
    }
    const double n = static_cast<double>(members.size());
    std::map<unit_id, double> sum;
    for (const quantity_change* c : members)
    {
        if (c->influence_a == nullptr || c->influence_b == nullptr)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        for_union(*c->influence_a, *c->influence_b, [&](unit_id id, double x, double y) { sum[id] += (y - x) / n; });
    }
    return sequence_se(sum);
}

/// The mean change of one quantity over heads (a row of compare_summary.csv).
struct mean_change_result
{
    std::size_t n_heads = 0;
    double mean_a = 0, mean_b = 0, mean_difference = 0;  // means over heads of the values, differences
    double se = std::numeric_limits<double>::quiet_NaN();
    double ci_low = std::numeric_limits<double>::quiet_NaN(), ci_high = std::numeric_limits<double>::quiet_NaN();
    double z = std::numeric_limits<double>::quiet_NaN(), p = std::numeric_limits<double>::quiet_NaN();
    double sd_difference = std::numeric_limits<double>::quiet_NaN();  // of the heads' differences; NaN for 1
    std::size_t n_significant = 0;                                    // members with q_bh <= alpha
};

/// The mean over `members` (n heads, each tested: finite difference and error) of their changes:
/// the means of the two values and of the differences, the standard error of the mean difference
/// (`sequence_level`: mean_se_of_changes, the heads sharing their sequences; otherwise
/// sqrt(sum s^2) / n, the heads taken as independent), the 1 - alpha interval, z, the two-sided
/// p, the standard deviation of the heads' differences and how many have q_bh <= alpha.
inline mean_change_result mean_change(const std::vector<const quantity_change*>& members, change_design design,
                                      double alpha, bool sequence_level)
{
    mean_change_result r;
    const double z_level = normal_quantile(1.0 - 0.5 * alpha);
    const double n = static_cast<double>(members.size());
    double variance = 0.0, significant = 0.0;
    for (const quantity_change* c : members)
    {
        r.mean_a += c->a.value / n;
        r.mean_b += c->b.value / n;
        r.mean_difference += c->difference / n;
        variance += c->se * c->se;
        significant += c->q_bh <= alpha ? 1.0 : 0.0;
    }
    double spread = 0.0;
    for (const quantity_change* c : members)
    {
        spread += (c->difference - r.mean_difference) * (c->difference - r.mean_difference);
    }
    r.n_heads = members.size();
    r.se = sequence_level ? mean_se_of_changes(members, design) : std::sqrt(variance) / n;
    r.z = r.se > 0.0 ? r.mean_difference / r.se : std::numeric_limits<double>::quiet_NaN();
    r.ci_low = r.mean_difference - z_level * r.se;
    r.ci_high = r.mean_difference + z_level * r.se;
    r.p = std::erfc(std::abs(r.z) / std::sqrt(2.0));
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
    double ci_low = std::numeric_limits<double>::quiet_NaN(), ci_high = std::numeric_limits<double>::quiet_NaN();
};

/// A head's estimate of one quantity and its influences (nullptr: none), a member of a mean.
struct head_estimate
{
    estimate e;
    const influence_list* influences = nullptr;
};

/// The mean over `members` (n heads, each with a finite value) of their values, its standard
/// error (`sequence_level`: mean_se_of_set of the members' influences, a member without an error
/// counting as without influences; otherwise sqrt(sum s^2) / n) and the 1 - alpha interval.
inline set_mean_result mean_over_heads(const std::vector<head_estimate>& members, double alpha, bool sequence_level)
{
    set_mean_result r;
    const double z_level = normal_quantile(1.0 - 0.5 * alpha);
    const double n = static_cast<double>(members.size());
    double variance = 0.0;
    std::vector<const influence_list*> lists;
    for (const head_estimate& m : members)
    {
        r.mean += m.e.value / n;
        variance += m.e.se * m.e.se;
        lists.push_back(std::isfinite(m.e.se) ? m.influences : nullptr);
    }
    r.n_heads = members.size();
    r.se = sequence_level ? mean_se_of_set(lists) : std::sqrt(variance) / n;
    r.ci_low = r.mean - z_level * r.se;
    r.ci_high = r.mean + z_level * r.se;
    return r;
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_COMPARISON_HPP
