#ifndef ATTENTION_PLASTICITY_PLASTICITY_HPP
#define ATTENTION_PLASTICITY_PLASTICITY_HPP

// The batched attention-plasticity kernel (seed 000): for key differences w (rows of W),
// a query mean mu and covariance Sigma,
//   m = W mu,  v = rowsum((W Sigma) o W),  p = Phi(m / sqrt v),  PP = 4 p (1 - p).
// v comes from GEMMs over blocks of rows, so the N x N matrix W Sigma W^T is never formed.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "normal.hpp"

namespace attention_plasticity
{
/// Plasticity of one key pair from the projected mean m = w.mu and variance v = w'Sigma w,
/// with the degenerate rule of seed 000 §3 for v <= 0: p = 1, 0, 1/2 as m >, <, = 0.
inline double pair_plasticity_from_moments(double m, double v) noexcept
{
    if (v > 0.0)
    {
        return plasticity_from_z(m / std::sqrt(v));
    }
    return m == 0.0 ? 1.0 : 0.0;
}

namespace detail
{
    // Rows per GEMM block: large enough for BLAS to reach its peak, small enough that the
    // block of W Sigma stays in cache for the row sums that follow.
    constexpr std::size_t kernel_block_rows = 256;

    template <class T>
    struct kernel_workspace
    {
        std::vector<T> product;  // block_rows x k
    };

    /// For rows of W (N x k, leading dimension ldw): adds w.mu to mean_out and
    /// w' Sigma w to var_out (double accumulation). Sigma is k x k, row-major, symmetric.
    template <class T>
    void accumulate_moments(const T* w, std::size_t n, std::size_t k, std::size_t ldw, const T* mu,
                            const T* sigma, std::size_t ld_sigma, double* mean_out, double* var_out,
                            kernel_workspace<T>& workspace)
    {
        if (k == 0 || n == 0)
        {
            return;
        }
        const std::size_t block = std::min(n, kernel_block_rows);
        workspace.product.resize(block * k);
        T* product = workspace.product.data();
        for (std::size_t start = 0; start < n; start += block)
        {
            const std::size_t rows = std::min(block, n - start);
            const T* w_block = w + start * ldw;
            gemm<T>(false, false, rows, k, k, T(1), w_block, ldw, sigma, ld_sigma, T(0), product, k);
            for (std::size_t i = 0; i < rows; ++i)
            {
                const T* wi = w_block + i * ldw;
                const T* pi = product + i * k;
                double m = 0.0;
                double v = 0.0;
                for (std::size_t j = 0; j < k; ++j)
                {
                    m += static_cast<double>(wi[j]) * static_cast<double>(mu[j]);
                    v += static_cast<double>(wi[j]) * static_cast<double>(pi[j]);
                }
                mean_out[start + i] += m;
                var_out[start + i] += v;
            }
        }
    }

    template <class T>
    double max_abs(const T* data, std::size_t rows, std::size_t cols, std::size_t ld)
    {
        double result = 0.0;
        for (std::size_t i = 0; i < rows; ++i)
        {
            for (std::size_t j = 0; j < cols; ++j)
            {
                result = std::max(result, std::fabs(static_cast<double>(data[i * ld + j])));
            }
        }
        return result;
    }

    /// Power of two that brings x near 1 (exact scaling, mantissas untouched).
    inline double power_of_two_scale(double x)
    {
        if (x == 0.0 || !std::isfinite(x))
        {
            return 1.0;
        }
        return std::ldexp(1.0, -std::ilogb(x));
    }

    /// True when products of three such magnitudes (w' Sigma w) and sums over k stay far
    /// from overflow and underflow in T.
    template <class T>
    bool in_safe_range(double max_abs_value)
    {
        constexpr int limit = std::is_same<T, float>::value ? 24 : 250;
        return max_abs_value == 0.0
            || (max_abs_value < std::ldexp(1.0, limit) && max_abs_value > std::ldexp(1.0, -limit));
    }

    /// One pass over W (rows x cols, leading dimension ld): throws std::domain_error naming
    /// the first non-finite entry, and tells whether every row is in the safe range on its own
    /// (z = m / sqrt(v) of a row does not depend on its scale, but v of a small row underflows
    /// when W is scaled as a whole).
    template <class T>
    bool check_rows(const char* function, const char* name, const T* data, std::size_t rows, std::size_t cols,
                    std::size_t ld)
    {
        bool safe = true;
        for (std::size_t i = 0; i < rows; ++i)
        {
            const T* row = data + i * ld;
            T largest = T(0);
            typename float_bits<T>::type flags = 0;  // one pass: largest |w| and the finite check
            for (std::size_t j = 0; j < cols; ++j)
            {
                largest = std::max(largest, std::fabs(row[j]));
                flags |= non_finite_flag(row[j]);
            }
            if (has_non_finite_flag<T>(flags))
            {
                const std::size_t j = first_non_finite(row, cols);
                throw_non_finite(function, name, row[j], i, j);
            }
            safe = safe && in_safe_range<T>(static_cast<double>(largest));
        }
        return safe;
    }

    /// m * factor for the z-recovery of the scaled moments: m = 0 stays 0 (0 * inf would be
    /// NaN) and a non-zero m keeps its sign when the product underflows (v may be 0).
    inline double rescale_mean(double m, double factor) noexcept
    {
        if (m == 0.0)
        {
            return 0.0;
        }
        const double r = m * factor;
        return r != 0.0 ? r : std::copysign(std::numeric_limits<double>::denorm_min(), m);
    }
}  // namespace detail

/// Per-pair projected moments m = W mu and v = diag(W Sigma W^T), in double. When inputs are
/// so large or small that they had to be rescaled (by exact powers of two) to avoid overflow or
/// underflow, each pair's (m, v) is scaled so that m / sqrt(v), the only quantity the
/// plasticity uses, is exact; the values themselves are then not w.mu and w'Sigma w.
struct pair_moments
{
    xt::xtensor<double, 1> mean;
    xt::xtensor<double, 1> variance;
};

/// Projected moments of the structured query model of SPEC §2.10: the Gaussian with mean
/// [position_mean, semantic_mean] and covariance blockdiag(position_variance, semantic_cov),
/// applied to W (N x d) whose column 0 is the positional component. No d x d matrix is built.
/// T is the arithmetic type of the GEMM (float or double); sums are accumulated in double.
template <class T, class EW, class EMu, class ESigma>
pair_moments structured_pair_moments(const xt::xexpression<EW>& differences, double position_mean,
                                     double position_variance, const xt::xexpression<EMu>& semantic_mean,
                                     const xt::xexpression<ESigma>& semantic_cov)
{
    static_assert(std::is_floating_point<T>::value, "structured_pair_moments: T must be float or double");
    constexpr const char* fn = "structured_pair_moments";
    auto w = detail::as_matrix<T>(differences, fn, "differences");
    auto mu = detail::as_vector<T>(semantic_mean, fn, "semantic_mean");
    auto sigma = detail::as_matrix<T>(semantic_cov, fn, "semantic_cov");
    if (w.cols == 0)
    {
        detail::throw_invalid(fn, "differences has 0 columns (d = 0)");
    }
    const std::size_t k = w.cols - 1;
    if (mu.size != k || sigma.rows != k || sigma.cols != k)
    {
        detail::throw_invalid(fn, "shape mismatch: differences has d = ", w.cols, " columns, so semantic_mean needs ",
                              k, " entries (got ", mu.size, ") and semantic_cov ", k, " x ", k, " (got ",
                              sigma.rows, " x ", sigma.cols, ")");
    }
    detail::require_finite(fn, "position_mean", position_mean);
    detail::require_finite(fn, "position_variance", position_variance);
    const bool rows_safe = detail::check_rows(fn, "differences", w.data, w.rows, w.cols, w.ld);
    detail::require_finite(fn, "semantic_mean", mu);
    detail::require_finite(fn, "semantic_cov", sigma);

    // Rescale by powers of two when magnitudes could overflow or underflow in T; z = m/sqrt(v)
    // is then recovered exactly from the scaled moments.
    const double mu_max = std::max(detail::max_abs(mu.data, 1, mu.size, mu.size), std::fabs(position_mean));
    const double sigma_max = std::max(detail::max_abs(sigma.data, k, k, sigma.ld), std::fabs(position_variance));
    bool w_scaled = false;
    double mu_scale = 1.0;
    double sigma_scale = 1.0;
    if (!rows_safe || !detail::in_safe_range<T>(mu_max)
        || !detail::in_safe_range<T>(sigma_max))
    {
        w_scaled = true;
        mu_scale = detail::power_of_two_scale(mu_max);
        sigma_scale = detail::power_of_two_scale(sigma_max);
        // row_scaled: every row of W gets its own power of two (z of a row ignores its scale).
        auto rescale = [](auto& view, double scale, bool row_scaled) {
            std::vector<T> copy(view.rows * view.cols);
            for (std::size_t i = 0; i < view.rows; ++i)
            {
                const double s = row_scaled ? detail::power_of_two_scale(detail::max_abs(view.row(i), 1, view.cols, view.cols))
                                            : scale;
                for (std::size_t j = 0; j < view.cols; ++j)
                {
                    copy[i * view.cols + j] = static_cast<T>(static_cast<double>(view(i, j)) * s);
                }
            }
            view.storage = std::move(copy);
            view.data = view.storage.data();
            view.ld = view.cols;
        };
        rescale(w, 1.0, true);
        rescale(sigma, sigma_scale, false);
        std::vector<T> mu_copy(mu.size);
        for (std::size_t j = 0; j < mu.size; ++j)
        {
            mu_copy[j] = static_cast<T>(static_cast<double>(mu[j]) * mu_scale);
        }
        mu.storage = std::move(mu_copy);
        mu.data = mu.storage.data();
    }

    const std::size_t n = w.rows;
    pair_moments result{xt::xtensor<double, 1>::from_shape({n}), xt::xtensor<double, 1>::from_shape({n})};
    const double scaled_position_mean = position_mean * mu_scale;
    const double scaled_position_variance = position_variance * sigma_scale;
    for (std::size_t i = 0; i < n; ++i)
    {
        const double w0 = static_cast<double>(w(i, 0));
        result.mean(i) = w0 * scaled_position_mean;
        result.variance(i) = w0 * w0 * scaled_position_variance;
    }
    detail::kernel_workspace<T> workspace;
    detail::accumulate_moments<T>(w.data + 1, n, k, w.ld, mu.data, sigma.data, sigma.ld, result.mean.data(),
                                  result.variance.data(), workspace);
    // Undo the scaling as far as z = m/sqrt(v) is concerned: row i of m carried c_i * mu_scale and
    // v carried c_i^2 * sigma_scale; z is invariant to c_i, so only mu and Sigma scales matter.
    if (w_scaled)
    {
        const double z_factor = std::sqrt(sigma_scale) / mu_scale;
        for (std::size_t i = 0; i < n; ++i)
        {
            result.mean(i) = detail::rescale_mean(result.mean(i), z_factor);
        }
    }
    return result;
}

/// Projected moments for a full Gaussian (mu, Sigma): m = W mu, v = diag(W Sigma W^T).
template <class T, class EW, class EMu, class ESigma>
pair_moments pair_moments_full(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                               const xt::xexpression<ESigma>& covariance)
{
    constexpr const char* fn = "pair_moments";
    auto w = detail::as_matrix<T>(differences, fn, "differences");
    auto mu = detail::as_vector<T>(mean, fn, "mean");
    auto sigma = detail::as_matrix<T>(covariance, fn, "covariance");
    if (w.cols == 0)
    {
        detail::throw_invalid(fn, "differences has 0 columns (d = 0)");
    }
    const std::size_t d = w.cols;
    if (mu.size != d || sigma.rows != d || sigma.cols != d)
    {
        detail::throw_invalid(fn, "shape mismatch: differences is N x ", d, ", mean has ", mu.size,
                              " entries and covariance is ", sigma.rows, " x ", sigma.cols);
    }
    // Full model = structured model with the first coordinate split off.
    xt::xtensor<T, 1> rest_mean = xt::xtensor<T, 1>::from_shape({d - 1});
    xt::xtensor<T, 2> rest_cov = xt::xtensor<T, 2>::from_shape({d - 1, d - 1});
    for (std::size_t i = 1; i < d; ++i)
    {
        rest_mean(i - 1) = mu[i];
        for (std::size_t j = 1; j < d; ++j)
        {
            rest_cov(i - 1, j - 1) = sigma(i, j);
        }
    }
    const bool coupled = [&] {
        for (std::size_t j = 1; j < d; ++j)
        {
            if (sigma(0, j) != T(0) || sigma(j, 0) != T(0))
            {
                return true;
            }
        }
        return false;
    }();
    if (!coupled)
    {
        return structured_pair_moments<T>(differences, static_cast<double>(mu[0]), static_cast<double>(sigma(0, 0)),
                                          rest_mean, rest_cov);
    }
    // General covariance: one GEMM over the whole of W.
    const bool rows_safe = detail::check_rows(fn, "differences", w.data, w.rows, w.cols, w.ld);
    detail::require_finite(fn, "mean", mu);
    detail::require_finite(fn, "covariance", sigma);
    const double mu_max = detail::max_abs(mu.data, 1, d, d);
    const double sigma_max = detail::max_abs(sigma.data, d, d, sigma.ld);
    if (!rows_safe || !detail::in_safe_range<T>(mu_max)
        || !detail::in_safe_range<T>(sigma_max))
    {
        // Scale by exact powers of two (each row of W by its own) and recover z, as in the
        // structured form.
        const double ms = detail::power_of_two_scale(mu_max);
        const double ss = detail::power_of_two_scale(sigma_max);
        xt::xtensor<T, 2> w_scaled = xt::xtensor<T, 2>::from_shape({w.rows, d});
        xt::xtensor<T, 1> mu_scaled = xt::xtensor<T, 1>::from_shape({d});
        xt::xtensor<T, 2> sigma_scaled = xt::xtensor<T, 2>::from_shape({d, d});
        for (std::size_t i = 0; i < w.rows; ++i)
        {
            const double ws = detail::power_of_two_scale(detail::max_abs(w.row(i), 1, d, d));
            for (std::size_t j = 0; j < d; ++j)
            {
                w_scaled(i, j) = static_cast<T>(static_cast<double>(w(i, j)) * ws);
            }
        }
        for (std::size_t i = 0; i < d; ++i)
        {
            mu_scaled(i) = static_cast<T>(static_cast<double>(mu[i]) * ms);
            for (std::size_t j = 0; j < d; ++j)
            {
                sigma_scaled(i, j) = static_cast<T>(static_cast<double>(sigma(i, j)) * ss);
            }
        }
        pair_moments scaled = pair_moments_full<T>(w_scaled, mu_scaled, sigma_scaled);
        const double z_factor = std::sqrt(ss) / ms;
        for (auto& m : scaled.mean)
        {
            m = detail::rescale_mean(m, z_factor);
        }
        return scaled;
    }
    const std::size_t n = w.rows;
    pair_moments result{xt::zeros<double>({n}), xt::zeros<double>({n})};
    detail::kernel_workspace<T> workspace;
    detail::accumulate_moments<T>(w.data, n, d, w.ld, mu.data, sigma.data, sigma.ld, result.mean.data(),
                                  result.variance.data(), workspace);
    return result;
}

/// PP = 4 p (1 - p) for each pair, p = Phi(m / sqrt v), from moments.
template <class R = double>
xt::xtensor<R, 1> plasticity_from_moments(const pair_moments& moments)
{
    const std::size_t n = moments.mean.size();
    if (moments.variance.size() != n)
    {
        detail::throw_invalid("plasticity_from_moments", "mean has ", n, " entries but variance has ",
                              moments.variance.size());
    }
    xt::xtensor<R, 1> result = xt::xtensor<R, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        result(i) = static_cast<R>(pair_plasticity_from_moments(moments.mean(i), moments.variance(i)));
    }
    return result;
}

/// Per-pair plasticity for key differences W (N x d) under q ~ N(mean, covariance).
/// T is the GEMM precision (default: W's value type); the result type R defaults to T.
template <class T = void, class R = void, class EW, class EMu, class ESigma>
auto pair_plasticity(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                     const xt::xexpression<ESigma>& covariance)
{
    using value_type = std::conditional_t<std::is_void<T>::value, detail::expression_value_t<EW>, T>;
    using result_type = std::conditional_t<std::is_void<R>::value, value_type, R>;
    return plasticity_from_moments<result_type>(pair_moments_full<value_type>(differences, mean, covariance));
}

/// Mean of a range of pair plasticities (double accumulation); NaN when empty.
template <class E>
double mean_plasticity(const xt::xexpression<E>& pair_values)
{
    const auto& e = pair_values.derived_cast();
    if (e.size() == 0)
    {
        return std::numeric_limits<double>::quiet_NaN();
    }
    double sum = 0.0;
    for (auto value : e)
    {
        sum += static_cast<double>(value);
    }
    return sum / static_cast<double>(e.size());
}

/// Head-level plasticity (seed 000 §5): the mean of pair_plasticity over all pairs.
template <class T = void, class EW, class EMu, class ESigma>
double head_plasticity(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                       const xt::xexpression<ESigma>& covariance)
{
    return mean_plasticity(pair_plasticity<T, double>(differences, mean, covariance));
}

/// Key differences K[first] - K[second] for index pairs into the rows of K (n x d).
template <class T = void, class EK, class EI1, class EI2>
auto key_differences(const xt::xexpression<EK>& keys, const xt::xexpression<EI1>& first,
                     const xt::xexpression<EI2>& second)
{
    using value_type = std::conditional_t<std::is_void<T>::value, detail::expression_value_t<EK>, T>;
    constexpr const char* fn = "key_differences";
    auto k = detail::as_matrix<value_type>(keys, fn, "keys");
    const auto& a = first.derived_cast();
    const auto& b = second.derived_cast();
    if (a.dimension() != 1 || b.dimension() != 1 || a.size() != b.size())
    {
        detail::throw_invalid(fn, "first and second must be 1-D of equal length, got sizes ", a.size(), " and ",
                              b.size());
    }
    const std::size_t n = a.size();
    xt::xtensor<value_type, 2> result = xt::xtensor<value_type, 2>::from_shape({n, k.cols});
    for (std::size_t i = 0; i < n; ++i)
    {
        const auto ia = static_cast<long long>(a(i));
        const auto ib = static_cast<long long>(b(i));
        if (ia < 0 || ib < 0 || static_cast<std::size_t>(ia) >= k.rows || static_cast<std::size_t>(ib) >= k.rows)
        {
            detail::throw_invalid(fn, "pair ", i, " = (", ia, ", ", ib, ") is out of range for ", k.rows, " keys");
        }
        const value_type* ra = k.row(static_cast<std::size_t>(ia));
        const value_type* rb = k.row(static_cast<std::size_t>(ib));
        for (std::size_t j = 0; j < k.cols; ++j)
        {
            result(i, j) = ra[j] - rb[j];
        }
    }
    return result;
}
}  // namespace attention_plasticity

#endif
