#ifndef ATTENTION_PLASTICITY_DETAIL_PARALLEL_HPP
#define ATTENTION_PLASTICITY_DETAIL_PARALLEL_HPP

// Parallel loops of the steps inside one head (head_options::threads): a fixed list of tasks
// whose results do not depend on which thread runs them, so that every result is identical
// for any number of threads (docs/method.md §7.1). The tasks are cut by the data (fixed column
// ranges, row chunks, buckets), never by the thread count, and reduced in task order.
//
// OpenBLAS (the pthreads build) would start its own threads inside every BLAS call of a
// worker: while workers run, it is set to one thread (when the program has OpenBLAS).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "openblas.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// The worker threads of a head: 0 and 1 both mean "the calling thread only".
    inline std::size_t worker_count(std::size_t threads) noexcept
    {
        return std::max<std::size_t>(1, threads);
    }

    /// While alive: OpenBLAS runs every call on the calling thread (set to 1 thread when it had
    /// more, and set back afterwards). The setting is process-wide in OpenBLAS 0.3.21.
    class single_threaded_blas_scope
    {
    public:
        explicit single_threaded_blas_scope(bool active)
        {
#ifdef ATTENTION_PLASTICITY_HAS_OPENBLAS_HOOKS
            if (active && openblas_get_num_threads != nullptr && openblas_set_num_threads != nullptr)
            {
                const int current = openblas_get_num_threads();
                if (current > 1)
                {
                    openblas_set_num_threads(1);
                    m_restore = current;
                }
            }
#else
            (void)active;
#endif
        }

        ~single_threaded_blas_scope()
        {
#ifdef ATTENTION_PLASTICITY_HAS_OPENBLAS_HOOKS
            if (m_restore > 1)
            {
                openblas_set_num_threads(m_restore);
            }
#endif
        }

        single_threaded_blas_scope(const single_threaded_blas_scope&) = delete;
        single_threaded_blas_scope& operator=(const single_threaded_blas_scope&) = delete;

    private:
        int m_restore = 0;
    };

    /// Runs task(index, worker) for every index in [0, count) on min(threads, count) threads,
    /// the calling one included; worker in [0, threads) names the thread (for its scratch
    /// buffers). Tasks are taken in increasing index. A task must write only its own results.
    /// When tasks throw, the exception of the lowest index is rethrown once every thread has
    /// stopped (the one a serial loop would have met first); later tasks may be skipped.
    template <class Task>
    void parallel_for(std::size_t count, std::size_t threads, Task&& task)
    {
        const std::size_t workers = std::min(worker_count(threads), count);
        if (workers <= 1)
        {
            for (std::size_t i = 0; i < count; ++i)
            {
                task(i, std::size_t(0));
            }
            return;
        }
        std::atomic<std::size_t> next{0};
        std::atomic<std::size_t> failed_at{count};
        std::mutex mutex;
        std::exception_ptr error;
        auto run = [&](std::size_t worker) {
            for (std::size_t i = next++; i < count; i = next++)
            {
                if (i > failed_at.load())
                {
                    continue;  // a lower task has failed: the result is that error
                }
                try
                {
                    task(i, worker);
                }
                catch (...)
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    if (i < failed_at.load())
                    {
                        failed_at = i;
                        error = std::current_exception();
                    }
                }
            }
        };
        std::vector<std::thread> pool;
        pool.reserve(workers - 1);
        try
        {
            for (std::size_t w = 1; w < workers; ++w)
            {
                pool.emplace_back(run, w);
            }
        }
        catch (...)
        {
            // No thread could be started: the workers that exist (and this one) do the work.
        }
        run(0);
        for (auto& t : pool)
        {
            t.join();
        }
        if (error)
        {
            std::rethrow_exception(error);
        }
    }

    /// The pieces of [0, n) in runs of `chunk` (the last one shorter): [i chunk, min(n, (i+1) chunk)).
    struct chunks
    {
        std::size_t n;
        std::size_t chunk;

        std::size_t count() const noexcept { return chunk == 0 ? 0 : (n + chunk - 1) / chunk; }
        std::size_t begin(std::size_t i) const noexcept { return i * chunk; }
        std::size_t end(std::size_t i) const noexcept { return std::min(n, (i + 1) * chunk); }
    };

    /// [0, n) cut into at most `parts` runs of a multiple of `align` each (the last one shorter):
    /// the column ranges of passes whose results per column do not depend on the grouping (each
    /// column summed over the rows in order), so that one thread reads whole rows and several
    /// threads read wide runs of them.
    inline chunks even_chunks(std::size_t n, std::size_t parts, std::size_t align) noexcept
    {
        const std::size_t units = (n + align - 1) / align;
        const std::size_t p = std::max<std::size_t>(1, std::min(parts, units));
        return chunks{n, std::max<std::size_t>(1, (units + p - 1) / p) * align};
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
