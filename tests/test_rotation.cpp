// Unit tests of the Householder rotation of docs/method.md §2.5: H = I - 2 v v^T with H beta_hat = e1.
//
// References: the NumPy matrix of tests/reference/core_reference.hpp (regenerate with
// /usr/bin/python3 tests/reference/gen_core_reference.py) and closed-form properties
// (orthogonality, symmetry, H beta_hat = e1, invariance of dot products).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>

#include "test_util.hpp"
#include <attention_plasticity/random.hpp>
#include <attention_plasticity/rotation.hpp>

#include "reference/core_reference.hpp"

namespace ap = attention_plasticity;
using ap_test::sci;

namespace
{
// Normal deviates (Box-Muller) from the library's generator.
double normal(ap::rng& g)
{
    const double u1 = 1.0 - g.uniform();
    const double u2 = g.uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

// Largest |entry| of H H^T - I, of H - H^T, and of H beta_hat - e1 (beta_hat in long double).
struct householder_errors
{
    double orthogonality = 0.0;
    double symmetry = 0.0;
    double maps_to_e1 = 0.0;
};

householder_errors errors_of(const xt::xtensor<double, 2>& h, const std::vector<double>& beta)
{
    const std::size_t d = beta.size();
    householder_errors e;
    long double norm2 = 0.0L;
    long double largest = 0.0L;
    for (double b : beta)
    {
        largest = std::max(largest, std::fabs(static_cast<long double>(b)));
    }
    for (double b : beta)
    {
        norm2 += (b / largest) * (b / largest);
    }
    const long double norm = std::sqrt(norm2);
    for (std::size_t i = 0; i < d; ++i)
    {
        long double hb = 0.0L;
        for (std::size_t j = 0; j < d; ++j)
        {
            long double hht = 0.0L;
            for (std::size_t k = 0; k < d; ++k)
            {
                hht += static_cast<long double>(h(i, k)) * h(j, k);
            }
            e.orthogonality = std::max(e.orthogonality, static_cast<double>(std::fabs(hht - (i == j ? 1.0L : 0.0L))));
            e.symmetry = std::max(e.symmetry, std::fabs(h(i, j) - h(j, i)));
            hb += static_cast<long double>(h(i, j)) * (beta[j] / largest / norm);
        }
        e.maps_to_e1 = std::max(e.maps_to_e1, static_cast<double>(std::fabs(hb - (i == 0 ? 1.0L : 0.0L))));
    }
    return e;
}

xt::xtensor<double, 1> as_tensor(const std::vector<double>& v)
{
    xt::xtensor<double, 1> t = xt::xtensor<double, 1>::from_shape({v.size()});
    std::copy(v.begin(), v.end(), t.begin());
    return t;
}

xt::xtensor<double, 2> random_matrix(std::size_t rows, std::size_t cols, ap::rng& g)
{
    xt::xtensor<double, 2> x = xt::xtensor<double, 2>::from_shape({rows, cols});
    for (auto& v : x)
    {
        v = normal(g);
    }
    return x;
}
}  // namespace

TEST_CASE("householder_to_e1 matches the NumPy matrix", "[rotation]")
{
    const std::size_t d = core_ref::reg_d;
    const std::vector<double> beta(core_ref::rot_beta, core_ref::rot_beta + d);
    const auto h = ap::householder_to_e1(as_tensor(beta));
    REQUIRE_FALSE(h.is_identity());
    REQUIRE(h.dimension == d);
    const auto m = h.matrix();
    double worst = 0.0;
    for (std::size_t i = 0; i < d; ++i)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            worst = std::max(worst, std::fabs(m(i, j) - core_ref::rot_h[i * d + j]));
        }
    }
    CAPTURE(sci(worst));
    CHECK(worst < 1e-14);
    // v is a unit vector.
    double vn = 0.0;
    for (double x : h.v)
    {
        vn += x * x;
    }
    CHECK(vn == Approx(1.0).epsilon(1e-15));
}

TEST_CASE("householder_to_e1: orthogonal, symmetric, H beta_hat = e1 for random beta in d = 1..8 and extreme "
          "magnitudes",
          "[rotation]")
{
    ap::rng g(123);
    double worst = 0.0;
    for (std::size_t d = 1; d <= 8; ++d)
    {
        for (int rep = 0; rep < 20; ++rep)
        {
            std::vector<double> beta(d);
            for (auto& b : beta)
            {
                b = normal(g);
            }
            // Magnitudes from 1e-11 (just above the 1e-12 identity threshold) to 1e300, and
            // a vector mixing subnormal-range and 1e300 entries.
            const double scales[] = {1.0, 1e-11, 1e-6, 1e6, 1e150, 1e300};
            for (double s : scales)
            {
                std::vector<double> scaled(beta);
                for (auto& b : scaled)
                {
                    b *= s;
                }
                if (rep == 0 && d > 2)
                {
                    scaled[1] = 1e-310 * (s >= 1 ? 1.0 : 0.0);  // subnormal entry
                }
                CAPTURE(d, rep, s);
                const auto h = ap::householder_to_e1(as_tensor(scaled));
                double norm2 = 0.0;
                for (double b : scaled)
                {
                    norm2 += (b / s) * (b / s);
                }
                if (std::sqrt(norm2) * s < 1e-12)
                {
                    CHECK(h.is_identity());  // below the threshold of docs/method.md §2.5
                    continue;
                }
                const auto m = h.matrix();
                const auto e = errors_of(m, scaled);
                CHECK(e.orthogonality < 1e-14);
                CHECK(e.symmetry == 0.0);
                CHECK(e.maps_to_e1 < 1e-14);
                worst = std::max({worst, e.orthogonality, e.maps_to_e1});
            }
        }
    }
    CAPTURE(sci(worst));
    CHECK(worst < 1e-14);
}

TEST_CASE("householder: apply() equals X H, preserves dot products, is an involution", "[rotation]")
{
    ap::rng g(7);
    const std::size_t d = core_ref::reg_d;
    const std::vector<double> beta(core_ref::rot_beta, core_ref::rot_beta + d);
    const auto h = ap::householder_to_e1(as_tensor(beta));
    const auto m = h.matrix();
    const std::size_t n = 40;
    const auto x = random_matrix(n, d, g);
    const auto y = random_matrix(n, d, g);
    const auto xh = h.apply(x);
    const auto yh = h.apply(y);
    REQUIRE(xh.shape()[0] == n);
    REQUIRE(xh.shape()[1] == d);
    double worst_product = 0.0;
    double worst_dot = 0.0;
    for (std::size_t i = 0; i < n; ++i)
    {
        double xnorm = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            long double ref = 0.0L;
            for (std::size_t k = 0; k < d; ++k)
            {
                ref += static_cast<long double>(x(i, k)) * m(k, j);
            }
            worst_product = std::max(worst_product, static_cast<double>(std::fabs(xh(i, j) - ref)));
            xnorm += x(i, j) * x(i, j);
        }
        for (std::size_t r = 0; r < n; ++r)
        {
            long double dot = 0.0L;
            long double dot_rot = 0.0L;
            double ynorm = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                dot += static_cast<long double>(x(i, j)) * y(r, j);
                dot_rot += static_cast<long double>(xh(i, j)) * yh(r, j);
                ynorm += y(r, j) * y(r, j);
            }
            worst_dot = std::max(worst_dot,
                                 static_cast<double>(std::fabs(dot - dot_rot)) / std::sqrt(xnorm * ynorm));
        }
    }
    CAPTURE(sci(worst_product));
    CHECK(worst_product < 1e-14 * 10);  // entries of X are O(1..3); ~ a few ulp of the row norm
    CAPTURE(sci(worst_dot));
    CHECK(worst_dot < 1e-14);
    // Involution: (X H) H = X.
    const auto back = h.apply(xh);
    CHECK(xt::amax(xt::abs(back - x))() < 1e-14);
    // In place equals apply().
    auto inplace = x;
    h.apply_inplace(inplace);
    CHECK((inplace == xh));
    // Row 0 of H is beta_hat^T (H symmetric, H beta_hat = e1): component 0 of x H is x . beta_hat.
    double bn = 0.0;
    for (double b : beta)
    {
        bn += b * b;
    }
    bn = std::sqrt(bn);
    for (std::size_t i = 0; i < n; ++i)
    {
        double proj = 0.0;
        for (std::size_t j = 0; j < d; ++j)
        {
            proj += x(i, j) * beta[j] / bn;
        }
        CHECK(xh(i, 0) == Approx(proj).margin(1e-14));
    }
    // Empty X.
    const xt::xtensor<double, 2> none = xt::xtensor<double, 2>::from_shape({0, d});
    CHECK(h.apply(none).shape()[0] == 0);
}

TEMPLATE_TEST_CASE("householder: apply() to float and double data", "[rotation]", float, double)
{
    using T = TestType;
    const double tol = std::is_same<T, float>::value ? 1e-6 : 1e-14;
    ap::rng g(11);
    const std::size_t d = core_ref::reg_d;
    const std::vector<double> beta(core_ref::rot_beta, core_ref::rot_beta + d);
    const auto h = ap::householder_to_e1(as_tensor(beta));
    const auto m = h.matrix();
    const auto xd = random_matrix(25, d, g);
    xt::xtensor<T, 2> x = xt::cast<T>(xd);
    const auto xh = h.template apply<T>(x);
    static_assert(std::is_same<typename std::decay_t<decltype(xh)>::value_type, T>::value, "value type T");
    double worst = 0.0;
    for (std::size_t i = 0; i < 25; ++i)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            double ref = 0.0;
            for (std::size_t k = 0; k < d; ++k)
            {
                ref += static_cast<double>(x(i, k)) * m(k, j);
            }
            worst = std::max(worst, std::fabs(static_cast<double>(xh(i, j)) - ref));
        }
    }
    CAPTURE(sci(worst));
    CHECK(worst < tol * 4);
    auto inplace = x;
    h.apply_inplace(inplace);
    CHECK((inplace == xh));
}

TEST_CASE("householder_to_e1: identity when ||beta|| < 1e-12 or beta_hat = e1, beta = -e1 is a reflection",
          "[rotation]")
{
    ap::rng g(3);
    const auto x = random_matrix(10, 4, g);
    for (const std::vector<double>& beta : std::vector<std::vector<double>>{{0, 0, 0, 0},
                                                                             {1e-13, -2e-13, 0, 5e-13},
                                                                             {1e-200, 1e-200, 0, 0},
                                                                             {3, 0, 0, 0},
                                                                             {1e300, 0, 0, 0},
                                                                             {5e-12, 0, 0, 0}})
    {
        CAPTURE(beta[0], beta[1]);
        const auto h = ap::householder_to_e1(as_tensor(beta));
        CHECK(h.is_identity());
        CHECK(h.dimension == 4);
        const auto m = h.matrix();
        for (std::size_t i = 0; i < 4; ++i)
        {
            for (std::size_t j = 0; j < 4; ++j)
            {
                CHECK(m(i, j) == (i == j ? 1.0 : 0.0));
            }
        }
        CHECK((h.apply(x) == x));
    }
    // Just above the norm threshold: not the identity.
    const std::vector<double> above = {0.0, 2e-12, 0.0, 0.0};
    CHECK_FALSE(ap::householder_to_e1(as_tensor(above)).is_identity());

    // beta = -e1 (any positive multiple): H = diag(-1, 1, 1, 1), a reflection with H(-e1) = e1.
    for (double s : {1.0, 1e-6, 1e250})
    {
        const std::vector<double> minus_e1 = {-s, 0.0, 0.0, 0.0};
        const auto h = ap::householder_to_e1(as_tensor(minus_e1));
        REQUIRE_FALSE(h.is_identity());
        const auto m = h.matrix();
        for (std::size_t i = 0; i < 4; ++i)
        {
            for (std::size_t j = 0; j < 4; ++j)
            {
                CHECK(m(i, j) == (i == j ? (i == 0 ? -1.0 : 1.0) : 0.0));
            }
        }
    }
    // d = 1: beta > 0 is e1 (identity); beta < 0 gives H = [-1].
    const auto h_pos = ap::householder_to_e1(xt::xtensor<double, 1>{2.5});
    CHECK(h_pos.is_identity());
    const auto h_neg = ap::householder_to_e1(xt::xtensor<double, 1>{-0.5});
    REQUIRE_FALSE(h_neg.is_identity());
    CHECK(h_neg.matrix()(0, 0) == -1.0);
}

TEST_CASE("householder_to_e1: H beta_hat = e1 to 1e-14 also when beta_hat is close to (but not within 1e-12 of) e1",
          "[rotation][near-e1]")
{
    // ||beta_hat - e1|| ~ sqrt(2) eps: computing u_0 = beta_hat_0 - 1 by subtraction loses all its
    // digits when eps is small (u_0 ~ -eps^2 / 2), which tilts v and leaves H beta_hat - e1 ~ eps.
    for (double eps : {1e-3, 1e-4, 1e-6, 1e-8, 1e-10})
    {
        CAPTURE(eps);
        const std::vector<double> beta = {1.0, eps, -eps, 0.5 * eps};
        const auto h = ap::householder_to_e1(as_tensor(beta));
        REQUIRE_FALSE(h.is_identity());
        const auto e = errors_of(h.matrix(), beta);
        CAPTURE(sci(e.maps_to_e1), sci(e.orthogonality));
        CHECK(e.orthogonality < 1e-14);
        CHECK(e.maps_to_e1 < 1e-14);
    }
}

TEST_CASE("householder: errors - empty beta, NaN/Inf, wrong column count", "[rotation]")
{
    CHECK_THROWS_AS(ap::householder_to_e1(xt::xtensor<double, 1>::from_shape({0})), std::invalid_argument);
    CHECK_THROWS_AS(ap::householder_to_e1(xt::xtensor<double, 2>{{1.0, 2.0}}), std::invalid_argument);
    for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()})
    {
        const xt::xtensor<double, 1> beta = {1.0, bad, 0.0};
        CHECK_THROWS_AS(ap::householder_to_e1(beta), std::domain_error);
    }
    const auto h = ap::householder_to_e1(xt::xtensor<double, 1>{1.0, 2.0, 3.0});
    xt::xtensor<double, 2> wrong = xt::zeros<double>({4, 2});
    CHECK_THROWS_AS(h.apply(wrong), std::invalid_argument);
    CHECK_THROWS_AS(h.apply_inplace(wrong), std::invalid_argument);
}

TEST_CASE("householder::apply: a 1-D X throws std::invalid_argument", "[rotation][apply-1d]")
{
    // apply() documents X as n x d and throws std::invalid_argument for a wrong column count; a
    // 1-D expression must be rejected the same way (not evaluated into a 2-D tensor first).
    const auto h = ap::householder_to_e1(xt::xtensor<double, 1>{1.0, 2.0, 3.0});
    const xt::xtensor<double, 1> flat = {1.0, 2.0, 3.0};
    CHECK_THROWS_AS(h.apply(flat), std::invalid_argument);
}
