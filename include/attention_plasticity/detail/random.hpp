#ifndef ATTENTION_PLASTICITY_DETAIL_RANDOM_HPP
#define ATTENTION_PLASTICITY_DETAIL_RANDOM_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>

namespace attention_plasticity
{
namespace detail
{
    // SplitMix64 step: used to seed generators and to derive independent streams from a
    // seed and a few integers, so that results never depend on scheduling.
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
}  // namespace detail

/// xoshiro256** generator: fast, 256-bit state, fully specified, so a seed gives the same
/// stream on every platform and standard library (unlike std:: distributions).
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

    /// Uniform integer in [0, bound), bound > 0, without modulo bias (Lemire's method).
    std::uint64_t below(std::uint64_t bound) noexcept
    {
        unsigned __int128 product = static_cast<unsigned __int128>((*this)()) * bound;
        auto low = static_cast<std::uint64_t>(product);
        if (low < bound)
        {
            const std::uint64_t threshold = (0 - bound) % bound;
            while (low < threshold)
            {
                product = static_cast<unsigned __int128>((*this)()) * bound;
                low = static_cast<std::uint64_t>(product);
            }
        }
        return static_cast<std::uint64_t>(product >> 64);
    }

    /// Uniform double in [0, 1) with 53 random bits.
    double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

    std::uint64_t m_state[4];
};

/// Standard normal variates from rng by Box-Muller (the std:: distributions are
/// implementation-defined, so a seed would not give the same numbers everywhere).
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

}  // namespace attention_plasticity

#endif
