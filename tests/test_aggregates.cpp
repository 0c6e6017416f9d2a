// Unit tests of the head-level aggregates (docs/method.md §2.14), against closed forms.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/aggregates.hpp>

namespace ap = attention_plasticity;

namespace
{
const double not_a_number = std::numeric_limits<double>::quiet_NaN();
}

TEST_CASE("plasticity_aggregates: n_j-weighted means over all, the first and the last 20% of the context",
          "[aggregates]")
{
    // C = 100: first 20% is tau < 20, last 20% is tau >= 80.
    const xt::xtensor<double, 1> tau = {5.0, 19.5, 20.0, 50.0, 79.5, 80.0, 99.0};
    const xt::xtensor<std::size_t, 1> n = {10, 30, 5, 100, 7, 20, 60};
    const xt::xtensor<double, 1> ap_j = {0.2, 0.6, 0.9, 0.5, not_a_number, 0.1, 0.4};
    const auto r = ap::plasticity_aggregates(tau, n, ap_j, 100.0);
    const double overall =
        (10 * 0.2 + 30 * 0.6 + 5 * 0.9 + 100 * 0.5 + 20 * 0.1 + 60 * 0.4) / (10 + 30 + 5 + 100 + 20 + 60);
    const double first = (10 * 0.2 + 30 * 0.6) / 40.0;
    const double last = (20 * 0.1 + 60 * 0.4) / 80.0;
    CHECK(r.ap_overall == Approx(overall).epsilon(1e-15));
    CHECK(r.ap_first20 == Approx(first).epsilon(1e-15));
    CHECK(r.ap_last20 == Approx(last).epsilon(1e-15));
    CHECK(r.ap_drop == Approx(first - last).epsilon(1e-14));
}

TEST_CASE("plasticity_aggregates: NaN where no bucket qualifies or none has a defined AP_j", "[aggregates]")
{
    const xt::xtensor<double, 1> tau = {30.0, 50.0};
    const xt::xtensor<double, 1> n = {4.0, 6.0};
    const xt::xtensor<double, 1> ap_j = {0.5, 0.25};
    const auto r = ap::plasticity_aggregates(tau, n, ap_j, 100.0);
    CHECK(r.ap_overall == Approx(0.35).epsilon(1e-15));
    CHECK(std::isnan(r.ap_first20));
    CHECK(std::isnan(r.ap_last20));
    CHECK(std::isnan(r.ap_drop));
    const xt::xtensor<double, 1> undefined = {not_a_number, not_a_number};
    CHECK(std::isnan(ap::plasticity_aggregates(tau, n, undefined, 100.0).ap_overall));
    const xt::xtensor<double, 1> none = xt::xtensor<double, 1>::from_shape({0});
    const auto e = ap::plasticity_aggregates(none, none, none, 1.0);
    CHECK(std::isnan(e.ap_overall));
    // Buckets with n_j = 0 carry no weight.
    const xt::xtensor<double, 1> zero = {0.0, 6.0};
    CHECK(ap::plasticity_aggregates(tau, zero, ap_j, 100.0).ap_overall == 0.25);
}

TEST_CASE("plasticity_aggregates: errors name the argument", "[aggregates]")
{
    const xt::xtensor<double, 1> tau = {30.0, 50.0};
    const xt::xtensor<double, 1> n = {4.0, 6.0};
    const xt::xtensor<double, 1> ap_j = {0.5, 0.25};
    const xt::xtensor<double, 1> short_n = {4.0};
    CHECK_THROWS_AS(ap::plasticity_aggregates(tau, short_n, ap_j, 100.0), std::invalid_argument);
    CHECK_THROWS_WITH(ap::plasticity_aggregates(tau, short_n, ap_j, 100.0),
                      Catch::StartsWith("plasticity_aggregates:") && Catch::Contains("n_queries"));
    const xt::xtensor<double, 1> bad_n = {4.0, -1.0};
    CHECK_THROWS_WITH(ap::plasticity_aggregates(tau, bad_n, ap_j, 100.0), Catch::Contains("n_queries[1] = -1"));
    const xt::xtensor<double, 1> bad_tau = {not_a_number, 1.0};
    CHECK_THROWS_AS(ap::plasticity_aggregates(bad_tau, n, ap_j, 100.0), std::domain_error);
    const xt::xtensor<double, 1> inf_ap = {0.5, std::numeric_limits<double>::infinity()};
    CHECK_THROWS_WITH(ap::plasticity_aggregates(tau, n, inf_ap, 100.0), Catch::Contains("plasticity[1]"));
    CHECK_THROWS_AS(ap::plasticity_aggregates(tau, n, ap_j, not_a_number), std::domain_error);
}
