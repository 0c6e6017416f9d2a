#ifndef ATTENTION_PLASTICITY_QUERY_MODEL_HPP
#define ATTENTION_PLASTICITY_QUERY_MODEL_HPP

// Gaussian query models estimated from samples: one Gaussian for a sample (mean, ddof=1
// covariance + eps I), and the per-bucket statistics of SPEC §2.10 (tau_j, mu_j, Sigma_j).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/matrix.hpp"

namespace attention_plasticity
{
/// Ridge added to every estimated covariance (SPEC §2.10).
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
    auto x = detail::as_matrix<double>(samples, fn, "samples");
    if (x.rows < 2)
    {
        detail::throw_invalid(fn, "needs at least 2 samples for a ddof=1 covariance, got ", x.rows);
    }
    if (x.cols == 0)
    {
        detail::throw_invalid(fn, "samples have 0 columns (d = 0)");
    }
    if (!(epsilon >= 0.0) || !std::isfinite(epsilon))
    {
        detail::throw_invalid(fn, "epsilon must be finite and >= 0, got ", epsilon);
    }
    detail::require_finite(fn, "samples", x);
    std::vector<double> scratch;
    return detail::gaussian_of_rows(x, nullptr, x.rows, 0, epsilon, scratch);
}

/// Statistics of one query bucket (SPEC §2.10).
struct bucket_statistics
{
    std::int64_t bucket = 0;
    std::size_t count = 0;        // queries in the bucket
    double tau = 0.0;             // mean position
    gaussian semantic;            // of components [first_component, d)
};

struct bucket_options
{
    std::int64_t min_bucket = 1;      // buckets below this are skipped (SPEC: j > 0)
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

    template <class T>
    std::vector<bucket_statistics> bucket_statistics_raw(const double* positions, const std::int64_t* buckets,
                                                         const matrix_view<T>& x, const bucket_options& options)
    {
        std::vector<bucket_statistics> result;
        std::vector<double> scratch;
        for (const auto& [bucket, rows] : rows_by_bucket(buckets, x.rows))
        {
            if (bucket < options.min_bucket || rows.size() < options.min_count)
            {
                continue;
            }
            bucket_statistics stats;
            stats.bucket = bucket;
            stats.count = rows.size();
            double tau = 0.0;
            for (std::size_t r : rows)
            {
                tau += positions[r];
            }
            stats.tau = tau / static_cast<double>(rows.size());
            stats.semantic = gaussian_of_rows(x, rows.data(), rows.size(), options.first_component, options.epsilon,
                                              scratch);
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
    auto xm = detail::as_matrix<double>(x, fn, "X");
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
}  // namespace attention_plasticity

#endif
