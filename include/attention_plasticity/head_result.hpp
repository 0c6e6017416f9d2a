#ifndef ATTENTION_PLASTICITY_HEAD_RESULT_HPP
#define ATTENTION_PLASTICITY_HEAD_RESULT_HPP

// What analyze_head (pipeline.hpp) takes and returns: the options of docs/method.md §2 and §8,
// and every number of §3 for one head (the rows of the CSV files), with optional stage timings.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "cells.hpp"
#include "distance_maps.hpp"
#include "example_documents.hpp"
#include "intervals.hpp"
#include "pca_roles.hpp"
#include "query_model.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
/// The parameters of docs/method.md §2 (defaults as there) and the head's sliding window.
struct head_options
{
    std::size_t max_tokens_per_head = 50000;  // §2.2
    std::size_t normality_max_dims = 64;      // §2.8
    double p_alpha = 0.01;                    // §2.8
    std::uint64_t seed = 0;                   // §2.15
    std::size_t num_pairs_per_bucket = 256;   // §2.12
    double max_rel_dist = 0.05;               // §2.12
    double covariance_epsilon = default_covariance_epsilon;  // §2.10
    std::int64_t sliding_window = 0;          // §2.11, in tokens; <= 0 means none
    // §2.14: a query bucket with fewer queries keeps its profile row (flagged small_bucket) but is
    // left out of the aggregates and has no interval (§8.3): too few queries to model.
    std::size_t min_bucket_queries = 16;
    // Threads that analyze_head may use for this one head (the calling thread included);
    // 0 or 1: the calling thread only. Results are identical for any number.
    std::size_t threads = 1;
    // The extensions of docs/method.md §8: they add results and never change the ones above.
    bool distance_map = true;                 // §8.1, cheap (binning the pairs' PP)
    std::size_t distance_map_extra_pairs = 0; // §8.1, extra pairs per cell, from their own streams
    std::size_t distance_bins_per_octave = 1; // §8.1, 1 to 1024
    bool empirical_ap = false;                // §8.2, pairs x queries GEMMs: off by default
    std::size_t empirical_max_queries = 0;    // §8.2, queries per bucket for it (seeded subsample); 0: all
    bool confidence_intervals = false;        // §8.3, about one more kernel's work: off by default
    double confidence_level = 0.95;           // §8.3, in (0, 1)
    // §8.3: what the standard errors treat as the sampling unit: the sequences (example_id; the
    // honest default on real text) or the tokens (conditional on the keys, for independent draws).
    attention_plasticity::sampling_unit sampling_unit = attention_plasticity::sampling_unit::sequence;
    bool sequence_influences = false;         // §8.3, keep each sequence's influence (paired comparisons, §8.6)
    bool planar_rotation = true;              // §8.5, two O(n d) passes over the rows: on by default
    bool pca_roles = false;                   // §8.5, a SYRK of the rows (n d^2 / 2): off by default
    // §1.1, §8.3: the document of each example id (the sequence unit is the document; the key
    // pairs of §2.12 stay within one example). Null: each example is its own document.
    std::shared_ptr<const example_documents> documents;
};

/// head_metrics.csv, one row.
struct head_metrics
{
    std::size_t n_q_tokens = 0;
    std::size_t n_k_tokens = 0;
    std::size_t d_model = 0;
    double q_R2_pos = 0.0;
    double q_beta_norm = 0.0;
    double q_R2_scalar = 0.0;
    double q_mae_baseline = 0.0;
    double q_mae_proj = 0.0;
    double q_mae_ratio = 1.0;
    double q_resid0_skew = 0.0;
    double q_resid0_kurt = 0.0;
    double q_resid0_ks_p = 1.0;
    double q_noise_med_abs_skew = 0.0;
    double q_noise_med_abs_kurt = 0.0;
    double q_noise_med_ks_p = 0.0;
    double q_noise_frac_ks_p_lt_alpha = 0.0;
    double ap_overall = 0.0;
    double ap_first20 = 0.0;
    double ap_last20 = 0.0;
    double ap_drop = 0.0;
    // docs/method.md §8: NaN when the extension is off (or undefined).
    double ap_empirical_overall = std::numeric_limits<double>::quiet_NaN();     // §8.2
    double ap_empirical_overall_se = std::numeric_limits<double>::quiet_NaN();  // §8.2-8.3
    double ap_overall_se = std::numeric_limits<double>::quiet_NaN();            // §8.3
    double ap_overall_bias = std::numeric_limits<double>::quiet_NaN();          // §8.3
    double ap_overall_ci_low = std::numeric_limits<double>::quiet_NaN();        // §8.3
    double ap_overall_ci_high = std::numeric_limits<double>::quiet_NaN();       // §8.3
    double ap_overall_corrected = std::numeric_limits<double>::quiet_NaN();     // §8.3, the interval's centre
    double ap_first20_se = std::numeric_limits<double>::quiet_NaN();            // §8.3
    double ap_first20_bias = std::numeric_limits<double>::quiet_NaN();          // §8.3
    double ap_last20_se = std::numeric_limits<double>::quiet_NaN();             // §8.3
    double ap_last20_bias = std::numeric_limits<double>::quiet_NaN();           // §8.3
    double ap_drop_se = std::numeric_limits<double>::quiet_NaN();               // §8.3, with the terms' covariance
    double ap_drop_bias = std::numeric_limits<double>::quiet_NaN();             // §8.3
    double context_length = std::numeric_limits<double>::quiet_NaN();           // C of §2.14
    std::size_t n_sequences = 0;  // distinct example ids of the kept queries and keys (§8.3)
    // docs/method.md §8.5, the companion measures (NaN / undefined when not defined).
    double bias_strength = std::numeric_limits<double>::quiet_NaN();     // mu_Q^a alpha_K
    double bias_strength_se = std::numeric_limits<double>::quiet_NaN();  // §8.3, sequence unit: jackknife
    double drift_slope_k = std::numeric_limits<double>::quiet_NaN();     // alpha_K
    double drift_query_mean = std::numeric_limits<double>::quiet_NaN();  // mu_Q^a
    double pc0_r_q = std::numeric_limits<double>::quiet_NaN();           // r_q of PC0
    double pc0_r_k = std::numeric_limits<double>::quiet_NaN();           // r_k of PC0
    attention_plasticity::pca_class pca_class = attention_plasticity::pca_class::undefined;
    // The documents of those examples (§8.3, the sequence unit); = n_sequences without an
    // examples table (each example its own document).
    std::size_t n_documents = 0;
};

/// head_profile.csv, one row: a query bucket with a query model.
struct bucket_profile
{
    std::int64_t q_bucket = 0;
    double tau = 0.0;
    std::size_t n_queries = 0;
    double plasticity = 0.0;  // AP_j, NaN when the bucket has no pairs
    std::size_t n_pairs = 0;
    // docs/method.md §8: NaN when the extension is off (or undefined).
    double plasticity_empirical = std::numeric_limits<double>::quiet_NaN();     // §8.2
    double plasticity_empirical_se = std::numeric_limits<double>::quiet_NaN();  // §8.2-8.3
    double plasticity_se = std::numeric_limits<double>::quiet_NaN();            // §8.3
    double plasticity_bias = std::numeric_limits<double>::quiet_NaN();          // §8.3
    double plasticity_ci_low = std::numeric_limits<double>::quiet_NaN();        // §8.3
    double plasticity_ci_high = std::numeric_limits<double>::quiet_NaN();       // §8.3
    double plasticity_corrected = std::numeric_limits<double>::quiet_NaN();     // §8.3, the interval's centre
    bool small_bucket = false;  // n_queries < min_bucket_queries: out of the aggregates (§2.14)
};

/// What a profile row brings to the aggregates of docs/method.md §2.14 and to the interval of
/// ap_overall (§8.3): `value` (its model or empirical AP_j), or NaN for a small bucket, which is
/// not in D (§2.14).
inline double value_in_d(const bucket_profile& row, double value) noexcept
{
    return row.small_bucket ? std::numeric_limits<double>::quiet_NaN() : value;
}

/// Wall time of each stage of analyze_head, in seconds (for profiling; optional).
struct stage_timings
{
    double preparation = 0.0;        // checks, orientation (a pass over the keys), subsampling
    double regression = 0.0;         // position regression (two passes over the queries), rotation
    double rotation = 0.0;           // scalar predictability and each query's reflection (a pass)
    double normality = 0.0;          // component-0 fit, first-component and noise summaries
    double bucket_statistics = 0.0;  // component weights, query models
    double sampling = 0.0;           // key buckets, eligible cells, pair sampling
    double kernel = 0.0;             // key differences, moments and plasticity, aggregates
    double extensions = 0.0;         // docs/method.md §8: distance map, empirical AP, intervals
    double total = 0.0;
};

struct head_result
{
    head_id id;
    head_metrics metrics;
    std::vector<cell_plasticity> cells;
    std::vector<bucket_profile> profile;
    xt::xtensor<double, 1> component_r2;      // R2_d of §2.3, original (oriented) axes
    xt::xtensor<double, 1> component_weight;  // w_d of §2.9
    std::vector<distance_plasticity_bin> distance_map;  // docs/method.md §8.1; empty when off
    // docs/method.md §8.3 with sequence_influences on (and sequence-level errors defined): each
    // sequence's centred influence on ap_overall, ap_first20, ap_last20, ap_drop and every AP_j
    // with a standard error; empty otherwise.
    std::vector<sequence_influence> sequence_influences;
};
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_HEAD_RESULT_HPP
