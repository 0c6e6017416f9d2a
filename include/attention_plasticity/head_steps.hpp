#ifndef ATTENTION_PLASTICITY_HEAD_STEPS_HPP
#define ATTENTION_PLASTICITY_HEAD_STEPS_HPP

// The joints between the steps of docs/method.md §2, for a caller who composes them on their
// own tensors (examples/compose_head.cpp) as analyze_head does (pipeline.hpp, which uses the
// same functions): the kept, oriented rows of one kind as a named result (§2.1-2.2), the cells
// of a query bucket with their pairs (§2.11-2.12), a head_profile.csv row, the aggregates from
// the profile rows (§2.14) and the head_metrics.csv row made from the steps' results.
// Threads: the steps that share their work take a trailing `threads` argument
// (orientation_signs, fit_linear, scalar_position_predictability, noise_normality,
// bucket_query_models); any number gives the same bits.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "aggregates.hpp"
#include "cells.hpp"
#include "detail/errors.hpp"
#include "detail/row_source.hpp"
#include "head_result.hpp"
#include "kept_tokens.hpp"
#include "normality.hpp"
#include "preparation.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
/// The rows of one kind that a head keeps (docs/method.md §2.2), oriented (§2.1): what the
/// steps of §2.3 on take. `vectors` holds the kept rows times the signs, in float64 (exact:
/// a sign flip of a float or double); the columns hold the kept rows' entries.
struct prepared_tokens
{
    xt::xtensor<std::size_t, 1> rows;          // the caller's rows kept, increasing (§2.2)
    xt::xtensor<double, 2> vectors;            // n_kept x d, row i = s * x_rows(i) (§2.1)
    xt::xtensor<double, 1> t;                  // the positions as float64 (the regressor of §2.3)
    xt::xtensor<std::int64_t, 1> position;     // n_kept
    xt::xtensor<std::int64_t, 1> bucket;       // n_kept
    xt::xtensor<std::int64_t, 1> example_id;   // n_kept, or empty when the tokens have none
};

/// docs/method.md §2.1-2.2 for one kind: the rows kept by subsample_rows(n, max_rows, seed)
/// with their columns, their vectors multiplied by `signs` (orientation_signs of the keys).
/// The seeds of a head: seeds_of_head (query_subsample, key_subsample).
template <class T>
prepared_tokens prepare_tokens(const tokens_view<T>& tokens, const xt::xtensor<double, 1>& signs,
                               std::size_t max_rows, std::uint64_t seed)
{
    constexpr const char* fn = "prepare_tokens";
    const std::size_t n = tokens.vectors.shape()[0];
    const std::size_t d = tokens.vectors.shape()[1];
    if (signs.size() != d)
    {
        detail::throw_invalid(fn, "signs has ", signs.size(), " entries but the vectors have d = ", d);
    }
    if (tokens.position.size() != n || tokens.bucket.size() != n
        || (tokens.example_id.size() != 0 && tokens.example_id.size() != n))
    {
        detail::throw_invalid(fn, "the columns must have one entry per vector (", n, "), got ",
                              tokens.position.size(), " positions, ", tokens.bucket.size(), " buckets and ",
                              tokens.example_id.size(), " example ids");
    }
    // The rows and columns analyze_head reads in place (detail::kept_tokens_of, the oriented
    // row source), copied out: one home for §2.1-2.2.
    const bool ids = tokens.example_id.size() != 0;
    const std::vector<double> sign(signs.begin(), signs.end());
    const detail::kept_tokens kept = detail::kept_tokens_of(tokens, max_rows, seed, nullptr, true, ids);
    const detail::row_source<T> source = detail::oriented_rows(tokens, kept, sign);
    prepared_tokens p;
    p.rows = xt::xtensor<std::size_t, 1>::from_shape({kept.n});
    p.vectors = xt::xtensor<double, 2>::from_shape({kept.n, d});
    p.t = xt::xtensor<double, 1>::from_shape({kept.n});
    p.position = p.bucket = xt::xtensor<std::int64_t, 1>::from_shape({kept.n});
    p.example_id = xt::xtensor<std::int64_t, 1>::from_shape({ids ? kept.n : 0});
    for (std::size_t r = 0; r < kept.n; ++r)
    {
        p.rows(r) = kept.rows.empty() ? r : kept.rows[r];
        source.load_oriented(r, 0, d, p.vectors.data() + r * d);
        p.t(r) = kept.t[r];
        p.position(r) = kept.position[r];
        p.bucket(r) = kept.bucket[r];
        if (ids)
        {
            p.example_id(r) = kept.example_id[r];
        }
    }
    return p;
}

/// prepare_tokens of head_tokens (viewed, not copied).
template <class T>
prepared_tokens prepare_tokens(const head_tokens<T>& tokens, const xt::xtensor<double, 1>& signs,
                               std::size_t max_rows, std::uint64_t seed)
{
    return prepare_tokens(as_view(tokens), signs, max_rows, seed);
}

/// docs/method.md §2.11-2.12 for one query model: the cells of its eligible key buckets
/// (eligible_key_buckets with options.sliding_window), in order, each with the pairs of
/// cell_key_pairs (options.num_pairs_per_bucket, options.max_rel_dist, the head's
/// pair-sampler seed of seeds_of_head).
inline std::vector<cell_pairs> query_bucket_cells(const std::vector<key_bucket>& key_buckets,
                                                  const bucket_query_model& model, const head_options& options,
                                                  std::uint64_t pair_sampler_seed)
{
    std::vector<cell_pairs> cells;
    for (std::size_t c : eligible_key_buckets(key_buckets, model.bucket, model.tau_from_origin(),
                                                  options.sliding_window, model.t_origin))
    {
        cells.push_back(cell_key_pairs(key_buckets[c], model.bucket, options.num_pairs_per_bucket,
                                       options.max_rel_dist, pair_sampler_seed));
    }
    return cells;
}

/// The head_profile.csv row of a query bucket (docs/method.md §3): its model and what §2.13
/// gave it; small_bucket when it has fewer than min_bucket_queries queries (§2.14).
inline bucket_profile profile_row(const bucket_query_model& model, const bucket_plasticity_result& bucket,
                                  std::size_t min_bucket_queries)
{
    bucket_profile row;
    row.q_bucket = model.bucket;
    row.tau = model.tau;
    row.n_queries = model.n_queries;
    row.plasticity = bucket.plasticity;
    row.n_pairs = bucket.n_pairs;
    row.small_bucket = model.n_queries < min_bucket_queries;
    return row;
}

/// The aggregates of docs/method.md §2.14 from a head's profile rows: plasticity_aggregates of
/// their tau, n_queries and `value` (AP_j by default), a small bucket's value left out
/// (value_in_d), with C = context_length (the largest kept query position + 1).
inline plasticity_aggregates_result plasticity_aggregates(const std::vector<bucket_profile>& profile,
                                                          double context_length,
                                                          double bucket_profile::*value = &bucket_profile::plasticity)
{
    std::vector<double> tau, n_queries, plasticity;
    for (const bucket_profile& row : profile)
    {
        tau.push_back(row.tau);
        n_queries.push_back(static_cast<double>(row.n_queries));
        plasticity.push_back(value_in_d(row, row.*value));
    }
    return detail::plasticity_aggregates_raw(tau.data(), n_queries.data(), plasticity.data(), profile.size(),
                                             context_length);
}

/// The token counts of a head after §2.2 (the first columns of head_metrics.csv).
struct head_counts
{
    std::size_t n_q_tokens = 0;  // kept queries
    std::size_t n_k_tokens = 0;  // kept keys
};

/// The head_metrics.csv row of docs/method.md §3 from the results of §2: the kept counts, the
/// regression (§2.3; d = its number of columns), the scalar predictability (§2.4), the
/// normality of the first component (§2.7) and of the noise components (§2.8), and the
/// aggregates (§2.14). The columns of §8 stay NaN: their steps fill them.
inline head_metrics make_head_metrics(const head_counts& counts, const linear_fit& fit,
                                      const scalar_predictability& scalar, const residual_normality_result& first,
                                      const noise_normality_result& noise,
                                      const plasticity_aggregates_result& aggregates)
{
    head_metrics m;
    m.n_q_tokens = counts.n_q_tokens;
    m.n_k_tokens = counts.n_k_tokens;
    m.d_model = fit.beta.size();
    m.q_R2_pos = fit.r2_mean;
    m.q_beta_norm = fit.beta_norm;
    m.q_R2_scalar = scalar.r2;
    m.q_mae_baseline = scalar.mae_baseline;
    m.q_mae_proj = scalar.mae_projection;
    m.q_mae_ratio = scalar.mae_ratio;
    m.q_resid0_skew = first.skewness;
    m.q_resid0_kurt = first.excess_kurtosis;
    m.q_resid0_ks_p = first.ks_p_value;
    m.q_noise_med_abs_skew = noise.median_abs_skewness;
    m.q_noise_med_abs_kurt = noise.median_abs_kurtosis;
    m.q_noise_med_ks_p = noise.median_ks_p_value;
    m.q_noise_frac_ks_p_lt_alpha = noise.fraction_ks_p_below_alpha;
    m.ap_overall = aggregates.ap_overall;
    m.ap_first20 = aggregates.ap_first20;
    m.ap_last20 = aggregates.ap_last20;
    m.ap_drop = aggregates.ap_drop;
    m.context_length = aggregates.context_length;
    return m;
}
}  // namespace attention_plasticity

#endif
