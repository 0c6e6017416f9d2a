#ifndef ATTENTION_PLASTICITY_KS_TEST_HPP
#define ATTENTION_PLASTICITY_KS_TEST_HPP

// The one-sample Kolmogorov-Smirnov test against N(0, 1) of docs/method.md §2.7-2.8, as
// scipy.stats.kstest(x, 'norm') computes it (SciPy 1.10: method 'exact', kstwo.sf(D, n)):
// the statistic D_n = sup |F_n - Phi| and its p-value from kolmogorov_sf (docs/method.md §7).

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/strided.hpp"
#include "kolmogorov.hpp"
#include "normal.hpp"

namespace attention_plasticity
{
struct ks_result
{
    double statistic;  // D_n = sup |F_n - Phi|
    double p_value;    // P(D_n >= statistic) under H0, as scipy.stats.kstest(x, 'norm')
};

namespace detail
{
    /// Scratch buffers of the KS statistic, reusable across calls (contents unspecified).
    struct ks_workspace
    {
        std::vector<double> sorted;       // small samples: a sorted copy
        std::vector<std::size_t> bin_end;  // distribution sort of Phi values
        std::vector<double> cdf;           // Phi of each value
        std::vector<double> sorted_cdf;    // ... in ascending order
    };

    // KS statistic of an already sorted, finite sample. Phi through the spline of
    // normal_cdf_fast (within ~2e-15 of erfc): D_n is a maximum of differences, so its error
    // is that of Phi, and the p-value moves by far less than SciPy agreement needs.
    inline double ks_statistic_sorted_unchecked(const double* sorted, std::size_t n)
    {
        const normal_cdf_spline& phi = normal_cdf_table();
        double dplus = -std::numeric_limits<double>::infinity();
        double dminus = -std::numeric_limits<double>::infinity();
        const double nd = static_cast<double>(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            const double cdf = phi(sorted[i]);
            dplus = std::max(dplus, static_cast<double>(i + 1) / nd - cdf);
            dminus = std::max(dminus, cdf - static_cast<double>(i) / nd);
        }
        return std::max(dplus, dminus);
    }

    // Ascending sort of a few values: branch-free min/max networks for 2 and 3 values, an
    // insertion sort up to 32, std::sort beyond (ties, saturated tails, clusters).
    inline void sort_small_range(double* b, std::size_t size) noexcept
    {
        if (size == 2)
        {
            const double a0 = b[0], a1 = b[1];
            b[0] = std::min(a0, a1);
            b[1] = std::max(a0, a1);
        }
        else if (size == 3)
        {
            double a0 = b[0], a1 = b[1], a2 = b[2];
            const double l01 = std::min(a0, a1), h01 = std::max(a0, a1);
            a0 = std::min(l01, a2);
            const double t = std::max(l01, a2);
            a1 = std::min(h01, t);
            a2 = std::max(h01, t);
            b[0] = a0;
            b[1] = a1;
            b[2] = a2;
        }
        else if (size > 32)
        {
            std::sort(b, b + size);
        }
        else if (size > 3)
        {
            for (std::size_t i = 1; i < size; ++i)
            {
                const double v = b[i];
                std::size_t j = i;
                while (j > 0 && b[j - 1] > v)
                {
                    b[j] = b[j - 1];
                    --j;
                }
                b[j] = v;
            }
        }
    }

    // D_n of an unsorted finite sample, identical to sorting it first. D_n depends only on
    // the ascending sequence of u = Phi(x) (Phi through the monotone spline of
    // normal_cdf_fast, so ties in x stay ties in u), so only u is sorted, never x: a counting
    // sort by the bin floor(u nb) with nb = n / 2 bins (uniform under H0: about two values
    // per bin, histogram and scatter stay in L2), then an insertion sort inside each bin
    // (std::sort for bins of more than 32 values: ties, saturated tails, clusters). The bin
    // index is non-decreasing in u, so the bins in order and sorted inside are the full
    // ascending order, and D_n is evaluated on exactly the values and ranks a full sort gives.
    inline double ks_statistic_unsorted(const double* x, std::size_t n, ks_workspace& ws)
    {
        if (n < 64)
        {
            ws.sorted.resize(n);
            double* out = ws.sorted.data();
            std::copy(x, x + n, out);
            std::sort(out, out + n);
            return ks_statistic_sorted_unchecked(out, n);
        }
        const normal_cdf_spline& phi = normal_cdf_table();
        const std::size_t nb = n / 2;
        const double nbd = static_cast<double>(nb);
        ws.bin_end.assign(nb + 1, 0);
        ws.cdf.resize(n);
        ws.sorted_cdf.resize(n);
        std::size_t* e = ws.bin_end.data();
        double* u = ws.cdf.data();
        double* su = ws.sorted_cdf.data();
        const auto bin_of = [&](double v) { return std::min(nb - 1, static_cast<std::size_t>(v * nbd)); };
        for (std::size_t i = 0; i < n; ++i)
        {
            const double v = phi(x[i]);
            u[i] = v;
            ++e[bin_of(v) + 1];
        }
        for (std::size_t k = 1; k <= nb; ++k)
        {
            e[k] += e[k - 1];
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            const double v = u[i];
            su[e[bin_of(v)]++] = v;
        }
        // Sort inside each bin (e[k] is now the end of bin k) and take the terms of D_n of
        // its values while they are in cache; max is exact, so the order of the terms does
        // not matter. Bins of 2 or 3 values: branch-free min/max networks.
        const double nd = static_cast<double>(n);
        double dplus = -std::numeric_limits<double>::infinity();
        double dminus = -std::numeric_limits<double>::infinity();
        std::size_t first = 0;
        for (std::size_t k = 0; k < nb; ++k)
        {
            const std::size_t last = e[k];
            const std::size_t size = last - first;
            sort_small_range(su + first, size);
            for (std::size_t i = first; i < last; ++i)
            {
                dplus = std::max(dplus, static_cast<double>(i + 1) / nd - su[i]);
                dminus = std::max(dminus, su[i] - static_cast<double>(i) / nd);
            }
            first = last;
        }
        return std::max(dplus, dminus);
    }

    /// KS test of an ascending, non-empty sample (checked: n > 0, finite values).
    inline ks_result ks_test_normal_sorted(const char* function, const double* sorted, std::size_t n)
    {
        if (n == 0)
        {
            throw_invalid(function, "x is empty (n = 0)");
        }
        require_finite(function, "x", sorted, n);
        const double d = ks_statistic_sorted_unchecked(sorted, n);
        return {d, kolmogn(n, d, false, false)};
    }
}  // namespace detail

/// As scipy.stats.kstest(x, 'norm') (SciPy 1.10: method 'exact', kstwo.sf(D, n)) for the 1-D
/// sample x. Not 1-D or empty: std::invalid_argument; a non-finite value: std::domain_error.
template <class E>
ks_result ks_test_normal(const xt::xexpression<E>& x)
{
    constexpr const char* fn = "ks_test_normal";
    std::vector<double> values;
    detail::gather_sample(fn, "x", x, values);
    const std::size_t n = values.size();
    if (n == 0)
    {
        detail::throw_invalid(fn, "x is empty (n = 0)");
    }
    detail::ks_workspace ws;
    const double d = detail::ks_statistic_unsorted(values.data(), n, ws);
    return {d, detail::kolmogn(n, d, false, false)};
}
}  // namespace attention_plasticity

#endif
