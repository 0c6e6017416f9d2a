// Uses the installed io and run layers the way a downstream toolkit would: one head of an NPY
// dump read with io, analyzed with the library under ap_analyze's default options (run), and
// the tables of docs/method.md §3 written with io into OUT. run_consumer_test.cmake compares
// the rows with those ap_analyze writes for the same head.
//
// usage: ap_consumer_layers DUMP LAYER Q_HEAD K_HEAD OUT
#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/io/dump_folder.hpp>
#include <attention_plasticity/io/npy_dump.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/run/analyze_config.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

int main(int argc, char** argv)
{
    namespace ap = attention_plasticity;
    if (argc != 6)
    {
        std::fprintf(stderr, "usage: ap_consumer_layers DUMP LAYER Q_HEAD K_HEAD OUT\n");
        return 2;
    }
    ap::select_blas_kernels();  // the kernels every front end uses (docs/method.md §7.7)
    const std::string dump = argv[1];
    const ap::head_id id{std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4])};
    // The head's folders in the dump's format (io/dump_folder.hpp: l{LL}h{HH}q, l{LL}h{HH}k).
    auto folder = [&](std::int64_t head, char kind) {
        return ap::io::head_folder_path(dump, static_cast<std::size_t>(id.layer), static_cast<std::size_t>(head), kind);
    };
    try
    {
        const ap::io::folder_data q = ap::io::load_folder(folder(id.q_head, 'q'), true);
        const ap::io::folder_data k = ap::io::load_folder(folder(id.k_head, 'k'), false);
        ap::head_options options = ap::run::analyze_default_options();
        options.sliding_window = q.sliding_window;
        // A dump holds float32 or float64 vectors: the view of the type it holds.
        const ap::head_result result = ap::io::with_tokens(q, [&](const auto& queries) {
            return ap::io::with_tokens(k, [&](const auto& keys) { return ap::analyze_head(queries, keys, id, options); });
        });
        const ap::io::head_rows rows = ap::io::format_head(result);
        std::filesystem::create_directories(argv[5]);
        for (const ap::io::result_file& file : ap::io::result_files({&rows}))
        {
            std::ofstream out(std::filesystem::path(argv[5]) / file.name, std::ios::binary);
            for (const auto& piece : file.pieces)
            {
                out << piece;
            }
        }
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_consumer_layers: %s\n", e.what());
        return 1;
    }
    return 0;
}
