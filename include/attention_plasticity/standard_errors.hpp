#ifndef ATTENTION_PLASTICITY_STANDARD_ERRORS_HPP
#define ATTENTION_PLASTICITY_STANDARD_ERRORS_HPP

// plasticity_standard_errors (docs/method.md §8.3): the influences of the queries
// (query_influences.hpp) and of the pairs, summed by sampling unit (the sequence by default: its
// queries, its keys' pairs; or the token): standard errors and biases of every AP_j, ap_overall,
// ap_first20, ap_last20 and ap_drop, and each sequence's influence. Part of the intervals topic
// (intervals.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/parallel.hpp"
#include "detail/rows.hpp"
#include "query_influences.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "sensitivity.hpp"
#include "uncertainty_design.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// The influences of the sampling units on the targets (the buckets of D), units x targets,
    /// row-major: the queries themselves (token unit) or the sums over each sequence of its
    /// queries' influences and of its pairs' (PP_p - P_cell) / P_j (sequence unit), with the
    /// number of each sequence's queries in each target's bucket (for the random weights n_j).
    struct unit_influences
    {
        std::size_t units = 0;
        std::vector<double> values;
        std::vector<double> counts;  // sequence unit only
    };

    /// The index of example id `id` in the sorted `sequences`; the id must be there.
    inline std::size_t sequence_index(const std::vector<std::int64_t>& sequences, std::int64_t id)
    {
        const auto it = std::lower_bound(sequences.begin(), sequences.end(), id);
        if (it == sequences.end() || *it != id)
        {
            throw_invalid("plasticity_standard_errors", "example id ", id,
                          " of a query or pair is not in design.sequences");
        }
        return static_cast<std::size_t>(it - sequences.begin());
    }

    inline unit_influences sequence_influences_of(const std::int64_t* example_ids, const std::vector<double>& influence,
                                                  std::size_t n, const std::vector<bucket_estimate>& estimates,
                                                  const query_statistics& q, const targets_of_head& d,
                                                  const std::vector<std::int64_t>& sequences, std::size_t threads = 1)
    {
        const std::size_t targets = d.in_d.size();
        const std::size_t count_models = estimates.size();
        unit_influences u;
        u.units = sequences.size();
        u.values.assign(u.units * targets, 0.0);
        u.counts.assign(u.units * targets, 0.0);
        // Ranges of targets share the threads; each sum is over the rows in order, then the
        // pairs in order, whoever takes its column (the same bits for any number of threads).
        const chunks columns = even_chunks(targets, worker_count(threads), 1);
        parallel_for(columns.count(), threads, [&](std::size_t task, std::size_t) {
            const std::size_t c0 = columns.begin(task);
            const std::size_t c1 = columns.end(task);
            std::size_t unit = 0;
            for (std::size_t i = 0; i < n; ++i)
            {
                if (i == 0 || example_ids[i] != example_ids[i - 1])  // a sequence's rows usually follow each other
                {
                    unit = sequence_index(sequences, example_ids[i]);
                }
                double* values = u.values.data() + unit * targets;
                const double* phi = influence.data() + i * targets;
                for (std::size_t c = c0; c < c1; ++c)
                {
                    values[c] += phi[c];
                }
                const std::size_t target = d.target_of[std::min(q.slot[i], count_models)];
                if (target > c0 && target <= c1)
                {
                    u.counts[unit * targets + target - 1] += 1.0;
                }
            }
            for (std::size_t c = c0; c < c1; ++c)
            {
                const bucket_estimate& e = estimates[d.in_d[c]];
                const auto pairs = static_cast<double>(e.pair_deviation.size());
                std::size_t pair_unit = 0;
                for (std::size_t p = 0; p < e.pair_deviation.size(); ++p)
                {
                    if (p == 0 || e.pair_sequence[p] != e.pair_sequence[p - 1])
                    {
                        pair_unit = sequence_index(sequences, e.pair_sequence[p]);
                    }
                    u.values[pair_unit * targets + c] += e.pair_deviation[p] / pairs;
                }
            }
        });
        return u;
    }

    /// One quantity as a linear function of the targets: weights w_c and, for the sequence unit,
    /// the coefficients kappa_c of the units' query counts (the weights n_j / sum n_k are then
    /// random: d(sum_c n_c AP_c / N) = sum_c w_c dAP_c + sum_c (AP_c - A) dn_c / N).
    struct linear_quantity
    {
        std::vector<double> weight;
        std::vector<double> count_weight;
        bool defined = false;
    };

    /// The n_j-weighted mean of the targets in `member` (§2.14): its weights and count coefficients.
    inline linear_quantity weighted_mean_quantity(const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const targets_of_head& d, const std::vector<char>& member)
    {
        const std::size_t targets = d.in_d.size();
        linear_quantity out;
        out.weight.assign(targets, 0.0);
        out.count_weight.assign(targets, 0.0);
        double total = 0.0, value = 0.0;
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                total += static_cast<double>(models[d.in_d[c]].n_queries);
            }
        }
        if (total == 0.0)
        {
            return out;
        }
        out.defined = true;
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                out.weight[c] = static_cast<double>(models[d.in_d[c]].n_queries) / total;
                value += out.weight[c] * estimates[d.in_d[c]].plasticity;
            }
        }
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                out.count_weight[c] = (estimates[d.in_d[c]].plasticity - value) / total;
            }
        }
        return out;
    }

    /// sum over units of (y_u - mean y)^2, y_u = sum_c w_c U_uc (+ sum_c kappa_c counts_uc for the
    /// sequence unit); the centred y_u into `centred` when it is given.
    inline double quantity_sum_of_squares(const unit_influences& u, const linear_quantity& quantity,
                                          std::vector<double>* centred)
    {
        const std::size_t targets = quantity.weight.size();
        std::vector<double> y(u.units);
        double mean = 0.0;
        for (std::size_t i = 0; i < u.units; ++i)
        {
            const double* phi = u.values.data() + i * targets;
            double value = 0.0;
            for (std::size_t c = 0; c < targets; ++c)
            {
                value += quantity.weight[c] * phi[c];
            }
            if (!u.counts.empty())
            {
                const double* counts = u.counts.data() + i * targets;
                for (std::size_t c = 0; c < targets; ++c)
                {
                    value += quantity.count_weight[c] * counts[c];
                }
            }
            y[i] = value;
            mean += value;
        }
        mean /= static_cast<double>(u.units);
        double squares = 0.0;
        for (double& value : y)
        {
            value -= mean;
            squares += value * value;
        }
        if (centred != nullptr)
        {
            *centred = std::move(y);
        }
        return squares;
    }

    /// Column c's sum of squares about its mean (a bucket's own quantity), centred values as above.
    inline double target_sum_of_squares(const unit_influences& u, std::size_t targets, std::size_t c,
                                        std::vector<double>* centred)
    {
        double mean = 0.0;
        for (std::size_t i = 0; i < u.units; ++i)
        {
            mean += u.values[i * targets + c];
        }
        mean /= static_cast<double>(u.units);
        double squares = 0.0;
        if (centred != nullptr)
        {
            centred->resize(u.units);
        }
        for (std::size_t i = 0; i < u.units; ++i)
        {
            const double e = u.values[i * targets + c] - mean;
            squares += e * e;
            if (centred != nullptr)
            {
                (*centred)[i] = e;
            }
        }
        return squares;
    }

    /// The sorted distinct example ids of the queries and of the targets' pairs.
    inline std::vector<std::int64_t> sequences_of(const std::int64_t* example_ids, std::size_t n,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const targets_of_head& d)
    {
        std::vector<std::int64_t> ids(example_ids, example_ids + n);
        for (std::size_t j : d.in_d)
        {
            ids.insert(ids.end(), estimates[j].pair_sequence.begin(), estimates[j].pair_sequence.end());
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }

    /// plasticity_standard_errors on checked input; x as in query_statistics_of (every pass over
    /// it reads the rows in order, one at a time, but the covariance influences, which read each
    /// bucket's rows in turn). example_ids: one per query (the sequence unit), else unused.
    template <class X>
    plasticity_uncertainty standard_errors_raw(const double* t, const std::int64_t* buckets,
                                               const std::int64_t* example_ids, const X& x,
                                               const position_component_fit& component0, double slope_norm,
                                               const std::vector<bucket_query_model>& models,
                                               const std::vector<bucket_estimate>& estimates,
                                               const uncertainty_design& design)
    {
        constexpr double nan = std::numeric_limits<double>::quiet_NaN();
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const double sigma2 = component0.residual_variance;
        const double* residual = component0.residual.data();
        const bool by_sequence = design.unit == sampling_unit::sequence;
        plasticity_uncertainty out;
        out.bucket_standard_error.assign(models.size(), nan);
        out.bucket_bias.assign(models.size(), nan);
        const targets_of_head d = targets_with_plasticity(models, estimates);
        std::vector<std::int64_t> sequences;
        if (by_sequence && example_ids != nullptr)
        {
            sequences = design.sequences.empty() ? sequences_of(example_ids, n, estimates, d) : design.sequences;
            out.n_sequences = sequences.size();
        }
        if (d.in_d.empty())
        {
            return out;
        }
        const std::size_t targets = d.in_d.size();
        const query_statistics q = query_statistics_of(t, buckets, x, residual, sigma2, models, design.threads);
        const bool rotation_estimated = m > 0 && q.t_spread > 0.0 && slope_norm >= 1e-12;  // §2.5's threshold
        const direction_covariances cov =
            direction_covariances_of(models, d.in_d, m, q.t_spread, slope_norm, rotation_estimated);
        std::vector<bucket_terms> terms(targets);
        parallel_for(targets, design.threads, [&](std::size_t c, std::size_t) {
            const std::size_t j = d.in_d[c];
            terms[c] = bucket_terms_of(models[j], estimates[j].sensitivity, q, j, sigma2, static_cast<double>(n),
                                       cov.direction, cov.pooled, rotation_estimated);
        });

        // The quantities: AP_j of the targets, then ap_overall, ap_first20, ap_last20, ap_drop (§2.14).
        double context_length = design.context_length;
        if (is_nan(context_length))
        {
            context_length = *std::max_element(t, t + n) + 1.0;
        }
        std::vector<char> all(targets, 1), first(targets, 0), last(targets, 0);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const double tau = models[d.in_d[c]].tau;
            first[c] = static_cast<char>(tau < 0.2 * context_length);
            last[c] = static_cast<char>(tau >= 0.8 * context_length);
        }
        const linear_quantity overall = weighted_mean_quantity(models, estimates, d, all);
        const linear_quantity first20 = weighted_mean_quantity(models, estimates, d, first);
        const linear_quantity last20 = weighted_mean_quantity(models, estimates, d, last);
        linear_quantity drop;
        drop.defined = first20.defined && last20.defined;
        if (drop.defined)
        {
            drop.weight.resize(targets);
            drop.count_weight.resize(targets);
            for (std::size_t c = 0; c < targets; ++c)
            {
                drop.weight[c] = first20.weight[c] - last20.weight[c];
                drop.count_weight[c] = first20.count_weight[c] - last20.count_weight[c];
            }
        }
        const auto bias_of = [&](const linear_quantity& quantity) {
            if (!quantity.defined)
            {
                return nan;
            }
            double bias = 0.0;
            for (std::size_t c = 0; c < targets; ++c)
            {
                bias += quantity.weight[c] * terms[c].bias;
            }
            return bias;
        };
        out.bias = bias_of(overall);
        out.first20.bias = bias_of(first20);
        out.last20.bias = bias_of(last20);
        out.drop.bias = bias_of(drop);
        for (std::size_t c = 0; c < targets; ++c)
        {
            out.bucket_bias[d.in_d[c]] = terms[c].bias;
        }
        if (by_sequence && (example_ids == nullptr || sequences.size() < std::max<std::size_t>(design.min_sequences, 2)))
        {
            return out;  // no sequence-level error: NaN, never the token-level one in its place
        }

        // Per-query influences phi on every AP_j of D (columns 0..targets-1).
        std::vector<double> influence(n * targets, 0.0);
        add_mean_and_direction_influences(t, x, models, estimates, q, d, terms, slope_norm, rotation_estimated, targets,
                                          influence, design.threads);
        add_line_influences(t, n, estimates, q, d, residual, sigma2, targets, influence, design.threads);
        unit_influences units;
        std::vector<double> separate(targets, 0.0);  // variance outside the influences (token unit)
        if (by_sequence)
        {
            // Everything is inside the sequences' sums; but a cell of one pair gives no
            // deviation to measure its pair noise by: NaN, as for the token unit.
            for (std::size_t c = 0; c < targets; ++c)
            {
                if (is_nan(estimates[d.in_d[c]].pair_variance))
                {
                    separate[c] = nan;
                }
            }
            add_covariance_influences(x, models, estimates, q, d, targets, influence, design.threads);
            add_position_mean_influences(t, n, models, estimates, q, d, component0.beta, targets, influence,
                                         design.threads);
            units = sequence_influences_of(example_ids, influence, n, estimates, q, d, sequences, design.threads);
        }
        else
        {
            units.units = n;
            units.values = std::move(influence);
            for (std::size_t c = 0; c < targets; ++c)
            {
                separate[c] = terms[c].covariance_variance + estimates[d.in_d[c]].pair_variance;
            }
        }
        const double scale = by_sequence ? static_cast<double>(units.units) / static_cast<double>(units.units - 1) : 1.0;
        std::vector<double> centred;
        std::vector<double>* keep = by_sequence && design.keep_influences ? &centred : nullptr;
        const auto record = [&](influence_quantity what, std::int64_t bucket) {
            if (keep == nullptr)
            {
                return;
            }
            for (std::size_t u = 0; u < units.units; ++u)
            {
                out.influences.push_back({sequences[u], what, bucket, centred[u]});
            }
        };
        const auto standard_error_of = [&](const linear_quantity& quantity, influence_quantity what) {
            if (!quantity.defined)
            {
                return nan;
            }
            double variance = scale * quantity_sum_of_squares(units, quantity, keep);
            for (std::size_t c = 0; c < targets; ++c)
            {
                if (quantity.weight[c] != 0.0)  // a NaN of a bucket outside the quantity stays out
                {
                    variance += quantity.weight[c] * quantity.weight[c] * separate[c];
                }
            }
            record(what, 0);
            return std::sqrt(variance);
        };
        out.standard_error = standard_error_of(overall, influence_quantity::ap_overall);
        out.first20.standard_error = standard_error_of(first20, influence_quantity::ap_first20);
        out.last20.standard_error = standard_error_of(last20, influence_quantity::ap_last20);
        out.drop.standard_error = standard_error_of(drop, influence_quantity::ap_drop);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const std::size_t j = d.in_d[c];
            out.bucket_standard_error[j] = std::sqrt(scale * target_sum_of_squares(units, targets, c, keep) + separate[c]);
            record(influence_quantity::ap_bucket, models[j].bucket);
        }
        return out;
    }
}  // namespace detail

namespace detail
{
    /// The checks of plasticity_standard_errors that do not depend on the design.
    template <class TV, class BV, class XV>
    void check_uncertainty_input(const char* fn, const TV& tv, const BV& bv, const XV& x,
                                 const position_component_fit& component0, double slope_norm,
                                 const std::vector<bucket_query_model>& models,
                                 const std::vector<bucket_estimate>& estimates)
    {
        const std::size_t n = x.rows;
        if (x.cols == 0)
        {
            throw_invalid(fn, "x_rot has 0 columns (d = 0)");
        }
        if (tv.size != n || bv.size != n || component0.residual.size() != n)
        {
            throw_invalid(fn, "t (", tv.size, "), buckets (", bv.size, ") and component0.residual (",
                          component0.residual.size(), ") must have one entry per row of x_rot (", n, ")");
        }
        if (n < 3)
        {
            throw_invalid(fn, "needs at least 3 queries, got ", n);
        }
        if (estimates.size() != models.size())
        {
            throw_invalid(fn, "estimates has ", estimates.size(), " entries but there are ", models.size(), " models");
        }
        const std::size_t m = x.cols - 1;
        for (std::size_t j = 0; j < models.size(); ++j)
        {
            if (j > 0 && !(models[j - 1].bucket < models[j].bucket))
            {
                throw_invalid(fn, "models must be in increasing bucket id, models[", j, "].bucket = ", models[j].bucket,
                              " follows ", models[j - 1].bucket);
            }
            const bucket_sensitivity& s = estimates[j].sensitivity;
            if (models[j].semantic.mean.size() != m || models[j].semantic.covariance.shape()[0] != m
                || s.semantic_mean.size() != m || s.mixed.size() != m || s.semantic_covariance.shape()[0] != m
                || s.semantic_covariance.shape()[1] != m)
            {
                throw_invalid(fn, "models[", j, "] or estimates[", j, "] do not have d - 1 = ", m,
                              " semantic components");
            }
            if (models[j].n_queries < 2)
            {
                throw_invalid(fn, "models[", j, "].n_queries must be >= 2, got ", models[j].n_queries);
            }
            if (estimates[j].pair_sequence.size() != estimates[j].pair_deviation.size())
            {
                throw_invalid(fn, "estimates[", j, "] has ", estimates[j].pair_sequence.size(),
                              " pair sequences but ", estimates[j].pair_deviation.size(), " pair deviations");
            }
        }
        require_finite(fn, "t", tv);
        require_finite(fn, "x_rot", x);
        require_finite(fn, "component0.residual", component0.residual.data(), n);
        if (is_non_finite(slope_norm) || slope_norm < 0.0 || is_non_finite(component0.residual_variance))
        {
            throw_domain(fn, "slope_norm (", slope_norm, ") and component0.residual_variance (",
                         component0.residual_variance, ") must be finite, slope_norm >= 0");
        }
    }
}  // namespace detail

/// Standard errors and biases of every AP_j and of the aggregates ap_overall, ap_first20,
/// ap_last20 and ap_drop (docs/method.md §8.3), by the delta method. Inputs: the head's kept
/// queries after the rotation (x_rot, n x d, positions t, bucket ids and example ids), the
/// component-0 fit (§2.6: alpha, beta, residual, sigma2), ||beta|| of the position regression
/// (§2.3; the rotation's direction is an estimate when >= 1e-12), the query models (§2.10) and,
/// one per model, its bucket_estimate (AP_j, NaN outside D; its sensitivity; the pair-sampling
/// variance; for the sequence unit the pairs' sequences and deviations, pair_sequences and
/// pair_deviations). Each quantity's error is a sum of influences: of every query through mu_j,
/// the positional line, sigma2 and the rotation direction, and
///   design.unit == sequence: also through Sigma_j and the counts n_j, plus every pair's
///     (PP_p - P_cell) / P_j; summed by sequence (the query's example id, the pair keys'),
///     variance G / (G - 1) sum_e (Phi_e - mean)^2 over the G sequences: valid when the sequences
///     are independent draws, whatever the dependence of the tokens within one. NaN (and the
///     biases still given) with fewer than design.min_sequences sequences;
///   design.unit == token: summed over the queries, plus the influence through Sigma_j under
///     normality, 2 tr((M Sigma_j)^2) / (n_j - 1), and the pair-sampling variance: conditional on
///     the keys and on the query positions and buckets (queries independent given them).
/// The bias is the second-order bias of the plug-in estimate (of order 1/n_j). Shapes:
/// std::invalid_argument; non-finite values: std::domain_error.
template <class ET, class EB, class EE, class EX>
plasticity_uncertainty plasticity_standard_errors(const xt::xexpression<ET>& t, const xt::xexpression<EB>& buckets,
                                                  const xt::xexpression<EE>& example_ids,
                                                  const xt::xexpression<EX>& x_rot,
                                                  const position_component_fit& component0, double slope_norm,
                                                  const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const uncertainty_design& design)
{
    constexpr const char* fn = "plasticity_standard_errors";
    const auto tv = detail::as_vector<double>(t, fn, "t");
    const auto bv = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    const auto ev = detail::as_vector<std::int64_t>(example_ids, fn, "example_ids");
    const auto x = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "x_rot");
    detail::check_uncertainty_input(fn, tv, bv, x, component0, slope_norm, models, estimates);
    const bool by_sequence = design.unit == sampling_unit::sequence;
    if (by_sequence && ev.size != x.rows)
    {
        detail::throw_invalid(fn, "example_ids has ", ev.size, " entries but x_rot has ", x.rows,
                              " rows (the sequence unit needs one example id per query)");
    }
    if (by_sequence)
    {
        for (std::size_t j = 0; j < models.size(); ++j)
        {
            if (!detail::is_nan(estimates[j].plasticity) && estimates[j].pair_deviation.empty())
            {
                detail::throw_invalid(fn, "estimates[", j, "] has a plasticity but no pair_sequence/pair_deviation "
                                          "(the sequence unit needs them: pair_sequences, pair_deviations)");
            }
        }
        if (!std::is_sorted(design.sequences.begin(), design.sequences.end())
            || std::adjacent_find(design.sequences.begin(), design.sequences.end()) != design.sequences.end())
        {
            detail::throw_invalid(fn, "design.sequences must be sorted and distinct");
        }
    }
    if (!detail::is_nan(design.context_length) && !(design.context_length > 0.0 && std::isfinite(design.context_length)))
    {
        detail::throw_invalid(fn, "design.context_length must be > 0 and finite (or NaN), got ", design.context_length);
    }
    return detail::standard_errors_raw(tv.data, bv.data, by_sequence ? ev.data : nullptr, x, component0, slope_norm,
                                       models, estimates, design);
}

/// plasticity_standard_errors with the token as the sampling unit (no example ids): the errors
/// conditional on the keys, the query positions and buckets (docs/method.md §8.3), for
/// independent draws.
template <class ET, class EB, class EX>
plasticity_uncertainty plasticity_standard_errors(const xt::xexpression<ET>& t, const xt::xexpression<EB>& buckets,
                                                  const xt::xexpression<EX>& x_rot,
                                                  const position_component_fit& component0, double slope_norm,
                                                  const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates)
{
    constexpr const char* fn = "plasticity_standard_errors";
    const auto tv = detail::as_vector<double>(t, fn, "t");
    const auto bv = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    const auto x = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "x_rot");
    detail::check_uncertainty_input(fn, tv, bv, x, component0, slope_norm, models, estimates);
    uncertainty_design design;
    design.unit = sampling_unit::token;
    return detail::standard_errors_raw(tv.data, bv.data, nullptr, x, component0, slope_norm, models, estimates, design);
}
}  // namespace attention_plasticity

#endif
