#ifndef ATTENTION_PLASTICITY_QUERY_MODEL_HPP
#define ATTENTION_PLASTICITY_QUERY_MODEL_HPP

// Gaussian query models estimated from samples: one Gaussian for a sample (mean, ddof=1
// covariance + eps I), the per-bucket statistics tau_j, n_j, mu_j, Sigma_j, and the query
// model of each query bucket (docs/method.md §2.10): the Gaussian with mean
// [alpha_rot_0 + beta_rot_0 tau_j, mu_j] and covariance blockdiag(sigma2, Sigma_j).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/parallel.hpp"
#include "detail/row_source.hpp"
#include "detail/rows.hpp"
#include "regression.hpp"

namespace attention_plasticity
{
/// Ridge added to every estimated covariance (docs/method.md §2.10).
constexpr double default_covariance_epsilon = 1e-12;

struct gaussian
{
    xt::xtensor<double, 1> mean;
    xt::xtensor<double, 2> covariance;
};

namespace detail
{
    /// A set of rows of a source: rows[0..count), or 0..count-1 when rows is null.
    struct row_set
    {
        const std::size_t* rows = nullptr;
        std::size_t count = 0;

        std::size_t operator[](std::size_t r) const noexcept { return rows != nullptr ? rows[r] : r; }
    };

    // Every set is cut into chunks of gaussian_chunk_rows rows, one task each: sums of a chunk
    // in row order, chunk sums added in chunk order; SYRK over blocks of gaussian_block_rows
    // centred rows. Fixed sizes: the results do not depend on the number of threads.
    constexpr std::size_t gaussian_chunk_rows = 8192;
    constexpr std::size_t gaussian_block_rows = 256;

    /// Mean and (ddof = 1) covariance + eps I of each set of rows of x (>= 2 rows each),
    /// columns [first_col, cols), on `threads` threads. No n x n matrix is formed: the centred
    /// rows go through SYRK in blocks (m x m), and only one block per thread is held.
    template <class T>
    std::vector<gaussian> gaussians_of_row_sets(const row_source<T>& x, const std::vector<row_set>& sets,
                                                std::size_t first_col, double epsilon, std::size_t threads)
    {
        const std::size_t m = x.cols - first_col;
        struct task
        {
            std::size_t set, begin, end;
        };
        std::vector<task> tasks;
        for (std::size_t g = 0; g < sets.size(); ++g)
        {
            const chunks pieces{sets[g].count, gaussian_chunk_rows};
            for (std::size_t c = 0; c < pieces.count(); ++c)
            {
                tasks.push_back({g, pieces.begin(c), pieces.end(c)});
            }
        }
        const std::size_t workers = std::min(worker_count(threads), std::max<std::size_t>(1, tasks.size()));
        std::vector<std::vector<double>> scratch(workers);
        // Means: the sum of each chunk, then the chunks of a set in order.
        std::vector<double> partial(tasks.size() * m, 0.0);
        parallel_for(tasks.size(), threads, [&](std::size_t k, std::size_t worker) {
            const task& job = tasks[k];
            std::vector<double>& row = scratch[worker];
            row.resize(m);
            double* sum = partial.data() + k * m;
            for (std::size_t r = job.begin; r < job.end; ++r)
            {
                if (r + 8 < job.end)
                {
                    x.prefetch(sets[job.set][r + 8]);  // a bucket's rows may be anywhere
                }
                x.load(sets[job.set][r], first_col, x.cols, row.data());
                for (std::size_t j = 0; j < m; ++j)
                {
                    sum[j] += row[j];
                }
            }
        });
        std::vector<gaussian> result(sets.size());
        for (std::size_t g = 0; g < sets.size(); ++g)
        {
            result[g] = gaussian{xt::zeros<double>({m}), xt::zeros<double>({m, m})};
        }
        for (std::size_t k = 0; k < tasks.size(); ++k)
        {
            double* mean = result[tasks[k].set].mean.data();
            const double* sum = partial.data() + k * m;
            for (std::size_t j = 0; j < m; ++j)
            {
                mean[j] += sum[j];
            }
        }
        for (std::size_t g = 0; g < sets.size(); ++g)
        {
            for (std::size_t j = 0; j < m; ++j)
            {
                result[g].mean(j) /= static_cast<double>(sets[g].count);
            }
        }
        // Covariances: each chunk's centred rows through SYRK into its own m x m sum (the set's
        // covariance itself when the set is one chunk).
        std::vector<std::size_t> slot(tasks.size(), 0);  // partial sum of task k, 1-based; 0: none
        std::size_t slots = 0;
        for (std::size_t k = 0; k < tasks.size(); ++k)
        {
            if (tasks[k].begin != 0 || tasks[k].end != sets[tasks[k].set].count)
            {
                slot[k] = ++slots;
            }
        }
        partial.assign(slots * m * m, 0.0);
        parallel_for(tasks.size(), threads, [&](std::size_t k, std::size_t worker) {
            const task& job = tasks[k];
            const double* mean = result[job.set].mean.data();
            const double alpha = 1.0 / static_cast<double>(sets[job.set].count - 1);
            std::vector<double>& block = scratch[worker];
            block.resize(gaussian_block_rows * m);
            double* sum = slot[k] != 0 ? partial.data() + (slot[k] - 1) * m * m : result[job.set].covariance.data();
            for (std::size_t b = job.begin; b < job.end; b += gaussian_block_rows)
            {
                const std::size_t rows = std::min(gaussian_block_rows, job.end - b);
                for (std::size_t r = 0; r < rows; ++r)
                {
                    double* out = block.data() + r * m;
                    if (b + r + 8 < job.end)
                    {
                        x.prefetch(sets[job.set][b + r + 8]);
                    }
                    x.load(sets[job.set][b + r], first_col, x.cols, out);
                    for (std::size_t j = 0; j < m; ++j)
                    {
                        out[j] -= mean[j];
                    }
                }
                syrk_ata<double>(m, rows, alpha, block.data(), m, b == job.begin ? 0.0 : 1.0, sum, m);
            }
        });
        for (std::size_t k = 0; k < tasks.size(); ++k)
        {
            if (slot[k] == 0)
            {
                continue;
            }
            double* c = result[tasks[k].set].covariance.data();
            const double* sum = partial.data() + (slot[k] - 1) * m * m;
            for (std::size_t i = 0; i < m; ++i)
            {
                for (std::size_t j = i; j < m; ++j)
                {
                    c[i * m + j] += sum[i * m + j];
                }
            }
        }
        for (auto& g : result)
        {
            for (std::size_t i = 0; i < m; ++i)
            {
                for (std::size_t j = 0; j < i; ++j)
                {
                    g.covariance(i, j) = g.covariance(j, i);
                }
                g.covariance(i, i) += epsilon;
            }
        }
        return result;
    }
}  // namespace detail

/// Gaussian of the rows of X (n x d): mean and ddof=1 covariance + epsilon I. n >= 2.
template <class E>
gaussian fit_gaussian(const xt::xexpression<E>& samples, double epsilon = default_covariance_epsilon)
{
    constexpr const char* fn = "fit_gaussian";
    auto x = detail::as_matrix<detail::float_or_double_t<E>>(samples, fn, "samples");
    if (x.rows < 2)
    {
        detail::throw_invalid(fn, "needs at least 2 samples for a ddof=1 covariance, got ", x.rows);
    }
    if (x.cols == 0)
    {
        detail::throw_invalid(fn, "samples have 0 columns (d = 0)");
    }
    if (!(epsilon >= 0.0) || detail::is_non_finite(epsilon))
    {
        detail::throw_invalid(fn, "epsilon must be finite and >= 0, got ", epsilon);
    }
    detail::require_finite(fn, "samples", x);
    std::vector<gaussian> g = detail::gaussians_of_row_sets(detail::rows_of(x), {detail::row_set{nullptr, x.rows}}, 0,
                                                            epsilon, 1);
    return std::move(g[0]);
}

/// Statistics of one query bucket (docs/method.md §2.10).
struct bucket_statistics
{
    std::int64_t bucket = 0;
    std::size_t count = 0;        // queries in the bucket
    double tau = 0.0;             // mean position
    gaussian semantic;            // of components [first_component, d)
    double tau_from_origin = 0.0; // tau minus the positions' origin (detail::bucket_statistics_raw; tau itself by default)
};

struct bucket_options
{
    std::int64_t min_bucket = 1;      // buckets below this are skipped (the method: j > 0)
    std::size_t min_count = 2;        // a ddof=1 covariance needs 2 samples
    std::size_t first_component = 1;  // component 0 is the positional one
    double epsilon = default_covariance_epsilon;
};

namespace detail
{
    /// Rows of each bucket id, in increasing bucket id.
    inline std::map<std::int64_t, std::vector<std::size_t>> rows_by_bucket(const std::int64_t* buckets, std::size_t n)
    {
        // Counted first, so that each list is allocated once; runs of equal ids share a lookup.
        std::map<std::int64_t, std::vector<std::size_t>> groups;
        std::map<std::int64_t, std::size_t> counts;
        auto count = counts.end();
        for (std::size_t i = 0; i < n; ++i)
        {
            if (count == counts.end() || count->first != buckets[i])
            {
                count = counts.emplace(buckets[i], 0).first;
            }
            ++count->second;
        }
        for (const auto& [bucket, size] : counts)
        {
            groups[bucket].reserve(size);
        }
        auto group = groups.end();
        for (std::size_t i = 0; i < n; ++i)
        {
            if (group == groups.end() || group->first != buckets[i])
            {
                group = groups.find(buckets[i]);
            }
            group->second.push_back(i);
        }
        return groups;
    }

    /// The rows of one selected bucket and their mean position.
    struct bucket_rows
    {
        std::int64_t bucket = 0;
        std::vector<std::size_t> rows;
        double tau = 0.0;
        double tau_from_origin = 0.0;  // the mean of position - origin
    };

    /// Buckets >= options.min_bucket with at least options.min_count rows, in increasing id,
    /// with tau = the mean of their positions: origin + the mean of position - origin (summed in
    /// row order), exact for large positions near the origin (docs/method.md §2.3, §2.10); with
    /// origin 0, the plain mean.
    inline std::vector<bucket_rows> selected_buckets(const double* positions, const std::int64_t* buckets,
                                                     std::size_t n, const bucket_options& options,
                                                     double origin = 0.0)
    {
        std::vector<bucket_rows> result;
        for (auto& [bucket, rows] : rows_by_bucket(buckets, n))
        {
            if (bucket < options.min_bucket || rows.size() < options.min_count)
            {
                continue;
            }
            double shift = 0.0;
            for (std::size_t r : rows)
            {
                shift += positions[r] - origin;
            }
            shift /= static_cast<double>(rows.size());
            result.push_back({bucket, std::move(rows), origin + shift, shift});
        }
        return result;
    }

    template <class T>
    std::vector<bucket_statistics> bucket_statistics_raw(const double* positions, const std::int64_t* buckets,
                                                         const row_source<T>& x, const bucket_options& options,
                                                         std::size_t threads = 1, double origin = 0.0)
    {
        const std::vector<bucket_rows> selected = selected_buckets(positions, buckets, x.rows, options, origin);
        std::vector<row_set> sets;
        for (const auto& b : selected)
        {
            sets.push_back({b.rows.data(), b.rows.size()});
        }
        std::vector<gaussian> gaussians =
            gaussians_of_row_sets(x, sets, options.first_component, options.epsilon, threads);
        std::vector<bucket_statistics> result;
        for (std::size_t g = 0; g < selected.size(); ++g)
        {
            bucket_statistics stats;
            stats.bucket = selected[g].bucket;
            stats.count = selected[g].rows.size();
            stats.tau = selected[g].tau;
            stats.tau_from_origin = selected[g].tau_from_origin;
            stats.semantic = std::move(gaussians[g]);
            result.push_back(std::move(stats));
        }
        return result;
    }
}  // namespace detail

/// Per-bucket tau_j, mu_j, Sigma_j (ddof=1, + eps I) of the components from
/// options.first_component on, for buckets >= options.min_bucket with at least
/// options.min_count rows, in increasing bucket id.
template <class EP, class EB, class EX>
std::vector<bucket_statistics> compute_bucket_statistics(const xt::xexpression<EP>& positions,
                                                         const xt::xexpression<EB>& buckets,
                                                         const xt::xexpression<EX>& x,
                                                         const bucket_options& options = {})
{
    constexpr const char* fn = "compute_bucket_statistics";
    auto p = detail::as_vector<double>(positions, fn, "positions");
    auto b = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    auto xm = detail::as_matrix<detail::float_or_double_t<EX>>(x, fn, "X");
    if (p.size != xm.rows || b.size != xm.rows)
    {
        detail::throw_invalid(fn, "positions (", p.size, ") and buckets (", b.size, ") must match the rows of X (",
                              xm.rows, ")");
    }
    if (options.first_component > xm.cols)
    {
        detail::throw_invalid(fn, "first_component = ", options.first_component, " exceeds d = ", xm.cols);
    }
    if (options.min_count < 2)
    {
        detail::throw_invalid(fn, "min_count must be >= 2 for a ddof=1 covariance, got ", options.min_count);
    }
    detail::require_finite(fn, "positions", p);
    detail::require_finite(fn, "X", xm);
    return detail::bucket_statistics_raw(p.data, b.data, detail::rows_of(xm), options);
}

/// A query bucket that gets a query model (docs/method.md §2.10): j > 0 with at least 2
/// queries; n_queries = n_j, tau = tau_j (the mean position of its queries).
struct query_bucket
{
    std::int64_t bucket = 0;
    std::size_t n_queries = 0;
    double tau = 0.0;
};

/// The query buckets that get a model (docs/method.md §2.10), in increasing id, from the
/// queries' positions and bucket ids.
template <class EP, class EB>
std::vector<query_bucket> query_buckets(const xt::xexpression<EP>& positions, const xt::xexpression<EB>& buckets)
{
    constexpr const char* fn = "query_buckets";
    auto p = detail::as_vector<double>(positions, fn, "positions");
    auto b = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    if (p.size != b.size)
    {
        detail::throw_invalid(fn, "positions has ", p.size, " entries but buckets has ", b.size);
    }
    detail::require_finite(fn, "positions", p);
    std::vector<query_bucket> result;
    for (const auto& selected : detail::selected_buckets(p.data, b.data, p.size, bucket_options{}))
    {
        result.push_back({selected.bucket, selected.rows.size(), selected.tau});
    }
    return result;
}

/// The query model of one query bucket (docs/method.md §2.10), in the rotated basis: the
/// Gaussian with mean [position_mean, semantic.mean] and covariance
/// blockdiag(position_variance, semantic.covariance).
struct bucket_query_model
{
    std::int64_t bucket = 0;
    std::size_t n_queries = 0;       // n_j
    double tau = 0.0;                // tau_j
    double position_mean = 0.0;      // alpha_rot_0 + beta_rot_0 tau_j
    double position_variance = 0.0;  // sigma2
    gaussian semantic;               // mu_j and Sigma_j (ddof = 1, + eps I) of components 1..d-1
    // The head's positions are taken from t_origin, the smallest kept query position (docs/method.md
    // §2.3); tau_shift = the mean of t - t_origin over the bucket, exact where tau_j, near 2^52,
    // is rounded to a whole token. Both 0 in a model set by hand: then tau is used.
    double t_origin = 0.0;
    double tau_shift = 0.0;

    /// tau_j - t_origin, for the rules that compare tau_j with positions (§2.11, §8.1).
    double tau_from_origin() const noexcept { return t_origin == 0.0 ? tau : tau_shift; }
};

/// The d-dimensional Gaussian of a query model: mean [position_mean, mu_j], covariance
/// blockdiag(position_variance, Sigma_j).
inline gaussian full_gaussian(const bucket_query_model& model)
{
    const std::size_t m = model.semantic.mean.size();
    gaussian g{xt::zeros<double>({m + 1}), xt::zeros<double>({m + 1, m + 1})};
    g.mean(0) = model.position_mean;
    g.covariance(0, 0) = model.position_variance;
    for (std::size_t i = 0; i < m; ++i)
    {
        g.mean(i + 1) = model.semantic.mean(i);
        for (std::size_t j = 0; j < m; ++j)
        {
            g.covariance(i + 1, j + 1) = model.semantic.covariance(i, j);
        }
    }
    return g;
}

namespace detail
{
    template <class T>
    std::vector<bucket_query_model> bucket_query_models_raw(const double* positions, const std::int64_t* buckets,
                                                            const row_source<T>& x_rot,
                                                            const position_component_fit& component0,
                                                            double covariance_epsilon, std::size_t threads = 1)
    {
        bucket_options options;
        options.epsilon = covariance_epsilon;
        std::vector<bucket_query_model> models;
        // tau_j and the line about the positions' origin of §2.6 (docs/method.md §2.3): the same
        // numbers with t_origin 0, and exact ones for positions far from 0.
        const double at_origin = component0.t_origin == 0.0 ? component0.alpha : component0.alpha_origin;
        for (auto& stats : bucket_statistics_raw(positions, buckets, x_rot, options, threads, component0.t_origin))
        {
            bucket_query_model model;
            model.bucket = stats.bucket;
            model.n_queries = stats.count;
            model.tau = stats.tau;
            model.position_mean = at_origin + component0.beta * stats.tau_from_origin;
            model.t_origin = component0.t_origin;
            model.tau_shift = stats.tau_from_origin;
            model.position_variance = component0.residual_variance;
            model.semantic = std::move(stats.semantic);
            models.push_back(std::move(model));
        }
        return models;
    }
}  // namespace detail

/// The query models of a head (docs/method.md §2.10), one per query bucket j > 0 with at least
/// 2 queries, in increasing j: from the rotated queries X_rot (n x d, d >= 1), their positions
/// and bucket ids, and the fit of the positional component (§2.6). `threads` share the buckets'
/// covariances (0 or 1: the calling thread only); any number gives the same bits.
template <class EP, class EB, class EX>
std::vector<bucket_query_model> bucket_query_models(const xt::xexpression<EP>& positions,
                                                    const xt::xexpression<EB>& buckets,
                                                    const xt::xexpression<EX>& x_rot,
                                                    const position_component_fit& component0,
                                                    double covariance_epsilon = default_covariance_epsilon,
                                                    std::size_t threads = 1)
{
    constexpr const char* fn = "bucket_query_models";
    auto p = detail::as_vector<double>(positions, fn, "positions");
    auto b = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    auto xm = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "X_rot");
    if (p.size != xm.rows || b.size != xm.rows)
    {
        detail::throw_invalid(fn, "positions (", p.size, ") and buckets (", b.size,
                              ") must match the rows of X_rot (", xm.rows, ")");
    }
    if (xm.cols == 0)
    {
        detail::throw_invalid(fn, "X_rot has 0 columns (d = 0)");
    }
    if (!(covariance_epsilon >= 0.0) || detail::is_non_finite(covariance_epsilon))
    {
        detail::throw_invalid(fn, "covariance_epsilon must be finite and >= 0, got ", covariance_epsilon);
    }
    if (detail::is_non_finite(component0.alpha) || detail::is_non_finite(component0.beta)
        || detail::is_non_finite(component0.residual_variance))
    {
        detail::throw_domain(fn, "component0 must be finite, got alpha ", component0.alpha, ", beta ",
                             component0.beta, ", residual_variance ", component0.residual_variance);
    }
    detail::require_finite(fn, "positions", p);
    detail::require_finite(fn, "X_rot", xm);
    return detail::bucket_query_models_raw(p.data, b.data, detail::rows_of(xm), component0, covariance_epsilon,
                                           threads);
}
}  // namespace attention_plasticity

#endif
