// Unit tests of the PCA roles of docs/method.md §8.5 (pca_roles.hpp).
//
// References: tests/reference/companion_reference.hpp, written by the independent NumPy
// implementation (np.cov, np.linalg.eigh, np.corrcoef; regenerate with
// /usr/bin/python3 tests/reference/gen_companion_reference.py); agreement 1e-10 relative (PC0's
// entries 1e-10 absolute), for float and double inputs (float32-exact). The taxonomy's
// thresholds by hand; the sign convention (the larger |r| positive).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <xtensor/xtensor.hpp>

#include "test_util.hpp"
#include <attention_plasticity/pca_roles.hpp>

#include "reference/companion_reference.hpp"

namespace ap = attention_plasticity;
namespace ref = companion_reference;

TEMPLATE_TEST_CASE("pca_roles agrees with the NumPy reference", "[pca_roles]", float, double)
{
    double worst = 0.0;
    for (const ref::head& h : ref::heads)
    {
        INFO("head " << h.name);
        const ap_test::qk_fixture<TestType> f(h);
        const ap::pca_roles_result r = ap::pca_roles(f.q, f.tq, f.k, f.tk);
        const double got[] = {r.explained_variance_ratio, r.r_q, r.r_k};
        for (std::size_t i = 0; i < 3; ++i)
        {
            INFO("value " << i << ": " << got[i] << ", reference " << h.pca[i]);
            if (std::isnan(h.pca[i]))
            {
                CHECK(std::isnan(got[i]));
                continue;
            }
            CHECK(ap_test::near_rel(got[i], h.pca[i], 1e-10));
            worst = std::max(worst, ap_test::rel_err(got[i], h.pca[i]));
        }
        for (std::size_t j = 0; j < h.d; ++j)
        {
            CHECK(std::abs(r.component(j) - h.pc0[j]) <= 1e-10);
        }
        CHECK(std::string(ap::pca_class_name(r.role)) == h.pca_class);
    }
    INFO("worst relative difference " << ap_test::sci(worst));
    CHECK(worst < 1e-10);
}

TEST_CASE("pca_roles on tokens_view equals the expression form", "[pca_roles]")
{
    const ref::head& h = ref::heads[4];
    const ap_test::qk_fixture<float, double> f(h);
    const ap::pca_roles_result a = ap::pca_roles(f.query_view(), f.key_view());
    const ap::pca_roles_result b = ap::pca_roles(f.q, f.tq, f.k, f.tk);
    CHECK(a.r_q == b.r_q);
    CHECK(a.r_k == b.r_k);
    CHECK(a.role == b.role);
}

TEST_CASE("classify_pca_roles: thresholds 0.7 and 0.3 on |r|, NaN undefined", "[pca_roles]")
{
    CHECK(ap::classify_pca_roles(0.71, -0.8) == ap::pca_class::position_dominated);
    CHECK(ap::classify_pca_roles(0.71, 0.7) == ap::pca_class::q_positional);
    CHECK(ap::classify_pca_roles(0.7, 0.9) == ap::pca_class::mixed);
    CHECK(ap::classify_pca_roles(-0.29, 0.29) == ap::pca_class::content_focused);
    CHECK(ap::classify_pca_roles(0.3, 0.0) == ap::pca_class::mixed);
    CHECK(ap::classify_pca_roles(std::nan(""), 0.0) == ap::pca_class::undefined);
    CHECK(std::string(ap::pca_class_name(ap::pca_class::undefined)) == "nan");
    CHECK(std::string(ap::pca_class_name(ap::pca_class::q_positional)) == "q_positional");
}

TEST_CASE("pca_roles names its arguments", "[pca_roles]")
{
    const xt::xtensor<double, 2> q = {{1.0, 2.0}, {3.0, 1.0}};
    const xt::xtensor<double, 2> k = xt::xtensor<double, 2>::from_shape({0, 2});
    const xt::xtensor<double, 1> tq = {1.0, 2.0};
    const xt::xtensor<double, 1> tk = xt::xtensor<double, 1>::from_shape({0});
    AP_CHECK_THROWS_EXACT(ap::pca_roles(q, tq, k, tk), std::invalid_argument,
                          "pca_roles: needs at least 1 query and 1 key, got 2 queries and 0 keys");
}

TEMPLATE_TEST_CASE("pca_roles of constant vectors: r_q, r_k NaN and pca_class nan", "[pca_roles]", float, double)
{
    // docs/method.md §7.3, §8.5: a kind whose vectors are one constant (0.1: its float64 mean is
    // not 0.1) has no spread along PC0, so its correlation with position is NaN, not the ~1e-15
    // of rounding noise; the class is then nan. Queries 0.1 and keys 0.2: PC0 is the direction
    // of their difference, (1, 1, 1)/sqrt(3) up to sign, and both r are NaN.
    const std::size_t n = 41, d = 3;
    xt::xtensor<TestType, 2> q = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<TestType, 2> k = xt::xtensor<TestType, 2>::from_shape({n, d});
    xt::xtensor<double, 1> tq = xt::xtensor<double, 1>::from_shape({n});
    xt::xtensor<double, 1> tk = xt::xtensor<double, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        tq(i) = static_cast<double>(3 * i + 1);
        tk(i) = static_cast<double>(i);
    }
    q.fill(static_cast<TestType>(0.1));
    k.fill(static_cast<TestType>(0.1));
    const ap::pca_roles_result same = ap::pca_roles(q, tq, k, tk);
    CHECK(std::isnan(same.r_q));
    CHECK(std::isnan(same.r_k));
    CHECK(same.role == ap::pca_class::undefined);
    k.fill(static_cast<TestType>(0.2));
    const ap::pca_roles_result two = ap::pca_roles(q, tq, k, tk);
    CHECK(std::isnan(two.r_q));
    CHECK(std::isnan(two.r_k));
    CHECK(two.role == ap::pca_class::undefined);
    CHECK(two.explained_variance_ratio == Approx(1.0).epsilon(1e-12));
    for (std::size_t j = 0; j < d; ++j)
    {
        CHECK(std::fabs(two.component(j)) == Approx(1.0 / std::sqrt(3.0)).epsilon(1e-12));
    }
}
