#ifndef ATTENTION_PLASTICITY_DISTANCE_MAPS_HPP
#define ATTENTION_PLASTICITY_DISTANCE_MAPS_HPP

// Distance maps (docs/method.md §8.1): where in the context a head is plastic. Every sampled
// pair of cell (j, c) has an inter-key distance |pos(k1) - pos(k2)| and a key-to-query distance
// tau_j - (pos(k1) + pos(k2)) / 2 (in tokens); the map is the mean pair plasticity of the pairs
// in each bin of a log-spaced grid over the two distances. The pairs are the method's own
// (their PP comes from query_bucket_plasticity, cells.hpp), optionally with extra pairs drawn
// from a stream of their own (distance_map_cell_pairs), which never changes the method's pairs.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "cells.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "seeds.hpp"

namespace attention_plasticity
{
/// The largest bins_per_octave accepted (finer bins than 2^(1/1024) are never useful).
constexpr std::size_t max_bins_per_octave = 1024;

/// One bin of a log-spaced distance axis, [low, high) in tokens.
struct distance_bin_edges
{
    double low = 0.0;
    double high = 0.0;
};

namespace detail
{
    inline void check_bins_per_octave(const char* fn, std::size_t bins_per_octave)
    {
        if (bins_per_octave < 1 || bins_per_octave > max_bins_per_octave)
        {
            throw_invalid(fn, "bins_per_octave must be in [1, ", max_bins_per_octave, "], got ", bins_per_octave);
        }
    }

    /// The edge 2^(k / b) of the log axis (k >= 0; 2^0 = 1): the one expression every edge
    /// comes from, so that a bin's membership and its written edges agree exactly.
    inline double log_edge(int k, std::size_t bins_per_octave)
    {
        return std::exp2(static_cast<double>(k) / static_cast<double>(bins_per_octave));
    }

    inline distance_bin_edges bin_edges_raw(int bin, std::size_t bins_per_octave)
    {
        if (bin < 0)
        {
            return {-std::numeric_limits<double>::infinity(), 0.0};
        }
        if (bin == 0)
        {
            return {0.0, 1.0};
        }
        return {log_edge(bin - 1, bins_per_octave), log_edge(bin, bins_per_octave)};
    }

    /// docs/method.md §8.1: -1 for x < 0, 0 for [0, 1), k >= 1 for [2^((k-1)/b), 2^(k/b)).
    /// x finite.
    inline int log_bin_raw(double x, std::size_t bins_per_octave)
    {
        if (x < 0.0)
        {
            return -1;
        }
        if (x < 1.0)
        {
            return 0;
        }
        // A first guess from log2, then moved until the edges computed by log_edge hold x.
        int k = static_cast<int>(std::floor(static_cast<double>(bins_per_octave) * std::log2(x))) + 1;
        k = k < 1 ? 1 : k;
        while (k > 1 && x < log_edge(k - 1, bins_per_octave))
        {
            --k;
        }
        while (!(x < log_edge(k, bins_per_octave)))
        {
            ++k;
        }
        return k;
    }
}  // namespace detail

/// The bin of a distance on the log-spaced axis of docs/method.md §8.1, with b = bins_per_octave
/// (1 to 1024): -1 for a negative distance, (-inf, 0); 0 for [0, 1) (which holds the distance 0);
/// k >= 1 for [2^((k-1)/b), 2^(k/b)). A non-finite distance: std::domain_error.
inline int log_distance_bin(double distance, std::size_t bins_per_octave = 1)
{
    constexpr const char* fn = "log_distance_bin";
    detail::check_bins_per_octave(fn, bins_per_octave);
    if (detail::is_non_finite(distance))
    {
        detail::throw_domain(fn, "distance must be finite, got ", distance);
    }
    return detail::log_bin_raw(distance, bins_per_octave);
}

/// The edges [low, high) of bin `bin` of log_distance_bin: (-inf, 0) for bin -1, [0, 1) for 0,
/// [2^((bin-1)/b), 2^(bin/b)) above. A bin below -1: std::invalid_argument.
inline distance_bin_edges log_distance_bin_edges(int bin, std::size_t bins_per_octave = 1)
{
    constexpr const char* fn = "log_distance_bin_edges";
    detail::check_bins_per_octave(fn, bins_per_octave);
    if (bin < -1)
    {
        detail::throw_invalid(fn, "bin must be >= -1, got ", bin);
    }
    return detail::bin_edges_raw(bin, bins_per_octave);
}

/// The two distances of every pair, in tokens (docs/method.md §8.1).
struct pair_distances
{
    xt::xtensor<double, 1> key_distance;    // |pos(k1) - pos(k2)|, >= 0
    xt::xtensor<double, 1> query_distance;  // tau_j - (pos(k1) + pos(k2)) / 2
};

namespace detail
{
    /// With an `origin`, tau is tau_j - origin and the positions are taken from it (exact for
    /// positions far from 0, docs/method.md §2.3; origin 0: the positions themselves).
    template <class Positions>
    pair_distances pair_distances_raw(const Positions& position, const std::vector<cell_pairs>& cells, double tau,
                                      double origin = 0.0)
    {
        const std::size_t total = total_pairs(cells);
        pair_distances d{xt::xtensor<double, 1>::from_shape({total}), xt::xtensor<double, 1>::from_shape({total})};
        std::size_t at = 0;
        for (const auto& cell : cells)
        {
            for (std::size_t p = 0; p < cell.pairs.size(); ++p, ++at)
            {
                const double a = static_cast<double>(position[cell.pairs.first(p)]) - origin;
                const double b = static_cast<double>(position[cell.pairs.second(p)]) - origin;
                d.key_distance(at) = std::fabs(a - b);
                d.query_distance(at) = tau - 0.5 * (a + b);
            }
        }
        return d;
    }
}  // namespace detail

/// The distances of every pair of the cells of query bucket j (mean query position tau = tau_j),
/// cell after cell in the order of bucket_key_differences: key_positions are the positions of the
/// rows of the key table the pairs index (>= 0, finite). Rows out of range:
/// std::invalid_argument; a negative or non-finite position, a non-finite tau: std::domain_error.
template <class EP>
pair_distances cell_pair_distances(const xt::xexpression<EP>& key_positions, const std::vector<cell_pairs>& cells,
                                   double tau)
{
    constexpr const char* fn = "cell_pair_distances";
    const auto p = detail::as_vector<double>(key_positions, fn, "key_positions");
    if (detail::is_non_finite(tau))
    {
        detail::throw_domain(fn, "tau must be finite, got ", tau);
    }
    detail::require_finite(fn, "key_positions", p);
    detail::check_cell_rows(fn, cells, p.size, "key_positions has ", " entries", [&](std::size_t row) {
        if (p[row] < 0.0)
        {
            detail::throw_domain(fn, "key_positions[", row, "] = ", p[row], " is negative");
        }
    });
    return detail::pair_distances_raw(p.data, cells, tau);
}

/// One non-empty bin of a distance map (a row of head_distance_plasticity.csv).
struct distance_plasticity_bin
{
    int key_bin = 0;                  // log_distance_bin of the inter-key distance
    int query_bin = 0;                // log_distance_bin of the key-to-query distance
    distance_bin_edges key_distance;  // its edges, tokens
    distance_bin_edges query_distance;
    double plasticity = 0.0;  // mean PP of the pairs in the bin
    std::size_t n_pairs = 0;  // pairs in the bin, >= 1
};

namespace detail
{
    /// The (key, query) bin of each pair: what distance_map_raw sums by (any thread can form a
    /// set of pairs' bins; the sums then go in pair order).
    using distance_bin_pair = std::pair<int, int>;

    inline void append_distance_bins(const double* key_distance, const double* query_distance, std::size_t n,
                                     std::size_t bins_per_octave, std::vector<distance_bin_pair>& out)
    {
        for (std::size_t i = 0; i < n; ++i)
        {
            out.emplace_back(log_bin_raw(key_distance[i], bins_per_octave), log_bin_raw(query_distance[i], bins_per_octave));
        }
    }

    /// The map from each pair's bins (n entries) and plasticity: mean PP and count per bin.
    inline std::vector<distance_plasticity_bin> distance_map_of_bins(const distance_bin_pair* pair_bins,
                                                                     const double* plasticity, std::size_t n,
                                                                     std::size_t bins_per_octave)
    {
        std::map<distance_bin_pair, std::pair<double, std::size_t>> bins;  // sums in pair order
        auto last = bins.end();
        for (std::size_t i = 0; i < n; ++i)
        {
            if (last == bins.end() || last->first != pair_bins[i])  // runs of one bin: one lookup
            {
                last = bins.try_emplace(pair_bins[i], 0.0, std::size_t(0)).first;
            }
            last->second.first += plasticity[i];
            ++last->second.second;
        }
        std::vector<distance_plasticity_bin> map;
        map.reserve(bins.size());
        for (const auto& [index, sum] : bins)
        {
            distance_plasticity_bin row;
            row.key_bin = index.first;
            row.query_bin = index.second;
            row.key_distance = bin_edges_raw(index.first, bins_per_octave);
            row.query_distance = bin_edges_raw(index.second, bins_per_octave);
            row.plasticity = sum.first / static_cast<double>(sum.second);
            row.n_pairs = sum.second;
            map.push_back(row);
        }
        return map;
    }

    inline std::vector<distance_plasticity_bin> distance_map_raw(const double* key_distance,
                                                                 const double* query_distance,
                                                                 const double* plasticity, std::size_t n,
                                                                 std::size_t bins_per_octave)
    {
        std::vector<distance_bin_pair> pair_bins;
        pair_bins.reserve(n);
        append_distance_bins(key_distance, query_distance, n, bins_per_octave, pair_bins);
        return distance_map_of_bins(pair_bins.data(), plasticity, n, bins_per_octave);
    }
}  // namespace detail

/// The distance map of a set of pairs (docs/method.md §8.1): for the pairs' inter-key distances
/// (>= 0), key-to-query distances and plasticities (PP in [0, 1]; one entry per pair each), the
/// mean PP and the pair count of every non-empty bin of the log-spaced grid (log_distance_bin on
/// each axis, b = bins_per_octave), in increasing (key_bin, query_bin). Sizes:
/// std::invalid_argument; a non-finite value, a negative inter-key distance or a PP outside
/// [0, 1]: std::domain_error.
template <class EK, class EQ, class EP>
std::vector<distance_plasticity_bin> distance_plasticity_map(const xt::xexpression<EK>& key_distance,
                                                             const xt::xexpression<EQ>& query_distance,
                                                             const xt::xexpression<EP>& plasticity,
                                                             std::size_t bins_per_octave = 1)
{
    constexpr const char* fn = "distance_plasticity_map";
    detail::check_bins_per_octave(fn, bins_per_octave);
    const auto k = detail::as_vector<double>(key_distance, fn, "key_distance");
    const auto q = detail::as_vector<double>(query_distance, fn, "query_distance");
    const auto pp = detail::as_vector<double>(plasticity, fn, "plasticity");
    if (q.size != k.size || pp.size != k.size)
    {
        detail::throw_invalid(fn, "key_distance, query_distance and plasticity must have one entry per pair, got ",
                              k.size, ", ", q.size, " and ", pp.size);
    }
    detail::require_finite(fn, "key_distance", k);
    detail::require_finite(fn, "query_distance", q);
    detail::require_finite(fn, "plasticity", pp);
    for (std::size_t i = 0; i < k.size; ++i)
    {
        if (k[i] < 0.0)
        {
            detail::throw_domain(fn, "key_distance[", i, "] = ", k[i], " is negative");
        }
        if (pp[i] < 0.0 || pp[i] > 1.0)
        {
            detail::throw_domain(fn, "plasticity[", i, "] = ", pp[i], " is outside [0, 1]");
        }
    }
    return detail::distance_map_raw(k.data, q.data, pp.data, k.size, bins_per_octave);
}

/// Extra key pairs of cell (q_bucket, keys.bucket) for the distance map (docs/method.md §8.1):
/// num_pairs pairs of the sampler of §5 over the key bucket's examples, as cell_key_pairs draws
/// the method's, but from rng(distance_map_pair_seed(pair_sampler_seed, j, c)), a stream of
/// their own (§6.4): the method's pairs and numbers do not change. None when no example has 2
/// keys or num_pairs is 0.
inline cell_pairs distance_map_cell_pairs(const key_bucket& keys, std::int64_t q_bucket, std::size_t num_pairs,
                                          double max_rel_dist, std::uint64_t pair_sampler_seed)
{
    return detail::cell_pairs_from_stream(keys, q_bucket, num_pairs, max_rel_dist,
                                          distance_map_pair_seed(pair_sampler_seed, q_bucket, keys.bucket),
                                          "distance_map_cell_pairs");
}
}  // namespace attention_plasticity

#endif
