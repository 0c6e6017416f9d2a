// The extensions of docs/method.md §8, each the library's public function: distance maps
// (§8.1, distance_maps.hpp), the empirical AP (§8.2, empirical.hpp), the sensitivity of AP_j and
// the pair-sampling variance (§8.3, sensitivity.hpp), standard errors, biases and intervals
// (§8.3, intervals.hpp); and the key differences of a query bucket's cells (cells.hpp) they
// start from.

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <attention_plasticity/cells.hpp>
#include <attention_plasticity/distance_maps.hpp>
#include <attention_plasticity/empirical.hpp>
#include <attention_plasticity/intervals.hpp>
#include <attention_plasticity/seeds.hpp>
#include <attention_plasticity/sensitivity.hpp>

#include "common.hpp"

namespace ap_python
{
namespace
{
    const char* const array_note =
        "\n\nArrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; "
        "integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module "
        "docstring).";

    std::string doc(const char* text)
    {
        return std::string(text) + array_note;
    }

    using real_matrix = std::variant<xt::xtensor<float, 2>, xt::xtensor<double, 2>>;
    using real_vector = std::variant<xt::xtensor<float, 1>, xt::xtensor<double, 1>>;

    template <class V>
    nb::object variant_to_numpy(V&& v)
    {
        return std::visit([](auto&& x) { return nb::cast(to_numpy(std::move(x))); }, std::move(v));
    }

    /// call(tag, Q, W) on the views of the queries and the differences (each float32 or float64)
    /// of an empirical function, tag a pointer of its working type (dtype, or the differences'
    /// type), with the GIL released. Errors name `fn` and the arguments as the user named them.
    template <class Call>
    auto with_empirical(const char* fn, const array_like& queries, const char* queries_name,
                        const array_like& differences, const char* differences_name, nb::handle dtype, Call&& call)
    {
        const array_arg q = float_array(queries.object, fn, queries_name, 2);
        const array_arg w = float_array(differences.object, fn, differences_name, 2);
        const precision t = precision_arg(dtype, fn);
        return without_gil([&] {
            return visit_float<2>(q, [&](const auto& Q) {
                return visit_float<2>(w, [&](const auto& W) {
                    return visit_precision(t, w.is_float32, [&](auto tag) { return call(tag, Q, W); });
                });
            });
        });
    }

    void bind_distance_maps(nb::module_& m)
    {
        m.attr("max_bins_per_octave") = ap::max_bins_per_octave;
        nb::class_<ap::distance_bin_edges>(m, "DistanceBinEdges", "One bin of a log-spaced distance axis, [low, high).")
            .def_ro("low", &ap::distance_bin_edges::low, "Lower edge (tokens, included; -inf for bin -1).")
            .def_ro("high", &ap::distance_bin_edges::high, "Upper edge (tokens, excluded).")
            .def("__repr__", [](const ap::distance_bin_edges& e) {
                return "DistanceBinEdges(low=" + nb::cast<std::string>(nb::repr(nb::float_(e.low)))
                       + ", high=" + nb::cast<std::string>(nb::repr(nb::float_(e.high))) + ")";
            });
        m.def(
            "log_distance_bin", [](double distance, std::size_t b) { return ap::log_distance_bin(distance, b); },
            "distance"_a, "bins_per_octave"_a = 1,
            "The bin of a distance (tokens) on the log-spaced axis of docs/method.md §8.1, b = bins_per_octave\n"
            "(1 to max_bins_per_octave): -1 for a negative distance, 0 for [0, 1), k >= 1 for\n"
            "[2^((k-1)/b), 2^(k/b)). Raises DomainError for a non-finite distance, InvalidArgumentError for b.");
        m.def(
            "log_distance_bin_edges", [](int bin, std::size_t b) { return ap::log_distance_bin_edges(bin, b); },
            "bin"_a, "bins_per_octave"_a = 1,
            "The edges [low, high) of bin `bin` of log_distance_bin (docs/method.md §8.1): (-inf, 0) for -1,\n"
            "[0, 1) for 0, [2^((bin-1)/b), 2^(bin/b)) above. Returns DistanceBinEdges.");

        nb::class_<ap::pair_distances>(m, "PairDistances", "The two distances of every pair (docs/method.md §8.1).")
            .def_prop_ro(
                "key_distance",
                [](nb::handle s) { return field_view(nb::cast<ap::pair_distances&>(s).key_distance, s); },
                "|pos(k1) - pos(k2)| per pair, float64 [P] (tokens, >= 0).")
            .def_prop_ro(
                "query_distance",
                [](nb::handle s) { return field_view(nb::cast<ap::pair_distances&>(s).query_distance, s); },
                "tau_j - (pos(k1) + pos(k2)) / 2 per pair, float64 [P] (tokens).");
        m.def(
            "cell_pair_distances",
            [](const array_like& key_positions, const std::vector<ap::cell_pairs>& cells, double tau) {
                const array_arg p = double_array(key_positions.object, "cell_pair_distances", "key_positions");
                return without_gil([&] { return ap::cell_pair_distances(view<double, 1>(p), cells, tau); });
            },
            "key_positions"_a, "cells"_a, "tau"_a,
            doc("The distances of every pair of the cells of query bucket j (docs/method.md §8.1), cell after cell\n"
                "in the order of bucket_key_differences: the inter-key distance |pos(k1) - pos(k2)| and the\n"
                "key-to-query distance tau - (pos(k1) + pos(k2)) / 2, in tokens. key_positions: the positions\n"
                "of the rows of the key table the pairs index ([n], >= 0); tau: the bucket's mean query\n"
                "position. Raises InvalidArgumentError for a row out of range, DomainError for a negative or\n"
                "non-finite position or tau. Returns PairDistances.")
                .c_str());

        using bin = ap::distance_plasticity_bin;
        nb::class_<bin>(m, "DistancePlasticityBin",
                        "One non-empty bin of a distance map (a row of head_distance_plasticity.csv, docs/method.md "
                        "§8.1).")
            .def_ro("key_bin", &bin::key_bin, "log_distance_bin of the inter-key distance.")
            .def_ro("query_bin", &bin::query_bin, "log_distance_bin of the key-to-query distance.")
            .def_ro("key_distance", &bin::key_distance, "Edges of the inter-key distance (DistanceBinEdges, tokens).")
            .def_ro("query_distance", &bin::query_distance,
                    "Edges of the key-to-query distance (DistanceBinEdges, tokens).")
            .def_ro("plasticity", &bin::plasticity, "Mean PP of the pairs in the bin, in [0, 1].")
            .def_ro("n_pairs", &bin::n_pairs, "Pairs in the bin, >= 1.");
        m.def(
            "distance_plasticity_map",
            [](const array_like& key_distance, const array_like& query_distance, const array_like& plasticity,
               std::size_t bins_per_octave) {
                constexpr const char* fn = "distance_plasticity_map";
                const array_arg k = double_array(key_distance.object, fn, "key_distance");
                const array_arg q = double_array(query_distance.object, fn, "query_distance");
                const array_arg p = double_array(plasticity.object, fn, "plasticity");
                return without_gil([&] {
                    return ap::distance_plasticity_map(view<double, 1>(k), view<double, 1>(q), view<double, 1>(p),
                                                       bins_per_octave);
                });
            },
            "key_distance"_a, "query_distance"_a, "plasticity"_a, "bins_per_octave"_a = 1,
            doc("The distance map of a set of pairs (docs/method.md §8.1): for their inter-key distances (>= 0),\n"
                "key-to-query distances (tokens) and pair plasticities (PP in [0, 1]; [P] each), the mean PP\n"
                "and the pair count of every non-empty bin of the log-spaced grid (log_distance_bin on each\n"
                "axis, b = bins_per_octave), in increasing (key_bin, query_bin). Raises InvalidArgumentError\n"
                "for sizes that differ, DomainError for a non-finite value, a negative inter-key distance or\n"
                "a PP outside [0, 1]. Returns a list of DistancePlasticityBin.")
                .c_str());
        m.def(
            "distance_map_cell_pairs",
            [](const ap::key_bucket& keys, std::int64_t q_bucket, std::size_t num_pairs, double max_rel_dist,
               std::uint64_t pair_sampler_seed) {
                return without_gil([&] {
                    return ap::distance_map_cell_pairs(keys, q_bucket, num_pairs, max_rel_dist, pair_sampler_seed);
                });
            },
            "keys"_a, "q_bucket"_a, "num_pairs"_a, "max_rel_dist"_a, "pair_sampler_seed"_a,
            "Extra key pairs of cell (q_bucket, keys.bucket) for the distance map (docs/method.md §8.1): as\n"
            "cell_key_pairs, but from Rng(distance_map_pair_seed(pair_sampler_seed, j, c)), a stream of their\n"
            "own (§6.4), so the method's pairs do not change. None when no example has 2 keys. Returns CellPairs.");
        m.def("distance_map_pair_seed", &ap::distance_map_pair_seed, "pair_sampler_seed"_a, "q_bucket"_a,
              "k_bucket"_a,
              "The seed of the distance map's extra pairs of cell (j, c): mix_seed(S_h, j, c, 1) (docs/method.md\n"
              "§8.1, §6.4).");
        m.def("empirical_query_seed", &ap::empirical_query_seed, "pair_sampler_seed"_a, "q_bucket"_a,
              "The seed of the subsample of query bucket j's queries for the empirical AP: mix_seed(S_h, j, 0, 2)\n"
              "(docs/method.md §8.2, §6.4).");

        m.def(
            "bucket_key_differences",
            [](const array_like& keys_rot, const std::vector<ap::cell_pairs>& cells, nb::handle dtype) {
                constexpr const char* fn = "bucket_key_differences";
                const array_arg k = float_array(keys_rot.object, fn, "keys_rot", 2);
                const precision t = precision_arg(dtype, fn);
                real_matrix result = without_gil([&] {
                    return visit_float<2>(k, [&](const auto& K) {
                        return visit_precision(t, k.is_float32, [&](auto tag) -> real_matrix {
                            using T = std::remove_pointer_t<decltype(tag)>;
                            return ap::bucket_key_differences<T>(K, cells);
                        });
                    });
                });
                return variant_to_numpy(std::move(result));
            },
            "keys_rot"_a, "cells"_a, "dtype"_a = nb::none(),
            nb::sig("def bucket_key_differences(keys_rot: numpy.typing.ArrayLike, cells: collections.abc.Sequence["
                    "CellPairs], dtype: object = None) -> numpy.typing.NDArray[numpy.floating]"),
            doc("The key differences w = k1 - k2 of every pair of the cells (docs/method.md §2.12), cell after\n"
                "cell, as the rows of one (total pairs) x d matrix: the W of the kernel (§4.4) for a query\n"
                "bucket, whose row order every per-pair result of §8 follows. dtype: of the result (None: the\n"
                "dtype of keys_rot). Raises InvalidArgumentError for a row out of range, DomainError for a\n"
                "non-finite key.")
                .c_str());
    }

    void bind_empirical(nb::module_& m)
    {
        using prefs = ap::empirical_preferences;
        nb::class_<prefs>(m, "EmpiricalPreferences",
                          "How the queries of a sample choose within each pair (docs/method.md §8.2).")
            .def(
                "__init__",
                [](prefs* self, const array_like& preference, const array_like& tie_fraction, std::size_t n_queries) {
                    constexpr const char* fn = "EmpiricalPreferences";
                    new (self) prefs{copy_vector(float_array(preference.object, fn, "preference", 1)),
                                     copy_vector(float_array(tie_fraction.object, fn, "tie_fraction", 1)), n_queries};
                },
                "preference"_a, "tie_fraction"_a, "n_queries"_a,
                "Preferences given by their values ([P] each, copied as float64) and the sample size n.")
            .def_prop_ro(
                "preference", [](nb::handle s) { return field_view(nb::cast<prefs&>(s).preference, s); },
                "p_hat per pair: share of queries with q.w > 0, ties counted one half; float64 [P].")
            .def_prop_ro(
                "tie_fraction", [](nb::handle s) { return field_view(nb::cast<prefs&>(s).tie_fraction, s); },
                "t_hat per pair: share of queries with q.w = 0; float64 [P].")
            .def_ro("n_queries", &prefs::n_queries, "n, the queries of the sample.");
        m.def(
            "pair_preferences",
            [](const array_like& queries, const array_like& differences, nb::handle dtype) {
                return with_empirical("pair_preferences", queries, "queries", differences, "differences", dtype,
                                      [](auto tag, const auto& Q, const auto& W) {
                                          using T = std::remove_pointer_t<decltype(tag)>;
                                          return ap::pair_preferences<T>(Q, W);
                                      });
            },
            "queries"_a, "differences"_a, "dtype"_a = nb::none(),
            doc("For every key difference w (a row of differences, P x d) and the n queries (n x d, n >= 1), the\n"
                "share of queries with q.w > 0, ties q.w = 0 counted one half, and the share of ties\n"
                "(docs/method.md §8.2). The products q.w are GEMMs over blocks in the working type dtype (None:\n"
                "the differences' dtype; float64 is advised, a tie is an exact 0): no P x n matrix is formed.\n"
                "Returns EmpiricalPreferences.")
                .c_str());
        m.def(
            "empirical_plasticity_from_preferences",
            [](const prefs& preferences, nb::handle result_dtype) {
                const precision r = precision_arg(result_dtype, "empirical_plasticity_from_preferences", "result_dtype");
                return variant_to_numpy(without_gil([&]() -> real_vector {
                    if (r == precision::float32)
                    {
                        return ap::empirical_plasticity_from_preferences<float>(preferences);
                    }
                    return ap::empirical_plasticity_from_preferences<double>(preferences);
                }));
            },
            "preferences"_a, "result_dtype"_a = nb::none(),
            nb::sig("def empirical_plasticity_from_preferences(preferences: EmpiricalPreferences, result_dtype: "
                    "object = None) -> numpy.typing.NDArray[numpy.floating]"),
            "The unbiased estimate of 4 p (1 - p) of every pair from its preferences (docs/method.md §8.2):\n"
            "(4 p_hat (1 - p_hat) n - t_hat) / (n - 1); in [0, n / (n - 1)] (an unbiased estimate may exceed 1\n"
            "by at most 1 / (n - 1)). result_dtype: 'float32' or 'float64' (None: float64). Raises\n"
            "InvalidArgumentError for n < 2 or sizes that differ, DomainError for shares outside [0, 1].");
        m.def(
            "empirical_pair_plasticity",
            [](const array_like& queries, const array_like& differences, nb::handle dtype, nb::handle result_dtype) {
                constexpr const char* fn = "empirical_pair_plasticity";
                const precision r = precision_arg(result_dtype, fn, "result_dtype");
                return variant_to_numpy(with_empirical(
                    fn, queries, "queries", differences, "differences", dtype,
                    [r](auto tag, const auto& Q, const auto& W) -> real_vector {
                        using T = std::remove_pointer_t<decltype(tag)>;
                        if (r == precision::float32)
                        {
                            return ap::empirical_pair_plasticity<T, float>(Q, W);
                        }
                        return ap::empirical_pair_plasticity<T, double>(Q, W);
                    }));
            },
            "queries"_a, "differences"_a, "dtype"_a = nb::none(), "result_dtype"_a = nb::none(),
            nb::sig("def empirical_pair_plasticity(queries: numpy.typing.ArrayLike, differences: "
                    "numpy.typing.ArrayLike, dtype: object = None, result_dtype: object = None) -> "
                    "numpy.typing.NDArray[numpy.floating]"),
            doc("The model-free (empirical) plasticity of every pair (docs/method.md §8.2): pair_preferences of the\n"
                "actual queries (n x d, n >= 2) followed by empirical_plasticity_from_preferences. dtype as\n"
                "pair_preferences; result_dtype: of the result (None: float64). Returns an array [P].")
                .c_str());
        m.def(
            "query_bucket_empirical_plasticity",
            [](const array_like& keys_rot, const std::vector<ap::cell_pairs>& cells, const array_like& bucket_queries,
               nb::handle dtype) {
                return with_empirical("query_bucket_empirical_plasticity", bucket_queries, "bucket_queries", keys_rot,
                                      "keys_rot", dtype, [&](auto tag, const auto& Q, const auto& K) {
                                          using T = std::remove_pointer_t<decltype(tag)>;
                                          return ap::query_bucket_empirical_plasticity<T>(K, cells, Q);
                                      });
            },
            "keys_rot"_a, "cells"_a, "bucket_queries"_a, "dtype"_a = nb::none(),
            doc("The empirical cell and bucket plasticity of one query bucket (docs/method.md §8.2): for every\n"
                "pair of every cell, w = k1 - k2 of the rotated keys keys_rot (n x d) and its empirical PP over\n"
                "the bucket's queries (m x d, m >= 2, same basis); a cell's value is the mean over its pairs\n"
                "(NaN without pairs), AP_j the mean over all. dtype: the working type of the GEMMs (None: the\n"
                "keys'). Returns BucketPlasticityResult (pair_plasticity: every pair's empirical PP, in the\n"
                "order of bucket_key_differences; moments empty).")
                .c_str());
        m.def(
            "empirical_plasticity_variance",
            [](const array_like& queries, const array_like& differences, const prefs& preferences, nb::handle dtype) {
                return with_empirical("empirical_plasticity_variance", queries, "queries", differences, "differences",
                                      dtype, [&](auto tag, const auto& Q, const auto& W) {
                                          using T = std::remove_pointer_t<decltype(tag)>;
                                          return ap::empirical_plasticity_variance<T>(Q, W, preferences);
                                      });
            },
            "queries"_a, "differences"_a, "preferences"_a, "dtype"_a = nb::none(),
            doc("The variance, over the sample of n queries (n >= 2), of the mean of the empirical PP of the pairs\n"
                "(docs/method.md §8.2-§8.3): the first-order U-statistic variance (16 / n) var_q(f(q)) with\n"
                "f(q) = (1/P) sum_p (1 - 2 p_p) s_p(q), s_p(q) = 1, 1/2, 0 as q.w_p >, =, < 0, p_p the\n"
                "preferences pair_preferences gave for these queries and differences. The pairs are held fixed.\n"
                "dtype as pair_preferences. Returns a float (squared plasticity units).")
                .c_str());
    }

    void bind_sensitivity(nb::module_& m)
    {
        using bs = ap::bucket_sensitivity;
        nb::class_<bs>(m, "BucketSensitivity",
                       "How a query bucket's AP_j responds to its query model (docs/method.md §8.3): with z_p =\n"
                       "m_p / sqrt(v_p), g(z) = 4 Phi(z) Phi(-z), A_p = g'(z_p) / (P sqrt(v_p)), B_p = -g'(z_p) z_p /\n"
                       "(2 P v_p): dAP_j = a . dmu + G dmu0 + K dsigma2 + tr(M dSigma), and the coefficients of its\n"
                       "second-order bias.")
            .def_prop_ro(
                "semantic_mean", [](nb::handle s) { return field_view(nb::cast<bs&>(s).semantic_mean, s); },
                "a = sum_p A_p w_sem, float64 [d - 1].")
            .def_ro("position_mean", &bs::position_mean, "G = sum_p A_p w0.")
            .def_ro("position_variance", &bs::position_variance, "K = sum_p B_p w0^2.")
            .def_prop_ro(
                "semantic_covariance",
                [](nb::handle s) { return field_view(nb::cast<bs&>(s).semantic_covariance, s); },
                "M = sum_p B_p w_sem w_sem^T, float64 [d - 1, d - 1].")
            .def_prop_ro(
                "mixed", [](nb::handle s) { return field_view(nb::cast<bs&>(s).mixed, s); },
                "b = sum_p B_p w0 w_sem, float64 [d - 1] (the rotation term).")
            .def_ro("bias_per_position_mean_variance", &bs::bias_per_position_mean_variance,
                    "mean_p g''(z_p) / 2 w0^2 / v_p.")
            .def_ro("bias_per_position_variance_variance", &bs::bias_per_position_variance_variance,
                    "mean_p (3 z g' + z^2 g'') / 8 w0^4 / v_p^2.")
            .def_ro("bias_per_position_variance_shift", &bs::bias_per_position_variance_shift,
                    "mean_p -z g' w0^2 / (2 v_p).")
            .def_ro("bias_semantic", &bs::bias_semantic, "Bias from mu_hat and Sigma_hat of the bucket's n_j queries.");
        m.def(
            "bucket_plasticity_sensitivity",
            [](const array_like& differences, const ap::pair_moments& moments, const ap::bucket_query_model& model) {
                const array_arg w = float_array(differences.object, "bucket_plasticity_sensitivity", "differences", 2);
                return without_gil([&] {
                    return visit_float<2>(
                        w, [&](const auto& W) { return ap::bucket_plasticity_sensitivity(W, moments, model); });
                });
            },
            "differences"_a, "moments"_a, "model"_a,
            doc("The sensitivity of AP_j, the mean PP of the pairs whose key differences are the rows of\n"
                "differences (P x d, component 0 positional), to the bucket's query model (docs/method.md\n"
                "§8.3), from the pairs' moments as query_bucket_plasticity (BucketPlasticityResult.moments) or\n"
                "structured_pair_moments computed them. Pairs with v <= 0 contribute nothing; where the kernel\n"
                "rescaled (§4.6) every value is NaN. Raises InvalidArgumentError for shapes (d = 0, moments not\n"
                "[P], the model's semantic part not d - 1, model.n_queries < 2), DomainError for non-finite\n"
                "values. Returns BucketSensitivity.")
                .c_str());
        m.def(
            "pair_sampling_variance",
            [](const array_like& pair_plasticity, const std::vector<ap::cell_pairs>& cells) {
                const array_arg p = float_array(pair_plasticity.object, "pair_sampling_variance", "pair_plasticity", 1);
                return without_gil([&] {
                    return visit_float<1>(p, [&](const auto& P) { return ap::pair_sampling_variance(P, cells); });
                });
            },
            "pair_plasticity"_a, "cells"_a,
            doc("The variance of AP_j over the draws of its pairs (docs/method.md §8.3): the pairs of each cell\n"
                "are a sample from the cell (pair_plasticity: [P], the pairs of the cells in order), AP_j =\n"
                "sum_c sum_p PP / sum_c N_c and its variance, from the within-cell sample variances s_c^2\n"
                "(ddof 1), sum_c N_c s_c^2 / (sum_c N_c)^2. NaN when a cell has exactly one pair or there is no\n"
                "pair. Raises InvalidArgumentError when the sizes differ, DomainError for non-finite values.")
                .c_str());
    }

    void bind_intervals(nb::module_& m)
    {
        using be = ap::bucket_estimate;
        nb::class_<be>(m, "BucketEstimate",
                       "What the interval of one query bucket needs (docs/method.md §8.3), one per query model.")
            .def(
                "__init__",
                [](be* self, double plasticity, const ap::bucket_sensitivity& sensitivity, double pair_variance) {
                    new (self) be{plasticity, sensitivity, pair_variance};
                },
                "plasticity"_a, "sensitivity"_a, "pair_variance"_a,
                "AP_j (NaN: no pairs), its BucketSensitivity and its pair_sampling_variance.")
            .def_ro("plasticity", &be::plasticity, "AP_j; NaN when the bucket has no pairs.")
            .def_ro("sensitivity", &be::sensitivity, "BucketSensitivity.")
            .def_ro("pair_variance", &be::pair_variance, "pair_sampling_variance of the bucket.");
        using pu = ap::plasticity_uncertainty;
        nb::class_<pu>(m, "PlasticityUncertainty",
                       "Standard errors and second-order biases of every AP_j and of ap_overall (docs/method.md "
                       "§8.3).")
            .def_prop_ro(
                "bucket_standard_error",
                [](nb::handle s) { return vector_field_view(nb::cast<pu&>(s).bucket_standard_error, s); },
                "Per query model, float64 [J]; NaN for buckets without pairs.")
            .def_prop_ro(
                "bucket_bias", [](nb::handle s) { return vector_field_view(nb::cast<pu&>(s).bucket_bias, s); },
                "E[AP_j] - AP_j per query model, estimated; float64 [J].")
            .def_ro("standard_error", &pu::standard_error, "Of ap_overall.")
            .def_ro("bias", &pu::bias, "E[ap_overall] - ap_overall, estimated.");
        m.def(
            "plasticity_standard_errors",
            [](const array_like& t, const array_like& buckets, const array_like& x_rot,
               const ap::position_component_fit& component0, double slope_norm,
               const std::vector<ap::bucket_query_model>& models, const std::vector<be>& estimates) {
                constexpr const char* fn = "plasticity_standard_errors";
                const array_arg tv = real_array(t.object, fn, "t");
                const array_arg b = int64_array(buckets.object, fn, "buckets");
                const array_arg x = float_array(x_rot.object, fn, "x_rot", 2);
                return without_gil([&] {
                    return visit_float<2>(x, [&](const auto& X) {
                        return is_int64(tv) ? ap::plasticity_standard_errors(view<std::int64_t, 1>(tv),
                                                                             view<std::int64_t, 1>(b), X, component0,
                                                                             slope_norm, models, estimates)
                                            : ap::plasticity_standard_errors(view<double, 1>(tv),
                                                                             view<std::int64_t, 1>(b), X, component0,
                                                                             slope_norm, models, estimates);
                    });
                });
            },
            "t"_a, "buckets"_a, "x_rot"_a, "component0"_a, "slope_norm"_a, "models"_a, "estimates"_a,
            doc("Standard errors and biases of every AP_j and of ap_overall (docs/method.md §8.3), by the delta\n"
                "method, conditional on the keys and on the query positions and buckets. Inputs: the head's kept\n"
                "queries after the rotation (x_rot, n x d, n >= 3; positions t and bucket ids [n]), the\n"
                "component-0 fit (§2.6, with its residual), ||beta|| of the position regression (§2.3), the\n"
                "query models (§2.10, increasing bucket) and one BucketEstimate per model. Raises\n"
                "InvalidArgumentError for shapes, DomainError for non-finite values. Returns\n"
                "PlasticityUncertainty.")
                .c_str());

        nb::class_<ap::interval>(m, "Interval", "A two-sided interval [low, high].")
            .def_ro("low", &ap::interval::low, "Lower end; NaN when undefined.")
            .def_ro("high", &ap::interval::high, "Upper end; NaN when undefined.")
            .def_ro("centre", &ap::interval::centre, "estimate - bias, the centre (not clipped); NaN when undefined.")
            .def("__repr__", [](const ap::interval& i) {
                return "Interval(low=" + nb::cast<std::string>(nb::repr(nb::float_(i.low)))
                       + ", high=" + nb::cast<std::string>(nb::repr(nb::float_(i.high)))
                       + ", centre=" + nb::cast<std::string>(nb::repr(nb::float_(i.centre))) + ")";
            });
        m.def("plasticity_interval", &ap::plasticity_interval, "estimate"_a, "bias"_a, "standard_error"_a,
              "level"_a = 0.95,
              "The confidence interval of a plasticity (docs/method.md §8.3): estimate - bias -+ z standard_error,\n"
              "z = Phi^-1((1 + level) / 2) (1.96 for 0.95), clipped to [0, 1]; NaN ends when any input is NaN.\n"
              "Raises InvalidArgumentError for a level outside (0, 1), DomainError for a negative standard\n"
              "error. Returns Interval.");
    }
}  // namespace

void bind_extensions(nb::module_& m)
{
    bind_distance_maps(m);
    bind_empirical(m);
    bind_sensitivity(m);
    bind_intervals(m);
}
}  // namespace ap_python
