#ifndef ATTENTION_PLASTICITY_PIPELINE_HEAD_EXTENSIONS_HPP
#define ATTENTION_PLASTICITY_PIPELINE_HEAD_EXTENSIONS_HPP

// The extensions of docs/method.md §8 inside analyze_head (pipeline.hpp): per bucket, what
// the distance map, the empirical AP and the intervals add; then the head-level results.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../aggregates.hpp"
#include "../cells.hpp"
#include "../detail/finite.hpp"
#include "../detail/matrix.hpp"
#include "../detail/row_source.hpp"
#include "../detail/stream_store.hpp"
#include "../distance_maps.hpp"
#include "../empirical.hpp"
#include "../head_result.hpp"
#include "../intervals.hpp"
#include "../kept_tokens.hpp"
#include "../query_model.hpp"
#include "../seeds.hpp"
#include "../sensitivity.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// The rows of a row source as a matrix read one row at a time: row(i) is row i in double,
    /// valid until the next call (for steps written over a matrix_view that read rows in turn).
    template <class T>
    class loaded_rows
    {
    public:
        explicit loaded_rows(const row_source<T>& source)
            : rows(source.rows), cols(source.cols), m_source(source), m_row(source.cols)
        {
        }

        const double* row(std::size_t i) const
        {
            m_source.load(i, m_row.data());
            return m_row.data();
        }

        /// Components [j0, j1) of row i into out (only those read, when the source can).
        void load_columns(std::size_t i, std::size_t j0, std::size_t j1, double* out) const
        {
            if (m_source.reflection != nullptr && m_source.reflection_factors == nullptr)
            {
                const double* whole = row(i);  // the reflection needs the whole row
                std::copy(whole + j0, whole + j1, out);
                return;
            }
            m_source.load(i, j0, j1, out);
        }

        /// Asks for row i ahead of its use (row_source::prefetch) when the rows are a subsample.
        void prefetch(std::size_t i) const noexcept
        {
            if (m_source.index != nullptr)
            {
                m_source.prefetch(i);
            }
        }

        std::size_t rows;
        std::size_t cols;

    private:
        const row_source<T>& m_source;
        mutable std::vector<double> m_row;
    };

    /// The extensions of docs/method.md §8 over the buckets of one head: what each bucket adds,
    /// then the head-level results. The rotated queries and keys are read through the head's
    /// row sources (the caller's rows, kept, oriented and reflected as they are read).
    template <class TQ, class TK>
    class head_extensions
    {
    public:
        head_extensions(const head_options& options, const kept_tokens& q, const kept_tokens& k,
                        const row_source<TQ>& q_rows, const row_source<TK>& k_rows, std::uint64_t pair_sampler_seed)
            : m_options(options), m_q(q), m_k(k), m_q_rows(q_rows), m_k_rows(k_rows), m_pair_seed(pair_sampler_seed)
        {
            if (options.confidence_intervals && options.sampling_unit == sampling_unit::sequence
                && q.example_id != nullptr)
            {
                m_sequences = head_sequences(q, k);
            }
            if (options.empirical_ap)
            {
                m_query_rows = rows_by_bucket(q.bucket, q.n);
            }
        }

        /// What one query bucket's extensions read from its pairs, formed by prepare_bucket
        /// (on any thread: it reads the head's rows and writes only its own result) and handed
        /// to add_bucket, in the buckets' order.
        struct bucket_work
        {
            xt::xtensor<double, 2> w;  // the pairs' differences, kept for the empirical AP only
            bucket_estimate estimate;  // §8.3 but the plasticity (add_bucket sets it)
            pair_distances distances;  // §8.1, the bucket's pairs, then the extra pairs
            pair_distances extra_distances;
            xt::xtensor<double, 1> extra_plasticity;
            std::vector<distance_bin_pair> bins;  // §8.1: the bins of `distances`, then of `extra_distances`
        };

        /// §8.3, sequence unit: the head's sequences (head_sequences; empty without the
        /// sequence-level errors).
        const std::vector<std::int64_t>& sequences() const { return m_sequences; }

        /// Whether prepare_bucket may run on the head's threads beside the kernel: not with the
        /// empirical AP, whose differences w are kept for add_bucket (one bucket's at a time).
        bool prepares_in_parallel() const { return !m_options.empirical_ap; }

        /// The work of one query bucket that needs its pairs: the differences w of the pairs
        /// (§2.12, the kernel's W) formed again when an extension needs them whole, the
        /// sensitivity and pair terms of §8.3, the distances of §8.1.
        bucket_work prepare_bucket(const bucket_query_model& model, const std::vector<key_bucket>& key_buckets,
                                   const std::vector<cell_pairs>& cells, const bucket_plasticity_result& bucket) const
        {
            bucket_work work;
            xt::xtensor<double, 2> w;
            if ((m_options.empirical_ap && bucket.n_pairs > 0) || m_options.confidence_intervals)
            {
                const auto rows = pair_rows(cells);
                w = key_row_differences(m_k_rows, rows.first, rows.second);
            }
            if (m_options.distance_map)
            {
                work.distances = distances_of(cells, model);
                if (m_options.distance_map_extra_pairs > 0)
                {
                    const std::vector<cell_pairs> extra = extra_pairs(model, key_buckets, cells);
                    work.extra_plasticity = query_bucket_plasticity_raw(m_k_rows, extra, model).pair_plasticity;
                    work.extra_distances = distances_of(extra, model);
                }
                const std::size_t b = m_options.distance_bins_per_octave;
                work.bins.reserve(work.distances.key_distance.size() + work.extra_distances.key_distance.size());
                append_distance_bins(work.distances.key_distance.data(), work.distances.query_distance.data(),
                                     work.distances.key_distance.size(), b, work.bins);
                append_distance_bins(work.extra_distances.key_distance.data(),
                                     work.extra_distances.query_distance.data(),
                                     work.extra_distances.key_distance.size(), b, work.bins);
            }
            if (m_options.confidence_intervals)
            {
                bucket_estimate& estimate = work.estimate;
                estimate.sensitivity =
                    sensitivity_raw(matrix_of(w), bucket.moments.mean.data(), bucket.moments.variance.data(), model);
                estimate.pair_variance = bucket.n_pairs > 0 ? pair_sampling_variance(bucket.pair_plasticity, cells)
                                                            : std::numeric_limits<double>::quiet_NaN();
                if (m_options.sampling_unit == sampling_unit::sequence && bucket.n_pairs > 0)
                {
                    for (const cell_pairs& cell : cells)
                    {
                        for (std::size_t p = 0; p < cell.pairs.size(); ++p)
                        {
                            estimate.pair_sequence.push_back(m_k.unit_id[cell.pairs.first(p)]);
                        }
                    }
                    estimate.pair_deviation = pair_deviations(bucket.pair_plasticity, cells);
                }
            }
            if (m_options.empirical_ap && bucket.n_pairs > 0)
            {
                work.w = std::move(w);
            }
            return work;
        }

        /// One query bucket: its cells, the Gaussian result (whose profile row and cells, the
        /// last ones of `result`, get the empirical values) and its prepare_bucket.
        void add_bucket(const bucket_query_model& model, const std::vector<cell_pairs>& cells,
                        const bucket_plasticity_result& bucket, bucket_work&& work, head_result& result)
        {
            const xt::xtensor<double, 2>& w = work.w;
            if (m_options.distance_map)
            {
                m_bins.insert(m_bins.end(), work.bins.begin(), work.bins.end());
                m_plasticity.insert(m_plasticity.end(), bucket.pair_plasticity.begin(), bucket.pair_plasticity.end());
                if (m_options.distance_map_extra_pairs > 0)
                {
                    m_plasticity.insert(m_plasticity.end(), work.extra_plasticity.begin(), work.extra_plasticity.end());
                }
            }
            bucket_profile& row = result.profile.back();
            if (m_options.empirical_ap && bucket.n_pairs > 0)
            {
                const std::vector<std::size_t> used = empirical_rows(model);
                const xt::xtensor<double, 2> queries = empirical_queries(used);
                const matrix_view<double> qv = matrix_of(queries);
                const matrix_view<double> wv = matrix_of(w);
                const empirical_preferences preferences = preferences_raw(qv, wv);
                const bucket_plasticity_result empirical = bucket_empirical_of_preferences(preferences, cells);
                const std::size_t first_cell = result.cells.size() - cells.size();
                for (std::size_t c = 0; c < cells.size(); ++c)
                {
                    result.cells[first_cell + c].plasticity_empirical = empirical.cells[c].plasticity;
                }
                row.plasticity_empirical = empirical.plasticity;
                if (m_options.confidence_intervals && m_options.sampling_unit == sampling_unit::token)
                {
                    const double variance = empirical_mean_variance_raw(qv, wv, preferences)
                                            + pair_sampling_variance(empirical.pair_plasticity, cells);
                    row.plasticity_empirical_se = std::sqrt(variance);
                    m_empirical_variance.push_back(variance);
                }
                else if (m_options.confidence_intervals && !m_sequences.empty())
                {
                    // §8.3 by sequence: each used query's 4 (f_i - mean f) / n and each pair's
                    // (PP_p - P_cell) / P, summed by sequence; a cell of one pair: NaN.
                    std::vector<double> phi(m_sequences.size(), 0.0);
                    const std::vector<double> f = empirical_query_scores_raw(qv, wv, preferences);
                    double f_mean = 0.0;
                    for (double x : f)
                    {
                        f_mean += x / static_cast<double>(f.size());
                    }
                    for (std::size_t r = 0; r < used.size(); ++r)
                    {
                        phi[sequence_index(m_sequences, m_q.unit_id[used[r]])] +=
                            4.0 * (f[r] - f_mean) / static_cast<double>(used.size());
                    }
                    const std::vector<double> deviation = pair_deviations(empirical.pair_plasticity, cells);
                    std::size_t p = 0;
                    for (const cell_pairs& cell : cells)
                    {
                        for (std::size_t i = 0; i < cell.pairs.size(); ++i, ++p)
                        {
                            phi[sequence_index(m_sequences, m_k.unit_id[cell.pairs.first(i)])] +=
                                deviation[p] / static_cast<double>(deviation.size());
                        }
                    }
                    const bool measured = !is_nan(pair_sampling_variance(empirical.pair_plasticity, cells));
                    row.plasticity_empirical_se = measured ? sequence_standard_error(phi, nullptr) : nan_value;
                    m_empirical_influence[model.bucket] = measured ? std::move(phi) : std::vector<double>{};
                }
            }
            if (m_options.confidence_intervals)
            {
                bucket_estimate estimate = std::move(work.estimate);
                // A small bucket: no interval of its own, no weight in ap_overall's.
                estimate.plasticity = value_in_d(row, bucket.plasticity);
                m_estimates.push_back(std::move(estimate));
            }
        }

        /// The head-level results, once every bucket was added: ap_empirical_overall, the
        /// intervals, the distance map.
        void finish(const std::vector<bucket_query_model>& models, const position_component_fit& component0,
                    double slope_norm, double context_length, head_result& result)
        {
            head_metrics& m = result.metrics;
            if (m_options.empirical_ap)
            {
                // §2.14's aggregate of the empirical AP_j; its variance from the buckets' (disjoint queries).
                std::vector<double> tau, n_queries, empirical;
                double variance = 0.0, total = 0.0;
                std::size_t next = 0;
                for (const bucket_profile& row : result.profile)
                {
                    tau.push_back(row.tau);
                    n_queries.push_back(static_cast<double>(row.n_queries));
                    empirical.push_back(value_in_d(row, row.plasticity_empirical));
                    if (m_options.confidence_intervals && m_options.sampling_unit == sampling_unit::token
                        && !is_nan(row.plasticity_empirical))
                    {
                        const double bucket_variance = m_empirical_variance[next++];
                        if (!row.small_bucket)
                        {
                            variance += n_queries.back() * n_queries.back() * bucket_variance;
                            total += n_queries.back();
                        }
                    }
                }
                m.ap_empirical_overall = weighted_plasticity(tau.data(), n_queries.data(), empirical.data(),
                                                             empirical.size(), [](double) { return true; });
                if (total > 0.0)
                {
                    m.ap_empirical_overall_se = std::sqrt(variance) / total;
                }
                if (m_options.confidence_intervals && !m_sequences.empty())
                {
                    m.ap_empirical_overall_se = empirical_overall_sequence_error(result, m.ap_empirical_overall);
                }
            }
            if (m_options.confidence_intervals)
            {
                const double level = m_options.confidence_level;
                // §8.3's passes read the rotated queries row by row from the source (no copy).
                const loaded_rows<TQ> rotated(m_q_rows);
                uncertainty_design design;
                design.unit = m_options.sampling_unit;
                design.context_length = context_length;
                design.keep_influences = m_options.sequence_influences;
                design.threads = m_options.threads;
                if (design.unit == sampling_unit::sequence && m_q.example_id != nullptr)
                {
                    design.sequences = m_sequences;  // head_sequences(m_q, m_k), formed once
                }
                plasticity_uncertainty u =
                    standard_errors_raw(m_q.t.data(), m_q.bucket, m_q.unit_id, rotated, component0, slope_norm,
                                        models, m_estimates, design);
                // n_sequences: the examples; the units (documents) are n_documents (§8.3).
                m.n_documents = u.n_sequences;
                m.n_sequences = u.n_sequences > 0 && m_options.documents != nullptr
                                    ? head_sequences(m_q, m_k, true).size()
                                    : u.n_sequences;
                for (std::size_t j = 0; j < result.profile.size(); ++j)
                {
                    bucket_profile& row = result.profile[j];
                    row.plasticity_se = u.bucket_standard_error[j];
                    row.plasticity_bias = u.bucket_bias[j];
                    const interval ci = plasticity_interval(row.plasticity, row.plasticity_bias, row.plasticity_se, level);
                    row.plasticity_ci_low = ci.low;
                    row.plasticity_ci_high = ci.high;
                    row.plasticity_corrected = ci.centre;
                }
                m.ap_overall_se = u.standard_error;
                m.ap_overall_bias = u.bias;
                const interval ci = plasticity_interval(m.ap_overall, m.ap_overall_bias, m.ap_overall_se, level);
                m.ap_overall_ci_low = ci.low;
                m.ap_overall_ci_high = ci.high;
                m.ap_overall_corrected = ci.centre;
                m.ap_first20_se = u.first20.standard_error;
                m.ap_first20_bias = u.first20.bias;
                m.ap_last20_se = u.last20.standard_error;
                m.ap_last20_bias = u.last20.bias;
                m.ap_drop_se = u.drop.standard_error;
                m.ap_drop_bias = u.drop.bias;
                result.sequence_influences = std::move(u.influences);
            }
            if (m_options.distance_map)
            {
                result.distance_map = distance_map_of_bins(m_bins.data(), m_plasticity.data(), m_plasticity.size(),
                                                           m_options.distance_bins_per_octave);
            }
        }

    private:
        /// §8.1: the key and query distances of the pairs, about the head's position origin
        /// (§2.3): exact for positions far from 0.
        pair_distances distances_of(const std::vector<cell_pairs>& cells, const bucket_query_model& model) const
        {
            return pair_distances_raw(m_k.position, cells, model.tau_from_origin(), model.t_origin);
        }

        /// §8.1: extra pairs of every cell from their own streams, under the bucket's model.
        std::vector<cell_pairs> extra_pairs(const bucket_query_model& model, const std::vector<key_bucket>& key_buckets,
                                            const std::vector<cell_pairs>& cells) const
        {
            std::vector<cell_pairs> extra;
            for (const cell_pairs& cell : cells)
            {
                const auto it = std::lower_bound(key_buckets.begin(), key_buckets.end(), cell.k_bucket,
                                                 [](const key_bucket& kb, std::int64_t b) { return kb.bucket < b; });
                extra.push_back(cell_pairs_from_stream(*it, model.bucket, m_options.distance_map_extra_pairs,
                                                       m_options.max_rel_dist,
                                                       distance_map_pair_seed(m_pair_seed, model.bucket, cell.k_bucket),
                                                       "analyze_head"));
            }
            return extra;
        }

        /// §8.2: the kept rows of the bucket's queries it uses, all of them or a seeded subsample of the cap.
        std::vector<std::size_t> empirical_rows(const bucket_query_model& model) const
        {
            const std::vector<std::size_t>& rows = m_query_rows.at(model.bucket);
            std::vector<std::size_t> picked;
            const std::size_t cap = m_options.empirical_max_queries;
            subsample_rows_into(rows.size(), cap > 0 ? cap : rows.size(), empirical_query_seed(m_pair_seed, model.bucket),
                                picked);
            for (std::size_t& r : picked)
            {
                r = rows[r];
            }
            return picked;
        }

        /// Those rows, rotated.
        xt::xtensor<double, 2> empirical_queries(const std::vector<std::size_t>& used) const
        {
            const std::size_t d = m_q_rows.cols;
            xt::xtensor<double, 2> out = xt::xtensor<double, 2>::from_shape({used.size(), d});
            for (std::size_t r = 0; r < used.size(); ++r)
            {
                m_q_rows.load(used[r], out.data() + r * d);
            }
            return out;
        }

        /// sqrt(G / (G - 1) sum_e (phi_e - mean)^2) over the head's G sequences (NaN below the
        /// minimum of §8.3); phi + counts * kappa when counts are given.
        double sequence_standard_error(const std::vector<double>& phi, const std::vector<double>* shift) const
        {
            const std::size_t g = phi.size();
            if (g < uncertainty_design{}.min_sequences)
            {
                return nan_value;
            }
            double mean = 0.0;
            for (std::size_t e = 0; e < g; ++e)
            {
                mean += phi[e] + (shift != nullptr ? (*shift)[e] : 0.0);
            }
            mean /= static_cast<double>(g);
            double squares = 0.0;
            for (std::size_t e = 0; e < g; ++e)
            {
                const double x = phi[e] + (shift != nullptr ? (*shift)[e] : 0.0) - mean;
                squares += x * x;
            }
            return std::sqrt(static_cast<double>(g) / static_cast<double>(g - 1) * squares);
        }

        /// §8.3 by sequence for ap_empirical_overall: sum_j omega_j Phi_ej + sum_j (AP_j - A) n_ej / N
        /// over the buckets in its aggregate (not small, with an empirical AP); NaN when one of them
        /// has no sequence-level influence.
        double empirical_overall_sequence_error(const head_result& result, double overall) const
        {
            const std::size_t g = m_sequences.size();
            double total = 0.0;
            for (const bucket_profile& row : result.profile)
            {
                if (!is_nan(value_in_d(row, row.plasticity_empirical)))
                {
                    total += static_cast<double>(row.n_queries);
                }
            }
            if (total == 0.0)
            {
                return nan_value;
            }
            std::vector<double> phi(g, 0.0), shift(g, 0.0);
            for (const bucket_profile& row : result.profile)
            {
                if (is_nan(value_in_d(row, row.plasticity_empirical)))
                {
                    continue;
                }
                const auto it = m_empirical_influence.find(row.q_bucket);
                if (it == m_empirical_influence.end() || it->second.empty())
                {
                    return nan_value;
                }
                const double weight = static_cast<double>(row.n_queries) / total;
                const double kappa = (row.plasticity_empirical - overall) / total;
                for (std::size_t e = 0; e < g; ++e)
                {
                    phi[e] += weight * it->second[e];
                }
                for (std::size_t r : m_query_rows.at(row.q_bucket))
                {
                    shift[sequence_index(m_sequences, m_q.unit_id[r])] += kappa;
                }
            }
            return sequence_standard_error(phi, &shift);
        }

        const head_options& m_options;
        const kept_tokens& m_q;
        const kept_tokens& m_k;
        const row_source<TQ>& m_q_rows;
        const row_source<TK>& m_k_rows;
        std::uint64_t m_pair_seed;
        std::map<std::int64_t, std::vector<std::size_t>> m_query_rows;
        std::vector<distance_bin_pair> m_bins;  // §8.1: every pair's bins, in the buckets' order
        std::vector<double> m_plasticity;
        std::vector<bucket_estimate> m_estimates;
        std::vector<double> m_empirical_variance;
        std::vector<std::int64_t> m_sequences;  // §8.3, sequence unit: the head's sequences
        std::map<std::int64_t, std::vector<double>> m_empirical_influence;  // per bucket, per sequence
        static constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
    };
}  // namespace detail
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_PIPELINE_HEAD_EXTENSIONS_HPP
