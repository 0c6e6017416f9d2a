// The steps of the per-head method (docs/method.md §2.1-2.15), each the library's public
// function, and the statistics they use (moments, the Kolmogorov distribution, the KS test).

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <attention_plasticity/aggregates.hpp>
#include <attention_plasticity/cells.hpp>
#include <attention_plasticity/kolmogorov.hpp>
#include <attention_plasticity/ks_test.hpp>
#include <attention_plasticity/moments.hpp>
#include <attention_plasticity/normality.hpp>
#include <attention_plasticity/preparation.hpp>
#include <attention_plasticity/query_model.hpp>
#include <attention_plasticity/regression.hpp>
#include <attention_plasticity/rotation.hpp>
#include <attention_plasticity/seeds.hpp>

#include "common.hpp"

namespace ap_python
{
namespace
{
    const char* const array_note =
        "\n\nArrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; "
        "integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module "
        "docstring).";

    /// A head index of HeadId: >= 0 (a negative layer would seed the pair sampler of no head).
    std::int64_t head_index(const char* name, std::int64_t value)
    {
        if (value < 0)
        {
            throw_invalid("HeadId", std::string(name) + " must be >= 0, got " + std::to_string(value));
        }
        return value;
    }

    std::string doc(const char* text)
    {
        return std::string(text) + array_note;
    }

    /// f(view of t) for positions read as reals: int64 or float64 in place.
    template <class F>
    decltype(auto) visit_real(const array_arg& t, F&& f)
    {
        if (is_int64(t))
        {
            return f(view<std::int64_t, 1>(t));
        }
        return f(view<double, 1>(t));
    }

    xt::xtensor<double, 2> copy_matrix(const array_arg& a)
    {
        return visit_float<2>(a, [](const auto& x) { return xt::xtensor<double, 2>(xt::cast<double>(x)); });
    }

    void bind_preparation(nb::module_& m)
    {
        m.def(
            "orientation_signs",
            [](const array_like& keys, const array_like& key_buckets) {
                constexpr const char* fn = "orientation_signs";
                const array_arg k = float_array(keys.object, fn, "keys", 2);
                const array_arg b = int64_array(key_buckets.object, fn, "key_buckets");
                auto signs = without_gil([&] {
                    return visit_float<2>(k, [&](const auto& K) {
                        return ap::orientation_signs(K, view<std::int64_t, 1>(b));
                    });
                });
                return to_numpy(std::move(signs));
            },
            "keys"_a, "key_buckets"_a,
            doc("The orientation of a head (docs/method.md §2.1): s_d = -1 when the mean over key buckets of the\n"
                "per-bucket mean of key component d is negative, else +1, from all the keys (n x d) and their\n"
                "bucket ids (int, [n]). Every query and key is then multiplied by s (X * s). Returns float64 [d].")
                .c_str());
        m.def(
            "subsample_rows",
            [](std::size_t n, std::size_t max_rows, std::uint64_t seed) {
                return indices_to_numpy(without_gil([&] { return ap::subsample_rows(n, max_rows, seed); }));
            },
            "n"_a, "max_rows"_a, "seed"_a,
            "The rows kept by subsampling (docs/method.md §2.2), increasing: all n when n <= max_rows, otherwise\n"
            "max_rows of them drawn uniformly without replacement with Rng(seed) (a partial Fisher-Yates of\n"
            "0..n-1). The seeds of a head: seeds_of_head. Returns int64 [min(n, max_rows)].");
    }

    void bind_regression(nb::module_& m)
    {
        nb::class_<ap::linear_fit>(m, "LinearFit",
                                   "OLS of each column of X on t, X_d = alpha_d + beta_d t (docs/method.md §2.3).")
            .def_prop_ro(
                "alpha", [](nb::handle s) { return field_view(nb::cast<ap::linear_fit&>(s).alpha, s); },
                "Intercepts, float64 [d] (vector units).")
            .def_prop_ro(
                "beta", [](nb::handle s) { return field_view(nb::cast<ap::linear_fit&>(s).beta, s); },
                "Slopes, float64 [d] (vector units per token).")
            .def_prop_ro(
                "r2", [](nb::handle s) { return field_view(nb::cast<ap::linear_fit&>(s).r2, s); },
                "R2 per column, float64 [d], in [0, 1]; 0 for a constant column.")
            .def_ro("r2_mean", &ap::linear_fit::r2_mean, "The mean of r2 (q_R2_pos); NaN when d = 0.")
            .def_ro("beta_norm", &ap::linear_fit::beta_norm, "||beta|| (q_beta_norm), vector units per token.")
            .def_ro("regressor_varies", &ap::linear_fit::regressor_varies, "Whether t has any variance.");
        m.def(
            "fit_linear",
            [](const array_like& t, const array_like& x) {
                constexpr const char* fn = "fit_linear";
                const array_arg tv = real_array(t.object, fn, "t");
                const array_arg xm = float_array(x.object, fn, "X", 2);
                return without_gil([&] {
                    return visit_real(tv, [&](const auto& T) {
                        return visit_float<2>(xm, [&](const auto& X) { return ap::fit_linear(T, X); });
                    });
                });
            },
            "t"_a, "X"_a,
            doc("The position regression of docs/method.md §2.3: OLS of each column of X (n x d) on t (n),\n"
                "alpha, beta, per-column R2 = S_tx^2 / (S_tt S_xx) in [0, 1] (0 for a constant column and when t\n"
                "has no variance) and their mean. Returns LinearFit.")
                .c_str());

        nb::class_<ap::scalar_predictability>(
            m, "ScalarPredictability",
            "How well s = X beta / ||beta|| predicts y = log2(t + 1) (docs/method.md §2.4).")
            .def_ro("r2", &ap::scalar_predictability::r2, "R2 of the OLS y ~ a + b s (q_R2_scalar), in [0, 1].")
            .def_ro("mae_baseline", &ap::scalar_predictability::mae_baseline,
                    "Mean |y - mean y| (q_mae_baseline), log2-position units.")
            .def_ro("mae_projection", &ap::scalar_predictability::mae_projection,
                    "Mean |y - a - b s| (q_mae_proj), log2-position units.")
            .def_ro("mae_ratio", &ap::scalar_predictability::mae_ratio,
                    "mae_projection / mae_baseline (q_mae_ratio); 1 when the baseline is 0.");
        m.def(
            "scalar_position_predictability",
            [](const array_like& t, const array_like& x, const array_like& beta) {
                constexpr const char* fn = "scalar_position_predictability";
                const array_arg tv = real_array(t.object, fn, "t");
                const array_arg xm = float_array(x.object, fn, "X", 2);
                const array_arg bv = double_array(beta.object, fn, "beta");
                return without_gil([&] {
                    return visit_real(tv, [&](const auto& T) {
                        return visit_float<2>(xm, [&](const auto& X) {
                            return ap::scalar_position_predictability(T, X, view<double, 1>(bv));
                        });
                    });
                });
            },
            "t"_a, "X"_a, "beta"_a,
            doc("docs/method.md §2.4: y = log2(t + 1), s = X beta / ||beta||, OLS y ~ a + b s; R2 and mean absolute\n"
                "errors. beta = 0: R2 0 and both errors the baseline. X: n x d, t: [n], beta: [d]. Returns\n"
                "ScalarPredictability.")
                .c_str());

        nb::class_<ap::position_component_fit>(
            m, "PositionComponentFit",
            "The positional component of the rotated queries (docs/method.md §2.6): OLS of component 0 on t and\n"
            "the variance of its residual.")
            .def(
                "__init__",
                [](ap::position_component_fit* self, double alpha, double beta, double residual_variance,
                   nb::handle residual) {
                    new (self) ap::position_component_fit{alpha, beta, residual_variance, xt::xtensor<double, 1>()};
                    if (!residual.is_none())
                    {
                        self->residual = copy_vector(float_array(residual, "PositionComponentFit", "residual", 1));
                    }
                },
                "alpha"_a, "beta"_a, "residual_variance"_a, "residual"_a = nb::none(),
                "A fit given by its numbers (e.g. for bucket_query_models); residual is copied.")
            .def_ro("alpha", &ap::position_component_fit::alpha, "alpha_rot_0 (vector units).")
            .def_ro("beta", &ap::position_component_fit::beta, "beta_rot_0 (vector units per token).")
            .def_ro("residual_variance", &ap::position_component_fit::residual_variance,
                    "sigma2 = var(residual, ddof=1) (squared vector units).")
            .def_prop_ro(
                "residual",
                [](nb::handle s) { return field_view(nb::cast<ap::position_component_fit&>(s).residual, s); },
                "x_rot[:, 0] - (alpha + beta t), float64 [n] (read by §2.7).");
        m.def(
            "fit_position_component",
            [](const array_like& t, const array_like& x_rot) {
                constexpr const char* fn = "fit_position_component";
                const array_arg tv = real_array(t.object, fn, "t");
                const array_arg xm = float_array(x_rot.object, fn, "X_rot", 2);
                return without_gil([&] {
                    return visit_real(tv, [&](const auto& T) {
                        return visit_float<2>(xm, [&](const auto& X) { return ap::fit_position_component(T, X); });
                    });
                });
            },
            "t"_a, "X_rot"_a,
            doc("docs/method.md §2.6: alpha_rot_0 and beta_rot_0 of component 0 of the rotated queries X_rot\n"
                "(n x d; only column 0 is read) on their positions t, sigma2 = var(residual, ddof=1) and the\n"
                "residual. n >= 2. Returns PositionComponentFit.")
                .c_str());
        m.def(
            "component_weights",
            [](const array_like& r2) {
                const array_arg r = double_array(r2.object, "component_weights", "r2");
                return to_numpy(without_gil([&] { return ap::component_weights(view<double, 1>(r)); }));
            },
            "r2"_a,
            doc("Component weights (docs/method.md §2.9): w_d = max(R2_d, 0) / sum_k max(R2_k, 0), uniform 1/d when\n"
                "the sum is 0, from the per-component R2 of the position regression. Returns float64 [d],\n"
                "summing to 1.")
                .c_str());
    }

    void bind_rotation(nb::module_& m)
    {
        m.attr("householder_tolerance") = ap::householder_tolerance;
        nb::class_<ap::householder>(
            m, "Householder",
            "The reflection H = I - 2 v v^T of docs/method.md §2.5 that maps beta_hat = beta / ||beta|| to e1:\n"
            "symmetric, orthogonal, H^2 = I. Made by householder_to_e1, applied by apply (X H in O(nd)).")
            .def_prop_ro(
                "v", [](nb::handle s) { return field_view(nb::cast<ap::householder&>(s).v, s); },
                "The unit vector v, float64 [d]; empty when H is the identity.")
            .def_ro("dimension", &ap::householder::dimension, "d.")
            .def("is_identity", &ap::householder::is_identity, "Whether H = I (||beta|| or ||beta_hat - e1|| < 1e-12).")
            .def(
                "matrix", [](const ap::householder& h) { return to_numpy(h.matrix()); },
                "The explicit d x d matrix, float64 (for inspection; apply never forms it).")
            .def(
                "apply",
                [](const ap::householder& h, const array_like& x, nb::handle dtype) {
                    constexpr const char* fn = "householder::apply";
                    const array_arg xm = float_array(x.object, fn, "X", 2);
                    const precision t = precision_arg(dtype, fn);
                    using result_type = std::variant<xt::xtensor<float, 2>, xt::xtensor<double, 2>>;
                    result_type result = without_gil([&] {
                        return visit_float<2>(xm, [&](const auto& X) {
                            return visit_precision(t, xm.is_float32, [&](auto tag) -> result_type {
                                using T = std::remove_pointer_t<decltype(tag)>;
                                return h.apply<T>(X);
                            });
                        });
                    });
                    return std::visit([](auto&& r) { return nb::cast(to_numpy(std::move(r))); }, std::move(result));
                },
                "X"_a, "dtype"_a = nb::none(),
                nb::sig("def apply(self, X: numpy.typing.ArrayLike, dtype: object = None) -> "
                        "numpy.typing.NDArray[numpy.floating]"),
                doc("X H for an n x d array (rows are vectors), computed as X - 2 (X v) v^T in float64\n"
                    "(docs/method.md §2.5). Returns a new array of the given dtype (None: the dtype of X).")
                    .c_str());
        m.def(
            "householder_to_e1",
            [](const array_like& beta) {
                const array_arg b = double_array(beta.object, "householder_to_e1", "beta");
                return without_gil([&] { return ap::householder_to_e1(view<double, 1>(b)); });
            },
            "beta"_a,
            doc("H with H beta_hat = e1 (docs/method.md §2.5): v = (beta_hat - e1) / ||beta_hat - e1||, the identity\n"
                "when ||beta|| < 1e-12 or ||beta_hat - e1|| < 1e-12. beta: [d]. Returns Householder.")
                .c_str());
    }

    void bind_statistics(nb::module_& m)
    {
        nb::class_<ap::moments_result>(m, "MomentsResult", "Moments of a sample (docs/method.md §7.2-7.3).")
            .def_ro("mean", &ap::moments_result::mean, "The sample mean.")
            .def_ro("std_ddof1", &ap::moments_result::std_ddof1, "ddof=1 standard deviation; NaN for n = 1.")
            .def_ro("skewness", &ap::moments_result::skewness,
                    "scipy.stats.skew(x, bias=False); 0 under zero variance.")
            .def_ro("excess_kurtosis", &ap::moments_result::excess_kurtosis,
                    "scipy.stats.kurtosis(x, fisher=True, bias=False); 0 under zero variance.")
            .def_ro("zero_variance", &ap::moments_result::zero_variance,
                    "SciPy's 'all values equal' rule, m2 <= (1e-15 mean)^2 (§7.3).");
        auto sample = [](nb::handle x, const char* fn) { return float_array(x, fn, "x", 1); };
        m.def(
            "sample_moments",
            [sample](const array_like& x) {
                const array_arg a = sample(x.object, "sample_moments");
                return without_gil(
                    [&] { return visit_float<1>(a, [](const auto& v) { return ap::sample_moments(v); }); });
            },
            "x"_a,
            doc("Mean, ddof=1 std, skewness and excess kurtosis of the 1-D sample x, accumulated in float64\n"
                "(docs/method.md §7.2). Returns MomentsResult.")
                .c_str());
        m.def(
            "skewness",
            [sample](const array_like& x) {
                const array_arg a = sample(x.object, "skewness");
                return without_gil([&] { return visit_float<1>(a, [](const auto& v) { return ap::skewness(v); }); });
            },
            "x"_a,
            doc("scipy.stats.skew(x, bias=False) (G1 of docs/method.md §7.2); 0 where SciPy gives NaN (all values\n"
                "equal).")
                .c_str());
        m.def(
            "excess_kurtosis",
            [sample](const array_like& x) {
                const array_arg a = sample(x.object, "excess_kurtosis");
                return without_gil(
                    [&] { return visit_float<1>(a, [](const auto& v) { return ap::excess_kurtosis(v); }); });
            },
            "x"_a,
            doc("scipy.stats.kurtosis(x, fisher=True, bias=False) (G2 of docs/method.md §7.2); 0 where SciPy gives\n"
                "NaN.")
                .c_str());

        auto scalar = [](double (*f)(std::size_t, double)) {
            return [f](std::size_t n, double d) { return without_gil([&] { return f(n, d); }); };
        };
        m.def("kolmogorov_sf", scalar(&ap::kolmogorov_sf), "n"_a, "d"_a,
              "scipy.stats.kstwo.sf(d, n) = P(D_n >= d) of the two-sided one-sample KS statistic (docs/method.md\n"
              "§7.4, with its two documented O(1) shortcuts, within 2e-8 of SciPy).");
        m.def("kolmogorov_cdf", scalar(&ap::kolmogorov_cdf), "n"_a, "d"_a,
              "scipy.stats.kstwo.cdf(d, n) = P(D_n <= d) (docs/method.md §7.4).");
        m.def("kolmogorov_sf_exact", scalar(&ap::kolmogorov_sf_exact), "n"_a, "d"_a,
              "kolmogorov_sf without its shortcuts: SciPy's algorithm in every branch (O(n) for large n).");
        m.def("smirnov_sf", scalar(&ap::smirnov_sf), "n"_a, "d"_a,
              "scipy.special.smirnov(n, d) = P(D_n^+ >= d) of the one-sided statistic.");

        nb::class_<ap::ks_result>(m, "KsResult", "A one-sample KS test against N(0, 1).")
            .def_ro("statistic", &ap::ks_result::statistic, "D_n = sup |F_n - Phi|.")
            .def_ro("p_value", &ap::ks_result::p_value, "P(D_n >= statistic) under H0.");
        m.def(
            "ks_test_normal",
            [sample](const array_like& x) {
                const array_arg a = sample(x.object, "ks_test_normal");
                return without_gil(
                    [&] { return visit_float<1>(a, [](const auto& v) { return ap::ks_test_normal(v); }); });
            },
            "x"_a,
            doc("scipy.stats.kstest(x, 'norm') (method 'exact': kstwo.sf(D, n)) for the 1-D sample x\n"
                "(docs/method.md §7.4). Returns KsResult.")
                .c_str());

        nb::class_<ap::residual_normality_result>(m, "ResidualNormality",
                                                  "The first-component summary of docs/method.md §2.7.")
            .def_ro("skewness", &ap::residual_normality_result::skewness, "q_resid0_skew.")
            .def_ro("excess_kurtosis", &ap::residual_normality_result::excess_kurtosis, "q_resid0_kurt.")
            .def_ro("ks_p_value", &ap::residual_normality_result::ks_p_value, "q_resid0_ks_p.");
        m.def(
            "standardized_normality",
            [sample](const array_like& x) {
                const array_arg a = sample(x.object, "standardized_normality");
                return without_gil(
                    [&] { return visit_float<1>(a, [](const auto& v) { return ap::standardized_normality(v); }); });
            },
            "x"_a,
            doc("docs/method.md §2.7 for the 1-D sample x: standardized with its mean and ddof=1 std, then skewness,\n"
                "excess kurtosis and the KS p-value against N(0, 1); (0, 0, 1) under zero variance or n < 2.\n"
                "Returns ResidualNormality.")
                .c_str());

        nb::class_<ap::noise_normality_result>(m, "NoiseNormality",
                                               "The noise-subspace summary of docs/method.md §2.8.")
            .def_ro("median_abs_skewness", &ap::noise_normality_result::median_abs_skewness, "q_noise_med_abs_skew.")
            .def_ro("median_abs_kurtosis", &ap::noise_normality_result::median_abs_kurtosis, "q_noise_med_abs_kurt.")
            .def_ro("median_ks_p_value", &ap::noise_normality_result::median_ks_p_value, "q_noise_med_ks_p.")
            .def_ro("fraction_ks_p_below_alpha", &ap::noise_normality_result::fraction_ks_p_below_alpha,
                    "q_noise_frac_ks_p_lt_alpha.")
            .def_ro("n_components", &ap::noise_normality_result::n_components, "m, the columns of X.")
            .def_ro("n_ks_tested", &ap::noise_normality_result::n_ks_tested, "K = min(max_ks_dims, m).");
        m.def(
            "noise_normality",
            [](const array_like& x, std::size_t max_ks_dims, double p_alpha, std::uint64_t seed) {
                const array_arg a = float_array(x.object, "noise_normality", "X", 2);
                return without_gil([&] {
                    return visit_float<2>(
                        a, [&](const auto& X) { return ap::noise_normality(X, max_ks_dims, p_alpha, seed); });
                });
            },
            "X"_a, "max_ks_dims"_a, "p_alpha"_a, "seed"_a,
            doc("docs/method.md §2.8 on X (n x m, each column a component, e.g. columns 1..d-1 of the rotated\n"
                "queries): medians of |skewness| and |excess kurtosis| over the m columns, KS p-values (median,\n"
                "fraction below p_alpha) over K = min(max_ks_dims, m) columns (all when K = m, else drawn with\n"
                "Rng(seed)). m = 0: NaNs. Returns NoiseNormality.")
                .c_str());
    }

    void bind_query_model(nb::module_& m)
    {
        m.attr("default_covariance_epsilon") = ap::default_covariance_epsilon;
        nb::class_<ap::gaussian>(m, "Gaussian", "A Gaussian N(mean, covariance).")
            .def(
                "__init__",
                [](ap::gaussian* self, const array_like& mean, const array_like& covariance) {
                    new (self) ap::gaussian{copy_vector(float_array(mean.object, "Gaussian", "mean", 1)),
                                            copy_matrix(float_array(covariance.object, "Gaussian", "covariance", 2))};
                },
                "mean"_a, "covariance"_a, "From a mean [d] and a covariance d x d (copied as float64).")
            .def_prop_ro(
                "mean", [](nb::handle s) { return field_view(nb::cast<ap::gaussian&>(s).mean, s); }, "float64 [d].")
            .def_prop_ro(
                "covariance", [](nb::handle s) { return field_view(nb::cast<ap::gaussian&>(s).covariance, s); },
                "float64 [d, d].");
        m.def(
            "fit_gaussian",
            [](const array_like& samples, double epsilon) {
                const array_arg x = float_array(samples.object, "fit_gaussian", "samples", 2);
                return without_gil(
                    [&] { return visit_float<2>(x, [&](const auto& X) { return ap::fit_gaussian(X, epsilon); }); });
            },
            "samples"_a, "epsilon"_a = ap::default_covariance_epsilon,
            doc("The Gaussian of the rows of samples (n x d, n >= 2): their mean and ddof=1 covariance + epsilon I\n"
                "(docs/method.md §2.10). Returns Gaussian.")
                .c_str());

        nb::class_<ap::bucket_options>(m, "BucketOptions", "Which buckets compute_bucket_statistics keeps.")
            .def(
                "__init__",
                [](ap::bucket_options* self, std::int64_t min_bucket, std::size_t min_count,
                   std::size_t first_component, double epsilon) {
                    new (self) ap::bucket_options{min_bucket, min_count, first_component, epsilon};
                },
                "min_bucket"_a = 1, "min_count"_a = 2, "first_component"_a = 1,
                "epsilon"_a = ap::default_covariance_epsilon, "The method's choice by default (docs/method.md §2.10).")
            .def_rw("min_bucket", &ap::bucket_options::min_bucket, "Buckets below it are skipped (the method: j > 0).")
            .def_rw("min_count", &ap::bucket_options::min_count, "Fewest rows of a kept bucket (>= 2).")
            .def_rw("first_component", &ap::bucket_options::first_component, "First component of the statistics.")
            .def_rw("epsilon", &ap::bucket_options::epsilon, "Ridge added to the covariance's diagonal.");
        nb::class_<ap::bucket_statistics>(
            m, "BucketStatistics",
            "Statistics of one query bucket (docs/method.md §2.10).")
            .def_ro("bucket", &ap::bucket_statistics::bucket, "Bucket id j.")
            .def_ro("count", &ap::bucket_statistics::count, "n_j, rows in the bucket.")
            .def_ro("tau", &ap::bucket_statistics::tau, "tau_j, the mean position (tokens).")
            .def_ro("semantic", &ap::bucket_statistics::semantic, "mu_j and Sigma_j of the components kept.");
        m.def(
            "compute_bucket_statistics",
            [](const array_like& positions, const array_like& buckets, const array_like& x,
               const ap::bucket_options& options) {
                constexpr const char* fn = "compute_bucket_statistics";
                const array_arg p = real_array(positions.object, fn, "positions");
                const array_arg b = int64_array(buckets.object, fn, "buckets");
                const array_arg xm = float_array(x.object, fn, "X", 2);
                return without_gil([&] {
                    return visit_real(p, [&](const auto& P) {
                        return visit_float<2>(xm, [&](const auto& X) {
                            return ap::compute_bucket_statistics(P, view<std::int64_t, 1>(b), X, options);
                        });
                    });
                });
            },
            "positions"_a, "buckets"_a, "X"_a, "options"_a = ap::bucket_options{},
            doc("Per-bucket tau_j, n_j, mu_j and Sigma_j (ddof=1, + epsilon I) of the components from\n"
                "options.first_component on, for the buckets >= options.min_bucket with at least options.min_count\n"
                "rows, in increasing id (docs/method.md §2.10). Returns a list of BucketStatistics.")
                .c_str());

        nb::class_<ap::query_bucket>(m, "QueryBucket", "A query bucket with a query model (docs/method.md §2.10).")
            .def_ro("bucket", &ap::query_bucket::bucket, "j > 0.")
            .def_ro("n_queries", &ap::query_bucket::n_queries, "n_j >= 2.")
            .def_ro("tau", &ap::query_bucket::tau, "tau_j, the mean position of its queries (tokens).");
        m.def(
            "query_buckets",
            [](const array_like& positions, const array_like& buckets) {
                constexpr const char* fn = "query_buckets";
                const array_arg p = real_array(positions.object, fn, "positions");
                const array_arg b = int64_array(buckets.object, fn, "buckets");
                return without_gil([&] {
                    return visit_real(p, [&](const auto& P) { return ap::query_buckets(P, view<std::int64_t, 1>(b)); });
                });
            },
            "positions"_a, "buckets"_a,
            doc("The query buckets that get a model (docs/method.md §2.10): ids j > 0 with at least 2 queries, in\n"
                "increasing j, with n_j and tau_j. Returns a list of QueryBucket.")
                .c_str());

        nb::class_<ap::bucket_query_model>(
            m, "BucketQueryModel",
            "The query model of one query bucket (docs/method.md §2.10) in the rotated basis: N(m_j, C_j) with\n"
            "m_j = [position_mean, semantic.mean], C_j = blockdiag(position_variance, semantic.covariance).")
            .def(
                "__init__",
                [](ap::bucket_query_model* self, std::int64_t bucket, std::size_t n_queries, double tau,
                   double position_mean, double position_variance, const ap::gaussian& semantic) {
                    new (self)
                        ap::bucket_query_model{bucket, n_queries, tau, position_mean, position_variance, semantic};
                },
                "bucket"_a, "n_queries"_a, "tau"_a, "position_mean"_a, "position_variance"_a, "semantic"_a,
                "A model given by its parts (semantic: Gaussian of components 1..d-1), e.g. for\n"
                "query_bucket_plasticity.")
            .def_ro("bucket", &ap::bucket_query_model::bucket, "j.")
            .def_ro("n_queries", &ap::bucket_query_model::n_queries, "n_j.")
            .def_ro("tau", &ap::bucket_query_model::tau, "tau_j (tokens).")
            .def_ro("position_mean", &ap::bucket_query_model::position_mean, "alpha_rot_0 + beta_rot_0 tau_j.")
            .def_ro("position_variance", &ap::bucket_query_model::position_variance, "sigma2.")
            .def_ro("semantic", &ap::bucket_query_model::semantic, "mu_j, Sigma_j of components 1..d-1.");
        m.def(
            "bucket_query_models",
            [](const array_like& positions, const array_like& buckets, const array_like& x_rot,
               const ap::position_component_fit& component0, double covariance_epsilon) {
                constexpr const char* fn = "bucket_query_models";
                const array_arg p = real_array(positions.object, fn, "positions");
                const array_arg b = int64_array(buckets.object, fn, "buckets");
                const array_arg xm = float_array(x_rot.object, fn, "X_rot", 2);
                return without_gil([&] {
                    return visit_real(p, [&](const auto& P) {
                        return visit_float<2>(xm, [&](const auto& X) {
                            return ap::bucket_query_models(P, view<std::int64_t, 1>(b), X, component0,
                                                           covariance_epsilon);
                        });
                    });
                });
            },
            "positions"_a, "buckets"_a, "X_rot"_a, "component0"_a,
            "covariance_epsilon"_a = ap::default_covariance_epsilon,
            doc("The query models of a head (docs/method.md §2.10), one per query bucket j > 0 with at least 2\n"
                "queries, in increasing j, from the rotated queries X_rot (n x d), their positions and bucket\n"
                "ids, and the fit of the positional component (§2.6). Returns a list of BucketQueryModel.")
                .c_str());
        m.def("full_gaussian", &ap::full_gaussian, "model"_a,
              "The d-dimensional Gaussian of a query model: mean [position_mean, mu_j], covariance\n"
              "blockdiag(position_variance, Sigma_j) (docs/method.md §2.10). Returns Gaussian.");
    }

    void bind_cells(nb::module_& m)
    {
        nb::class_<ap::example_groups>(
            m, "ExampleGroups",
            "The keys of one key bucket grouped into examples (docs/method.md §2.12): example b holds\n"
            "rows[offsets[b]:offsets[b + 1]], ordered by position (ties in row order).")
            .def_prop_ro(
                "example_id",
                [](nb::handle s) { return vector_field_view(nb::cast<ap::example_groups&>(s).example_id, s); },
                "The example ids, increasing, int64 [B].")
            .def_prop_ro(
                "offsets", [](nb::handle s) { return vector_field_view(nb::cast<ap::example_groups&>(s).offsets, s); },
                "int64 [B + 1].")
            .def_prop_ro(
                "rows", [](nb::handle s) { return vector_field_view(nb::cast<ap::example_groups&>(s).rows, s); },
                "Rows of the key columns, int64 [n_c].")
            .def("count", &ap::example_groups::count, "B, the number of examples.")
            .def("length", &ap::example_groups::length, "b"_a, "L_b, the keys of example b.")
            .def("can_form_pair", &ap::example_groups::can_form_pair, "Whether some example has 2 keys.");
        nb::class_<ap::key_bucket>(m, "KeyBucket", "The keys of one key bucket (docs/method.md §2.11-2.12).")
            .def_ro("bucket", &ap::key_bucket::bucket, "Key bucket id c.")
            .def_ro("max_position", &ap::key_bucket::max_position, "The largest position of its keys (tokens).")
            .def_ro("examples", &ap::key_bucket::examples, "Its keys by example.");
        nb::bind_vector<std::vector<ap::key_bucket>>(m, "KeyBucketList",
                                                     "The key buckets of a head, in increasing id (group_key_buckets).")
            .def(
                "__len__", [](const std::vector<ap::key_bucket>& v) { return v.size(); }, "The number of key buckets.");
        m.def(
            "group_key_buckets",
            [](const array_like& positions, const array_like& buckets, const array_like& example_ids) {
                constexpr const char* fn = "group_key_buckets";
                const array_arg p = int64_array(positions.object, fn, "positions");
                const array_arg b = int64_array(buckets.object, fn, "buckets");
                const array_arg e = int64_array(example_ids.object, fn, "example_ids");
                return without_gil([&] {
                    return ap::group_key_buckets(view<std::int64_t, 1>(p), view<std::int64_t, 1>(b),
                                                 view<std::int64_t, 1>(e));
                });
            },
            "positions"_a, "buckets"_a, "example_ids"_a,
            doc("The key buckets of a head in increasing id (docs/method.md §2.11-2.12): for each its largest key\n"
                "position and its keys grouped into examples (rows of the given columns). Positions >= 0.\n"
                "Returns a KeyBucketList.")
                .c_str());
        m.def(
            "eligible_key_buckets",
            [](const std::vector<ap::key_bucket>& key_buckets, std::int64_t q_bucket, double tau,
               std::int64_t sliding_window) {
                std::vector<std::size_t> eligible = without_gil(
                    [&] { return ap::eligible_key_buckets(key_buckets, q_bucket, tau, sliding_window); });
                return vector_to_numpy(std::vector<std::int64_t>(eligible.begin(), eligible.end()));
            },
            "key_buckets"_a, "q_bucket"_a, "tau"_a, "sliding_window"_a = 0,
            "The key buckets eligible for query bucket j with mean position tau (docs/method.md §2.11), as\n"
            "indices into key_buckets: the buckets c < j; with a sliding window of w > 0 tokens only those with\n"
            "c = j - 1 or a key position > tau - w. Returns int64 indices, increasing.");

        nb::class_<ap::cell_pairs>(m, "CellPairs", "The key pairs of one cell (query bucket j, key bucket c).")
            .def(
                "__init__",
                [](ap::cell_pairs* self, std::int64_t q_bucket, std::int64_t k_bucket, const ap::key_pairs& pairs) {
                    new (self) ap::cell_pairs{q_bucket, k_bucket, pairs};
                },
                "q_bucket"_a, "k_bucket"_a, "pairs"_a, "A cell's pairs given by hand (KeyPairs of rows of the keys).")
            .def_ro("q_bucket", &ap::cell_pairs::q_bucket, "j.")
            .def_ro("k_bucket", &ap::cell_pairs::k_bucket, "c.")
            .def_ro("pairs", &ap::cell_pairs::pairs, "KeyPairs; first/second are rows of the key table.");
        m.def(
            "cell_key_pairs",
            [](const ap::key_bucket& keys, std::int64_t q_bucket, std::size_t num_pairs, double max_rel_dist,
               std::uint64_t pair_sampler_seed) {
                return without_gil(
                    [&] { return ap::cell_key_pairs(keys, q_bucket, num_pairs, max_rel_dist, pair_sampler_seed); });
            },
            "keys"_a, "q_bucket"_a, "num_pairs"_a, "max_rel_dist"_a, "pair_sampler_seed"_a,
            "The key pairs of cell (q_bucket, keys.bucket) (docs/method.md §2.12): num_pairs pairs of the sampler\n"
            "of §5 over the examples of the key bucket, from Rng(cell_pair_seed(pair_sampler_seed, j, c))\n"
            "(§2.15); none when no example has 2 keys. Returns CellPairs.");

        nb::class_<ap::cell_plasticity>(
            m, "CellPlasticity",
            "A row of head_bucket_plasticity.csv (docs/method.md §3.3).")
            .def_ro("q_bucket", &ap::cell_plasticity::q_bucket, "Query bucket id j.")
            .def_ro("k_bucket", &ap::cell_plasticity::k_bucket, "Key bucket id c.")
            .def_ro("plasticity", &ap::cell_plasticity::plasticity, "P_jc, mean PP of its pairs; NaN without pairs.")
            .def_ro("n_pairs", &ap::cell_plasticity::n_pairs, "Pairs drawn for the cell: num_pairs_per_bucket or 0.")
            .def_ro("plasticity_empirical", &ap::cell_plasticity::plasticity_empirical,
                    "The empirical P_jc (docs/method.md §8.2) when computed (analyze_head with empirical_ap), else "
                    "NaN.");
        nb::class_<ap::bucket_plasticity_result>(m, "BucketPlasticityResult",
                                                 "The cells of one query bucket and AP_j (docs/method.md §2.14).")
            .def_ro("cells", &ap::bucket_plasticity_result::cells, "list of CellPlasticity, in the order given.")
            .def_ro("plasticity", &ap::bucket_plasticity_result::plasticity, "AP_j; NaN without pairs.")
            .def_ro("n_pairs", &ap::bucket_plasticity_result::n_pairs, "Pairs of all its cells.")
            .def_prop_ro(
                "pair_plasticity",
                [](nb::handle s) { return field_view(nb::cast<ap::bucket_plasticity_result&>(s).pair_plasticity, s); },
                "PP of every pair, float64 [n_pairs], cell after cell (the rows of bucket_key_differences).")
            .def_ro("moments", &ap::bucket_plasticity_result::moments,
                    "The pairs' PairMoments (m, v) as the kernel returned them (docs/method.md §4, §4.6); empty for\n"
                    "query_bucket_empirical_plasticity.");
        m.def(
            "query_bucket_plasticity",
            [](const array_like& keys_rot, const std::vector<ap::cell_pairs>& cells,
               const ap::bucket_query_model& model, nb::handle dtype) {
                constexpr const char* fn = "query_bucket_plasticity";
                const array_arg k = float_array(keys_rot.object, fn, "keys_rot", 2);
                const precision t = precision_arg(dtype, fn);
                return without_gil([&] {
                    return visit_float<2>(k, [&](const auto& K) {
                        return visit_precision(t, k.is_float32, [&](auto tag) {
                            using T = std::remove_pointer_t<decltype(tag)>;
                            return ap::query_bucket_plasticity<T>(K, cells, model);
                        });
                    });
                });
            },
            "keys_rot"_a, "cells"_a, "model"_a, "dtype"_a = nb::none(),
            doc("Cell and bucket plasticity of one query bucket (docs/method.md §2.13-2.14): for every pair of every\n"
                "cell, w = k1 - k2 of the rotated keys keys_rot (n x d), PP under the bucket's query model (the\n"
                "structured kernel of §4.5), all pairs in one batched call; a cell's plasticity is the mean PP\n"
                "of its pairs, AP_j the mean over all. dtype: the precision of the kernel's products (None: the\n"
                "keys'). Returns BucketPlasticityResult (with every pair's PP and moments, for §8).")
                .c_str());
    }

    void bind_aggregates_and_seeds(nb::module_& m)
    {
        nb::class_<ap::plasticity_aggregates_result>(
            m, "PlasticityAggregates",
            "The aggregates of a head (docs/method.md §2.14); NaN where undefined.")
            .def_ro("ap_overall", &ap::plasticity_aggregates_result::ap_overall,
                    "sum n_j AP_j / sum n_j over the buckets with a defined AP_j.")
            .def_ro("ap_first20", &ap::plasticity_aggregates_result::ap_first20,
                    "The same over the buckets with tau_j < 0.2 C.")
            .def_ro("ap_last20", &ap::plasticity_aggregates_result::ap_last20,
                    "The same over the buckets with tau_j >= 0.8 C.")
            .def_ro("ap_drop", &ap::plasticity_aggregates_result::ap_drop, "ap_first20 - ap_last20.");
        m.def(
            "plasticity_aggregates",
            [](const array_like& tau, const array_like& n_queries, const array_like& plasticity,
               double context_length) {
                constexpr const char* fn = "plasticity_aggregates";
                const array_arg t = double_array(tau.object, fn, "tau");
                const array_arg n = double_array(n_queries.object, fn, "n_queries");
                const array_arg a = double_array(plasticity.object, fn, "plasticity");
                return without_gil([&] {
                    return ap::plasticity_aggregates(view<double, 1>(t), view<double, 1>(n), view<double, 1>(a),
                                                     context_length);
                });
            },
            "tau"_a, "n_queries"_a, "plasticity"_a, "context_length"_a,
            doc("The aggregates of a head (docs/method.md §2.14) from its query buckets' tau_j, n_j and AP_j (NaN\n"
                "when undefined) and C = max query position + 1: ap_overall = sum n_j AP_j / sum n_j over the\n"
                "defined AP_j; ap_first20 / ap_last20 the same over tau_j < 0.2 C / tau_j >= 0.8 C; ap_drop =\n"
                "ap_first20 - ap_last20. Returns PlasticityAggregates.")
                .c_str());

        nb::class_<ap::head_id>(
            m, "HeadId",
            "Which head (docs/method.md §1.3): layer, query head and the key head of its GQA group;\n"
            "layer and q_head seed the pair sampler (§2.15).")
            .def(
                "__init__",
                [](ap::head_id* self, std::int64_t layer, std::int64_t q_head, std::int64_t k_head) {
                    new (self) ap::head_id{head_index("layer", layer), head_index("q_head", q_head),
                                           head_index("k_head", k_head)};
                },
                "layer"_a = 0, "q_head"_a = 0, "k_head"_a = 0,
                "HeadId(layer, q_head, k_head); each an index >= 0 (InvalidArgumentError otherwise).")
            .def_prop_rw(
                "layer", [](const ap::head_id& h) { return h.layer; },
                [](ap::head_id& h, std::int64_t v) { h.layer = head_index("layer", v); }, "Layer index (0-based).")
            .def_prop_rw(
                "q_head", [](const ap::head_id& h) { return h.q_head; },
                [](ap::head_id& h, std::int64_t v) { h.q_head = head_index("q_head", v); }, "Query head index.")
            .def_prop_rw(
                "k_head", [](const ap::head_id& h) { return h.k_head; },
                [](ap::head_id& h, std::int64_t v) { h.k_head = head_index("k_head", v); },
                "Key head index k(h) of the GQA group (docs/method.md §1.3).")
            .def("__repr__", [](const ap::head_id& h) {
                return "HeadId(layer=" + std::to_string(h.layer) + ", q_head=" + std::to_string(h.q_head)
                       + ", k_head=" + std::to_string(h.k_head) + ")";
            });
        nb::class_<ap::head_seeds>(m, "HeadSeeds", "The seeds of one head (docs/method.md §2.15, §6.4).")
            .def_ro("query_subsample", &ap::head_seeds::query_subsample, "§2.2: mix_seed(seed, 'q').")
            .def_ro("key_subsample", &ap::head_seeds::key_subsample, "§2.2: mix_seed(seed, 'k').")
            .def_ro("noise_components", &ap::head_seeds::noise_components, "§2.8: seed.")
            .def_ro("pair_sampler", &ap::head_seeds::pair_sampler, "§2.12: pair_sampler_seed(seed, head).");
        m.def("pair_sampler_seed", &ap::pair_sampler_seed, "seed"_a, "head"_a,
              "S_h = seed + 10007 layer + 379 q_head (mod 2^64), the pair-sampler seed of a head (docs/method.md\n"
              "§2.15).");
        m.def("cell_pair_seed", &ap::cell_pair_seed, "pair_sampler_seed"_a, "q_bucket"_a, "k_bucket"_a,
              "The seed of the pair stream of cell (j, c): mix_seed(S_h, j, c) (docs/method.md §2.15, §6.3).");
        m.def("seeds_of_head", &ap::seeds_of_head, "seed"_a, "head"_a,
              "Every seed of a head under the user's seed (docs/method.md §2.15). Returns HeadSeeds.");
    }
}  // namespace

void bind_steps(nb::module_& m)
{
    bind_preparation(m);
    bind_regression(m);
    bind_rotation(m);
    bind_statistics(m);
    bind_query_model(m);
    bind_cells(m);
    bind_aggregates_and_seeds(m);
}
}  // namespace ap_python
