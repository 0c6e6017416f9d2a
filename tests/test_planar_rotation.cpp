// Unit tests of the planar rotation model of docs/method.md §8.5 (planar_rotation.hpp).
//
// References: tests/reference/companion_reference.hpp, written by the independent NumPy
// implementation (regenerate with /usr/bin/python3 tests/reference/gen_companion_reference.py);
// agreement 1e-10 relative (unit-vector entries 1e-10 absolute), for float and double inputs
// (the inputs are float32-exact). Closed-form properties: a . b = 0, invariance of the scalars
// under an orthogonal change of basis, the sign of a fixed by Cov(x, t).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xtensor.hpp>

#include "test_util.hpp"
#include <attention_plasticity/planar_rotation.hpp>
#include <attention_plasticity/rotation.hpp>

#include "reference/companion_reference.hpp"

namespace ap = attention_plasticity;
namespace ref = companion_reference;

namespace
{
bool same(double got, double want, double rel, double abs_floor)
{
    if (std::isnan(want))
    {
        return std::isnan(got);
    }
    return ap_test::near_rel(got, want, rel, abs_floor);
}

std::vector<double> plane_scalars(const ap::planar_rotation_result& r)
{
    return {r.drift_slope_k, r.drift_slope_q, r.drift_query_mean, r.drift_key_mean,
            r.drift_r_q,     r.drift_r_k,     r.separation,       r.bias_strength};
}

const char* const scalar_names[] = {"drift_slope_k", "drift_slope_q", "drift_query_mean", "drift_key_mean",
                                    "drift_r_q",     "drift_r_k",     "separation",       "bias_strength"};
}  // namespace

TEMPLATE_TEST_CASE("planar_rotation agrees with the NumPy reference", "[planar_rotation]", float, double)
{
    double worst = 0.0;
    for (const ref::head& h : ref::heads)
    {
        INFO("head " << h.name);
        const ap_test::qk_fixture<TestType> f(h);
        const ap::planar_rotation_result r = ap::planar_rotation(f.q, f.tq, f.k, f.tk);
        const std::vector<double> got = plane_scalars(r);
        for (std::size_t i = 0; i < got.size(); ++i)
        {
            INFO(scalar_names[i] << ": " << got[i] << ", reference " << h.plane[i]);
            CHECK(same(got[i], h.plane[i], 1e-10, 1e-300));
            if (!std::isnan(h.plane[i]))
            {
                worst = std::max(worst, ap_test::rel_err(got[i], h.plane[i]));
            }
        }
        for (std::size_t j = 0; j < h.d; ++j)
        {
            INFO("component " << j);
            CHECK(same(r.drift_direction(j), h.a[j], 0.0, 1e-10));
            CHECK(same(r.separation_direction(j), h.b[j], 0.0, 1e-10));
        }
    }
    INFO("worst relative difference " << ap_test::sci(worst));
    CHECK(worst < 1e-10);
}

TEMPLATE_TEST_CASE("planar_rotation on tokens_view equals the expression form, a is orthogonal to b",
                   "[planar_rotation]", float, double)
{
    const ref::head& h = ref::heads[0];
    const ap_test::qk_fixture<TestType> f(h);
    const ap::planar_rotation_result a = ap::planar_rotation(f.query_view(), f.key_view());
    const ap::planar_rotation_result b = ap::planar_rotation(f.q, f.tq, f.k, f.tk);
    CHECK(plane_scalars(a) == plane_scalars(b));
    double dot = 0.0, na = 0.0, nb = 0.0;
    for (std::size_t j = 0; j < h.d; ++j)
    {
        dot += a.drift_direction(j) * a.separation_direction(j);
        na += a.drift_direction(j) * a.drift_direction(j);
        nb += a.separation_direction(j) * a.separation_direction(j);
    }
    CHECK(std::abs(dot) < 1e-14);
    CHECK(std::abs(na - 1.0) < 1e-14);
    CHECK(std::abs(nb - 1.0) < 1e-14);
}

TEST_CASE("planar_rotation's scalars are invariant under a reflection of the space", "[planar_rotation]")
{
    // q.k is preserved by any orthogonal H, so is every scalar of the model (docs/method.md §8.5).
    const ref::head& h = ref::heads[3];
    const ap_test::qk_fixture<double> f(h);
    xt::xtensor<double, 1> beta = xt::xtensor<double, 1>::from_shape({h.d});
    for (std::size_t j = 0; j < h.d; ++j)
    {
        beta(j) = 0.3 + static_cast<double>(j);
    }
    const xt::xtensor<double, 2> hm = ap::householder_to_e1(beta).matrix();
    const xt::xtensor<double, 2> qh = xt::linalg::dot(f.q, hm);
    const xt::xtensor<double, 2> kh = xt::linalg::dot(f.k, hm);
    const std::vector<double> a = plane_scalars(ap::planar_rotation(f.q, f.tq, f.k, f.tk));
    const std::vector<double> b = plane_scalars(ap::planar_rotation(qh, f.tq, kh, f.tk));
    for (std::size_t i = 0; i < a.size(); ++i)
    {
        INFO(scalar_names[i]);
        CHECK(ap_test::near_rel(b[i], a[i], 1e-12, 1e-15));
    }
}

TEST_CASE("planar_rotation without position covariance is NaN, bad input names the argument", "[planar_rotation]")
{
    const xt::xtensor<double, 2> q = {{1.0, 2.0}, {3.0, 1.0}};
    const xt::xtensor<double, 2> k = {{0.5, 0.0}};
    const xt::xtensor<double, 1> same_position = {4.0, 4.0};
    const xt::xtensor<double, 1> tk = {4.0};
    const ap::planar_rotation_result r = ap::planar_rotation(q, same_position, k, tk);
    CHECK(std::isnan(r.bias_strength));
    CHECK(std::isnan(r.drift_direction(0)));
    const xt::xtensor<double, 1> short_t = {1.0};
    AP_CHECK_THROWS_EXACT(ap::planar_rotation(q, short_t, k, tk), std::invalid_argument,
                          "planar_rotation: queries has 2 rows but query_positions has 1 entries");
    xt::xtensor<double, 2> bad = q;
    bad(1, 0) = std::numeric_limits<double>::infinity();
    CHECK_THROWS_AS(ap::planar_rotation(bad, same_position, k, tk), std::domain_error);
    const xt::xtensor<double, 2> wide = {{1.0, 2.0, 3.0}};
    AP_CHECK_THROWS_EXACT(ap::planar_rotation(q, same_position, wide, tk), std::invalid_argument,
                          "planar_rotation: queries has d = 2 columns and keys has d = 3 (they must be equal and >= 1)");
}

TEMPLATE_TEST_CASE("planar_rotation of constant vectors: no drift (NaN), two constants: a along their difference",
                   "[planar_rotation]", float, double)
{
    // docs/method.md §7.3, §8.5: queries and keys all 0.1 (whose mean, summed in float64, is not
    // 0.1) have no spread; the rounding noise of their mean must not give a drift direction.
    const std::size_t n = 37, d = 3;
    xt::xtensor<TestType, 2> q = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<TestType, 2> k = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<double, 1> tq = xt::xtensor<double, 1>::from_shape({n});
    xt::xtensor<double, 1> tk = xt::xtensor<double, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        tq(i) = static_cast<double>(2 * i + 5);
        tk(i) = static_cast<double>(i);
    }
    q.fill(static_cast<TestType>(0.1));
    k.fill(static_cast<TestType>(0.1));
    const ap::planar_rotation_result same = ap::planar_rotation(q, tq, k, tk);
    CHECK(std::isnan(same.drift_direction(0)));
    CHECK(std::isnan(same.drift_query_mean));
    CHECK(std::isnan(same.drift_slope_k));
    CHECK(std::isnan(same.bias_strength));
    // Queries 0.1, keys 0.2, the queries later: c = n_q n_k / N (tQ - tK)(muQ - muK) points along
    // -(1, 1, 1); a = -(1, 1, 1)/sqrt(3), mu_Q^a = -sqrt(3) 0.1, the keys' slope 0 (no spread), so
    // bias_strength 0; the Pearson r of a kind without spread is NaN.
    k.fill(static_cast<TestType>(0.2));
    const ap::planar_rotation_result two = ap::planar_rotation(q, tq, k, tk);
    const double tenth = static_cast<double>(static_cast<TestType>(0.1));
    for (std::size_t j = 0; j < d; ++j)
    {
        CHECK(two.drift_direction(j) == Approx(-1.0 / std::sqrt(3.0)).epsilon(1e-15));
    }
    CHECK(two.drift_query_mean == Approx(-std::sqrt(3.0) * tenth).epsilon(1e-14));
    CHECK(two.drift_slope_k == 0.0);
    CHECK(two.drift_slope_q == 0.0);
    CHECK(two.bias_strength == 0.0);
    CHECK(std::isnan(two.drift_r_q));
    CHECK(std::isnan(two.drift_r_k));
}

TEMPLATE_TEST_CASE("planar_rotation: positions offset by 2^52 give the same model", "[planar_rotation]", float, double)
{
    // The moments are taken about each kind's first row (docs/method.md §8.5), so t - t_0 is exact.
    const std::size_t n = 29, d = 4;
    xt::xtensor<TestType, 2> q = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<TestType, 2> k = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<double, 1> tq = xt::xtensor<double, 1>::from_shape({n});
    xt::xtensor<double, 1> tk = xt::xtensor<double, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        tq(i) = static_cast<double>((5 * i) % n + 3);
        tk(i) = static_cast<double>((3 * i) % n);
        for (std::size_t j = 0; j < d; ++j)
        {
            q(i, j) = static_cast<TestType>(0.25 * static_cast<double>((i * (j + 2)) % 7) + 0.01 * tq(i));
            k(i, j) = static_cast<TestType>(0.5 * static_cast<double>((i * (j + 3)) % 5) - 0.02 * tk(i));
        }
    }
    const ap::planar_rotation_result base = ap::planar_rotation(q, tq, k, tk);
    REQUIRE(std::isfinite(base.bias_strength));
    const double offset = std::ldexp(1.0, 52);
    const xt::xtensor<double, 1> tq_far = tq + offset, tk_far = tk + offset;
    const ap::planar_rotation_result far = ap::planar_rotation(q, tq_far, k, tk_far);
    CHECK(far.bias_strength == Approx(base.bias_strength).epsilon(1e-14));
    CHECK(far.drift_slope_k == Approx(base.drift_slope_k).epsilon(1e-14));
    CHECK(far.drift_query_mean == Approx(base.drift_query_mean).epsilon(1e-14));
    CHECK(far.drift_r_q == Approx(base.drift_r_q).epsilon(1e-14));
}
