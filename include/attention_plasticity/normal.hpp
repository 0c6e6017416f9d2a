#ifndef ATTENTION_PLASTICITY_NORMAL_HPP
#define ATTENTION_PLASTICITY_NORMAL_HPP

// Standard normal distribution function, accurate in both tails.

#include <cmath>

namespace attention_plasticity
{
/// Phi(z) = P(Z <= z). Through erfc, so the lower tail keeps full relative accuracy
/// down to z = -37 (Phi ~ 1e-299) instead of cancelling in 1 - something.
inline double normal_cdf(double z) noexcept
{
    return 0.5 * std::erfc(-z * 0.70710678118654752440);
}

/// 1 - Phi(z) = P(Z > z), accurate in the upper tail.
inline double normal_sf(double z) noexcept
{
    return 0.5 * std::erfc(z * 0.70710678118654752440);
}

/// 4 p (1 - p) with p = Phi(z), the Bernoulli variance scaled to [0, 1]. Uses the smaller
/// tail probability so that the relative error stays at a few ulp for |z| up to 37;
/// +-inf give 0 and NaN stays NaN.
inline double plasticity_from_z(double z) noexcept
{
    const double tail = normal_sf(std::fabs(z));
    return 4.0 * tail * (1.0 - tail);
}
}  // namespace attention_plasticity

#endif
