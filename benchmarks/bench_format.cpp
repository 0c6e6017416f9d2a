// ap_bench_format: the formatting of one head's rows into the CSV text of docs/method.md §3
// (io::format_head, what every worker does after analyze_head), on a head_result with many rows:
// 64 query buckets (64 x 64 cells), 128 components, 200 distance bins and 3,000 sequence
// influences, every number non-trivial (17 significant digits). For the A/B of issue 26 item 2
// (the columns of each table as one list, emit_head through function pointers): the source
// compiles against the headers before and after (it uses only head_result's fields and
// format_head), see benchmarks/README.md section 12.

#include <cstddef>
#include <cstdint>

#include <benchmark/benchmark.h>

#include <attention_plasticity/io/csv_rows.hpp>

namespace
{
namespace ap = attention_plasticity;

// A value of 17 significant digits, different for each i (formatting "%.17g" costs by digits).
double value_of(std::size_t i)
{
    return 0.123456789012345678 + 1e-3 * static_cast<double>(i % 997) + 1e-9 * static_cast<double>(i);
}

ap::head_result many_rows()
{
    ap::head_result r;
    r.id = {3, 17, 4};
    r.metrics.n_q_tokens = 50000;
    r.metrics.n_k_tokens = 50000;
    r.metrics.d_model = 128;
    r.metrics.ap_overall = value_of(1);
    r.metrics.ap_first20 = value_of(2);
    r.metrics.n_sequences = 50;
    std::size_t i = 0;
    for (std::int64_t j = 1; j <= 64; ++j)
    {
        ap::bucket_profile b;
        b.q_bucket = j;
        b.tau = value_of(++i);
        b.n_queries = 700;
        b.plasticity = value_of(++i);
        b.n_pairs = 256 * 64;
        b.plasticity_se = value_of(++i);
        b.plasticity_bias = value_of(++i);
        b.plasticity_ci_low = value_of(++i);
        b.plasticity_ci_high = value_of(++i);
        b.plasticity_corrected = value_of(++i);
        r.profile.push_back(b);
        for (std::int64_t c = 0; c < 64; ++c)
        {
            ap::cell_plasticity cell;
            cell.q_bucket = j;
            cell.k_bucket = c;
            cell.plasticity = value_of(++i);
            cell.n_pairs = 256;
            r.cells.push_back(cell);
        }
    }
    r.component_r2 = xt::xtensor<double, 1>::from_shape({std::size_t{128}});
    r.component_weight = xt::xtensor<double, 1>::from_shape({std::size_t{128}});
    for (std::size_t d = 0; d < 128; ++d)
    {
        r.component_r2(d) = value_of(++i);
        r.component_weight(d) = value_of(++i);
    }
    for (std::size_t k = 0; k < 200; ++k)
    {
        ap::distance_plasticity_bin bin;
        bin.key_distance.low = value_of(++i);
        bin.key_distance.high = value_of(++i);
        bin.query_distance.low = value_of(++i);
        bin.query_distance.high = value_of(++i);
        bin.plasticity = value_of(++i);
        bin.n_pairs = 1000 + k;
        r.distance_map.push_back(bin);
    }
    for (std::size_t e = 0; e < 3000; ++e)
    {
        ap::sequence_influence s;
        s.document_id = static_cast<std::int64_t>(e % 50);
        s.quantity = ap::influence_quantity::ap_bucket;
        s.q_bucket = static_cast<std::int64_t>(1 + e / 50);
        s.influence = value_of(++i);
        r.sequence_influences.push_back(s);
    }
    return r;
}

void BM_format_head(benchmark::State& state)
{
    const ap::head_result r = many_rows();
    std::size_t bytes = 0;
    for (auto _ : state)
    {
        const auto rows = attention_plasticity::io::format_head(r);
        bytes = rows.metrics.size() + rows.buckets.size() + rows.profile.size() + rows.components.size()
                + rows.distances.size() + rows.influences.size();
        benchmark::DoNotOptimize(bytes);
    }
    state.counters["bytes"] = static_cast<double>(bytes);
    state.counters["rows"] = static_cast<double>(1 + r.cells.size() + r.profile.size() + r.component_r2.size()
                                                 + r.distance_map.size() + r.sequence_influences.size());
}
BENCHMARK(BM_format_head)->Unit(benchmark::kMicrosecond);
}  // namespace

BENCHMARK_MAIN();
