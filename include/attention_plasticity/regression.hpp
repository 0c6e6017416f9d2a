#ifndef ATTENTION_PLASTICITY_REGRESSION_HPP
#define ATTENTION_PLASTICITY_REGRESSION_HPP

// The position model of a head's queries: ordinary least squares of every column of X on
// the position t (docs/method.md §2.3), how well a projection of X predicts log2(t + 1)
// (§2.4), the fit of the positional component after the rotation and its residual variance
// (§2.6), and the component weights from the per-component R2 (§2.9). Double accumulation,
// whatever the input's value type (float inputs are read in place).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/dots.hpp"
#include "detail/matrix.hpp"
#include "detail/parallel.hpp"
#include "detail/row_projections.hpp"
#include "detail/row_source.hpp"
#include "detail/rows.hpp"
#include "detail/simd.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// R2 of an OLS fit x ~ a + b t with intercept from the centred sums S_tx, S_tt, S_xx
    /// (docs/method.md §2.3): 1 - SSres/SStot = S_tx^2 / (S_tt S_xx), evaluated as
    /// beta S_tx / S_xx, which keeps its relative accuracy when R2 is tiny (1 - SSres/SStot
    /// loses it to cancellation), capped to [0, 1]. 0 for a constant x (all values equal: it
    /// carries no information on t) and when t has no variance. No floor on S_xx, so R2 does
    /// not depend on the scale of the data.
    inline double ols_r_squared(double s_tx, double s_tt, double s_xx, bool x_constant) noexcept
    {
        if (x_constant || !(s_tt > 0.0) || !(s_xx > 0.0))
        {
            return 0.0;
        }
        const double r2 = (s_tx / s_tt) * (s_tx / s_xx);
        return std::min(1.0, std::max(0.0, r2));
    }

    /// Which columns of x hold one value in every row (exact comparison). Stops reading as
    /// soon as every column has varied, which for real data is after the second row.
    template <class T>
    std::vector<char> constant_columns(const row_source<T>& x)
    {
        std::vector<char> constant(x.cols, 1);
        if (x.rows < 2)
        {
            return constant;
        }
        std::vector<std::size_t> open(x.cols);
        for (std::size_t j = 0; j < x.cols; ++j)
        {
            open[j] = j;
        }
        std::vector<double> first(x.cols), row(x.cols);
        x.load(0, first.data());
        for (std::size_t i = 1; i < x.rows && !open.empty(); ++i)
        {
            x.load(i, row.data());
            std::size_t kept = 0;
            for (std::size_t j : open)
            {
                if (row[j] != first[j])
                {
                    constant[j] = 0;
                }
                else
                {
                    open[kept++] = j;
                }
            }
            open.resize(kept);
        }
        return constant;
    }

    /// True when every value of the n values is the same (n <= 1 included).
    inline bool all_equal(const double* v, std::size_t n) noexcept
    {
        return std::all_of(v, v + n, [&](double x) { return x == v[0]; });
    }
}  // namespace detail

/// Per-column fit X_d = alpha_d + beta_d t.
struct linear_fit
{
    xt::xtensor<double, 1> alpha;
    xt::xtensor<double, 1> beta;
    xt::xtensor<double, 1> r2;   // per column
    double r2_mean = 0.0;        // nanmean of r2 (NaN when there are no columns)
    double beta_norm = 0.0;      // ||beta||
    bool regressor_varies = false;
    // The fit is computed about t_origin, the smallest position (docs/method.md §2.3): the line
    // is also alpha_origin_d + beta_d (t - t_origin), which stays exact where alpha_d (its value
    // at t = 0, far from the data when the positions are large) loses the digits of the data.
    double t_origin = 0.0;
    xt::xtensor<double, 1> alpha_origin{};
};

namespace detail
{
    // The two row passes of fit_linear_raw over the values as stored (no reflection): each
    // column's sums in row order, the columns side by side (they vectorize across columns, so
    // the SIMD width changes nothing in the sums: detail/simd.hpp).

    /// sum[k] += x(i, j0 + k), k < w, over every row i in order; true when a value is not
    /// finite (only with `check`).
    template <class T>
    AP_SIMD_INLINE bool column_sums_body(const row_source<T>& x, std::size_t j0, std::size_t w, bool check,
                                            double* sum) noexcept
    {
        typename float_bits<T>::type flags = 0;
        for (std::size_t i = 0; i < x.rows; ++i)
        {
            if (x.index != nullptr && i + row_prefetch_distance < x.rows)
            {
                x.prefetch(i + row_prefetch_distance, j0, j0 + w);  // kept rows of a subsample: scattered
            }
            const T* in = x.raw(i) + j0;
            for (std::size_t k = 0; k < w; ++k)
            {
                sum[k] += static_cast<double>(in[k]);
            }
            if (check)
            {
                for (std::size_t k = 0; k < w; ++k)
                {
                    flags |= non_finite_flag(in[k]);
                }
            }
        }
        return has_non_finite_flag<T>(flags);
    }

    /// tx[k] += tc_i xc, xx[k] += xc^2 with xc = x(i, j0 + k) - centre[k] and tc_i = (t_i -
    /// t_origin) - t_shift, over every row i in order.
    template <class T>
    AP_SIMD_INLINE void centred_sums_body(const row_source<T>& x, const double* t, double t_origin, double t_shift,
                                             std::size_t j0, std::size_t w, const double* centre, double* tx,
                                             double* xx) noexcept
    {
        for (std::size_t i = 0; i < x.rows; ++i)
        {
            if (x.index != nullptr && i + row_prefetch_distance < x.rows)
            {
                x.prefetch(i + row_prefetch_distance, j0, j0 + w);
            }
            const double tc = (t[i] - t_origin) - t_shift;
            const T* in = x.raw(i) + j0;
            for (std::size_t k = 0; k < w; ++k)
            {
                const double xc = static_cast<double>(in[k]) - centre[k];
                tx[k] += tc * xc;
                xx[k] += xc * xc;
            }
        }
    }

#ifdef AP_SIMD_DISPATCH
    template <class T>
    AP_SIMD_AVX2 bool column_sums_avx2(const row_source<T>& x, std::size_t j0, std::size_t w,
                                                          bool check, double* sum) noexcept
    {
        return column_sums_body(x, j0, w, check, sum);
    }

    template <class T>
    AP_SIMD_AVX2 void centred_sums_avx2(const row_source<T>& x, const double* t, double t_origin,
                                                           double t_shift, std::size_t j0, std::size_t w,
                                                           const double* centre, double* tx, double* xx) noexcept
    {
        centred_sums_body(x, t, t_origin, t_shift, j0, w, centre, tx, xx);
    }
#endif

    template <class T>
    bool column_sums_pass(const row_source<T>& x, std::size_t j0, std::size_t w, bool check, double* sum) noexcept
    {
#ifdef AP_SIMD_DISPATCH
        if (cpu_has_avx2())
        {
            return column_sums_avx2(x, j0, w, check, sum);
        }
#endif
        return column_sums_body(x, j0, w, check, sum);
    }

    template <class T>
    void centred_sums_pass(const row_source<T>& x, const double* t, double t_origin, double t_shift, std::size_t j0,
                           std::size_t w, const double* centre, double* tx, double* xx) noexcept
    {
#ifdef AP_SIMD_DISPATCH
        if (cpu_has_avx2())
        {
            centred_sums_avx2(x, t, t_origin, t_shift, j0, w, centre, tx, xx);
            return;
        }
#endif
        centred_sums_body(x, t, t_origin, t_shift, j0, w, centre, tx, xx);
    }

    /// docs/method.md §2.3 over the rows of x: per column, the sum in row order, then the centred
    /// sums S_tx and S_xx (two passes over the rows; with several threads, each takes a range of
    /// the columns: every column's sums are the same whoever computes them). With a
    /// `check_name`, the first pass also checks every value: a non-finite one is reported as
    /// the first non-finite value of x in row order, "fn: check_name has a non-finite value
    /// (v) at row r, column j" (r a row of the caller's matrix).
    template <class T>
    linear_fit fit_linear_raw(const double* t, const row_source<T>& x, const char* fn, std::size_t threads = 1,
                              const char* check_name = nullptr)
    {
        const std::size_t n = x.rows;
        const std::size_t d = x.cols;
        if (n == 0)
        {
            throw_invalid(fn, "needs at least 1 sample, got 0");
        }
        linear_fit fit{xt::zeros<double>({d}), xt::zeros<double>({d}), xt::zeros<double>({d})};
        fit.alpha_origin = xt::zeros<double>({d});
        // t is centred about its smallest value first (docs/method.md §2.3): t - t_origin is exact
        // for integer positions up to 2^53, so the sums below are those of positions that start
        // at 0 whatever their offset (the plain mean of positions near 2^52 is off by units, and
        // S_tt by n times its square). With t_origin = 0 these are the sums of t itself.
        const double t_origin = *std::min_element(t, t + n);
        fit.t_origin = t_origin;
        double t_shift = 0.0;  // mean of t - t_origin
        for (std::size_t i = 0; i < n; ++i)
        {
            t_shift += t[i] - t_origin;
        }
        t_shift /= static_cast<double>(n);
        const double t_mean = t_origin + t_shift;
        double stt = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            const double tc = (t[i] - t_origin) - t_shift;
            stt += tc * tc;
        }
        fit.regressor_varies = stt > 0.0 && std::any_of(t, t + n, [&](double v) { return v != t[0]; });

        std::vector<double> mean(d, 0.0);
        std::vector<double> stx(d, 0.0);
        std::vector<double> sxx(d, 0.0);
        const chunks columns = even_chunks(d, worker_count(threads), 8);
        std::vector<char> non_finite(columns.count(), 0);
        // Without a reflection the signs are applied to the sums instead of every value: the
        // same numbers (s sum x = sum s x exactly, a sign change being exact).
        const bool signs_after = x.reflection == nullptr;
        parallel_for(columns.count(), threads, [&](std::size_t task, std::size_t) {
            const std::size_t j0 = columns.begin(task);
            const std::size_t j1 = columns.end(task);
            const std::size_t w = j1 - j0;
            std::vector<double> buffer(5 * w, 0.0);
            double* row = buffer.data();
            double* sum = row + w;
            double* tx = sum + w;
            double* xx = tx + w;
            double* centre = xx + w;  // the column means, of the values as read
            bool bad = false;
            if (signs_after)
            {
                bad = column_sums_pass(x, j0, w, check_name != nullptr, sum);
            }
            else
            {
                float_bits<double>::type flags = 0;
                for (std::size_t i = 0; i < n; ++i)
                {
                    x.load(i, j0, j1, row);
                    for (std::size_t k = 0; k < w; ++k)
                    {
                        sum[k] += row[k];
                    }
                    if (check_name != nullptr)
                    {
                        for (std::size_t k = 0; k < w; ++k)
                        {
                            flags |= non_finite_flag(row[k]);
                        }
                    }
                }
                bad = has_non_finite_flag<double>(flags);
            }
            if (bad)
            {
                non_finite[task] = 1;
                return;
            }
            for (std::size_t k = 0; k < w; ++k)
            {
                centre[k] = sum[k] / static_cast<double>(n);
            }
            if (signs_after)
            {
                centred_sums_pass(x, t, t_origin, t_shift, j0, w, centre, tx, xx);
            }
            for (std::size_t i = 0; !signs_after && i < n; ++i)
            {
                const double tc = (t[i] - t_origin) - t_shift;
                {
                    x.load(i, j0, j1, row);
                    for (std::size_t k = 0; k < w; ++k)
                    {
                        const double xc = row[k] - centre[k];
                        tx[k] += tc * xc;
                        xx[k] += xc * xc;
                    }
                }
            }
            for (std::size_t k = 0; k < w; ++k)
            {
                const double s = signs_after && x.sign != nullptr ? x.sign[j0 + k] : 1.0;
                mean[j0 + k] = s * centre[k];
                stx[j0 + k] = s * tx[k];
                sxx[j0 + k] = xx[k];
            }
        });
        if (std::find(non_finite.begin(), non_finite.end(), char(1)) != non_finite.end())
        {
            for (std::size_t i = 0; i < n; ++i)
            {
                if (any_non_finite(x.raw(i), d))
                {
                    throw_non_finite_row(fn, check_name, x.raw(i), x.source_row(i), d);
                }
            }
        }
        const std::vector<char> constant = constant_columns(x);
        std::vector<double> first_row(d);
        x.load(0, first_row.data());
        double norm2 = 0.0;
        double r2_sum = 0.0;
        std::size_t r2_count = 0;
        for (std::size_t j = 0; j < d; ++j)
        {
            if (constant[j] != 0 && n > 0)
            {
                // OLS of a constant on t is exactly alpha = the constant, beta = 0.
                fit.alpha(j) = fit.alpha_origin(j) = first_row[j];
                fit.beta(j) = 0.0;
                fit.r2(j) = 0.0;
            }
            else if (fit.regressor_varies)
            {
                const double beta = stx[j] / stt;
                fit.beta(j) = beta;
                fit.alpha(j) = mean[j] - beta * t_mean;
                fit.alpha_origin(j) = mean[j] - beta * t_shift;
                fit.r2(j) = ols_r_squared(stx[j], stt, sxx[j], constant[j] != 0);
            }
            else
            {
                fit.alpha(j) = fit.alpha_origin(j) = mean[j];
                fit.beta(j) = 0.0;
                fit.r2(j) = 0.0;
            }
            norm2 += fit.beta(j) * fit.beta(j);
            if (!detail::is_nan(fit.r2(j)))
            {
                r2_sum += fit.r2(j);
                ++r2_count;
            }
        }
        fit.beta_norm = std::sqrt(norm2);
        fit.r2_mean = r2_count ? r2_sum / static_cast<double>(r2_count) : std::numeric_limits<double>::quiet_NaN();
        return fit;
    }
}  // namespace detail

/// OLS of each column of X (n x d) on t (n): alpha, beta, per-column R2 and their nanmean
/// (docs/method.md §2.3). R2 = S_tx^2 / (S_tt S_xx) in [0, 1], independent of the scale of
/// the data. A constant column (all values equal): alpha = the constant, beta = 0, R2 = 0.
/// When t has no variance: alpha = column mean, beta = 0, R2 = 0. The sums are taken about the
/// smallest t (t_origin), so positions offset by a constant give the same beta, R2 and
/// alpha_origin (alpha, the line at t = 0, excepted). `threads` share the columns (0 or 1: the
/// calling thread only); any number gives the same bits.
template <class ET, class EX>
linear_fit fit_linear(const xt::xexpression<ET>& t, const xt::xexpression<EX>& x, std::size_t threads = 1)
{
    constexpr const char* fn = "fit_linear";
    auto tv = detail::as_vector<double>(t, fn, "t");
    auto xm = detail::as_matrix<detail::float_or_double_t<EX>>(x, fn, "X");
    if (tv.size != xm.rows)
    {
        detail::throw_invalid(fn, "t has ", tv.size, " samples but X has ", xm.rows, " rows");
    }
    detail::require_finite(fn, "t", tv);
    detail::require_finite(fn, "X", xm);
    return detail::fit_linear_raw(tv.data, detail::rows_of(xm), fn, threads);
}

/// How well the projection s = X beta / ||beta|| predicts y = log2(t + 1) (docs/method.md §2.4).
struct scalar_predictability
{
    double r2 = 0.0;
    double mae_baseline = 0.0;
    double mae_projection = 0.0;
    double mae_ratio = 1.0;
};

namespace detail
{
    /// y ~ a + b s by OLS; s has n entries. When s has no variance (all values equal) or
    /// is absent: b = 0, yhat = mean y, R2 = 0. R2 is 0 for a constant y (docs/method.md §2.4,
    /// the rule of §2.3).
    inline scalar_predictability scalar_fit(const std::vector<double>& y, const std::vector<double>* s)
    {
        const std::size_t n = y.size();
        scalar_predictability result;
        double y_mean = 0.0;
        for (double v : y)
        {
            y_mean += v;
        }
        y_mean /= static_cast<double>(n);
        double baseline = 0.0;
        double syy = 0.0;
        for (double v : y)
        {
            baseline += std::fabs(v - y_mean);
            syy += (v - y_mean) * (v - y_mean);
        }
        result.mae_baseline = baseline / static_cast<double>(n);
        result.mae_projection = result.mae_baseline;
        double sss = 0.0;
        double ssy = 0.0;
        double s_mean = 0.0;
        const bool s_varies = s != nullptr && !all_equal(s->data(), n);
        if (s_varies)
        {
            for (double v : *s)
            {
                s_mean += v;
            }
            s_mean /= static_cast<double>(n);
            for (std::size_t i = 0; i < n; ++i)
            {
                const double sc = (*s)[i] - s_mean;
                sss += sc * sc;
                ssy += sc * (y[i] - y_mean);
            }
        }
        if (s_varies && sss > 0.0)
        {
            const double b = ssy / sss;
            const double a = y_mean - b * s_mean;
            double abs_res = 0.0;
            for (std::size_t i = 0; i < n; ++i)
            {
                abs_res += std::fabs(y[i] - (a + b * (*s)[i]));
            }
            result.r2 = ols_r_squared(ssy, sss, syy, all_equal(y.data(), n));
            result.mae_projection = abs_res / static_cast<double>(n);
        }
        result.mae_ratio = result.mae_baseline > 0.0 ? result.mae_projection / result.mae_baseline : 1.0;
        return result;
    }

    /// y[i] = log2(t[i] + 1) of docs/method.md §2.4 for i in [first, last); throws for t <= -1.
    inline void log2_positions(const double* t, std::size_t first, std::size_t last, double* y, const char* fn)
    {
        for (std::size_t i = first; i < last; ++i)
        {
            if (!(t[i] > -1.0))
            {
                throw_domain(fn, "t[", i, "] = ", t[i], " makes log2(t + 1) undefined");
            }
            y[i] = std::log2(t[i] + 1.0);
        }
    }

    inline double squared_norm(const double* v, std::size_t d) noexcept
    {
        double norm2 = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            norm2 += v[j] * v[j];
        }
        return norm2;
    }

    /// Rows per task of the row pass of scalar_predictability_raw, and rows read together.
    constexpr std::size_t scalar_task_rows = 4096;
    constexpr std::size_t scalar_block_rows = 16;

    /// docs/method.md §2.4 over the rows of x: s_i = (x_i . beta) / ||beta|| (each dot product in
    /// the order of the components), then the fit of y = log2(t + 1) on s. The rows are read in
    /// blocks of scalar_block_rows, in fixed tasks of scalar_task_rows rows shared by `threads`
    /// threads (any number gives the same bits). With a unit v (§2.5, the pipeline), the same
    /// pass also gives each row's reflection factor factors[i] = 2 x_i . v (each sum in the order
    /// of the components, as reflection_scale) and component 0 of the reflected row,
    /// component0[i] = x_i0 - factors[i] v_0; without, component0[i] = x_i0 (either may be null).
    /// The rows of x must not be reflected when v is given.
    template <class T>
    scalar_predictability scalar_predictability_raw(const double* t, const row_source<T>& x, const double* beta,
                                                    const char* fn, std::size_t threads, const double* v = nullptr,
                                                    double* factors = nullptr, double* component0 = nullptr)
    {
        const std::size_t n = x.rows;
        const std::size_t d = x.cols;
        if (n == 0)
        {
            throw_invalid(fn, "needs at least 1 sample, got 0");
        }
        std::vector<double> y(n);
        const double norm2 = squared_norm(beta, d);
        const bool project = norm2 > 0.0;
        const double inv_norm = project ? 1.0 / std::sqrt(norm2) : 0.0;
        std::vector<double> s(project ? n : 0);
        const chunks tasks{n, scalar_task_rows};
        const projection_vectors vectors(x, beta, v);
        std::vector<std::vector<double>> blocks(std::min(worker_count(threads), tasks.count()));
        parallel_for(tasks.count(), threads, [&](std::size_t task, std::size_t worker) {
            log2_positions(t, tasks.begin(task), tasks.end(task), y.data(), fn);
            std::vector<double>& block = blocks[worker];
            block.resize(scalar_block_rows * d);
            double dots[scalar_block_rows];
            double scales[scalar_block_rows];
            double first[scalar_block_rows];
            for (std::size_t i0 = tasks.begin(task); i0 < tasks.end(task); i0 += scalar_block_rows)
            {
                const std::size_t count = std::min(scalar_block_rows, tasks.end(task) - i0);
                row_projections(x, i0, count, vectors, dots, scales, first, block.data());
                for (std::size_t r = 0; r < count; ++r)
                {
                    if (project)
                    {
                        s[i0 + r] = dots[r] * inv_norm;
                    }
                    if (v != nullptr)
                    {
                        const double factor = 2.0 * scales[r];
                        if (factors != nullptr)
                        {
                            factors[i0 + r] = factor;
                        }
                        if (component0 != nullptr)
                        {
                            component0[i0 + r] = reflected(first[r], factor, v[0]);
                        }
                    }
                    else if (component0 != nullptr)
                    {
                        component0[i0 + r] = first[r];
                    }
                }
            }
        });
        return scalar_fit(y, project ? &s : nullptr);
    }
}  // namespace detail

/// docs/method.md §2.4: y = log2(t + 1), s = X beta / ||beta||, OLS y ~ a + b s; R2 and MAEs.
/// beta = 0: R2 0 and both MAEs the baseline (ratio 1). Ratio 1 when the baseline is 0.
/// `threads` share the rows (0 or 1: the calling thread only); any number gives the same bits.
template <class ET, class EX, class EB>
scalar_predictability scalar_position_predictability(const xt::xexpression<ET>& t, const xt::xexpression<EX>& x,
                                                     const xt::xexpression<EB>& beta, std::size_t threads = 1)
{
    constexpr const char* fn = "scalar_position_predictability";
    auto tv = detail::as_vector<double>(t, fn, "t");
    auto xm = detail::as_matrix<detail::float_or_double_t<EX>>(x, fn, "X");
    auto bv = detail::as_vector<double>(beta, fn, "beta");
    if (tv.size != xm.rows || bv.size != xm.cols)
    {
        detail::throw_invalid(fn, "shape mismatch: t has ", tv.size, " samples, X is ", xm.rows, " x ", xm.cols,
                              ", beta has ", bv.size, " entries");
    }
    detail::require_finite(fn, "t", tv);
    detail::require_finite(fn, "X", xm);
    detail::require_finite(fn, "beta", bv);
    return detail::scalar_predictability_raw(tv.data, detail::rows_of(xm), bv.data, fn, threads);
}

/// The positional component of the rotated queries (docs/method.md §2.6): OLS of component 0
/// of X_rot on t, and the variance of its residual.
struct position_component_fit
{
    double alpha = 0.0;               // alpha_rot_0
    double beta = 0.0;                // beta_rot_0
    double residual_variance = 0.0;   // sigma2 = var(residual, ddof = 1)
    xt::xtensor<double, 1> residual;  // x_rot(i, 0) - (alpha + beta t_i), read by §2.7
    // The smallest position, about which the fit is computed (§2.3), and the line's value there
    // (alpha + beta t_origin without the rounding of alpha). Read only when t_origin != 0: a fit
    // set by hand with alpha and beta alone (t_origin 0) is the line alpha + beta t.
    double t_origin = 0.0;
    double alpha_origin = 0.0;
};

namespace detail
{
    /// docs/method.md §2.6 on column 0 of x (n >= 2; the other columns are not read).
    template <class T>
    position_component_fit fit_position_component_raw(const double* t, const matrix_view<T>& x, const char* fn)
    {
        const std::size_t n = x.rows;
        matrix_view<T> column0;  // column 0 only, rows still x.ld apart
        column0.data = x.data;
        column0.rows = n;
        column0.cols = 1;
        column0.ld = x.ld;
        const linear_fit fit = fit_linear_raw(t, rows_of(column0), fn);
        position_component_fit result;
        result.alpha = fit.alpha(0);
        result.beta = fit.beta(0);
        result.t_origin = fit.t_origin;
        result.alpha_origin = fit.alpha_origin(0);
        result.residual = xt::xtensor<double, 1>::from_shape({n});
        double mean = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            // About t_origin (§2.3): the same line, exact for positions far from 0.
            result.residual(i) =
                static_cast<double>(column0(i, 0)) - (result.alpha_origin + result.beta * (t[i] - result.t_origin));
            mean += result.residual(i);
        }
        mean /= static_cast<double>(n);
        double sum_squares = 0.0;
        for (std::size_t i = 0; i < n; ++i)
        {
            sum_squares += (result.residual(i) - mean) * (result.residual(i) - mean);
        }
        result.residual_variance = sum_squares / static_cast<double>(n - 1);
        return result;
    }
}  // namespace detail

/// docs/method.md §2.6: alpha_rot_0, beta_rot_0 of component 0 of the rotated queries X_rot
/// (n x d; only column 0 is read) on their positions t, sigma2 = var(residual, ddof = 1) and the
/// residual itself. n >= 2.
template <class ET, class EX>
position_component_fit fit_position_component(const xt::xexpression<ET>& t, const xt::xexpression<EX>& x_rot)
{
    constexpr const char* fn = "fit_position_component";
    auto tv = detail::as_vector<double>(t, fn, "t");
    auto xm = detail::as_matrix<detail::float_or_double_t<EX>>(x_rot, fn, "X_rot");
    if (tv.size != xm.rows)
    {
        detail::throw_invalid(fn, "t has ", tv.size, " samples but X_rot has ", xm.rows, " rows");
    }
    if (xm.rows < 2)
    {
        detail::throw_invalid(fn, "needs at least 2 rows for a ddof=1 variance, got ", xm.rows);
    }
    if (xm.cols == 0)
    {
        detail::throw_invalid(fn, "X_rot has 0 columns (d = 0)");
    }
    detail::require_finite(fn, "t", tv);
    detail::require_finite(fn, "X_rot", xm.data, xm.rows, 1, xm.ld);  // column 0, the one read
    return detail::fit_position_component_raw(tv.data, xm, fn);
}

/// Component weights (docs/method.md §2.9): w_d = max(R2_d, 0) / sum_k max(R2_k, 0), uniform
/// 1/d when that sum is 0. r2: the per-component R2 of the position regression (§2.3).
template <class E>
xt::xtensor<double, 1> component_weights(const xt::xexpression<E>& r2)
{
    constexpr const char* fn = "component_weights";
    const auto r = detail::as_vector<double>(r2, fn, "r2");
    detail::require_finite(fn, "r2", r);
    const std::size_t d = r.size;
    double positive_sum = 0.0;
    for (std::size_t j = 0; j < d; ++j)
    {
        positive_sum += std::max(r[j], 0.0);
    }
    xt::xtensor<double, 1> weight = xt::xtensor<double, 1>::from_shape({d});
    for (std::size_t j = 0; j < d; ++j)
    {
        weight(j) = positive_sum > 0.0 ? std::max(r[j], 0.0) / positive_sum : 1.0 / static_cast<double>(d);
    }
    return weight;
}
}  // namespace attention_plasticity

#endif
