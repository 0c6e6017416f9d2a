#ifndef ATTENTION_PLASTICITY_PLASTICITY_HPP
#define ATTENTION_PLASTICITY_PLASTICITY_HPP

// The batched attention-plasticity kernel (docs/method.md §4, §2.13): for key differences w
// (rows of W), a query mean mu and covariance Sigma,
//   m = W mu,  v = rowsum((W Sigma) o W),  p = Phi(m / sqrt v),  PP = 4 p (1 - p).
// v comes from GEMMs over blocks of rows, so the N x N matrix W Sigma W^T is never formed.
//
// Precision: T is the arithmetic type of the GEMM; T = void (the default) means the value type
// of the differences W (double when W holds integers). Every sum accumulates in double, and
// the inputs are read in their own types before any conversion to T.

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
#include "detail/scaling.hpp"
#include "normal.hpp"

namespace attention_plasticity
{
/// Plasticity of one key pair from the projected mean m = w.mu and variance v = w'Sigma w,
/// with the degenerate rule of docs/method.md §4 for v <= 0: p = 1, 0, 1/2 as m >, <, = 0.
inline double pair_plasticity_from_moments(double m, double v) noexcept
{
    if (v > 0.0)
    {
        return plasticity_from_z(m / std::sqrt(v));
    }
    return m == 0.0 ? 1.0 : 0.0;
}

/// Per-pair projected moments m = W mu and v = diag(W Sigma W^T), in double. When inputs are
/// so large or small that they had to be rescaled (by exact powers of two) to avoid overflow or
/// underflow, each pair's (m, v) is scaled so that m / sqrt(v), the only quantity the
/// plasticity uses, is exact; the values themselves are then not w.mu and w'Sigma w.
struct pair_moments
{
    xt::xtensor<double, 1> mean;
    xt::xtensor<double, 1> variance;
};

namespace detail
{
    /// The working type of a kernel: T, or for T = void the value type of E (double when
    /// E holds integers).
    template <class T, class E>
    using working_type_t = std::conditional_t<
        std::is_void<T>::value,
        std::conditional_t<std::is_floating_point<std::remove_cv_t<expression_value_t<E>>>::value,
                           std::remove_cv_t<expression_value_t<E>>, double>,
        T>;

    /// The value type an input is read in before conversion (integers as they are).
    template <class E>
    using source_type_t = std::remove_cv_t<expression_value_t<E>>;

    // Rows per GEMM block: large enough for BLAS to reach its peak, small enough that the
    // block of W Sigma stays in cache for the row sums that follow.
    constexpr std::size_t kernel_block_rows = 256;

    template <class T>
    struct kernel_workspace
    {
        std::vector<T> product;  // block_rows x k
    };

    /// For rows of W (N x k, leading dimension ldw): adds w.mu to mean_out and
    /// w' Sigma w to var_out (double accumulation). Sigma is k x k, row-major.
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
            // Each row's sums in the order of j; four rows at a time, so that eight independent
            // chains of additions overlap (a row's order, and so its bits, whatever the grouping).
            std::size_t i = 0;
            for (; i + 4 <= rows; i += 4)
            {
                const T* wa = w_block + i * ldw;
                const T* wb = wa + ldw;
                const T* wc = wb + ldw;
                const T* wd = wc + ldw;
                const T* pa = product + i * k;
                const T* pb = pa + k;
                const T* pc = pb + k;
                const T* pd = pc + k;
                double ma = 0.0, va = 0.0, mb = 0.0, vb = 0.0, mc = 0.0, vc = 0.0, md = 0.0, vd = 0.0;
                for (std::size_t j = 0; j < k; ++j)
                {
                    const double muj = static_cast<double>(mu[j]);
                    ma += static_cast<double>(wa[j]) * muj;
                    va += static_cast<double>(wa[j]) * static_cast<double>(pa[j]);
                    mb += static_cast<double>(wb[j]) * muj;
                    vb += static_cast<double>(wb[j]) * static_cast<double>(pb[j]);
                    mc += static_cast<double>(wc[j]) * muj;
                    vc += static_cast<double>(wc[j]) * static_cast<double>(pc[j]);
                    md += static_cast<double>(wd[j]) * muj;
                    vd += static_cast<double>(wd[j]) * static_cast<double>(pd[j]);
                }
                mean_out[start + i] += ma;
                var_out[start + i] += va;
                mean_out[start + i + 1] += mb;
                var_out[start + i + 1] += vb;
                mean_out[start + i + 2] += mc;
                var_out[start + i + 2] += vc;
                mean_out[start + i + 3] += md;
                var_out[start + i + 3] += vd;
            }
            for (; i < rows; ++i)
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

    /// True when products of three such magnitudes (w' Sigma w) and sums over k stay far
    /// from overflow and underflow in T.
    template <class T>
    bool in_safe_range(double max_abs_value)
    {
        constexpr int limit = std::is_same<T, float>::value ? 24 : 250;
        return max_abs_value == 0.0
            || (max_abs_value < std::ldexp(1.0, limit) && max_abs_value > std::ldexp(1.0, -limit));
    }

    /// One pass over W: throws std::domain_error naming the first non-finite entry by row and
    /// column, and tells whether every row is in the safe range of T on its own (z = m / sqrt(v)
    /// of a row does not depend on its scale, but v of a small row underflows when W is scaled
    /// as a whole).
    template <class T, class S>
    bool check_rows(const char* function, const char* name, const matrix_view<S>& w)
    {
        bool safe = true;
        for (std::size_t i = 0; i < w.rows; ++i)
        {
            const S* row = w.row(i);
            if constexpr (std::is_floating_point<S>::value)
            {
                // One pass: largest |w| and the finite check, in four lanes (a maximum of finite
                // values does not depend on their order), so that it vectorizes.
                constexpr std::size_t lanes = 4;
                S lane_max[lanes] = {S(0), S(0), S(0), S(0)};
                typename float_bits<S>::type flags = 0;
                std::size_t j = 0;
                for (; j + lanes <= w.cols; j += lanes)
                {
                    for (std::size_t l = 0; l < lanes; ++l)
                    {
                        const S a = std::fabs(row[j + l]);
                        lane_max[l] = lane_max[l] < a ? a : lane_max[l];
                        flags |= non_finite_flag(row[j + l]);
                    }
                }
                for (; j < w.cols; ++j)
                {
                    lane_max[0] = std::max(lane_max[0], std::fabs(row[j]));
                    flags |= non_finite_flag(row[j]);
                }
                if (has_non_finite_flag<S>(flags))
                {
                    const std::size_t bad = first_non_finite(row, w.cols);
                    throw_non_finite(function, name, row[bad], i, bad);
                }
                const S largest = std::max(std::max(lane_max[0], lane_max[1]), std::max(lane_max[2], lane_max[3]));
                safe = safe && in_safe_range<T>(static_cast<double>(largest));
            }
            else
            {
                safe = safe && in_safe_range<T>(max_abs(row, 1, w.cols, w.cols));
            }
        }
        return safe;
    }

    /// The one rescaling (and conversion) of the kernel's operands: dst (rows x cols, dense) =
    /// src (leading dimension ld) with row i multiplied by 2^row_exponent(i) (exact) in double,
    /// then converted to T.
    template <class T, class S, class Exponent>
    void scale_rows(const S* src, std::size_t rows, std::size_t cols, std::size_t ld, Exponent&& row_exponent,
                    T* dst)
    {
        for (std::size_t i = 0; i < rows; ++i)
        {
            const power_of_two scale(row_exponent(i));
            for (std::size_t j = 0; j < cols; ++j)
            {
                dst[i * cols + j] = static_cast<T>(scale(static_cast<double>(src[i * ld + j])));
            }
        }
    }

    /// src as a matrix of T: the caller's buffer itself when it already is one and no scaling
    /// is needed, otherwise a copy through scale_rows.
    template <class T, class S, class Exponent>
    matrix_view<T> working_matrix(const matrix_view<S>& src, bool scaled, Exponent&& row_exponent)
    {
        matrix_view<T> out;
        out.rows = src.rows;
        out.cols = src.cols;
        if constexpr (std::is_same<S, T>::value)
        {
            if (!scaled)
            {
                out.data = src.data;
                out.ld = src.ld;
                return out;
            }
        }
        out.ld = src.cols;
        out.storage.resize(src.rows * src.cols);
        scale_rows(src.data, src.rows, src.cols, src.ld, row_exponent, out.storage.data());
        out.data = out.storage.data();
        return out;
    }

    template <class T, class S>
    vector_view<T> working_vector(const vector_view<S>& src, bool scaled, int exponent)
    {
        vector_view<T> out;
        out.size = src.size;
        if constexpr (std::is_same<S, T>::value)
        {
            if (!scaled)
            {
                out.data = src.data;
                return out;
            }
        }
        out.storage.resize(src.size);
        scale_rows(src.data, 1, src.size, src.size, [exponent](std::size_t) { return exponent; }, out.storage.data());
        out.data = out.storage.data();
        return out;
    }

    /// m 2^exponent for the z-recovery of the scaled moments (exact unless it overflows, which
    /// gives +-inf: z is then infinite too): a non-zero m keeps its sign when the result
    /// underflows (v may be 0).
    inline double rescale_mean(double m, int exponent) noexcept
    {
        const double r = std::ldexp(m, exponent);
        return r != 0.0 || m == 0.0 ? r : std::copysign(std::numeric_limits<double>::denorm_min(), m);
    }

    /// The positional block of the structured model: mean and variance of component 0.
    struct positional_block
    {
        double mean;
        double variance;
    };

    /// The kernel on checked operands read in their own types: W (n x d), the query mean and
    /// covariance (d x d), or with `position` the structured model (mu, Sigma of components
    /// 1..d-1; component 0 has the given mean and variance and is uncorrelated with the rest).
    /// When a magnitude could overflow or underflow in T, every row of W, mu and Sigma are
    /// scaled by powers of two to near 1 (Sigma by an even one), so that m / sqrt(v) of each
    /// pair is exactly what the unscaled arithmetic gives where it does not overflow, for any
    /// finite inputs (subnormals and values near DBL_MAX included); the double inputs of a
    /// float kernel are scaled before they are converted.
    /// The largest magnitudes of the model's operands (the positional block's included): what
    /// kernel_moments decides its scaling on, computed once for the blocks of one model.
    struct operand_maxima
    {
        double mu_max;
        double sigma_max;
    };

    template <class SMu, class SSigma>
    operand_maxima maxima_of(const vector_view<SMu>& mu, const matrix_view<SSigma>& sigma,
                             const positional_block* position)
    {
        const std::size_t k = sigma.rows;
        operand_maxima m{max_abs(mu.data, 1, mu.size, mu.size), max_abs(sigma.data, k, k, sigma.ld)};
        if (position != nullptr)
        {
            m.mu_max = std::max(m.mu_max, std::fabs(position->mean));
            m.sigma_max = std::max(m.sigma_max, std::fabs(position->variance));
        }
        return m;
    }

    template <class T, class SW, class SMu, class SSigma>
    pair_moments kernel_moments(const matrix_view<SW>& w, bool rows_safe, const vector_view<SMu>& mu,
                                const matrix_view<SSigma>& sigma, const positional_block* position,
                                const operand_maxima* maxima = nullptr)
    {
        const std::size_t k = sigma.rows;
        const operand_maxima m = maxima != nullptr ? *maxima : maxima_of(mu, sigma, position);
        const double mu_max = m.mu_max;
        const double sigma_max = m.sigma_max;
        const bool scaled = !rows_safe || !in_safe_range<T>(mu_max) || !in_safe_range<T>(sigma_max);
        const int mu_exponent = scaled ? power_of_two_exponent(mu_max) : 0;
        const int sigma_exponent = scaled ? even_power_of_two_exponent(sigma_max) : 0;
        // Each row of W gets its own power of two: z of a row does not depend on its scale.
        const matrix_view<T> wt = working_matrix<T>(w, scaled, [&](std::size_t i) {
            return scaled ? power_of_two_exponent(max_abs(w.row(i), 1, w.cols, w.cols)) : 0;
        });
        const vector_view<T> mut = working_vector<T>(mu, scaled, mu_exponent);
        const matrix_view<T> sigmat =
            working_matrix<T>(sigma, scaled, [sigma_exponent](std::size_t) { return sigma_exponent; });

        const std::size_t n = w.rows;
        pair_moments result{xt::zeros<double>({n}), xt::zeros<double>({n})};
        if (n == 0)
        {
            return result;  // no rows: W's data pointer may be null, so no offset from it
        }
        const T* w_rest = wt.data;
        if (position != nullptr)
        {
            const double scaled_mean = power_of_two(mu_exponent)(position->mean);
            const double scaled_variance = power_of_two(sigma_exponent)(position->variance);
            for (std::size_t i = 0; i < n; ++i)
            {
                const double w0 = static_cast<double>(wt(i, 0));
                result.mean(i) = w0 * scaled_mean;
                result.variance(i) = w0 * w0 * scaled_variance;
            }
            w_rest = wt.data + 1;
        }
        kernel_workspace<T> workspace;
        accumulate_moments<T>(w_rest, n, k, wt.ld, mut.data, sigmat.data, sigmat.ld, result.mean.data(),
                              result.variance.data(), workspace);
        // Undo the scaling as far as z = m/sqrt(v) is concerned: row i of m carried c_i 2^mu_exponent
        // and v carried c_i^2 2^sigma_exponent; z is invariant to c_i, and 2^(sigma_exponent / 2) is
        // exact, so m 2^(sigma_exponent / 2 - mu_exponent) / sqrt(v) is the unscaled z.
        if (scaled)
        {
            const int z_exponent = sigma_exponent / 2 - mu_exponent;
            for (std::size_t i = 0; i < n; ++i)
            {
                result.mean(i) = rescale_mean(result.mean(i), z_exponent);
            }
        }
        return result;
    }

    /// std::domain_error unless every diagonal entry of the square matrix is >= 0.
    template <class S>
    void require_nonnegative_diagonal(const char* function, const char* name, const matrix_view<S>& m)
    {
        for (std::size_t i = 0; i < m.rows; ++i)
        {
            if (m(i, i) < S(0))
            {
                throw_domain(function, name, " has a negative variance (", static_cast<double>(m(i, i)), ") at row ",
                             i, ", column ", i);
            }
        }
    }

    /// The full-covariance kernel behind pair_moments_full, pair_plasticity and
    /// head_plasticity, with their function name in every error.
    template <class T, class EW, class EMu, class ESigma>
    pair_moments full_moments(const char* fn, const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                              const xt::xexpression<ESigma>& covariance)
    {
        static_assert(std::is_floating_point<T>::value, "attention_plasticity: T must be float or double");
        const auto w = as_matrix<source_type_t<EW>>(differences, fn, "differences");
        const auto mu = as_vector<source_type_t<EMu>>(mean, fn, "mean");
        const auto sigma = as_matrix<source_type_t<ESigma>>(covariance, fn, "covariance");
        const std::size_t d = w.cols;
        if (d == 0)
        {
            throw_invalid(fn, "differences has 0 columns (d = 0)");
        }
        if (mu.size != d)
        {
            throw_invalid(fn, "mean has ", mu.size, " entries but differences has d = ", d, " columns");
        }
        if (sigma.rows != d || sigma.cols != d)
        {
            throw_invalid(fn, "covariance must be ", d, " x ", d, " (d = ", d, "), got ", sigma.rows, " x ", sigma.cols);
        }
        const bool rows_safe = check_rows<T>(fn, "differences", w);
        require_finite(fn, "mean", mu);
        require_finite(fn, "covariance", sigma);
        require_nonnegative_diagonal(fn, "covariance", sigma);

        bool coupled = false;  // does component 0 correlate with the others?
        for (std::size_t j = 1; j < d && !coupled; ++j)
        {
            coupled = sigma(0, j) != 0 || sigma(j, 0) != 0;
        }
        if (coupled)
        {
            return kernel_moments<T>(w, rows_safe, mu, sigma, nullptr);
        }
        // Uncoupled: the structured form, with no copy of the blocks.
        const positional_block position{static_cast<double>(mu[0]), static_cast<double>(sigma(0, 0))};
        vector_view<source_type_t<EMu>> mu_rest;
        mu_rest.data = mu.data + 1;
        mu_rest.size = d - 1;
        matrix_view<source_type_t<ESigma>> sigma_rest;
        sigma_rest.data = sigma.data + sigma.ld + 1;
        sigma_rest.rows = sigma_rest.cols = d - 1;
        sigma_rest.ld = sigma.ld;
        return kernel_moments<T>(w, rows_safe, mu_rest, sigma_rest, &position);
    }
}  // namespace detail

namespace detail
{
    /// The operands of structured_pair_moments but W, checked as it checks them, and their
    /// largest magnitudes: made once for the blocks of W of one model (query_bucket_plasticity),
    /// whose blocks then need only check_rows and kernel_moments. For a finite W (the blocks of
    /// key differences, which are checked as they are formed) the same errors in the same order.
    template <class SMu, class SSigma>
    struct structured_operands
    {
        vector_view<SMu> mu;
        matrix_view<SSigma> sigma;
        positional_block position{};
        operand_maxima maxima{};

        template <class EMu, class ESigma>
        structured_operands(const char* fn, std::size_t d, double position_mean, double position_variance,
                            const xt::xexpression<EMu>& semantic_mean, const xt::xexpression<ESigma>& semantic_cov)
            : mu(as_vector<SMu>(semantic_mean, fn, "semantic_mean")),
              sigma(as_matrix<SSigma>(semantic_cov, fn, "semantic_cov"))
        {
            if (d == 0)
            {
                throw_invalid(fn, "differences has 0 columns (d = 0)");
            }
            const std::size_t k = d - 1;
            if (mu.size != k)
            {
                throw_invalid(fn, "semantic_mean has ", mu.size, " entries but differences has d = ", d,
                              " columns (d - 1 = ", k, " semantic components)");
            }
            if (sigma.rows != k || sigma.cols != k)
            {
                throw_invalid(fn, "semantic_cov must be ", k, " x ", k, " (d - 1 = ", k, "), got ", sigma.rows,
                              " x ", sigma.cols);
            }
            require_finite(fn, "position_mean", position_mean);
            require_finite(fn, "position_variance", position_variance);
            if (position_variance < 0.0)
            {
                throw_domain(fn, "position_variance must be >= 0, got ", position_variance);
            }
            require_finite(fn, "semantic_mean", mu);
            require_finite(fn, "semantic_cov", sigma);
            require_nonnegative_diagonal(fn, "semantic_cov", sigma);
            position = positional_block{position_mean, position_variance};
            maxima = maxima_of(mu, sigma, &position);
        }

        structured_operands(const structured_operands&) = delete;
        structured_operands& operator=(const structured_operands&) = delete;

        /// structured_pair_moments of a block W of the model's differences, in precision T.
        template <class T, class SW>
        pair_moments moments(const char* fn, const matrix_view<SW>& w) const
        {
            const bool rows_safe = check_rows<T>(fn, "differences", w);
            return kernel_moments<T>(w, rows_safe, mu, sigma, &position, &maxima);
        }
    };
}  // namespace detail

/// Projected moments of the structured query model of docs/method.md §2.10: the Gaussian with
/// mean [position_mean, semantic_mean] and covariance blockdiag(position_variance, semantic_cov),
/// applied to W (N x d) whose column 0 is the positional component. No d x d matrix is built.
/// T: the precision of the GEMM (T = void: the value type of W); sums accumulate in double.
/// Shapes: std::invalid_argument; non-finite values or negative variances: std::domain_error.
template <class T = void, class EW, class EMu, class ESigma>
pair_moments structured_pair_moments(const xt::xexpression<EW>& differences, double position_mean,
                                     double position_variance, const xt::xexpression<EMu>& semantic_mean,
                                     const xt::xexpression<ESigma>& semantic_cov)
{
    using value_type = detail::working_type_t<T, EW>;
    static_assert(std::is_floating_point<value_type>::value, "structured_pair_moments: T must be float or double");
    constexpr const char* fn = "structured_pair_moments";
    const auto w = detail::as_matrix<detail::source_type_t<EW>>(differences, fn, "differences");
    const auto mu = detail::as_vector<detail::source_type_t<EMu>>(semantic_mean, fn, "semantic_mean");
    const auto sigma = detail::as_matrix<detail::source_type_t<ESigma>>(semantic_cov, fn, "semantic_cov");
    if (w.cols == 0)
    {
        detail::throw_invalid(fn, "differences has 0 columns (d = 0)");
    }
    const std::size_t k = w.cols - 1;
    if (mu.size != k)
    {
        detail::throw_invalid(fn, "semantic_mean has ", mu.size, " entries but differences has d = ", w.cols,
                              " columns (d - 1 = ", k, " semantic components)");
    }
    if (sigma.rows != k || sigma.cols != k)
    {
        detail::throw_invalid(fn, "semantic_cov must be ", k, " x ", k, " (d - 1 = ", k, "), got ", sigma.rows, " x ",
                              sigma.cols);
    }
    detail::require_finite(fn, "position_mean", position_mean);
    detail::require_finite(fn, "position_variance", position_variance);
    if (position_variance < 0.0)
    {
        detail::throw_domain(fn, "position_variance must be >= 0, got ", position_variance);
    }
    const bool rows_safe = detail::check_rows<value_type>(fn, "differences", w);
    detail::require_finite(fn, "semantic_mean", mu);
    detail::require_finite(fn, "semantic_cov", sigma);
    detail::require_nonnegative_diagonal(fn, "semantic_cov", sigma);
    const detail::positional_block position{position_mean, position_variance};
    return detail::kernel_moments<value_type>(w, rows_safe, mu, sigma, &position);
}

/// Projected moments for a full Gaussian (mean, covariance): m = W mu, v = diag(W Sigma W^T).
/// T: the precision of the GEMM (T = void: the value type of W). A covariance whose first
/// component is uncorrelated with the others takes the structured path (no copy).
/// Shapes: std::invalid_argument; non-finite values or negative variances: std::domain_error.
template <class T = void, class EW, class EMu, class ESigma>
pair_moments pair_moments_full(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                               const xt::xexpression<ESigma>& covariance)
{
    return detail::full_moments<detail::working_type_t<T, EW>>("pair_moments_full", differences, mean, covariance);
}

/// PP = 4 p (1 - p) for each pair, p = Phi(m / sqrt v), from moments. R: the result's value
/// type (R = void: double, the moments' type).
template <class R = void>
auto plasticity_from_moments(const pair_moments& moments)
{
    using result_type = std::conditional_t<std::is_void<R>::value, double, R>;
    const std::size_t n = moments.mean.size();
    if (moments.variance.size() != n)
    {
        detail::throw_invalid("plasticity_from_moments", "moments.mean has ", n, " entries but moments.variance has ",
                              moments.variance.size());
    }
    xt::xtensor<result_type, 1> result = xt::xtensor<result_type, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        result(i) = static_cast<result_type>(pair_plasticity_from_moments(moments.mean(i), moments.variance(i)));
    }
    return result;
}

/// Per-pair plasticity for key differences W (N x d) under q ~ N(mean, covariance).
/// T: the precision of the GEMM (T = void: the value type of W); R: the result's value type
/// (R = void: T). Errors as pair_moments_full, named after pair_plasticity.
template <class T = void, class R = void, class EW, class EMu, class ESigma>
auto pair_plasticity(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                     const xt::xexpression<ESigma>& covariance)
{
    using value_type = detail::working_type_t<T, EW>;
    using result_type = std::conditional_t<std::is_void<R>::value, value_type, R>;
    return plasticity_from_moments<result_type>(
        detail::full_moments<value_type>("pair_plasticity", differences, mean, covariance));
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

/// Head-level plasticity (docs/method.md §4): the mean of pair_plasticity over all pairs.
/// T as pair_plasticity; errors named after head_plasticity.
template <class T = void, class EW, class EMu, class ESigma>
double head_plasticity(const xt::xexpression<EW>& differences, const xt::xexpression<EMu>& mean,
                       const xt::xexpression<ESigma>& covariance)
{
    return mean_plasticity(plasticity_from_moments(
        detail::full_moments<detail::working_type_t<T, EW>>("head_plasticity", differences, mean, covariance)));
}

namespace detail
{
    /// The check of a row of key differences out = ra - rb (rows ia and ib of the keys): a
    /// non-finite key is named by its row and column, a finite pair whose difference
    /// overflows the result type by both rows.
    template <class V, class S>
    void check_difference_row(const char* fn, const V* out, const S* ra, const S* rb, std::size_t ia, std::size_t ib,
                              std::size_t cols)
    {
        if (any_non_finite(out, cols))
        {
            const std::size_t j = first_non_finite(out, cols);
            if (is_non_finite(ra[j]) || is_non_finite(rb[j]))
            {
                const bool first_bad = is_non_finite(ra[j]);
                throw_non_finite(fn, "keys", first_bad ? ra[j] : rb[j], first_bad ? ia : ib, j);
            }
            throw_domain(fn, "keys[", ia, "] - keys[", ib, "] at column ", j, " (", static_cast<double>(ra[j]), " - ",
                         static_cast<double>(rb[j]), ") overflows the result type");
        }
    }
}  // namespace detail

/// Key differences K[first] - K[second] for index pairs into the rows of K (n x d). T: the
/// value type of the result (T = void: the value type of K). An index out of range or
/// mismatched index lengths: std::invalid_argument; a non-finite key or a difference that
/// overflows T: std::domain_error.
template <class T = void, class EK, class EI1, class EI2>
auto key_differences(const xt::xexpression<EK>& keys, const xt::xexpression<EI1>& first,
                     const xt::xexpression<EI2>& second)
{
    using value_type = detail::working_type_t<T, EK>;
    using source_type = detail::source_type_t<EK>;
    // Differences in the wider of the two types (in T itself when the keys are T).
    using difference_type = std::common_type_t<
        std::conditional_t<std::is_floating_point<source_type>::value, source_type, double>, value_type>;
    constexpr const char* fn = "key_differences";
    const auto k = detail::as_matrix<source_type>(keys, fn, "keys");
    const auto& a = first.derived_cast();
    const auto& b = second.derived_cast();
    detail::require_dimension(fn, "first", a, 1);
    detail::require_dimension(fn, "second", b, 1);
    if (a.size() != b.size())
    {
        detail::throw_invalid(fn, "first has ", a.size(), " entries but second has ", b.size());
    }
    const std::size_t n = a.size();
    xt::xtensor<value_type, 2> result = xt::xtensor<value_type, 2>::from_shape({n, k.cols});
    const auto row_index = [&](const char* name, auto index, std::size_t i) {
        bool negative = false;
        if constexpr (std::is_signed<decltype(index)>::value)
        {
            negative = index < 0;
        }
        if (negative || static_cast<std::size_t>(index) >= k.rows)
        {
            detail::throw_invalid(fn, name, "[", i, "] = ", index, " is out of range for ", k.rows,
                                  " keys (rows of keys)");
        }
        return static_cast<std::size_t>(index);
    };
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t ia = row_index("first", a(i), i);
        const std::size_t ib = row_index("second", b(i), i);
        const source_type* ra = k.row(ia);
        const source_type* rb = k.row(ib);
        value_type* out = result.data() + i * k.cols;
        for (std::size_t j = 0; j < k.cols; ++j)
        {
            out[j] = static_cast<value_type>(static_cast<difference_type>(ra[j]) - static_cast<difference_type>(rb[j]));
        }
        detail::check_difference_row(fn, out, ra, rb, ia, ib, k.cols);
    }
    return result;
}
}  // namespace attention_plasticity

#endif
