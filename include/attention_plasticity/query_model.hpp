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
    /// Mean and (ddof = 1) covariance + eps I of the given rows of x, columns [first_col, cols).
    /// scratch receives the centred rows; no n x n matrix is formed (one SYRK, m x m).
    template <class T>
    gaussian gaussian_of_rows(const matrix_view<T>& x, const std::size_t* rows, std::size_t count,
                              std::size_t first_col, double epsilon, std::vector<double>& scratch)
    {
        const std::size_t m = x.cols - first_col;
        gaussian g{xt::zeros<double>({m}), xt::zeros<double>({m, m})};
        for (std::size_t r = 0; r < count; ++r)
        {
            const T* row = x.row(rows ? rows[r] : r) + first_col;
            for (std::size_t j = 0; j < m; ++j)
            {
                g.mean(j) += static_cast<double>(row[j]);
            }
        }
        for (std::size_t j = 0; j < m; ++j)
        {
            g.mean(j) /= static_cast<double>(count);
        }
        scratch.resize(count * m);
        for (std::size_t r = 0; r < count; ++r)
        {
            const T* row = x.row(rows ? rows[r] : r) + first_col;
            double* out = scratch.data() + r * m;
            for (std::size_t j = 0; j < m; ++j)
            {
                out[j] = static_cast<double>(row[j]) - g.mean(j);
            }
        }
        syrk_ata<double>(m, count, 1.0 / static_cast<double>(count - 1), scratch.data(), m, 0.0,
                         g.covariance.data(), m);
        for (std::size_t i = 0; i < m; ++i)
        {
            for (std::size_t j = 0; j < i; ++j)
            {
                g.covariance(i, j) = g.covariance(j, i);
            }
            g.covariance(i, i) += epsilon;
        }
        return g;
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
    std::vector<double> scratch;
    return detail::gaussian_of_rows(x, nullptr, x.rows, 0, epsilon, scratch);
}

/// Statistics of one query bucket (docs/method.md §2.10).
struct bucket_statistics
{
    std::int64_t bucket = 0;
    std::size_t count = 0;        // queries in the bucket
    double tau = 0.0;             // mean position
    gaussian semantic;            // of components [first_component, d)
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
        std::map<std::int64_t, std::vector<std::size_t>> groups;
        for (std::size_t i = 0; i < n; ++i)
        {
            groups[buckets[i]].push_back(i);
        }
        return groups;
    }

    /// The rows of one selected bucket and their mean position.
    struct bucket_rows
    {
        std::int64_t bucket = 0;
        std::vector<std::size_t> rows;
        double tau = 0.0;
    };

    /// Buckets >= options.min_bucket with at least options.min_count rows, in increasing id,
    /// with tau = the mean of their positions (summed in row order).
    inline std::vector<bucket_rows> selected_buckets(const double* positions, const std::int64_t* buckets,
                                                     std::size_t n, const bucket_options& options)
    {
        std::vector<bucket_rows> result;
        for (auto& [bucket, rows] : rows_by_bucket(buckets, n))
        {
            if (bucket < options.min_bucket || rows.size() < options.min_count)
            {
                continue;
            }
            double tau = 0.0;
            for (std::size_t r : rows)
            {
                tau += positions[r];
            }
            tau /= static_cast<double>(rows.size());
            result.push_back({bucket, std::move(rows), tau});
        }
        return result;
    }

    template <class T>
    std::vector<bucket_statistics> bucket_statistics_raw(const double* positions, const std::int64_t* buckets,
                                                         const matrix_view<T>& x, const bucket_options& options)
    {
        std::vector<bucket_statistics> result;
        std::vector<double> scratch;
        for (const auto& selected : selected_buckets(positions, buckets, x.rows, options))
        {
            bucket_statistics stats;
            stats.bucket = selected.bucket;
            stats.count = selected.rows.size();
            stats.tau = selected.tau;
            stats.semantic = gaussian_of_rows(x, selected.rows.data(), selected.rows.size(), options.first_component,
                                              options.epsilon, scratch);
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
    return detail::bucket_statistics_raw(p.data, b.data, xm, options);
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
                                                            const matrix_view<T>& x_rot,
                                                            const position_component_fit& component0,
                                                            double covariance_epsilon)
    {
        bucket_options options;
        options.epsilon = covariance_epsilon;
        std::vector<bucket_query_model> models;
        for (auto& stats : bucket_statistics_raw(positions, buckets, x_rot, options))
        {
            bucket_query_model model;
            model.bucket = stats.bucket;
            model.n_queries = stats.count;
            model.tau = stats.tau;
            model.position_mean = component0.alpha + component0.beta * stats.tau;
            model.position_variance = component0.residual_variance;
            model.semantic = std::move(stats.semantic);
            models.push_back(std::move(model));
        }
        return models;
    }
}  // namespace detail

/// The query models of a head (docs/method.md §2.10), one per query bucket j > 0 with at least
/// 2 queries, in increasing j: from the rotated queries X_rot (n x d, d >= 1), their positions
/// and bucket ids, and the fit of the positional component (§2.6).
template <class EP, class EB, class EX>
std::vector<bucket_query_model> bucket_query_models(const xt::xexpression<EP>& positions,
                                                    const xt::xexpression<EB>& buckets,
                                                    const xt::xexpression<EX>& x_rot,
                                                    const position_component_fit& component0,
                                                    double covariance_epsilon = default_covariance_epsilon)
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
    return detail::bucket_query_models_raw(p.data, b.data, xm, component0, covariance_epsilon);
}
}  // namespace attention_plasticity

#endif
