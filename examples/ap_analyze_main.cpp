// ap_analyze: the attention plasticity of every head of a qk dump (SPEC §1) -> the four
// CSVs of SPEC §3. Command-line handling only: the reading is in npy_dump.hpp, the options in
// config.hpp, the output in csv_output.hpp, and the analysis is the library's analyze_head.
//
// Heads run on `threads` workers. A worker loads one query head (and the key head of its GQA
// group, shared with the other query heads of the group and freed after the last of them),
// analyzes it and keeps only the formatted rows, so memory stays near `threads` heads' data.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "config.hpp"
#include "csv_output.hpp"
#include "npy_dump.hpp"
#include "progress.hpp"

// From OpenBLAS; declared here because the system <cblas.h> clashes with xtensor-blas.
extern "C" void openblas_set_num_threads(int);

namespace
{
using namespace ap_examples;
namespace ap = attention_plasticity;

/// Key folders shared by the query heads of a GQA group: loaded by the first query head of
/// the group that needs them, freed when the last one has released them.
class key_cache
{
public:
    using value = std::shared_ptr<const folder_data>;

    explicit key_cache(std::size_t group_size) : m_group_size(group_size) {}

    value acquire(const std::string& folder, const std::pair<std::size_t, std::size_t>& id)
    {
        std::shared_future<value> future;
        std::promise<value> promise;
        bool load = false;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            auto it = m_entries.find(id);
            if (it == m_entries.end())
            {
                entry e;
                e.future = promise.get_future().share();
                e.remaining = m_group_size;
                it = m_entries.emplace(id, std::move(e)).first;
                load = true;
            }
            future = it->second.future;
        }
        if (load)
        {
            try
            {
                promise.set_value(std::make_shared<const folder_data>(load_folder(folder, false)));
            }
            catch (...)
            {
                promise.set_exception(std::current_exception());
            }
        }
        return future.get();  // rethrows the loading error for every head of the group
    }

    void release(const std::pair<std::size_t, std::size_t>& id)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        auto it = m_entries.find(id);
        if (it != m_entries.end() && --it->second.remaining == 0)
        {
            m_entries.erase(it);
        }
    }

private:
    struct entry
    {
        std::shared_future<value> future;
        std::size_t remaining = 0;
    };
    std::size_t m_group_size;
    std::mutex m_mutex;
    std::map<std::pair<std::size_t, std::size_t>, entry> m_entries;
};

/// Calls f with the view of a loaded folder's tokens, of its stored value type.
template <class F>
auto with_tokens_view(const folder_data& folder, F&& f)
{
    return folder.dtype == npy_dtype::float32 ? f(ap::as_view(folder.f32)) : f(ap::as_view(folder.f64));
}

/// The analysis of one query head; throws input_error naming the file for bad input.
head_rows analyze_one(const analyze_config& config, key_cache& cache, std::size_t layer, std::size_t q_head)
{
    const std::size_t k_head = q_head / config.group_size();
    // Every query head acquires and releases its group's keys exactly once, whatever fails.
    const auto id = std::make_pair(layer, k_head);
    struct releaser
    {
        key_cache& cache;
        std::pair<std::size_t, std::size_t> id;
        ~releaser() { cache.release(id); }
    } release_on_exit{cache, id};
    const key_cache::value k = cache.acquire(folder_name(config.data_root, layer, k_head, 'k'), id);
    if (k->n < 1)
    {
        throw input_error(k->vector_file, "has no keys (0 rows)");
    }
    const folder_data q = load_folder(folder_name(config.data_root, layer, q_head, 'q'), true);
    if (q.n < 2)
    {
        throw input_error(q.vector_file, "needs at least 2 queries, has " + std::to_string(q.n)
                                           + (q.n == 1 ? " row" : " rows"));
    }
    if (q.d != k->d)
    {
        throw input_error(q.vector_file, "d mismatch: queries have d = " + std::to_string(q.d) + " but "
                                             + k->vector_file + " has d = " + std::to_string(k->d));
    }
    ap::head_id hid;
    hid.layer = static_cast<std::int64_t>(layer);
    hid.q_head = static_cast<std::int64_t>(q_head);
    hid.k_head = static_cast<std::int64_t>(k_head);
    ap::head_options options = config.options;
    options.sliding_window = q.sliding_window;
    try
    {
        // Views of what was loaded, float32 or float64 each: nothing is converted or copied.
        return with_tokens_view(q, [&](const auto& queries) {
            return with_tokens_view(*k, [&](const auto& keys) {
                return format_head(ap::analyze_head(queries, keys, hid, options));
            });
        });
    }
    catch (const std::bad_alloc&)
    {
        throw;
    }
    catch (const std::exception& e)
    {
        // The library checks what the loader does not (it names no file): the head's folder.
        throw input_error(q.folder, e.what());
    }
}
}  // namespace

int main(int argc, char** argv)
{
    analyze_config config;
    try
    {
        const auto parsed = parse_config(argc, argv);
        if (!parsed)
        {
            std::fputs(config_help("ap_analyze").c_str(), stdout);
            return 0;
        }
        config = *parsed;
    }
    catch (const usage_error& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }

    // Parallelism is over heads; a multithreaded BLAS underneath would oversubscribe.
    openblas_set_num_threads(1);

    const std::size_t total = config.layers() * config.q_heads();
    const std::size_t threads = std::min(config.worker_threads(), std::max<std::size_t>(1, total));
    std::fprintf(stderr,
                 "ap_analyze: %zu layers x %zu query heads (%zu key heads) from %s, %zu pairs per cell, "
                 "%zu thread%s\n",
                 config.layers(), config.q_heads(), config.k_heads(), config.data_root.c_str(),
                 config.options.num_pairs_per_bucket, threads, threads == 1 ? "" : "s");

    std::vector<std::optional<head_rows>> results(total);
    std::vector<double> seconds(total, 0.0);
    progress_reporter progress(total);
    key_cache cache(config.group_size());
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t index = next++; index < total; index = next++)
        {
            const std::size_t layer = index / config.q_heads();
            const std::size_t q_head = index % config.q_heads();
            const auto start = std::chrono::steady_clock::now();
            std::string error;
            try
            {
                results[index] = analyze_one(config, cache, layer, q_head);
            }
            catch (const input_error& e)
            {
                error = e.file() + ": " + e.reason();
            }
            catch (const std::bad_alloc&)
            {
                error = folder_name(config.data_root, layer, q_head, 'q') + ": out of memory";
            }
            catch (const std::exception& e)
            {
                error = folder_name(config.data_root, layer, q_head, 'q') + ": " + e.what();
            }
            seconds[index] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (!error.empty())
            {
                progress.message("error: layer " + std::to_string(layer) + " q_head " + std::to_string(q_head) + ": "
                                 + error);
            }
            progress.head_done(!error.empty());
        }
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t)
    {
        pool.emplace_back(worker);
    }
    worker();
    for (auto& t : pool)
    {
        t.join();
    }
    progress.finish();

    std::vector<const head_rows*> rows;
    rows.reserve(total);
    for (const auto& r : results)
    {
        rows.push_back(r ? &*r : nullptr);
    }
    const std::size_t failed = progress.failed();
    try
    {
        write_results(config.output_dir, rows);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: error: %s\n", e.what());
        return 1;
    }
    double head_seconds = 0.0;
    for (double s : seconds)
    {
        head_seconds += s;
    }
    std::fprintf(stderr, "ap_analyze: %zu of %zu heads analyzed, %zu failed, in %s (%.3f s per head); results in %s\n",
                 total - failed, total, failed, format_seconds(progress.elapsed()).c_str(),
                 total ? head_seconds / static_cast<double>(total) : 0.0, config.output_dir.c_str());
    return failed > 0 ? 1 : 0;
}
