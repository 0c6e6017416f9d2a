#ifndef ATTENTION_PLASTICITY_RUN_HEAD_RUNNER_HPP
#define ATTENTION_PLASTICITY_RUN_HEAD_RUNNER_HPP

// Running the heads of a plan (dump_layout.hpp) on worker threads: the one run loop of
// ap_analyze and of the Python module's analyze_dump. A worker takes the next head, loads its
// query folder and the key folder of its GQA group (shared with the other query heads of the
// group, loaded once and freed after the last of them), analyzes it with the library's
// analyze_head and keeps only the formatted rows (csv_rows.hpp). A head that fails is
// recorded with its file and reason; the other heads go on.
//
// How a folder is read is the caller's: a folder_loader gives views of the tokens and an
// owner that keeps their storage alive (load_npy_folder for the NPY layout; the Python module
// adds qk-sniffer's Parquet layout). Whatever the loader, the same checks run here, so the
// rows and the errors do not depend on the front end.

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "../io/csv_rows.hpp"
#include "../io/npy_dump.hpp"
#include "analyze_config.hpp"
#include "dump_layout.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// One folder of a dump as views of its tokens (float or double vectors, int64 columns).
struct loaded_folder
{
    using tokens_type =
        std::variant<attention_plasticity::tokens_view<float>, attention_plasticity::tokens_view<double>>;

    explicit loaded_folder(tokens_type views) : tokens(std::move(views)) {}

    std::string folder;
    std::string vector_file;  // the file named in errors about the vectors
    std::size_t n = 0;
    std::size_t d = 0;
    std::int64_t sliding_window = 0;  // query folders; 0 = none (docs/method.md §1.4)
    tokens_type tokens;
    std::shared_ptr<const void> owner;  // keeps the storage of the views alive
};

/// Reads one folder (path, whether to read the sliding window); throws input_error naming the
/// file. Called from worker threads, concurrently.
using folder_loader = std::function<loaded_folder(const std::string& folder, bool with_sliding_window)>;

/// A folder of the NPY layout (npy_dump.hpp), viewed in place: the owner is the loaded folder,
/// which holds the mapping of its vector.npy.
inline loaded_folder load_npy_folder(const std::string& folder, bool with_sliding_window)
{
    auto data = std::make_shared<const io::folder_data>(io::load_folder(folder, with_sliding_window));
    loaded_folder out(io::with_tokens(*data, [](const auto& view) { return loaded_folder::tokens_type(view); }));
    out.folder = data->folder;
    out.vector_file = data->vector_file;
    out.n = data->n;
    out.d = data->d;
    out.sliding_window = data->sliding_window;
    out.owner = std::move(data);
    return out;
}

/// Key folders shared by the query heads of a GQA group: loaded by the first query head of
/// the group that needs them, freed when the last one of the run has released them.
class key_cache
{
public:
    using value = std::shared_ptr<const loaded_folder>;
    using key_id = std::pair<std::size_t, std::size_t>;  // (layer, k_head)

    /// `heads`: the query heads of the run (each acquires its group's keys once).
    key_cache(const std::vector<head_task>& heads, folder_loader loader) : m_loader(std::move(loader))
    {
        for (const auto& h : heads)
        {
            ++m_users[{h.layer, h.k_head}];
        }
    }

    value acquire(const std::string& folder, const key_id& id)
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
                promise.set_value(std::make_shared<const loaded_folder>(m_loader(folder, false)));
            }
            catch (...)
            {
                promise.set_exception(std::current_exception());
            }
        }
        return future.get();  // rethrows the loading error for every head of the group
    }

    void release(const key_id& id)
    {
        value dropped;  // destroyed after the lock is released (an owner may take other locks)
        std::lock_guard<std::mutex> lock(m_mutex);
        auto it = m_entries.find(id);
        if (it != m_entries.end() && --it->second.remaining == 0)
        {
            if (it->second.future.valid()
                && it->second.future.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
            {
                try
                {
                    dropped = it->second.future.get();
                }
                catch (...)
                {
                }
            }
            m_entries.erase(it);
        }
    }

    const folder_loader& loader() const { return m_loader; }

private:
    struct entry
    {
        std::shared_future<value> future;
        std::size_t remaining = 0;
    };
    folder_loader m_loader;
    std::map<key_id, std::size_t> m_users;
    std::mutex m_mutex;
    std::map<key_id, entry> m_entries;
};

/// Throws input_error naming the examples table (examples.csv) and the id when an example id of
/// `folder` has no row in it (docs/method.md §1.1).
inline void require_documents(const attention_plasticity::example_documents& documents, const loaded_folder& folder)
{
    std::visit(
        [&](const auto& tokens) {
            const std::int64_t* ids = tokens.example_id.data();
            const std::size_t n = tokens.example_id.size();
            for (std::size_t i = 0; i < n; ++i)
            {
                if ((i == 0 || ids[i] != ids[i - 1]) && documents.find(ids[i]) == nullptr)
                {
                    throw io::input_error(documents.source, "has no row for example id " + std::to_string(ids[i])
                                                                + " (of " + folder.folder
                                                                + "); every example needs its document "
                                                                  "(docs/method.md §1.1)");
                }
            }
        },
        folder.tokens);
}

/// The analysis of one query head; throws input_error naming the file for bad input.
inline io::head_rows analyze_one(const analyze_config& config, const dump_scan& scan, key_cache& cache,
                             const head_task& task)
{
    namespace ap = attention_plasticity;
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
        throw io::input_error(k_folder, "folder not found (the keys of query head " + std::to_string(q_head)
                                        + "'s GQA group, key head " + std::to_string(k_head) + ")");
    }
    const key_cache::value k = cache.acquire(k_folder, id);
    if (k->n < 1)
    {
        throw io::input_error(k->vector_file, "has no keys (0 rows)");
    }
    const loaded_folder q = cache.loader()(head_folder_path(config.data_root, layer, q_head, 'q'), true);
    if (q.n < 2)
    {
        throw io::input_error(q.vector_file, "needs at least 2 queries, has " + std::to_string(q.n)
                                           + (q.n == 1 ? " row" : " rows"));
    }
    if (q.d != k->d)
    {
        throw io::input_error(q.vector_file, "d mismatch: queries have d = " + std::to_string(q.d) + " but "
                                             + k->vector_file + " has d = " + std::to_string(k->d));
    }
    ap::head_id hid;
    hid.layer = static_cast<std::int64_t>(layer);
    hid.q_head = static_cast<std::int64_t>(q_head);
    hid.k_head = static_cast<std::int64_t>(k_head);
    ap::head_options options = config.options;
    options.sliding_window = q.sliding_window;
    if (options.documents)
    {
        // §1.1: every example of the head's folders has a row in examples.csv.
        require_documents(*options.documents, q);
        require_documents(*options.documents, *k);
    }
    try
    {
        // Views of what was loaded, float32 or float64 each: nothing is converted or copied.
        return std::visit(
            [&](const auto& queries, const auto& keys) {
                ap::head_result result = ap::analyze_head(queries, keys, hid, options);
                io::head_rows rows = io::format_head(result);
                rows.undefined_sequence_errors =
                    options.confidence_intervals && options.sampling_unit == ap::sampling_unit::sequence
                    && std::isnan(result.metrics.ap_overall_se) && !std::isnan(result.metrics.ap_overall_bias);
                if (config.keep_results)
                {
                    rows.result = std::make_shared<const ap::head_result>(std::move(result));
                }
                return rows;
            },
            q.tokens, k->tokens);
    }
    catch (const std::bad_alloc&)
    {
        throw;
    }
    catch (const std::exception& e)
    {
        // The library checks what the loader does not (it names no file): the head's folder.
        throw io::input_error(q.folder, e.what());
    }
}

/// Why a head failed: the file and the reason ("error: layer L q_head H: FILE: reason").
struct head_failure
{
    std::string file;
    std::string reason;

    /// "FILE: reason".
    std::string message() const { return file + ": " + reason; }
};

/// The run's heads, in the plan's order: the rows of each analyzed head, or why it failed
/// (neither for a head that a stopped run did not reach).
struct run_state
{
    std::vector<std::optional<io::head_rows>> results;
    std::vector<std::optional<head_failure>> failures;
    std::vector<double> seconds;
    std::string thread_note;  // "" unless fewer worker threads than asked could be started
};

/// Told of every head when it is done; called from the worker threads, concurrently.
using head_done_callback = std::function<void(std::size_t index, const head_task& task, const head_failure* failure)>;

/// Analyzes the heads of `plan` on `threads` threads (the calling thread is one of them).
/// When `stop` is given and becomes true, the workers take no new head.
inline void run_heads(const analyze_config& config, const dump_scan& scan, const head_plan& plan,
                      std::size_t threads, const folder_loader& loader, const head_done_callback& on_done,
                      run_state& state, const std::atomic<bool>* stop = nullptr)
{
    const std::size_t total = plan.heads.size();
    state.results.assign(total, std::nullopt);
    state.failures.assign(total, std::nullopt);
    state.seconds.assign(total, 0.0);
    key_cache cache(plan.heads, loader);
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t index = next++; index < total; index = next++)
        {
            if (stop != nullptr && stop->load())
            {
                break;
            }
            const head_task& task = plan.heads[index];
            const auto start = std::chrono::steady_clock::now();
            std::optional<head_failure> failure;
            const std::string q_folder = head_folder_path(config.data_root, task.layer, task.q_head, 'q');
            try
            {
                state.results[index] = analyze_one(config, scan, cache, task);
            }
            catch (const io::input_error& e)
            {
                failure = head_failure{e.file(), e.reason()};
            }
            catch (const std::bad_alloc&)
            {
                failure = head_failure{q_folder, "out of memory"};
            }
            catch (const std::exception& e)
            {
                failure = head_failure{q_folder, e.what()};
            }
            state.seconds[index] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            state.failures[index] = failure;
            on_done(index, task, failure ? &*failure : nullptr);
        }
    };
    std::vector<std::thread> pool;
    std::string refused;
    for (std::size_t t = 1; t < threads; ++t)
    {
        try
        {
            pool.emplace_back(worker);
        }
        catch (const std::system_error& e)
        {
            // No more threads (a process limit, no memory): the workers started so far and
            // this one do the work; the results do not depend on how many there are.
            refused = e.code().message();
            break;
        }
    }
    worker();
    for (auto& t : pool)
    {
        t.join();
    }
    if (!refused.empty())
    {
        state.thread_note = "note: only " + std::to_string(pool.size() + 1) + " of the " + std::to_string(threads)
                            + " worker threads could be started (" + refused + "); the heads ran on "
                            + std::to_string(pool.size() + 1);
    }
}

/// "error: layer L q_head H: FILE: reason", the line a failed head is reported with.
inline std::string failure_line(const head_task& task, const head_failure& failure)
{
    return "error: layer " + std::to_string(task.layer) + " q_head " + std::to_string(task.q_head) + ": "
           + failure.message();
}

/// The formatted rows of the analyzed heads, in the plan's order (= (layer, q_head)).
inline std::vector<const io::head_rows*> analyzed_rows(const run_state& state)
{
    std::vector<const io::head_rows*> rows;
    for (const auto& r : state.results)
    {
        if (r)
        {
            rows.push_back(&*r);
        }
    }
    return rows;
}
}  // namespace attention_plasticity::run

#endif
