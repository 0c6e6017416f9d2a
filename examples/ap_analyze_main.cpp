// ap_analyze: the attention plasticity of the heads of a qk dump (docs/method.md §1) -> the
// CSVs of docs/method.md §3 (and §8.1). The front end only: the options are analyze_config.hpp's,
// which heads to analyze dump_layout.hpp's, the reading npy_dump.hpp's, the rows
// csv_rows.hpp's, the writing result_set.hpp's, and the analysis is the library's
// analyze_head.
//
// Order of a run: configuration and the dump's layout (usage errors: exit 2), the output
// folder (checked and locked before any work: exit 2), the heads, then the result set.
// Heads run on `threads` workers. A worker loads one query head (and the key head of its GQA
// group, shared with the other query heads of the group and freed after the last of them),
// analyzes it and keeps only the formatted rows, so memory stays near `threads` heads' data.
// With fewer heads than threads, each head's analysis shares its work among the threads left
// (head_options::threads; the results are the same). The OpenBLAS kernels in use are
// reported, and chosen when OpenBLAS fell back to generic ones (blas_core.hpp).
//
// With --shard I/N (docs/method.md §8.4) the run analyzes only the heads shard_plan.hpp gives
// shard I, and its result set holds, besides their rows, the manifest shard.json
// (shard_manifest.hpp) that ap_merge needs; a shard writes its set even when none of its
// heads succeeded (or it has none), so that the merge sees it finished.

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

#include "analyze_config.hpp"
#include "blas_core.hpp"
#include "csv_rows.hpp"
#include "dump_layout.hpp"
#include "npy_dump.hpp"
#include "progress.hpp"
#include "result_set.hpp"
#include "shard_manifest.hpp"
#include "shard_plan.hpp"

// From OpenBLAS; declared here because the system <cblas.h> clashes with xtensor-blas.
extern "C" void openblas_set_num_threads(int);

namespace
{
using namespace ap_examples;
namespace ap = attention_plasticity;

/// Key folders shared by the query heads of a GQA group: loaded by the first query head of
/// the group that needs them, freed when the last one of the run has released them.
class key_cache
{
public:
    using value = std::shared_ptr<const folder_data>;
    using key_id = std::pair<std::size_t, std::size_t>;  // (layer, k_head)

    /// `heads`: the query heads of the run (each acquires its group's keys once).
    explicit key_cache(const std::vector<head_task>& heads)
    {
        for (const auto& h : heads)
        {
            ++m_users[{h.layer, h.k_head}];
        }
    }

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
                e.remaining = m_users[id];
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
    std::map<key_id, std::size_t> m_users;
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
head_rows analyze_one(const analyze_config& config, const dump_scan& scan, key_cache& cache, const head_task& task)
{
    const std::size_t layer = task.layer;
    const std::size_t q_head = task.q_head;
    const std::size_t k_head = task.k_head;
    // Every query head acquires and releases its group's keys exactly once, whatever fails.
    const auto id = std::make_pair(layer, k_head);
    struct releaser
    {
        key_cache& cache;
        std::pair<std::size_t, std::size_t> id;
        ~releaser() { cache.release(id); }
    } release_on_exit{cache, id};
    const std::string k_folder = head_folder_path(config.data_root, layer, k_head, 'k');
    if (!scan.has_key(layer, k_head))
    {
        throw input_error(k_folder, "folder not found (the keys of query head " + std::to_string(q_head)
                                        + "'s GQA group, key head " + std::to_string(k_head) + ")");
    }
    const key_cache::value k = cache.acquire(k_folder, id);
    if (k->n < 1)
    {
        throw input_error(k->vector_file, "has no keys (0 rows)");
    }
    const folder_data q = load_folder(head_folder_path(config.data_root, layer, q_head, 'q'), true);
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

/// The run's heads, with their rows once analyzed.
struct run_state
{
    std::vector<std::optional<head_rows>> results;
    std::vector<std::string> errors;  // of the heads that failed: "FILE: reason"
    std::vector<double> seconds;
};

void run_heads(const analyze_config& config, const dump_scan& scan, const head_plan& plan, std::size_t threads,
               progress_reporter& progress, run_state& state)
{
    const std::size_t total = plan.heads.size();
    state.results.assign(total, std::nullopt);
    state.errors.assign(total, std::string());
    state.seconds.assign(total, 0.0);
    key_cache cache(plan.heads);
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t index = next++; index < total; index = next++)
        {
            const head_task& task = plan.heads[index];
            const auto start = std::chrono::steady_clock::now();
            std::string error;
            try
            {
                state.results[index] = analyze_one(config, scan, cache, task);
            }
            catch (const input_error& e)
            {
                error = e.file() + ": " + e.reason();
            }
            catch (const std::bad_alloc&)
            {
                error = head_folder_path(config.data_root, task.layer, task.q_head, 'q') + ": out of memory";
            }
            catch (const std::exception& e)
            {
                error = head_folder_path(config.data_root, task.layer, task.q_head, 'q') + ": " + e.what();
            }
            state.seconds[index] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (!error.empty())
            {
                state.errors[index] = error;
                progress.message("error: layer " + std::to_string(task.layer) + " q_head " + std::to_string(task.q_head)
                                 + ": " + error);
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
}

std::string plural(std::uint64_t n, const char* one, const char* many)
{
    return std::to_string(n) + " " + (n == 1 ? one : many);
}
}  // namespace

int main(int argc, char** argv)
{
    analyze_config config;
    std::optional<dump_scan> scan;
    std::optional<head_plan> plan;
    std::optional<shard_selection> shard;
    try
    {
        const auto parsed = parse_analyze_command_line(argc, argv);
        if (!parsed)
        {
            std::fputs(analyze_help("ap_analyze").c_str(), stdout);
            return 0;
        }
        config = *parsed;
        select_blas_core("ap_analyze", argv);  // may run the program again with other BLAS kernels
        scan = scan_dump(config.data_root);
        const dump_layout layout = resolve_layout(*scan, config.layout, read_dump_metadata(config.data_root));
        plan = plan_heads(*scan, layout, config.selection);
        if (config.shard)
        {
            shard = select_shard(config.data_root, plan->heads, config.options.max_tokens_per_head, *config.shard);
            plan->heads = shard->heads;
        }
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }

    // The output folder is checked (and locked) before any work.
    std::optional<result_set_writer> writer;
    try
    {
        std::vector<std::string> names = result_file_names();
        if (shard)
        {
            names.emplace_back(shard_manifest_file);
        }
        writer.emplace(config.output_dir, names);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: %s\n", e.what());
        return 2;
    }
    for (const auto& note : writer->notes())
    {
        std::fprintf(stderr, "ap_analyze: %s\n", note.c_str());
    }

    // Parallelism is over heads; a multithreaded BLAS underneath would oversubscribe.
    openblas_set_num_threads(1);

    const dump_layout& layout = plan->layout;
    const std::size_t total = plan->heads.size();
    const std::size_t threads = std::max<std::size_t>(1, std::min(config.worker_threads(), total));
    // Fewer heads than threads: the threads left share each head's work.
    config.options.threads = total > 0 ? std::max<std::size_t>(1, config.worker_threads() / threads) : 1;
    std::fprintf(stderr,
                 "ap_analyze: %s x %s (%s; %s) in %s: %s present, %zu to analyze, %zu pairs per cell, %s\n",
                 plural(layout.num_layers, "layer", "layers").c_str(),
                 plural(layout.num_q_heads, "query head", "query heads").c_str(),
                 plural(layout.num_k_heads, "key head", "key heads").c_str(), layout.origin.c_str(),
                 config.data_root.c_str(), plural(plan->present_heads, "query head", "query heads").c_str(), total,
                 config.options.num_pairs_per_bucket, plural(threads, "thread", "threads").c_str());
    if (config.options.threads > 1)
    {
        std::fprintf(stderr, "ap_analyze: each head on %zu threads\n", config.options.threads);
    }
    std::fprintf(stderr, "%s\n", blas_core_line("ap_analyze").c_str());
    if (shard)
    {
        std::fprintf(stderr, "ap_analyze: shard %s: %s of the run's %zu (%llu of %llu tokens)\n",
                     config.shard->text().c_str(), plural(total, "head", "heads").c_str(), shard->run_heads,
                     static_cast<unsigned long long>(shard->shard_tokens),
                     static_cast<unsigned long long>(shard->run_tokens));
    }

    progress_reporter progress(total);
    run_state state;
    run_heads(config, *scan, *plan, threads, progress, state);

    const std::size_t failed = progress.failed();
    const std::size_t analyzed = total - failed;
    std::string counts = std::to_string(plan->present_heads) + " of the " + std::to_string(plan->layout_heads)
                         + " query heads of the layout present";
    const std::size_t run_heads = shard ? shard->run_heads : total;
    if (run_heads != plan->present_heads)
    {
        counts += ", " + std::to_string(run_heads) + " of them selected";
    }
    if (shard)
    {
        counts += "; shard " + config.shard->text() + ": " + plural(total, "head", "heads");
    }
    counts += ": " + std::to_string(analyzed) + " analyzed, " + std::to_string(failed) + " failed";
    if (analyzed == 0 && !shard)
    {
        writer->abandon();
        std::fprintf(stderr, "ap_analyze: %s; no head was analyzed, so %s\n", counts.c_str(),
                     writer->has_earlier_set() ? ("the earlier results in " + config.output_dir + " are left as they were").c_str()
                                               : ("nothing was written to " + config.output_dir).c_str());
        return 1;
    }
    std::vector<const head_rows*> rows;
    rows.reserve(analyzed);
    for (const auto& r : state.results)
    {
        if (r)
        {
            rows.push_back(&*r);
        }
    }
    std::string manifest_text;
    try
    {
        std::vector<result_file> files = result_files(rows);
        if (shard)
        {
            std::vector<const head_rows*> head_rows_or_null;
            for (const auto& r : state.results)
            {
                head_rows_or_null.push_back(r ? &*r : nullptr);
            }
            manifest_text = manifest_json(make_shard_manifest(std::string("ap_analyze ") + AP_VERSION, config, *plan,
                                                              *shard, head_rows_or_null, state.errors,
                                                              progress.elapsed()));
            files.push_back({shard_manifest_file, {manifest_text}});
        }
        writer->commit(files);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_analyze: error: %s; %s\n", e.what(),
                     writer->has_earlier_set() ? ("the earlier results in " + config.output_dir + " are unchanged").c_str()
                                               : ("no results were written to " + config.output_dir).c_str());
        return 1;
    }
    double head_seconds = 0.0;
    for (double s : state.seconds)
    {
        head_seconds += s;
    }
    std::fprintf(stderr, "ap_analyze: %s, in %s (%.3f s per head); results in %s\n", counts.c_str(),
                 format_seconds(progress.elapsed()).c_str(), total ? head_seconds / static_cast<double>(total) : 0.0,
                 config.output_dir.c_str());
    return failed > 0 ? 1 : 0;
}
