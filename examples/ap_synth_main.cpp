// ap_synth: writes a synthetic qk dump (NPY layout of docs/method.md §1) from an exact Gaussian query
// model, and beside it true_ap.csv with the attention plasticity each head truly has.
// The model is described in synth_model.hpp.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/io/examples_table.hpp>
#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/config.hpp>
#include <attention_plasticity/run/dump_layout.hpp>

#include "synth_model.hpp"

namespace
{
namespace fs = std::filesystem;
using namespace ap_synth;
using namespace attention_plasticity::run;
namespace io = attention_plasticity::io;

struct synth_cli
{
    synth_options model;
    std::string out = "synth_dump";
    bool float64 = false;
    bool int32 = false;
    std::size_t threads = 0;
};

const char* const usage_intro =
    R"(usage: ap_synth [options]

Writes a synthetic qk dump in the NPY layout of docs/method.md §1 into --out, from an exact
Gaussian query model (see examples/synth_model.hpp), and beside it (files of the same names
are overwritten, anything else in --out is left alone):
  true_ap.csv       layer,q_head,k_head,ap_true,ap_true_first20,ap_true_last20,drift
  true_profile.csv  layer,q_head,k_head,q_bucket,tau,n_queries,ap_true,n_pairs
  metadata.json     the layout: num_layers, num_q_heads, num_k_heads (docs/method.md §1.3)
  examples.csv      with --examples-per-document: each example's document (docs/method.md §1.1)

options (defaults in brackets):
)";

/// ap_synth's options, read by the table-driven parser of config.hpp as ap_analyze's are.
const option_table<synth_cli>& synth_options_table()
{
    using c = synth_cli;
    auto model_unsigned = [](std::size_t synth_options::*field, std::uint64_t lo, std::uint64_t hi) {
        return [field, lo, hi](c& cli, const std::string& label, const std::string& text) {
            cli.model.*field = static_cast<std::size_t>(parse_unsigned(label, text, lo, hi));
        };
    };
    auto model_real = [](double synth_options::*field, double lo, double hi) {
        return [field, lo, hi](c& cli, const std::string& label, const std::string& text) {
            cli.model.*field = parse_real(label, text, lo, hi);
        };
    };
    // A list of layers (e.g. 1,3 or 0-3) into a field of the model.
    auto layer_list = [](std::vector<std::size_t> synth_options::*field) {
        return [field](c& cli, const std::string& label, const std::string& text) {
            (cli.model.*field).clear();
            const index_set layers = parse_index_set(label, text, 1000);
            for (const auto& [first, last] : layers.ranges())
            {
                for (std::uint64_t layer = first; layer <= last; ++layer)
                {
                    (cli.model.*field).push_back(static_cast<std::size_t>(layer));
                }
            }
        };
    };
    auto choice = [](bool c::*field, const char* no, const char* yes) {
        return [field, no, yes](c& cli, const std::string& label, const std::string& text) {
            if (text != no && text != yes)
            {
                throw usage_error(label + ": '" + text + "' is not " + no + " or " + yes);
            }
            cli.*field = text == yes;
        };
    };
    static const option_table<synth_cli> table = {
        {"out", "DIR", "output folder [synth_dump]", set_option::path(&c::out)},
        {"num_layers", "N", "layers [4]", model_unsigned(&synth_options::num_layers, 1, 100)},
        {"num_q_heads", "N", "query heads per layer [8]", model_unsigned(&synth_options::num_q_heads, 1, 100)},
        {"num_k_heads", "N", "key heads per layer; divides --num-q-heads [2]",
         model_unsigned(&synth_options::num_k_heads, 1, 100)},
        {"dim", "D", "head dimension d [64]", model_unsigned(&synth_options::dim, 2, 4096)},
        {"tokens", "N", "tokens per head = examples x sequence length [4096]",
         model_unsigned(&synth_options::tokens, 4, 100000000)},
        {"examples", "N", "sequences (example_id values) per head [4]",
         model_unsigned(&synth_options::examples, 1, 1000000)},
        {"buckets", "N", "uniform position buckets [16]", model_unsigned(&synth_options::buckets, 2, 1000000)},
        {"seed", "N", "seed of everything [0]",
         [](c& cli, const std::string& label, const std::string& text) { cli.model.seed = parse_unsigned(label, text); }},
        {"sliding_window_layers", "LIST", "layers with a sliding window, e.g. 1,3 or 0-3 [none]",
         layer_list(&synth_options::sliding_window_layers), true},
        {"sliding_window", "W", "window of those layers, tokens [sequence length / 4]",
         [](c& cli, const std::string& label, const std::string& text) {
             cli.model.sliding_window = static_cast<std::int64_t>(parse_unsigned(label, text, 1, 1u << 30));
         }},
        {"true_pairs", "N",
         "0: the true AP is the exact expectation over every pair the sampler can draw (weighted by "
         "its probability); N > 0: the mean over N pairs per cell drawn with the library's sampler [0]",
         model_unsigned(&synth_options::true_pairs, 0, 100000000)},
        {"max_rel_dist", "X", "sampler window fraction, as the analysis [0.05]",
         model_real(&synth_options::max_rel_dist, 0.0, 1.0)},
        {"min_drift", "X", "positional drift strength of the least positional head [0.3]",
         model_real(&synth_options::min_drift, 1e-9, 1e9)},
        {"max_drift", "X", "... and of the most positional one [150]", model_real(&synth_options::max_drift, 1e-9, 1e9)},
        {"query_positions", "spread|centre",
         "spread: a query at every position, as the keys; centre: every query of a bucket at the bucket's centre "
         "position, so the bucket's queries have exactly the Gaussian law of the model [spread]",
         [](c& cli, const std::string& label, const std::string& text) {
             if (text != "spread" && text != "centre")
             {
                 throw usage_error(label + ": '" + text + "' is not spread or centre");
             }
             cli.model.centred_queries = text == "centre";
         }},
        {"query_seed", "N", "seed of the query vectors' noise alone (keys, model and truth: --seed's) [--seed]",
         [](c& cli, const std::string& label, const std::string& text) { cli.model.query_seed = parse_unsigned(label, text); }},
        {"changed_layers", "LIST", "layers whose query heads have their drift multiplied by --change-factor [none]",
         layer_list(&synth_options::changed_layers), true},
        {"change_factor", "X", "the factor of --changed-layers [1]", model_real(&synth_options::change_factor, 1e-9, 1e9)},
        {"examples_per_document", "K",
         "examples per document: example e is chunk e % K of document e / K, written to examples.csv "
         "(docs/method.md §1.1); with K > 1 the queries of a document share a random effect, so its examples are "
         "dependent (none: no examples.csv) [none]",
         [](c& cli, const std::string& label, const std::string& text) {
             cli.model.examples_per_document = static_cast<std::size_t>(parse_unsigned(label, text, 1, 1000000));
         }},
        {"document_effect", "X",
         "SD of a document's shared effect, in units of the query noise's SD (--examples-per-document K > 1) [1]",
         model_real(&synth_options::document_effect, 0.0, 1e3)},
        {"vector_dtype", "float32|float64", "dtype of vector.npy [float32]", choice(&c::float64, "float32", "float64")},
        {"int_dtype", "int32|int64", "dtype of the integer columns [int64]", choice(&c::int32, "int64", "int32")},
        {"threads", "N", "worker threads, 0 = hardware concurrency [0]", set_option::unsigned_in(&c::threads, 0, 4096)},
    };
    return table;
}

synth_cli parse_args(int argc, char** argv, bool& help)
{
    synth_cli cli;
    help = !parse_command_line(argc, argv, synth_options_table(), cli);
    if (help)
    {
        return cli;
    }
    const auto& m = cli.model;
    if (m.num_q_heads % m.num_k_heads != 0)
    {
        throw usage_error("--num-q-heads (" + std::to_string(m.num_q_heads) + ") must be a multiple of --num-k-heads ("
                          + std::to_string(m.num_k_heads) + ")");
    }
    if (m.tokens % m.examples != 0 || m.sequence_length() < 2)
    {
        throw usage_error("--tokens (" + std::to_string(m.tokens) + ") must be a multiple of --examples ("
                          + std::to_string(m.examples) + ") with at least 2 tokens per example");
    }
    if (m.examples % m.per_document() != 0)
    {
        throw usage_error("--examples (" + std::to_string(m.examples) + ") must be a multiple of --examples-per-document ("
                          + std::to_string(m.per_document()) + ")");
    }
    if (m.buckets > m.sequence_length())
    {
        throw usage_error("--buckets (" + std::to_string(m.buckets) + ") exceeds the sequence length ("
                          + std::to_string(m.sequence_length()) + ")");
    }
    for (auto layer : m.sliding_window_layers)
    {
        if (layer >= m.num_layers)
        {
            throw usage_error("--sliding-window-layers: layer " + std::to_string(layer) + " does not exist ("
                              + std::to_string(m.num_layers) + " layers)");
        }
    }
    if (m.min_drift > m.max_drift)
    {
        throw usage_error("--min-drift must not exceed --max-drift");
    }
    return cli;
}

template <class T>
xt::xtensor<T, 2> permuted_rows(const xt::xtensor<double, 2>& x, const std::vector<std::size_t>& order)
{
    const std::size_t d = x.shape()[1];
    xt::xtensor<T, 2> out = xt::xtensor<T, 2>::from_shape({order.size(), d});
    for (std::size_t r = 0; r < order.size(); ++r)
    {
        for (std::size_t c = 0; c < d; ++c)
        {
            out(r, c) = static_cast<T>(x(order[r], c));
        }
    }
    return out;
}

template <class T>
void write_column(const fs::path& file, const std::vector<std::int64_t>& values, const std::vector<std::size_t>& order)
{
    xt::xtensor<T, 1> out = xt::xtensor<T, 1>::from_shape({order.size()});
    for (std::size_t r = 0; r < order.size(); ++r)
    {
        out(r) = static_cast<T>(values[order[r]]);
    }
    xt::dump_npy(file.string(), out);
}

/// Writes one folder: vectors (output frame, double) and the layout, rows in `order`.
void write_folder(const synth_cli& cli, const fs::path& folder, const xt::xtensor<double, 2>& vectors,
                  const token_layout& layout, const std::vector<std::size_t>& order, std::int64_t window)
{
    fs::create_directories(folder);
    if (cli.float64)
    {
        xt::dump_npy((folder / "vector.npy").string(), permuted_rows<double>(vectors, order));
    }
    else
    {
        xt::dump_npy((folder / "vector.npy").string(), permuted_rows<float>(vectors, order));
    }
    auto column = [&](const char* name, const std::vector<std::int64_t>& values) {
        if (cli.int32)
        {
            write_column<std::int32_t>(folder / name, values, order);
        }
        else
        {
            write_column<std::int64_t>(folder / name, values, order);
        }
    };
    column("position.npy", layout.position);
    column("bucket.npy", layout.bucket);
    column("example_id.npy", layout.example_id);
    const fs::path sw = folder / "sliding_window.npy";
    if (window > 0)
    {
        column("sliding_window.npy", std::vector<std::int64_t>(layout.position.size(), window));
    }
    else
    {
        std::error_code ec;
        fs::remove(sw, ec);  // a stale file from an earlier run would change the analysis
    }
}

/// Values as written: rounded to float32 when the dump is float32.
xt::xtensor<double, 2> as_stored(const synth_cli& cli, xt::xtensor<double, 2> x)
{
    if (!cli.float64)
    {
        for (auto& v : x)
        {
            v = static_cast<double>(static_cast<float>(v));
        }
    }
    return x;
}

struct group_output
{
    std::string head_rows;
    std::string profile_rows;
};

/// One key-head group: keys, then each query head of the group with its true AP.
group_output run_group(const synth_cli& cli, std::size_t layer, std::size_t k_head)
{
    const synth_options& o = cli.model;
    const fs::path root(cli.out);
    const token_layout layout = make_layout(o);
    const token_layout query_layout = make_query_layout(o);
    const std::size_t n = layout.position.size();
    normal_source rotation_source(stream_seed(o.seed, 7, layer, k_head));
    const xt::xtensor<double, 2> r = random_orthogonal(o.dim, rotation_source);

    const key_params kp = make_key_params(o, layer, k_head);
    const xt::xtensor<double, 2> keys =
        as_stored(cli, to_output_frame(make_latent_keys(o, kp, layout, layer, k_head), r));
    write_folder(cli, root / head_folder_name(layer, k_head, 'k'), keys, layout, row_order(o, 8, layer, k_head, n), 0);

    group_output out;
    const std::int64_t window = o.window_for(layer);
    for (std::size_t q_head = k_head * o.group_size(); q_head < (k_head + 1) * o.group_size(); ++q_head)
    {
        const query_params qp = make_query_params(o, layer, q_head);
        const xt::xtensor<double, 2> queries =
            to_output_frame(make_latent_queries(o, qp, query_layout, layer, q_head), r);
        write_folder(cli, root / head_folder_name(layer, q_head, 'q'), queries, query_layout,
                     row_order(o, 9, layer, q_head, n), window);
        const true_ap_result truth =
            true_ap(o, qp, r, keys, layout, query_layout, window, stream_seed(o.seed, 10, layer, q_head));
        const std::string id = std::to_string(layer) + "," + std::to_string(q_head) + "," + std::to_string(k_head);
        out.head_rows += id + "," + io::format_number(truth.ap) + "," + io::format_number(truth.ap_first20) + "," + io::format_number(truth.ap_last20) + ","
                         + io::format_number(qp.drift) + "\n";
        for (const auto& row : truth.profile)
        {
            out.profile_rows += id + "," + std::to_string(row.q_bucket) + "," + io::format_number(row.tau) + ","
                                + std::to_string(row.n_queries) + "," + io::format_number(row.ap) + "," + std::to_string(row.n_pairs)
                                + "\n";
        }
    }
    return out;
}

/// examples.csv of the dump (docs/method.md §1.1): example 17 e + 5 is chunk e % K of document
/// e / K. Synthetic text identities (there are no token ids): the document's fingerprint is the
/// 16 hex digits of splitmix64 of (seed, document index), mix_seed(seed, document); an example's
/// mix_seed(seed, document, chunk + 1). Another --query-seed (other token draws) keeps them.
std::string examples_csv_of(const synth_options& o)
{
    auto hex = [](std::uint64_t x) {
        char text[17];
        std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
        return std::string(text);
    };
    const std::size_t k = o.per_document();
    std::vector<io::example_row> rows;
    for (std::size_t e = 0; e < o.examples; ++e)
    {
        io::example_row row;
        const std::uint64_t document = e / k;
        row.example_id = static_cast<std::int64_t>(17 * e + 5);
        row.document_id = static_cast<std::int64_t>(document);
        row.chunk = static_cast<std::int64_t>(e % k);
        row.fingerprint = hex(ap::detail::mix_seed(o.seed, document, row.chunk + 1));
        row.document_fingerprint = hex(ap::detail::mix_seed(o.seed, document));
        rows.push_back(std::move(row));
    }
    return io::examples_csv_text(std::move(rows));
}

void write_text(const fs::path& file, const std::string& text)
{
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out << text;
        out.flush();
        if (!out)
        {
            throw std::runtime_error(tmp.string() + ": write failed");
        }
    }
    fs::rename(tmp, file);
}
}  // namespace

int main(int argc, char** argv)
{
    if (asks_version(argc, argv))
    {
        std::puts(version_line("ap_synth").c_str());
        return 0;
    }
    synth_cli cli;
    try
    {
        bool help = false;
        cli = parse_args(argc, argv, help);
        if (help)
        {
            std::cout << usage_intro << options_help(synth_options_table());
            return 0;
        }
    }
    catch (const std::exception& e)
    {
        std::cerr << "ap_synth: " << e.what() << "\n";
        return 2;
    }
    attention_plasticity::select_blas_kernels();  // docs/method.md §7.7; OpenBLAS on one thread
    std::cerr << attention_plasticity::blas_report("ap_synth") << "\n";
    const auto start = std::chrono::steady_clock::now();
    try
    {
        const synth_options& o = cli.model;
        fs::create_directories(cli.out);
        const std::size_t groups = o.num_layers * o.num_k_heads;
        std::vector<group_output> outputs(groups);
        std::vector<std::string> errors(groups);
        std::atomic<std::size_t> next{0};
        std::size_t threads = cli.threads ? cli.threads : std::max(1u, std::thread::hardware_concurrency());
        threads = std::min(threads, groups);
        auto worker = [&] {
            for (std::size_t g = next++; g < groups; g = next++)
            {
                try
                {
                    outputs[g] = run_group(cli, g / o.num_k_heads, g % o.num_k_heads);
                }
                catch (const std::exception& e)
                {
                    errors[g] = e.what();
                }
            }
        };
        std::vector<std::thread> pool;
        for (std::size_t t = 0; t < threads; ++t)
        {
            pool.emplace_back(worker);
        }
        for (auto& t : pool)
        {
            t.join();
        }
        for (const auto& e : errors)
        {
            if (!e.empty())
            {
                throw std::runtime_error(e);
            }
        }
        std::string heads = "layer,q_head,k_head,ap_true,ap_true_first20,ap_true_last20,drift\n";
        std::string profile = "layer,q_head,k_head,q_bucket,tau,n_queries,ap_true,n_pairs\n";
        // Rows in (layer, q_head) order: groups are (layer, k_head) and q heads of a group
        // are contiguous, so group order is that order.
        for (const auto& g : outputs)
        {
            heads += g.head_rows;
            profile += g.profile_rows;
        }
        write_text(fs::path(cli.out) / "true_ap.csv", heads);
        write_text(fs::path(cli.out) / "true_profile.csv", profile);
        // The dump's layout, which ap_analyze never guesses from the folder names.
        write_text(fs::path(cli.out) / dump_metadata_file,
                   io::dump_metadata_text(o.num_layers, o.num_q_heads, o.num_k_heads));
        const fs::path examples = fs::path(cli.out) / io::examples_csv;
        if (o.examples_per_document)
        {
            write_text(examples, examples_csv_of(o));
        }
        else
        {
            std::error_code ec;
            fs::remove(examples, ec);  // a stale file from an earlier run would change the analysis
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr,
                     "ap_synth: %zu layers x %zu query heads (%zu key heads), d = %zu, %zu tokens per head, "
                     "%zu buckets -> %s (%.2f s)\n",
                     o.num_layers, o.num_q_heads, o.num_k_heads, o.dim, o.examples * o.sequence_length(), o.buckets,
                     cli.out.c_str(), seconds);
    }
    catch (const std::exception& e)
    {
        std::cerr << "ap_synth: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
