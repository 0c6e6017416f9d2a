#ifndef ATTENTION_PLASTICITY_SEEDS_HPP
#define ATTENTION_PLASTICITY_SEEDS_HPP

// Every seed of a head's analysis (docs/method.md §2.15, §6): derived from the user's seed
// and the head, so that a seed fixes every result whatever the number of threads.

#include <cstdint>

#include "random.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
/// Seed of the key-pair sampler of a head: seed + 10007 layer + 379 q_head (modulo 2^64;
/// docs/method.md §2.15).
inline std::uint64_t pair_sampler_seed(std::uint64_t seed, const head_id& id) noexcept
{
    return seed + 10007u * static_cast<std::uint64_t>(id.layer) + 379u * static_cast<std::uint64_t>(id.q_head);
}

/// Seed of the pair stream of cell (query bucket j, key bucket c), from the head's pair
/// sampler seed (docs/method.md §2.12, §2.15): each cell has its own stream, so that a cell's
/// pairs do not depend on which other cells exist or on the order they are drawn in.
inline std::uint64_t cell_pair_seed(std::uint64_t pair_sampler_seed, std::int64_t q_bucket,
                                    std::int64_t k_bucket) noexcept
{
    return detail::mix_seed(pair_sampler_seed, static_cast<std::uint64_t>(q_bucket),
                            static_cast<std::uint64_t>(k_bucket));
}

/// Seed of the extra key pairs of cell (query bucket j, key bucket c) for the distance map
/// (docs/method.md §8.1, §6.4): mix_seed(pair_sampler_seed, j, c, 1), a stream of its own, so
/// that the map's extra pairs never change the method's pairs (which use the third integer 0).
inline std::uint64_t distance_map_pair_seed(std::uint64_t pair_sampler_seed, std::int64_t q_bucket,
                                            std::int64_t k_bucket) noexcept
{
    return detail::mix_seed(pair_sampler_seed, static_cast<std::uint64_t>(q_bucket),
                            static_cast<std::uint64_t>(k_bucket), 1);
}

/// Seed of the subsample of query bucket j's queries used by the empirical AP when it has more
/// than the cap (docs/method.md §8.2, §6.4): mix_seed(pair_sampler_seed, j, 0, 2).
inline std::uint64_t empirical_query_seed(std::uint64_t pair_sampler_seed, std::int64_t q_bucket) noexcept
{
    return detail::mix_seed(pair_sampler_seed, static_cast<std::uint64_t>(q_bucket), 0, 2);
}

/// The seeds of one head (docs/method.md §2.15).
struct head_seeds
{
    std::uint64_t query_subsample = 0;   // §2.2, the queries kept
    std::uint64_t key_subsample = 0;     // §2.2, the keys kept
    std::uint64_t noise_components = 0;  // §2.8, the components given a KS test
    std::uint64_t pair_sampler = 0;      // §2.12, see pair_sampler_seed
};

/// The seeds of head `id` under the user's `seed`.
inline head_seeds seeds_of_head(std::uint64_t seed, const head_id& id) noexcept
{
    head_seeds seeds;
    seeds.query_subsample = detail::mix_seed(seed, 'q');
    seeds.key_subsample = detail::mix_seed(seed, 'k');
    seeds.noise_components = seed;
    seeds.pair_sampler = pair_sampler_seed(seed, id);
    return seeds;
}
}  // namespace attention_plasticity

#endif
