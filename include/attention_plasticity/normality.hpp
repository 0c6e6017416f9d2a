#ifndef ATTENTION_PLASTICITY_NORMALITY_HPP
#define ATTENTION_PLASTICITY_NORMALITY_HPP

// The normality summaries of the method: the first rotated component's residual
// (docs/method.md §2.7) and the noise subspace (docs/method.md §2.8), from the moments of
// moments.hpp and the KS test of ks_test.hpp. Every statistic accumulates in double whatever
// the input's value type.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/parallel.hpp"
#include "detail/simd.hpp"
#include "detail/stream_store.hpp"
#include "detail/strided.hpp"
#include "kolmogorov.hpp"
#include "ks_test.hpp"
#include "moments.hpp"
#include "random.hpp"

namespace attention_plasticity
{
/// Summary of one sample standardized with its own mean and ddof=1 std (docs/method.md §2.7).
struct residual_normality_result
{
    double skewness;
    double excess_kurtosis;
    double ks_p_value;
};

/// Summary of the noise components, the columns of an n x m matrix (docs/method.md §2.8).
struct noise_normality_result
{
    double median_abs_skewness;
    double median_abs_kurtosis;
    double median_ks_p_value;
    double fraction_ks_p_below_alpha;
    std::size_t n_components;
    std::size_t n_ks_tested;
};

namespace detail
{
    // Zero variance in the sense of docs/method.md §2.7-2.8: SciPy's all-equal rule (also catches
    // constant data whose mean is not exactly representable).
    inline bool zero_std(const central_sums& c, std::size_t n) noexcept
    {
        return n < 2 || is_zero_variance(c) || c.m2 <= 0.0;
    }

    // x <- (x - mean) / std(ddof=1), divisor 1 under zero variance (docs/method.md §2.8).
    inline void standardize_in_place(double* x, std::size_t n, const central_sums& c) noexcept
    {
        standardize_in_place(x, n, c, zero_std(c, n));
    }

    // numpy.median of a scratch copy (partially reorders v).
    inline double median_in_place(std::vector<double>& v) noexcept
    {
        const std::size_t n = v.size();
        if (n == 0)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        const std::size_t mid = n / 2;
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
        const double upper = v[mid];
        if (n % 2)
        {
            return upper;
        }
        const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
        return lower + (upper - lower) * 0.5;  // numpy's lerp of the two middle values
    }

    /// docs/method.md §2.7 on n contiguous finite values (read, not changed).
    inline residual_normality_result standardized_normality_of(const double* values, std::size_t n, ks_workspace& ws)
    {
        if (n < 2)
        {
            return {0.0, 0.0, 1.0};
        }
        const central_sums c = central_moments(values, n);
        if (zero_std(c, n))
        {
            return {0.0, 0.0, 1.0};
        }
        residual_normality_result r;
        r.skewness = skewness_from(c, n);
        r.excess_kurtosis = excess_kurtosis_from(c, n);
        const standardization z = standardization_of(c, n, zero_std(c, n));
        const double d = ks_statistic_of(n, [&](std::size_t i) AP_SIMD_LAMBDA { return z(values[i]); }, ws);
        r.ks_p_value = kolmogn(n, d, false, false);
        return r;
    }

    /// Which of m columns get a KS test: all when max_ks_dims >= m, otherwise the draw of
    /// sample_without_replacement(m, max_ks_dims, rng(seed)) (docs/method.md §2.8, §6).
    inline std::vector<char> ks_tested_columns(std::size_t m, std::size_t max_ks_dims, std::uint64_t seed)
    {
        std::vector<char> tested(m, 0);
        rng generator(seed);
        for (std::size_t j : sample_without_replacement(m, std::min(max_ks_dims, m), generator))
        {
            tested[j] = 1;
        }
        return tested;
    }

    /// Rows [i0, i1) of columns [j0, j1) of the n x m strided matrix (element (i, j) at
    /// data[i * row_stride + j * col_stride]) into out, column j at out + (j - j0) * ld. In tiles
    /// of 8 rows: a tile of a row-major source is read once and each column receives whole
    /// cache lines, instead of strided gathers that miss the cache on every row.
    template <class T>
    void gather_columns(const T* data, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1,
                        std::ptrdiff_t row_stride, std::ptrdiff_t col_stride, double* out, std::size_t ld)
    {
        constexpr std::size_t tile = 8;
        for (std::size_t t0 = i0; t0 < i1; t0 += tile)
        {
            const std::size_t t1 = std::min(i1, t0 + tile);
            for (std::size_t j = j0; j < j1; ++j)
            {
                const T* src = data + static_cast<std::ptrdiff_t>(j) * col_stride;
                double* dst = out + (j - j0) * ld;
                for (std::size_t i = t0; i < t1; ++i)
                {
                    dst[i] = static_cast<double>(src[static_cast<std::ptrdiff_t>(i) * row_stride]);
                }
            }
        }
    }

    /// Columns per block of noise_normality_blocked for m columns: about a quarter of them (at
    /// least 8), so that a block of doubles is a quarter of the size of a float32 copy of the
    /// rows, and one pass over a row-major source reads long runs of every row.
    inline std::size_t noise_block_columns(std::size_t m) noexcept
    {
        return std::min(m, std::max<std::size_t>(8, (m / 4 + 7) / 8 * 8));
    }

    // Rows per task when a block is gathered.
    constexpr std::size_t noise_gather_rows = 4096;

    /// docs/method.md §2.8 on m columns of n >= 2 finite values that gather(i0, i1, j0, j1, out,
    /// ld) writes block by block (rows [i0, i1) of columns [j0, j1), column j at out + (j - j0) *
    /// ld, where out is 64-byte aligned and ld a multiple of 8), noise_block_columns(m) columns at
    /// a time. `threads` threads share each block's gathering
    /// (by rows) and then its columns (one KS workspace each); nothing depends on who does what.
    /// Per column: |skewness| and |excess kurtosis| from its central moments, and for the
    /// tested ones the KS p-value of the column standardized in place.
    template <class Gather>
    noise_normality_result noise_normality_blocked(std::size_t n, std::size_t m, const std::vector<char>& tested,
                                                   double p_alpha, std::size_t threads, Gather&& gather)
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        std::vector<double> abs_skew(m), abs_kurt(m), p_value(m, nan);
        const chunks blocks{m, noise_block_columns(m)};
        const chunks row_tasks{n, noise_gather_rows};
        const std::size_t ld = (n + 7) / 8 * 8;
        aligned_doubles columns;
        columns.resize(m == 0 ? 0 : blocks.chunk * ld);
        std::vector<ks_workspace> workspaces(std::min(worker_count(threads), std::max<std::size_t>(1, blocks.chunk)));
        for (std::size_t block = 0; block < blocks.count(); ++block)
        {
            const std::size_t j0 = blocks.begin(block);
            const std::size_t j1 = blocks.end(block);
            parallel_for(row_tasks.count(), threads, [&](std::size_t task, std::size_t) {
                gather(row_tasks.begin(task), row_tasks.end(task), j0, j1, columns.data(), ld);
            });
            // The tested columns (a KS statistic each: several times the cost of the moments)
            // first, so that the threads finish the block together.
            std::vector<std::size_t> order;
            for (int pass = 0; pass < 2; ++pass)
            {
                for (std::size_t j = j0; j < j1; ++j)
                {
                    if ((tested[j] != 0) == (pass == 0))
                    {
                        order.push_back(j - j0);
                    }
                }
            }
            parallel_for(j1 - j0, threads, [&](std::size_t task, std::size_t worker) {
                const std::size_t k = order[task];
                const std::size_t j = j0 + k;
                double* col = columns.data() + k * ld;
                // Skewness and kurtosis are scale-free: take them from the raw column.
                const central_sums c = central_moments(col, n);
                const bool zero = zero_std(c, n);
                abs_skew[j] = zero ? 0.0 : std::fabs(skewness_from(c, n));
                abs_kurt[j] = zero ? 0.0 : std::fabs(excess_kurtosis_from(c, n));
                if (tested[j])
                {
                    // Standardized as the KS statistic reads the values (docs/method.md §2.8).
                    const standardization z = standardization_of(c, n, zero);
                    const double d = ks_statistic_of(n, [&](std::size_t i) AP_SIMD_LAMBDA { return z(col[i]); },
                                                     workspaces[worker]);
                    p_value[j] = kolmogn(n, d, false, false);
                }
            });
        }
        std::vector<double> pvals;
        for (std::size_t j = 0; j < m; ++j)
        {
            if (tested[j])
            {
                pvals.push_back(p_value[j]);
            }
        }
        noise_normality_result r;
        r.n_components = m;
        r.n_ks_tested = pvals.size();
        std::size_t below = 0;
        for (double p : pvals)
        {
            below += p < p_alpha ? 1 : 0;
        }
        r.fraction_ks_p_below_alpha =
            pvals.empty() ? nan : static_cast<double>(below) / static_cast<double>(pvals.size());
        r.median_ks_p_value = median_in_place(pvals);
        r.median_abs_skewness = median_in_place(abs_skew);
        r.median_abs_kurtosis = median_in_place(abs_kurt);
        return r;
    }
}  // namespace detail

/// docs/method.md §2.7 for the 1-D sample x: standardized with its mean and ddof=1 std, then
/// skewness, excess kurtosis and the KS p-value against N(0, 1). Zero variance (SciPy's
/// all-equal rule) or n < 2: {0, 0, 1}. Not 1-D: std::invalid_argument; a non-finite value:
/// std::domain_error. Skewness and kurtosis are scale-free, so they come from the central
/// moments of x itself.
template <class E>
residual_normality_result standardized_normality(const xt::xexpression<E>& x)
{
    std::vector<double> values;
    detail::gather_sample("standardized_normality", "x", x, values);
    detail::ks_workspace ws;
    return detail::standardized_normality_of(values.data(), values.size(), ws);
}

/// docs/method.md §2.8 on X (n x m, each column a component, e.g. the view of columns 1..d-1
/// of the rotated n x d matrix; strided views are read in place). Each column is standardized
/// with its mean and ddof=1 std (divisor 1 under zero variance, whose skewness and kurtosis
/// are 0). Medians (numpy.median) of |skewness| and |excess kurtosis| over all m columns; KS
/// p-values over k = min(max_ks_dims, m) columns: all of them when k = m, otherwise the
/// draw of sample_without_replacement(m, k, rng(seed)). m = 0: NaNs and zero counts.
/// X not 2-D, n < 2 or a NaN p_alpha: std::invalid_argument; a non-finite value of X:
/// std::domain_error. `threads` share the rows and then the columns (0 or 1: the calling
/// thread only); any number gives the same bits.
template <class E>
noise_normality_result noise_normality(const xt::xexpression<E>& X, std::size_t max_ks_dims, double p_alpha,
                                       std::uint64_t seed, std::size_t threads = 1)
{
    constexpr const char* fn = "noise_normality";
    const E& e = X.derived_cast();
    detail::require_dimension(fn, "X", e, 2);
    if (detail::is_nan(p_alpha))
    {
        detail::throw_invalid(fn, "p_alpha is NaN");
    }
    const std::size_t n = e.shape()[0];
    const std::size_t m = e.shape()[1];
    if (m == 0)
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        return {nan, nan, nan, nan, 0, 0};
    }
    if (n < 2)
    {
        detail::throw_invalid(fn, "X needs at least 2 rows, got n = ", n);
    }
    const std::vector<char> tested = detail::ks_tested_columns(m, max_ks_dims, seed);
    return detail::with_strided<2>(e, [&](const auto* p, const auto& strides) {
        const auto row_stride = static_cast<std::ptrdiff_t>(strides[0]);
        const auto col_stride = static_cast<std::ptrdiff_t>(strides[1]);
        // The first non-finite value in row order, as the caller sees X.
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t j = 0; j < m; ++j)
            {
                const auto value = p[static_cast<std::ptrdiff_t>(i) * row_stride + static_cast<std::ptrdiff_t>(j) * col_stride];
                if (detail::is_non_finite(value))
                {
                    detail::throw_non_finite(fn, "X", value, i, j);
                }
            }
        }
        return detail::noise_normality_blocked(
            n, m, tested, p_alpha, threads,
            [&](std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1, double* out, std::size_t ld) {
                detail::gather_columns(p, i0, i1, j0, j1, row_stride, col_stride, out, ld);
            });
    });
}
}  // namespace attention_plasticity

#endif
