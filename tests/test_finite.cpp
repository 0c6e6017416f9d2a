// Tests of include/attention_plasticity/detail/finite.hpp, the library's one non-finite check,
// and of the errors it gives through the public functions. This file is also compiled with
// -ffast-math (executable ap_tests_fast_math): the checks are bit-level and must still find
// every NaN and infinity there, where std::isfinite and x - x are folded away. So this file
// itself never relies on std::isnan / std::isfinite.

#include <catch2/catch.hpp>

#include <cfloat>
#include <cstddef>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/detail/finite.hpp>
#include <attention_plasticity/normality.hpp>
#include <attention_plasticity/plasticity.hpp>

namespace ap = attention_plasticity;

namespace
{
template <class T>
std::vector<T> special_values()
{
    std::vector<T> values = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                             std::numeric_limits<T>::signaling_NaN(), std::numeric_limits<T>::infinity(),
                             -std::numeric_limits<T>::infinity()};
    // A NaN with the lowest mantissa bit only (its exponent is all ones like infinity's).
    T lowest_nan;
    if constexpr (sizeof(T) == 8)
    {
        const std::uint64_t bits = 0x7FF0000000000001ull;
        std::memcpy(&lowest_nan, &bits, sizeof bits);
    }
    else
    {
        const std::uint32_t bits = 0x7F800001u;
        std::memcpy(&lowest_nan, &bits, sizeof bits);
    }
    values.push_back(lowest_nan);
    return values;
}

template <class T>
std::vector<T> finite_extremes()
{
    return {T(0), -T(0), std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(),
            std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(),
            T(1), T(-3.5)};
}
}  // namespace

TEMPLATE_TEST_CASE("is_non_finite / is_nan: bit-level, every NaN and infinity, no finite value", "[finite]", float,
                   double)
{
    using T = TestType;
    for (T x : special_values<T>())
    {
        CHECK(ap::detail::is_non_finite(x));
        CHECK_FALSE(ap::detail::is_finite(x));
    }
    const auto specials = special_values<T>();
    CHECK(ap::detail::is_nan(specials[0]));
    CHECK(ap::detail::is_nan(specials[1]));
    CHECK(ap::detail::is_nan(specials[2]));
    CHECK_FALSE(ap::detail::is_nan(specials[3]));
    CHECK_FALSE(ap::detail::is_nan(specials[4]));
    CHECK(ap::detail::is_nan(specials[5]));
    for (T x : finite_extremes<T>())
    {
        CAPTURE(static_cast<double>(x));
        CHECK_FALSE(ap::detail::is_non_finite(x));
        CHECK_FALSE(ap::detail::is_nan(x));
    }
    CHECK_FALSE(ap::detail::is_non_finite(std::int64_t(-5)));
}

TEMPLATE_TEST_CASE("first_non_finite: the first position, at every offset around the block size", "[finite]", float,
                   double)
{
    using T = TestType;
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(255), std::size_t(256),
                          std::size_t(257), std::size_t(1000)})
    {
        std::vector<T> x(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            x[i] = finite_extremes<T>()[i % finite_extremes<T>().size()];
        }
        CAPTURE(n);
        CHECK(ap::detail::first_non_finite(x.data(), n) == n);
        CHECK_FALSE(ap::detail::any_non_finite(x.data(), n));
        for (std::size_t at : {std::size_t(0), n / 2, n > 0 ? n - 1 : 0, std::size_t(255), std::size_t(256)})
        {
            if (at >= n)
            {
                continue;
            }
            for (T bad : special_values<T>())
            {
                std::vector<T> y = x;
                y[at] = bad;
                if (at + 3 < n)
                {
                    y[at + 3] = std::numeric_limits<T>::infinity();  // a later one is not reported
                }
                CAPTURE(at);
                CHECK(ap::detail::first_non_finite(y.data(), n) == at);
                CHECK(ap::detail::any_non_finite(y.data(), n));
            }
        }
    }
}

TEMPLATE_TEST_CASE("first_non_finite of a matrix: row and column in row-major order, padded rows", "[finite]", float,
                   double)
{
    using T = TestType;
    const std::size_t rows = 5, cols = 3, ld = 4;
    std::vector<T> m(rows * ld, T(1));
    m[0 * ld + 3] = std::numeric_limits<T>::quiet_NaN();  // padding: outside the matrix
    auto p = ap::detail::first_non_finite(m.data(), rows, cols, ld);
    CHECK(p.row == rows);
    m[3 * ld + 2] = -std::numeric_limits<T>::infinity();
    m[4 * ld + 0] = std::numeric_limits<T>::quiet_NaN();
    p = ap::detail::first_non_finite(m.data(), rows, cols, ld);
    CHECK(p.row == 3);
    CHECK(p.column == 2);
    std::vector<T> dense(rows * cols, T(2));
    dense[2 * cols + 1] = std::numeric_limits<T>::infinity();
    p = ap::detail::first_non_finite(dense.data(), rows, cols, cols);
    CHECK(p.row == 2);
    CHECK(p.column == 1);
}

TEST_CASE("require_finite: the message names the function, the argument, the value and the index", "[finite]")
{
    const double v[] = {1.0, 2.0, -std::numeric_limits<double>::infinity(), 3.0};
    CHECK_THROWS_WITH(ap::detail::require_finite("f", "x", v, 4), "f: x has a non-finite value (-inf) at index 2");
    CHECK_THROWS_AS(ap::detail::require_finite("f", "x", v, 4), std::domain_error);
    CHECK_NOTHROW(ap::detail::require_finite("f", "x", v, 2));
    const float m[] = {1.0f, 2.0f, 3.0f, 4.0f, std::numeric_limits<float>::quiet_NaN(), 6.0f};
    CHECK_THROWS_WITH(ap::detail::require_finite("g", "M", m, 2, 3, 3), "g: M has a non-finite value (nan) at row 1, column 1");
    CHECK_THROWS_WITH(ap::detail::require_finite("h", "alpha", std::numeric_limits<double>::infinity()),
                      "h: alpha must be finite, got inf");
}

TEMPLATE_TEST_CASE("public functions find NaN and infinity (also under -ffast-math)", "[finite]", float, double)
{
    using T = TestType;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const T inf = std::numeric_limits<T>::infinity();
    xt::xtensor<T, 2> w = {{1, 2, 3}, {0, 1, 0}};
    const xt::xtensor<T, 1> mu = {1, T(0.5), 0};
    const xt::xtensor<T, 2> sigma = {{1, 0, 0}, {0, 1, T(0.2)}, {0, T(0.2), 1}};
    CHECK_NOTHROW(ap::pair_plasticity(w, mu, sigma));
    w(1, 2) = inf;
    CHECK_THROWS_AS(ap::pair_plasticity(w, mu, sigma), std::domain_error);
    w(1, 2) = 0;
    xt::xtensor<T, 1> mu_bad = mu;
    mu_bad(2) = nan;
    CHECK_THROWS_AS(ap::pair_plasticity(w, mu_bad, sigma), std::domain_error);
    xt::xtensor<T, 2> sigma_bad = sigma;
    sigma_bad(2, 1) = nan;
    CHECK_THROWS_AS(ap::pair_plasticity(w, mu, sigma_bad), std::domain_error);

    xt::xtensor<T, 1> x = {T(0.5), T(1.5), T(-2), T(3), T(0.25)};
    CHECK_NOTHROW(ap::skewness(x));
    x(3) = nan;
    CHECK_THROWS_AS(ap::skewness(x), std::domain_error);
    CHECK_THROWS_AS(ap::excess_kurtosis(x), std::domain_error);
    CHECK_THROWS_AS(ap::ks_test_normal(x), std::domain_error);
    CHECK_THROWS_AS(ap::standardized_normality(x), std::domain_error);
    xt::xtensor<T, 2> noise = {{1, 2}, {3, 4}, {5, T(6.5)}};
    CHECK_NOTHROW(ap::noise_normality(noise, 2, 0.01, 1));
    noise(2, 0) = -inf;
    CHECK_THROWS_AS(ap::noise_normality(noise, 2, 0.01, 1), std::domain_error);
    CHECK_THROWS_AS(ap::kolmogorov_sf(10, std::numeric_limits<double>::quiet_NaN()), std::domain_error);
}
