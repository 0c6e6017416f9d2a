#ifndef ATTENTION_PLASTICITY_TESTS_TEST_UTIL_HPP
#define ATTENTION_PLASTICITY_TESTS_TEST_UTIL_HPP

// Small helpers shared by the test files: fixtures arrays to tensors, numbers in messages.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <xtensor/xtensor.hpp>

namespace ap_test
{
/// x in %.3e, for INFO messages.
inline std::string sci(double x)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3e", x);
    return buffer;
}

/// A rows x cols row-major fixture array as a tensor of T, optionally scaled.
template <class T>
xt::xtensor<T, 2> matrix_of(const double* data, std::size_t rows, std::size_t cols, double scale = 1.0)
{
    xt::xtensor<T, 2> m = xt::xtensor<T, 2>::from_shape({rows, cols});
    for (std::size_t i = 0; i < rows * cols; ++i)
    {
        m.data()[i] = static_cast<T>(data[i] * scale);
    }
    return m;
}

inline xt::xtensor<double, 1> vector_of(const double* data, std::size_t n)
{
    xt::xtensor<double, 1> v = xt::xtensor<double, 1>::from_shape({n});
    std::copy(data, data + n, v.begin());
    return v;
}

/// An integer fixture column (positions, bucket or example ids) as a tensor.
inline xt::xtensor<std::int64_t, 1> int_column(const std::int64_t* data, std::size_t n)
{
    xt::xtensor<std::int64_t, 1> c = xt::xtensor<std::int64_t, 1>::from_shape({n});
    std::copy(data, data + n, c.begin());
    return c;
}
}  // namespace ap_test

#endif
