#ifndef ATTENTION_PLASTICITY_DETAIL_SCALING_HPP
#define ATTENTION_PLASTICITY_DETAIL_SCALING_HPP

// Exact rescaling by powers of two (docs/method.md §4, §7): the kernel and the moments bring
// their operands near 1 before forming products of two to four of them, so that no
// intermediate overflows or underflows for any finite input, subnormals and values near
// DBL_MAX included. A power of two changes the exponent only, so every operation on the scaled
// values rounds exactly as it would on the unscaled ones where those do not overflow.

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "finite.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// e with |x| 2^e in [1, 2); 0 for x = 0 and for +-inf / NaN. Any finite x, subnormals
    /// included: e lies in [-1023, 1074].
    inline int power_of_two_exponent(double x) noexcept
    {
        if (x == 0.0 || is_non_finite(x))
        {
            return 0;
        }
        return -std::ilogb(x);
    }

    /// An even exponent e with |x| 2^e in [0.5, 2), for quantities whose square root is taken
    /// (variances): 2^(e/2) is then exact too.
    inline int even_power_of_two_exponent(double x) noexcept
    {
        const int e = power_of_two_exponent(x);
        return e % 2 == 0 ? e : e - 1;
    }

    /// The Euclidean norm of v (d entries) without overflow or underflow for extreme but finite
    /// entries: the largest |v_j| times the root of the sum of (v_j / largest)^2. 0 for a zero
    /// vector (or d = 0); NaN when an entry is infinite.
    inline double scaled_norm(const double* v, std::size_t d) noexcept
    {
        double largest = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            largest = std::max(largest, std::fabs(v[j]));
        }
        if (!(largest > 0.0))
        {
            return 0.0;
        }
        double scaled2 = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            const double x = v[j] / largest;
            scaled2 += x * x;
        }
        return largest * std::sqrt(scaled2);
    }

    /// Multiplication by 2^e, e in [-1023, 1074], exactly: 2^e itself is not a double above
    /// 2^1023, so the factor is split in two there (a scaling up never rounds unless it
    /// overflows; a scaling down is one multiplication, rounded once).
    class power_of_two
    {
    public:
        explicit power_of_two(int exponent) noexcept
            : m_first(std::ldexp(1.0, exponent > split ? split : exponent)),
              m_second(std::ldexp(1.0, exponent > split ? exponent - split : 0))
        {
        }

        double operator()(double x) const noexcept { return x * m_first * m_second; }

    private:
        static constexpr int split = 1000;
        double m_first;
        double m_second;
    };
}  // namespace detail
}  // namespace attention_plasticity

#endif
