#ifndef ATTENTION_PLASTICITY_RANDOM_HPP
#define ATTENTION_PLASTICITY_RANDOM_HPP

// The library's random streams (docs/method.md §6): the xoshiro256** generator `rng`, normal
// variates by Box-Muller, and draws without replacement by a partial Fisher-Yates shuffle.
// Every algorithm is fully specified here, so a seed gives the same numbers on every platform
// and standard library (the std:: distributions are implementation-defined).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

namespace attention_plasticity
{
namespace detail
{
    // SplitMix64 step: seeds generators and derives independent streams from a seed and a
    // few integers, so that results never depend on scheduling (docs/method.md §6).
    inline std::uint64_t splitmix64(std::uint64_t& state) noexcept
    {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }

    inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t a = 0, std::uint64_t b = 0,
                                  std::uint64_t c = 0) noexcept
    {
        std::uint64_t state = seed;
        std::uint64_t h = splitmix64(state);
        for (std::uint64_t x : {a, b, c})
        {
            state = h ^ (x + 0x632BE59BD9B4E019ULL);
            h = splitmix64(state);
        }
        return h;
    }

    /// The 128-bit product a * b as (high, low) 64-bit halves, from 32-bit pieces: for
    /// compilers without unsigned __int128 (same results).
    inline std::uint64_t multiply_64x64_portable(std::uint64_t a, std::uint64_t b, std::uint64_t& low) noexcept
    {
        const std::uint64_t a_lo = a & 0xFFFFFFFFULL, a_hi = a >> 32;
        const std::uint64_t b_lo = b & 0xFFFFFFFFULL, b_hi = b >> 32;
        const std::uint64_t lo_lo = a_lo * b_lo;
        const std::uint64_t hi_lo = a_hi * b_lo;
        const std::uint64_t lo_hi = a_lo * b_hi;
        const std::uint64_t hi_hi = a_hi * b_hi;
        const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFULL) + lo_hi;  // < 2^64
        low = (cross << 32) | (lo_lo & 0xFFFFFFFFULL);
        return hi_hi + (hi_lo >> 32) + (cross >> 32);
    }

// ATTENTION_PLASTICITY_NO_INT128 forces the portable product (the tests build it both ways).
#if defined(__SIZEOF_INT128__) && !defined(ATTENTION_PLASTICITY_NO_INT128)
    __extension__ typedef unsigned __int128 uint128;  // __extension__: no -Wpedantic warning

    inline std::uint64_t multiply_64x64(std::uint64_t a, std::uint64_t b, std::uint64_t& low) noexcept
    {
        const uint128 product = static_cast<uint128>(a) * b;
        low = static_cast<std::uint64_t>(product);
        return static_cast<std::uint64_t>(product >> 64);
    }
#else
    inline std::uint64_t multiply_64x64(std::uint64_t a, std::uint64_t b, std::uint64_t& low) noexcept
    {
        return multiply_64x64_portable(a, b, low);
    }
#endif
}  // namespace detail

/// xoshiro256** generator, seeded through SplitMix64 (docs/method.md §6): fast, 256-bit state,
/// fully specified, so a seed gives the same stream on every platform.
class rng
{
public:
    using result_type = std::uint64_t;

    explicit rng(std::uint64_t seed = 0) noexcept
    {
        std::uint64_t state = seed;
        for (auto& word : m_state)
        {
            word = detail::splitmix64(state);
        }
    }

    static constexpr result_type min() noexcept { return 0; }
    static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

    result_type operator()() noexcept
    {
        const std::uint64_t result = rotl(m_state[1] * 5, 7) * 9;
        const std::uint64_t t = m_state[1] << 17;
        m_state[2] ^= m_state[0];
        m_state[3] ^= m_state[1];
        m_state[1] ^= m_state[2];
        m_state[0] ^= m_state[3];
        m_state[2] ^= t;
        m_state[3] = rotl(m_state[3], 45);
        return result;
    }

    /// Uniform integer in [0, bound), bound > 0, without modulo bias (Lemire's method: the
    /// high half of x * bound, redrawn while the low half is below 2^64 mod bound).
    std::uint64_t below(std::uint64_t bound) noexcept
    {
        std::uint64_t low = 0;
        std::uint64_t high = detail::multiply_64x64((*this)(), bound, low);
        if (low < bound)
        {
            const std::uint64_t threshold = (0 - bound) % bound;
            while (low < threshold)
            {
                high = detail::multiply_64x64((*this)(), bound, low);
            }
        }
        return high;
    }

    /// Uniform double in [0, 1) with 53 random bits.
    double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

    std::uint64_t m_state[4];
};

/// Standard normal variates from rng by Box-Muller, in pairs: u1 = 1 - uniform() in (0, 1],
/// u2 = uniform(), r = sqrt(-2 log u1); returns r cos(2 pi u2), then r sin(2 pi u2).
class normal_generator
{
public:
    explicit normal_generator(std::uint64_t seed = 0) noexcept : m_rng(seed) {}

    double operator()() noexcept
    {
        if (m_has_spare)
        {
            m_has_spare = false;
            return m_spare;
        }
        const double u1 = 1.0 - m_rng.uniform();  // (0, 1]: log(u1) is finite
        const double u2 = m_rng.uniform();
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 6.283185307179586476925 * u2;
        m_spare = radius * std::sin(angle);
        m_has_spare = true;
        return radius * std::cos(angle);
    }

    /// The underlying uniform stream, for draws mixed with the normal ones.
    double uniform() noexcept { return m_rng.uniform(); }
    std::uint64_t below(std::uint64_t bound) noexcept { return m_rng.below(bound); }

private:
    rng m_rng;
    bool m_has_spare = false;
    double m_spare = 0.0;
};

/// k of the indices 0..n-1, uniformly without replacement, by a partial Fisher-Yates shuffle
/// of idx = 0..n-1: for i = 0..k-1, swap(idx[i], idx[i + generator.below(n - i)]); returns
/// idx[0..k) in draw order (docs/method.md §6). k >= n returns 0..n-1 in order without drawing.
inline std::vector<std::size_t> sample_without_replacement(std::size_t n, std::size_t k, rng& generator)
{
    std::vector<std::size_t> indices(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        indices[i] = i;
    }
    if (k >= n)
    {
        return indices;
    }
    for (std::size_t i = 0; i < k; ++i)
    {
        const std::size_t j = i + static_cast<std::size_t>(generator.below(static_cast<std::uint64_t>(n - i)));
        std::swap(indices[i], indices[j]);
    }
    indices.resize(k);
    return indices;
}
}  // namespace attention_plasticity

#endif
