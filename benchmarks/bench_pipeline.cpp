// (b) The per-head pipeline at the Qwen3-8B shape of issue 4 (50,000 queries and keys,
// d = 128, 12 uniform buckets, 8 examples, 256 pairs per cell, normality_max_dims 64, one
// thread), with the wall time of each stage as a counter (ms per head; load excluded: the
// head is generated once, outside the timed loop).
// (c) Scaling: the same head at n in {10k, 50k, 200k} tokens (no subsampling) and with
// 64 / 256 / 1024 pairs per cell at n = 50k; after the run the fitted exponent of
// time ~ n^a (resp. time ~ const + pairs^a is not assumed: a plain log-log slope) is printed.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_common.hpp"

namespace
{
namespace ap = attention_plasticity;

const ap_bench::head_pair& head_of(std::size_t n)
{
    static std::map<std::size_t, std::unique_ptr<ap_bench::head_pair>> cache;
    auto& slot = cache[n];
    if (!slot)
    {
        slot = std::make_unique<ap_bench::head_pair>(ap_bench::synthetic_head(n));
    }
    return *slot;
}

// Mean seconds per head of every scaling run, for the fit printed at the end.
std::map<std::string, std::vector<std::pair<double, double>>>& scaling_points()
{
    static std::map<std::string, std::vector<std::pair<double, double>>> points;
    return points;
}

double run_pipeline(benchmark::State& state, std::size_t n, const ap::head_options& options)
{
    const auto& head = head_of(n);
    ap::head_id id{3, 5, 1};
    ap::stage_timings sum;
    std::size_t heads = 0;
    double checksum = 0.0;
    for (auto _ : state)
    {
        ap::stage_timings t;
        const ap::head_result result = ap::analyze_head(head.queries, head.keys, id, options, &t);
        benchmark::DoNotOptimize(result.metrics.ap_overall);
        checksum = result.metrics.ap_overall;
        sum.preparation += t.preparation;
        sum.regression += t.regression;
        sum.rotation += t.rotation;
        sum.normality += t.normality;
        sum.bucket_statistics += t.bucket_statistics;
        sum.sampling += t.sampling;
        sum.kernel += t.kernel;
        sum.extensions += t.extensions;
        sum.total += t.total;
        ++heads;
    }
    const double scale = 1e3 / static_cast<double>(heads);  // ms per head
    state.counters["prep_ms"] = sum.preparation * scale;
    state.counters["regression_ms"] = sum.regression * scale;
    state.counters["rotation_ms"] = sum.rotation * scale;
    state.counters["normality_ms"] = sum.normality * scale;
    state.counters["bucket_stats_ms"] = sum.bucket_statistics * scale;
    state.counters["sampling_ms"] = sum.sampling * scale;
    state.counters["kernel_ms"] = sum.kernel * scale;
    state.counters["extensions_ms"] = sum.extensions * scale;
    state.counters["total_ms"] = sum.total * scale;
    state.counters["ap_overall"] = checksum;
    return sum.total / static_cast<double>(heads);
}

void BM_pipeline_qwen3_8b(benchmark::State& state)
{
    ap::head_options options;  // SPEC defaults: 50000 tokens, 64 KS dims, 256 pairs
    run_pipeline(state, 50000, options);
}
BENCHMARK(BM_pipeline_qwen3_8b)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

// The extensions of docs/method.md §8 on the same head, A/B against the method alone (run
// them in one invocation: --benchmark_filter=qwen3_8b). Arg: 0 method only (distance map off),
// 1 the library's defaults with the distance map, 2 + intervals (ap_analyze's defaults), 3 +
// empirical AP on 1024 queries per bucket, 4 + empirical AP on all queries.
void BM_pipeline_qwen3_8b_extensions(benchmark::State& state)
{
    ap::head_options options;
    const auto variant = state.range(0);
    options.distance_map = variant >= 1;
    options.confidence_intervals = variant >= 2;
    options.empirical_ap = variant >= 3;
    options.empirical_max_queries = variant == 3 ? 1024 : 0;
    run_pipeline(state, 50000, options);
}
BENCHMARK(BM_pipeline_qwen3_8b_extensions)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

void BM_scaling_tokens(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    ap::head_options options;
    options.max_tokens_per_head = n;  // no subsampling: the whole n is analyzed
    const double seconds = run_pipeline(state, n, options);
    scaling_points()["tokens"].emplace_back(static_cast<double>(n), seconds);
}
BENCHMARK(BM_scaling_tokens)->Arg(10000)->Arg(50000)->Arg(200000)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

void BM_scaling_pairs(benchmark::State& state)
{
    const auto pairs = static_cast<std::size_t>(state.range(0));
    ap::head_options options;
    options.num_pairs_per_bucket = pairs;
    const double seconds = run_pipeline(state, 50000, options);
    state.counters["pairs_per_cell"] = static_cast<double>(pairs);
    scaling_points()["pairs"].emplace_back(static_cast<double>(pairs), seconds);
}
BENCHMARK(BM_scaling_pairs)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

// Least-squares slope of log(time) on log(x) over the points of one series (the last run of
// each x when a benchmark ran more than once).
double fitted_exponent(const std::vector<std::pair<double, double>>& raw)
{
    std::map<double, double> last;
    for (const auto& [x, y] : raw)
    {
        last[x] = y;
    }
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double n = static_cast<double>(last.size());
    for (const auto& [x, y] : last)
    {
        const double lx = std::log(x), ly = std::log(y);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}
}  // namespace

int main(int argc, char** argv)
{
    if (!ap_bench::run_benchmarks(argc, argv))
    {
        return 1;
    }
    for (const auto& [series, points] : scaling_points())
    {
        std::map<double, double> last;
        for (const auto& [x, y] : points)
        {
            last[x] = y;
        }
        if (last.size() >= 2)
        {
            std::printf("scaling %-6s: fitted exponent %.3f  (", series.c_str(), fitted_exponent(points));
            for (const auto& [x, y] : last)
            {
                std::printf(" %g: %.1f ms", x, y * 1e3);
            }
            std::printf(" )\n");
        }
    }
    return 0;
}
