#ifndef ATTENTION_PLASTICITY_KOLMOGOROV_HPP
#define ATTENTION_PLASTICITY_KOLMOGOROV_HPP

// The distributions of the Kolmogorov-Smirnov statistics, as SciPy 1.10 computes them
// (scipy.special.smirnov and scipy.stats.kstwo; the ports are in detail/kolmogorov.hpp and
// detail/smirnov.hpp). The KS p-values of docs/method.md §2.7-2.8 come from kolmogorov_sf;
// its algorithm and accuracy are in docs/method.md §7.
// Every function: n = 0 throws std::invalid_argument, a NaN d std::domain_error.

#include <cstddef>

#include "detail/kolmogorov.hpp"

namespace attention_plasticity
{
/// scipy.special.smirnov(n, d): P(D_n^+ >= d) of the one-sided statistic (faithful port,
/// exact double-double summation up to n = 10^6, O(n) terms).
inline double smirnov_sf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("smirnov_sf", n, d);
    return detail::smirnov_impl(static_cast<long long>(n), d).sf;
}

/// scipy.stats.kstwo.sf(d, n) = P(D_n >= d) of the two-sided statistic. Follows SciPy's
/// branch structure exactly except (a) for n > 1000 with n d^2 in [2.2, 370), where SciPy's
/// O(n) exact 2*smirnov(n, d) is replaced by an O(1) evaluation within 2e-8 of it, and
/// (b) where the result is 1.0 in double anyway (see detail::kolmogn).
inline double kolmogorov_sf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_sf", n, d);
    return detail::kolmogn(n, d, false, false);
}

/// kolmogorov_sf without its two shortcuts: SciPy's algorithm in every branch (slow for
/// large n: O(n) double-double terms in the 2*smirnov branch, ~1 s at n = 10^6).
inline double kolmogorov_sf_exact(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_sf_exact", n, d);
    return detail::kolmogn(n, d, false, true);
}

/// scipy.stats.kstwo.cdf(d, n) = P(D_n <= d).
inline double kolmogorov_cdf(std::size_t n, double d)
{
    detail::check_kolmogorov_args("kolmogorov_cdf", n, d);
    return detail::kolmogn(n, d, true, false);
}
}  // namespace attention_plasticity

#endif
