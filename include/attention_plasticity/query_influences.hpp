#ifndef ATTENTION_PLASTICITY_QUERY_INFLUENCES_HPP
#define ATTENTION_PLASTICITY_QUERY_INFLUENCES_HPP

// The first-order influences of each query on AP_j and its ingredients (docs/method.md §8.3),
// internals of plasticity_standard_errors (standard_errors.hpp): the per-bucket statistics of
// the queries, the derivatives of AP_j (bucket_terms), the targets (the buckets of D), the
// direction's covariance, and the influences through mu_j and the rotation direction, the
// positional line and sigma2, Sigma_j and the positions. Part of the intervals topic
// (intervals.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/parallel.hpp"
#include "detail/row_source.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "sensitivity.hpp"
#include "uncertainty_design.hpp"

namespace attention_plasticity
{
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

    /// Components [j0, j1) of row i of x into out, in double: x.load_columns when x has it (a
    /// reader of a row source reads only those components), else from x.row(i).
    template <class X>
    auto load_columns_of(const X& x, std::size_t i, std::size_t j0, std::size_t j1, double* out, int)
        -> decltype(x.load_columns(i, j0, j1, out), void())
    {
        x.load_columns(i, j0, j1, out);
    }

    template <class X>
    void load_columns_of(const X& x, std::size_t i, std::size_t j0, std::size_t j1, double* out, long)
    {
        const auto* row = x.row(i);
        for (std::size_t j = j0; j < j1; ++j)
        {
            out[j - j0] = static_cast<double>(row[j]);
        }
    }

    /// Asks for row i of x ahead of its use when x can (a reader of a row source), else nothing.
    template <class X>
    auto prefetch_row_of(const X& x, std::size_t i, int) -> decltype(x.prefetch(i), void())
    {
        if (i < x.rows)
        {
            x.prefetch(i);
        }
    }

    template <class X>
    void prefetch_row_of(const X&, std::size_t, long)
    {
    }

    /// X: a matrix_view, or any rows x cols reader whose row(i) stays valid until its next call
    /// (and, optionally, load_columns(i, j0, j1, out)). The semantic components' sums share the
    /// threads by ranges of columns, each column summed over the rows in order: the same sums
    /// for any number of threads.
    template <class X>
    query_statistics query_statistics_of(const double* t, const std::int64_t* buckets, const X& x,
                                         const double* residual, double sigma2,
                                         const std::vector<bucket_query_model>& models, std::size_t threads = 1)
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
        std::vector<double> x0(n);  // component 0 of every row
        // Each row's model and component 0, blocks of rows on the threads; then the sums in row order.
        const chunks row_blocks{n, 4096};
        parallel_for(row_blocks.count(), threads, [&](std::size_t b, std::size_t) {
            const X reader = x;  // a reader per task (a row source keeps its last row)
            for (std::size_t i = row_blocks.begin(b); i < row_blocks.end(b); ++i)
            {
                const auto it = std::lower_bound(models.begin(), models.end(), buckets[i],
                                                 [](const bucket_query_model& model, std::int64_t id) {
                                                     return model.bucket < id;
                                                 });
                load_columns_of(reader, i, 0, 1, &x0[i], 0);
                if (it != models.end() && it->bucket == buckets[i])
                {
                    s.slot[i] = static_cast<std::size_t>(it - models.begin());
                }
            }
        });
        for (std::size_t i = 0; i < n; ++i)
        {
            s.t_mean += t[i] - s.t_origin;
            s.residual_mean += residual[i];
            if (s.slot[i] < count_models)
            {
                s.bucket_mean0[s.slot[i]] += x0[i];
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
        for (std::size_t i = 0; i < n; ++i)
        {
            const double dt = s.centred_t(t[i]);
            s.t_spread += dt * dt;
            const double r = residual[i] - s.residual_mean;
            const double e = r * r - sigma2;
            s.residual_fourth += e * e;
            const std::size_t j = s.slot[i];
            if (j < count_models)
            {
                const double c0 = x0[i] - s.bucket_mean0[j];
                s.bucket_variance0[j] += c0 * c0;
            }
        }
        std::vector<double> semantic_sum(m, 0.0);
        const chunks columns = even_chunks(m, worker_count(threads), 8);
        parallel_for(columns.count(), threads, [&](std::size_t task, std::size_t) {
            const X reader = x;  // a reader per task (a row source keeps its last row)
            const std::size_t k0 = columns.begin(task);
            const std::size_t k1 = columns.end(task);
            std::vector<double> part(k1 - k0);
            for (std::size_t i = 0; i < n; ++i)
            {
                prefetch_row_of(reader, i + row_prefetch_distance, 0);
                load_columns_of(reader, i, 1 + k0, 1 + k1, part.data(), 0);
                const double r = residual[i] - s.residual_mean;
                for (std::size_t k = k0; k < k1; ++k)
                {
                    const double xk = part[k - k0];
                    semantic_sum[k] += xk;
                    s.residual_cross[k] += r * xk;  // sum r = 0: no centring of x needed
                }
                const std::size_t j = s.slot[i];
                if (j < count_models)
                {
                    // sum_i (x0_i - a)(x_ik - mu_jk) is the same for every a, since sum_i (x_ik - mu_jk) = 0.
                    const double c0 = x0[i] - s.bucket_mean0[j];
                    double* cross = s.bucket_cross.data() + j * m;
                    const double* mu = models[j].semantic.mean.data();
                    for (std::size_t k = k0; k < k1; ++k)
                    {
                        cross[k] += c0 * (part[k - k0] - mu[k]);
                    }
                }
            }
        });
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
                                           std::vector<double>& influence, std::size_t threads = 1)
    {
        constexpr std::size_t block = 1024;
        const std::size_t n = x.rows;
        const std::size_t m = x.cols - 1;
        const std::size_t count_models = models.size();
        const std::size_t targets = d.in_d.size();
        std::vector<double> gradients(rotation_estimated ? m * targets : 0);
        for (std::size_t c = 0; c < targets && rotation_estimated; ++c)
        {
            for (std::size_t k = 0; k < m; ++k)
            {
                gradients[k * targets + c] = terms[c].rotation_gradient[k];
            }
        }
        // Each block of rows writes its own rows of `influence`: the blocks share the threads.
        struct scratch
        {
            std::vector<double> centred, own;
        };
        std::vector<scratch> workspaces(std::min(worker_count(threads), std::max<std::size_t>(1, (n + block - 1) / block)));
        parallel_for((n + block - 1) / block, threads, [&](std::size_t b, std::size_t worker) {
            const X rows_of_x = x;  // a reader per task (a row source keeps its last row)
            std::vector<double>& centred = workspaces[worker].centred;
            std::vector<double>& own = workspaces[worker].own;
            centred.resize(rotation_estimated ? std::min(n, block) * m : 0);
            own.resize(std::min(n, block));
            const std::size_t start = b * block;
            const std::size_t size = std::min(block, n - start);
            std::fill(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(size), 0.0);
            for (std::size_t i = 0; i < size; ++i)
            {
                prefetch_row_of(rows_of_x, start + i + row_prefetch_distance, 0);
                const auto* row = rows_of_x.row(start + i);
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
        });
    }

    /// Rows per task of the passes over the queries that write only their own rows of the
    /// influences (each entry gets one addition per pass: the same bits for any grouping).
    constexpr std::size_t influence_row_block = 4096;

    /// Influences through the positional line and sigma2 (every query) into columns
    /// 0..targets-1; blocks of rows share the threads.
    inline void add_line_influences(const double* t, std::size_t n, const std::vector<bucket_estimate>& estimates,
                                    const query_statistics& q,
                                    const targets_of_head& d, const double* residual, double sigma2,
                                    std::size_t stride, std::vector<double>& influence, std::size_t threads = 1)
    {
        const auto count = static_cast<double>(n);
        const bool slope_known = q.t_spread > 0.0;
        const chunks blocks{n, influence_row_block};
        parallel_for(blocks.count(), threads, [&](std::size_t b, std::size_t) {
            for (std::size_t c = 0; c < d.in_d.size(); ++c)
            {
                const std::size_t j = d.in_d[c];
                const bucket_sensitivity& s = estimates[j].sensitivity;
                const double dtau = q.centred_tau(j);
                for (std::size_t i = blocks.begin(b); i < blocks.end(b); ++i)
                {
                    const double r = residual[i] - q.residual_mean;
                    const double line = 1.0 / count + (slope_known ? dtau * q.centred_t(t[i]) / q.t_spread : 0.0);
                    influence[i * stride + c] +=
                        s.position_mean * r * line + s.position_variance * (r * r - sigma2) / count;
                }
            }
        });
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
                                   const targets_of_head& d, std::size_t stride, std::vector<double>& influence,
                                   std::size_t threads = 1)
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
        // Each bucket writes its own column of its own rows: the buckets share the threads,
        // the largest first (ties in order) so that the threads finish together.
        std::vector<std::size_t> order(targets);
        for (std::size_t c = 0; c < targets; ++c)
        {
            order[c] = c;
        }
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return rows[a].size() > rows[b].size(); });
        struct scratch
        {
            std::vector<double> u, y, upper;
        };
        std::vector<scratch> workspaces(std::min(worker_count(threads), std::max<std::size_t>(1, targets)));
        parallel_for(targets, threads, [&](std::size_t task, std::size_t worker) {
            const std::size_t c = order[task];
            const X rows_of_x = x;  // a reader per task (a row source keeps its last row)
            std::vector<double>& u = workspaces[worker].u;
            std::vector<double>& y = workspaces[worker].y;
            std::vector<double>& upper = workspaces[worker].upper;
            u.resize(block * m);
            y.resize(block * m);
            upper.resize(m * m);
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
                    if (start + r + row_prefetch_distance < own.size())
                    {
                        prefetch_row_of(rows_of_x, own[start + r + row_prefetch_distance], 0);
                    }
                    const auto* row = rows_of_x.row(own[start + r]);
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
        });
    }

    /// Sequence-level errors: the influence of each query through its bucket's mean position
    /// tau_j, G beta0 (t_i - tau_j) / n_j (the positions are sampled with the sequences; the
    /// token-level errors condition on them).
    inline void add_position_mean_influences(const double* t, std::size_t n, const std::vector<bucket_query_model>& models,
                                             const std::vector<bucket_estimate>& estimates, const query_statistics& q,
                                             const targets_of_head& d, double beta0, std::size_t stride,
                                             std::vector<double>& influence, std::size_t threads = 1)
    {
        const chunks blocks{n, influence_row_block};
        parallel_for(blocks.count(), threads, [&](std::size_t b, std::size_t) {
            for (std::size_t i = blocks.begin(b); i < blocks.end(b); ++i)
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
        });
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
