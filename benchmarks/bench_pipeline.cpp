// The per-head pipeline (issue 11), one synthetic head per configuration, built once and
// outside the timed loop (the Qwen3-8B shape: 50,000 queries and keys, d = 128, 12 uniform
// buckets, 8 examples, 256 pairs per cell, 64 KS dimensions).
//
// BM_pipeline_qwen3_8b/threads:T  the head on T threads (head_options::threads), with the
//     wall time of each stage (stage_timings) and, measured in the same run and interleaved
//     with the pipeline, the floors each stage is compared with:
//       stream_ms  one streaming pass over the head's input bytes (every query and key
//                  vector and column read once);
//       syrk_ms    the BLAS calls of the bucket covariances alone (the same SYRKs, on data
//                  in cache);
//       gemm_ms    the BLAS calls of the kernel alone (the same GEMMs);
//       normality_floor_ms  the least work of the normality summaries (normality_floor:
//                  the noise columns formed in double once, one pass each for their power
//                  sums, one pass over each KS sample counting it into the KS bins);
//     and the peak of the memory analyze_head allocates, as a multiple of the head's input.
// BM_pipeline_qwen3_8b_extensions/v: the same head, one thread, with the extensions of
//     docs/method.md §8 switched on one after another (see there).
// BM_pipeline_qwen3_8b_companion/v: the same head, one thread, the companion measures of §8.5:
//     none (0), the planar rotation model (1), and the PCA roles too (2).
// BM_pipeline_qwen3_8b_sequences/threads:T: ap_analyze's defaults on the same shape in 50
//     sequences (the sequence-level errors of §8.3 need 10 or more), with the stage times.
// BM_pipeline_qwen3_8b_errors/intervals:0|1: that head, one thread, without and with the
//     intervals of §8.3 (what the errors cost over the method: issue 37 item 2).
// BM_scaling_tokens/n, BM_scaling_dim/d, BM_scaling_buckets/b, BM_scaling_pairs/p: one
//     thread, no subsampling; total time and peak memory.
// After the run: the stage table (median of the rounds) and the fitted exponents of time ~ x^a.
// Every figure is a median over interleaved rounds; --benchmark_out=FILE.json keeps all of
// them for benchmarks/plot_scaling.py.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>

#include <attention_plasticity/detail/blas.hpp>

#include "bench_common.hpp"

// ---------------------------------------------------------------------------------------
// Heap accounting: every operator new of the process, so the peak of what analyze_head
// allocates beyond its input can be read (BLAS's own buffers are not included).
// ---------------------------------------------------------------------------------------
namespace
{
std::atomic<std::size_t> g_current{0};
std::atomic<std::size_t> g_peak{0};
constexpr std::size_t header = 16;  // keeps the 16-byte alignment of operator new

void* counted_alloc(std::size_t size)
{
    void* block = std::malloc(size + header);
    if (block == nullptr)
    {
        throw std::bad_alloc();
    }
    *static_cast<std::size_t*>(block) = size;
    const std::size_t now = g_current.fetch_add(size) + size;
    std::size_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now))
    {
    }
    return static_cast<char*>(block) + header;
}

void counted_free(void* p) noexcept
{
    if (p != nullptr)
    {
        void* block = static_cast<char*>(p) - header;
        g_current.fetch_sub(*static_cast<std::size_t*>(block));
        std::free(block);
    }
}
}  // namespace

void* operator new(std::size_t size) { return counted_alloc(size); }
void* operator new[](std::size_t size) { return counted_alloc(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept
{
    try
    {
        return counted_alloc(size);
    }
    catch (...)
    {
        return nullptr;
    }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace
{
namespace ap = attention_plasticity;

/// The synthetic head of bench_common.hpp (8 sequences), or the same in `examples` sequences.
const ap_bench::head_pair& head_of(std::size_t n, std::size_t d, std::size_t buckets, std::size_t examples = 8)
{
    using key = std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>;
    static std::map<key, std::unique_ptr<ap_bench::head_pair>> cache;
    auto& slot = cache[key{n, d, buckets, examples}];
    if (!slot)
    {
        cache.clear();  // one head at a time: the large ones need the memory
        auto& fresh = cache[key{n, d, buckets, examples}];
        fresh = std::make_unique<ap_bench::head_pair>(
            examples == 8 ? ap_bench::synthetic_head(n, d, buckets)
                          : ap_bench::head_pair{ap_bench::synthetic_tokens<float>(n, d, examples, buckets, 6.0, 1),
                                                ap_bench::synthetic_tokens<float>(n, d, examples, buckets, 2.0, 2)});
        return *fresh;
    }
    return *slot;
}

double seconds_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v)
{
    if (v.empty())
    {
        return std::nan("");
    }
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// ----- one run of the pipeline, and its memory ------------------------------------------
struct pipeline_run
{
    ap::stage_timings stages;
    double peak_extra_bytes = 0.0;  // allocated by analyze_head beyond what existed before
    ap::head_result result;
};

pipeline_run run_head(const ap_bench::head_pair& head, const ap::head_options& options)
{
    pipeline_run run;
    const std::size_t before = g_current.load();
    g_peak = before;
    run.result = ap::analyze_head(head.queries, head.keys, ap::head_id{3, 5, 1}, options, &run.stages);
    run.peak_extra_bytes = static_cast<double>(g_peak.load() - before);
    benchmark::DoNotOptimize(run.result.metrics.ap_overall);
    return run;
}

// ----- the floors --------------------------------------------------------------------------
/// One streaming pass over the head's input: every vector and column value read once.
double stream_floor(const ap_bench::head_pair& head)
{
    const auto start = std::chrono::steady_clock::now();
    double total = 0.0;
    for (const auto* t : {&head.queries, &head.keys})
    {
        const float* v = t->vectors.data();
        const std::size_t n = t->vectors.size();
        float lanes[16] = {};
        std::size_t i = 0;
        for (; i + 16 <= n; i += 16)
        {
            for (std::size_t k = 0; k < 16; ++k)
            {
                lanes[k] += v[i + k];
            }
        }
        for (float x : lanes)
        {
            total += x;
        }
        std::int64_t columns = 0;
        for (const auto* c : {&t->position, &t->bucket, &t->example_id})
        {
            for (std::int64_t x : *c)
            {
                columns += x;
            }
        }
        total += static_cast<double>(columns);
    }
    benchmark::DoNotOptimize(total);
    return seconds_since(start);
}

/// The BLAS calls of the bucket covariances and of the kernel, alone: the same shapes and
/// blocking as the pipeline (SYRK over blocks of 256 centred rows into an m x m sum, per
/// bucket model; GEMM of 256-row blocks of W with Sigma_j, per bucket), on data in cache.
struct blas_floor
{
    std::vector<std::size_t> bucket_rows;  // queries of each bucket model
    std::vector<std::size_t> bucket_pairs; // pairs of each bucket model
    std::size_t m = 0;
    std::vector<double> block, sigma, product, sum;

    blas_floor(const ap_bench::head_pair& head, const ap::head_result& result)
    {
        m = head.queries.vectors.shape()[1] - 1;
        for (const auto& row : result.profile)
        {
            bucket_rows.push_back(row.n_queries);
            bucket_pairs.push_back(row.n_pairs);
        }
        ap_bench::normal_source normal(7);
        block.resize(ap::detail::gaussian_block_rows * m);
        for (auto& x : block)
        {
            x = normal();
        }
        sigma.assign(m * m, 0.0);
        for (std::size_t i = 0; i < m; ++i)
        {
            sigma[i * m + i] = 1.0;
        }
        product.resize(ap::detail::kernel_block_rows * m);
        sum.resize(m * m);
    }

    double syrk() 
    {
        const auto start = std::chrono::steady_clock::now();
        const std::size_t b = ap::detail::gaussian_block_rows;
        for (std::size_t rows : bucket_rows)
        {
            for (std::size_t r = 0; r < rows; r += b)
            {
                ap::detail::syrk_ata<double>(m, std::min(b, rows - r), 1.0, block.data(), m, r == 0 ? 0.0 : 1.0,
                                             sum.data(), m);
            }
        }
        benchmark::DoNotOptimize(sum.data());
        return seconds_since(start);
    }

    double gemm()
    {
        const auto start = std::chrono::steady_clock::now();
        const std::size_t b = ap::detail::kernel_block_rows;
        for (std::size_t pairs : bucket_pairs)
        {
            for (std::size_t r = 0; r < pairs; r += b)
            {
                ap::detail::gemm<double>(false, false, std::min(b, pairs - r), m, m, 1.0, block.data(), m,
                                         sigma.data(), m, 0.0, product.data(), m);
            }
        }
        benchmark::DoNotOptimize(product.data());
        return seconds_since(start);
    }
};

/// The least work of the normality summaries (docs/method.md §2.7-2.8, the floor of the
/// normality stage): the m = d - 1 noise columns of the queries formed in double (one pass over
/// the rows in tiles of 8, each column receiving whole cache lines: the transposition any
/// column statistic needs), one pass over each column for its four power sums (eight lanes, no
/// centring), and one pass over each of the `samples` KS samples (the K tested columns and the
/// residual) counting its values into the KS statistic's n / 4 bins. No rotation, no second
/// pass for the mean, no standardization, no candidates: each value written once and read once
/// per statistic.
double normality_floor(const ap_bench::head_pair& head, std::size_t samples, std::vector<double>& columns,
                       std::vector<std::uint32_t>& counts)
{
    const float* x = head.queries.vectors.data();
    const std::size_t n = head.queries.vectors.shape()[0];
    const std::size_t d = head.queries.vectors.shape()[1];
    const std::size_t m = d - 1;
    const std::size_t ld = (n + 7) / 8 * 8;
    const std::size_t bins = std::min<std::size_t>(std::max<std::size_t>(n / 4, std::min<std::size_t>(n, 4096)),
                                                   std::size_t(1) << 17);
    columns.resize(m * ld);
    counts.resize(bins + 2);
    const auto start = std::chrono::steady_clock::now();
    constexpr std::size_t tile = 8;
    for (std::size_t t0 = 0; t0 + tile <= n; t0 += tile)
    {
        for (std::size_t j = 0; j < m; ++j)
        {
            double* dst = columns.data() + j * ld + t0;
            for (std::size_t r = 0; r < tile; ++r)
            {
                dst[r] = static_cast<double>(x[(t0 + r) * d + 1 + j]);
            }
        }
    }
    double total = 0.0;
    for (std::size_t j = 0; j < m; ++j)
    {
        const double* col = columns.data() + j * ld;
        double s1[4] = {}, s2[4] = {}, s3[4] = {}, s4[4] = {};
        for (std::size_t i = 0; i + 4 <= n; i += 4)
        {
            for (std::size_t k = 0; k < 4; ++k)
            {
                const double v = col[i + k];
                const double v2 = v * v;
                s1[k] += v;
                s2[k] += v2;
                s3[k] += v2 * v;
                s4[k] += v2 * v2;
            }
        }
        for (std::size_t k = 0; k < 4; ++k)
        {
            total += s1[k] + s2[k] + s3[k] + s4[k];
        }
    }
    const double per_unit = static_cast<double>(bins) / 17.0;
    const double top = static_cast<double>(bins) + 1.0;
    for (std::size_t s = 0; s < samples; ++s)
    {
        const double* col = columns.data() + (s % m) * ld;
        std::fill(counts.begin(), counts.end(), 0u);
        for (std::size_t i = 0; i < n; ++i)
        {
            const double g = (col[i] + 8.5) * per_unit + 1.0;
            const double low = g > 0.0 ? g : 0.0;
            ++counts[static_cast<std::size_t>(static_cast<std::int32_t>(low < top ? low : top))];
        }
        total += static_cast<double>(counts[bins / 2]);
    }
    benchmark::DoNotOptimize(total);
    return seconds_since(start);
}

// ----- the stage table ----------------------------------------------------------------------
struct stage_row
{
    std::vector<double> preparation, regression, rotation, normality, bucket_statistics, sampling, kernel, extensions,
        total;
    std::vector<double> stream, syrk, gemm, normality_floor;
    double peak_ratio = 0.0;
    double peak_extra_mb = 0.0;
    double input_mb = 0.0;

    /// One run's stage times and peak memory.
    void add(const pipeline_run& run)
    {
        preparation.push_back(run.stages.preparation);
        regression.push_back(run.stages.regression);
        rotation.push_back(run.stages.rotation);
        normality.push_back(run.stages.normality);
        bucket_statistics.push_back(run.stages.bucket_statistics);
        sampling.push_back(run.stages.sampling);
        kernel.push_back(run.stages.kernel);
        extensions.push_back(run.stages.extensions);
        total.push_back(run.stages.total);
        peak_extra_mb = std::max(peak_extra_mb, run.peak_extra_bytes / 1e6);
    }

    /// The stages' medians (ms) as the benchmark's counters.
    void set_stage_counters(benchmark::State& state, std::size_t threads) const
    {
        const auto ms = [](const std::vector<double>& v) { return median(v) * 1e3; };
        state.counters["threads"] = static_cast<double>(threads);
        state.counters["total_ms"] = ms(total);
        state.counters["prep_ms"] = ms(preparation);
        state.counters["regression_ms"] = ms(regression);
        state.counters["rotation_ms"] = ms(rotation);
        state.counters["normality_ms"] = ms(normality);
        state.counters["bucket_stats_ms"] = ms(bucket_statistics);
        state.counters["sampling_ms"] = ms(sampling);
        state.counters["kernel_ms"] = ms(kernel);
        state.counters["extensions_ms"] = ms(extensions);
        state.counters["peak_extra_MB"] = peak_extra_mb;
    }
};

std::map<std::size_t, stage_row>& stage_tables()
{
    static std::map<std::size_t, stage_row> tables;  // by thread count
    return tables;
}

void BM_pipeline_qwen3_8b(benchmark::State& state)
{
    const auto threads = static_cast<std::size_t>(state.range(0));
    const auto& head = head_of(50000, 128, 12);
    ap::head_options options;  // docs/method.md §2 defaults: 50000 tokens, 64 KS dims, 256 pairs
    options.threads = threads;
    stage_row row;
    std::unique_ptr<blas_floor> blas;
    std::vector<double> floor_columns;
    std::vector<std::uint32_t> floor_counts;
    double checksum = 0.0;
    for (auto _ : state)
    {
        const pipeline_run run = run_head(head, options);
        checksum = run.result.metrics.ap_overall;
        row.add(run);
        // The floors, interleaved with the pipeline (not part of the timed iteration).
        state.PauseTiming();
        if (!blas)
        {
            blas = std::make_unique<blas_floor>(head, run.result);
        }
        row.stream.push_back(stream_floor(head));
        row.syrk.push_back(blas->syrk());
        row.gemm.push_back(blas->gemm());
        const std::size_t d = head.queries.vectors.shape()[1];
        row.normality_floor.push_back(
            normality_floor(head, std::min(options.normality_max_dims, d - 1) + 1, floor_columns, floor_counts));
        state.ResumeTiming();
    }
    row.input_mb = static_cast<double>(head.input_bytes()) / 1e6;
    row.peak_ratio = (row.input_mb + row.peak_extra_mb) / row.input_mb;
    const auto ms = [](const std::vector<double>& v) { return median(v) * 1e3; };
    row.set_stage_counters(state, threads);
    state.counters["stream_floor_ms"] = ms(row.stream);
    state.counters["syrk_floor_ms"] = ms(row.syrk);
    state.counters["gemm_floor_ms"] = ms(row.gemm);
    state.counters["normality_floor_ms"] = ms(row.normality_floor);
    state.counters["input_MB"] = row.input_mb;
    state.counters["peak_over_input"] = row.peak_ratio;
    state.counters["ap_overall"] = checksum;
    stage_tables()[threads] = row;
}
BENCHMARK(BM_pipeline_qwen3_8b)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(3.0);

// Runs `head` with `options` once per iteration and reports the medians of the whole head and
// of its extensions (total_ms, extensions_ms) and the largest extra memory (peak_extra_MB).
void time_head_and_extensions(benchmark::State& state, const ap_bench::head_pair& head, const ap::head_options& options)
{
    std::vector<double> total, extensions;
    double peak_extra_mb = 0.0;
    for (auto _ : state)
    {
        const pipeline_run run = run_head(head, options);
        total.push_back(run.stages.total);
        extensions.push_back(run.stages.extensions);
        peak_extra_mb = std::max(peak_extra_mb, run.peak_extra_bytes / 1e6);
    }
    state.counters["total_ms"] = median(total) * 1e3;
    state.counters["extensions_ms"] = median(extensions) * 1e3;
    state.counters["peak_extra_MB"] = peak_extra_mb;
}

// The extensions of docs/method.md §8 on the same head, one thread, A/B against the method
// alone (run them in one invocation: --benchmark_filter=qwen3_8b_extensions). Arg: 0 method
// only (distance map off), 1 the library's defaults with the distance map, 2 + intervals
// (ap_analyze's defaults), 3 + empirical AP on 1024 queries per bucket, 4 + empirical AP on
// all queries.
void BM_pipeline_qwen3_8b_extensions(benchmark::State& state)
{
    ap::head_options options;
    const auto variant = state.range(0);
    options.distance_map = variant >= 1;
    options.confidence_intervals = variant >= 2;
    options.empirical_ap = variant >= 3;
    options.empirical_max_queries = variant == 3 ? 1024 : 0;
    time_head_and_extensions(state, head_of(50000, 128, 12), options);
}
BENCHMARK(BM_pipeline_qwen3_8b_extensions)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

// ap_analyze's defaults (run/analyze_config.hpp: the library's with the intervals of §8.3 on;
// since issue 23 with the sequence as their sampling unit) on the Qwen-shaped head in 50
// sequences of 1,000 positions instead of 8: below 10 sequences the sequence-level errors are
// NaN and their work is skipped, so the 8-sequence head does not measure it. Arg: threads.
// Written against head_options' fields common to the library before and after issue 23, for
// A/B runs of the same source on both (--benchmark_filter=qwen3_8b_sequences).
template <class M>
auto sequences_of(const M& m, int) -> decltype(static_cast<double>(m.n_sequences))
{
    return static_cast<double>(m.n_sequences);
}
template <class M>
double sequences_of(const M&, long)
{
    return -1.0;  // a library without the sequence-level errors
}

void BM_pipeline_qwen3_8b_sequences(benchmark::State& state)
{
    const auto threads = static_cast<std::size_t>(state.range(0));
    ap::head_options options;  // ap_analyze's defaults: the library's ...
    options.confidence_intervals = true;  // ... with the intervals on
    options.threads = threads;
    const auto& head = head_of(50000, 128, 12, 50);
    stage_row row;
    ap::head_metrics metrics;
    for (auto _ : state)
    {
        const pipeline_run run = run_head(head, options);
        row.add(run);
        metrics = run.result.metrics;
    }
    row.set_stage_counters(state, threads);
    state.counters["ap_overall"] = metrics.ap_overall;
    state.counters["ap_overall_se"] = metrics.ap_overall_se;
    state.counters["n_sequences"] = sequences_of(metrics, 0);
}
BENCHMARK(BM_pipeline_qwen3_8b_sequences)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MinTime(2.0);

// What the errors of §8.3 cost (issue 37 item 2): the 50-sequence head of
// BM_pipeline_qwen3_8b_sequences, one thread, with ap_analyze's defaults but the intervals off
// (0: the method with the distance map and the companion measures) and on (1: the defaults);
// run both in one invocation (--benchmark_filter=qwen3_8b_errors) and take the ratio of 1 to 0.
void BM_pipeline_qwen3_8b_errors(benchmark::State& state)
{
    ap::head_options options;
    options.confidence_intervals = state.range(0) != 0;
    time_head_and_extensions(state, head_of(50000, 128, 12, 50), options);
}
BENCHMARK(BM_pipeline_qwen3_8b_errors)->ArgName("intervals")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()->UseRealTime()->MinTime(2.0);

// The companion measures of docs/method.md §8.5 on the same head, one thread, A/B in one
// invocation (--benchmark_filter=qwen3_8b_companion): 0 neither, 1 the planar rotation model
// (the library's default), 2 with the PCA roles too.
void BM_pipeline_qwen3_8b_companion(benchmark::State& state)
{
    ap::head_options options;
    options.planar_rotation = state.range(0) >= 1;
    options.pca_roles = state.range(0) >= 2;
    time_head_and_extensions(state, head_of(50000, 128, 12), options);
}
BENCHMARK(BM_pipeline_qwen3_8b_companion)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

// ----- scaling --------------------------------------------------------------------------------
struct scaling_point
{
    double x;
    double seconds;
    double peak_ratio;
};

std::map<std::string, std::vector<scaling_point>>& scaling_points()
{
    static std::map<std::string, std::vector<scaling_point>> points;
    return points;
}

void run_scaling(benchmark::State& state, const char* series, double x, std::size_t n, std::size_t d,
                 std::size_t buckets, const ap::head_options& options)
{
    const auto& head = head_of(n, d, buckets);
    std::vector<double> seconds, normality, bucket_statistics, kernel;
    double peak_extra = 0.0;
    for (auto _ : state)
    {
        const pipeline_run run = run_head(head, options);
        seconds.push_back(run.stages.total);
        normality.push_back(run.stages.normality);
        bucket_statistics.push_back(run.stages.bucket_statistics);
        kernel.push_back(run.stages.kernel);
        peak_extra = std::max(peak_extra, run.peak_extra_bytes);
    }
    const double input = static_cast<double>(head.input_bytes());
    const double ratio = (input + peak_extra) / input;
    state.counters["normality_ms"] = median(normality) * 1e3;
    state.counters["bucket_stats_ms"] = median(bucket_statistics) * 1e3;
    state.counters["kernel_ms"] = median(kernel) * 1e3;
    state.counters["total_ms"] = median(seconds) * 1e3;
    state.counters["peak_extra_MB"] = peak_extra / 1e6;
    state.counters["input_MB"] = input / 1e6;
    state.counters["peak_over_input"] = ratio;
    scaling_points()[series].push_back({x, median(seconds), ratio});
}

void BM_scaling_tokens(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    ap::head_options options;
    options.max_tokens_per_head = n;  // no subsampling: the whole n is analyzed
    run_scaling(state, "tokens", static_cast<double>(n), n, 128, 12, options);
}
BENCHMARK(BM_scaling_tokens)->ArgName("tokens")->Arg(10000)->Arg(20000)->Arg(50000)->Arg(100000)->Arg(200000)
    ->Arg(500000)->Arg(1000000)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_scaling_dim(benchmark::State& state)
{
    const auto d = static_cast<std::size_t>(state.range(0));
    run_scaling(state, "dim", static_cast<double>(d), 50000, d, 12, ap::head_options{});
}
BENCHMARK(BM_scaling_dim)->ArgName("d")->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->MinTime(2.0);

void BM_scaling_buckets(benchmark::State& state)
{
    const auto b = static_cast<std::size_t>(state.range(0));
    run_scaling(state, "buckets", static_cast<double>(b), 50000, 128, b, ap::head_options{});
}
BENCHMARK(BM_scaling_buckets)->ArgName("buckets")->Arg(4)->Arg(12)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MinTime(2.0);

void BM_scaling_pairs(benchmark::State& state)
{
    const auto pairs = static_cast<std::size_t>(state.range(0));
    ap::head_options options;
    options.num_pairs_per_bucket = pairs;
    run_scaling(state, "pairs", static_cast<double>(pairs), 50000, 128, 12, options);
}
BENCHMARK(BM_scaling_pairs)->ArgName("pairs")->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MinTime(2.0);

/// Least-squares slope of log(time) on log(x) (the last run of each x).
double fitted_exponent(const std::vector<scaling_point>& raw)
{
    std::map<double, double> last;
    for (const auto& p : raw)
    {
        last[p.x] = p.seconds;
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

void print_stage_tables()
{
    for (const auto& [threads, row] : stage_tables())
    {
        const auto ms = [](const std::vector<double>& v) { return median(v) * 1e3; };
        const double stream = ms(row.stream);
        std::printf("\nQwen3-8B head, %zu thread%s (medians of %zu rounds, ms; floors measured in the same rounds)\n",
                    threads, threads == 1 ? "" : "s", row.total.size());
        std::printf("  %-18s %9s %9s %7s  %s\n", "stage", "time", "floor", "ratio", "floor is");
        const auto line = [](const char* name, double t, double floor, const char* what) {
            if (floor > 0.0)
            {
                std::printf("  %-18s %9.2f %9.2f %7.2f  %s\n", name, t, floor, t / floor, what);
            }
            else
            {
                std::printf("  %-18s %9.2f %9s %7s  %s\n", name, t, "", "", what);
            }
        };
        line("preparation", ms(row.preparation), stream, "one streaming pass over the input");
        line("regression", ms(row.regression), stream, "one streaming pass over the input");
        line("rotation", ms(row.rotation), stream, "one streaming pass over the input");
        line("normality", ms(row.normality), ms(row.normality_floor),
             "the columns formed once, their power sums, the KS samples binned");
        line("bucket_statistics", ms(row.bucket_statistics), ms(row.syrk), "the SYRK calls alone");
        line("sampling", ms(row.sampling), 0.0, "(no floor)");
        line("kernel", ms(row.kernel), ms(row.gemm), "the GEMM calls alone");
        line("extensions", ms(row.extensions), 0.0, "(no floor; docs/method.md §8.1 distance map)");
        line("total", ms(row.total), 0.0, "");
        std::printf("  peak memory allocated by analyze_head: %.1f MB beyond the head's %.1f MB of input (%.2fx)\n",
                    row.peak_extra_mb, row.input_mb, row.peak_ratio);
    }
    const auto& tables = stage_tables();
    if (tables.count(1) && tables.count(2))
    {
        const double one = median(tables.at(1).total);
        const double two = median(tables.at(2).total);
        std::printf("\n2 threads / 1 thread: %.3f (%.1f ms / %.1f ms)\n", two / one, two * 1e3, one * 1e3);
    }
}
}  // namespace

int main(int argc, char** argv)
{
    if (!ap_bench::run_benchmarks(argc, argv))
    {
        return 1;
    }
    print_stage_tables();
    for (const auto& [series, points] : scaling_points())
    {
        std::map<double, scaling_point> last;
        for (const auto& p : points)
        {
            last[p.x] = p;
        }
        if (last.size() >= 2)
        {
            std::printf("scaling %-8s: fitted exponent %.3f  (", series.c_str(), fitted_exponent(points));
            for (const auto& [x, p] : last)
            {
                std::printf(" %g: %.1f ms, peak %.2fx;", x, p.seconds * 1e3, p.peak_ratio);
            }
            std::printf(" )\n");
        }
    }
    return 0;
}
