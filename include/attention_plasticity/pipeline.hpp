#ifndef ATTENTION_PLASTICITY_PIPELINE_HPP
#define ATTENTION_PLASTICITY_PIPELINE_HPP

// The per-head pipeline (docs/method.md §2): one call per head that composes the public
// steps (orientation and subsampling, the position model, normality summaries, component
// weights, query models, cells and aggregates) over views of the caller's buffers and
// returns every number of docs/method.md §3 (head_result.hpp: the options and the result).
// The steps are in their own headers, the joints between them in head_steps.hpp (which
// examples/compose_head.cpp composes the same way, on copies), the extensions of §8 in
// pipeline/head_extensions.hpp; what is here is the composition. No working copy of the
// queries or keys is made: the steps read the caller's rows through a row source that keeps,
// orients and reflects them as they are read (detail/row_source.hpp, kept_tokens.hpp),
// so a head needs little memory beyond its own data, and with options.threads > 1 the steps
// share their work among threads with identical results.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include "aggregates.hpp"
#include "cells.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/parallel.hpp"
#include "detail/row_projections.hpp"
#include "detail/row_source.hpp"
#include "detail/rows.hpp"
#include "detail/stream_store.hpp"
#include "distance_maps.hpp"
#include "empirical.hpp"
#include "head_result.hpp"
#include "head_steps.hpp"
#include "intervals.hpp"
#include "kept_tokens.hpp"
#include "normality.hpp"
#include "pca_roles.hpp"
#include "pipeline/head_extensions.hpp"
#include "planar_rotation.hpp"
#include "preparation.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "rotation.hpp"
#include "sampler.hpp"
#include "seeds.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// Adds the time since the last call to a stage of stage_timings (when requested).
    class stage_clock
    {
    public:
        explicit stage_clock(stage_timings* timings) : m_timings(timings), m_start(now()), m_last(m_start) {}

        void lap(double stage_timings::*stage)
        {
            if (m_timings != nullptr)
            {
                const auto t = now();
                m_timings->*stage += std::chrono::duration<double>(t - m_last).count();
                m_timings->total = std::chrono::duration<double>(t - m_start).count();
                m_last = t;
            }
        }

    private:
        static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }

        stage_timings* m_timings;
        std::chrono::steady_clock::time_point m_start;
        std::chrono::steady_clock::time_point m_last;
    };

    /// The checks of one kind that do not read the vectors (columns, positions). `kind` is
    /// the argument's name, "queries" or "keys".
    template <class T>
    void check_token_columns(const tokens_view<T>& tokens, const char* kind, bool need_example_id)
    {
        constexpr const char* fn = "analyze_head";
        const std::size_t n = tokens.vectors.shape()[0];
        const std::size_t d = tokens.vectors.shape()[1];
        if (need_example_id && tokens.example_id.size() == 0 && n > 0)
        {
            throw_invalid(fn, kind, " need an example_id column (one id per key: key pairs are drawn within an "
                                    "example, docs/method.md §2.12); got none");
        }
        if (tokens.position.size() != n || tokens.bucket.size() != n
            || ((need_example_id || tokens.example_id.size() != 0) && tokens.example_id.size() != n))
        {
            // The vectors are [n, d], one row per token; [d, n] is the usual slip.
            const bool transposed = d == tokens.position.size() && d != n;
            const bool ids = need_example_id || tokens.example_id.size() != 0;
            throw_invalid(fn, kind, " columns disagree: vectors is [", n, ", ", d,
                          "] (expected [n, d], one row per token) but there are ", tokens.position.size(),
                          " positions", ids ? ", " : " and ", tokens.bucket.size(), " buckets",
                          ids ? " and " + std::to_string(tokens.example_id.size()) + " example ids" : std::string(),
                          transposed ? "; the vectors look transposed: pass them as [n, d] (e.g. vectors.T)" : "");
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            if (tokens.position(i) < 0)
            {
                throw_domain(fn, kind, ".position[", i, "] = ", tokens.position(i), " is negative");
            }
        }
    }

    /// Shapes, columns and options: every check of analyze_head that does not read a vector.
    template <class TQ, class TK>
    void check_head_input(const tokens_view<TQ>& queries, const tokens_view<TK>& keys, const head_options& options)
    {
        constexpr const char* fn = "analyze_head";
        check_token_columns(queries, "queries", false);
        check_token_columns(keys, "keys", true);
        const std::size_t d = queries.vectors.shape()[1];
        if (d == 0)
        {
            throw_invalid(fn, "queries.vectors has d = 0 columns");
        }
        if (keys.vectors.shape()[1] != d)
        {
            throw_invalid(fn, "queries.vectors has d = ", d, " columns but keys.vectors has d = ",
                          keys.vectors.shape()[1]);
        }
        if (queries.vectors.shape()[0] < 2)
        {
            throw_invalid(fn, "needs at least 2 queries, got ", queries.vectors.shape()[0]);
        }
        if (keys.vectors.shape()[0] < 1)
        {
            throw_invalid(fn, "needs at least 1 key, got 0");
        }
        if (options.max_tokens_per_head < 2)
        {
            throw_invalid(fn, "options.max_tokens_per_head must be >= 2, got ", options.max_tokens_per_head);
        }
        if (!(options.p_alpha >= 0.0 && options.p_alpha <= 1.0))
        {
            throw_invalid(fn, "options.p_alpha must be in [0, 1], got ", options.p_alpha);
        }
        if (!(options.covariance_epsilon >= 0.0) || is_non_finite(options.covariance_epsilon))
        {
            throw_invalid(fn, "options.covariance_epsilon must be finite and >= 0, got ", options.covariance_epsilon);
        }
        check_max_rel_dist(fn, options.max_rel_dist);
        if (options.max_rel_dist > 1.0)
        {
            throw_invalid(fn, "options.max_rel_dist must be in [0, 1] (a fraction of the example length), got ",
                          options.max_rel_dist);
        }
        if (options.num_pairs_per_bucket < 1)
        {
            throw_invalid(fn, "options.num_pairs_per_bucket must be >= 1, got 0");
        }
        if (options.distance_bins_per_octave < 1 || options.distance_bins_per_octave > max_bins_per_octave)
        {
            throw_invalid(fn, "options.distance_bins_per_octave must be in [1, ", max_bins_per_octave, "], got ",
                          options.distance_bins_per_octave);
        }
        if (!(options.confidence_level > 0.0 && options.confidence_level < 1.0))
        {
            throw_invalid(fn, "options.confidence_level must be in (0, 1), got ", options.confidence_level);
        }
    }

    /// §2.1 from all keys; a non-finite key is reported after the queries are checked
    /// (queries first, as everywhere in analyze_head).
    template <class TQ, class TK>
    std::vector<double> head_orientation(const tokens_view<TQ>& queries, const tokens_view<TK>& keys,
                                         std::size_t threads)
    {
        std::size_t bad_row = 0;
        std::vector<double> signs = orientation_signs_raw(matrix_of(keys), keys.bucket.data(), &bad_row, threads);
        if (signs.empty())
        {
            check_finite_rows(queries, "queries.vectors");
            const matrix_view<TK> k = matrix_of(keys);
            throw_non_finite_row("analyze_head", "keys.vectors", k.row(bad_row), bad_row, k.cols);
        }
        return signs;
    }

    /// §2.4-2.5 on the queries: the scalar predictability, whose pass over the rows also gives
    /// each row's reflection factor and the rotated component 0 (column 0 of X_rot, for §2.6).
    struct query_rotation
    {
        scalar_predictability scalar;
        std::vector<double> factors;     // 2 (s x_i) . v per kept query (empty for H = I)
        std::vector<double> component0;  // x_rot(i, 0)
    };

    template <class T>
    query_rotation rotate_queries(const double* t, const row_source<T>& rows, const linear_fit& fit,
                                  const householder& rotation, std::size_t threads)
    {
        query_rotation r;
        const double* v = rotation.is_identity() ? nullptr : rotation.v.data();
        r.factors.resize(v != nullptr ? rows.rows : 0);
        r.component0.resize(rows.rows);
        r.scalar = scalar_predictability_raw(t, rows, fit.beta.data(), "analyze_head", threads, v,
                                             v != nullptr ? r.factors.data() : nullptr, r.component0.data());
        return r;
    }

    /// §2.8 on columns 1..d-1 of the rotated queries, read from the caller's rows in blocks.
    template <class T>
    noise_normality_result noise_normality_of_rows(const row_source<T>& x_rot, const head_options& options,
                                                   std::uint64_t seed)
    {
        const std::size_t n = x_rot.rows;
        const std::size_t m = x_rot.cols - 1;
        const std::vector<char> tested = ks_tested_columns(m, options.normality_max_dims, seed);
        return noise_normality_blocked(
            n, m, tested, options.p_alpha, options.threads,
            [&](std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1, double* out, std::size_t ld) {
                // Tiles of 8 rows, laid out by column: each column receives whole cache lines.
                constexpr std::size_t tile = 8;
                const std::size_t w = j1 - j0;
                std::vector<double> row(w);
                std::vector<double> values(tile * w);
                for (std::size_t t0 = i0; t0 < i1; t0 += tile)
                {
                    const std::size_t rows = std::min(tile, i1 - t0);
#ifdef AP_SIMD_DISPATCH
                    // Float rows, whole tiles: straight from the caller's values (the same bits).
                    if constexpr (std::is_same<T, float>::value)
                    {
                        if (rows == tile && (x_rot.reflection == nullptr || x_rot.reflection_factors != nullptr)
                            && cpu_has_avx2())
                        {
                            const float* in[tile];
                            for (std::size_t r = 0; r < tile; ++r)
                            {
                                if (t0 + r + 16 < i1)
                                {
                                    x_rot.prefetch(t0 + r + 16);
                                }
                                in[r] = x_rot.raw(t0 + r);
                            }
                            float_rows8_columns(in, 1 + j0, 1 + j1, x_rot.sign, x_rot.reflection,
                                                x_rot.reflection != nullptr ? x_rot.reflection_factors + t0 : nullptr,
                                                out + t0, ld);
                            continue;
                        }
                    }
#endif
                    for (std::size_t r = 0; r < rows; ++r)
                    {
                        if (t0 + r + 16 < i1)
                        {
                            x_rot.prefetch(t0 + r + 16);
                        }
                        x_rot.load(t0 + r, 1 + j0, 1 + j1, row.data());
                        for (std::size_t j = 0; j < w; ++j)
                        {
                            values[j * tile + r] = row[j];
                        }
                    }
                    for (std::size_t j = 0; j < w; ++j)
                    {
                        double* dst = out + j * ld + t0;
                        if (rows == tile)
                        {
                            store_line(dst, values.data() + j * tile);
                        }
                        else
                        {
                            std::copy(values.data() + j * tile, values.data() + j * tile + rows, dst);
                        }
                    }
                }
                stores_done();
            });
    }

    /// §2.11-2.12 for every query model: the cells of its eligible key buckets with their pairs.
    inline std::vector<std::vector<cell_pairs>> model_cells(const std::vector<bucket_query_model>& models,
                                                            const std::vector<key_bucket>& key_buckets,
                                                            const head_options& options, std::uint64_t pair_seed)
    {
        std::vector<std::vector<cell_pairs>> cells(models.size());
        parallel_for(models.size(), options.threads, [&](std::size_t j, std::size_t) {
            cells[j] = query_bucket_cells(key_buckets, models[j], options, pair_seed);
        });
        return cells;
    }

    /// The query models by decreasing number of pairs (ties in order): the order to hand
    /// them to threads in, so that the largest do not come last.
    inline std::vector<std::size_t> largest_first(const std::vector<std::vector<cell_pairs>>& cells)
    {
        std::vector<std::size_t> pairs(cells.size()), order(cells.size());
        for (std::size_t j = 0; j < cells.size(); ++j)
        {
            order[j] = j;
            pairs[j] = total_pairs(cells[j]);
        }
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return pairs[a] > pairs[b]; });
        return order;
    }

    /// §2.6 on column 0 of the rotated queries (one value per kept query).
    inline position_component_fit position_component_of(const double* t, const std::vector<double>& component0,
                                                        const char* fn)
    {
        matrix_view<double> column;
        column.data = component0.data();
        column.rows = component0.size();
        column.cols = column.ld = 1;
        return fit_position_component_raw(t, column, fn);
    }

    /// The head_metrics.csv columns of §8.5 that the options ask for.
    inline void add_companion_measures(const qk_moments& moments, const head_options& options, head_metrics& m)
    {
        if (options.planar_rotation)
        {
            const planar_rotation_result plane = planar_rotation_of_moments(moments);
            m.bias_strength = plane.bias_strength;
            m.drift_slope_k = plane.drift_slope_k;
            m.drift_query_mean = plane.drift_query_mean;
        }
        if (options.pca_roles)
        {
            const pca_roles_result pca = pca_roles_of_moments(moments);
            m.pc0_r_q = pca.r_q;
            m.pc0_r_k = pca.r_k;
            m.pca_class = pca.role;
        }
    }
}  // namespace detail

/// Runs docs/method.md §2 on one head: the queries and keys (views of the caller's buffers,
/// float or double each), which head it is (for the seeds, §2.15) and the options (with the
/// head's sliding window). Throws std::invalid_argument on inconsistent shapes or options and
/// std::domain_error on non-finite vectors or negative positions, naming the first one in the
/// caller's rows (queries before keys). When `timings` is given, each stage's wall time is
/// added to it.
template <class TQ, class TK>
head_result analyze_head(const tokens_view<TQ>& queries, const tokens_view<TK>& keys, const head_id& id,
                         const head_options& options = {}, stage_timings* timings = nullptr)
{
    constexpr const char* fn = "analyze_head";
    detail::stage_clock clock(timings);
    detail::check_head_input(queries, keys, options);
    const std::size_t threads = options.threads;
    const detail::single_threaded_blas_scope blas(detail::worker_count(threads) > 1);
    const head_seeds seeds = seeds_of_head(options.seed, id);
    // §2.1-2.2: signs from all keys (which are checked on the way), the kept rows.
    const std::vector<double> signs = detail::head_orientation(queries, keys, threads);
    const std::size_t max_rows = options.max_tokens_per_head;
    // The keys' positions as double only for §8.5.
    const bool companion = options.planar_rotation || options.pca_roles;
    // The queries' example ids when they have them: the sequences of the errors of §8.3.
    const bool query_ids = queries.example_id.size() != 0;
    auto q = detail::kept_tokens_of(queries, max_rows, seeds.query_subsample, "queries.vectors", true, query_ids);
    auto k = detail::kept_tokens_of(keys, max_rows, seeds.key_subsample, nullptr, companion, true);
    // §8.3: the sampling unit of each kept row, its document (the example without a table).
    detail::assign_units(q, options.documents.get());
    detail::assign_units(k, options.documents.get());
    detail::row_source<TQ> q_rows = detail::oriented_rows(queries, q, signs);
    detail::row_source<TK> k_rows = detail::oriented_rows(keys, k, signs);
    clock.lap(&stage_timings::preparation);
    // §2.3-2.5: the regression (its first pass checks the kept queries), the rotation, the
    // scalar predictability with each query's reflection factor.
    const linear_fit fit = detail::fit_linear_raw(q.t.data(), q_rows, fn, threads, "queries.vectors");
    const householder rotation = householder_to_e1(fit.beta);
    clock.lap(&stage_timings::regression);
    // The extensions of §8 (per bucket beside the kernel, then the head's results); their
    // sequences of §8.3 are formed here, once.
    detail::head_extensions<TQ, TK> extensions(options, q, k, q_rows, k_rows, seeds.pair_sampler);
    // §8.5 on the kept, oriented rows (the measures are invariant under the orientation), and
    // §8.3 of bias_strength: the delete-one-document jackknife (sequence-level errors only), on
    // the oriented rows before the rotation. On one or two threads the jackknife's sums by
    // sequence come with the moments' first read of each row (one task per kind); on more,
    // it runs beside the kernel (below), as one more task.
    const bool sequence_errors = options.confidence_intervals && options.sampling_unit == sampling_unit::sequence
                                 && q.example_id != nullptr;
    const bool jackknife = sequence_errors && options.planar_rotation;
    const bool jackknife_with_moments = jackknife && detail::worker_count(threads) <= 2;
    const detail::row_source<TQ> q_oriented = q_rows;
    const detail::row_source<TK> k_oriented = k_rows;
    double bias_strength_se = std::numeric_limits<double>::quiet_NaN();
    detail::qk_moments moments;
    if (jackknife_with_moments)
    {
        detail::moments_and_jackknife both = detail::qk_moments_with_jackknife(
            q_rows, q.t.data(), q.unit_id, k_rows, k.t.data(), k.unit_id, extensions.sequences(),
            uncertainty_design{}.min_sequences, threads, options.pca_roles);
        moments = std::move(both.moments);
        bias_strength_se = both.bias_strength_se;
    }
    else if (companion)
    {
        moments = detail::qk_moments_of(q_rows, q.t.data(), k_rows, k.t.data(), threads, options.pca_roles);
    }
    clock.lap(&stage_timings::extensions);
    const detail::query_rotation rotated = detail::rotate_queries(q.t.data(), q_rows, fit, rotation, threads);
    q_rows.reflection = k_rows.reflection = rotation.is_identity() ? nullptr : rotation.v.data();
    q_rows.reflection_factors = rotated.factors.empty() ? nullptr : rotated.factors.data();
    clock.lap(&stage_timings::rotation);
    // §2.6-2.8: the positional component and the normality summaries.
    const position_component_fit component0 = detail::position_component_of(q.t.data(), rotated.component0, fn);
    const residual_normality_result first = standardized_normality(component0.residual);
    const noise_normality_result noise = detail::noise_normality_of_rows(q_rows, options, seeds.noise_components);
    clock.lap(&stage_timings::normality);
    // §2.9-2.10: component weights, query models.
    head_result result;
    result.id = id;
    result.component_r2 = fit.r2;
    result.component_weight = component_weights(fit.r2);
    const std::vector<bucket_query_model> models = detail::bucket_query_models_raw(
        q.t.data(), q.bucket, q_rows, component0, options.covariance_epsilon, threads);
    clock.lap(&stage_timings::bucket_statistics);
    // §2.11-2.12: per query bucket, the eligible cells and their pairs.
    const std::vector<key_bucket> key_buckets =
        detail::group_key_buckets_raw(k.position, k.bucket, k.example_id, k.n);
    const auto cells = detail::model_cells(models, key_buckets, options, seeds.pair_sampler);
    clock.lap(&stage_timings::sampling);
    // §2.13: one kernel call per query bucket, over the pairs' keys as they are read, each
    // followed by what the bucket's pairs give the extensions of §8 (prepare_bucket); on more
    // than two threads the jackknife of bias_strength is one more task, the first (the
    // largest). Each task writes only its own result: the same results for any number of
    // threads.
    using bucket_work = typename detail::head_extensions<TQ, TK>::bucket_work;
    std::vector<bucket_plasticity_result> buckets(models.size());
    std::vector<bucket_work> works(models.size());
    const bool prepare_here = extensions.prepares_in_parallel();
    const std::vector<std::size_t> order = detail::largest_first(cells);  // threads finish together
    const std::size_t extra_tasks = jackknife && !jackknife_with_moments ? 1 : 0;
    detail::parallel_for(extra_tasks + models.size(), threads, [&](std::size_t task, std::size_t) {
        if (task < extra_tasks)
        {
            bias_strength_se =
                detail::bias_strength_jackknife_raw(q_oriented, q.t.data(), q.unit_id, k_oriented, k.t.data(),
                                                    k.unit_id, extensions.sequences(), uncertainty_design{}.min_sequences);
            return;
        }
        const std::size_t j = order[task - extra_tasks];
        buckets[j] = detail::query_bucket_plasticity_raw(k_rows, cells[j], models[j]);
        if (prepare_here)
        {
            works[j] = extensions.prepare_bucket(models[j], key_buckets, cells[j], buckets[j]);
        }
    });
    clock.lap(&stage_timings::kernel);
    // The rows of the buckets in order, each followed by what the extensions of
    // docs/method.md §8 add to it (they never change the rows of §2).
    for (std::size_t j = 0; j < models.size(); ++j)
    {
        result.cells.insert(result.cells.end(), buckets[j].cells.begin(), buckets[j].cells.end());
        result.profile.push_back(profile_row(models[j], buckets[j], options.min_bucket_queries));
        extensions.add_bucket(models[j], cells[j], buckets[j],
                              prepare_here ? std::move(works[j])
                                           : extensions.prepare_bucket(models[j], key_buckets, cells[j], buckets[j]),
                              result);
    }
    clock.lap(&stage_timings::extensions);
    // §2.14 and the metrics row.
    const double context_length = *std::max_element(q.t.begin(), q.t.end()) + 1.0;  // C of §2.14
    const plasticity_aggregates_result aggregates = plasticity_aggregates(result.profile, context_length);
    result.metrics = make_head_metrics({q.n, k.n}, fit, rotated.scalar, first, noise, aggregates);
    detail::add_companion_measures(moments, options, result.metrics);
    if (!std::isnan(result.metrics.bias_strength))
    {
        result.metrics.bias_strength_se = bias_strength_se;
    }
    clock.lap(&stage_timings::kernel);
    extensions.finish(models, component0, fit.beta_norm, context_length, result);
    clock.lap(&stage_timings::extensions);
    return result;
}

/// analyze_head on head_tokens (viewed, not copied).
template <class TQ, class TK>
head_result analyze_head(const head_tokens<TQ>& queries, const head_tokens<TK>& keys, const head_id& id,
                         const head_options& options = {}, stage_timings* timings = nullptr)
{
    return analyze_head(as_view(queries), as_view(keys), id, options, timings);
}
}  // namespace attention_plasticity

#endif
