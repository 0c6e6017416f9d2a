#ifndef ATTENTION_PLASTICITY_KS_TEST_HPP
#define ATTENTION_PLASTICITY_KS_TEST_HPP

// The one-sample Kolmogorov-Smirnov test against N(0, 1) of docs/method.md §2.7-2.8, as
// scipy.stats.kstest(x, 'norm') computes it (SciPy 1.10: method 'exact', kstwo.sf(D, n)):
// the statistic D_n = sup |F_n - Phi| and its p-value from kolmogorov_sf (docs/method.md §7).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/simd.hpp"
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
        std::vector<double> sorted;        // small samples: a sorted copy; else candidate values
        std::vector<std::uint32_t> count;  // per bin: values, then write positions
        std::vector<std::uint32_t> bin;    // per value: its bin
        std::vector<double> edge_cdf;      // per bin: Phi below and above its values
        std::size_t edge_bins = 0;         // the bin count edge_cdf was made for
        struct candidate
        {
            std::size_t first_rank, offset, size;
        };
        std::vector<candidate> candidates;
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

    /// The bins of ks_statistic_unsorted: `bins` of width w on [lo, hi) = [-8.5, 8.5), plus one
    /// bin below lo and one from hi on (index 0 and bins + 1). The index is a non-decreasing
    /// function of x (rounded arithmetic is monotone), so the bins in order hold the sample in
    /// ascending order.
    struct ks_bins
    {
        static constexpr double lo = -8.5;
        static constexpr double hi = 8.5;
        std::size_t bins;
        double per_unit;  // 1 / w

        explicit ks_bins(std::size_t b) noexcept : bins(b), per_unit(static_cast<double>(b) / (hi - lo)) {}

        std::size_t operator()(double x) const noexcept
        {
            const double g = (x - lo) * per_unit + 1.0;
            // Through int64: one conversion instruction (size_t from double needs a branch).
            return static_cast<std::size_t>(
                static_cast<std::int64_t>(std::min(std::max(g, 0.0), static_cast<double>(bins) + 1.0)));
        }

        /// out[i] = (*this)(value(i)) for i in [0, n): the same indices, by selects and a 32-bit
        /// conversion that vectorize (bins + 1 < 2^31; the same clamp for finite and infinite g),
        /// with AVX2 where the CPU has it (detail/simd.hpp).
        template <class Value>
        void indices(std::size_t n, Value&& value, std::uint32_t* out) const noexcept
        {
#ifdef AP_SIMD_DISPATCH
            if (cpu_has_avx2())
            {
                indices_avx2(n, value, out);
                return;
            }
#endif
            indices_body(n, value, out);
        }

#ifdef AP_SIMD_DISPATCH
        template <class Value>
        AP_SIMD_AVX2 void indices_avx2(std::size_t n, Value& value, std::uint32_t* out) const noexcept
        {
            indices_body(n, value, out);
        }
#endif

        template <class Value>
        AP_SIMD_INLINE void indices_body(std::size_t n, Value& value, std::uint32_t* out) const noexcept
        {
            const double top = static_cast<double>(bins) + 1.0;
            for (std::size_t i = 0; i < n; ++i)
            {
                const double g = (value(i) - lo) * per_unit + 1.0;
                const double low = g > 0.0 ? g : 0.0;
                const double clamped = low < top ? low : top;
                out[i] = static_cast<std::uint32_t>(static_cast<std::int32_t>(clamped));
            }
        }
    };

    /// Phi (the spline of ks_statistic_sorted_unchecked) at a point below and a point above
    /// every value of each bin: the edges widened by 1e-12, far more than the rounding of the
    /// bin index (below 1e-13 in x) and far less than a bin. edge_cdf[2k], edge_cdf[2k + 1].
    inline void make_edge_cdf(const ks_bins& bins, std::vector<double>& edge_cdf)
    {
        const normal_cdf_spline& phi = normal_cdf_table();
        constexpr double margin = 1e-12;
        const double inf = std::numeric_limits<double>::infinity();
        const double w = (ks_bins::hi - ks_bins::lo) / static_cast<double>(bins.bins);
        edge_cdf.resize(2 * (bins.bins + 2));
        for (std::size_t k = 0; k < bins.bins + 2; ++k)
        {
            const double below = k == 0 ? -inf : ks_bins::lo + static_cast<double>(k - 1) * w - margin;
            const double above = k == bins.bins + 1 ? inf : ks_bins::lo + static_cast<double>(k) * w + margin;
            edge_cdf[2 * k] = phi(below);
            edge_cdf[2 * k + 1] = phi(above);
        }
    }

    // D_n of an unsorted finite sample, identical to sorting it first (docs/method.md §7.4):
    // D_n = max over ranks i of i/n - u_(i) and u_(i) - (i-1)/n, u = Phi(x) by the monotone
    // spline. The sample is binned by x (n / 4 bins, at least min(n, 4096) and at most 2^17: about 14 values per bin near 0), which gives every
    // bin its ranks (the counts before it) and, from its edges, bounds on its u: each bin has a
    // term known to be at least end/n - Phi(upper edge) (its largest value) and terms at most
    // end/n - Phi(lower edge). The best lower bound over all bins, D_lo <= D_n, rules out every
    // bin whose upper bound is <= D_lo; only the few others (a few hundred values, those where
    // the empirical process is within one bin of its maximum) are gathered, mapped by Phi,
    // sorted and evaluated term by term with their exact ranks. Rounding is monotone, so the
    // bounds hold for the computed terms, and D_n is bit for bit what a full sort gives.
    // O(n) with two passes over x and no scattered writes; Phi of the few candidates only.
    // ks_statistic_of takes the sample as value(i), i in [0, n) (the same value at every call):
    // a caller that standardizes its sample gives the standardization, which is then computed
    // where the values are read instead of in a pass of its own. The bin of every value is
    // computed once, in a loop that vectorizes, and kept for the second pass.
    template <class Value>
    double ks_statistic_of(std::size_t n, Value&& value, ks_workspace& ws)
    {
        if (n < 64 || n >= (std::size_t(1) << 31))
        {
            ws.sorted.resize(n);
            double* out = ws.sorted.data();
            for (std::size_t i = 0; i < n; ++i)
            {
                out[i] = value(i);
            }
            std::sort(out, out + n);
            return ks_statistic_sorted_unchecked(out, n);
        }
        const ks_bins bin_of(std::min<std::size_t>(std::max(n / 4, std::min<std::size_t>(n, 4096)), std::size_t(1) << 17));
        const std::size_t slots = bin_of.bins + 2;
        if (ws.edge_bins != bin_of.bins)
        {
            make_edge_cdf(bin_of, ws.edge_cdf);
            ws.edge_bins = bin_of.bins;
        }
        ws.count.assign(slots, 0);
        std::uint32_t* count = ws.count.data();
        ws.bin.resize(n);
        std::uint32_t* bin = ws.bin.data();
        bin_of.indices(n, value, bin);
        for (std::size_t i = 0; i < n; ++i)
        {
            ++count[bin[i]];
        }
        // Lower bound D_lo, then the bins that might exceed it (candidates).
        const double nd = static_cast<double>(n);
        const double* edge = ws.edge_cdf.data();
        double d_lo = -std::numeric_limits<double>::infinity();
        std::size_t start = 0;
        for (std::size_t k = 0; k < slots; ++k)
        {
            if (count[k] != 0)
            {
                const std::size_t end = start + count[k];
                d_lo = std::max(d_lo, std::max(static_cast<double>(end) / nd - edge[2 * k + 1],
                                               edge[2 * k] - static_cast<double>(start) / nd));
                start = end;
            }
        }
        constexpr std::uint32_t skip = std::numeric_limits<std::uint32_t>::max();
        ws.candidates.clear();
        std::size_t gathered = 0;
        start = 0;
        for (std::size_t k = 0; k < slots; ++k)
        {
            const std::size_t size = count[k];
            const std::size_t end = start + size;
            if (size != 0
                && (static_cast<double>(end) / nd - edge[2 * k] > d_lo
                    || edge[2 * k + 1] - static_cast<double>(start) / nd > d_lo))
            {
                ws.candidates.push_back({start, gathered, size});
                count[k] = static_cast<std::uint32_t>(gathered);  // now: where its next value goes
                gathered += size;
            }
            else
            {
                count[k] = skip;
            }
            start = end;
        }
        ws.sorted.resize(gathered);
        double* values = ws.sorted.data();
        if (gathered != 0)
        {
            for (std::size_t i = 0; i < n; ++i)
            {
                const std::uint32_t at = count[bin[i]];
                if (at != skip)
                {
                    values[at] = value(i);
                    ++count[bin[i]];
                }
            }
        }
        const normal_cdf_spline& phi = normal_cdf_table();
        double dplus = d_lo;
        double dminus = d_lo;
        for (const auto& c : ws.candidates)
        {
            double* u = values + c.offset;
            for (std::size_t i = 0; i < c.size; ++i)
            {
                u[i] = phi(u[i]);
            }
            sort_small_range(u, c.size);
            for (std::size_t i = 0; i < c.size; ++i)
            {
                const std::size_t rank = c.first_rank + i;  // 0-based rank in the whole sample
                dplus = std::max(dplus, static_cast<double>(rank + 1) / nd - u[i]);
                dminus = std::max(dminus, u[i] - static_cast<double>(rank) / nd);
            }
        }
        return std::max(dplus, dminus);
    }

    /// ks_statistic_of the n values of x.
    inline double ks_statistic_unsorted(const double* x, std::size_t n, ks_workspace& ws)
    {
        return ks_statistic_of(n, [x](std::size_t i) AP_SIMD_LAMBDA { return x[i]; }, ws);
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
