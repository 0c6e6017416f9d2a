// (a) The AP kernel: per-pair moments of the structured query model
// (structured_pair_moments: m = W mu, v = rowsum((W Sigma) o W), in blocks of GEMM) and the
// plasticity of every pair, for N pairs of dimension d, in float and double. Counters:
// GFLOP/s with the count 2 N d^2 + 4 N d, and vs_gemm = (time of one plain GEMM
// of the same shape, N x d times d x d, through the library's detail::gemm) / (time of the
// kernel), both measured in the same run, interleaved, best of several repetitions.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include <benchmark/benchmark.h>

#include <attention_plasticity/detail/blas.hpp>
#include <attention_plasticity/plasticity.hpp>

#include "bench_common.hpp"

namespace
{
namespace ap = attention_plasticity;

template <class T>
struct kernel_problem
{
    xt::xtensor<T, 2> w;          // N x d key differences
    xt::xtensor<double, 1> mu;    // d - 1
    xt::xtensor<double, 2> sigma; // (d - 1) x (d - 1), SPD
    xt::xtensor<T, 2> sigma_t;    // d x d for the plain GEMM
    xt::xtensor<T, 2> product;    // N x d
};

template <class T>
kernel_problem<T> make_problem(std::size_t n, std::size_t d)
{
    ap_bench::normal_source normal(42);
    kernel_problem<T> p;
    p.w = xt::xtensor<T, 2>::from_shape({n, d});
    for (auto& x : p.w)
    {
        x = static_cast<T>(normal());
    }
    const std::size_t k = d - 1;
    p.mu = xt::xtensor<double, 1>::from_shape({k});
    for (auto& x : p.mu)
    {
        x = 0.1 * normal();
    }
    // Sigma = A A^T / k + 0.5 I
    std::vector<double> a(k * k);
    for (auto& x : a)
    {
        x = normal();
    }
    p.sigma = xt::xtensor<double, 2>::from_shape({k, k});
    for (std::size_t i = 0; i < k; ++i)
    {
        for (std::size_t j = 0; j < k; ++j)
        {
            double s = 0.0;
            for (std::size_t l = 0; l < k; ++l)
            {
                s += a[i * k + l] * a[j * k + l];
            }
            p.sigma(i, j) = s / static_cast<double>(k) + (i == j ? 0.5 : 0.0);
        }
    }
    p.sigma_t = xt::xtensor<T, 2>::from_shape({d, d});
    for (std::size_t i = 0; i < d; ++i)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            p.sigma_t(i, j) = static_cast<T>(i == 0 || j == 0 ? (i == j ? 1.0 : 0.0) : p.sigma(i - 1, j - 1));
        }
    }
    p.product = xt::xtensor<T, 2>::from_shape({n, d});
    return p;
}

template <class T>
double run_kernel(const kernel_problem<T>& p)
{
    const ap::pair_moments moments = ap::structured_pair_moments<T>(p.w, 0.3, 0.7, p.mu, p.sigma);
    double sum = 0.0;
    const std::size_t n = moments.mean.size();
    for (std::size_t i = 0; i < n; ++i)
    {
        sum += ap::pair_plasticity_from_moments(moments.mean(i), moments.variance(i));
    }
    return sum;
}

template <class T>
void run_gemm(kernel_problem<T>& p)
{
    const std::size_t n = p.w.shape()[0], d = p.w.shape()[1];
    ap::detail::gemm<T>(false, false, n, d, d, T(1), p.w.data(), d, p.sigma_t.data(), d, T(0), p.product.data(), d);
    benchmark::DoNotOptimize(p.product.data());
}

template <class F>
double seconds_of(F&& f)
{
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class T>
void BM_kernel(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto d = static_cast<std::size_t>(state.range(1));
    kernel_problem<T> p = make_problem<T>(n, d);
    double best_kernel = 1e30;
    for (auto _ : state)
    {
        double sum = 0.0;
        best_kernel = std::min(best_kernel, seconds_of([&] { sum = run_kernel(p); }));
        benchmark::DoNotOptimize(sum);
    }
    // The roofline in the same run: interleave GEMM and kernel, best of each.
    const int reps = std::max(5, static_cast<int>(0.3 / std::max(best_kernel, 1e-7)));
    double best_gemm = 1e30;
    for (int r = 0; r < std::min(reps, 2000); ++r)
    {
        best_gemm = std::min(best_gemm, seconds_of([&] { run_gemm(p); }));
        best_kernel = std::min(best_kernel, seconds_of([&] { benchmark::DoNotOptimize(run_kernel(p)); }));
    }
    const double nd = static_cast<double>(n), dd = static_cast<double>(d);
    const double flops = 2.0 * nd * dd * dd + 4.0 * nd * dd;
    state.counters["GFLOPs"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
    state.counters["best_us"] = best_kernel * 1e6;
    state.counters["gemm_us"] = best_gemm * 1e6;
    state.counters["gemm_GFLOPs"] = 2.0 * nd * dd * dd / best_gemm * 1e-9;
    state.counters["vs_gemm"] = best_gemm / best_kernel;
}

void kernel_args(benchmark::internal::Benchmark* b)
{
    for (long n : {256L, 4096L, 65536L})
    {
        for (long d : {64L, 128L})
        {
            b->Args({n, d});
        }
    }
    b->ArgNames({"N", "d"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_kernel, float)->Apply(kernel_args);
BENCHMARK_TEMPLATE(BM_kernel, double)->Apply(kernel_args);

// The plain GEMM alone, for the table.
template <class T>
void BM_gemm(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto d = static_cast<std::size_t>(state.range(1));
    kernel_problem<T> p = make_problem<T>(n, d);
    for (auto _ : state)
    {
        run_gemm(p);
    }
    const double nd = static_cast<double>(n), dd = static_cast<double>(d);
    state.counters["GFLOPs"] = benchmark::Counter(2.0 * nd * dd * dd, benchmark::Counter::kIsIterationInvariantRate,
                                                  benchmark::Counter::kIs1000);
}
BENCHMARK_TEMPLATE(BM_gemm, float)->Apply(kernel_args);
BENCHMARK_TEMPLATE(BM_gemm, double)->Apply(kernel_args);
}  // namespace

int main(int argc, char** argv)
{
    if (!ap_bench::run_benchmarks(argc, argv))
    {
        return 1;
    }
    return 0;
}
