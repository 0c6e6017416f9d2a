#ifndef ATTENTION_PLASTICITY_INTERVALS_HPP
#define ATTENTION_PLASTICITY_INTERVALS_HPP

// Standard errors, bias and confidence intervals of AP_j and ap_overall (docs/method.md §8.3),
// by the delta method: AP_j is a smooth function of the estimated query model (the component-0
// line alpha0 + beta0 tau_j and its residual variance sigma2, the rotation direction, mu_j and
// Sigma_j) and a mean over sampled pairs. Its error is, to first order, a sum over the queries
// of their influence on these estimates, plus the pair-sampling error; its bias, to second
// order, is -(2/pi)/n_j at z = 0 and smaller elsewhere. The per-bucket pieces are
// sensitivity.hpp's (bucket_plasticity_sensitivity, pair_sampling_variance); here:
//   plasticity_standard_errors  the influences over the head, summed by sampling unit (the
//                               sequence by default: its queries, its keys' pairs; or the token):
//                               standard errors and biases of every AP_j, ap_overall, ap_first20,
//                               ap_last20 and ap_drop, and each sequence's influence
//   pair_sequences, pair_deviations  what a bucket's pairs bring to the sequence-level errors
//   plasticity_interval         estimate - bias -+ z_(1+level)/2 standard error, in [0, 1]
//
// The topic in parts, each of which compiles alone; this header includes them all:
//   uncertainty_design.hpp  the sampling unit, bucket_estimate, uncertainty_design and the result
//                           plasticity_uncertainty
//   query_influences.hpp    (internals) the influences of each query on AP_j and its ingredients
//   standard_errors.hpp     plasticity_standard_errors
//   pair_influences.hpp     pair_sequences, pair_deviations
//   intervals.hpp           interval, plasticity_interval

#include <algorithm>
#include <limits>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "normal.hpp"
#include "pair_influences.hpp"
#include "standard_errors.hpp"
#include "uncertainty_design.hpp"

namespace attention_plasticity
{
/// A two-sided interval [low, high].
struct interval
{
    double low = std::numeric_limits<double>::quiet_NaN();
    double high = std::numeric_limits<double>::quiet_NaN();
    double centre = std::numeric_limits<double>::quiet_NaN();  // estimate - bias, not clipped
};

/// The confidence interval of a plasticity (docs/method.md §8.3): centred on the bias-corrected
/// estimate, estimate - bias -+ z standard_error with z = Phi^-1((1 + level) / 2) (1.96 for 0.95),
/// then clipped to [0, 1] where plasticity lives; `centre` is estimate - bias (the bias-corrected
/// estimate, not clipped). NaN when any input is NaN. level in (0, 1):
/// else std::invalid_argument; a negative standard error: std::domain_error.
inline interval plasticity_interval(double estimate, double bias, double standard_error, double level = 0.95)
{
    constexpr const char* fn = "plasticity_interval";
    if (!(level > 0.0 && level < 1.0))
    {
        detail::throw_invalid(fn, "level must be in (0, 1), got ", level);
    }
    if (standard_error < 0.0)
    {
        detail::throw_domain(fn, "standard_error must be >= 0, got ", standard_error);
    }
    interval result;
    if (detail::is_nan(estimate) || detail::is_nan(bias) || detail::is_nan(standard_error))
    {
        return result;
    }
    const double z = normal_quantile(0.5 + 0.5 * level);
    const double centre = estimate - bias;
    result.centre = centre;
    result.low = std::min(1.0, std::max(0.0, centre - z * standard_error));
    result.high = std::min(1.0, std::max(0.0, centre + z * standard_error));
    return result;
}
}  // namespace attention_plasticity

#endif
