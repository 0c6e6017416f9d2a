#ifndef ATTENTION_PLASTICITY_PIPELINE_HPP
#define ATTENTION_PLASTICITY_PIPELINE_HPP

// The per-head pipeline of SPEC §2: orientation, subsampling, position regression, scalar
// predictability, Householder rotation, normality summaries, component weights, per-bucket
// query models, key-pair sampling and the batched plasticity kernel, and the aggregates.
// One call per head; it reads the caller's tensors and returns every number of SPEC §3.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

#include "detail/errors.hpp"
#include "detail/matrix.hpp"
#include "detail/random.hpp"
#include "normality.hpp"
#include "plasticity.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "rotation.hpp"
#include "sampler.hpp"

namespace attention_plasticity
{
/// The numbers of SPEC §2 that are parameters; defaults as the SPEC.
struct head_options
{
    std::size_t max_tokens_per_head = 50000;
    std::size_t normality_max_dims = 64;
    double p_alpha = 0.01;
    std::uint64_t seed = 0;
    std::size_t num_pairs_per_bucket = 256;
    double max_rel_dist = 0.05;
    double covariance_epsilon = default_covariance_epsilon;
};

/// Which head: the pair sampler is seeded with seed + 10007 layer + 379 q_head.
struct head_id
{
    std::int64_t layer = 0;
    std::int64_t q_head = 0;
    std::int64_t k_head = 0;
};

/// One kind (queries or keys) of one head: n vectors of dimension d and their columns.
/// example_id may be empty for queries (the pipeline does not use it).
template <class T>
struct head_tokens
{
    xt::xtensor<T, 2> vectors;
    xt::xtensor<std::int64_t, 1> position;
    xt::xtensor<std::int64_t, 1> bucket;
    xt::xtensor<std::int64_t, 1> example_id;
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
};

/// head_bucket_plasticity.csv, one row: the cell (query bucket j, key bucket c).
struct cell_plasticity
{
    std::int64_t q_bucket = 0;
    std::int64_t k_bucket = 0;
    double plasticity = 0.0;  // NaN when n_pairs == 0
    std::size_t n_pairs = 0;
};

/// head_profile.csv, one row: a query bucket with a query model.
struct bucket_profile
{
    std::int64_t q_bucket = 0;
    double tau = 0.0;
    std::size_t n_queries = 0;
    double plasticity = 0.0;  // AP_j, NaN when the bucket has no pairs
    std::size_t n_pairs = 0;
};

/// Wall time of each stage of analyze_head, in seconds (for profiling; optional).
struct stage_timings
{
    double preparation = 0.0;        // checks, orientation, subsampling, conversion
    double regression = 0.0;         // position regression and scalar predictability
    double rotation = 0.0;
    double normality = 0.0;          // first-component and noise-subspace summaries
    double bucket_statistics = 0.0;  // tau_j, mu_j, Sigma_j
    double sampling = 0.0;           // key grouping, pair sampling, key differences
    double kernel = 0.0;             // moments and plasticity of every pair
    double total = 0.0;
};

struct head_result
{
    head_id id;
    head_metrics metrics;
    std::vector<cell_plasticity> cells;
    std::vector<bucket_profile> profile;
    xt::xtensor<double, 1> component_r2;      // R2_d of SPEC §2.3, original (oriented) axes
    xt::xtensor<double, 1> component_weight;  // w_d of SPEC §2.9
};

namespace detail
{
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();

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

    /// The checks of one kind that do not read the vectors (shape, columns, positions).
    template <class T>
    void check_token_columns(const head_tokens<T>& tokens, const char* kind, bool need_example_id)
    {
        constexpr const char* fn = "analyze_head";
        if (tokens.vectors.dimension() != 2)
        {
            throw_invalid(fn, kind, " vectors must be 2-D");
        }
        const std::size_t n = tokens.vectors.shape()[0];
        if (tokens.position.size() != n || tokens.bucket.size() != n
            || (need_example_id && tokens.example_id.size() != n))
        {
            throw_invalid(fn, kind, " columns disagree: ", n, " vectors, ", tokens.position.size(), " positions, ",
                          tokens.bucket.size(), " buckets, ", tokens.example_id.size(), " example ids");
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            if (tokens.position(i) < 0)
            {
                throw_domain(fn, kind, " position[", i, "] = ", tokens.position(i), " is negative");
            }
        }
    }

    /// Throws the non-finite error for the first non-finite value of `row`.
    template <class T>
    [[noreturn]] void throw_non_finite_row(const T* row, std::size_t r, std::size_t d, const char* kind)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            if (!std::isfinite(static_cast<double>(row[j])))
            {
                throw_domain("analyze_head", kind, " vectors have a non-finite value (", static_cast<double>(row[j]),
                             ") at row ", r, ", column ", j);
            }
        }
        throw_domain("analyze_head", kind, " vectors have a non-finite value at row ", r);  // not reached
    }

    /// 0 when every value of the row is finite, NaN otherwise (x - x is +0 for finite x and
    /// NaN for +-inf and NaN); vectorizes, unlike a branch per value.
    template <class T>
    double row_finite_check(const T* row, std::size_t d) noexcept
    {
        double check = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            const double v = static_cast<double>(row[j]);
            check += v - v;
        }
        return check;
    }

    /// Every vector of one kind is finite (else the error of throw_non_finite_row).
    template <class T>
    void check_finite_vectors(const head_tokens<T>& tokens, const char* kind)
    {
        const std::size_t n = tokens.vectors.shape()[0];
        const std::size_t d = tokens.vectors.shape()[1];
        const T* data = tokens.vectors.data();
        for (std::size_t i = 0; i < n; ++i)
        {
            if (!(row_finite_check(data + i * d, d) == 0.0))
            {
                throw_non_finite_row(data + i * d, i, d, kind);
            }
        }
    }

    /// s_d = sign of the mean over key buckets of the per-bucket key mean (0 -> +1).
    /// Buckets get slots in order of first appearance; rows are summed in row order.
    /// When `first_bad_row` is given, the rows are also checked for non-finite values: the
    /// pass stops at the first such row, stores its index there and returns an empty vector.
    template <class T>
    std::vector<double> orientation_from_keys(const head_tokens<T>& keys, std::size_t* first_bad_row = nullptr)
    {
        const std::size_t n = keys.vectors.shape()[0];
        const std::size_t d = keys.vectors.shape()[1];
        std::map<std::int64_t, std::size_t> slot;
        std::vector<double> sums;
        std::vector<std::size_t> counts;
        std::int64_t last_bucket = 0;
        std::size_t s = 0;
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::int64_t bucket = keys.bucket(i);
            if (i == 0 || bucket != last_bucket)
            {
                s = slot.emplace(bucket, slot.size()).first->second;
                last_bucket = bucket;
                if (s == counts.size())
                {
                    counts.push_back(0);
                    sums.resize(counts.size() * d, 0.0);
                }
            }
            ++counts[s];
            const T* row = keys.vectors.data() + i * d;
            double* acc = sums.data() + s * d;
            double check = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                const double v = static_cast<double>(row[j]);
                acc[j] += v;
                check += v - v;
            }
            if (first_bad_row != nullptr && !(check == 0.0))
            {
                *first_bad_row = i;
                return {};
            }
        }
        std::vector<double> sign(d, 0.0);
        for (std::size_t k = 0; k < counts.size(); ++k)
        {
            for (std::size_t j = 0; j < d; ++j)
            {
                sign[j] += sums[k * d + j] / static_cast<double>(counts[k]);
            }
        }
        for (auto& value : sign)
        {
            value = value < 0.0 ? -1.0 : 1.0;
        }
        return sign;
    }

    /// Rows kept by subsampling: all of them, or `limit` chosen uniformly without
    /// replacement (partial Fisher-Yates), in their original order.
    inline std::vector<std::size_t> subsample_rows(std::size_t n, std::size_t limit, std::uint64_t seed)
    {
        std::vector<std::size_t> rows(n);
        std::iota(rows.begin(), rows.end(), std::size_t(0));
        if (n <= limit)
        {
            return rows;
        }
        rng generator(seed);
        for (std::size_t i = 0; i < limit; ++i)
        {
            const std::size_t j = i + static_cast<std::size_t>(generator.below(n - i));
            std::swap(rows[i], rows[j]);
        }
        rows.resize(limit);
        std::sort(rows.begin(), rows.end());
        return rows;
    }

    /// The working copy of one kind: kept rows, oriented, in double.
    struct oriented_tokens
    {
        xt::xtensor<double, 2> vectors;
        std::vector<double> position;
        std::vector<std::int64_t> bucket;
        std::vector<std::int64_t> example_id;
    };

    /// When `check_kind` is given, each kept row is also checked for non-finite values (the
    /// error of throw_non_finite_row for the first one).
    template <class T>
    oriented_tokens orient_and_select(const head_tokens<T>& tokens, const std::vector<std::size_t>& rows,
                                      const std::vector<double>& sign, bool with_example_id,
                                      const char* check_kind = nullptr, std::vector<double>* column_sums = nullptr,
                                      const householder* rotation = nullptr)
    {
        const double* rot_v = rotation != nullptr && !rotation->is_identity() ? rotation->v.data() : nullptr;
        const std::size_t d = sign.size();
        oriented_tokens out;
        if (column_sums != nullptr)
        {
            column_sums->assign(d, 0.0);
        }
        out.vectors = xt::xtensor<double, 2>::from_shape({rows.size(), d});
        out.position.resize(rows.size());
        out.bucket.resize(rows.size());
        if (with_example_id)
        {
            out.example_id.resize(rows.size());
        }
        for (std::size_t r = 0; r < rows.size(); ++r)
        {
            const std::size_t i = rows[r];
            const T* in = tokens.vectors.data() + i * d;
            double* dst = out.vectors.data() + r * d;
            double check = 0.0;
            if (column_sums != nullptr)
            {
                double* acc = column_sums->data();
                for (std::size_t j = 0; j < d; ++j)
                {
                    const double v = static_cast<double>(in[j]);
                    dst[j] = sign[j] * v;
                    acc[j] += dst[j];
                    check += v - v;
                }
            }
            else
            {
                for (std::size_t j = 0; j < d; ++j)
                {
                    const double v = static_cast<double>(in[j]);
                    dst[j] = sign[j] * v;
                    check += v - v;
                }
            }
            if (check_kind != nullptr && !(check == 0.0))
            {
                throw_non_finite_row(in, i, d, check_kind);
            }
            if (rot_v != nullptr)
            {
                // rotation->apply_inplace on this row, while it is in cache.
                double dot = 0.0;
                for (std::size_t j = 0; j < d; ++j)
                {
                    dot += dst[j] * rot_v[j];
                }
                const double scale = 2.0 * dot;
                for (std::size_t j = 0; j < d; ++j)
                {
                    dst[j] = dst[j] - scale * rot_v[j];
                }
            }
            out.position[r] = static_cast<double>(tokens.position(i));
            out.bucket[r] = tokens.bucket(i);
            if (with_example_id)
            {
                out.example_id[r] = tokens.example_id(i);
            }
        }
        return out;
    }

    inline matrix_view<double> view_of(const xt::xtensor<double, 2>& x)
    {
        matrix_view<double> v;
        v.data = x.data();
        v.rows = x.shape()[0];
        v.cols = x.shape()[1];
        v.ld = v.cols;
        return v;
    }

    /// scalar_predictability_raw(t, x, beta) and rotation.apply_inplace(x) in one pass over
    /// the rows of x: each row's projection on beta is taken before the row is rotated, with
    /// the same operations in the same order as the two separate passes (identical results).
    inline scalar_predictability project_then_rotate(const double* t, xt::xtensor<double, 2>& x, const double* beta,
                                                     const householder& rotation, const char* fn)
    {
        const std::size_t n = x.shape()[0];
        const std::size_t d = x.shape()[1];
        const std::vector<double> y = log2_positions(t, n, fn);
        const double norm2 = squared_norm(beta, d);
        if (!(norm2 > 0.0) || rotation.is_identity() || rotation.dimension != d)
        {
            const scalar_predictability result = scalar_predictability_raw(t, view_of(x), beta, fn);
            rotation.apply_inplace(x);
            return result;
        }
        const double inv_norm = 1.0 / std::sqrt(norm2);
        std::vector<double> s(n);
        const double* v = rotation.v.data();
        for (std::size_t i = 0; i < n; ++i)
        {
            double* row = x.data() + i * d;
            double dot = 0.0;
            double dot_v = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                dot += row[j] * beta[j];
                dot_v += row[j] * v[j];
            }
            s[i] = dot * inv_norm;
            const double scale = 2.0 * dot_v;
            for (std::size_t j = 0; j < d; ++j)
            {
                row[j] = row[j] - scale * v[j];
            }
        }
        return scalar_fit(y, &s);
    }

    /// The keys of one bucket, ready for sampling.
    struct key_bucket
    {
        std::int64_t bucket = 0;
        double max_position = 0.0;
        example_groups examples;
    };

    inline std::vector<key_bucket> key_buckets_of(const oriented_tokens& keys)
    {
        std::vector<key_bucket> result;
        std::vector<std::int64_t> positions(keys.position.begin(), keys.position.end());
        for (const auto& [bucket, rows] : rows_by_bucket(keys.bucket.data(), keys.bucket.size()))
        {
            key_bucket kb;
            kb.bucket = bucket;
            kb.max_position = -std::numeric_limits<double>::infinity();
            for (std::size_t r : rows)
            {
                kb.max_position = std::max(kb.max_position, keys.position[r]);
            }
            kb.examples = group_examples(rows, positions.data(), keys.example_id.data());
            result.push_back(std::move(kb));
        }
        return result;
    }

    /// Weighted mean of AP_j by n_j over the profile rows accepted by `keep`; NaN if none.
    template <class Keep>
    double weighted_plasticity(const std::vector<bucket_profile>& profile, Keep&& keep)
    {
        double numerator = 0.0;
        double denominator = 0.0;
        for (const auto& row : profile)
        {
            if (!std::isnan(row.plasticity) && keep(row))
            {
                numerator += static_cast<double>(row.n_queries) * row.plasticity;
                denominator += static_cast<double>(row.n_queries);
            }
        }
        return denominator > 0.0 ? numerator / denominator : nan;
    }
}  // namespace detail

/// Seed of the pair sampler of a head (SPEC §2.15).
inline std::uint64_t pair_sampler_seed(std::uint64_t seed, const head_id& id) noexcept
{
    return seed + 10007u * static_cast<std::uint64_t>(id.layer) + 379u * static_cast<std::uint64_t>(id.q_head);
}

/// Runs SPEC §2 on one head. `sliding_window` <= 0 means none. Throws
/// std::invalid_argument / std::domain_error on inconsistent or non-finite input.
/// When `timings` is given, the wall time of each stage is added to it.
template <class T>
head_result analyze_head(const head_tokens<T>& queries, const head_tokens<T>& keys, std::int64_t sliding_window,
                         const head_id& id, const head_options& options = {}, stage_timings* timings = nullptr)
{
    constexpr const char* fn = "analyze_head";
    detail::stage_clock clock(timings);
    // Shape, column and option errors first; non-finite vectors are found by the passes of
    // steps 1-2, which read every value anyway (queries reported before keys).
    detail::check_token_columns(queries, "query", false);
    detail::check_token_columns(keys, "key", true);
    const std::size_t d = queries.vectors.shape()[1];
    if (d == 0)
    {
        detail::throw_invalid(fn, "query vectors have d = 0");
    }
    if (keys.vectors.shape()[1] != d)
    {
        detail::throw_invalid(fn, "query vectors have d = ", d, " but key vectors have d = ", keys.vectors.shape()[1]);
    }
    if (queries.vectors.shape()[0] < 2)
    {
        detail::throw_invalid(fn, "needs at least 2 queries, got ", queries.vectors.shape()[0]);
    }
    if (keys.vectors.shape()[0] < 1)
    {
        detail::throw_invalid(fn, "needs at least 1 key, got 0");
    }
    if (options.max_tokens_per_head < 2)
    {
        detail::throw_invalid(fn, "max_tokens_per_head must be >= 2, got ", options.max_tokens_per_head);
    }
    if (!(options.p_alpha >= 0.0 && options.p_alpha <= 1.0))
    {
        detail::throw_invalid(fn, "p_alpha must be in [0, 1], got ", options.p_alpha);
    }
    detail::check_max_rel_dist(fn, options.max_rel_dist);

    head_result result;
    result.id = id;
    head_metrics& metrics = result.metrics;

    // 1-2. Orientation on all keys, then subsampling of each kind.
    // The key pass of the orientation also checks every key; the query conversion checks
    // the kept queries (all of them unless subsampled, else all are checked first).
    std::size_t bad_key_row = 0;
    const std::vector<double> sign = detail::orientation_from_keys(keys, &bad_key_row);
    if (sign.empty())
    {
        detail::check_finite_vectors(queries, "query");
        detail::throw_non_finite_row(keys.vectors.data() + bad_key_row * d, bad_key_row, d, "key");
    }
    const auto q_rows = detail::subsample_rows(queries.vectors.shape()[0], options.max_tokens_per_head,
                                               detail::mix_seed(options.seed, 'q'));
    const auto k_rows = detail::subsample_rows(keys.vectors.shape()[0], options.max_tokens_per_head,
                                               detail::mix_seed(options.seed, 'k'));
    if (q_rows.size() < queries.vectors.shape()[0])
    {
        detail::check_finite_vectors(queries, "query");
    }
    std::vector<double> q_column_sums;  // for the position regression (its first pass)
    detail::oriented_tokens q = detail::orient_and_select(queries, q_rows, sign, false, "query", &q_column_sums);
    const std::size_t nq = q_rows.size();
    metrics.n_q_tokens = nq;
    metrics.n_k_tokens = k_rows.size();
    metrics.d_model = d;
    clock.lap(&stage_timings::preparation);

    // 3-4. Position regression and scalar predictability in the oriented space.
    const linear_fit fit =
        detail::fit_linear_raw(q.position.data(), detail::view_of(q.vectors), fn, q_column_sums.data());
    metrics.q_R2_pos = fit.r2_mean;
    metrics.q_beta_norm = fit.beta_norm;
    // 5 (queries). The rotation of the queries shares the pass of the scalar projection.
    const householder rotation = householder_to_e1(fit.beta);
    const scalar_predictability scalar =
        detail::project_then_rotate(q.position.data(), q.vectors, fit.beta.data(), rotation, fn);
    metrics.q_R2_scalar = scalar.r2;
    metrics.q_mae_baseline = scalar.mae_baseline;
    metrics.q_mae_proj = scalar.mae_projection;
    metrics.q_mae_ratio = scalar.mae_ratio;
    clock.lap(&stage_timings::regression);

    // 5. Rotation of the keys (dot products preserved), fused into their conversion.
    detail::oriented_tokens k = detail::orient_and_select(keys, k_rows, sign, true, nullptr, nullptr, &rotation);
    clock.lap(&stage_timings::rotation);

    // 6-7. Component 0 on position in the rotated space, and its residual.
    detail::matrix_view<double> component0 = detail::view_of(q.vectors);
    component0.cols = 1;  // column 0 only, rows still d apart
    const linear_fit fit0 = detail::fit_linear_raw(q.position.data(), component0, fn);
    const double alpha0 = fit0.alpha(0);
    const double beta0 = fit0.beta(0);
    xt::xtensor<double, 1> residual0 = xt::xtensor<double, 1>::from_shape({nq});
    double residual_mean = 0.0;
    for (std::size_t i = 0; i < nq; ++i)
    {
        residual0(i) = q.vectors(i, 0) - (alpha0 + beta0 * q.position[i]);
        residual_mean += residual0(i);
    }
    residual_mean /= static_cast<double>(nq);
    double residual_ss = 0.0;
    for (std::size_t i = 0; i < nq; ++i)
    {
        residual_ss += (residual0(i) - residual_mean) * (residual0(i) - residual_mean);
    }
    const double sigma2 = residual_ss / static_cast<double>(nq - 1);
    const residual_normality_result first = standardized_normality(residual0);
    metrics.q_resid0_skew = first.skewness;
    metrics.q_resid0_kurt = first.excess_kurtosis;
    metrics.q_resid0_ks_p = first.ks_p_value;

    // 8. Noise subspace: components 1..d-1.
    const noise_normality_result noise =
        noise_normality(xt::view(q.vectors, xt::all(), xt::range(1, d)), options.normality_max_dims, options.p_alpha,
                        options.seed);
    metrics.q_noise_med_abs_skew = noise.median_abs_skewness;
    metrics.q_noise_med_abs_kurt = noise.median_abs_kurtosis;
    metrics.q_noise_med_ks_p = noise.median_ks_p_value;
    metrics.q_noise_frac_ks_p_lt_alpha = noise.fraction_ks_p_below_alpha;
    clock.lap(&stage_timings::normality);

    // 9. Component weights from the unrotated R2.
    result.component_r2 = fit.r2;
    result.component_weight = xt::xtensor<double, 1>::from_shape({d});
    double r2_positive_sum = 0.0;
    for (std::size_t j = 0; j < d; ++j)
    {
        r2_positive_sum += std::max(fit.r2(j), 0.0);
    }
    for (std::size_t j = 0; j < d; ++j)
    {
        result.component_weight(j) =
            r2_positive_sum > 0.0 ? std::max(fit.r2(j), 0.0) / r2_positive_sum : 1.0 / static_cast<double>(d);
    }

    // 10. Query models of buckets j > 0 with at least 2 queries.
    bucket_options bucket_opts;
    bucket_opts.epsilon = options.covariance_epsilon;
    const auto models =
        detail::bucket_statistics_raw(q.position.data(), q.bucket.data(), detail::view_of(q.vectors), bucket_opts);
    clock.lap(&stage_timings::bucket_statistics);

    // 11-13. Cells (j, c), their key pairs, and one kernel call per query bucket.
    const auto key_buckets = detail::key_buckets_of(k);
    clock.lap(&stage_timings::sampling);
    const std::uint64_t sampler_seed = pair_sampler_seed(options.seed, id);
    std::vector<double> differences;
    for (const auto& model : models)
    {
        const std::int64_t j = model.bucket;
        struct cell_span
        {
            std::int64_t bucket;
            std::size_t begin;
            std::size_t end;
        };
        std::vector<cell_span> spans;
        std::size_t total_pairs = 0;
        differences.clear();
        for (const auto& kb : key_buckets)
        {
            if (kb.bucket >= j)
            {
                break;
            }
            if (sliding_window > 0 && kb.bucket != j - 1
                && !(kb.max_position > model.tau - static_cast<double>(sliding_window)))
            {
                continue;
            }
            cell_span span{kb.bucket, total_pairs, total_pairs};
            if (options.num_pairs_per_bucket > 0 && kb.examples.can_form_pair())
            {
                rng generator(detail::mix_seed(sampler_seed, static_cast<std::uint64_t>(j),
                                               static_cast<std::uint64_t>(kb.bucket)));
                const key_pairs pairs =
                    sample_grouped_key_pairs(kb.examples, options.num_pairs_per_bucket, options.max_rel_dist, generator);
                differences.resize((total_pairs + pairs.size()) * d);
                for (std::size_t p = 0; p < pairs.size(); ++p)
                {
                    const double* a = k.vectors.data() + pairs.first(p) * d;
                    const double* b = k.vectors.data() + pairs.second(p) * d;
                    double* w = differences.data() + (total_pairs + p) * d;
                    for (std::size_t c = 0; c < d; ++c)
                    {
                        w[c] = a[c] - b[c];
                    }
                }
                total_pairs += pairs.size();
                span.end = total_pairs;
            }
            spans.push_back(span);
        }

        clock.lap(&stage_timings::sampling);

        bucket_profile row;
        row.q_bucket = j;
        row.tau = model.tau;
        row.n_queries = model.count;
        row.n_pairs = total_pairs;
        row.plasticity = detail::nan;
        if (total_pairs > 0)
        {
            const std::vector<std::size_t> shape{total_pairs, d};
            const auto w = xt::adapt(differences.data(), total_pairs * d, xt::no_ownership(), shape);
            const pair_moments moments = structured_pair_moments<double>(
                w, alpha0 + beta0 * model.tau, sigma2, model.semantic.mean, model.semantic.covariance);
            double bucket_sum = 0.0;
            for (const auto& span : spans)
            {
                double cell_sum = 0.0;
                for (std::size_t p = span.begin; p < span.end; ++p)
                {
                    cell_sum += pair_plasticity_from_moments(moments.mean(p), moments.variance(p));
                }
                bucket_sum += cell_sum;
                const std::size_t count = span.end - span.begin;
                result.cells.push_back(
                    {j, span.bucket, count ? cell_sum / static_cast<double>(count) : detail::nan, count});
            }
            row.plasticity = bucket_sum / static_cast<double>(total_pairs);
        }
        else
        {
            for (const auto& span : spans)
            {
                result.cells.push_back({j, span.bucket, detail::nan, 0});
            }
        }
        result.profile.push_back(row);
        clock.lap(&stage_timings::kernel);
    }

    // 14. Aggregates.
    const double max_position = *std::max_element(q.position.begin(), q.position.end());
    const double context = max_position + 1.0;
    metrics.ap_overall = detail::weighted_plasticity(result.profile, [](const bucket_profile&) { return true; });
    metrics.ap_first20 =
        detail::weighted_plasticity(result.profile, [&](const bucket_profile& r) { return r.tau < 0.2 * context; });
    metrics.ap_last20 =
        detail::weighted_plasticity(result.profile, [&](const bucket_profile& r) { return r.tau >= 0.8 * context; });
    metrics.ap_drop = metrics.ap_first20 - metrics.ap_last20;
    clock.lap(&stage_timings::kernel);
    return result;
}
}  // namespace attention_plasticity

#endif
