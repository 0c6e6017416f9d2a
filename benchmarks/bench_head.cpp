// ap_bench_head: times analyze_head on one head of an NPY dump (docs/method.md §1), the
// C++ side of benchmarks/run_numpy_comparison.py. The head is loaded once (not timed); then
// `rounds` analyses, each timed alone; prints one JSON object on stdout: every round's seconds,
// their median, the head's metrics (head_metrics.csv's columns) and the OpenBLAS kernels.
//
// usage: ap_bench_head DATA_ROOT [--layer L] [--q-head H] [--k-head K] [--threads T]
//                      [--rounds R] [--normality-max-dims N] [--max-tokens-per-head N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/io/dump_folder.hpp>
#include <attention_plasticity/io/npy_dump.hpp>
#include <attention_plasticity/pipeline.hpp>

namespace
{
namespace ap = attention_plasticity;
namespace io = attention_plasticity::io;

void print_number(const char* name, double value, bool comma = true)
{
    if (value != value)
    {
        std::printf("\"%s\": null%s", name, comma ? ", " : "");
    }
    else
    {
        std::printf("\"%s\": %.17g%s", name, value, comma ? ", " : "");
    }
}
}  // namespace

int main(int argc, char** argv)
{
    if (argc < 2)
    {
        std::fprintf(stderr, "usage: ap_bench_head DATA_ROOT [--layer L] [--q-head H] [--k-head K] [--threads T] "
                             "[--rounds R] [--normality-max-dims N] [--max-tokens-per-head N]\n");
        return 2;
    }
    ap::select_blas_kernels();  // docs/method.md §7.7, as ap_analyze
    const std::string root = argv[1];
    std::size_t layer = 0, q_head = 0, k_head = 0, rounds = 5;
    ap::head_options options;
    for (int i = 2; i + 1 < argc; i += 2)
    {
        const std::string flag = argv[i];
        const auto value = static_cast<std::size_t>(std::strtoull(argv[i + 1], nullptr, 10));
        if (flag == "--layer")
            layer = value;
        else if (flag == "--q-head")
            q_head = value;
        else if (flag == "--k-head")
            k_head = value;
        else if (flag == "--threads")
            options.threads = value;
        else if (flag == "--rounds")
            rounds = std::max<std::size_t>(1, value);
        else if (flag == "--normality-max-dims")
            options.normality_max_dims = value;
        else if (flag == "--max-tokens-per-head")
            options.max_tokens_per_head = value;
        else
        {
            std::fprintf(stderr, "ap_bench_head: unknown option %s\n", flag.c_str());
            return 2;
        }
    }
    try
    {
        const io::folder_data q = io::load_folder(io::head_folder_path(root, layer, q_head, 'q'), true);
        const io::folder_data k = io::load_folder(io::head_folder_path(root, layer, k_head, 'k'), false);
        options.sliding_window = q.sliding_window;
        const ap::head_id id{static_cast<std::int64_t>(layer), static_cast<std::int64_t>(q_head),
                             static_cast<std::int64_t>(k_head)};
        std::vector<double> seconds;
        ap::head_result result;
        for (std::size_t r = 0; r < rounds; ++r)
        {
            const auto start = std::chrono::steady_clock::now();
            result = with_tokens(q, [&](const auto& queries) {
                return with_tokens(k, [&](const auto& keys) { return ap::analyze_head(queries, keys, id, options); });
            });
            seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::vector<double> sorted = seconds;
        std::sort(sorted.begin(), sorted.end());
        const std::size_t mid = sorted.size() / 2;
        const double median = sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
        const ap::blas_selection& blas = ap::select_blas_kernels();
        std::printf("{\"seconds\": [");
        for (std::size_t r = 0; r < seconds.size(); ++r)
        {
            std::printf("%s%.6f", r ? ", " : "", seconds[r]);
        }
        std::printf("], \"median_seconds\": %.6f, \"threads\": %zu, \"blas_core\": \"%s\", \"metrics\": {", median,
                    options.threads, blas.core.c_str());
        const ap::head_metrics& m = result.metrics;
        print_number("n_q_tokens", static_cast<double>(m.n_q_tokens));
        print_number("n_k_tokens", static_cast<double>(m.n_k_tokens));
        print_number("d_model", static_cast<double>(m.d_model));
        print_number("q_R2_pos", m.q_R2_pos);
        print_number("q_beta_norm", m.q_beta_norm);
        print_number("q_R2_scalar", m.q_R2_scalar);
        print_number("q_mae_baseline", m.q_mae_baseline);
        print_number("q_mae_proj", m.q_mae_proj);
        print_number("q_mae_ratio", m.q_mae_ratio);
        print_number("q_resid0_skew", m.q_resid0_skew);
        print_number("q_resid0_kurt", m.q_resid0_kurt);
        print_number("q_resid0_ks_p", m.q_resid0_ks_p);
        print_number("q_noise_med_abs_skew", m.q_noise_med_abs_skew);
        print_number("q_noise_med_abs_kurt", m.q_noise_med_abs_kurt);
        print_number("q_noise_med_ks_p", m.q_noise_med_ks_p);
        print_number("q_noise_frac_ks_p_lt_alpha", m.q_noise_frac_ks_p_lt_alpha);
        print_number("ap_overall", m.ap_overall);
        print_number("ap_first20", m.ap_first20);
        print_number("ap_last20", m.ap_last20);
        print_number("ap_drop", m.ap_drop, false);
        std::printf("}}\n");
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_bench_head: %s\n", e.what());
        return 1;
    }
    return 0;
}
