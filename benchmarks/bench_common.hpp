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

#include <attention_plasticity/detail/random.hpp>
#include <attention_plasticity/pipeline.hpp>

// OpenBLAS (Debian's pthreads build): the benchmarks measure one thread, as ap_analyze runs
// one head per worker with BLAS threading off.
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace ap_bench
{
namespace ap = attention_plasticity;

inline void single_threaded_blas()
{
    openblas_set_num_threads(1);
}

/// The benchmark executables' common main: one BLAS thread, then Google Benchmark.
/// Returns false when the command line has arguments Google Benchmark does not know.
inline bool run_benchmarks(int& argc, char** argv)
{
    single_threaded_blas();
    if (openblas_get_corename != nullptr)
    {
        std::printf("OpenBLAS kernels: %s (OPENBLAS_CORETYPE=%s)\n", openblas_get_corename(),
                    std::getenv("OPENBLAS_CORETYPE") != nullptr ? std::getenv("OPENBLAS_CORETYPE") : "");
    }
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
