// Unit tests of the per-bucket pieces of the intervals (docs/method.md §8.3): the sensitivity of
// a bucket's AP_j to its query model (against finite differences of the kernel), its
// second-order bias (Monte Carlo, bounds stated at each), and the pair-sampling variance
// (closed form and Monte Carlo). Their agreement with an independent NumPy implementation is in
// tests/test_intervals.cpp.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/sensitivity.hpp>

#include "test_util.hpp"

namespace ap = attention_plasticity;
using ap_test::cell_of;

namespace
{
// The full d-dimensional Gaussian of a model and the mean PP of the rows of w under it,
// through the kernel's full-covariance path (tested against SciPy in test_plasticity.cpp).
double mean_pp(const xt::xtensor<double, 2>& w, const ap::bucket_query_model& model)
{
    const ap::gaussian g = ap::full_gaussian(model);
    return ap::head_plasticity(w, g.mean, g.covariance);
}
}  // namespace

TEST_CASE("bucket_plasticity_sensitivity: first derivatives of AP_j equal finite differences of the kernel, "
          "float and double differences",
          "[sensitivity]")
{
    // d = 4, 200 pairs with z spread over [-3, 3]; AP_j(model) through head_plasticity.
    const std::size_t d = 4, pairs = 200;
    ap_test::box_muller normal(404);
    xt::xtensor<double, 2> w = xt::xtensor<double, 2>::from_shape({pairs, d});
    for (auto& x : w)
    {
        x = normal();
    }
    ap::bucket_query_model model;
    model.n_queries = 500;
    model.position_mean = 0.4;
    model.position_variance = 0.8;
    model.semantic.mean = {0.3, -0.5, 0.2};
    model.semantic.covariance = {{1.0, 0.3, -0.1}, {0.3, 0.7, 0.2}, {-0.1, 0.2, 1.3}};
    const ap::gaussian full = ap::full_gaussian(model);
    const ap::pair_moments moments = ap::pair_moments_full(w, full.mean, full.covariance);
    const ap::bucket_sensitivity s = ap::bucket_plasticity_sensitivity(w, moments, model);
    const double h = 1e-5;
    auto derivative = [&](auto&& perturb) {
        ap::bucket_query_model up = model, down = model;
        perturb(up, h);
        perturb(down, -h);
        return (mean_pp(w, up) - mean_pp(w, down)) / (2.0 * h);
    };
    // Central differences: error ~ h^2 |f'''| ~ 1e-10; tolerance 1e-7 absolute.
    CHECK(std::fabs(derivative([](ap::bucket_query_model& m, double e) { m.position_mean += e; }) - s.position_mean)
          < 1e-7);
    CHECK(std::fabs(derivative([](ap::bucket_query_model& m, double e) { m.position_variance += e; })
                    - s.position_variance)
          < 1e-7);
    for (std::size_t k = 0; k < d - 1; ++k)
    {
        CAPTURE(k);
        CHECK(std::fabs(derivative([k](ap::bucket_query_model& m, double e) { m.semantic.mean(k) += e; })
                        - s.semantic_mean(k))
              < 1e-7);
        for (std::size_t l = k; l < d - 1; ++l)
        {
            CAPTURE(l);
            // A symmetric perturbation of Sigma_kl and Sigma_lk: d AP = 2 M_kl e (k != l), M_kk e.
            const double fd = derivative([k, l](ap::bucket_query_model& m, double e) {
                m.semantic.covariance(k, l) += e;
                if (k != l)
                {
                    m.semantic.covariance(l, k) += e;
                }
            });
            CHECK(std::fabs(fd - (k == l ? 1.0 : 2.0) * s.semantic_covariance(k, l)) < 1e-7);
        }
    }
    // The mixed vector b = sum_p B_p w0 w_sem: the derivative of K-like terms, written out.
    double b0 = 0.0;
    for (std::size_t p = 0; p < pairs; ++p)
    {
        const double z = moments.mean(p) / std::sqrt(moments.variance(p));
        const double density = std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846);
        const double g1 = 4.0 * density * (1.0 - std::erfc(-z / std::sqrt(2.0)));  // 4 phi (1 - 2 Phi)
        b0 += -g1 * z / (2.0 * static_cast<double>(pairs) * moments.variance(p)) * w(p, 0) * w(p, 1);
    }
    CHECK(ap_test::near_rel(s.mixed(0), b0, 1e-10));
    // Float differences: read in their type, the same numbers as the double ones of equal value.
    const xt::xtensor<float, 2> w32 = xt::cast<float>(w);
    const xt::xtensor<double, 2> w64 = xt::cast<double>(w32);
    const ap::pair_moments moments32 = ap::pair_moments_full(w64, full.mean, full.covariance);
    const ap::bucket_sensitivity s32 = ap::bucket_plasticity_sensitivity(w32, moments32, model);
    const ap::bucket_sensitivity s64 = ap::bucket_plasticity_sensitivity(w64, moments32, model);
    CHECK(s32.position_mean == s64.position_mean);
    CHECK(s32.bias_semantic == s64.bias_semantic);
    CHECK((s32.semantic_covariance == s64.semantic_covariance));
    // Rescaled moments (§4.6: magnitudes beyond 2^250) give NaN, never wrong numbers.
    xt::xtensor<double, 2> huge = w * std::ldexp(1.0, 300);
    const ap::pair_moments scaled = ap::pair_moments_full(huge, full.mean, full.covariance);
    CHECK(std::isnan(ap::bucket_plasticity_sensitivity(huge, scaled, model).position_mean));
}

TEST_CASE("bucket_plasticity_sensitivity: the second-order bias of the plug-in AP_j (Monte Carlo)", "[sensitivity]")
{
    // A bucket whose semantic model is estimated from n = 60 queries of N(mu, Sigma) (fit_gaussian,
    // as §2.10), the positional part known. The mean over R = 4000 replicates of AP_j(estimated) -
    // AP_j(true) estimates the bias; the prediction is bias_semantic at the true model. Bound:
    // 4 Monte Carlo standard errors plus 3 / n^2 for the neglected third-order terms.
    const std::size_t d = 4, pairs = 150, n = 60, replicates = 4000;
    ap_test::box_muller normal(99);
    xt::xtensor<double, 2> w = xt::xtensor<double, 2>::from_shape({pairs, d});
    for (auto& x : w)
    {
        x = 0.5 * normal();
    }
    ap::bucket_query_model model;
    model.n_queries = n;
    model.position_mean = 0.2;
    model.position_variance = 0.5;
    model.semantic.mean = {0.1, -0.1, 0.05};
    model.semantic.covariance = {{1.0, 0.0, 0.0}, {0.0, 0.5, 0.0}, {0.0, 0.0, 2.0}};
    const ap::gaussian full = ap::full_gaussian(model);
    const ap::bucket_sensitivity s =
        ap::bucket_plasticity_sensitivity(w, ap::pair_moments_full(w, full.mean, full.covariance), model);
    const double truth = mean_pp(w, model);
    const double roots[3] = {1.0, std::sqrt(0.5), std::sqrt(2.0)};
    double sum = 0.0, squares = 0.0;
    for (std::size_t r = 0; r < replicates; ++r)
    {
        xt::xtensor<double, 2> q = xt::xtensor<double, 2>::from_shape({n, d - 1});
        for (std::size_t i = 0; i < n; ++i)
        {
            for (std::size_t k = 0; k < d - 1; ++k)
            {
                q(i, k) = model.semantic.mean(k) + roots[k] * normal();
            }
        }
        ap::bucket_query_model estimated = model;
        estimated.semantic = ap::fit_gaussian(q);
        const double e = mean_pp(w, estimated) - truth;
        sum += e;
        squares += e * e;
    }
    const double bias = sum / replicates;
    const double se = std::sqrt((squares / replicates - bias * bias) / replicates);
    INFO("Monte Carlo bias " << bias << " +- " << se << ", predicted " << s.bias_semantic);
    CHECK(std::fabs(bias - s.bias_semantic) <= 4.0 * se + 3.0 / (n * n));
    CHECK(s.bias_semantic < 0.0);
    CHECK(s.bias_semantic >= -(2.0 / 3.14159265358979323846) / n * 1.01);  // at most the z = 0 value

    // The positional part: mu0_hat ~ N(mu0, V), sigma2_hat = sigma2 chi2_nu / nu, whose bias is
    // c_pm V + c_pv 2 sigma^4 / nu (E sigma2_hat = sigma2).
    const double v_mu0 = 0.02, nu = 40.0;
    double psum = 0.0, psquares = 0.0;
    for (std::size_t r = 0; r < replicates; ++r)
    {
        ap::bucket_query_model estimated = model;
        estimated.position_mean += std::sqrt(v_mu0) * normal();
        double chi2 = 0.0;
        for (int k = 0; k < static_cast<int>(nu); ++k)
        {
            const double e = normal();
            chi2 += e * e;
        }
        estimated.position_variance = model.position_variance * chi2 / nu;
        const double e = mean_pp(w, estimated) - truth;
        psum += e;
        psquares += e * e;
    }
    const double pbias = psum / replicates;
    const double pse = std::sqrt((psquares / replicates - pbias * pbias) / replicates);
    const double predicted = s.bias_per_position_mean_variance * v_mu0
                             + s.bias_per_position_variance_variance * 2.0 * 0.25 / nu;
    INFO("Monte Carlo positional bias " << pbias << " +- " << pse << ", predicted " << predicted);
    CHECK(std::fabs(pbias - predicted) <= 4.0 * pse + 3.0 * (v_mu0 * v_mu0 + 1.0 / (nu * nu)));
}

TEST_CASE("pair_sampling_variance: sum_c N_c s_c^2 / (sum N_c)^2", "[sensitivity]")
{
    const std::size_t first[5] = {0, 1, 2, 3, 4};
    const std::vector<ap::cell_pairs> cells = {cell_of(3, 0, first, first, 2), cell_of(3, 1, first, first, 0),
                                               cell_of(3, 2, first, first, 3)};
    const xt::xtensor<double, 1> pp = {0.2, 0.4, 0.1, 0.3, 0.5};
    // s^2 = 0.02 and 0.04: (2 * 0.02 + 3 * 0.04) / 25.
    CHECK(ap::pair_sampling_variance(pp, cells) == Approx(0.16 / 25.0).epsilon(1e-14));
    const xt::xtensor<float, 1> ppf = {0.25f, 0.75f, 0.5f, 0.5f, 0.5f};
    CHECK(ap::pair_sampling_variance(ppf, cells) == Approx(2.0 * 0.125 / 25.0).epsilon(1e-14));
    CHECK(std::isnan(ap::pair_sampling_variance(xt::xtensor<double, 1>{0.5}, {cell_of(1, 0, first, first, 1)})));
    CHECK(std::isnan(ap::pair_sampling_variance(xt::xtensor<double, 1>::from_shape({0}), {})));
    AP_CHECK_THROWS_EXACT(ap::pair_sampling_variance(xt::xtensor<double, 1>{0.5, 0.5}, cells), std::invalid_argument,
                          "pair_sampling_variance: pair_plasticity has 2 entries but the cells hold 5 pairs");
    // Monte Carlo: cells drawing N = 8 values with replacement from fixed populations; the variance
    // of the pooled mean over 20000 draws agrees with the mean estimate within 5% (the relative SE
    // of a variance from 20000 draws is about 1%).
    const std::vector<std::vector<double>> population = {{0.1, 0.9, 0.5, 0.3}, {1.0, 0.0}, {0.6, 0.65, 0.7}};
    const std::size_t key_rows[8] = {};  // only the cells' sizes matter here
    std::vector<ap::cell_pairs> mc_cells;
    for (std::size_t c = 0; c < 3; ++c)
    {
        mc_cells.push_back(cell_of(5, static_cast<std::int64_t>(c), key_rows, key_rows, 8));
    }
    ap::rng generator(5);
    double sum = 0.0, squares = 0.0, estimate = 0.0;
    const std::size_t draws = 20000;
    for (std::size_t r = 0; r < draws; ++r)
    {
        xt::xtensor<double, 1> values = xt::xtensor<double, 1>::from_shape({24});
        for (std::size_t c = 0; c < 3; ++c)
        {
            for (std::size_t p = 0; p < 8; ++p)
            {
                values(c * 8 + p) = population[c][generator.below(population[c].size())];
            }
        }
        const double mean = ap::mean_plasticity(values);
        sum += mean;
        squares += mean * mean;
        estimate += ap::pair_sampling_variance(values, mc_cells);
    }
    const double variance = (squares - sum * sum / draws) / (draws - 1);
    CHECK(std::fabs(estimate / draws / variance - 1.0) < 0.05);
}

TEST_CASE("bucket_plasticity_sensitivity: errors name the argument", "[sensitivity]")
{
    const xt::xtensor<double, 2> w = {{1.0, 0.5}, {0.2, -0.3}};
    ap::bucket_query_model model;
    model.n_queries = 10;
    model.position_variance = 1.0;
    model.semantic.mean = {0.0};
    model.semantic.covariance = {{1.0}};
    const ap::pair_moments moments{xt::xtensor<double, 1>{0.1, 0.2}, xt::xtensor<double, 1>{1.0, 1.0}};
    const ap::pair_moments short_moments{xt::xtensor<double, 1>{0.1}, xt::xtensor<double, 1>{1.0}};
    AP_CHECK_THROWS_EXACT(ap::bucket_plasticity_sensitivity(w, short_moments, model), std::invalid_argument,
                          "bucket_plasticity_sensitivity: moments have 1 means and 1 variances but differences has 2 "
                          "rows");
    const xt::xtensor<double, 2> w3 = {{1.0, 0.5, 0.0}};
    AP_CHECK_THROWS_EXACT(ap::bucket_plasticity_sensitivity(w3, short_moments, model), std::invalid_argument,
                          "bucket_plasticity_sensitivity: differences has d = 3 columns but the model's semantic mean "
                          "has 1 entries (d - 1 expected)");
    ap::bucket_query_model one = model;
    one.n_queries = 1;
    AP_CHECK_THROWS_EXACT(ap::bucket_plasticity_sensitivity(w, moments, one), std::invalid_argument,
                          "bucket_plasticity_sensitivity: model.n_queries must be >= 2, got 1");
    const ap::pair_moments nan_moments{xt::xtensor<double, 1>{0.1, std::nan("")}, xt::xtensor<double, 1>{1.0, 1.0}};
    AP_CHECK_THROWS_EXACT(ap::bucket_plasticity_sensitivity(w, nan_moments, model), std::domain_error,
                          "bucket_plasticity_sensitivity: moments.mean has a non-finite value (nan) at index 1");

}
