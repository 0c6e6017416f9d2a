#ifndef ATTENTION_PLASTICITY_SENSITIVITY_HPP
#define ATTENTION_PLASTICITY_SENSITIVITY_HPP

// The per-bucket pieces of the intervals of docs/method.md §8.3: how a query bucket's AP_j, a
// mean of g(z_p) = 4 Phi(z_p) Phi(-z_p) over its pairs, responds to its query model (first
// derivatives, and the coefficients of its second-order bias), computed from the kernel's
// moments of the pairs; and the variance of AP_j from the sampling of its pairs. The head-level
// combination is intervals.hpp's.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "cells.hpp"
#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/rows.hpp"
#include "normal.hpp"
#include "plasticity.hpp"
#include "query_model.hpp"

namespace attention_plasticity
{
/// The sensitivity of a query bucket's AP_j = (1/P) sum_p PP_p to its query model N([mu0, mu],
/// blockdiag(sigma2, Sigma)) (docs/method.md §8.3), in the rotated basis (component 0 the
/// positional one, w = (w0, w_sem)). With z_p = m_p / sqrt(v_p), g(z) = 4 Phi(z) Phi(-z),
/// A_p = g'(z_p) / (P sqrt(v_p)) and B_p = -g'(z_p) z_p / (2 P v_p) >= 0:
///   dAP_j = a . dmu + G dmu0 + K dsigma2 + tr(M dSigma)
/// and the rotation term uses b. The bias coefficients give the second-order bias of the
/// plug-in AP_j from the variances of the estimates (see plasticity_standard_errors).
struct bucket_sensitivity
{
    xt::xtensor<double, 1> semantic_mean;        // a = sum_p A_p w_sem (d - 1)
    double position_mean = 0.0;                  // G = sum_p A_p w0
    double position_variance = 0.0;              // K = sum_p B_p w0^2
    xt::xtensor<double, 2> semantic_covariance;  // M = sum_p B_p w_sem w_sem^T ((d - 1) x (d - 1))
    xt::xtensor<double, 1> mixed;                // b = sum_p B_p w0 w_sem (d - 1)
    double bias_per_position_mean_variance = 0.0;      // mean_p g''/2 w0^2 / v
    double bias_per_position_variance_variance = 0.0;  // mean_p (3 z g' + z^2 g'') / 8 w0^4 / v^2
    double bias_per_position_variance_shift = 0.0;     // mean_p -z g' w0^2 / (2 v)
    double bias_semantic = 0.0;  // from mu_hat and Sigma_hat of the bucket's n_j queries
};

namespace detail
{
    /// g(z) = 4 Phi(z) Phi(-z) and its first two derivatives.
    struct plasticity_derivatives
    {
        double first;
        double second;
    };

    inline plasticity_derivatives plasticity_derivatives_at(double z)
    {
        constexpr double inv_sqrt_2pi = 0.39894228040143267794;
        const double density = inv_sqrt_2pi * std::exp(-0.5 * z * z);
        const double slope = normal_sf(z) - normal_cdf(z);  // 1 - 2 Phi(z), accurate in the tails
        return {4.0 * density * slope, 4.0 * (-z * density * slope - 2.0 * density * density)};
    }

    /// Whether the kernel computed the query model's moments without rescaling (docs/method.md
    /// §4.6), as far as the model is concerned: the kernel's criterion for double.
    inline bool model_unscaled(const bucket_query_model& model)
    {
        const std::size_t m = model.semantic.mean.size();
        double mu_max = std::fabs(model.position_mean);
        double sigma_max = std::fabs(model.position_variance);
        if (m > 0)
        {
            mu_max = std::max(mu_max, max_abs(model.semantic.mean.data(), 1, m, m));
            sigma_max = std::max(sigma_max, max_abs(model.semantic.covariance.data(), m, m, m));
        }
        return in_safe_range<double>(mu_max) && in_safe_range<double>(sigma_max);
    }

    inline bucket_sensitivity nan_sensitivity(std::size_t m)
    {
        constexpr double nan = std::numeric_limits<double>::quiet_NaN();
        bucket_sensitivity s;
        s.semantic_mean = xt::xtensor<double, 1>::from_shape({m});
        s.semantic_covariance = xt::xtensor<double, 2>::from_shape({m, m});
        s.mixed = xt::xtensor<double, 1>::from_shape({m});
        s.semantic_mean.fill(nan);
        s.semantic_covariance.fill(nan);
        s.mixed.fill(nan);
        s.position_mean = s.position_variance = nan;
        s.bias_per_position_mean_variance = s.bias_per_position_variance_variance = nan;
        s.bias_per_position_variance_shift = s.bias_semantic = nan;
        return s;
    }

    template <class T>
    bucket_sensitivity sensitivity_raw(const matrix_view<T>& w, const double* mean, const double* variance,
                                       const bucket_query_model& model)
    {
        const std::size_t pairs = w.rows;
        const std::size_t m = w.cols - 1;
        if (!model_unscaled(model))
        {
            return nan_sensitivity(m);
        }
        bucket_sensitivity s;
        s.semantic_mean = xt::zeros<double>({m});
        s.semantic_covariance = xt::zeros<double>({m, m});
        s.mixed = xt::zeros<double>({m});
        if (pairs == 0)
        {
            return s;
        }
        const auto count = static_cast<double>(pairs);
        const auto n = static_cast<double>(model.n_queries);
        const double sigma2 = model.position_variance;
        // M = sum_p B_p w_sem w_sem^T as SYRKs of sqrt(B_p) w_sem over blocks of pairs (a small
        // buffer, reused).
        constexpr std::size_t block = 512;
        std::vector<double> scaled(std::min(pairs, block) * m, 0.0);
        for (std::size_t start = 0; start < pairs; start += block)
        {
            const std::size_t size = std::min(block, pairs - start);
            std::fill(scaled.begin(), scaled.end(), 0.0);
            for (std::size_t q = 0; q < size; ++q)
            {
                const std::size_t p = start + q;
                const double v = variance[p];
                if (!(v > 0.0))
                {
                    continue;  // the degenerate rule of §2.13: PP is locally constant
                }
                const double z = mean[p] / std::sqrt(v);
                const plasticity_derivatives g = plasticity_derivatives_at(z);
                const double a_p = g.first / (count * std::sqrt(v));
                const double b_p = -g.first * z / (2.0 * count * v);
                const T* row = w.row(p);
                const auto w0 = static_cast<double>(row[0]);
                const double root_b = std::sqrt(std::max(b_p, 0.0));
                double largest = std::fabs(w0);
                for (std::size_t k = 0; k < m; ++k)
                {
                    const auto wk = static_cast<double>(row[k + 1]);
                    s.semantic_mean(k) += a_p * wk;
                    s.mixed(k) += b_p * w0 * wk;
                    scaled[q * m + k] = root_b * wk;
                    largest = std::max(largest, std::fabs(wk));
                }
                if (!in_safe_range<double>(largest))
                {
                    return nan_sensitivity(m);  // the kernel rescaled this pair's moments
                }
                s.position_mean += a_p * w0;
                s.position_variance += b_p * w0 * w0;
                // Second order: E[g(z_hat)] - g(z) = g' E[dz] + g''/2 E[dz^2] with dz from dm and dv.
                const double v_sem = std::max(v - w0 * w0 * sigma2, 0.0);
                const double curvature = (3.0 * z * g.first + z * z * g.second) / 8.0;  // per Var(dv) / v^2
                s.bias_per_position_mean_variance += 0.5 * g.second * w0 * w0 / v / count;
                s.bias_per_position_variance_variance += curvature * w0 * w0 * w0 * w0 / (v * v) / count;
                s.bias_per_position_variance_shift += -z * g.first * w0 * w0 / (2.0 * v) / count;
                s.bias_semantic += (0.5 * g.second * v_sem / (n * v)
                                    + curvature * 2.0 * v_sem * v_sem / ((n - 1.0) * v * v))
                                   / count;
            }
            if (m > 0)
            {
                syrk_ata<double>(m, size, 1.0, scaled.data(), m, start == 0 ? 0.0 : 1.0,
                                 s.semantic_covariance.data(), m);
            }
        }
        for (std::size_t i = 0; i < m; ++i)
        {
            for (std::size_t j = 0; j < i; ++j)
            {
                s.semantic_covariance(i, j) = s.semantic_covariance(j, i);
            }
        }
        return s;
    }
}  // namespace detail

/// The sensitivity of AP_j, the mean PP of the pairs whose key differences are the rows of
/// `differences` (P x d, component 0 positional), to the bucket's query model `model`
/// (docs/method.md §8.3), from the pairs' moments m = w.mean and v = w' C w as
/// query_bucket_plasticity (or structured_pair_moments) computed them. Pairs with v <= 0
/// contribute nothing (their PP is locally constant). Where the kernel had to rescale
/// (§4.6: magnitudes beyond 2^+-250) the moments are not w.mean and w' C w and every value of
/// the result is NaN. d >= 1, model.n_queries >= 2. Shapes: std::invalid_argument; non-finite
/// values: std::domain_error.
template <class EW>
bucket_sensitivity bucket_plasticity_sensitivity(const xt::xexpression<EW>& differences, const pair_moments& moments,
                                                 const bucket_query_model& model)
{
    constexpr const char* fn = "bucket_plasticity_sensitivity";
    const auto w = detail::as_matrix<detail::float_or_double_t<EW>>(differences, fn, "differences");
    if (w.cols == 0)
    {
        detail::throw_invalid(fn, "differences has 0 columns (d = 0)");
    }
    const std::size_t m = w.cols - 1;
    if (moments.mean.size() != w.rows || moments.variance.size() != w.rows)
    {
        detail::throw_invalid(fn, "moments have ", moments.mean.size(), " means and ", moments.variance.size(),
                              " variances but differences has ", w.rows, " rows");
    }
    if (model.semantic.mean.size() != m || model.semantic.covariance.shape()[0] != m
        || model.semantic.covariance.shape()[1] != m)
    {
        detail::throw_invalid(fn, "differences has d = ", w.cols, " columns but the model's semantic mean has ",
                              model.semantic.mean.size(), " entries (d - 1 expected)");
    }
    if (model.n_queries < 2)
    {
        detail::throw_invalid(fn, "model.n_queries must be >= 2, got ", model.n_queries);
    }
    detail::require_finite(fn, "differences", w);
    detail::require_finite(fn, "moments.mean", moments.mean.data(), moments.mean.size());
    detail::require_finite(fn, "moments.variance", moments.variance.data(), moments.variance.size());
    if (detail::is_non_finite(model.position_mean) || detail::is_non_finite(model.position_variance)
        || !(model.position_variance >= 0.0))
    {
        detail::throw_domain(fn, "model.position_mean and model.position_variance must be finite (variance >= 0), got ",
                             model.position_mean, " and ", model.position_variance);
    }
    detail::require_finite(fn, "model.semantic.mean", model.semantic.mean.data(), m);
    detail::require_finite(fn, "model.semantic.covariance", model.semantic.covariance.data(), m * m);
    return detail::sensitivity_raw(w, moments.mean.data(), moments.variance.data(), model);
}

/// The variance of AP_j from the sampling of its pairs (docs/method.md §8.3): with cell c
/// holding N_c pairs of plasticity values PP (pair_plasticity, cell after cell in the order of
/// the cells), AP_j = sum_c sum_p PP / sum_c N_c and its variance over the draws of the pairs,
/// estimated from the within-cell sample variances s_c^2 (divisor N_c - 1), is
/// sum_c N_c s_c^2 / (sum_c N_c)^2. NaN when a cell has exactly one pair (no variance estimate)
/// or there is no pair at all. Sizes: std::invalid_argument; non-finite values:
/// std::domain_error.
template <class EP>
double pair_sampling_variance(const xt::xexpression<EP>& pair_plasticity, const std::vector<cell_pairs>& cells)
{
    constexpr const char* fn = "pair_sampling_variance";
    const auto pp = detail::as_vector<double>(pair_plasticity, fn, "pair_plasticity");
    const std::size_t total = detail::total_pairs(cells);
    if (pp.size != total)
    {
        detail::throw_invalid(fn, "pair_plasticity has ", pp.size, " entries but the cells hold ", total, " pairs");
    }
    detail::require_finite(fn, "pair_plasticity", pp);
    if (total == 0)
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    double sum = 0.0;
    std::size_t at = 0;
    for (const auto& cell : cells)
    {
        const std::size_t count = cell.pairs.size();
        if (count == 0)
        {
            continue;
        }
        if (count == 1)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        double mean = 0.0;
        for (std::size_t p = 0; p < count; ++p)
        {
            mean += pp[at + p];
        }
        mean /= static_cast<double>(count);
        double squares = 0.0;
        for (std::size_t p = 0; p < count; ++p)
        {
            squares += (pp[at + p] - mean) * (pp[at + p] - mean);
        }
        sum += squares / static_cast<double>(count - 1) * static_cast<double>(count);
        at += count;
    }
    return sum / (static_cast<double>(total) * static_cast<double>(total));
}
}  // namespace attention_plasticity

#endif
