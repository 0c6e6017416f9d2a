#ifndef AP_BENCH_COMMON_HPP
#define AP_BENCH_COMMON_HPP

// Shared helpers of the benchmarks: synthetic heads of a given shape and BLAS threading.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xtensor.hpp>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/random.hpp>

namespace ap_bench
{
namespace ap = attention_plasticity;

/// The benchmark executables' common main: the front ends' kernel policy (docs/method.md §7.7:
/// the same kernels, OpenBLAS on one thread), reported, then Google Benchmark.
/// Returns false when the command line has arguments Google Benchmark does not know.
inline bool run_benchmarks(int& argc, char** argv)
{
    std::printf("%s\n", ap::blas_report(argv[0]).c_str());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
    {
        return false;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return true;
}

using normal_source = ap::normal_generator;

/// One kind of a synthetic head: n tokens in `examples` sequences of n / examples positions,
/// `buckets` uniform position buckets, vectors = drift (t / L) u + N(0, diag(scale_j^2)) with a
/// random unit direction u (so the Householder rotation is not trivial).
template <class T>
ap::head_tokens<T> synthetic_tokens(std::size_t n, std::size_t d, std::size_t examples, std::size_t buckets,
                                    double drift, std::uint64_t seed)
{
    normal_source normal(seed);
    std::vector<double> u(d), scale(d);
    double norm = 0.0;
    for (std::size_t j = 0; j < d; ++j)
    {
        u[j] = normal();
        norm += u[j] * u[j];
        scale[j] = 0.5 + 1.5 * static_cast<double>((j * 37) % d) / static_cast<double>(d);
    }
    for (auto& x : u)
    {
        x /= std::sqrt(norm);
    }
    const std::size_t length = n / examples;
    ap::head_tokens<T> tokens;
    tokens.vectors = xt::xtensor<T, 2>::from_shape({n, d});
    tokens.position = xt::xtensor<std::int64_t, 1>::from_shape({n});
    tokens.bucket = xt::xtensor<std::int64_t, 1>::from_shape({n});
    tokens.example_id = xt::xtensor<std::int64_t, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t t = i % length;
        tokens.position(i) = static_cast<std::int64_t>(t);
        tokens.bucket(i) = static_cast<std::int64_t>(t * buckets / length);
        tokens.example_id(i) = static_cast<std::int64_t>(i / length);
        const double s = drift * static_cast<double>(t) / static_cast<double>(length);
        for (std::size_t j = 0; j < d; ++j)
        {
            tokens.vectors(i, j) = static_cast<T>(s * u[j] + scale[j] * normal());
        }
    }
    return tokens;
}

/// The Qwen3-8B head of issue 4 (n queries and n keys, d, 12 buckets, 8 examples).
struct head_pair
{
    ap::head_tokens<float> queries;
    ap::head_tokens<float> keys;

    /// The head's own data: every byte of the queries' and keys' vectors and columns.
    std::size_t input_bytes() const
    {
        const auto kind = [](const ap::head_tokens<float>& t) {
            return t.vectors.size() * sizeof(float)
                   + (t.position.size() + t.bucket.size() + t.example_id.size()) * sizeof(std::int64_t);
        };
        return kind(queries) + kind(keys);
    }
};

inline head_pair synthetic_head(std::size_t n, std::size_t d = 128, std::size_t buckets = 12)
{
    return {synthetic_tokens<float>(n, d, 8, buckets, 6.0, 1), synthetic_tokens<float>(n, d, 8, buckets, 2.0, 2)};
}
}  // namespace ap_bench

#endif
