#ifndef ATTENTION_PLASTICITY_DETAIL_FINITE_HPP
#define ATTENTION_PLASTICITY_DETAIL_FINITE_HPP

// The one non-finite check of the library: bit-level tests of the exponent, so that it keeps
// working under -ffast-math (which folds std::isfinite and x - x away), branch-free per value
// so that the scans vectorize, and the errors that name the caller's function, argument and
// index (row and column for matrices, the index for vectors).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "errors.hpp"

namespace attention_plasticity
{
namespace detail
{
    template <class T>
    struct float_bits;

    template <>
    struct float_bits<float>
    {
        using type = std::uint32_t;
        static constexpr type magnitude = 0x7FFFFFFFu;  // all bits but the sign
        static constexpr type exponent_one = 0x00800000u;  // lowest exponent bit
        static constexpr type infinity = 0x7F800000u;
        static constexpr int sign_shift = 31;
    };

    template <>
    struct float_bits<double>
    {
        using type = std::uint64_t;
        static constexpr type magnitude = 0x7FFFFFFFFFFFFFFFull;
        static constexpr type exponent_one = 0x0010000000000000ull;
        static constexpr type infinity = 0x7FF0000000000000ull;
        static constexpr int sign_shift = 63;
    };

    /// A word whose top bit is set exactly when x is +-inf or NaN (exponent all ones): the
    /// magnitude bits plus one exponent unit carry into the sign position only then. OR these
    /// over many values and test once with has_non_finite_flag: add, and, or (SSE2 vectors).
    template <class T>
    inline typename float_bits<T>::type non_finite_flag(T x) noexcept
    {
        using bits = float_bits<T>;
        typename bits::type word;
        std::memcpy(&word, &x, sizeof word);
        return (word & bits::magnitude) + bits::exponent_one;
    }

    template <class T>
    inline bool has_non_finite_flag(typename float_bits<T>::type flags) noexcept
    {
        return (flags >> float_bits<T>::sign_shift) != 0;
    }

    /// x is +-inf or NaN (bit-level; integers are always finite).
    template <class T>
    inline bool is_non_finite(T x) noexcept
    {
        if constexpr (std::is_integral<T>::value)
        {
            return false;
        }
        else
        {
            static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                          "attention_plasticity: values must be float, double or integers");
            return has_non_finite_flag<T>(non_finite_flag(x));
        }
    }

    template <class T>
    inline bool is_finite(T x) noexcept
    {
        return !is_non_finite(x);
    }

    /// x is NaN (bit-level: exponent all ones and a non-zero mantissa).
    template <class T>
    inline bool is_nan(T x) noexcept
    {
        if constexpr (std::is_integral<T>::value)
        {
            return false;
        }
        else
        {
            using bits = float_bits<T>;
            typename bits::type word;
            std::memcpy(&word, &x, sizeof word);
            return (word & bits::magnitude) > bits::infinity;
        }
    }

    /// True when any of data[0..n) is +-inf or NaN: one branch-free pass.
    template <class T>
    bool any_non_finite(const T* data, std::size_t n) noexcept
    {
        if constexpr (std::is_integral<T>::value)
        {
            return false;
        }
        else
        {
            typename float_bits<T>::type flags = 0;
            for (std::size_t i = 0; i < n; ++i)
            {
                flags |= non_finite_flag(data[i]);
            }
            return has_non_finite_flag<T>(flags);
        }
    }

    /// Index of the first +-inf or NaN of data[0..n), n when every value is finite. Branch-free
    /// passes over blocks; only the block that holds the value is searched one by one.
    template <class T>
    std::size_t first_non_finite(const T* data, std::size_t n) noexcept
    {
        constexpr std::size_t block = 256;
        for (std::size_t start = 0; start < n; start += block)
        {
            const std::size_t size = n - start < block ? n - start : block;
            if (any_non_finite(data + start, size))
            {
                std::size_t i = start;
                while (!is_non_finite(data[i]))
                {
                    ++i;
                }
                return i;
            }
        }
        return n;
    }

    /// Position of a value in a matrix; row == rows of the matrix means "none".
    struct matrix_position
    {
        std::size_t row;
        std::size_t column;
    };

    /// First +-inf or NaN, in row-major order, of a rows x cols matrix whose rows are `ld`
    /// elements apart; {rows, 0} when every value is finite.
    template <class T>
    matrix_position first_non_finite(const T* data, std::size_t rows, std::size_t cols, std::size_t ld) noexcept
    {
        if (ld == cols)
        {
            const std::size_t flat = first_non_finite(data, rows * cols);
            return flat == rows * cols ? matrix_position{rows, 0} : matrix_position{flat / cols, flat % cols};
        }
        for (std::size_t i = 0; i < rows; ++i)
        {
            const std::size_t j = first_non_finite(data + i * ld, cols);
            if (j < cols)
            {
                return {i, j};
            }
        }
        return {rows, 0};
    }

    /// "function: name has a non-finite value (v) at index i".
    template <class T>
    [[noreturn]] void throw_non_finite(const char* function, const char* name, T value, std::size_t index)
    {
        throw_domain(function, name, " has a non-finite value (", static_cast<double>(value), ") at index ", index);
    }

    /// "function: name has a non-finite value (v) at row i, column j".
    template <class T>
    [[noreturn]] void throw_non_finite(const char* function, const char* name, T value, std::size_t row,
                                       std::size_t column)
    {
        throw_domain(function, name, " has a non-finite value (", static_cast<double>(value), ") at row ", row,
                     ", column ", column);
    }

    /// std::domain_error naming the first non-finite value of the vector data[0..n).
    template <class T>
    void require_finite(const char* function, const char* name, const T* data, std::size_t n)
    {
        const std::size_t i = first_non_finite(data, n);
        if (i < n)
        {
            throw_non_finite(function, name, data[i], i);
        }
    }

    /// std::domain_error naming the first non-finite value of a rows x cols matrix (leading
    /// dimension ld) by its row and column.
    template <class T>
    void require_finite(const char* function, const char* name, const T* data, std::size_t rows, std::size_t cols,
                        std::size_t ld)
    {
        const matrix_position p = first_non_finite(data, rows, cols, ld);
        if (p.row < rows)
        {
            throw_non_finite(function, name, data[p.row * ld + p.column], p.row, p.column);
        }
    }

    /// std::domain_error when a scalar argument is +-inf or NaN.
    inline void require_finite(const char* function, const char* name, double value)
    {
        if (is_non_finite(value))
        {
            throw_domain(function, name, " must be finite, got ", value);
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
