#ifndef ATTENTION_PLASTICITY_SAMPLER_HPP
#define ATTENTION_PLASTICITY_SAMPLER_HPP

// The key-pair sampler (docs/method.md §5): an example with probability proportional to its length,
// a uniform anchor in it, a neighbour within Delta = max(1, floor(max_rel_dist * L)) of the
// anchor (never the anchor itself), and a fair coin for the order of the two.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "random.hpp"

namespace attention_plasticity
{
/// Sampled pairs: pair i is (example(i), first(i), second(i)); first/second are positions
/// within the example (the form of docs/method.md §5) or rows of the caller's key table (bucket form).
struct key_pairs
{
    xt::xtensor<std::size_t, 1> example;
    xt::xtensor<std::size_t, 1> first;
    xt::xtensor<std::size_t, 1> second;

    std::size_t size() const noexcept { return first.size(); }
};

/// Window half-width Delta_b = max(1, floor(max_rel_dist * L)).
inline std::size_t pair_window(std::size_t length, double max_rel_dist)
{
    const double scaled = std::floor(max_rel_dist * static_cast<double>(length));
    // Clamp before converting: the window never needs to exceed the example.
    const double clamped = std::min(scaled, static_cast<double>(length));
    return std::max<std::size_t>(1, static_cast<std::size_t>(clamped));
}

namespace detail
{
    inline void check_max_rel_dist(const char* fn, double max_rel_dist)
    {
        if (!(max_rel_dist >= 0.0) || detail::is_non_finite(max_rel_dist))
        {
            throw_invalid(fn, "max_rel_dist must be finite and >= 0, got ", max_rel_dist);
        }
    }

    /// Draws pairs over examples of the given lengths. Examples shorter than 2 cannot hold a
    /// pair; the sampler (docs/method.md §5) redraws when it picks one, which is the same as drawing from the others
    /// in proportion to their lengths, so they are left out of the categorical up front
    /// (no rejection loop, no risk of spinning).
    template <class Emit>
    void sample_pairs_over_lengths(const std::vector<std::uint64_t>& lengths, std::size_t num_pairs,
                                   double max_rel_dist, rng& generator, const char* fn, Emit&& emit)
    {
        check_max_rel_dist(fn, max_rel_dist);
        if (num_pairs == 0)
        {
            return;
        }
        std::vector<std::size_t> usable;
        std::vector<std::uint64_t> cumulative;
        std::uint64_t total = 0;
        for (std::size_t b = 0; b < lengths.size(); ++b)
        {
            if (lengths[b] >= 2)
            {
                total += lengths[b];
                usable.push_back(b);
                cumulative.push_back(total);
            }
        }
        if (usable.empty())
        {
            throw_domain(fn, "no example has 2 or more keys (", lengths.size(),
                         " examples), so no key pair can be formed");
        }
        for (std::size_t n = 0; n < num_pairs; ++n)
        {
            const std::uint64_t ticket = generator.below(total);
            const auto slot = static_cast<std::size_t>(
                std::upper_bound(cumulative.begin(), cumulative.end(), ticket) - cumulative.begin());
            const std::size_t b = usable[slot];
            const auto length = static_cast<std::size_t>(lengths[b]);
            const std::size_t delta = pair_window(length, max_rel_dist);
            const auto anchor = static_cast<std::size_t>(generator.below(length));
            const std::size_t left = anchor >= delta ? anchor - delta : 0;
            const std::size_t right = std::min(length - 1, anchor + delta);
            // Neighbours are left..right without the anchor: right - left of them (>= 1).
            auto neighbour = left + static_cast<std::size_t>(generator.below(right - left));
            if (neighbour >= anchor)
            {
                ++neighbour;
            }
            if (generator.uniform() < 0.5)
            {
                emit(b, anchor, neighbour);
            }
            else
            {
                emit(b, neighbour, anchor);
            }
        }
    }

    inline key_pairs make_key_pairs(std::size_t n)
    {
        return key_pairs{xt::xtensor<std::size_t, 1>::from_shape({n}), xt::xtensor<std::size_t, 1>::from_shape({n}),
                         xt::xtensor<std::size_t, 1>::from_shape({n})};
    }

    template <class E>
    std::vector<std::uint64_t> lengths_from(const xt::xexpression<E>& lengths, const char* fn)
    {
        const auto& e = lengths.derived_cast();
        if (e.dimension() != 1)
        {
            throw_invalid(fn, "lengths must be 1-D, got ", e.dimension(), " dimensions");
        }
        std::vector<std::uint64_t> result;
        result.reserve(e.size());
        std::size_t b = 0;
        for (auto value : e)
        {
            if (!(value >= 0))
            {
                throw_invalid(fn, "lengths[", b, "] = ", value, " is negative");
            }
            result.push_back(static_cast<std::uint64_t>(value));
            ++b;
        }
        return result;
    }
}  // namespace detail

/// Seed 001 exactly: num_pairs pairs (example b, position k1, position k2) over examples of
/// the given lengths. Throws std::domain_error when no example has 2 keys.
template <class E>
key_pairs sample_key_pairs(const xt::xexpression<E>& lengths, std::size_t num_pairs, double max_rel_dist,
                           rng& generator)
{
    constexpr const char* fn = "sample_key_pairs";
    const auto example_lengths = detail::lengths_from(lengths, fn);
    key_pairs pairs = detail::make_key_pairs(num_pairs);
    std::size_t n = 0;
    detail::sample_pairs_over_lengths(example_lengths, num_pairs, max_rel_dist, generator, fn,
                                      [&](std::size_t b, std::size_t k1, std::size_t k2) {
                                          pairs.example(n) = b;
                                          pairs.first(n) = k1;
                                          pairs.second(n) = k2;
                                          ++n;
                                      });
    return pairs;
}

/// Keys of one bucket grouped into examples: rows of each example ordered by position
/// (ties by row), examples in increasing example id.
struct example_groups
{
    std::vector<std::int64_t> example_id;     // one per example
    std::vector<std::size_t> offsets;         // example b holds rows[offsets[b] .. offsets[b+1])
    std::vector<std::size_t> rows;            // caller's row indices

    std::size_t count() const noexcept { return example_id.size(); }
    std::size_t length(std::size_t b) const noexcept { return offsets[b + 1] - offsets[b]; }
    bool can_form_pair() const noexcept
    {
        for (std::size_t b = 0; b < count(); ++b)
        {
            if (length(b) >= 2)
            {
                return true;
            }
        }
        return false;
    }
};

namespace detail
{
    /// Groups the given rows (indices into positions/example_ids) into examples: ids in
    /// increasing order, each example's rows by position (ties by row).
    template <class Index>
    example_groups group_examples(const std::vector<Index>& rows, const std::int64_t* positions,
                                  const std::int64_t* example_ids)
    {
        example_groups groups;
        groups.rows.assign(rows.begin(), rows.end());
        std::stable_sort(groups.rows.begin(), groups.rows.end(), [&](std::size_t a, std::size_t b) {
            if (example_ids[a] != example_ids[b])
            {
                return example_ids[a] < example_ids[b];
            }
            return positions[a] < positions[b];
        });
        for (std::size_t i = 0; i < groups.rows.size(); ++i)
        {
            const std::int64_t id = example_ids[groups.rows[i]];
            if (i == 0 || id != groups.example_id.back())
            {
                groups.example_id.push_back(id);
                groups.offsets.push_back(i);
            }
        }
        groups.offsets.push_back(groups.rows.size());
        return groups;
    }

    /// The sampler over grouped examples; errors name `fn`, the public function called.
    inline key_pairs sample_grouped_key_pairs(const example_groups& groups, std::size_t num_pairs,
                                              double max_rel_dist, rng& generator, const char* fn)
    {
        std::vector<std::uint64_t> lengths(groups.count());
        for (std::size_t b = 0; b < groups.count(); ++b)
        {
            lengths[b] = groups.length(b);
        }
        key_pairs pairs = make_key_pairs(num_pairs);
        std::size_t n = 0;
        sample_pairs_over_lengths(lengths, num_pairs, max_rel_dist, generator, fn,
                                  [&](std::size_t b, std::size_t k1, std::size_t k2) {
                                      pairs.example(n) = b;
                                      pairs.first(n) = groups.rows[groups.offsets[b] + k1];
                                      pairs.second(n) = groups.rows[groups.offsets[b] + k2];
                                      ++n;
                                  });
        return pairs;
    }
}  // namespace detail

/// The sampler (docs/method.md §5) over grouped examples; first/second are the caller's row
/// indices, example the example's index in groups. Throws std::domain_error when no example
/// has 2 keys.
inline key_pairs sample_grouped_key_pairs(const example_groups& groups, std::size_t num_pairs, double max_rel_dist,
                                          rng& generator)
{
    return detail::sample_grouped_key_pairs(groups, num_pairs, max_rel_dist, generator, "sample_grouped_key_pairs");
}

/// The per-bucket form of docs/method.md §2.12: keys given by position and example id (one bucket's
/// keys); returns pairs of row indices into those arrays.
template <class EP, class EE>
key_pairs sample_bucket_key_pairs(const xt::xexpression<EP>& positions, const xt::xexpression<EE>& example_ids,
                                  std::size_t num_pairs, double max_rel_dist, rng& generator)
{
    constexpr const char* fn = "sample_bucket_key_pairs";
    const auto& p = positions.derived_cast();
    const auto& e = example_ids.derived_cast();
    if (p.dimension() != 1 || e.dimension() != 1 || p.size() != e.size())
    {
        detail::throw_invalid(fn, "positions and example_ids must be 1-D of equal length, got sizes ", p.size(),
                              " and ", e.size());
    }
    std::vector<std::int64_t> pos(p.begin(), p.end());
    std::vector<std::int64_t> ids(e.begin(), e.end());
    std::vector<std::size_t> rows(pos.size());
    std::iota(rows.begin(), rows.end(), std::size_t(0));
    return detail::sample_grouped_key_pairs(detail::group_examples(rows, pos.data(), ids.data()), num_pairs,
                                            max_rel_dist, generator, fn);
}
}  // namespace attention_plasticity

#endif
