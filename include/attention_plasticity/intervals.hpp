#ifndef ATTENTION_PLASTICITY_INTERVALS_HPP
#define ATTENTION_PLASTICITY_INTERVALS_HPP

// Standard errors, bias and confidence intervals of AP_j and ap_overall (docs/method.md §8.3),
// by the delta method: AP_j is a smooth function of the estimated query model (the component-0
// line alpha0 + beta0 tau_j and its residual variance sigma2, the rotation direction, mu_j and
// Sigma_j) and a mean over sampled pairs. Its error is, to first order, a sum over the queries
// of their influence on these estimates, plus the pair-sampling error; its bias, to second
// order, is -(2/pi)/n_j at z = 0 and smaller elsewhere. The per-bucket pieces are
// sensitivity.hpp's (bucket_plasticity_sensitivity, pair_sampling_variance); here:
//   plasticity_standard_errors  the per-query influences over the head, summed: standard errors
//                               and biases of every AP_j and of ap_overall
//   plasticity_interval         estimate - bias -+ z_(1+level)/2 standard error, in [0, 1]

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/rows.hpp"
#include "normal.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "sensitivity.hpp"

namespace attention_plasticity
{
/// What the interval of one query bucket needs (one per bucket_query_model, in their order).
struct bucket_estimate
{
    double plasticity = std::numeric_limits<double>::quiet_NaN();  // AP_j; NaN: no pairs (not in D)
    bucket_sensitivity sensitivity;                                // bucket_plasticity_sensitivity
    double pair_variance = 0.0;                                    // pair_sampling_variance
};

/// Standard errors and second-order biases of every AP_j and of ap_overall (docs/method.md §8.3).
struct plasticity_uncertainty
{
    std::vector<double> bucket_standard_error;  // per model; NaN for buckets without pairs
    std::vector<double> bucket_bias;            // E[AP_j] - AP_j, estimated
    double standard_error = std::numeric_limits<double>::quiet_NaN();  // of ap_overall
    double bias = std::numeric_limits<double>::quiet_NaN();
};

namespace detail
{
    /// C = A B for row-major m x m matrices.
    inline xt::xtensor<double, 2> square_product(const xt::xtensor<double, 2>& a, const xt::xtensor<double, 2>& b)
    {
        const std::size_t m = a.shape()[0];
        xt::xtensor<double, 2> c = xt::zeros<double>({m, m});
        gemm<double>(false, false, m, m, m, 1.0, a.data(), m, b.data(), m, 0.0, c.data(), m);
        return c;
    }

    inline double trace_of_product(const xt::xtensor<double, 2>& a, const xt::xtensor<double, 2>& b)
    {
        const std::size_t m = a.shape()[0];
        double t = 0.0;
        for (std::size_t i = 0; i < m; ++i)
        {
            for (std::size_t k = 0; k < m; ++k)
            {
                t += a(i, k) * b(k, i);
            }
        }
        return t;
    }

    inline double trace_of(const xt::xtensor<double, 2>& a)
    {
        double t = 0.0;
        for (std::size_t i = 0; i < a.shape()[0]; ++i)
        {
            t += a(i, i);
        }
        return t;
    }

    /// y = A x for a row-major m x m matrix.
    inline std::vector<double> matrix_vector(const xt::xtensor<double, 2>& a, const double* x)
    {
        const std::size_t m = a.shape()[0];
        std::vector<double> y(m, 0.0);
        for (std::size_t i = 0; i < m; ++i)
        {
            double s = 0.0;
            for (std::size_t k = 0; k < m; ++k)
            {
                s += a(i, k) * x[k];
            }
            y[i] = s;
        }
        return y;
    }

    /// The statistics of the queries that the influences use (docs/method.md §8.3): head-wide
    /// means and the residual's cross-covariances, and per modelled bucket the mean and variance
    /// of component 0 and its covariance with the semantic components. Two passes over the
    /// rows: one over the scalar columns (and component 0), one over the whole rows.
    struct query_statistics
    {
        std::vector<std::size_t> slot;  // per row: index of its bucket's model, or models.size()
        double t_mean = 0.0;
        double t_spread = 0.0;  // S_tt
        double residual_mean = 0.0;
        double residual_fourth = 0.0;        // sum_i ((r_i - r_bar)^2 - sigma2)^2 / n^2
        std::vector<double> semantic_mean;   // x_bar of components 1..d-1
        std::vector<double> residual_cross;  // rho: cov(r, component k), divisor n - 1
        std::vector<double> bucket_mean0;    // per model: mean of component 0 over its queries
        std::vector<double> bucket_variance0;
        std::vector<double> bucket_cross;  // per model, m values: cov(component 0, component k)
    };

    /// X: a matrix_view, or any rows x cols reader whose row(i) stays valid until its next call.
    template <class X>
    query_statistics query_statistics_of(const double* t, const std::int64_t* buckets, const X& x,
                                         const double* residual, double sigma2,
                                         const std::vector<bucket_query_model>& models)
    {
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const std::size_t count_models = models.size();
        const auto count = static_cast<double>(n);
        query_statistics s;
        s.slot.assign(n, count_models);
        s.semantic_mean.assign(m, 0.0);
        s.residual_cross.assign(m, 0.0);
        s.bucket_mean0.assign(count_models, 0.0);
        s.bucket_variance0.assign(count_models, 0.0);
        s.bucket_cross.assign(count_models * m, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            s.t_mean += t[i];
            s.residual_mean += residual[i];
            const auto it = std::lower_bound(models.begin(), models.end(), buckets[i],
                                             [](const bucket_query_model& model, std::int64_t b) {
                                                 return model.bucket < b;
                                             });
            if (it != models.end() && it->bucket == buckets[i])
            {
                s.slot[i] = static_cast<std::size_t>(it - models.begin());
                s.bucket_mean0[s.slot[i]] += static_cast<double>(x.row(i)[0]);
            }
        }
        s.t_mean /= count;
        s.residual_mean /= count;
        for (std::size_t j = 0; j < count_models; ++j)
        {
            s.bucket_mean0[j] /= static_cast<double>(models[j].n_queries);
        }
        std::vector<double> semantic_sum(m, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            const double dt = t[i] - s.t_mean;
            s.t_spread += dt * dt;
            const double r = residual[i] - s.residual_mean;
            const double e = r * r - sigma2;
            s.residual_fourth += e * e;
            const auto* row = x.row(i);
            for (std::size_t k = 0; k < m; ++k)
            {
                const auto xk = static_cast<double>(row[k + 1]);
                semantic_sum[k] += xk;
                s.residual_cross[k] += r * xk;  // sum r = 0: no centring of x needed
            }
            const std::size_t j = s.slot[i];
            if (j < count_models)
            {
                // sum_i (x0_i - a)(x_ik - mu_jk) is the same for every a, since sum_i (x_ik - mu_jk) = 0.
                const double c0 = static_cast<double>(row[0]) - s.bucket_mean0[j];
                s.bucket_variance0[j] += c0 * c0;
                double* cross = s.bucket_cross.data() + j * m;
                const double* mu = models[j].semantic.mean.data();
                for (std::size_t k = 0; k < m; ++k)
                {
                    cross[k] += c0 * (static_cast<double>(row[k + 1]) - mu[k]);
                }
            }
        }
        s.residual_fourth /= count * count;
        for (std::size_t k = 0; k < m; ++k)
        {
            s.semantic_mean[k] = semantic_sum[k] / count;
            // sum_i (r_i - r_bar) x_ik = sum_i r_i x_ik - r_bar sum_i x_ik, with r taken as centred above.
            s.residual_cross[k] /= count - 1.0;
        }
        for (std::size_t j = 0; j < count_models; ++j)
        {
            const double dof = static_cast<double>(models[j].n_queries) - 1.0;
            s.bucket_variance0[j] /= dof;
            for (std::size_t k = 0; k < m; ++k)
            {
                s.bucket_cross[j * m + k] /= dof;
            }
        }
        return s;
    }

    /// The per-bucket pieces of the influence and of the bias (docs/method.md §8.3).
    struct bucket_terms
    {
        std::vector<double> rotation_gradient;  // h_j: d AP_j / d delta (the direction's change)
        double covariance_variance = 0.0;       // 2 tr((M Sigma)^2) / (n_j - 1)
        double bias = 0.0;
    };

    /// The terms of bucket j (in D). V: Cov(delta) of the direction (zero when it is not estimated).
    inline bucket_terms bucket_terms_of(const bucket_query_model& model, const bucket_sensitivity& s,
                                        const query_statistics& q, std::size_t slot, double sigma2, double count,
                                        const xt::xtensor<double, 2>& direction_cov,
                                        const xt::xtensor<double, 2>& pooled, bool rotation_estimated)
    {
        const std::size_t m = model.semantic.mean.size();
        bucket_terms term;
        const auto nj = static_cast<double>(model.n_queries);
        const double dtau = model.tau - q.t_mean;
        const double mean0_variance = sigma2 * (1.0 / count + (q.t_spread > 0.0 ? dtau * dtau / q.t_spread : 0.0));
        const double sigma_variance = q.residual_fourth;  // Var(sigma2_hat), sandwich
        const double sigma_shift = -sigma2 / (count - 1.0);  // E[sigma2_hat] - sigma2 (n - 1 divisor)
        term.bias = s.bias_per_position_mean_variance * mean0_variance
                    + s.bias_per_position_variance_variance * sigma_variance
                    + s.bias_per_position_variance_shift * sigma_shift + s.bias_semantic;
        term.rotation_gradient.assign(m, 0.0);
        if (m == 0)
        {
            return term;
        }
        const xt::xtensor<double, 2> m_sigma = square_product(s.semantic_covariance, model.semantic.covariance);
        term.covariance_variance = 2.0 * trace_of_product(m_sigma, m_sigma) / (nj - 1.0);
        if (!rotation_estimated)
        {
            return term;
        }
        const double mean_residual0 = q.bucket_mean0[slot] - model.position_mean;  // r0: bucket mean - line
        const double* cross = q.bucket_cross.data() + slot * m;                   // c_j
        std::vector<double> mean_shift(m);                                          // mu_j - x_bar
        for (std::size_t k = 0; k < m; ++k)
        {
            mean_shift[k] = model.semantic.mean(k) - q.semantic_mean[k];
        }
        // h_j = -2 (Sigma_j - sigma2 I) b - 2 M c_j + 2 K rho - r0 a - G (mu_j - x_bar).
        const std::vector<double> sigma_b = matrix_vector(model.semantic.covariance, s.mixed.data());
        const std::vector<double> m_c = matrix_vector(s.semantic_covariance, cross);
        for (std::size_t k = 0; k < m; ++k)
        {
            term.rotation_gradient[k] = -2.0 * (sigma_b[k] - sigma2 * s.mixed(k)) - 2.0 * m_c[k]
                                        + 2.0 * s.position_variance * q.residual_cross[k]
                                        - mean_residual0 * s.semantic_mean(k) - s.position_mean * mean_shift[k];
        }
        // Second order in the direction's error delta (E of dm and dv to order 2):
        //   G r0 tr V - a' V (mu_j - x_bar) + (S00 + sigma2) tr(M V) - 2 tr(M V Sigma_j)
        //   + K tr((Sigma_j + Sigma_pooled - 2 sigma2 I) V).
        const std::vector<double> v_shift = matrix_vector(direction_cov, mean_shift.data());
        double a_v_shift = 0.0;
        for (std::size_t k = 0; k < m; ++k)
        {
            a_v_shift += s.semantic_mean(k) * v_shift[k];
        }
        const double direction_trace = trace_of(direction_cov);
        const xt::xtensor<double, 2> m_v = square_product(s.semantic_covariance, direction_cov);
        const xt::xtensor<double, 2> spread = model.semantic.covariance + pooled;
        const double spread_trace = trace_of_product(spread, direction_cov) - 2.0 * sigma2 * direction_trace;
        term.bias += s.position_mean * mean_residual0 * direction_trace - a_v_shift
                     + (q.bucket_variance0[slot] + sigma2) * trace_of(m_v)
                     - 2.0 * trace_of_product(m_v, model.semantic.covariance) + s.position_variance * spread_trace;
        return term;
    }

    /// The buckets of D (a defined AP_j): target c is model slot in_d[c].
    struct targets_of_head
    {
        std::vector<std::size_t> in_d;
        std::vector<std::size_t> target_of;  // model slot -> target + 1 (0: none); one slot past the models
        double weight_total = 0.0;           // sum of n_j over D
    };

    inline targets_of_head targets_with_plasticity(const std::vector<bucket_query_model>& models,
                                                   const std::vector<bucket_estimate>& estimates)
    {
        targets_of_head d;
        d.target_of.assign(models.size() + 1, 0);
        for (std::size_t j = 0; j < models.size(); ++j)
        {
            if (!is_nan(estimates[j].plasticity))
            {
                d.in_d.push_back(j);
                d.target_of[j] = d.in_d.size();
                d.weight_total += static_cast<double>(models[j].n_queries);
            }
        }
        return d;
    }

    /// Sigma_pooled over D and V = Cov(delta) of the rotation direction = Sigma_pooled /
    /// (S_tt |beta|^2); both zero when the direction is not estimated.
    struct direction_covariances
    {
        xt::xtensor<double, 2> pooled;
        xt::xtensor<double, 2> direction;
    };

    inline direction_covariances direction_covariances_of(const std::vector<bucket_query_model>& models,
                                                          const std::vector<std::size_t>& in_d, std::size_t m,
                                                          double t_spread, double slope_norm, bool rotation_estimated)
    {
        direction_covariances c{xt::zeros<double>({m, m}), xt::zeros<double>({m, m})};
        if (rotation_estimated)
        {
            double dof = 0.0;
            for (std::size_t j : in_d)
            {
                const double nj1 = static_cast<double>(models[j].n_queries) - 1.0;
                c.pooled += nj1 * models[j].semantic.covariance;
                dof += nj1;
            }
            c.pooled /= dof;
            c.direction = c.pooled / (t_spread * slope_norm * slope_norm);
        }
        return c;
    }

    /// Influences through mu_j (the bucket's own queries) and through the direction,
    /// (t_i - t_bar) / (S_tt |beta|) h_j . (x_i,sem - x_bar), the latter by GEMMs over blocks of
    /// rows; one pass over x, in row order (x as in query_statistics_of). Adds into columns
    /// 0..targets-1 of `influence` (row stride `stride`).
    template <class X>
    void add_mean_and_direction_influences(const double* t, const X& x,
                                           const std::vector<bucket_query_model>& models,
                                           const std::vector<bucket_estimate>& estimates, const query_statistics& q,
                                           const targets_of_head& d, const std::vector<bucket_terms>& terms,
                                           double slope_norm, bool rotation_estimated, std::size_t stride,
                                           std::vector<double>& influence)
    {
        constexpr std::size_t block = 1024;
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const std::size_t count_models = models.size();
        const std::size_t targets = d.in_d.size();
        std::vector<double> centred(rotation_estimated ? std::min(n, block) * m : 0);
        std::vector<double> gradients(rotation_estimated ? m * targets : 0);
        for (std::size_t c = 0; c < targets && rotation_estimated; ++c)
        {
            for (std::size_t k = 0; k < m; ++k)
            {
                gradients[k * targets + c] = terms[c].rotation_gradient[k];
            }
        }
        std::vector<double> own(std::min(n, block));
        for (std::size_t start = 0; start < n; start += block)
        {
            const std::size_t size = std::min(block, n - start);
            std::fill(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(size), 0.0);
            for (std::size_t i = 0; i < size; ++i)
            {
                const auto* row = x.row(start + i);
                const std::size_t target = d.target_of[std::min(q.slot[start + i], count_models)];
                if (target > 0)
                {
                    const std::size_t j = d.in_d[target - 1];
                    const double* a = estimates[j].sensitivity.semantic_mean.data();
                    const double* mu = models[j].semantic.mean.data();
                    double dot = 0.0;
                    for (std::size_t k = 0; k < m; ++k)
                    {
                        dot += a[k] * (static_cast<double>(row[k + 1]) - mu[k]);
                    }
                    own[i] = dot / static_cast<double>(models[j].n_queries);
                }
                if (rotation_estimated)
                {
                    const double factor = (t[start + i] - q.t_mean) / (q.t_spread * slope_norm);
                    for (std::size_t k = 0; k < m; ++k)
                    {
                        centred[i * m + k] = factor * (static_cast<double>(row[k + 1]) - q.semantic_mean[k]);
                    }
                }
            }
            if (rotation_estimated)
            {
                gemm<double>(false, false, size, targets, m, 1.0, centred.data(), m, gradients.data(), targets, 0.0,
                             influence.data() + start * stride, stride);
            }
            for (std::size_t i = 0; i < size; ++i)
            {
                const std::size_t target = d.target_of[std::min(q.slot[start + i], count_models)];
                if (target > 0)
                {
                    influence[(start + i) * stride + target - 1] += own[i];
                }
            }
        }
    }

    /// Influences through the positional line and sigma2 (every query) into columns
    /// 0..targets-1; returns the weights n_j / sum n_k of the targets in ap_overall.
    inline std::vector<double> add_line_influences(const double* t, std::size_t n,
                                                   const std::vector<bucket_query_model>& models,
                                                   const std::vector<bucket_estimate>& estimates,
                                                   const query_statistics& q, const targets_of_head& d,
                                                   const double* residual, double sigma2, std::size_t stride,
                                                   std::vector<double>& influence)
    {
        const auto count = static_cast<double>(n);
        const bool slope_known = q.t_spread > 0.0;
        std::vector<double> weight(d.in_d.size());
        for (std::size_t c = 0; c < d.in_d.size(); ++c)
        {
            const std::size_t j = d.in_d[c];
            const bucket_sensitivity& s = estimates[j].sensitivity;
            weight[c] = static_cast<double>(models[j].n_queries) / d.weight_total;
            const double dtau = models[j].tau - q.t_mean;
            for (std::size_t i = 0; i < n; ++i)
            {
                const double r = residual[i] - q.residual_mean;
                const double line = 1.0 / count + (slope_known ? dtau * (t[i] - q.t_mean) / q.t_spread : 0.0);
                influence[i * stride + c] += s.position_mean * r * line + s.position_variance * (r * r - sigma2) / count;
            }
        }
        return weight;
    }

    /// Fills the last column (ap_overall's influence, sum_c weight_c phi_c) and returns each
    /// column's sum of squares about its mean.
    inline std::vector<double> influence_sums_of_squares(std::vector<double>& influence, std::size_t n,
                                                         const std::vector<double>& weight)
    {
        const std::size_t targets = weight.size();
        const std::size_t stride = targets + 1;
        std::vector<double> column_mean(stride, 0.0), column_squares(stride, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            double* phi = influence.data() + i * stride;
            double overall = 0.0;
            for (std::size_t c = 0; c < targets; ++c)
            {
                overall += weight[c] * phi[c];
            }
            phi[targets] = overall;
            for (std::size_t c = 0; c < stride; ++c)
            {
                column_mean[c] += phi[c];
            }
        }
        for (double& v : column_mean)
        {
            v /= static_cast<double>(n);
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            const double* phi = influence.data() + i * stride;
            for (std::size_t c = 0; c < stride; ++c)
            {
                const double e = phi[c] - column_mean[c];
                column_squares[c] += e * e;
            }
        }
        return column_squares;
    }

    /// plasticity_standard_errors on checked input; x as in query_statistics_of (every pass over
    /// it reads the rows in order, one at a time).
    template <class X>
    plasticity_uncertainty standard_errors_raw(const double* t, const std::int64_t* buckets, const X& x,
                                               const position_component_fit& component0, double slope_norm,
                                               const std::vector<bucket_query_model>& models,
                                               const std::vector<bucket_estimate>& estimates)
    {
        constexpr double nan = std::numeric_limits<double>::quiet_NaN();
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const double sigma2 = component0.residual_variance;
        const double* residual = component0.residual.data();
        plasticity_uncertainty out;
        out.bucket_standard_error.assign(models.size(), nan);
        out.bucket_bias.assign(models.size(), nan);
        const targets_of_head d = targets_with_plasticity(models, estimates);
        if (d.in_d.empty())
        {
            return out;
        }
        const std::size_t targets = d.in_d.size();
        const query_statistics q = query_statistics_of(t, buckets, x, residual, sigma2, models);
        const bool rotation_estimated = m > 0 && q.t_spread > 0.0 && slope_norm >= 1e-12;  // §2.5's threshold
        const direction_covariances cov =
            direction_covariances_of(models, d.in_d, m, q.t_spread, slope_norm, rotation_estimated);
        std::vector<bucket_terms> terms(targets);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const std::size_t j = d.in_d[c];
            terms[c] = bucket_terms_of(models[j], estimates[j].sensitivity, q, j, sigma2, static_cast<double>(n),
                                       cov.direction, cov.pooled, rotation_estimated);
        }

        // Per-query influences phi on every AP_j of D (columns 0..targets-1) and on ap_overall.
        const std::size_t stride = targets + 1;
        std::vector<double> influence(n * stride, 0.0);
        add_mean_and_direction_influences(t, x, models, estimates, q, d, terms, slope_norm, rotation_estimated, stride,
                                          influence);
        const std::vector<double> weight =
            add_line_influences(t, n, models, estimates, q, d, residual, sigma2, stride, influence);
        const std::vector<double> column_squares = influence_sums_of_squares(influence, n, weight);

        // Variances: the influences' sums of squares plus the terms outside them.
        double overall_variance = column_squares[targets];
        double overall_bias = 0.0;
        for (std::size_t c = 0; c < targets; ++c)
        {
            const std::size_t j = d.in_d[c];
            const double separate = terms[c].covariance_variance + estimates[j].pair_variance;
            out.bucket_standard_error[j] = std::sqrt(column_squares[c] + separate);
            out.bucket_bias[j] = terms[c].bias;
            overall_variance += weight[c] * weight[c] * separate;
            overall_bias += weight[c] * terms[c].bias;
        }
        out.standard_error = std::sqrt(overall_variance);
        out.bias = overall_bias;
        return out;
    }
}  // namespace detail

/// Standard errors and biases of every AP_j and of ap_overall (docs/method.md §8.3), by the
/// delta method, conditional on the keys and on the query positions and buckets: the queries'
/// vectors are the random sample (independent given their positions) and the pairs are drawn
/// anew. Inputs: the head's kept queries after the rotation (x_rot, n x d, positions t and bucket
/// ids), the component-0 fit (§2.6: alpha, beta, residual, sigma2), ||beta|| of the position
/// regression (§2.3; the rotation's direction is an estimate when >= 1e-12), the query models
/// (§2.10) and, one per model, its bucket_estimate (AP_j, NaN outside D; its sensitivity; the
/// pair-sampling variance). The variance of AP_j sums (i) the per-query influences through mu_j,
/// the positional line, sigma2 and the rotation direction (summed over the queries: robust to
/// non-normal queries), (ii) the influence through Sigma_j under normality, 2 tr((M Sigma_j)^2)
/// / (n_j - 1), and (iii) the pair-sampling variance. The bias is the second-order bias of the
/// plug-in estimate (of order 1/n_j). Shapes: std::invalid_argument; non-finite values:
/// std::domain_error.
template <class ET, class EB, class EX>
plasticity_uncertainty plasticity_standard_errors(const xt::xexpression<ET>& t, const xt::xexpression<EB>& buckets,
                                                  const xt::xexpression<EX>& x_rot,
                                                  const position_component_fit& component0, double slope_norm,
                                                  const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates)
{
    constexpr const char* fn = "plasticity_standard_errors";
    const auto tv = detail::as_vector<double>(t, fn, "t");
    const auto bv = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    const auto x = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "x_rot");
    const std::size_t n = x.rows;
    if (x.cols == 0)
    {
        detail::throw_invalid(fn, "x_rot has 0 columns (d = 0)");
    }
    if (tv.size != n || bv.size != n || component0.residual.size() != n)
    {
        detail::throw_invalid(fn, "t (", tv.size, "), buckets (", bv.size, ") and component0.residual (",
                              component0.residual.size(), ") must have one entry per row of x_rot (", n, ")");
    }
    if (n < 3)
    {
        detail::throw_invalid(fn, "needs at least 3 queries, got ", n);
    }
    if (estimates.size() != models.size())
    {
        detail::throw_invalid(fn, "estimates has ", estimates.size(), " entries but there are ", models.size(),
                              " models");
    }
    const std::size_t m = x.cols - 1;
    for (std::size_t j = 0; j < models.size(); ++j)
    {
        if (j > 0 && !(models[j - 1].bucket < models[j].bucket))
        {
            detail::throw_invalid(fn, "models must be in increasing bucket id, models[", j, "].bucket = ",
                                  models[j].bucket, " follows ", models[j - 1].bucket);
        }
        const bucket_sensitivity& s = estimates[j].sensitivity;
        if (models[j].semantic.mean.size() != m || models[j].semantic.covariance.shape()[0] != m
            || s.semantic_mean.size() != m || s.mixed.size() != m || s.semantic_covariance.shape()[0] != m
            || s.semantic_covariance.shape()[1] != m)
        {
            detail::throw_invalid(fn, "models[", j, "] or estimates[", j, "] do not have d - 1 = ", m,
                                  " semantic components");
        }
        if (models[j].n_queries < 2)
        {
            detail::throw_invalid(fn, "models[", j, "].n_queries must be >= 2, got ", models[j].n_queries);
        }
    }
    detail::require_finite(fn, "t", tv);
    detail::require_finite(fn, "x_rot", x);
    detail::require_finite(fn, "component0.residual", component0.residual.data(), n);
    if (detail::is_non_finite(slope_norm) || slope_norm < 0.0 || detail::is_non_finite(component0.residual_variance))
    {
        detail::throw_domain(fn, "slope_norm (", slope_norm, ") and component0.residual_variance (",
                             component0.residual_variance, ") must be finite, slope_norm >= 0");
    }
    return detail::standard_errors_raw(tv.data, bv.data, x, component0, slope_norm, models, estimates);
}

/// A two-sided interval [low, high].
struct interval
{
    double low = std::numeric_limits<double>::quiet_NaN();
    double high = std::numeric_limits<double>::quiet_NaN();
    double centre = std::numeric_limits<double>::quiet_NaN();  // estimate - bias, not clipped
};

/// The confidence interval of a plasticity (docs/method.md §8.3): centred on the bias-corrected
/// estimate, estimate - bias -+ z standard_error with z = Phi^-1((1 + level) / 2) (1.96 for 0.95),
/// then clipped to [0, 1] where plasticity lives; `centre` is estimate - bias (the bias-corrected
/// estimate, not clipped). NaN when any input is NaN. level in (0, 1):
/// else std::invalid_argument; a negative standard error: std::domain_error.
inline interval plasticity_interval(double estimate, double bias, double standard_error, double level = 0.95)
{
    constexpr const char* fn = "plasticity_interval";
    if (!(level > 0.0 && level < 1.0))
    {
        detail::throw_invalid(fn, "level must be in (0, 1), got ", level);
    }
    if (standard_error < 0.0)
    {
        detail::throw_domain(fn, "standard_error must be >= 0, got ", standard_error);
    }
    interval result;
    if (detail::is_nan(estimate) || detail::is_nan(bias) || detail::is_nan(standard_error))
    {
        return result;
    }
    const double z = normal_quantile(0.5 + 0.5 * level);
    const double centre = estimate - bias;
    result.centre = centre;
    result.low = std::min(1.0, std::max(0.0, centre - z * standard_error));
    result.high = std::min(1.0, std::max(0.0, centre + z * standard_error));
    return result;
}
}  // namespace attention_plasticity

#endif
