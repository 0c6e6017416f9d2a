#ifndef ATTENTION_PLASTICITY_TESTS_TEST_UTIL_HPP
#define ATTENTION_PLASTICITY_TESTS_TEST_UTIL_HPP

// Small helpers shared by the test files: fixtures arrays to tensors (and a fixture head's queries
// and keys), numbers in messages, relative comparisons, hand-made cells of key pairs, and the
// tests' own normal deviates.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/cells.hpp>
#include <attention_plasticity/random.hpp>
#include <attention_plasticity/tokens.hpp>

namespace ap_test
{
/// Checks that `expr` throws `type` with exactly the message `text` (a std::string).
#define AP_CHECK_THROWS_EXACT(expr, type, text) \
    do                                          \
    {                                           \
        CHECK_THROWS_AS(expr, type);            \
        CHECK_THROWS_WITH(expr, text);          \
    } while (false)

/// How the library's messages print a value: as the double it converts to ("nan", "-inf").
inline std::string printed(double x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

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

/// An n-entry fixture array as a tensor of T, optionally scaled.
template <class T = double>
xt::xtensor<T, 1> vector_of(const double* data, std::size_t n, double scale = 1.0)
{
    xt::xtensor<T, 1> v = xt::xtensor<T, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        v(i) = static_cast<T>(data[i] * scale);
    }
    return v;
}

/// The queries and keys of a fixture head (a struct with the arrays q, tq, k, tk and the sizes
/// nq, nk, d): the vectors as TQ and TK, the positions as double tensors and, for the
/// tokens_view form, as int64 columns with every token in bucket 1.
template <class TQ, class TK = TQ>
struct qk_fixture
{
    xt::xtensor<TQ, 2> q;
    xt::xtensor<TK, 2> k;
    xt::xtensor<double, 1> tq;
    xt::xtensor<double, 1> tk;
    std::vector<std::int64_t> q_position, k_position, q_bucket, k_bucket;

    template <class Head>
    explicit qk_fixture(const Head& h)
        : q(matrix_of<TQ>(h.q, h.nq, h.d)),
          k(matrix_of<TK>(h.k, h.nk, h.d)),
          tq(vector_of<double>(h.tq, h.nq)),
          tk(vector_of<double>(h.tk, h.nk)),
          q_position(h.tq, h.tq + h.nq),
          k_position(h.tk, h.tk + h.nk),
          q_bucket(h.nq, 1),
          k_bucket(h.nk, 1)
    {
    }

    attention_plasticity::tokens_view<TQ> query_view() const
    {
        return attention_plasticity::make_tokens_view(q.data(), q.shape()[0], q.shape()[1], q_position.data(),
                                                      q_bucket.data());
    }

    attention_plasticity::tokens_view<TK> key_view() const
    {
        return attention_plasticity::make_tokens_view(k.data(), k.shape()[0], k.shape()[1], k_position.data(),
                                                      k_bucket.data());
    }
};

/// An integer fixture column (positions, bucket or example ids) as a tensor.
inline xt::xtensor<std::int64_t, 1> int_column(const std::int64_t* data, std::size_t n)
{
    xt::xtensor<std::int64_t, 1> c = xt::xtensor<std::int64_t, 1>::from_shape({n});
    std::copy(data, data + n, c.begin());
    return c;
}

/// Cell (j, c) holding the `size` pairs (first[p], second[p]) of key rows, all of example 0.
inline attention_plasticity::cell_pairs cell_of(std::int64_t j, std::int64_t c, const std::size_t* first,
                                                const std::size_t* second, std::size_t size)
{
    attention_plasticity::cell_pairs cell;
    cell.q_bucket = j;
    cell.k_bucket = c;
    cell.pairs.first = xt::xtensor<std::size_t, 1>::from_shape({size});
    cell.pairs.second = xt::xtensor<std::size_t, 1>::from_shape({size});
    cell.pairs.example = xt::zeros<std::size_t>({size});
    std::copy(first, first + size, cell.pairs.first.begin());
    std::copy(second, second + size, cell.pairs.second.begin());
    return cell;
}

/// Cell (j, c) of the pairs (first[p], second[p]); first and second of one size.
inline attention_plasticity::cell_pairs cell_of(std::int64_t j, std::int64_t c, const std::vector<std::size_t>& first,
                                                const std::vector<std::size_t>& second)
{
    return cell_of(j, c, first.data(), second.data(), std::min(first.size(), second.size()));
}

/// |value - reference| / |reference| (0 when equal; the reference floored at DBL_MIN).
inline double rel_err(double value, double reference)
{
    if (value == reference)
    {
        return 0.0;
    }
    return std::fabs(value - reference) / std::max(std::fabs(reference), std::numeric_limits<double>::min());
}

/// Every value of x times 2^exponent (std::ldexp: exact unless it leaves the double range).
template <class E>
E ldexp_all(E x, int exponent)
{
    for (auto& v : x)
    {
        v = std::ldexp(v, exponent);
    }
    return x;
}

/// |a - b| <= rel |b| + abs_floor.
inline bool near_rel(double a, double b, double rel, double abs_floor = 0.0)
{
    return std::fabs(a - b) <= rel * std::fabs(b) + abs_floor;
}

/// The tests' normal deviates: Box-Muller on the uniforms of attention_plasticity::rng
/// (u1 = 1 - uniform() in (0, 1], u2 = uniform()), r cos(2 pi u2) then r sin(2 pi u2). Written
/// here, not taken from the library's normal_generator, so that test data do not depend on
/// the code under test.
class box_muller
{
public:
    explicit box_muller(std::uint64_t seed) : m_generator(seed) {}

    double operator()()
    {
        if (m_has_spare)
        {
            m_has_spare = false;
            return m_spare;
        }
        const double u1 = 1.0 - m_generator.uniform();
        const double u2 = m_generator.uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double theta = 2.0 * 3.14159265358979323846 * u2;
        m_spare = r * std::sin(theta);
        m_has_spare = true;
        return r * std::cos(theta);
    }

private:
    attention_plasticity::rng m_generator;
    bool m_has_spare = false;
    double m_spare = 0.0;
};
}  // namespace ap_test

#endif
