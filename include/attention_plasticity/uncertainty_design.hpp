#ifndef ATTENTION_PLASTICITY_UNCERTAINTY_DESIGN_HPP
#define ATTENTION_PLASTICITY_UNCERTAINTY_DESIGN_HPP

// What the standard errors of docs/method.md §8.3 are of and how they are computed: the sampling
// unit, the quantities whose per-sequence influences are kept, what each query bucket brings
// (bucket_estimate), the design (uncertainty_design) and the result (plasticity_uncertainty) of
// plasticity_standard_errors (standard_errors.hpp). Part of the intervals topic (intervals.hpp).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sensitivity.hpp"

namespace attention_plasticity
{
/// What the standard errors of docs/method.md §8.3 treat as the independent sampling unit.
///   sequence  the sequences (example ids): every quantity is an estimate of its value over the
///             distribution of the sequences the examples were drawn from (and of the capture's
///             token sampling); the queries, the keys and the pairs of one sequence are dependent.
///             The honest choice on real text.
///   token     the errors conditional on the keys, the query positions and bucket ids: the query
///             vectors independent given their positions, the pairs drawn anew (for synthetic data
///             whose tokens are independent draws).
enum class sampling_unit
{
    sequence,
    token
};

/// The quantities of docs/method.md §2.14 whose per-sequence influences §8.3 gives.
enum class influence_quantity
{
    ap_overall,
    ap_first20,
    ap_last20,
    ap_drop,
    ap_bucket
};

/// The name of a quantity as the tables write it ("ap_overall", ..., "ap_bucket").
inline const char* influence_quantity_name(influence_quantity quantity) noexcept
{
    switch (quantity)
    {
    case influence_quantity::ap_overall: return "ap_overall";
    case influence_quantity::ap_first20: return "ap_first20";
    case influence_quantity::ap_last20: return "ap_last20";
    case influence_quantity::ap_drop: return "ap_drop";
    case influence_quantity::ap_bucket: return "ap_bucket";
    }
    return "ap_bucket";
}

/// One sampling unit's centred first-order influence on one quantity (docs/method.md §8.3): the
/// estimate minus its value over the population of units is, to first order, the sum of the
/// influences of the head's units, which sum to 0. The unit is the document (the sum of the
/// influences of its examples); without an examples table, the example (document = example).
struct sequence_influence
{
    std::int64_t document_id = 0;
    influence_quantity quantity = influence_quantity::ap_overall;
    std::int64_t q_bucket = 0;  // the query bucket j of an ap_bucket influence; 0 otherwise
    double influence = 0.0;
};

/// What the interval of one query bucket needs (one per bucket_query_model, in their order).
struct bucket_estimate
{
    double plasticity = std::numeric_limits<double>::quiet_NaN();  // AP_j; NaN: no pairs (not in D)
    bucket_sensitivity sensitivity;                                // bucket_plasticity_sensitivity
    double pair_variance = 0.0;                                    // pair_sampling_variance
    // For sequence-level errors (sampling_unit::sequence), one entry per pair of the bucket, in
    // the cells' order: the example id of its keys (pair_sequences) and its PP minus its cell's
    // mean (pair_deviations).
    std::vector<std::int64_t> pair_sequence;
    std::vector<double> pair_deviation;
};

/// A standard error and a bias.
struct aggregate_uncertainty
{
    double standard_error = std::numeric_limits<double>::quiet_NaN();
    double bias = std::numeric_limits<double>::quiet_NaN();
};

/// Standard errors and second-order biases of every AP_j and of the aggregates of §2.14
/// (docs/method.md §8.3).
struct plasticity_uncertainty
{
    std::vector<double> bucket_standard_error;  // per model; NaN for buckets without pairs
    std::vector<double> bucket_bias;            // E[AP_j] - AP_j, estimated
    double standard_error = std::numeric_limits<double>::quiet_NaN();  // of ap_overall
    double bias = std::numeric_limits<double>::quiet_NaN();
    aggregate_uncertainty first20;  // ap_first20
    aggregate_uncertainty last20;   // ap_last20
    aggregate_uncertainty drop;     // ap_drop = ap_first20 - ap_last20, with the terms' covariance
    std::size_t n_sequences = 0;    // sampling_unit::sequence: the sequences (units) of the head
    std::vector<sequence_influence> influences;  // uncertainty_design::keep_influences
};

/// How plasticity_standard_errors treats the data (docs/method.md §8.3).
struct uncertainty_design
{
    attention_plasticity::sampling_unit unit = sampling_unit::sequence;
    // C of §2.14 (the buckets of ap_first20 and ap_last20); NaN: max t + 1 of the given queries.
    double context_length = std::numeric_limits<double>::quiet_NaN();
    // The head's sequences (sorted, distinct): every sequence sampled, including those that bring
    // no query or pair; empty: the example ids of the queries and of the pairs.
    std::vector<std::int64_t> sequences;
    // Fewer sequences than this: the sequence-level errors are NaN (a cluster-robust variance
    // from a handful of clusters is itself too uncertain to be an error bar).
    std::size_t min_sequences = 10;
    bool keep_influences = false;  // fill plasticity_uncertainty::influences
    // Threads that share the passes over the queries' influences (0 or 1: the calling thread);
    // each task writes its own rows or columns, so the results are the same for any number.
    std::size_t threads = 1;
};

/// The largest tr Cov(delta) of the rotation's direction (docs/method.md §8.3, in squared
/// radians) for which the bias includes the second-order terms of the direction's error: beyond
/// it (an angular error of about 0.3 rad or more, as in heads without positional encoding) an
/// expansion in that error is not valid and its terms are left out of the bias.
inline constexpr double direction_bias_max_variance = 0.1;
}  // namespace attention_plasticity

#endif
