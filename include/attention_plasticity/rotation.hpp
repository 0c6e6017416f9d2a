#ifndef ATTENTION_PLASTICITY_ROTATION_HPP
#define ATTENTION_PLASTICITY_ROTATION_HPP

// The Householder reflection of docs/method.md §2.5 that maps beta_hat = beta / ||beta|| to
// e1, so that the positional direction becomes component 0. H = I - 2 v v^T is symmetric and
// orthogonal; making it (householder_to_e1) and applying it (householder::apply) are separate
// calls, and X H is applied as X - 2 (X v) v^T in O(nd) without forming H.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/errors.hpp"
#include "detail/matrix.hpp"
#include "detail/reflection.hpp"
#include "detail/scaling.hpp"

namespace attention_plasticity
{
/// Thresholds below which the reflection is the identity (docs/method.md §2.5).
constexpr double householder_tolerance = 1e-12;

/// The reflection H = I - 2 v v^T of docs/method.md §2.5: made by householder_to_e1, applied
/// to row vectors (X H) by apply / apply_inplace.
struct householder
{
    xt::xtensor<double, 1> v;  // unit vector; empty when the map is the identity
    std::size_t dimension = 0;

    bool is_identity() const noexcept { return v.size() == 0; }

    /// The explicit d x d matrix (for inspection and tests; apply() never builds it).
    xt::xtensor<double, 2> matrix() const
    {
        xt::xtensor<double, 2> h = xt::zeros<double>({dimension, dimension});
        for (std::size_t i = 0; i < dimension; ++i)
        {
            h(i, i) = 1.0;
        }
        if (!is_identity())
        {
            for (std::size_t i = 0; i < dimension; ++i)
            {
                for (std::size_t j = 0; j < dimension; ++j)
                {
                    h(i, j) -= 2.0 * v(i) * v(j);
                }
            }
        }
        return h;
    }

    /// X H for an n x d expression, O(nd) (docs/method.md §2.5); returns a new tensor of value
    /// type T (T = void: the value type of X). Arithmetic in double.
    template <class T = void, class E>
    auto apply(const xt::xexpression<E>& x) const
    {
        using value_type = std::conditional_t<std::is_void<T>::value, detail::expression_value_t<E>, T>;
        const auto& e = x.derived_cast();
        if (e.dimension() != 2 || e.shape()[1] != dimension)
        {
            detail::throw_invalid("householder::apply", "X must be n x ", dimension, ", got a ", e.dimension(),
                                  "-D expression", e.dimension() == 2 ? " with " : "",
                                  e.dimension() == 2 ? e.shape()[1] : 0, e.dimension() == 2 ? " columns" : "");
        }
        xt::xtensor<value_type, 2> result = xt::cast<value_type>(e);
        apply_rows(result.data(), result.shape()[0], dimension);
        return result;
    }

    /// In place on a row-major tensor the caller owns.
    template <class T>
    void apply_inplace(xt::xtensor<T, 2>& x) const
    {
        if (x.shape()[1] != dimension)
        {
            detail::throw_invalid("householder::apply_inplace", "X must have ", dimension, " columns, got ",
                                  x.shape()[1]);
        }
        apply_rows(x.data(), x.shape()[0], dimension);
    }

private:
    /// Rows of an n x d row-major block, in place: x <- x H = x - 2 (x.v) v.
    template <class T>
    void apply_rows(T* data, std::size_t rows, std::size_t ld) const
    {
        if (is_identity())
        {
            return;
        }
        for (std::size_t i = 0; i < rows; ++i)
        {
            detail::reflect_row(data + i * ld, v.data(), dimension);
        }
    }
};

/// H with H beta_hat = e1 (docs/method.md §2.5): v = (beta_hat - e1) / ||beta_hat - e1||; the
/// identity when ||beta|| < 1e-12 or ||beta_hat - e1|| < 1e-12.
template <class E>
householder householder_to_e1(const xt::xexpression<E>& beta)
{
    constexpr const char* fn = "householder_to_e1";
    auto b = detail::as_vector<double>(beta, fn, "beta");
    if (b.size == 0)
    {
        detail::throw_invalid(fn, "beta is empty (d = 0)");
    }
    detail::require_finite(fn, "beta", b);
    householder h;
    h.dimension = b.size;
    // Scaled norm: no overflow or underflow for extreme but finite beta.
    const double norm = detail::scaled_norm(b.data, b.size);
    if (norm < householder_tolerance)
    {
        return h;
    }
    std::vector<double> u(b.size);
    double u_norm2 = 0.0;
    double tail2 = 0.0;  // sum over j >= 1 of beta_hat_j^2
    for (std::size_t j = 0; j < b.size; ++j)
    {
        u[j] = b[j] / norm - (j == 0 ? 1.0 : 0.0);
        tail2 += j == 0 ? 0.0 : u[j] * u[j];
    }
    // beta_hat_0 - 1 cancels when beta_hat is near e1; 1 - beta_hat_0 = tail2 / (1 + beta_hat_0)
    // is exact algebra (||beta_hat|| = 1) without the cancellation (Golub & Van Loan, 5.1.3).
    const double head = b[0] / norm;
    if (head > 0.0)
    {
        u[0] = -tail2 / (1.0 + head);
    }
    for (double value : u)
    {
        u_norm2 += value * value;
    }
    const double u_norm = std::sqrt(u_norm2);
    if (u_norm < householder_tolerance)
    {
        return h;
    }
    h.v = xt::xtensor<double, 1>::from_shape({b.size});
    for (std::size_t j = 0; j < b.size; ++j)
    {
        h.v(j) = u[j] / u_norm;
    }
    return h;
}
}  // namespace attention_plasticity

#endif
