#ifndef ATTENTION_PLASTICITY_INTERVALS_HPP
#define ATTENTION_PLASTICITY_INTERVALS_HPP

// Standard errors, bias and confidence intervals of AP_j and ap_overall (docs/method.md §8.3),
// by the delta method: AP_j is a smooth function of the estimated query model (the component-0
// line alpha0 + beta0 tau_j and its residual variance sigma2, the rotation direction, mu_j and
// Sigma_j) and a mean over sampled pairs. Its error is, to first order, a sum over the queries
// of their influence on these estimates, plus the pair-sampling error; its bias, to second
// order, is -(2/pi)/n_j at z = 0 and smaller elsewhere. The per-bucket pieces are
// sensitivity.hpp's (bucket_plasticity_sensitivity, pair_sampling_variance); here:
//   plasticity_standard_errors  the influences over the head, summed by sampling unit (the
//                               sequence by default: its queries, its keys' pairs; or the token):
//                               standard errors and biases of every AP_j, ap_overall, ap_first20,
//                               ap_last20 and ap_drop, and each sequence's influence
//   pair_sequences, pair_deviations  what a bucket's pairs bring to the sequence-level errors
//   plasticity_interval         estimate - bias -+ z_(1+level)/2 standard error, in [0, 1]

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
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
#include "query_model.hpp"
#include "regression.hpp"
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

/// One sequence's centred first-order influence on one quantity (docs/method.md §8.3): the
/// estimate minus its value over the population of sequences is, to first order, the sum of the
/// influences of the head's sequences, which sum to 0.
struct sequence_influence
{
    std::int64_t example_id = 0;
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
};

/// The largest tr Cov(delta) of the rotation's direction (docs/method.md §8.3, in squared
/// radians) for which the bias includes the second-order terms of the direction's error: beyond
/// it (an angular error of about 0.3 rad or more, as in heads without positional encoding) an
/// expansion in that error is not valid and its terms are left out of the bias.
inline constexpr double direction_bias_max_variance = 0.1;

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
        // Positions are taken from their smallest value t_origin (docs/method.md §2.3: t - t_origin
        // is exact, so positions far from 0 give the same numbers); t_mean and tau_shift are
        // means of t - t_origin (with t_origin 0, of t itself).
        double t_origin = 0.0;
        double t_mean = 0.0;
        std::vector<double> tau_shift;  // per model: its tau_j - t_origin
        double t_spread = 0.0;  // S_tt

        /// t_i - t_bar, computed about t_origin.
        double centred_t(double t) const noexcept { return (t - t_origin) - t_mean; }
        /// tau_j - t_bar of model j.
        double centred_tau(std::size_t j) const noexcept { return tau_shift[j] - t_mean; }
        /// t_i - tau_j of model j.
        double from_tau(double t, std::size_t j) const noexcept { return (t - t_origin) - tau_shift[j]; }
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
        s.tau_shift.assign(count_models, 0.0);
        s.t_origin = n > 0 ? *std::min_element(t, t + n) : 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            s.t_mean += t[i] - s.t_origin;
            s.residual_mean += residual[i];
            const auto it = std::lower_bound(models.begin(), models.end(), buckets[i],
                                             [](const bucket_query_model& model, std::int64_t b) {
                                                 return model.bucket < b;
                                             });
            if (it != models.end() && it->bucket == buckets[i])
            {
                s.slot[i] = static_cast<std::size_t>(it - models.begin());
                s.bucket_mean0[s.slot[i]] += static_cast<double>(x.row(i)[0]);
                s.tau_shift[s.slot[i]] += t[i] - s.t_origin;
            }
        }
        s.t_mean /= count;
        s.residual_mean /= count;
        for (std::size_t j = 0; j < count_models; ++j)
        {
            s.bucket_mean0[j] /= static_cast<double>(models[j].n_queries);
            s.tau_shift[j] /= static_cast<double>(models[j].n_queries);
        }
        std::vector<double> semantic_sum(m, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            const double dt = s.centred_t(t[i]);
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
        const double dtau = q.centred_tau(slot);
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
        const double direction_trace = trace_of(direction_cov);
        if (direction_trace > direction_bias_max_variance)
        {
            return term;  // the direction is too uncertain for an expansion in its error (§8.3)
        }
        const std::vector<double> v_shift = matrix_vector(direction_cov, mean_shift.data());
        double a_v_shift = 0.0;
        for (std::size_t k = 0; k < m; ++k)
        {
            a_v_shift += s.semantic_mean(k) * v_shift[k];
        }
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
                    const double factor = q.centred_t(t[start + i]) / (q.t_spread * slope_norm);
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
    /// 0..targets-1.
    inline void add_line_influences(const double* t, std::size_t n, const std::vector<bucket_estimate>& estimates,
                                    const query_statistics& q,
                                    const targets_of_head& d, const double* residual, double sigma2,
                                    std::size_t stride, std::vector<double>& influence)
    {
        const auto count = static_cast<double>(n);
        const bool slope_known = q.t_spread > 0.0;
        for (std::size_t c = 0; c < d.in_d.size(); ++c)
        {
            const std::size_t j = d.in_d[c];
            const bucket_sensitivity& s = estimates[j].sensitivity;
            const double dtau = q.centred_tau(j);
            for (std::size_t i = 0; i < n; ++i)
            {
                const double r = residual[i] - q.residual_mean;
                const double line = 1.0 / count + (slope_known ? dtau * q.centred_t(t[i]) / q.t_spread : 0.0);
                influence[i * stride + c] += s.position_mean * r * line + s.position_variance * (r * r - sigma2) / count;
            }
        }
    }

    /// Sequence-level errors (docs/method.md §8.3): the influence of each query through its
    /// bucket's covariance Sigma_j, (u' M u - its mean over the bucket) / (n_j - 1) with
    /// u = x_sem - mu_j, into column c of its bucket. Summed over the bucket's queries and
    /// squared, it is under normality 2 tr((M Sigma_j)^2) / (n_j - 1), the term the token-level
    /// errors add outside the influences. u' M u = 2 u' T u with T the upper triangle of the
    /// symmetric M, its diagonal halved: one TRMM per block of a bucket's rows (half a GEMM).
    template <class X>
    void add_covariance_influences(const X& x, const std::vector<bucket_query_model>& models,
                                   const std::vector<bucket_estimate>& estimates, const query_statistics& q,
                                   const targets_of_head& d, std::size_t stride, std::vector<double>& influence)
    {
        constexpr std::size_t block = 256;
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const std::size_t targets = d.in_d.size();
        if (m == 0)
        {
            return;
        }
        std::vector<std::vector<std::size_t>> rows(targets);
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::size_t target = d.target_of[std::min(q.slot[i], models.size())];
            if (target > 0)
            {
                rows[target - 1].push_back(i);
            }
        }
        std::vector<double> u(block * m), y(block * m), upper(m * m);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const std::size_t j = d.in_d[c];
            const double* mu = models[j].semantic.mean.data();
            const double* weights = estimates[j].sensitivity.semantic_covariance.data();
            for (std::size_t k = 0; k < m; ++k)
            {
                for (std::size_t l = 0; l < m; ++l)
                {
                    upper[k * m + l] = l > k ? weights[k * m + l] : (l == k ? 0.5 * weights[k * m + l] : 0.0);
                }
            }
            const std::vector<std::size_t>& own = rows[c];
            std::vector<double> form(own.size());
            double mean = 0.0;
            for (std::size_t start = 0; start < own.size(); start += block)
            {
                const std::size_t size = std::min(block, own.size() - start);
                for (std::size_t r = 0; r < size; ++r)
                {
                    const auto* row = x.row(own[start + r]);
                    for (std::size_t k = 0; k < m; ++k)
                    {
                        u[r * m + k] = static_cast<double>(row[k + 1]) - mu[k];
                    }
                }
                std::copy(u.begin(), u.begin() + static_cast<std::ptrdiff_t>(size * m), y.begin());
                trmm_right_upper<double>(size, m, upper.data(), m, y.data(), m);
                for (std::size_t r = 0; r < size; ++r)
                {
                    double dot = 0.0;
                    for (std::size_t k = 0; k < m; ++k)
                    {
                        dot += u[r * m + k] * y[r * m + k];
                    }
                    form[start + r] = 2.0 * dot;
                    mean += 2.0 * dot;
                }
            }
            mean /= static_cast<double>(own.size());
            const double dof = static_cast<double>(models[j].n_queries) - 1.0;
            for (std::size_t r = 0; r < own.size(); ++r)
            {
                influence[own[r] * stride + c] += (form[r] - mean) / dof;
            }
        }
    }

    /// Sequence-level errors: the influence of each query through its bucket's mean position
    /// tau_j, G beta0 (t_i - tau_j) / n_j (the positions are sampled with the sequences; the
    /// token-level errors condition on them).
    inline void add_position_mean_influences(const double* t, std::size_t n, const std::vector<bucket_query_model>& models,
                                             const std::vector<bucket_estimate>& estimates, const query_statistics& q,
                                             const targets_of_head& d, double beta0, std::size_t stride,
                                             std::vector<double>& influence)
    {
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::size_t target = d.target_of[std::min(q.slot[i], models.size())];
            if (target > 0)
            {
                const std::size_t j = d.in_d[target - 1];
                const double slope = estimates[j].sensitivity.position_mean * beta0;
                influence[i * stride + target - 1] +=
                    slope * q.from_tau(t[i], j) / static_cast<double>(models[j].n_queries);
            }
        }
    }

    /// The influences of the sampling units on the targets (the buckets of D), units x targets,
    /// row-major: the queries themselves (token unit) or the sums over each sequence of its
    /// queries' influences and of its pairs' (PP_p - P_cell) / P_j (sequence unit), with the
    /// number of each sequence's queries in each target's bucket (for the random weights n_j).
    struct unit_influences
    {
        std::size_t units = 0;
        std::vector<double> values;
        std::vector<double> counts;  // sequence unit only
    };

    /// The index of example id `id` in the sorted `sequences`; the id must be there.
    inline std::size_t sequence_index(const std::vector<std::int64_t>& sequences, std::int64_t id)
    {
        const auto it = std::lower_bound(sequences.begin(), sequences.end(), id);
        if (it == sequences.end() || *it != id)
        {
            throw_invalid("plasticity_standard_errors", "example id ", id,
                          " of a query or pair is not in design.sequences");
        }
        return static_cast<std::size_t>(it - sequences.begin());
    }

    inline unit_influences sequence_influences_of(const std::int64_t* example_ids, const std::vector<double>& influence,
                                                  std::size_t n, const std::vector<bucket_estimate>& estimates,
                                                  const query_statistics& q, const targets_of_head& d,
                                                  const std::vector<std::int64_t>& sequences)
    {
        const std::size_t targets = d.in_d.size();
        const std::size_t count_models = estimates.size();
        unit_influences u;
        u.units = sequences.size();
        u.values.assign(u.units * targets, 0.0);
        u.counts.assign(u.units * targets, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::size_t unit = sequence_index(sequences, example_ids[i]);
            double* values = u.values.data() + unit * targets;
            const double* phi = influence.data() + i * targets;
            for (std::size_t c = 0; c < targets; ++c)
            {
                values[c] += phi[c];
            }
            const std::size_t target = d.target_of[std::min(q.slot[i], count_models)];
            if (target > 0)
            {
                u.counts[unit * targets + target - 1] += 1.0;
            }
        }
        for (std::size_t c = 0; c < targets; ++c)
        {
            const bucket_estimate& e = estimates[d.in_d[c]];
            const auto pairs = static_cast<double>(e.pair_deviation.size());
            for (std::size_t p = 0; p < e.pair_deviation.size(); ++p)
            {
                u.values[sequence_index(sequences, e.pair_sequence[p]) * targets + c] += e.pair_deviation[p] / pairs;
            }
        }
        return u;
    }

    /// One quantity as a linear function of the targets: weights w_c and, for the sequence unit,
    /// the coefficients kappa_c of the units' query counts (the weights n_j / sum n_k are then
    /// random: d(sum_c n_c AP_c / N) = sum_c w_c dAP_c + sum_c (AP_c - A) dn_c / N).
    struct linear_quantity
    {
        std::vector<double> weight;
        std::vector<double> count_weight;
        bool defined = false;
    };

    /// The n_j-weighted mean of the targets in `member` (§2.14): its weights and count coefficients.
    inline linear_quantity weighted_mean_quantity(const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const targets_of_head& d, const std::vector<char>& member)
    {
        const std::size_t targets = d.in_d.size();
        linear_quantity out;
        out.weight.assign(targets, 0.0);
        out.count_weight.assign(targets, 0.0);
        double total = 0.0, value = 0.0;
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                total += static_cast<double>(models[d.in_d[c]].n_queries);
            }
        }
        if (total == 0.0)
        {
            return out;
        }
        out.defined = true;
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                out.weight[c] = static_cast<double>(models[d.in_d[c]].n_queries) / total;
                value += out.weight[c] * estimates[d.in_d[c]].plasticity;
            }
        }
        for (std::size_t c = 0; c < targets; ++c)
        {
            if (member[c] != 0)
            {
                out.count_weight[c] = (estimates[d.in_d[c]].plasticity - value) / total;
            }
        }
        return out;
    }

    /// sum over units of (y_u - mean y)^2, y_u = sum_c w_c U_uc (+ sum_c kappa_c counts_uc for the
    /// sequence unit); the centred y_u into `centred` when it is given.
    inline double quantity_sum_of_squares(const unit_influences& u, const linear_quantity& quantity,
                                          std::vector<double>* centred)
    {
        const std::size_t targets = quantity.weight.size();
        std::vector<double> y(u.units);
        double mean = 0.0;
        for (std::size_t i = 0; i < u.units; ++i)
        {
            const double* phi = u.values.data() + i * targets;
            double value = 0.0;
            for (std::size_t c = 0; c < targets; ++c)
            {
                value += quantity.weight[c] * phi[c];
            }
            if (!u.counts.empty())
            {
                const double* counts = u.counts.data() + i * targets;
                for (std::size_t c = 0; c < targets; ++c)
                {
                    value += quantity.count_weight[c] * counts[c];
                }
            }
            y[i] = value;
            mean += value;
        }
        mean /= static_cast<double>(u.units);
        double squares = 0.0;
        for (double& value : y)
        {
            value -= mean;
            squares += value * value;
        }
        if (centred != nullptr)
        {
            *centred = std::move(y);
        }
        return squares;
    }

    /// Column c's sum of squares about its mean (a bucket's own quantity), centred values as above.
    inline double target_sum_of_squares(const unit_influences& u, std::size_t targets, std::size_t c,
                                        std::vector<double>* centred)
    {
        double mean = 0.0;
        for (std::size_t i = 0; i < u.units; ++i)
        {
            mean += u.values[i * targets + c];
        }
        mean /= static_cast<double>(u.units);
        double squares = 0.0;
        if (centred != nullptr)
        {
            centred->resize(u.units);
        }
        for (std::size_t i = 0; i < u.units; ++i)
        {
            const double e = u.values[i * targets + c] - mean;
            squares += e * e;
            if (centred != nullptr)
            {
                (*centred)[i] = e;
            }
        }
        return squares;
    }

    /// The sorted distinct example ids of the queries and of the targets' pairs.
    inline std::vector<std::int64_t> sequences_of(const std::int64_t* example_ids, std::size_t n,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const targets_of_head& d)
    {
        std::vector<std::int64_t> ids(example_ids, example_ids + n);
        for (std::size_t j : d.in_d)
        {
            ids.insert(ids.end(), estimates[j].pair_sequence.begin(), estimates[j].pair_sequence.end());
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }

    /// plasticity_standard_errors on checked input; x as in query_statistics_of (every pass over
    /// it reads the rows in order, one at a time, but the covariance influences, which read each
    /// bucket's rows in turn). example_ids: one per query (the sequence unit), else unused.
    template <class X>
    plasticity_uncertainty standard_errors_raw(const double* t, const std::int64_t* buckets,
                                               const std::int64_t* example_ids, const X& x,
                                               const position_component_fit& component0, double slope_norm,
                                               const std::vector<bucket_query_model>& models,
                                               const std::vector<bucket_estimate>& estimates,
                                               const uncertainty_design& design)
    {
        constexpr double nan = std::numeric_limits<double>::quiet_NaN();
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const double sigma2 = component0.residual_variance;
        const double* residual = component0.residual.data();
        const bool by_sequence = design.unit == sampling_unit::sequence;
        plasticity_uncertainty out;
        out.bucket_standard_error.assign(models.size(), nan);
        out.bucket_bias.assign(models.size(), nan);
        const targets_of_head d = targets_with_plasticity(models, estimates);
        std::vector<std::int64_t> sequences;
        if (by_sequence && example_ids != nullptr)
        {
            sequences = design.sequences.empty() ? sequences_of(example_ids, n, estimates, d) : design.sequences;
            out.n_sequences = sequences.size();
        }
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

        // The quantities: AP_j of the targets, then ap_overall, ap_first20, ap_last20, ap_drop (§2.14).
        double context_length = design.context_length;
        if (is_nan(context_length))
        {
            context_length = *std::max_element(t, t + n) + 1.0;
        }
        std::vector<char> all(targets, 1), first(targets, 0), last(targets, 0);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const double tau = models[d.in_d[c]].tau;
            first[c] = static_cast<char>(tau < 0.2 * context_length);
            last[c] = static_cast<char>(tau >= 0.8 * context_length);
        }
        const linear_quantity overall = weighted_mean_quantity(models, estimates, d, all);
        const linear_quantity first20 = weighted_mean_quantity(models, estimates, d, first);
        const linear_quantity last20 = weighted_mean_quantity(models, estimates, d, last);
        linear_quantity drop;
        drop.defined = first20.defined && last20.defined;
        if (drop.defined)
        {
            drop.weight.resize(targets);
            drop.count_weight.resize(targets);
            for (std::size_t c = 0; c < targets; ++c)
            {
                drop.weight[c] = first20.weight[c] - last20.weight[c];
                drop.count_weight[c] = first20.count_weight[c] - last20.count_weight[c];
            }
        }
        const auto bias_of = [&](const linear_quantity& quantity) {
            if (!quantity.defined)
            {
                return nan;
            }
            double bias = 0.0;
            for (std::size_t c = 0; c < targets; ++c)
            {
                bias += quantity.weight[c] * terms[c].bias;
            }
            return bias;
        };
        out.bias = bias_of(overall);
        out.first20.bias = bias_of(first20);
        out.last20.bias = bias_of(last20);
        out.drop.bias = bias_of(drop);
        for (std::size_t c = 0; c < targets; ++c)
        {
            out.bucket_bias[d.in_d[c]] = terms[c].bias;
        }
        if (by_sequence && (example_ids == nullptr || sequences.size() < std::max<std::size_t>(design.min_sequences, 2)))
        {
            return out;  // no sequence-level error: NaN, never the token-level one in its place
        }

        // Per-query influences phi on every AP_j of D (columns 0..targets-1).
        std::vector<double> influence(n * targets, 0.0);
        add_mean_and_direction_influences(t, x, models, estimates, q, d, terms, slope_norm, rotation_estimated, targets,
                                          influence);
        add_line_influences(t, n, estimates, q, d, residual, sigma2, targets, influence);
        unit_influences units;
        std::vector<double> separate(targets, 0.0);  // variance outside the influences (token unit)
        if (by_sequence)
        {
            // Everything is inside the sequences' sums; but a cell of one pair gives no
            // deviation to measure its pair noise by: NaN, as for the token unit.
            for (std::size_t c = 0; c < targets; ++c)
            {
                if (is_nan(estimates[d.in_d[c]].pair_variance))
                {
                    separate[c] = nan;
                }
            }
            add_covariance_influences(x, models, estimates, q, d, targets, influence);
            add_position_mean_influences(t, n, models, estimates, q, d, component0.beta, targets, influence);
            units = sequence_influences_of(example_ids, influence, n, estimates, q, d, sequences);
        }
        else
        {
            units.units = n;
            units.values = std::move(influence);
            for (std::size_t c = 0; c < targets; ++c)
            {
                separate[c] = terms[c].covariance_variance + estimates[d.in_d[c]].pair_variance;
            }
        }
        const double scale = by_sequence ? static_cast<double>(units.units) / static_cast<double>(units.units - 1) : 1.0;
        std::vector<double> centred;
        std::vector<double>* keep = by_sequence && design.keep_influences ? &centred : nullptr;
        const auto record = [&](influence_quantity what, std::int64_t bucket) {
            if (keep == nullptr)
            {
                return;
            }
            for (std::size_t u = 0; u < units.units; ++u)
            {
                out.influences.push_back({sequences[u], what, bucket, centred[u]});
            }
        };
        const auto standard_error_of = [&](const linear_quantity& quantity, influence_quantity what) {
            if (!quantity.defined)
            {
                return nan;
            }
            double variance = scale * quantity_sum_of_squares(units, quantity, keep);
            for (std::size_t c = 0; c < targets; ++c)
            {
                if (quantity.weight[c] != 0.0)  // a NaN of a bucket outside the quantity stays out
                {
                    variance += quantity.weight[c] * quantity.weight[c] * separate[c];
                }
            }
            record(what, 0);
            return std::sqrt(variance);
        };
        out.standard_error = standard_error_of(overall, influence_quantity::ap_overall);
        out.first20.standard_error = standard_error_of(first20, influence_quantity::ap_first20);
        out.last20.standard_error = standard_error_of(last20, influence_quantity::ap_last20);
        out.drop.standard_error = standard_error_of(drop, influence_quantity::ap_drop);
        for (std::size_t c = 0; c < targets; ++c)
        {
            const std::size_t j = d.in_d[c];
            out.bucket_standard_error[j] = std::sqrt(scale * target_sum_of_squares(units, targets, c, keep) + separate[c]);
            record(influence_quantity::ap_bucket, models[j].bucket);
        }
        return out;
    }
}  // namespace detail

namespace detail
{
    /// The checks of plasticity_standard_errors that do not depend on the design.
    template <class TV, class BV, class XV>
    void check_uncertainty_input(const char* fn, const TV& tv, const BV& bv, const XV& x,
                                 const position_component_fit& component0, double slope_norm,
                                 const std::vector<bucket_query_model>& models,
                                 const std::vector<bucket_estimate>& estimates)
    {
        const std::size_t n = x.rows;
        if (x.cols == 0)
        {
            throw_invalid(fn, "x_rot has 0 columns (d = 0)");
        }
        if (tv.size != n || bv.size != n || component0.residual.size() != n)
        {
            throw_invalid(fn, "t (", tv.size, "), buckets (", bv.size, ") and component0.residual (",
                          component0.residual.size(), ") must have one entry per row of x_rot (", n, ")");
        }
        if (n < 3)
        {
            throw_invalid(fn, "needs at least 3 queries, got ", n);
        }
        if (estimates.size() != models.size())
        {
            throw_invalid(fn, "estimates has ", estimates.size(), " entries but there are ", models.size(), " models");
        }
        const std::size_t m = x.cols - 1;
        for (std::size_t j = 0; j < models.size(); ++j)
        {
            if (j > 0 && !(models[j - 1].bucket < models[j].bucket))
            {
                throw_invalid(fn, "models must be in increasing bucket id, models[", j, "].bucket = ", models[j].bucket,
                              " follows ", models[j - 1].bucket);
            }
            const bucket_sensitivity& s = estimates[j].sensitivity;
            if (models[j].semantic.mean.size() != m || models[j].semantic.covariance.shape()[0] != m
                || s.semantic_mean.size() != m || s.mixed.size() != m || s.semantic_covariance.shape()[0] != m
                || s.semantic_covariance.shape()[1] != m)
            {
                throw_invalid(fn, "models[", j, "] or estimates[", j, "] do not have d - 1 = ", m,
                              " semantic components");
            }
            if (models[j].n_queries < 2)
            {
                throw_invalid(fn, "models[", j, "].n_queries must be >= 2, got ", models[j].n_queries);
            }
            if (estimates[j].pair_sequence.size() != estimates[j].pair_deviation.size())
            {
                throw_invalid(fn, "estimates[", j, "] has ", estimates[j].pair_sequence.size(),
                              " pair sequences but ", estimates[j].pair_deviation.size(), " pair deviations");
            }
        }
        require_finite(fn, "t", tv);
        require_finite(fn, "x_rot", x);
        require_finite(fn, "component0.residual", component0.residual.data(), n);
        if (is_non_finite(slope_norm) || slope_norm < 0.0 || is_non_finite(component0.residual_variance))
        {
            throw_domain(fn, "slope_norm (", slope_norm, ") and component0.residual_variance (",
                         component0.residual_variance, ") must be finite, slope_norm >= 0");
        }
    }
}  // namespace detail

/// Standard errors and biases of every AP_j and of the aggregates ap_overall, ap_first20,
/// ap_last20 and ap_drop (docs/method.md §8.3), by the delta method. Inputs: the head's kept
/// queries after the rotation (x_rot, n x d, positions t, bucket ids and example ids), the
/// component-0 fit (§2.6: alpha, beta, residual, sigma2), ||beta|| of the position regression
/// (§2.3; the rotation's direction is an estimate when >= 1e-12), the query models (§2.10) and,
/// one per model, its bucket_estimate (AP_j, NaN outside D; its sensitivity; the pair-sampling
/// variance; for the sequence unit the pairs' sequences and deviations, pair_sequences and
/// pair_deviations). Each quantity's error is a sum of influences: of every query through mu_j,
/// the positional line, sigma2 and the rotation direction, and
///   design.unit == sequence: also through Sigma_j and the counts n_j, plus every pair's
///     (PP_p - P_cell) / P_j; summed by sequence (the query's example id, the pair keys'),
///     variance G / (G - 1) sum_e (Phi_e - mean)^2 over the G sequences: valid when the sequences
///     are independent draws, whatever the dependence of the tokens within one. NaN (and the
///     biases still given) with fewer than design.min_sequences sequences;
///   design.unit == token: summed over the queries, plus the influence through Sigma_j under
///     normality, 2 tr((M Sigma_j)^2) / (n_j - 1), and the pair-sampling variance: conditional on
///     the keys and on the query positions and buckets (queries independent given them).
/// The bias is the second-order bias of the plug-in estimate (of order 1/n_j). Shapes:
/// std::invalid_argument; non-finite values: std::domain_error.
template <class ET, class EB, class EE, class EX>
plasticity_uncertainty plasticity_standard_errors(const xt::xexpression<ET>& t, const xt::xexpression<EB>& buckets,
                                                  const xt::xexpression<EE>& example_ids,
                                                  const xt::xexpression<EX>& x_rot,
                                                  const position_component_fit& component0, double slope_norm,
                                                  const std::vector<bucket_query_model>& models,
                                                  const std::vector<bucket_estimate>& estimates,
                                                  const uncertainty_design& design)
{
    constexpr const char* fn = "plasticity_standard_errors";
    const auto tv = detail::as_vector<double>(t, fn, "t");
    const auto bv = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    const auto ev = detail::as_vector<std::int64_t>(example_ids, fn, "example_ids");
    const auto x = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "x_rot");
    detail::check_uncertainty_input(fn, tv, bv, x, component0, slope_norm, models, estimates);
    const bool by_sequence = design.unit == sampling_unit::sequence;
    if (by_sequence && ev.size != x.rows)
    {
        detail::throw_invalid(fn, "example_ids has ", ev.size, " entries but x_rot has ", x.rows,
                              " rows (the sequence unit needs one example id per query)");
    }
    if (by_sequence)
    {
        for (std::size_t j = 0; j < models.size(); ++j)
        {
            if (!detail::is_nan(estimates[j].plasticity) && estimates[j].pair_deviation.empty())
            {
                detail::throw_invalid(fn, "estimates[", j, "] has a plasticity but no pair_sequence/pair_deviation "
                                          "(the sequence unit needs them: pair_sequences, pair_deviations)");
            }
        }
        if (!std::is_sorted(design.sequences.begin(), design.sequences.end())
            || std::adjacent_find(design.sequences.begin(), design.sequences.end()) != design.sequences.end())
        {
            detail::throw_invalid(fn, "design.sequences must be sorted and distinct");
        }
    }
    if (!detail::is_nan(design.context_length) && !(design.context_length > 0.0 && std::isfinite(design.context_length)))
    {
        detail::throw_invalid(fn, "design.context_length must be > 0 and finite (or NaN), got ", design.context_length);
    }
    return detail::standard_errors_raw(tv.data, bv.data, by_sequence ? ev.data : nullptr, x, component0, slope_norm,
                                       models, estimates, design);
}

/// plasticity_standard_errors with the token as the sampling unit (no example ids): the errors
/// conditional on the keys, the query positions and buckets (docs/method.md §8.3), for
/// independent draws.
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
    detail::check_uncertainty_input(fn, tv, bv, x, component0, slope_norm, models, estimates);
    uncertainty_design design;
    design.unit = sampling_unit::token;
    return detail::standard_errors_raw(tv.data, bv.data, nullptr, x, component0, slope_norm, models, estimates, design);
}

/// The example id of each pair of the cells (docs/method.md §8.3): the sequence of its keys,
/// `key_example_ids` indexed by the pairs' rows (those of the key table the key buckets were
/// grouped from), in the cells' order (as a bucket's pair_plasticity).
template <class EE>
std::vector<std::int64_t> pair_sequences(const std::vector<cell_pairs>& cells, const xt::xexpression<EE>& key_example_ids)
{
    constexpr const char* fn = "pair_sequences";
    const auto ids = detail::as_vector<std::int64_t>(key_example_ids, fn, "key_example_ids");
    std::vector<std::int64_t> out;
    out.reserve(detail::total_pairs(cells));
    for (const cell_pairs& cell : cells)
    {
        for (std::size_t p = 0; p < cell.pairs.size(); ++p)
        {
            const std::size_t row = cell.pairs.first(p);
            if (row >= ids.size)
            {
                detail::throw_invalid(fn, "a pair of cell (", cell.q_bucket, ", ", cell.k_bucket, ") uses key row ", row,
                                      " but key_example_ids has ", ids.size, " entries");
            }
            out.push_back(ids[row]);
        }
    }
    return out;
}

/// Each pair's PP minus the mean PP of its cell (docs/method.md §8.3), in the cells' order.
template <class EP>
std::vector<double> pair_deviations(const xt::xexpression<EP>& pair_plasticity, const std::vector<cell_pairs>& cells)
{
    constexpr const char* fn = "pair_deviations";
    const auto pp = detail::as_vector<double>(pair_plasticity, fn, "pair_plasticity");
    const std::size_t total = detail::total_pairs(cells);
    if (pp.size != total)
    {
        detail::throw_invalid(fn, "pair_plasticity has ", pp.size, " entries but the cells hold ", total, " pairs");
    }
    detail::require_finite(fn, "pair_plasticity", pp);
    std::vector<double> out(total);
    std::size_t at = 0;
    for (const cell_pairs& cell : cells)
    {
        const std::size_t count = cell.pairs.size();
        double mean = 0.0;
        for (std::size_t p = 0; p < count; ++p)
        {
            mean += pp[at + p];
        }
        mean /= static_cast<double>(count > 0 ? count : 1);
        for (std::size_t p = 0; p < count; ++p)
        {
            out[at + p] = pp[at + p] - mean;
        }
        at += count;
    }
    return out;
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
