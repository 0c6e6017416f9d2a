#ifndef ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP
#define ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP

// The planar rotation model of a head (docs/method.md §8.5): the drift direction a (the unit
// direction of the covariance of the pooled queries and keys with position), the separation
// direction b (the query-key centroid difference orthogonal to a), the drift slopes of the
// keys and queries along a, the query centroid on a, and bias_strength = mu_Q^a alpha_K.
// Computed from the moments of detail/qk_moments.hpp (two passes over each kind); the
// sequence-level standard error of bias_strength by a delete-one-sequence jackknife.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/qk_moments.hpp"
#include "detail/row_source.hpp"
#include "detail/scaling.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
/// The planar rotation model of one head (docs/method.md §8.5). Every number is NaN when the
/// pooled vectors have no linear covariance with position (a undefined); b is NaN when the
/// centroid difference is parallel to a.
struct planar_rotation_result
{
    xt::xtensor<double, 1> drift_direction;       // a, unit
    xt::xtensor<double, 1> separation_direction;  // b, unit, orthogonal to a
    double drift_slope_k = std::numeric_limits<double>::quiet_NaN();     // alpha_K: OLS slope of k.a on t
    double drift_slope_q = std::numeric_limits<double>::quiet_NaN();     // alpha_Q: OLS slope of q.a on t
    double drift_query_mean = std::numeric_limits<double>::quiet_NaN();  // mu_Q^a: mean of q.a
    double drift_key_mean = std::numeric_limits<double>::quiet_NaN();    // mu_K^a: mean of k.a
    double drift_r_q = std::numeric_limits<double>::quiet_NaN();         // Pearson r of q.a with t
    double drift_r_k = std::numeric_limits<double>::quiet_NaN();         // Pearson r of k.a with t
    double separation = std::numeric_limits<double>::quiet_NaN();        // (mu_Q - mu_K) . b
    double bias_strength = std::numeric_limits<double>::quiet_NaN();     // mu_Q^a alpha_K
};

namespace detail
{
    /// OLS slope of u.x on t for one kind (S_xt . u / S_tt; 0 when t has no variance, the rule
    /// of docs/method.md §2.3) and the Pearson r (NaN when either side has no variance, or
    /// without S_xx).
    inline void slope_and_r(const kind_moments& m, const double* u, double& slope, double& r)
    {
        const double stt = m.stt();
        slope = stt > 0.0 ? cross_along(m, u) / stt : 0.0;
        r = m.has_sxx ? correlation_along(m, u) : std::numeric_limits<double>::quiet_NaN();
    }

    inline planar_rotation_result planar_rotation_of_moments(const qk_moments& m)
    {
        const std::size_t d = m.d();
        const double nan = std::numeric_limits<double>::quiet_NaN();
        planar_rotation_result r;
        r.drift_direction = xt::xtensor<double, 1>::from_shape({d});
        r.separation_direction = xt::xtensor<double, 1>::from_shape({d});
        r.drift_direction.fill(nan);
        r.separation_direction.fill(nan);
        // a = Cov(x, t) / ||Cov(x, t)|| over the pooled cloud (the divisor N cancels).
        for (std::size_t j = 0; j < d; ++j)
        {
            r.drift_direction(j) = m.pooled_sxt(j);
        }
        const double norm = scaled_norm(r.drift_direction.data(), d);
        if (!(norm > 0.0) || !std::isfinite(norm))
        {
            r.drift_direction.fill(nan);
            return r;
        }
        for (std::size_t j = 0; j < d; ++j)
        {
            r.drift_direction(j) /= norm;
        }
        const double* a = r.drift_direction.data();
        // b: the centroid difference without its component along a.
        double along = 0.0, query_mean = 0.0, key_mean = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            along += m.q.mean_difference(m.k, j) * a[j];
            query_mean += m.q.mean[j] * a[j];
            key_mean += m.k.mean[j] * a[j];
        }
        for (std::size_t j = 0; j < d; ++j)
        {
            r.separation_direction(j) = m.q.mean_difference(m.k, j) - along * a[j];
        }
        const double b_norm = scaled_norm(r.separation_direction.data(), d);
        if (b_norm > 0.0)
        {
            r.separation = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                r.separation_direction(j) /= b_norm;
                r.separation += m.q.mean_difference(m.k, j) * r.separation_direction(j);
            }
        }
        else
        {
            r.separation_direction.fill(nan);
        }
        r.drift_query_mean = query_mean;
        r.drift_key_mean = key_mean;
        slope_and_r(m.k, a, r.drift_slope_k, r.drift_r_k);
        slope_and_r(m.q, a, r.drift_slope_q, r.drift_r_q);
        r.bias_strength = r.drift_query_mean * r.drift_slope_k;
        return r;
    }

    /// bias_strength (mu_Q^a alpha_K) from the raw sums of the queries and of the keys, each
    /// laid out as n, sum t, sum t^2, sum x (d), sum t x (d); NaN when a kind is empty or a is
    /// undefined. The same function of the data as planar_rotation_of_moments (computed from
    /// raw sums: for the jackknife of bias_strength_jackknife_raw, not for the value itself).
    inline double bias_strength_of_sums(const double* q, const double* k, std::size_t d)
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double nq = q[0], nk = k[0];
        if (!(nq > 0.0) || !(nk > 0.0))
        {
            return nan;
        }
        const double total = nq + nk;
        const double t_mean = (q[1] + k[1]) / total;
        const double key_t_mean = k[1] / nk;
        const double key_stt = k[2] - nk * key_t_mean * key_t_mean;
        double norm = 0.0;
        std::vector<double> a(d);
        for (std::size_t j = 0; j < d; ++j)
        {
            const double x_mean = (q[3 + j] + k[3 + j]) / total;
            a[j] = q[3 + d + j] + k[3 + d + j] - total * t_mean * x_mean;
            norm += a[j] * a[j];
        }
        norm = std::sqrt(norm);
        if (!(norm > 0.0) || !std::isfinite(norm))
        {
            return nan;
        }
        double query_mean = 0.0, key_cross = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            a[j] /= norm;
            query_mean += q[3 + j] / nq * a[j];
            key_cross += (k[3 + d + j] - k[3 + j] * key_t_mean) * a[j];
        }
        const double slope = key_stt > 0.0 ? key_cross / key_stt : 0.0;  // §2.3's rule for t without variance
        return query_mean * slope;
    }

    /// One row's raw sums (n, t, t^2, x, t x) added into `out` (3 + 2d entries).
    inline void add_row_sums(const double* row, double t, std::size_t d, double* out) noexcept
    {
        out[0] += 1.0;
        out[1] += t;
        out[2] += t * t;
        for (std::size_t j = 0; j < d; ++j)
        {
            out[3 + j] += row[j];
            out[3 + d + j] += t * row[j];
        }
    }

    /// The per-sequence raw sums of one kind's rows, added a row at a time (in row order):
    /// add(i, row) adds row i (as loaded) into its sequence's slot.
    class sequence_sums
    {
    public:
        sequence_sums(const double* positions, double t_origin, const std::int64_t* ids,
                      const std::vector<std::int64_t>& sequences, std::size_t d)
            : m_positions(positions), m_origin(t_origin), m_ids(ids), m_sequences(sequences), m_d(d),
              sums(sequences.size() * (3 + 2 * d), 0.0)
        {
        }

        void add(std::size_t i, const double* row)
        {
            if (i == 0 || m_ids[i] != m_ids[i - 1])  // the rows of a sequence usually follow each other
            {
                const auto it = std::lower_bound(m_sequences.begin(), m_sequences.end(), m_ids[i]);
                m_out = sums.data() + static_cast<std::size_t>(it - m_sequences.begin()) * (3 + 2 * m_d);
            }
            add_row_sums(row, m_positions[i] - m_origin, m_d, m_out);
        }

    private:
        const double* m_positions;
        double m_origin;
        const std::int64_t* m_ids;
        const std::vector<std::int64_t>& m_sequences;
        std::size_t m_d;
        double* m_out = nullptr;

    public:
        std::vector<double> sums;  // per sequence, stride 3 + 2d
    };

    /// Adds each row's raw sums (n, t, t^2, x, t x) into its sequence's slot of `sums`
    /// (stride 3 + 2d), the sequence found in the sorted `sequences`, with t taken from
    /// `t_origin` (bias_strength does not depend on where positions start; raw sums of t^2 near
    /// 2^52 would hold no digit of the spread, docs/method.md §2.3).
    template <class T>
    void add_sequence_sums(const row_source<T>& rows, const double* positions, double t_origin,
                           const std::int64_t* ids, const std::vector<std::int64_t>& sequences,
                           std::vector<double>& sums)
    {
        sequence_sums out(positions, t_origin, ids, sequences, rows.cols);
        out.sums = std::move(sums);
        std::vector<double> row(rows.cols);
        for (std::size_t i = 0; i < rows.rows; ++i)
        {
            if (rows.index != nullptr && i + row_prefetch_distance < rows.rows)
            {
                rows.prefetch(i + row_prefetch_distance);
            }
            rows.load(i, row.data());
            out.add(i, row.data());
        }
        sums = std::move(out.sums);
    }

    /// The smallest position of both kinds, the origin of the jackknife's sums: 0 for most dumps.
    inline double jackknife_origin(const double* q_t, std::size_t n_q, const double* k_t, std::size_t n_k)
    {
        return std::min(n_q ? *std::min_element(q_t, q_t + n_q) : 0.0, n_k ? *std::min_element(k_t, k_t + n_k) : 0.0);
    }

    /// The jackknife of bias_strength_jackknife_raw from both kinds' per-sequence sums (g
    /// sequences, stride 3 + 2d).
    inline double bias_strength_jackknife_of_sums(const std::vector<double>& q_sums, const std::vector<double>& k_sums,
                                                  std::size_t g, std::size_t d)
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const std::size_t stride = 3 + 2 * d;
        std::vector<double> q_total(stride, 0.0), k_total(stride, 0.0);
        for (std::size_t e = 0; e < g; ++e)
        {
            for (std::size_t c = 0; c < stride; ++c)
            {
                q_total[c] += q_sums[e * stride + c];
                k_total[c] += k_sums[e * stride + c];
            }
        }
        std::vector<double> theta(g), q_rest(stride), k_rest(stride);
        double mean = 0.0;
        for (std::size_t e = 0; e < g; ++e)
        {
            for (std::size_t c = 0; c < stride; ++c)
            {
                q_rest[c] = q_total[c] - q_sums[e * stride + c];
                k_rest[c] = k_total[c] - k_sums[e * stride + c];
            }
            theta[e] = bias_strength_of_sums(q_rest.data(), k_rest.data(), d);
            if (std::isnan(theta[e]))
            {
                return nan;
            }
            mean += theta[e];
        }
        mean /= static_cast<double>(g);
        double squares = 0.0;
        for (double x : theta)
        {
            squares += (x - mean) * (x - mean);
        }
        return std::sqrt(static_cast<double>(g - 1) / static_cast<double>(g) * squares);
    }

    /// The delete-one-sequence jackknife standard error of bias_strength (docs/method.md §8.5,
    /// §8.3): every sequence left out in turn, sqrt((G - 1) / G sum_e (theta_-e - mean)^2), from
    /// per-sequence raw sums (one pass over each kind's rows, O(G d) after it). `sequences`: the
    /// sorted distinct example ids of both kinds. NaN with fewer than `min_sequences`
    /// sequences or when a leave-one-out value is undefined.
    template <class TQ, class TK>
    double bias_strength_jackknife_raw(const row_source<TQ>& q_rows, const double* q_t, const std::int64_t* q_ids,
                                       const row_source<TK>& k_rows, const double* k_t, const std::int64_t* k_ids,
                                       const std::vector<std::int64_t>& sequences, std::size_t min_sequences)
    {
        const std::size_t g = sequences.size();
        if (g < std::max<std::size_t>(min_sequences, 2))
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        const std::size_t d = q_rows.cols;
        const std::size_t stride = 3 + 2 * d;
        std::vector<double> q_sums(g * stride, 0.0), k_sums(g * stride, 0.0);
        const double t_origin = jackknife_origin(q_t, q_rows.rows, k_t, k_rows.rows);
        add_sequence_sums(q_rows, q_t, t_origin, q_ids, sequences, q_sums);
        add_sequence_sums(k_rows, k_t, t_origin, k_ids, sequences, k_sums);
        return bias_strength_jackknife_of_sums(q_sums, k_sums, g, d);
    }

    /// The moments of both kinds (qk_moments_of) and the jackknife of bias_strength
    /// (bias_strength_jackknife_raw) from one read of each row for the means and the sequences'
    /// sums: one task per kind reads its rows in order (the same sums as each alone, chunk by
    /// chunk and sequence by sequence), then the scatter's chunks share the threads.
    struct moments_and_jackknife
    {
        qk_moments moments;
        double bias_strength_se = std::numeric_limits<double>::quiet_NaN();
    };

    template <class TQ, class TK>
    moments_and_jackknife qk_moments_with_jackknife(const row_source<TQ>& q_rows, const double* q_t,
                                                    const std::int64_t* q_ids, const row_source<TK>& k_rows,
                                                    const double* k_t, const std::int64_t* k_ids,
                                                    const std::vector<std::int64_t>& sequences,
                                                    std::size_t min_sequences, std::size_t threads, bool with_sxx)
    {
        moments_and_jackknife out;
        const std::size_t g = sequences.size();
        if (g < std::max<std::size_t>(min_sequences, 2))
        {
            out.moments = qk_moments_of(q_rows, q_t, k_rows, k_t, threads, with_sxx);
            return out;
        }
        const std::size_t d = q_rows.cols;
        const double t_origin = jackknife_origin(q_t, q_rows.rows, k_t, k_rows.rows);
        kind_moment_passes<TQ> q(q_rows, q_t, with_sxx);
        kind_moment_passes<TK> k(k_rows, k_t, with_sxx);
        sequence_sums q_sums(q_t, t_origin, q_ids, sequences, d), k_sums(k_t, t_origin, k_ids, sequences, d);
        parallel_for(2, threads, [&](std::size_t kind, std::size_t) {
            if (kind == 0)
            {
                for (std::size_t c = 0; c < q.tasks(); ++c)
                {
                    q.means_chunk(c, [&](std::size_t i, const double* row) { q_sums.add(i, row); });
                }
            }
            else
            {
                for (std::size_t c = 0; c < k.tasks(); ++c)
                {
                    k.means_chunk(c, [&](std::size_t i, const double* row) { k_sums.add(i, row); });
                }
            }
        });
        q.finish_means();
        k.finish_means();
        const std::size_t nq = q.tasks();
        parallel_for(nq + k.tasks(), threads, [&](std::size_t c, std::size_t) {
            c < nq ? q.scatter_chunk(c) : k.scatter_chunk(c - nq);
        });
        out.moments = qk_moments{q.finish(), k.finish()};
        out.bias_strength_se = bias_strength_jackknife_of_sums(q_sums.sums, k_sums.sums, g, d);
        return out;
    }
}  // namespace detail

/// The planar rotation model (docs/method.md §8.5) of queries (n_q x d) at positions
/// query_positions (n_q) and keys (n_k x d) at key_positions (n_k), float or double, n_q and
/// n_k >= 1. Throws std::invalid_argument on inconsistent shapes and std::domain_error on a
/// non-finite value.
template <class EQ, class ETQ, class EK, class ETK>
planar_rotation_result planar_rotation(const xt::xexpression<EQ>& queries, const xt::xexpression<ETQ>& query_positions,
                                       const xt::xexpression<EK>& keys, const xt::xexpression<ETK>& key_positions)
{
    return detail::planar_rotation_of_moments(
        detail::qk_moments_of_expressions("planar_rotation", queries, query_positions, keys, key_positions));
}

/// The sequence-level standard error of bias_strength (docs/method.md §8.5, §8.3): the
/// delete-one-sequence jackknife over the distinct example ids of both kinds, NaN with fewer than
/// `min_sequences` of them or when bias_strength is undefined without one of them. Arguments as
/// planar_rotation's, with the tokens' example ids. Shapes: std::invalid_argument.
template <class EQ, class ETQ, class EEQ, class EK, class ETK, class EEK>
double bias_strength_standard_error(const xt::xexpression<EQ>& queries, const xt::xexpression<ETQ>& query_positions,
                                    const xt::xexpression<EEQ>& query_example_ids, const xt::xexpression<EK>& keys,
                                    const xt::xexpression<ETK>& key_positions,
                                    const xt::xexpression<EEK>& key_example_ids, std::size_t min_sequences = 10)
{
    constexpr const char* fn = "bias_strength_standard_error";
    auto q = detail::as_matrix<detail::float_or_double_t<EQ>>(queries, fn, "queries");
    auto k = detail::as_matrix<detail::float_or_double_t<EK>>(keys, fn, "keys");
    auto tq = detail::as_vector<double>(query_positions, fn, "query_positions");
    auto tk = detail::as_vector<double>(key_positions, fn, "key_positions");
    auto eq = detail::as_vector<std::int64_t>(query_example_ids, fn, "query_example_ids");
    auto ek = detail::as_vector<std::int64_t>(key_example_ids, fn, "key_example_ids");
    if (q.rows != tq.size || q.rows != eq.size || k.rows != tk.size || k.rows != ek.size || q.cols != k.cols)
    {
        detail::throw_invalid(fn, "queries (", q.rows, " x ", q.cols, "), query_positions (", tq.size,
                              "), query_example_ids (", eq.size, "), keys (", k.rows, " x ", k.cols,
                              "), key_positions (", tk.size, ") and key_example_ids (", ek.size, ") do not agree");
    }
    std::vector<std::int64_t> sequences(eq.data, eq.data + eq.size);
    sequences.insert(sequences.end(), ek.data, ek.data + ek.size);
    std::sort(sequences.begin(), sequences.end());
    sequences.erase(std::unique(sequences.begin(), sequences.end()), sequences.end());
    return detail::bias_strength_jackknife_raw(detail::rows_of(q), tq.data, eq.data, detail::rows_of(k), tk.data,
                                               ek.data, sequences, min_sequences);
}

/// planar_rotation on a head's tokens (their vectors and positions).
template <class TQ, class TK>
planar_rotation_result planar_rotation(const tokens_view<TQ>& queries, const tokens_view<TK>& keys)
{
    return planar_rotation(queries.vectors, queries.position, keys.vectors, keys.position);
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP
