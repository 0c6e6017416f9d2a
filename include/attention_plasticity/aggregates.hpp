#ifndef ATTENTION_PLASTICITY_AGGREGATES_HPP
#define ATTENTION_PLASTICITY_AGGREGATES_HPP

// The head-level aggregates of the per-bucket plasticities (docs/method.md §2.14).

#include <cmath>
#include <cstddef>
#include <limits>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"

namespace attention_plasticity
{
/// The aggregates of a head (columns of head_metrics.csv); NaN where undefined.
struct plasticity_aggregates_result
{
    double ap_overall = std::numeric_limits<double>::quiet_NaN();
    double ap_first20 = std::numeric_limits<double>::quiet_NaN();
    double ap_last20 = std::numeric_limits<double>::quiet_NaN();
    double ap_drop = std::numeric_limits<double>::quiet_NaN();
    double context_length = std::numeric_limits<double>::quiet_NaN();  // the C they were given
};

namespace detail
{
    /// sum_j n_j AP_j / sum_j n_j over the buckets with a defined AP_j accepted by keep(tau_j),
    /// in the given order; NaN when there is none.
    template <class Keep>
    double weighted_plasticity(const double* tau, const double* n_queries, const double* plasticity, std::size_t count,
                               Keep&& keep)
    {
        double numerator = 0.0;
        double denominator = 0.0;
        for (std::size_t j = 0; j < count; ++j)
        {
            if (!detail::is_nan(plasticity[j]) && keep(tau[j]))
            {
                numerator += n_queries[j] * plasticity[j];
                denominator += n_queries[j];
            }
        }
        return denominator > 0.0 ? numerator / denominator : std::numeric_limits<double>::quiet_NaN();
    }

    inline plasticity_aggregates_result plasticity_aggregates_raw(const double* tau, const double* n_queries,
                                                                  const double* plasticity, std::size_t count,
                                                                  double context_length)
    {
        plasticity_aggregates_result r;
        r.ap_overall = weighted_plasticity(tau, n_queries, plasticity, count, [](double) { return true; });
        r.ap_first20 =
            weighted_plasticity(tau, n_queries, plasticity, count, [&](double t) { return t < 0.2 * context_length; });
        r.ap_last20 =
            weighted_plasticity(tau, n_queries, plasticity, count, [&](double t) { return t >= 0.8 * context_length; });
        r.ap_drop = r.ap_first20 - r.ap_last20;
        r.context_length = context_length;
        return r;
    }
}  // namespace detail

/// The aggregates of a head (docs/method.md §2.14) from its query buckets: tau_j, n_j (queries
/// in bucket j) and AP_j (NaN when undefined), and C = max query position + 1.
/// ap_overall = sum_j n_j AP_j / sum_j n_j over the buckets with a defined AP_j; ap_first20 and
/// ap_last20 the same over buckets with tau_j < 0.2 C and tau_j >= 0.8 C; ap_drop = ap_first20
/// - ap_last20. NaN where no bucket qualifies.
template <class ET, class EN, class EA>
plasticity_aggregates_result plasticity_aggregates(const xt::xexpression<ET>& tau, const xt::xexpression<EN>& n_queries,
                                                   const xt::xexpression<EA>& plasticity, double context_length)
{
    constexpr const char* fn = "plasticity_aggregates";
    const auto t = detail::as_vector<double>(tau, fn, "tau");
    const auto n = detail::as_vector<double>(n_queries, fn, "n_queries");
    const auto a = detail::as_vector<double>(plasticity, fn, "plasticity");
    if (n.size != t.size || a.size != t.size)
    {
        detail::throw_invalid(fn, "tau, n_queries and plasticity must have one entry per bucket, got ", t.size, ", ",
                              n.size, " and ", a.size);
    }
    detail::require_finite(fn, "tau", t);
    for (std::size_t j = 0; j < t.size; ++j)
    {
        if (!(n[j] >= 0.0) || detail::is_non_finite(n[j]))
        {
            detail::throw_domain(fn, "n_queries[", j, "] = ", n[j], " must be finite and >= 0");
        }
        if (detail::is_non_finite(a[j]) && !detail::is_nan(a[j]))
        {
            detail::throw_domain(fn, "plasticity[", j, "] = ", a[j], " is infinite (NaN marks an undefined AP_j)");
        }
    }
    if (detail::is_non_finite(context_length))
    {
        detail::throw_domain(fn, "context_length must be finite, got ", context_length);
    }
    return detail::plasticity_aggregates_raw(t.data, n.data, a.data, t.size, context_length);
}
}  // namespace attention_plasticity

#endif
