// compose_head: the per-head method of docs/method.md §2, composed step by step from the
// library's public functions on the caller's own tensors -- the tutorial of the public API.
// analyze_head (pipeline.hpp) does the same in one call, reading the caller's rows in place
// and adding the extensions of §8; this program reproduces its §2 results bit for bit
// (the test compose_head_matches_analyze_head runs both and compares the tables).
//
// The head is read from a dump with the io layer (docs/method.md §1: a folder of queries and
// one of keys, float32 or float64 vectors), and its tables of §3 are written with io's rows.
//
// usage: compose_head DUMP LAYER Q_HEAD K_HEAD OUT [--threads N] [--seed S] [--max-tokens M]
//                     [--analyze]
//   --analyze  the same head through analyze_head instead (same options), for comparison.
#include <attention_plasticity/ap.hpp>
#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/io/dump_folder.hpp>
#include <attention_plasticity/io/npy_dump.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

namespace ap = attention_plasticity;

// docs/method.md §2 on one head: `queries` and `keys` are views of the caller's buffers
// (float or double vectors, each kind its own), `id` says which head it is (it seeds the
// head's random draws, §2.15), `options` holds the parameters of §2 and the threads.
template <class TQ, class TK>
ap::head_result compose_head(const ap::tokens_view<TQ>& queries, const ap::tokens_view<TK>& keys,
                             const ap::head_id& id, const ap::head_options& options)
{
    // Every step that shares its work among threads takes their number last; the results do
    // not depend on it (docs/method.md §7.1).
    const std::size_t threads = options.threads;
    // §2.15: every seed of the head, from the run's seed and the head's id.
    const ap::head_seeds seeds = ap::seeds_of_head(options.seed, id);

    // §2.1: the orientation s from all keys, then §2.2: the rows kept of each kind, with
    // their vectors times s, in float64, and their columns.
    const xt::xtensor<double, 1> signs = ap::orientation_signs(keys.vectors, keys.bucket, threads);
    const ap::prepared_tokens q =
        ap::prepare_tokens(queries, signs, options.max_tokens_per_head, seeds.query_subsample);
    const ap::prepared_tokens k = ap::prepare_tokens(keys, signs, options.max_tokens_per_head, seeds.key_subsample);
    const std::size_t d = signs.size();

    // §2.3: every query component regressed on the position t.
    const ap::linear_fit fit = ap::fit_linear(q.t, q.vectors, threads);
    // §2.4: how well the projection on beta predicts log2(t + 1).
    const ap::scalar_predictability scalar = ap::scalar_position_predictability(q.t, q.vectors, fit.beta, threads);
    // §2.5: the reflection that takes beta to the first axis, applied to queries and keys.
    const ap::householder rotation = ap::householder_to_e1(fit.beta);
    const xt::xtensor<double, 2> q_rot = rotation.apply(q.vectors);
    const xt::xtensor<double, 2> k_rot = rotation.apply(k.vectors);
    // §2.6: the positional component (column 0 of q_rot) against t.
    const ap::position_component_fit component0 = ap::fit_position_component(q.t, q_rot);
    // §2.7: the normality of its residual; §2.8: of the noise components (columns 1..d-1).
    const ap::residual_normality_result first = ap::standardized_normality(component0.residual);
    const ap::noise_normality_result noise =
        ap::noise_normality(xt::view(q_rot, xt::all(), xt::range(1, d)), options.normality_max_dims, options.p_alpha,
                            seeds.noise_components, threads);

    ap::head_result result;
    result.id = id;
    // §2.9: each original component's share of the positional information.
    result.component_r2 = fit.r2;
    result.component_weight = ap::component_weights(fit.r2);
    // §2.10: a Gaussian query model per query bucket.
    const std::vector<ap::bucket_query_model> models =
        ap::bucket_query_models(q.t, q.bucket, q_rot, component0, options.covariance_epsilon, threads);
    // §2.11: the keys grouped by bucket (and by example within a bucket, for §2.12).
    const std::vector<ap::key_bucket> key_buckets = ap::group_key_buckets(k.position, k.bucket, k.example_id);
    for (const ap::bucket_query_model& model : models)
    {
        // §2.11-2.12: the key buckets the bucket's queries may see, each with its key pairs.
        const std::vector<ap::cell_pairs> cells = ap::query_bucket_cells(key_buckets, model, options, seeds.pair_sampler);
        // §2.13: the plasticity of every pair, of every cell and of the bucket (AP_j).
        const ap::bucket_plasticity_result bucket = ap::query_bucket_plasticity(k_rot, cells, model);
        result.cells.insert(result.cells.end(), bucket.cells.begin(), bucket.cells.end());
        result.profile.push_back(ap::profile_row(model, bucket, options.min_bucket_queries));
    }
    // §2.14: the head's aggregates over the profile rows, C = the largest query position + 1.
    const double context_length = xt::amax(q.t)() + 1.0;
    const ap::plasticity_aggregates_result aggregates = ap::plasticity_aggregates(result.profile, context_length);
    // The head_metrics.csv row of §3 from the steps' results.
    result.metrics = ap::make_head_metrics({q.rows.size(), k.rows.size()}, fit, scalar, first, noise, aggregates);
    return result;
}

namespace
{
// The tables of docs/method.md §3 for one head, written into `folder` as ap_analyze writes them.
void write_tables(const ap::head_result& result, const std::string& folder)
{
    const ap::io::head_rows rows = ap::io::format_head(result);
    std::filesystem::create_directories(folder);
    for (const ap::io::result_file& file : ap::io::result_files({&rows}))
    {
        std::ofstream out(std::filesystem::path(folder) / file.name, std::ios::binary);
        for (const auto& piece : file.pieces)
        {
            out << piece;
        }
        if (!out.flush())
        {
            throw std::runtime_error("cannot write " + (std::filesystem::path(folder) / file.name).string());
        }
    }
}

// A non-negative integer argument, or exit with the usage.
std::size_t count_argument(const char* flag, const char* text)
{
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-')
    {
        std::fprintf(stderr, "compose_head: %s must be a non-negative integer, got '%s'\n", flag, text);
        std::exit(2);
    }
    return static_cast<std::size_t>(value);
}
}  // namespace

int main(int argc, char** argv)
{
    if (argc < 6)
    {
        std::fprintf(stderr, "usage: compose_head DUMP LAYER Q_HEAD K_HEAD OUT [--threads N] [--seed S] "
                             "[--max-tokens M] [--analyze]\n");
        return 2;
    }
    const std::string dump = argv[1];
    const std::size_t layer = count_argument("LAYER", argv[2]);
    const std::size_t q_head = count_argument("Q_HEAD", argv[3]);
    const std::size_t k_head = count_argument("K_HEAD", argv[4]);
    const std::string out = argv[5];
    // The parameters of §2 at their defaults; the extensions of §8 off (this program composes §2).
    ap::head_options options;
    options.distance_map = false;
    options.planar_rotation = false;
    bool analyze = false;
    for (int i = 6; i < argc; ++i)
    {
        const std::string flag = argv[i];
        if (flag == "--analyze")
        {
            analyze = true;
        }
        else if ((flag == "--threads" || flag == "--seed" || flag == "--max-tokens") && i + 1 < argc)
        {
            const std::size_t value = count_argument(flag.c_str(), argv[++i]);
            (flag == "--threads" ? options.threads : flag == "--seed" ? options.seed : options.max_tokens_per_head) =
                value;
        }
        else
        {
            std::fprintf(stderr, "compose_head: unknown or incomplete option '%s'\n", flag.c_str());
            return 2;
        }
    }
    ap::select_blas_kernels();  // the BLAS kernels every front end uses (docs/method.md §7.7)
    try
    {
        // The head's two folders (docs/method.md §1), each float32 or float64 as the dump holds it.
        const ap::io::folder_data q = ap::io::load_folder(ap::io::head_folder_path(dump, layer, q_head, 'q'), true);
        const ap::io::folder_data k = ap::io::load_folder(ap::io::head_folder_path(dump, layer, k_head, 'k'), false);
        options.sliding_window = q.sliding_window;  // §2.11: the head's own window
        const ap::head_id id{static_cast<std::int64_t>(layer), static_cast<std::int64_t>(q_head),
                             static_cast<std::int64_t>(k_head)};
        // with_tokens hands each folder's rows as a view of the file, read in place (§1.1).
        const ap::head_result result = ap::io::with_tokens(q, [&](const auto& queries) {
            return ap::io::with_tokens(k, [&](const auto& keys) {
                return analyze ? ap::analyze_head(queries, keys, id, options) : compose_head(queries, keys, id, options);
            });
        });
        write_tables(result, out);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "compose_head: %s\n", e.what());
        return 1;
    }
    return 0;
}
