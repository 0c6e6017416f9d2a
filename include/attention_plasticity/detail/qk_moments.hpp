#ifndef ATTENTION_PLASTICITY_DETAIL_QK_MOMENTS_HPP
#define ATTENTION_PLASTICITY_DETAIL_QK_MOMENTS_HPP

// The first and second moments of the rows [x, t] of one kind of a head (queries or keys),
// which are all that the companion measures of docs/method.md §8.5 need: the means of x and t
// and the centred sums of products S_xt (d), S_tt and (for the PCA roles only) S_xx (d x d).
// Two passes over the rows (means, then the centred rows: with S_xx, with t appended through
// SYRK in blocks; without, O(n d)), in fixed chunks reduced in chunk order, so the result does
// not depend on the number of threads; no n x n matrix is formed.
//
// The sums are taken about the kind's first row [x_0, t_0] (docs/method.md §7.3, §8.5): the
// mean is x_0 + mean(x - x_0) and the centred values (x - x_0) - mean(x - x_0). A column that
// holds one value therefore centres to exact zeros (its mean need not round-trip: 0.1 summed n
// times and divided by n is not 0.1, and the difference would be a spread of pure rounding
// noise), and positions far from 0 centre as exactly as small ones (t - t_0 is exact for
// integer positions up to 2^53).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "blas.hpp"
#include "errors.hpp"
#include "finite.hpp"
#include "matrix.hpp"
#include "parallel.hpp"
#include "row_source.hpp"
#include "rows.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// Moments of the rows z_i = [x_i, t_i] (d + 1 entries) of one kind.
    struct kind_moments
    {
        std::size_t n = 0;
        std::size_t d = 0;
        std::vector<double> mean;     // d + 1: the mean of x, then the mean of t
        std::vector<double> origin;   // d + 1: the first row, about which the sums are taken
        std::vector<double> shift;    // d + 1: mean - origin, as computed (exact 0 for a constant column)
        std::vector<double> scatter;  // (d + 1)^2, full: sum_i (z_i - mean)(z_i - mean)^T
        bool has_sxx = false;         // without: only the last row and column (S_xt, S_tt) are set

        double sxx(std::size_t i, std::size_t j) const noexcept { return scatter[i * (d + 1) + j]; }
        double sxt(std::size_t i) const noexcept { return scatter[i * (d + 1) + d]; }
        double stt() const noexcept { return scatter[d * (d + 1) + d]; }
        double mean_t() const noexcept { return mean[d]; }

        /// mean_j of this kind minus mean_j of `other`, from the origins and the shifts: exact 0
        /// for a column that holds the same value in both kinds, exact for positions far from 0.
        double mean_difference(const kind_moments& other, std::size_t j) const noexcept
        {
            return (origin[j] - other.origin[j]) + (shift[j] - other.shift[j]);
        }
    };

    constexpr std::size_t qk_moment_chunk_rows = 8192;
    constexpr std::size_t qk_moment_block_rows = 256;

    /// The passes of kind_moments_of, one chunk at a time, so that the chunks of several
    /// kinds (and other row work, means_chunk's per_row) can share one loop of tasks: first
    /// means_chunk for every chunk, then finish_means, scatter_chunk for every chunk, finish.
    template <class T>
    class kind_moment_passes
    {
    public:
        kind_moment_passes(const row_source<T>& rows, const double* t, bool with_sxx)
            : m_rows(rows), m_t(t), m_pieces{rows.rows, qk_moment_chunk_rows}
        {
            m.n = rows.rows;
            m.d = rows.cols;
            m.has_sxx = with_sxx;
            m.origin.assign(m.d + 1, 0.0);
            if (m.n > 0)
            {
                rows.load(0, m.origin.data());
                m.origin[m.d] = t[0];
            }
            m_partial.assign(tasks() * (m.d + 1), 0.0);
        }

        std::size_t tasks() const noexcept { return m_pieces.count(); }

        /// Chunk c's sums about the origin, in row order; per_row(i, row) sees each row as read.
        template <class PerRow>
        void means_chunk(std::size_t c, PerRow&& per_row)
        {
            const std::size_t d = m.d;
            const double* origin = m.origin.data();
            std::vector<double> row(d);
            double* sum = m_partial.data() + c * (d + 1);
            for (std::size_t i = m_pieces.begin(c); i < m_pieces.end(c); ++i)
            {
                if (m_rows.index != nullptr && i + row_prefetch_distance < m.n)
                {
                    m_rows.prefetch(i + row_prefetch_distance);
                }
                m_rows.load(i, row.data());
                for (std::size_t j = 0; j < d; ++j)
                {
                    sum[j] += row[j] - origin[j];
                }
                sum[d] += m_t[i] - origin[d];
                per_row(i, row.data());
            }
        }

        void means_chunk(std::size_t c)
        {
            means_chunk(c, [](std::size_t, const double*) {});
        }

        /// The means from the chunks' sums, in chunk order.
        void finish_means()
        {
            const std::size_t w = m.d + 1;
            m.shift.assign(w, 0.0);
            for (std::size_t c = 0; c < tasks(); ++c)
            {
                for (std::size_t j = 0; j < w; ++j)
                {
                    m.shift[j] += m_partial[c * w + j];
                }
            }
            m.mean.assign(w, 0.0);
            for (std::size_t j = 0; j < w; ++j)
            {
                m.shift[j] /= static_cast<double>(m.n);
                m.mean[j] = m.origin[j] + m.shift[j];
            }
            m_partial.assign(tasks() * (m.has_sxx ? w * w : w), 0.0);
        }

        /// Chunk c's centred sums: S_xt and S_tt alone (each chunk's sums of (t - mean_t)(x -
        /// mean) in row order), or with S_xx the centred rows [x - mean, t - mean_t] through SYRK.
        void scatter_chunk(std::size_t c)
        {
            const std::size_t d = m.d;
            const std::size_t w = d + 1;
            const double* origin = m.origin.data();
            const double* shift = m.shift.data();
            if (!m.has_sxx)
            {
                std::vector<double> row(d);
                double* sum = m_partial.data() + c * w;
                for (std::size_t i = m_pieces.begin(c); i < m_pieces.end(c); ++i)
                {
                    if (m_rows.index != nullptr && i + row_prefetch_distance < m.n)
                    {
                        m_rows.prefetch(i + row_prefetch_distance);
                    }
                    m_rows.load(i, row.data());
                    const double dt = (m_t[i] - origin[d]) - shift[d];
                    for (std::size_t j = 0; j < d; ++j)
                    {
                        sum[j] += dt * ((row[j] - origin[j]) - shift[j]);
                    }
                    sum[d] += dt * dt;
                }
                return;
            }
            std::vector<double> block(qk_moment_block_rows * w);
            double* sum = m_partial.data() + c * w * w;
            for (std::size_t b = m_pieces.begin(c); b < m_pieces.end(c); b += qk_moment_block_rows)
            {
                const std::size_t count = std::min(qk_moment_block_rows, m_pieces.end(c) - b);
                for (std::size_t r = 0; r < count; ++r)
                {
                    if (m_rows.index != nullptr && b + r + row_prefetch_distance < m.n)
                    {
                        m_rows.prefetch(b + r + row_prefetch_distance);
                    }
                    double* out = block.data() + r * w;
                    m_rows.load(b + r, out);
                    out[d] = m_t[b + r];
                    for (std::size_t j = 0; j < w; ++j)
                    {
                        out[j] = (out[j] - origin[j]) - shift[j];
                    }
                }
                syrk_ata<double>(w, count, 1.0, block.data(), w, 1.0, sum, w);
            }
        }

        /// The scatter from the chunks' sums, in chunk order.
        kind_moments finish()
        {
            const std::size_t w = m.d + 1;
            m.scatter.assign(w * w, 0.0);
            if (!m.has_sxx)
            {
                for (std::size_t c = 0; c < tasks(); ++c)
                {
                    for (std::size_t j = 0; j < w; ++j)
                    {
                        m.scatter[j * w + m.d] += m_partial[c * w + j];
                    }
                }
                for (std::size_t j = 0; j < m.d; ++j)
                {
                    m.scatter[m.d * w + j] = m.scatter[j * w + m.d];
                }
                return std::move(m);
            }
            for (std::size_t c = 0; c < tasks(); ++c)
            {
                for (std::size_t i = 0; i < w; ++i)
                {
                    for (std::size_t j = i; j < w; ++j)
                    {
                        m.scatter[i * w + j] += m_partial[c * w * w + i * w + j];
                    }
                }
            }
            for (std::size_t i = 0; i < w; ++i)
            {
                for (std::size_t j = 0; j < i; ++j)
                {
                    m.scatter[i * w + j] = m.scatter[j * w + i];
                }
            }
            return std::move(m);
        }

    private:
        const row_source<T>& m_rows;
        const double* m_t;
        chunks m_pieces;
        std::vector<double> m_partial;  // per chunk: the means' sums, then the scatter's
        kind_moments m;
    };

    /// The moments of rows (n x d, through the row source) with positions t (n entries), n >= 1;
    /// S_xx only `with_sxx` (the SYRK, n d^2 / 2 multiply-adds; otherwise the passes are O(n d)).
    template <class T>
    kind_moments kind_moments_of(const row_source<T>& rows, const double* t, std::size_t threads, bool with_sxx)
    {
        kind_moment_passes<T> passes(rows, t, with_sxx);
        parallel_for(passes.tasks(), threads, [&](std::size_t c, std::size_t) { passes.means_chunk(c); });
        passes.finish_means();
        parallel_for(passes.tasks(), threads, [&](std::size_t c, std::size_t) { passes.scatter_chunk(c); });
        return passes.finish();
    }

    /// The moments of both kinds of a head, pooled as one cloud of n_q + n_k points.
    struct qk_moments
    {
        kind_moments q;
        kind_moments k;

        std::size_t d() const noexcept { return q.d; }
        double total() const noexcept { return static_cast<double>(q.n + k.n); }

        /// Pooled centred sum of products of component j with t: S_xt(Q) + S_xt(K) plus the
        /// between-kind term n_q n_k / N (tQ - tK)(muQ_j - muK_j) (equal to n_q (tQ - t)(muQ_j -
        /// mu_j) + n_k (...)(...), without the pooled means, whose rounding would turn equal
        /// constants into a spurious term, docs/method.md §7.3).
        double pooled_sxt(std::size_t j) const noexcept
        {
            const double between = static_cast<double>(q.n) * static_cast<double>(k.n) / total();
            return q.sxt(j) + k.sxt(j) + between * q.mean_difference(k, q.d) * q.mean_difference(k, j);
        }

        /// Pooled centred sum of products of components i, j: S_xx(Q) + S_xx(K) + n_q n_k / N
        /// (muQ - muK)_i (muQ - muK)_j.
        double pooled_sxx(std::size_t i, std::size_t j) const noexcept
        {
            const double between = static_cast<double>(q.n) * static_cast<double>(k.n) / total();
            return q.sxx(i, j) + k.sxx(i, j) + between * q.mean_difference(k, i) * q.mean_difference(k, j);
        }
    };

    template <class TQ, class TK>
    qk_moments qk_moments_of(const row_source<TQ>& q_rows, const double* q_t, const row_source<TK>& k_rows,
                             const double* k_t, std::size_t threads, bool with_sxx)
    {
        // The chunks of both kinds in one loop of tasks per pass (the threads finish together).
        kind_moment_passes<TQ> q(q_rows, q_t, with_sxx);
        kind_moment_passes<TK> k(k_rows, k_t, with_sxx);
        const std::size_t nq = q.tasks();
        parallel_for(nq + k.tasks(), threads, [&](std::size_t c, std::size_t) {
            c < nq ? q.means_chunk(c) : k.means_chunk(c - nq);
        });
        q.finish_means();
        k.finish_means();
        parallel_for(nq + k.tasks(), threads, [&](std::size_t c, std::size_t) {
            c < nq ? q.scatter_chunk(c) : k.scatter_chunk(c - nq);
        });
        return qk_moments{q.finish(), k.finish()};
    }

    /// The moments of the public steps' arguments: queries (n_q x d) with positions t_q (n_q),
    /// keys (n_k x d) with positions t_k (n_k); float or double matrices read in place. Throws
    /// std::invalid_argument (shapes, n_q or n_k = 0, d = 0) or std::domain_error (a non-finite
    /// value), naming `fn` and the argument.
    template <class EQ, class ETQ, class EK, class ETK>
    qk_moments qk_moments_of_expressions(const char* fn, const xt::xexpression<EQ>& queries,
                                         const xt::xexpression<ETQ>& query_positions,
                                         const xt::xexpression<EK>& keys, const xt::xexpression<ETK>& key_positions)
    {
        auto q = as_matrix<float_or_double_t<EQ>>(queries, fn, "queries");
        auto k = as_matrix<float_or_double_t<EK>>(keys, fn, "keys");
        auto tq = as_vector<double>(query_positions, fn, "query_positions");
        auto tk = as_vector<double>(key_positions, fn, "key_positions");
        if (q.rows != tq.size)
        {
            throw_invalid(fn, "queries has ", q.rows, " rows but query_positions has ", tq.size, " entries");
        }
        if (k.rows != tk.size)
        {
            throw_invalid(fn, "keys has ", k.rows, " rows but key_positions has ", tk.size, " entries");
        }
        if (q.rows == 0 || k.rows == 0)
        {
            throw_invalid(fn, "needs at least 1 query and 1 key, got ", q.rows, " queries and ", k.rows, " keys");
        }
        if (q.cols == 0 || q.cols != k.cols)
        {
            throw_invalid(fn, "queries has d = ", q.cols, " columns and keys has d = ", k.cols,
                          " (they must be equal and >= 1)");
        }
        require_finite(fn, "queries", q);
        require_finite(fn, "keys", k);
        require_finite(fn, "query_positions", tq);
        require_finite(fn, "key_positions", tk);
        return qk_moments_of(rows_of(q), tq.data, rows_of(k), tk.data, 1, true);
    }

    /// u^T S_xx u and u . S_xt of one kind along a direction u (d entries).
    inline double quadratic_form(const kind_moments& m, const double* u) noexcept
    {
        double s = 0.0;
        for (std::size_t i = 0; i < m.d; ++i)
        {
            double row = 0.0;
            for (std::size_t j = 0; j < m.d; ++j)
            {
                row += m.sxx(i, j) * u[j];
            }
            s += u[i] * row;
        }
        return s;
    }

    inline double cross_along(const kind_moments& m, const double* u) noexcept
    {
        double s = 0.0;
        for (std::size_t i = 0; i < m.d; ++i)
        {
            s += u[i] * m.sxt(i);
        }
        return s;
    }

    /// Pearson r of u.x with t for one kind (S_xx needed); NaN when either has no variance.
    inline double correlation_along(const kind_moments& m, const double* u) noexcept
    {
        const double stt = m.stt();
        const double sxx = quadratic_form(m, u);
        return (stt > 0.0 && sxx > 0.0) ? cross_along(m, u) / std::sqrt(stt * sxx)
                                        : std::numeric_limits<double>::quiet_NaN();
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_DETAIL_QK_MOMENTS_HPP
