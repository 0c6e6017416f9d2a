#ifndef ATTENTION_PLASTICITY_PCA_ROLES_HPP
#define ATTENTION_PLASTICITY_PCA_ROLES_HPP

// The PCA roles of a head (docs/method.md §8.5): the first principal component of the pooled
// queries and keys, the Pearson correlations of the queries' and the keys' projections on it
// with position (sign-canonicalized so that the larger in magnitude is positive), and the
// head's class by the thresholds 0.3 and 0.7. The pooled covariance (d x d) comes from the
// moments of detail/qk_moments.hpp; its eigenvectors from LAPACK's dsyevd (xtensor-blas).

#include <cmath>
#include <cstddef>
#include <limits>
#include <tuple>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/qk_moments.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
/// The taxonomy of docs/method.md §8.5 on (r_q, r_k) of PC0.
enum class pca_class
{
    position_dominated,  // |r_q| > 0.7 and |r_k| > 0.7
    q_positional,        // |r_q| > 0.7, |r_k| <= 0.7
    content_focused,     // |r_q| < 0.3 and |r_k| < 0.3
    mixed,               // every other head
    undefined            // r_q or r_k is NaN (no variance of position or of the projection)
};

/// The name written in head_metrics.csv's pca_class column (docs/method.md §3.2).
inline const char* pca_class_name(pca_class c) noexcept
{
    switch (c)
    {
        case pca_class::position_dominated:
            return "position_dominated";
        case pca_class::q_positional:
            return "q_positional";
        case pca_class::content_focused:
            return "content_focused";
        case pca_class::mixed:
            return "mixed";
        default:
            return "nan";
    }
}

/// The thresholds of the taxonomy (docs/method.md §8.5).
constexpr double pca_high_correlation = 0.7;
constexpr double pca_low_correlation = 0.3;

/// The class of a head from its PC0 correlations.
inline pca_class classify_pca_roles(double r_q, double r_k) noexcept
{
    if (std::isnan(r_q) || std::isnan(r_k))
    {
        return pca_class::undefined;
    }
    const double q = std::abs(r_q), k = std::abs(r_k);
    if (q > pca_high_correlation)
    {
        return k > pca_high_correlation ? pca_class::position_dominated : pca_class::q_positional;
    }
    if (q < pca_low_correlation && k < pca_low_correlation)
    {
        return pca_class::content_focused;
    }
    return pca_class::mixed;
}

/// The PCA roles of one head (docs/method.md §8.5).
struct pca_roles_result
{
    xt::xtensor<double, 1> component;  // v_0, unit, sign-canonicalized
    double explained_variance_ratio = std::numeric_limits<double>::quiet_NaN();  // lambda_0 / trace
    double r_q = std::numeric_limits<double>::quiet_NaN();  // Pearson r of the queries' q.v_0 with t
    double r_k = std::numeric_limits<double>::quiet_NaN();  // Pearson r of the keys' k.v_0 with t
    pca_class role = pca_class::undefined;
};

namespace detail
{
    inline pca_roles_result pca_roles_of_moments(const qk_moments& m)
    {
        const std::size_t d = m.d();
        pca_roles_result r;
        xt::xtensor<double, 2> scatter = xt::xtensor<double, 2>::from_shape({d, d});
        double trace = 0.0;
        for (std::size_t i = 0; i < d; ++i)
        {
            for (std::size_t j = 0; j < d; ++j)
            {
                scatter(i, j) = m.pooled_sxx(i, j);
            }
            trace += scatter(i, i);
        }
        const auto eigen = xt::linalg::eigh(scatter);  // ascending eigenvalues
        const auto& values = std::get<0>(eigen);
        const auto& vectors = std::get<1>(eigen);
        r.component = xt::xtensor<double, 1>::from_shape({d});
        for (std::size_t i = 0; i < d; ++i)
        {
            r.component(i) = vectors(i, d - 1);
        }
        r.explained_variance_ratio = trace > 0.0 ? values(d - 1) / trace : std::numeric_limits<double>::quiet_NaN();
        r.r_q = correlation_along(m.q, r.component.data());
        r.r_k = correlation_along(m.k, r.component.data());
        // The dominant correlation (larger magnitude; r_q on ties, or when r_k is NaN) positive.
        const double dominant = (std::isnan(r.r_k) || std::abs(r.r_q) >= std::abs(r.r_k)) ? r.r_q : r.r_k;
        if (dominant < 0.0)
        {
            r.component = -r.component;
            r.r_q = -r.r_q;
            r.r_k = -r.r_k;
        }
        r.role = classify_pca_roles(r.r_q, r.r_k);
        return r;
    }
}  // namespace detail

/// The PCA roles (docs/method.md §8.5) of queries (n_q x d) at positions query_positions
/// (n_q) and keys (n_k x d) at key_positions (n_k), float or double, n_q and n_k >= 1.
/// Throws std::invalid_argument on inconsistent shapes and std::domain_error on a non-finite
/// value.
template <class EQ, class ETQ, class EK, class ETK>
pca_roles_result pca_roles(const xt::xexpression<EQ>& queries, const xt::xexpression<ETQ>& query_positions,
                           const xt::xexpression<EK>& keys, const xt::xexpression<ETK>& key_positions)
{
    return detail::pca_roles_of_moments(
        detail::qk_moments_of_expressions("pca_roles", queries, query_positions, keys, key_positions));
}

/// pca_roles on a head's tokens (their vectors and positions).
template <class TQ, class TK>
pca_roles_result pca_roles(const tokens_view<TQ>& queries, const tokens_view<TK>& keys)
{
    return pca_roles(queries.vectors, queries.position, keys.vectors, keys.position);
}
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_PCA_ROLES_HPP
