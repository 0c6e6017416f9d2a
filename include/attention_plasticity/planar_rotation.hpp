#ifndef ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP
#define ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP

// The planar rotation model of a head (docs/method.md §8.5): the drift direction a (the unit
// direction of the covariance of the pooled queries and keys with position), the separation
// direction b (the query-key centroid difference orthogonal to a), the drift slopes of the
// keys and queries along a, the query centroid on a, and bias_strength = mu_Q^a alpha_K.
// Computed from the moments of detail/qk_moments.hpp (two passes over each kind).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/qk_moments.hpp"
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
            along += (m.q.mean[j] - m.k.mean[j]) * a[j];
            query_mean += m.q.mean[j] * a[j];
            key_mean += m.k.mean[j] * a[j];
        }
        for (std::size_t j = 0; j < d; ++j)
        {
            r.separation_direction(j) = (m.q.mean[j] - m.k.mean[j]) - along * a[j];
        }
        const double b_norm = scaled_norm(r.separation_direction.data(), d);
        if (b_norm > 0.0)
        {
            r.separation = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                r.separation_direction(j) /= b_norm;
                r.separation += (m.q.mean[j] - m.k.mean[j]) * r.separation_direction(j);
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

/// planar_rotation on a head's tokens (their vectors and positions).
template <class TQ, class TK>
planar_rotation_result planar_rotation(const tokens_view<TQ>& queries, const tokens_view<TK>& keys)
{
    return planar_rotation(queries.vectors, queries.position, keys.vectors, keys.position);
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_PLANAR_ROTATION_HPP
