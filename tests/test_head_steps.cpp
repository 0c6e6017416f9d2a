// Unit tests of the joints between the steps of docs/method.md §2 (head_steps.hpp) and of the
// steps' threads argument. References: closed forms written out by hand, or the rows and
// values of the inputs themselves; tests/test_pipeline.cpp composes the whole head with them.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <attention_plasticity/head_steps.hpp>
#include <attention_plasticity/random.hpp>
#include <attention_plasticity/rotation.hpp>

namespace ap = attention_plasticity;

namespace
{
const double not_a_number = std::numeric_limits<double>::quiet_NaN();

// n tokens of dimension d with a positional drift in every third column, 100 positions per
// example, buckets of 10 positions.
template <class T>
ap::head_tokens<T> drifting_tokens(std::size_t n, std::size_t d, std::uint64_t seed)
{
    ap::rng gen(seed);
    ap::head_tokens<T> t;
    t.vectors = xt::xtensor<T, 2>::from_shape({n, d});
    t.position = t.bucket = t.example_id = xt::xtensor<std::int64_t, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        t.position(i) = static_cast<std::int64_t>(i % 100);
        t.bucket(i) = t.position(i) / 10;
        t.example_id(i) = static_cast<std::int64_t>(i / 100);
        for (std::size_t j = 0; j < d; ++j)
        {
            const double drift = j % 3 == 0 ? 0.02 * static_cast<double>(t.position(i)) : -0.5;
            t.vectors(i, j) = static_cast<T>(gen.uniform() - 0.5 + drift);
        }
    }
    return t;
}

bool same_bits(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}
}  // namespace

TEMPLATE_TEST_CASE("prepare_tokens: the kept rows of subsample_rows, times the signs, with their columns",
                   "[head_steps]", float, double)
{
    const auto tokens = drifting_tokens<TestType>(300, 5, 7);
    const xt::xtensor<double, 1> signs = {1.0, -1.0, 1.0, -1.0, -1.0};
    const ap::prepared_tokens p = ap::prepare_tokens(tokens, signs, 120, 99);
    const auto rows = ap::subsample_rows(300, 120, 99);
    REQUIRE(p.rows == rows);
    REQUIRE(p.vectors.shape()[0] == 120);
    for (std::size_t r = 0; r < 120; ++r)
    {
        const std::size_t i = rows(r);
        for (std::size_t j = 0; j < 5; ++j)
        {
            CHECK(p.vectors(r, j) == signs(j) * static_cast<double>(tokens.vectors(i, j)));
        }
        CHECK(p.position(r) == tokens.position(i));
        CHECK(p.t(r) == static_cast<double>(tokens.position(i)));
        CHECK(p.bucket(r) == tokens.bucket(i));
        CHECK(p.example_id(r) == tokens.example_id(i));
    }
    // Every row kept when there are no more than max_rows; no example ids given, none kept.
    auto queries = tokens;
    queries.example_id = xt::xtensor<std::int64_t, 1>::from_shape({0});
    const ap::prepared_tokens all = ap::prepare_tokens(queries, signs, 300, 99);
    CHECK(all.rows.size() == 300);
    CHECK(all.rows(299) == 299);
    CHECK(all.example_id.size() == 0);
    // Errors name the function and what disagrees.
    const xt::xtensor<double, 1> short_signs = {1.0, 1.0};
    CHECK_THROWS_WITH(ap::prepare_tokens(tokens, short_signs, 10, 1),
                      "prepare_tokens: signs has 2 entries but the vectors have d = 5");
    queries.bucket = xt::xtensor<std::int64_t, 1>::from_shape({3});
    CHECK_THROWS_AS(ap::prepare_tokens(queries, signs, 10, 1), std::invalid_argument);
}

TEST_CASE("plasticity_aggregates of profile rows: n_j-weighted means, small buckets and NaN left out",
          "[head_steps]")
{
    std::vector<ap::bucket_profile> profile(5);
    const double tau[] = {5.0, 15.0, 50.0, 85.0, 95.0};
    const std::size_t n[] = {10, 30, 100, 20, 4};
    const double value[] = {0.2, 0.6, 0.5, not_a_number, 0.9};
    for (std::size_t j = 0; j < 5; ++j)
    {
        profile[j].tau = tau[j];
        profile[j].n_queries = n[j];
        profile[j].plasticity = value[j];
        profile[j].plasticity_empirical = 1.0 - 0.1 * static_cast<double>(j);
    }
    profile[4].small_bucket = true;  // not in D (§2.14): its 0.9 must not count
    // C = 100: first 20% is tau < 20 (rows 0, 1), last 20% tau >= 80 (row 3 NaN, row 4 small).
    const auto r = ap::plasticity_aggregates(profile, 100.0);
    CHECK(r.ap_overall == Approx((10 * 0.2 + 30 * 0.6 + 100 * 0.5) / 140.0).epsilon(1e-15));
    CHECK(r.ap_first20 == Approx((10 * 0.2 + 30 * 0.6) / 40.0).epsilon(1e-15));
    CHECK(std::isnan(r.ap_last20));
    CHECK(std::isnan(r.ap_drop));
    // Another column of the rows: the empirical AP_j (§8.2), all defined; row 4 still out.
    const auto e = ap::plasticity_aggregates(profile, 100.0, &ap::bucket_profile::plasticity_empirical);
    CHECK(e.ap_overall == Approx((10 * 1.0 + 30 * 0.9 + 100 * 0.8 + 20 * 0.7) / 160.0).epsilon(1e-15));
    CHECK(e.ap_last20 == Approx(0.7).epsilon(1e-15));
    CHECK(e.ap_drop == Approx((10 * 1.0 + 30 * 0.9) / 40.0 - 0.7).epsilon(1e-15));
    CHECK(std::isnan(ap::plasticity_aggregates(std::vector<ap::bucket_profile>{}, 1.0).ap_overall));
}

TEST_CASE("profile_row and make_head_metrics: each value in its column", "[head_steps]")
{
    ap::bucket_query_model model;
    model.bucket = 4;
    model.tau = 44.5;
    model.n_queries = 15;
    ap::bucket_plasticity_result bucket;
    bucket.plasticity = 0.375;
    bucket.n_pairs = 77;
    const ap::bucket_profile row = ap::profile_row(model, bucket, 16);
    CHECK(row.q_bucket == 4);
    CHECK(row.tau == 44.5);
    CHECK(row.n_queries == 15);
    CHECK(row.plasticity == 0.375);
    CHECK(row.n_pairs == 77);
    CHECK(row.small_bucket);  // 15 < 16
    CHECK(!ap::profile_row(model, bucket, 15).small_bucket);

    ap::linear_fit fit;
    fit.beta = {1.0, 2.0, 3.0};
    fit.r2_mean = 0.25;
    fit.beta_norm = 3.5;
    const ap::scalar_predictability scalar{0.1, 0.2, 0.3, 0.4};
    ap::residual_normality_result first{};
    first.skewness = 1.1;
    first.excess_kurtosis = 1.2;
    first.ks_p_value = 1.3;
    ap::noise_normality_result noise{};
    noise.median_abs_skewness = 2.1;
    noise.median_abs_kurtosis = 2.2;
    noise.median_ks_p_value = 2.3;
    noise.fraction_ks_p_below_alpha = 2.4;
    const ap::plasticity_aggregates_result aggregates{3.1, 3.2, 3.3, 3.4};
    const ap::head_metrics m = ap::make_head_metrics({11, 12}, fit, scalar, first, noise, aggregates);
    CHECK(m.n_q_tokens == 11);
    CHECK(m.n_k_tokens == 12);
    CHECK(m.d_model == 3);
    const double got[] = {m.q_R2_pos, m.q_beta_norm, m.q_R2_scalar, m.q_mae_baseline, m.q_mae_proj,
                          m.q_mae_ratio, m.q_resid0_skew, m.q_resid0_kurt, m.q_resid0_ks_p,
                          m.q_noise_med_abs_skew, m.q_noise_med_abs_kurt, m.q_noise_med_ks_p,
                          m.q_noise_frac_ks_p_lt_alpha, m.ap_overall, m.ap_first20, m.ap_last20, m.ap_drop};
    const double expected[] = {0.25, 3.5, scalar.r2, scalar.mae_baseline, scalar.mae_projection, scalar.mae_ratio,
                               1.1, 1.2, 1.3, 2.1, 2.2, 2.3, 2.4, 3.1, 3.2, 3.3, 3.4};
    for (std::size_t i = 0; i < sizeof got / sizeof got[0]; ++i)
    {
        CAPTURE(i);
        CHECK(got[i] == expected[i]);
    }
    CHECK(std::isnan(m.ap_overall_se));  // the columns of §8 are left to their steps
    CHECK(std::isnan(m.bias_strength));
}

TEMPLATE_TEST_CASE("the steps' threads argument: any number gives the same bits", "[head_steps][threads]", float,
                   double)
{
    // Enough rows and columns that every step splits its work: 9,000 rows (row tasks of
    // 4,096), 24 columns (column ranges of 8), 9 query buckets with a model.
    const auto tokens = drifting_tokens<TestType>(9000, 24, 3);
    const xt::xtensor<double, 1> signs = ap::orientation_signs(tokens.vectors, tokens.bucket);
    const ap::prepared_tokens p = ap::prepare_tokens(tokens, signs, 9000, 0);
    const ap::linear_fit fit = ap::fit_linear(p.t, p.vectors);
    const ap::scalar_predictability scalar = ap::scalar_position_predictability(p.t, p.vectors, fit.beta);
    const xt::xtensor<double, 2> x_rot = ap::householder_to_e1(fit.beta).apply(p.vectors);
    const ap::position_component_fit component0 = ap::fit_position_component(p.t, x_rot);
    const auto noise_columns = xt::view(x_rot, xt::all(), xt::range(1, 24));
    const ap::noise_normality_result noise = ap::noise_normality(noise_columns, 10, 0.01, 5);
    const auto models = ap::bucket_query_models(p.t, p.bucket, x_rot, component0);
    for (std::size_t threads : {0, 2, 3})
    {
        CAPTURE(threads);
        CHECK((ap::orientation_signs(tokens.vectors, tokens.bucket, threads) == signs));
        const ap::linear_fit f = ap::fit_linear(p.t, p.vectors, threads);
        CHECK((f.beta == fit.beta));
        CHECK((f.alpha == fit.alpha));
        CHECK((f.r2 == fit.r2));
        const ap::scalar_predictability s = ap::scalar_position_predictability(p.t, p.vectors, fit.beta, threads);
        CHECK(s.r2 == scalar.r2);
        CHECK(s.mae_projection == scalar.mae_projection);
        const ap::noise_normality_result nn = ap::noise_normality(noise_columns, 10, 0.01, 5, threads);
        CHECK(same_bits(nn.median_abs_skewness, noise.median_abs_skewness));
        CHECK(same_bits(nn.median_abs_kurtosis, noise.median_abs_kurtosis));
        CHECK(same_bits(nn.median_ks_p_value, noise.median_ks_p_value));
        const auto m = ap::bucket_query_models(p.t, p.bucket, x_rot, component0, ap::default_covariance_epsilon,
                                               threads);
        REQUIRE(m.size() == models.size());
        for (std::size_t j = 0; j < m.size(); ++j)
        {
            CHECK((m[j].semantic.mean == models[j].semantic.mean));
            CHECK((m[j].semantic.covariance == models[j].semantic.covariance));
        }
    }
}
