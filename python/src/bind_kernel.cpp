// The kernel of docs/method.md §4 (pair moments and plasticity, full and structured, key
// differences), the normal distribution function, the random streams of §6 and the key-pair
// sampler of §5.

#include <cstdint>
#include <mutex>
#include <type_traits>
#include <variant>
#include <vector>

#include <Python.h>

#include <attention_plasticity/normal.hpp>
#include <attention_plasticity/plasticity.hpp>
#include <attention_plasticity/random.hpp>
#include <attention_plasticity/sampler.hpp>

#include "common.hpp"

namespace ap_python
{
namespace
{
    /// An rng shared with Python: calls that draw from it hold its lock (they release the GIL).
    struct py_rng
    {
        explicit py_rng(std::uint64_t seed) : generator(seed) {}
        ap::rng generator;
        std::mutex mutex;
    };

    struct py_normal_generator
    {
        explicit py_normal_generator(std::uint64_t seed) : generator(seed) {}
        ap::normal_generator generator;
        std::mutex mutex;
    };

    using real_vector = std::variant<xt::xtensor<float, 1>, xt::xtensor<double, 1>>;

    nb::object to_python(real_vector&& v)
    {
        return std::visit([](auto&& x) { return nb::cast(to_numpy(std::move(x))); }, std::move(v));
    }

    bool is_python_number(nb::handle z)
    {
        return PyFloat_Check(z.ptr()) || (PyLong_Check(z.ptr()) && !PyBool_Check(z.ptr()));
    }

    /// f elementwise: a Python number gives a float, an array an array of float64 of its shape.
    template <class F>
    nb::object elementwise(const char* fn, nb::handle z, F f)
    {
        if (is_python_number(z))
        {
            return nb::float_(f(nb::cast<double>(z)));
        }
        const array_arg a = float_array(z, fn, "z", any_ndim);
        std::vector<double> out(a.size());
        without_gil([&] {
            for (std::size_t i = 0; i < out.size(); ++i)
            {
                out[i] = a.is_float32 ? f(static_cast<double>(static_cast<const float*>(a.data)[i]))
                                      : f(static_cast<const double*>(a.data)[i]);
            }
        });
        auto* owned = new std::vector<double>(std::move(out));
        nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
        return nb::cast(nb::ndarray<nb::numpy, double>(owned->data(), a.shape.size(), a.shape.data(), owner));
    }

    /// f(W, mu, Sigma) on the views of three float arguments, each float32 or float64.
    template <class F>
    decltype(auto) visit_kernel_args(const array_arg& w, const array_arg& mu, const array_arg& sigma, F&& f)
    {
        return visit_float<2>(w, [&](const auto& W) {
            return visit_float<1>(mu, [&](const auto& M) {
                return visit_float<2>(sigma, [&](const auto& S) { return f(W, M, S); });
            });
        });
    }

    struct kernel_args
    {
        array_arg w, mu, sigma;
    };

    kernel_args full_args(const char* fn, const array_like& differences, const array_like& mean,
                          const array_like& covariance)
    {
        return {float_array(differences.object, fn, "differences", 2), float_array(mean.object, fn, "mean", 1),
                float_array(covariance.object, fn, "covariance", 2)};
    }

    /// call(T tag, W, mean, covariance) on the views of the arguments of a full-covariance
    /// kernel function, T its working type (dtype, or the type of W), with the GIL released.
    template <class Call>
    auto with_full_kernel(const char* fn, const array_like& differences, const array_like& mean,
                          const array_like& covariance, nb::handle dtype, Call&& call)
    {
        const kernel_args a = full_args(fn, differences, mean, covariance);
        const precision t = precision_arg(dtype, fn);
        return without_gil([&] {
            return visit_kernel_args(a.w, a.mu, a.sigma, [&](const auto& W, const auto& M, const auto& S) {
                return visit_precision(t, a.w.is_float32, [&](auto tag) { return call(tag, W, M, S); });
            });
        });
    }

    template <class T>
    using type_tag = T*;

    const char* const array_note =
        "\n\nArrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other "
        "layouts or dtypes are converted once (see the module docstring).";

    std::string doc(const char* text)
    {
        return std::string(text) + array_note;
    }

    void bind_normal(nb::module_& m)
    {
        m.def(
            "normal_cdf", [](nb::handle z) { return elementwise("normal_cdf", z, ap::normal_cdf); },
            nb::sig("def normal_cdf(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]"),
            "z"_a,
            "Phi(z) = P(Z <= z) of the standard normal distribution, through erfc: the lower tail keeps its\n"
            "relative accuracy down to z = -37 (docs/method.md §4.7). A number gives a float, an array\n"
            "an array of float64 of the same shape.");
        m.def(
            "normal_sf", [](nb::handle z) { return elementwise("normal_sf", z, ap::normal_sf); },
            nb::sig("def normal_sf(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]"),
            "z"_a, "1 - Phi(z) = P(Z > z), accurate in the upper tail. Elementwise, as normal_cdf.");
        m.def(
            "normal_cdf_fast", [](nb::handle z) { return elementwise("normal_cdf_fast", z, ap::normal_cdf_fast); },
            nb::sig("def normal_cdf_fast(z: float | numpy.typing.ArrayLike) -> "
                    "float | numpy.typing.NDArray[numpy.float64]"),
            "z"_a,
            "Phi(z) within about 2e-15 absolute: a cubic Hermite spline on [-8.5, 8.5], erfc outside\n"
            "(the Phi of the KS statistic, docs/method.md §7.4). Elementwise, as normal_cdf.");
        m.def(
            "plasticity_from_z",
            [](nb::handle z) { return elementwise("plasticity_from_z", z, ap::plasticity_from_z); },
            nb::sig("def plasticity_from_z(z: float | numpy.typing.ArrayLike) -> "
                    "float | numpy.typing.NDArray[numpy.float64]"),
            "z"_a,
            "4 p (1 - p) with p = Phi(z): the plasticity of a pair whose score difference has z = m / sqrt(v)\n"
            "(docs/method.md §4.2), from the smaller tail so that it keeps a few ulp of relative accuracy\n"
            "up to |z| = 37; +-inf give 0. Dimensionless, in [0, 1]. Elementwise, as normal_cdf.");
    }

    void bind_random(nb::module_& m)
    {
        nb::class_<py_rng>(
            m, "Rng",
            "xoshiro256** seeded through splitmix64 (docs/method.md §6.1): the generator of every random\n"
            "stream of the method; a seed gives the same numbers on every platform. Functions that draw\n"
            "from it advance it (and lock it: one thread at a time).")
            .def(nb::init<std::uint64_t>(), "seed"_a = 0, "rng(seed).")
            .def(
                "__call__",
                [](py_rng& r) {
                    std::lock_guard<std::mutex> lock(r.mutex);
                    return r.generator();
                },
                "The next 64-bit output.")
            .def(
                "below",
                [](py_rng& r, std::uint64_t bound) {
                    if (bound == 0)
                    {
                        throw_invalid("Rng.below", "bound must be >= 1, got 0");
                    }
                    std::lock_guard<std::mutex> lock(r.mutex);
                    return r.generator.below(bound);
                },
                "bound"_a, "Uniform integer in [0, bound), without modulo bias (Lemire; docs/method.md §6.2).")
            .def(
                "uniform",
                [](py_rng& r) {
                    std::lock_guard<std::mutex> lock(r.mutex);
                    return r.generator.uniform();
                },
                "Uniform float in [0, 1) with 53 random bits (docs/method.md §6.2).");

        nb::class_<py_normal_generator>(
            m, "NormalGenerator",
            "Standard normal variates from Rng(seed) by Box-Muller, in pairs (cos, then sin).")
            .def(nb::init<std::uint64_t>(), "seed"_a = 0, "Box-Muller over Rng(seed).")
            .def(
                "__call__",
                [](py_normal_generator& g) {
                    std::lock_guard<std::mutex> lock(g.mutex);
                    return g.generator();
                },
                "The next N(0, 1) variate.")
            .def(
                "uniform",
                [](py_normal_generator& g) {
                    std::lock_guard<std::mutex> lock(g.mutex);
                    return g.generator.uniform();
                },
                "A uniform float in [0, 1) from the underlying stream.")
            .def(
                "below",
                [](py_normal_generator& g, std::uint64_t bound) {
                    if (bound == 0)
                    {
                        throw_invalid("NormalGenerator.below", "bound must be >= 1, got 0");
                    }
                    std::lock_guard<std::mutex> lock(g.mutex);
                    return g.generator.below(bound);
                },
                "bound"_a, "A uniform integer in [0, bound) from the underlying stream.");

        m.def(
            "sample_without_replacement",
            [](std::size_t n, std::size_t k, py_rng& rng) {
                std::vector<std::size_t> drawn = without_gil([&] {
                    std::lock_guard<std::mutex> lock(rng.mutex);
                    return ap::sample_without_replacement(n, k, rng.generator);
                });
                std::vector<std::int64_t> out(drawn.begin(), drawn.end());
                return vector_to_numpy(std::move(out));
            },
            "n"_a, "k"_a, "rng"_a,
            "k of the indices 0..n-1 uniformly without replacement, by a partial Fisher-Yates shuffle\n"
            "(docs/method.md §6.2), in draw order; k >= n gives 0..n-1 in order without drawing.\n"
            "Returns int64 [min(k, n)].");
    }

    void bind_sampler(nb::module_& m)
    {
        nb::class_<ap::key_pairs>(
            m, "KeyPairs",
            "Sampled key pairs (docs/method.md §5): pair i is (example[i], first[i], second[i]); first\n"
            "and second are positions within the example (sample_key_pairs) or rows of the caller's key\n"
            "table (sample_bucket_key_pairs, cell_key_pairs). int64 arrays [N], read-only views.")
            .def(
                "__init__",
                [](ap::key_pairs* self, const array_like& example, const array_like& first,
                   const array_like& second) {
                    constexpr const char* fn = "KeyPairs";
                    const array_arg e = int64_array(example.object, fn, "example");
                    const array_arg a = int64_array(first.object, fn, "first");
                    const array_arg b = int64_array(second.object, fn, "second");
                    if (e.size() != a.size() || b.size() != a.size())
                    {
                        throw_invalid(fn, "example, first and second must have one entry per pair, got "
                                              + std::to_string(e.size()) + ", " + std::to_string(a.size()) + " and "
                                              + std::to_string(b.size()));
                    }
                    auto copy = [&](const array_arg& src, const char* name) {
                        xt::xtensor<std::size_t, 1> out = xt::xtensor<std::size_t, 1>::from_shape({src.size()});
                        const auto* values = static_cast<const std::int64_t*>(src.data);
                        for (std::size_t i = 0; i < src.size(); ++i)
                        {
                            if (values[i] < 0)
                            {
                                throw_invalid(fn, std::string(name) + "[" + std::to_string(i) + "] = "
                                                      + std::to_string(values[i]) + " is negative");
                            }
                            out(i) = static_cast<std::size_t>(values[i]);
                        }
                        return out;
                    };
                    new (self) ap::key_pairs{copy(e, "example"), copy(a, "first"), copy(b, "second")};
                },
                "example"_a, "first"_a, "second"_a, "Pairs from three integer arrays of equal length (copied).")
            .def_prop_ro(
                "example",
                [](nb::handle self) { return index_field_view(nb::cast<ap::key_pairs&>(self).example, self); },
                "The example of each pair, int64 [N].")
            .def_prop_ro(
                "first", [](nb::handle self) { return index_field_view(nb::cast<ap::key_pairs&>(self).first, self); },
                "k1 of each pair, int64 [N].")
            .def_prop_ro(
                "second", [](nb::handle self) { return index_field_view(nb::cast<ap::key_pairs&>(self).second, self); },
                "k2 of each pair, int64 [N].")
            .def("__len__", &ap::key_pairs::size, "N, the number of pairs.")
            .def("__repr__", [](const ap::key_pairs& p) { return "KeyPairs(" + std::to_string(p.size()) + " pairs)"; });

        m.def("pair_window", &ap::pair_window, "length"_a, "max_rel_dist"_a,
              "The sampler's window half-width Delta = max(1, floor(max_rel_dist * length)) (docs/method.md §5.1),\n"
              "in keys.");
        m.def(
            "sample_key_pairs",
            [](const array_like& lengths, std::size_t num_pairs, double max_rel_dist, py_rng& rng) {
                const array_arg l = int64_array(lengths.object, "sample_key_pairs", "lengths");
                return without_gil([&] {
                    std::lock_guard<std::mutex> lock(rng.mutex);
                    return ap::sample_key_pairs(view<std::int64_t, 1>(l), num_pairs, max_rel_dist, rng.generator);
                });
            },
            "lengths"_a, "num_pairs"_a, "max_rel_dist"_a, "rng"_a,
            doc("The key-pair sampler (docs/method.md §5.1) over examples of the given lengths (int, [B]):\n"
                "num_pairs pairs (example b with probability L_b / T, a uniform anchor, a neighbour within\n"
                "Delta = max(1, floor(max_rel_dist L_b)), a fair coin for the order), drawn from rng in the\n"
                "order of §5.1. first/second are positions within the example.\n"
                "Raises DomainError when no example has 2 keys, InvalidArgumentError for a negative length\n"
                "or max_rel_dist.")
                .c_str());
        m.def(
            "sample_grouped_key_pairs",
            [](const ap::example_groups& groups, std::size_t num_pairs, double max_rel_dist, py_rng& rng) {
                return without_gil([&] {
                    std::lock_guard<std::mutex> lock(rng.mutex);
                    return ap::sample_grouped_key_pairs(groups, num_pairs, max_rel_dist, rng.generator);
                });
            },
            "groups"_a, "num_pairs"_a, "max_rel_dist"_a, "rng"_a,
            "The sampler (docs/method.md §5) over grouped examples (ExampleGroups, e.g. KeyBucket.examples):\n"
            "first/second are the groups' rows, example the example's index in groups. Raises DomainError when\n"
            "no example has 2 keys.");
        m.def(
            "sample_bucket_key_pairs",
            [](const array_like& positions, const array_like& example_ids, std::size_t num_pairs, double max_rel_dist,
               py_rng& rng) {
                constexpr const char* fn = "sample_bucket_key_pairs";
                const array_arg p = int64_array(positions.object, fn, "positions");
                const array_arg e = int64_array(example_ids.object, fn, "example_ids");
                return without_gil([&] {
                    std::lock_guard<std::mutex> lock(rng.mutex);
                    return ap::sample_bucket_key_pairs(view<std::int64_t, 1>(p), view<std::int64_t, 1>(e), num_pairs,
                                                       max_rel_dist, rng.generator);
                });
            },
            "positions"_a, "example_ids"_a, "num_pairs"_a, "max_rel_dist"_a, "rng"_a,
            doc("The per-bucket form of the sampler (docs/method.md §2.12, §5.2): the keys of one bucket, given\n"
                "by position and example id (int, [n] each), grouped into examples (increasing id, each by\n"
                "position, ties in row order); returns pairs of row indices into these arrays.")
                .c_str());
    }

    void bind_plasticity(nb::module_& m)
    {
        nb::class_<ap::pair_moments>(
            m, "PairMoments",
            "Per-pair projected moments m = w . mu and v = w Sigma w^T (float64 [N] each; docs/method.md\n"
            "§4.4). After the rescaling of §4.6 (extreme magnitudes) they are a scaled pair with the\n"
            "right ratio m / sqrt(v), not the moments themselves.")
            .def(
                "__init__",
                [](ap::pair_moments* self, const array_like& mean, const array_like& variance) {
                    const array_arg m_arg = float_array(mean.object, "PairMoments", "mean", 1);
                    const array_arg v_arg = float_array(variance.object, "PairMoments", "variance", 1);
                    auto copy = [](const array_arg& a) {
                        return visit_float<1>(
                            a, [](const auto& x) { return xt::xtensor<double, 1>(xt::cast<double>(x)); });
                    };
                    new (self) ap::pair_moments{copy(m_arg), copy(v_arg)};
                },
                "mean"_a, "variance"_a, "Moments from two float arrays [N] (copied as float64).")
            .def_prop_ro(
                "mean", [](nb::handle self) { return field_view(nb::cast<ap::pair_moments&>(self).mean, self); },
                "m per pair, float64 [N] (units of w times units of the query mean).")
            .def_prop_ro(
                "variance",
                [](nb::handle self) { return field_view(nb::cast<ap::pair_moments&>(self).variance, self); },
                "v per pair, float64 [N] (squared units of m).")
            .def("__len__", [](const ap::pair_moments& p) { return p.mean.size(); }, "N, the number of pairs.");

        m.def(
            "pair_plasticity",
            [](const array_like& differences, const array_like& mean, const array_like& covariance, nb::handle dtype,
               nb::handle result_dtype) {
                const precision r = precision_arg(result_dtype, "pair_plasticity", "result_dtype");
                return to_python(with_full_kernel(
                    "pair_plasticity", differences, mean, covariance, dtype,
                    [r](auto tag, const auto& W, const auto& M, const auto& S) -> real_vector {
                        using T = std::remove_pointer_t<decltype(tag)>;
                        if (r == precision::float32 || (r == precision::input && std::is_same<T, float>::value))
                        {
                            return ap::pair_plasticity<T, float>(W, M, S);
                        }
                        return ap::pair_plasticity<T, double>(W, M, S);
                    }));
            },
            "differences"_a, "mean"_a, "covariance"_a, "dtype"_a = nb::none(), "result_dtype"_a = nb::none(),
            nb::sig("def pair_plasticity(differences: numpy.typing.ArrayLike, mean: numpy.typing.ArrayLike, "
                    "covariance: numpy.typing.ArrayLike, dtype: object = None, result_dtype: object = None) -> "
                    "numpy.typing.NDArray[numpy.floating]"),
            doc("Pair plasticity PP = 4 p (1 - p) of each key pair (docs/method.md §4.1-4.2, batched form §4.4).\n"
                "\n"
                "For the key differences w = k1 - k2 (the rows of `differences`, N x d, in the units of the key\n"
                "vectors) and a Gaussian query model q ~ N(mean, covariance) (mean: [d], in query units;\n"
                "covariance: d x d, in squared query units), the event 'the query scores k1 above k2' has\n"
                "probability p = Phi(m / sqrt(v)) with m = w . mean and v = w covariance w^T (p = 1, 0, 1/2\n"
                "when v <= 0 and m >, <, = 0). PP is dimensionless, in [0, 1]: 1 when the choice between the\n"
                "two keys is a coin flip over queries (content-driven), 0 when one key always wins. v comes\n"
                "from GEMMs over blocks of 256 rows: the N x N matrix is never formed. Exact at any\n"
                "magnitude (power-of-two rescaling, §4.6).\n"
                "\n"
                "dtype: the working type of the GEMM ('float32' or 'float64'; None: the dtype of\n"
                "`differences`); sums accumulate in float64. result_dtype: the dtype of the result (None:\n"
                "the working type). Returns an array [N].\n"
                "Raises InvalidArgumentError for shapes (mean not [d], covariance not d x d), DomainError for\n"
                "a non-finite value or a negative variance on the covariance's diagonal.")
                .c_str());

        m.def(
            "pair_moments_full",
            [](const array_like& differences, const array_like& mean, const array_like& covariance, nb::handle dtype) {
                return with_full_kernel("pair_moments_full", differences, mean, covariance, dtype,
                                        [](auto tag, const auto& W, const auto& M, const auto& S) {
                                            using T = std::remove_pointer_t<decltype(tag)>;
                                            return ap::pair_moments_full<T>(W, M, S);
                                        });
            },
            "differences"_a, "mean"_a, "covariance"_a, "dtype"_a = nb::none(),
            doc("The projected moments m = W mean and v = diag(W covariance W^T) of docs/method.md §4.4 for key\n"
                "differences W (N x d) and a full Gaussian (mean [d], covariance d x d). A covariance whose\n"
                "first component is uncorrelated with the others takes the structured path (§4.5). dtype as\n"
                "pair_plasticity. Returns PairMoments.")
                .c_str());

        m.def(
            "structured_pair_moments",
            [](const array_like& differences, double position_mean, double position_variance,
               const array_like& semantic_mean, const array_like& semantic_cov, nb::handle dtype) {
                constexpr const char* fn = "structured_pair_moments";
                const array_arg w = float_array(differences.object, fn, "differences", 2);
                const array_arg mu = float_array(semantic_mean.object, fn, "semantic_mean", 1);
                const array_arg sigma = float_array(semantic_cov.object, fn, "semantic_cov", 2);
                const precision t = precision_arg(dtype, fn);
                return without_gil([&] {
                    return visit_kernel_args(w, mu, sigma, [&](const auto& W, const auto& M, const auto& S) {
                        return visit_precision(t, w.is_float32, [&](auto tag) {
                            using T = std::remove_pointer_t<decltype(tag)>;
                            return ap::structured_pair_moments<T>(W, position_mean, position_variance, M, S);
                        });
                    });
                });
            },
            "differences"_a, "position_mean"_a, "position_variance"_a, "semantic_mean"_a, "semantic_cov"_a,
            "dtype"_a = nb::none(),
            doc("The moments of the structured query model of docs/method.md §4.5 (used by the pipeline,\n"
                "§2.13): mean [position_mean, semantic_mean] and covariance blockdiag(position_variance,\n"
                "semantic_cov), applied to W (N x d) whose column 0 is the positional component:\n"
                "m = w0 position_mean + w[1:] . semantic_mean, v = w0^2 position_variance + w[1:] semantic_cov\n"
                "w[1:]^T. semantic_mean: [d - 1]; semantic_cov: (d - 1) x (d - 1). No d x d matrix is built.\n"
                "dtype as pair_plasticity. Returns PairMoments.")
                .c_str());

        m.def(
            "plasticity_from_moments",
            [](const ap::pair_moments& moments, nb::handle result_dtype) {
                const precision r = precision_arg(result_dtype, "plasticity_from_moments", "result_dtype");
                real_vector result = without_gil([&]() -> real_vector {
                    if (r == precision::float32)
                    {
                        return ap::plasticity_from_moments<float>(moments);
                    }
                    return ap::plasticity_from_moments<double>(moments);
                });
                return to_python(std::move(result));
            },
            "moments"_a, "result_dtype"_a = nb::none(),
            nb::sig("def plasticity_from_moments(moments: PairMoments, result_dtype: object = None) -> "
                    "numpy.typing.NDArray[numpy.floating]"),
            "PP = 4 p (1 - p) per pair with p = Phi(m / sqrt(v)) (the degenerate rule of docs/method.md §4.1\n"
            "for v <= 0), from PairMoments. result_dtype: 'float32' or 'float64' (None: float64).");

        m.def(
            "pair_plasticity_from_moments",
            [](nb::handle m_values, nb::handle v_values) -> nb::object {
                constexpr const char* fn = "pair_plasticity_from_moments";
                if (is_python_number(m_values) && is_python_number(v_values))
                {
                    return nb::float_(ap::pair_plasticity_from_moments(nb::cast<double>(m_values),
                                                                       nb::cast<double>(v_values)));
                }
                const array_arg a = float_array(m_values, fn, "m", any_ndim);
                const array_arg b = float_array(v_values, fn, "v", any_ndim);
                if (a.shape != b.shape)
                {
                    throw_invalid(fn, "m and v must have the same shape, got " + std::to_string(a.size()) + " and "
                                          + std::to_string(b.size()) + " values");
                }
                auto* out = new std::vector<double>(a.size());
                nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
                without_gil([&] {
                    auto value = [](const array_arg& x, std::size_t i) {
                        return x.is_float32 ? static_cast<double>(static_cast<const float*>(x.data)[i])
                                            : static_cast<const double*>(x.data)[i];
                    };
                    for (std::size_t i = 0; i < out->size(); ++i)
                    {
                        (*out)[i] = ap::pair_plasticity_from_moments(value(a, i), value(b, i));
                    }
                });
                return nb::cast(nb::ndarray<nb::numpy, double>(out->data(), a.shape.size(), a.shape.data(), owner));
            },
            "m"_a, "v"_a,
            nb::sig("def pair_plasticity_from_moments(m: float | numpy.typing.ArrayLike, v: float | "
                    "numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]"),
            "Plasticity of one pair from m = w . mu and v = w Sigma w^T (docs/method.md §4.1-4.2): 4 p (1 - p)\n"
            "with p = Phi(m / sqrt(v)) for v > 0, else 1 when m = 0 and 0 otherwise. Numbers give a float;\n"
            "arrays of one shape give an array of float64.");

        m.def(
            "mean_plasticity",
            [](const array_like& pair_values) {
                const array_arg a = float_array(pair_values.object, "mean_plasticity", "pair_values", any_ndim);
                return without_gil([&] {
                    array_arg flat = a;
                    flat.shape = {a.size()};
                    return visit_float<1>(flat, [](const auto& x) { return ap::mean_plasticity(x); });
                });
            },
            "pair_values"_a,
            doc("Mean of pair plasticities (float64 accumulation); NaN when empty (docs/method.md §4.3).").c_str());

        m.def(
            "head_plasticity",
            [](const array_like& differences, const array_like& mean, const array_like& covariance, nb::handle dtype) {
                return with_full_kernel("head_plasticity", differences, mean, covariance, dtype,
                                        [](auto tag, const auto& W, const auto& M, const auto& S) {
                                            using T = std::remove_pointer_t<decltype(tag)>;
                                            return ap::head_plasticity<T>(W, M, S);
                                        });
            },
            "differences"_a, "mean"_a, "covariance"_a, "dtype"_a = nb::none(),
            doc("AP = the mean of pair_plasticity over all the pairs (docs/method.md §4.3): dimensionless, in\n"
                "[0, 1], NaN for no pairs. Arguments and errors as pair_plasticity.")
                .c_str());

        m.def(
            "key_differences",
            [](const array_like& keys, const array_like& first, const array_like& second, nb::handle dtype) {
                constexpr const char* fn = "key_differences";
                const array_arg k = float_array(keys.object, fn, "keys", 2);
                const array_arg a = int64_array(first.object, fn, "first");
                const array_arg b = int64_array(second.object, fn, "second");
                const precision t = precision_arg(dtype, fn);
                using result_type = std::variant<xt::xtensor<float, 2>, xt::xtensor<double, 2>>;
                result_type result = without_gil([&] {
                    return visit_float<2>(k, [&](const auto& K) {
                        return visit_precision(t, k.is_float32, [&](auto tag) -> result_type {
                            using T = std::remove_pointer_t<decltype(tag)>;
                            return ap::key_differences<T>(K, view<std::int64_t, 1>(a), view<std::int64_t, 1>(b));
                        });
                    });
                });
                return std::visit([](auto&& x) { return nb::cast(to_numpy(std::move(x))); }, std::move(result));
            },
            "keys"_a, "first"_a, "second"_a, "dtype"_a = nb::none(),
            nb::sig("def key_differences(keys: numpy.typing.ArrayLike, first: numpy.typing.ArrayLike, "
                    "second: numpy.typing.ArrayLike, dtype: object = None) -> numpy.typing.NDArray[numpy.floating]"),
            doc("W = keys[first] - keys[second] for index pairs into the rows of keys (n x d): N x d, in the\n"
                "units of the keys (docs/method.md §2.12). dtype: of the result (None: the dtype of keys).\n"
                "Raises InvalidArgumentError for an index out of range, DomainError for a non-finite key or a\n"
                "difference that overflows the result type.")
                .c_str());
    }
}  // namespace

void bind_kernel(nb::module_& m)
{
    bind_normal(m);
    bind_random(m);
    bind_sampler(m);
    bind_plasticity(m);
}
}  // namespace ap_python
