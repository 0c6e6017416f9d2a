#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP

// Comparing result sets head by head (docs/method.md §8.6): two or more result folders of
// ap_analyze (or ap_merge, or the Python package), named and ordered (checkpoints, variants),
// each compared with the next. Per head and quantity (ap_overall, ap_first20, ap_last20,
// ap_drop, and AP_j of each query bucket): the bias-corrected difference, its standard error
// (the sequence-level errors of the analysis, §8.3: unpaired, the two sets' variances added;
// paired, the per-sequence differences of the two sets' influences), z, the two-sided p-value,
// Benjamini-Hochberg q-values and Holm's adjusted p-values across heads; the heads that changed;
// a model-level summary by layer (its standard error from the per-sequence influences summed
// over heads when the sets have them); and each set's means over heads in order (the
// trajectory of checkpoints).
// The sets are read by compare_sets.hpp, the tables are compare_tables.hpp's column lists; ap_compare
// and attention_plasticity.compare_runs both run compare_run.hpp (which calls compare_result_sets()
// below and writes its files), so their CSVs are the same bytes.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <attention_plasticity/intervals.hpp>
#include <attention_plasticity/multiple_testing.hpp>
#include <attention_plasticity/normal.hpp>

#include "../io/csv_rows.hpp"
#include "../io/folder_overlap.hpp"
#include "cli_util.hpp"
#include "compare_sets.hpp"
#include "compare_tables.hpp"
#include "errors.hpp"
#include "output_folder.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// How the standard error of a head's change is made (docs/method.md §8.6).
enum class compare_design
{
    unpaired,  // the sets are independent samples of sequences: s = sqrt(s_A^2 + s_B^2)
    paired,    // the sets share their sequences: the per-sequence differences of the influences
};

inline const char* design_name(compare_design design)
{
    return design == compare_design::paired ? "paired" : "unpaired";
}

/// "paired" or "unpaired"; anything else: usage_error naming `label` (the option) and the text.
inline compare_design parse_design(const std::string& text, const std::string& label)
{
    if (text == "paired")
    {
        return compare_design::paired;
    }
    if (text == "unpaired")
    {
        return compare_design::unpaired;
    }
    throw usage_error(label + ": '" + text + "' is not paired or unpaired");
}

/// What to compare and how.
struct compare_options
{
    std::vector<std::string> folders;  // the result sets, in order (at least 2)
    std::vector<std::string> names;    // their names; empty: the folders' last components
    double alpha = 0.05;               // level of the BH procedure (and of the intervals: 1 - alpha)
    bool common_heads = false;         // compare the heads common to all sets instead of refusing
    bool same_dump = false;            // the sets analyzed the same dump (different options)
    compare_design design = compare_design::unpaired;  // paired: the sets share their sequences
};

namespace compare_detail
{
    /// f(example_id, Phi^A_e, Phi^B_e) over the union of the example ids of `a` and `b` (each in
    /// increasing example_id), in increasing example_id; an id of one list only has 0 in the other.
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

    /// The sequence-level standard error of a sum of per-sequence terms x_e (influences, or their
    /// differences): sqrt(G/(G-1) sum_e (x_e - mean x)^2) over the G sequences; NaN when G < 2.
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

    /// The paired standard error of a head's change: D_e = Phi^B_e - Phi^A_e over the union of
    /// the two sets' example ids; NaN when either set has no influences for the quantity.
    inline double paired_se(const influence_list* a, const influence_list* b)
    {
        if (a == nullptr || b == nullptr)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        std::vector<std::pair<std::int64_t, double>> d;
        d.reserve(std::max(a->size(), b->size()));
        for_union(*a, *b, [&](std::int64_t id, double x, double y) { d.emplace_back(id, y - x); });
        return sequence_se(d);
    }

    /// One compared quantity of one head.
    struct comparison
    {
        const head* a = nullptr;
        std::string quantity;
        std::int64_t q_bucket = -1;  // -1: a head-level quantity
        estimate x, y;
        const influence_list* influence_a = nullptr;  // the sets' per-sequence influences, when read
        const influence_list* influence_b = nullptr;
        double difference = std::numeric_limits<double>::quiet_NaN();
        double se = std::numeric_limits<double>::quiet_NaN();
        double z = std::numeric_limits<double>::quiet_NaN();
        double p = std::numeric_limits<double>::quiet_NaN();
        double q_bh = std::numeric_limits<double>::quiet_NaN();
        double p_holm = std::numeric_limits<double>::quiet_NaN();
    };

    /// The change of one quantity from head `a` (estimate x) to head `b` (estimate y), its
    /// standard error by `design` (§8.6), z and p.
    inline comparison compare(const head& a, const head& b, const std::string& quantity, std::int64_t bucket,
                              const estimate& x, const estimate& y, compare_design design)
    {
        comparison c;
        c.a = &a;
        c.quantity = quantity;
        c.q_bucket = bucket;
        c.x = x;
        c.y = y;
        const quantity_key key{quantity, bucket};
        c.influence_a = a.influences_of(key);
        c.influence_b = b.influences_of(key);
        c.difference = (y.value - y.bias) - (x.value - x.bias);
        if (design == compare_design::paired)
        {
            // Both sets need an error of their own: a quantity without one (too few sequences,
            // no interval) is not tested in either design.
            c.se = std::isfinite(x.se) && std::isfinite(y.se) ? paired_se(c.influence_a, c.influence_b)
                                                               : std::numeric_limits<double>::quiet_NaN();
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

    /// The sequence-level standard error of the mean over `members` (n heads) of one set's
    /// estimates: the per-sequence influences averaged over the heads (an example id a head
    /// lacks contributes 0 to it), then sequence_se. NaN when a member has no influences.
    inline double mean_se_of_set(const std::vector<const influence_list*>& members)
    {
        const double n = static_cast<double>(members.size());
        std::map<std::int64_t, double> sum;
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

    /// The standard error of the mean change over heads (the model-level summary) from the
    /// per-sequence influences, the heads sharing their sequences: paired, the per-sequence
    /// mean over heads of D_e; unpaired, each set's mean_se_of_set, variances added.
    inline double mean_se_of_changes(const std::vector<const comparison*>& members, compare_design design)
    {
        if (design == compare_design::unpaired)
        {
            std::vector<const influence_list*> a, b;
            for (const comparison* c : members)
            {
                a.push_back(c->influence_a);
                b.push_back(c->influence_b);
            }
            return std::hypot(mean_se_of_set(a), mean_se_of_set(b));
        }
        const double n = static_cast<double>(members.size());
        std::map<std::int64_t, double> sum;
        for (const comparison* c : members)
        {
            if (c->influence_a == nullptr || c->influence_b == nullptr)
            {
                return std::numeric_limits<double>::quiet_NaN();
            }
            for_union(*c->influence_a, *c->influence_b,
                      [&](std::int64_t id, double x, double y) { sum[id] += (y - x) / n; });
        }
        return sequence_se(sum);
    }

    /// Benjamini-Hochberg q-values and Holm's adjusted p-values of `family` (multiple_testing.hpp;
    /// a NaN p is no test).
    inline void adjust(std::vector<comparison*>& family)
    {
        xt::xtensor<double, 1> p = xt::xtensor<double, 1>::from_shape({family.size()});
        for (std::size_t i = 0; i < family.size(); ++i)
        {
            p(i) = family[i]->p;
        }
        const adjusted_p_values adjusted = adjust_p_values(p);
        for (std::size_t i = 0; i < family.size(); ++i)
        {
            if (!std::isnan(family[i]->p))
            {
                family[i]->q_bh = adjusted.benjamini_hochberg(i);
                family[i]->p_holm = adjusted.holm(i);
            }
        }
    }

}  // namespace compare_detail

/// The compared result sets as rows and files (compare_heads.csv, compare_changed.csv,
/// compare_summary.csv, compare_trajectory.csv) and messages worth showing. Throws compare_error naming the set and the
/// problem when the sets cannot be compared.
struct compare_result
{
    compare_tables tables;           // the rows of the files
    std::vector<std::string> names;  // of the files, in order
    std::vector<std::string> texts;  // their bytes
    std::vector<std::string> notes;  // e.g. heads left out with common_heads
    std::size_t compared_heads = 0;
    std::size_t changed_heads = 0;   // heads with a significant change, over all pairs
    compare_design design = compare_design::unpaired;  // the design used (the options')
};

inline compare_result compare_result_sets(const compare_options& options)
{
    using namespace compare_detail;
    if (options.folders.size() < 2)
    {
        throw compare_error("needs at least 2 result sets to compare, got " + std::to_string(options.folders.size()));
    }
    if (!options.names.empty() && options.names.size() != options.folders.size())
    {
        throw compare_error(std::to_string(options.names.size()) + " names for " + std::to_string(options.folders.size())
                            + " result sets");
    }
    if (!(options.alpha > 0.0 && options.alpha < 1.0))
    {
        throw compare_error("alpha must be in (0, 1), got " + io::format_number(options.alpha));
    }
    std::vector<loaded_set> sets;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < options.folders.size(); ++i)
    {
        std::string name = options.names.empty() ? std::filesystem::path(options.folders[i]).lexically_normal().filename().string()
                                                 : options.names[i];
        if (name.empty() || name == ".")
        {
            name = options.folders[i];
        }
        // The tables are written without quoting (docs/method.md §3.1): a name with a comma, a
        // double quote or a line break would not read back as one field.
        if (name.find_first_of(",\"\r\n") != std::string::npos)
        {
            throw compare_error("set name '" + name + "' holds a comma, a double quote or a line break (give --names)");
        }
        if (!seen.insert(name).second)
        {
            throw compare_error("two result sets are named '" + name + "' (give --names)");
        }
        sets.push_back(load_set(options.folders[i], name));
        if (options.design == compare_design::paired && !sets.back().has_influences)
        {
            throw compare_error("design paired (--design paired, design='paired'): result set '" + options.folders[i]
                                + "' has no per-sequence influences (" + io::influence_csv
                                + " absent, or without rows; the paired errors need them): analyze it with "
                                  "--sequence-influences on (sequence_influences: on), or compare unpaired");
        }
    }
    // The heads: the same layout in every set, or (common_heads) the heads of all of them.
    compare_result result;
    result.design = options.design;
    std::vector<head_key> keys;
    for (const auto& [key, h] : sets[0].heads)
    {
        bool everywhere = true;
        for (std::size_t s = 1; s < sets.size(); ++s)
        {
            const auto it = sets[s].heads.find(key);
            if (it == sets[s].heads.end())
            {
                everywhere = false;
                continue;
            }
            if (it->second.d_model != h.d_model || it->second.k_head != h.k_head)
            {
                throw compare_error("head layer " + std::to_string(key.first) + " q_head " + std::to_string(key.second)
                                    + " differs: k_head " + std::to_string(h.k_head) + ", d_model "
                                    + std::to_string(h.d_model) + " in '" + sets[0].name + "' but k_head "
                                    + std::to_string(it->second.k_head) + ", d_model "
                                    + std::to_string(it->second.d_model) + " in '" + sets[s].name
                                    + "' (results of different models cannot be compared)");
            }
        }
        if (everywhere)
        {
            keys.push_back(key);
        }
    }
    std::size_t total = 0;
    for (const auto& s : sets)
    {
        total = std::max(total, s.heads.size());
    }
    if (!options.common_heads)
    {
        // The first set whose heads are not the first set's: named with its own count.
        for (std::size_t i = 1; i < sets.size(); ++i)
        {
            std::size_t common = 0;
            for (const auto& entry : sets[i].heads)
            {
                common += sets[0].heads.count(entry.first);
            }
            if (common != sets[0].heads.size() || common != sets[i].heads.size())
            {
                throw compare_error("result sets '" + sets[0].name + "' and '" + sets[i].name + "' have different heads ("
                                    + std::to_string(sets[0].heads.size()) + " and "
                                    + std::to_string(sets[i].heads.size()) + " heads, " + std::to_string(common)
                                    + " in common): compare the common heads with --common-heads (common_heads=True)");
            }
        }
    }
    if (keys.empty())
    {
        throw compare_error("the result sets have no head in common");
    }
    if (keys.size() < total)
    {
        result.notes.push_back("compared the " + std::to_string(keys.size()) + " heads common to every set ("
                               + std::to_string(total - keys.size()) + " heads of some sets left out)");
    }
    result.compared_heads = keys.size();
    result.notes.push_back(
        options.design == compare_design::paired
            ? "design paired: a head's change has the standard error of the per-sequence differences of the two "
              "sets' influences (head_sequence_influence.csv), the sets taken to share their sequences (the same "
              "example_id is the same text in both, as stated by choosing paired); the errors cover what the "
              "analyses' errors cover (by default sequence-level: the sampling of the texts and of the tokens, "
              "docs/method.md §8.3, §8.6)"
            : "design unpaired: a head's change has the standard error sqrt(s_A^2 + s_B^2) of the two sets' own "
              "errors, the sets taken as independent samples of sequences (different texts); the errors cover what "
              "the analyses' errors cover (by default sequence-level, docs/method.md §8.3, §8.6); for sets "
              "analyzed on the same texts, --design paired (design='paired') is valid and more powerful");
    {
        std::string without;
        for (const auto& set : sets)
        {
            if (!set.has_influences)
            {
                without += (without.empty() ? "'" : ", '") + set.name + "'";
            }
        }
        if (!without.empty())
        {
            result.notes.push_back(
                "the model-level standard errors (compare_summary.csv, compare_trajectory.csv) take the heads as "
                "independent (sqrt(sum s^2)/n) where a set has no "
                + std::string(io::influence_csv) + " (" + without
                + "): the heads of a model see the same sequences, so their errors are correlated and these are "
                  "likely too small; analyze with --sequence-influences on for errors that account for it");
        }
    }

    compare_tables& tables = result.tables;
    const double z_level = attention_plasticity::normal_quantile(1.0 - 0.5 * options.alpha);
    for (std::size_t s = 0; s + 1 < sets.size(); ++s)
    {
        const loaded_set& A = sets[s];
        const loaded_set& B = sets[s + 1];
        std::vector<comparison> rows;
        std::size_t other_context = 0;
        std::string context_example;
        for (const head_key& key : keys)
        {
            const head& a = A.heads.at(key);
            const head& b = B.heads.at(key);
            if (std::isfinite(a.context_length) && std::isfinite(b.context_length)
                && a.context_length != b.context_length)
            {
                if (other_context++ == 0)
                {
                    context_example = head_text(key.first, key.second) + ": C " + io::format_number(a.context_length)
                                      + " and " + io::format_number(b.context_length);
                }
            }
            for (const head_quantity& q : head_quantities)
            {
                rows.push_back(compare(a, b, q.name(), -1, a.*q.member, b.*q.member, options.design));
            }
            // The query buckets of either set (a bucket of one only: NaN in the other).
            std::map<std::int64_t, std::pair<estimate, estimate>> buckets;
            for (const bucket_row& r : a.buckets)
            {
                buckets[r.q_bucket].first = r.ap;
            }
            for (const bucket_row& r : b.buckets)
            {
                buckets[r.q_bucket].second = r.ap;
            }
            for (const auto& [bucket, pair] : buckets)
            {
                rows.push_back(compare(a, b, "ap_bucket", bucket, pair.first, pair.second, options.design));
            }
        }
        if (other_context > 0)
        {
            result.notes.push_back("'" + A.name + "' and '" + B.name + "': " + std::to_string(other_context)
                                   + " heads have another context length C (context_length; e.g. " + context_example
                                   + "): their ap_first20 and ap_last20 are over other positions (tau < 0.2 C, "
                                     "tau >= 0.8 C)");
        }
        if (options.design == compare_design::paired)
        {
            // Pairing assumes the same example ids in both sets: say how many are in one only.
            std::set<std::int64_t> ids_a, ids_b;
            for (const head_key& key : keys)
            {
                for (const auto& [set, ids] : {std::make_pair(&A, &ids_a), std::make_pair(&B, &ids_b)})
                {
                    if (const influence_list* list = set->heads.at(key).influences_of({"ap_overall", -1}))
                    {
                        for (const auto& entry : *list)
                        {
                            ids->insert(entry.first);
                        }
                    }
                }
            }
            std::size_t common = 0;
            for (const std::int64_t id : ids_a)
            {
                common += ids_b.count(id);
            }
            const std::size_t all = ids_a.size() + ids_b.size() - common;
            if (common < all)
            {
                result.notes.push_back("design paired: '" + A.name + "' and '" + B.name + "' have "
                                       + std::to_string(all - common) + " of their " + std::to_string(all)
                                       + " example ids in one set only (their influences count as 0 in the other): "
                                         "pairing assumes the same example_id is the same text in both sets");
            }
        }
        // Families: one per quantity (and bucket), across heads.
        std::map<std::pair<std::string, std::int64_t>, std::vector<comparison*>> families;
        for (comparison& c : rows)
        {
            families[{c.quantity, c.q_bucket}].push_back(&c);
        }
        for (auto& [name, family] : families)
        {
            adjust(family);
        }
        std::map<head_key, std::vector<std::string>> changed;
        for (const comparison& c : rows)
        {
            const bool significant = c.q_bh <= options.alpha;
            tables.heads.push_back({A.name, B.name, c.a->layer, c.a->q_head, c.a->k_head, c.quantity,
                                    c.quantity == "ap_bucket" ? std::to_string(c.q_bucket) : "", c.x.value, c.y.value,
                                    c.difference, c.se, c.z, c.p, c.q_bh, c.p_holm, significant ? 1 : 0,
                                    design_name(options.design)});
            if (significant)
            {
                changed[{c.a->layer, c.a->q_head}].push_back(
                    c.quantity == "ap_bucket" ? "ap_bucket_" + std::to_string(c.q_bucket) : c.quantity);
            }
        }
        for (const auto& [key, names] : changed)
        {
            std::string list;
            for (const auto& n : names)
            {
                list += (list.empty() ? "" : " ") + n;
            }
            tables.changed.push_back({A.name, B.name, key.first, key.second, A.heads.at(key).k_head,
                                      static_cast<std::int64_t>(names.size()), list});
        }
        result.changed_heads += changed.size();
        // The model-level summary: the mean over heads, all layers (layer -1) and per layer.
        const bool sequence_level = A.has_influences && B.has_influences;
        for (const head_quantity& q : head_quantities)
        {
            std::map<std::int64_t, std::vector<const comparison*>> groups;
            for (const comparison& c : rows)
            {
                if (c.quantity == q.name() && std::isfinite(c.difference) && std::isfinite(c.se))
                {
                    groups[-1].push_back(&c);
                    groups[c.a->layer].push_back(&c);
                }
            }
            for (const auto& [layer, members] : groups)
            {
                const double n = static_cast<double>(members.size());
                double mean_a = 0.0, mean_b = 0.0, mean_d = 0.0, variance = 0.0, significant = 0.0;
                for (const comparison* c : members)
                {
                    mean_a += c->x.value / n;
                    mean_b += c->y.value / n;
                    mean_d += c->difference / n;
                    variance += c->se * c->se;
                    significant += c->q_bh <= options.alpha ? 1.0 : 0.0;
                }
                double spread = 0.0;
                for (const comparison* c : members)
                {
                    spread += (c->difference - mean_d) * (c->difference - mean_d);
                }
                // Heads share their sequences: with the per-sequence influences, the mean's error
                // is the sequences' (§8.6); without, the heads are taken as independent.
                const double se = sequence_level ? mean_se_of_changes(members, options.design) : std::sqrt(variance) / n;
                const double z = se > 0.0 ? mean_d / se : std::numeric_limits<double>::quiet_NaN();
                tables.summary.push_back(
                    {A.name, B.name, q.name(), layer < 0 ? std::string("all") : std::to_string(layer),
                     static_cast<std::int64_t>(members.size()), mean_a, mean_b, mean_d, se, mean_d - z_level * se,
                     mean_d + z_level * se, z, std::erfc(std::abs(z) / std::sqrt(2.0)),
                     members.size() > 1 ? std::sqrt(spread / (n - 1.0)) : std::numeric_limits<double>::quiet_NaN(),
                     static_cast<std::int64_t>(significant)});
            }
        }
    }
    // The trajectory: each set's mean over the compared heads, all layers and by layer.
    for (std::size_t s = 0; s < sets.size(); ++s)
    {
        // The head-level quantities, then bias_strength (§8.5: a value without an error).
        constexpr std::size_t n_quantities = std::size(head_quantities);
        for (std::size_t q = 0; q <= n_quantities; ++q)
        {
            const bool estimated = q < n_quantities;
            const char* const quantity = estimated ? head_quantities[q].name() : "bias_strength";
            std::map<std::int64_t, std::vector<std::pair<estimate, const influence_list*>>> groups;
            for (const head_key& key : keys)
            {
                const head& h = sets[s].heads.at(key);
                const influence_list* influences = estimated ? h.influences_of({quantity, -1}) : nullptr;
                const estimate e = estimated ? h.*head_quantities[q].member
                                             : estimate{h.bias_strength, 0.0, std::numeric_limits<double>::quiet_NaN()};
                if (std::isfinite(e.value))
                {
                    groups[-1].push_back({e, influences});
                    groups[key.first].push_back({e, influences});
                }
            }
            for (const auto& [layer, members] : groups)
            {
                const double n = static_cast<double>(members.size());
                double mean = 0.0, variance = 0.0;
                std::vector<const influence_list*> lists;
                for (const auto& [e, influences] : members)
                {
                    mean += e.value / n;
                    variance += e.se * e.se;
                    lists.push_back(std::isfinite(e.se) ? influences : nullptr);
                }
                // As the summary's: the sequences' error of the mean when the set has influences.
                const double se = estimated && sets[s].has_influences ? mean_se_of_set(lists) : std::sqrt(variance) / n;
                tables.trajectory.push_back({sets[s].name, static_cast<std::int64_t>(s), quantity,
                                             layer < 0 ? std::string("all") : std::to_string(layer),
                                             static_cast<std::int64_t>(members.size()), mean, se,
                                             mean - z_level * se, mean + z_level * se});
            }
        }
    }
    if (options.same_dump)
    {
        result.notes.push_back(
            options.design == compare_design::paired
                ? "same dump, design paired: the per-sequence differences of the influences account for the "
                  "sequences and tokens the two analyses share (docs/method.md §8.6)"
                : "same dump: the standard errors add the two analyses' variances as for independent samples; the "
                  "analyses share the query sample, so the difference's true variance is smaller and the tests are "
                  "conservative (docs/method.md §8.6; --design paired accounts for the shared sequences)");
    }
    result.names = compare_file_names();
    for_each_compare_table(tables, [&](const char*, const auto& columns, const auto& rows) {
        result.texts.push_back(io::csv_text(columns, rows));
    });
    return result;
}

/// Throws compare_error when the output folder is one of the result sets or lies inside one
/// (io/folder_overlap.hpp: by the folders themselves, not their paths), or holds the results of
/// another program (an analysis): the comparison's set would replace theirs as the folder's
/// current set and strand their links. A folder holding the sets as subfolders is fine.
inline void check_output_folder(const compare_options& options, const std::string& output_dir)
{
    output_folder_words words;
    words.output = "the output folder";
    words.input = "the result set";
    words.input_noun = "result set";
    words.replacement = "the comparison would replace them as its current set";
    words.advice = "write the comparison into another folder";
    refuse_output_folder<compare_error>(output_dir, options.folders, compare_file_names(), words);
}

/// The files of a comparison for result_set_writer::commit (views of `r`'s texts).
inline std::vector<io::result_file> compare_files(const compare_result& r)
{
    std::vector<io::result_file> files;
    for (std::size_t i = 0; i < r.names.size(); ++i)
    {
        files.push_back({r.names[i], {r.texts[i]}});
    }
    return files;
}
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
