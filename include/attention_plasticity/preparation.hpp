#ifndef ATTENTION_PLASTICITY_PREPARATION_HPP
#define ATTENTION_PLASTICITY_PREPARATION_HPP

// The first two steps of a head (docs/method.md §2.1-2.2): the orientation signs computed
// from all keys, and the rows kept by subsampling. Applying the signs is X * s (row-wise).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <type_traits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/errors.hpp"
#include "detail/matrix.hpp"
#include "detail/finite.hpp"
#include "detail/parallel.hpp"
#include "detail/rows.hpp"
#include "random.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// docs/method.md §2.1 over the rows of `keys` with their buckets: per-bucket sums in row
    /// order (buckets get slots in order of first appearance), then the signs; with several
    /// threads, each sums the rows of a group of buckets (the same sums). The same pass checks the rows: when a
    /// value is non-finite it stores the index of the first row holding one in `first_bad_row`
    /// and returns an empty vector.
    template <class T>
    std::vector<double> orientation_signs_raw(const matrix_view<T>& keys, const std::int64_t* buckets,
                                              std::size_t* first_bad_row, std::size_t threads = 1)
    {
        const std::size_t n = keys.rows;
        const std::size_t d = keys.cols;
        std::map<std::int64_t, std::size_t> slot_of;
        std::vector<std::size_t> slot(n);
        std::vector<std::size_t> counts;
        std::int64_t last_bucket = 0;
        std::size_t s = 0;
        for (std::size_t i = 0; i < n; ++i)
        {
            if (i == 0 || buckets[i] != last_bucket)  // runs of equal buckets: one lookup
            {
                s = slot_of.emplace(buckets[i], slot_of.size()).first->second;
                last_bucket = buckets[i];
                if (s == counts.size())
                {
                    counts.push_back(0);
                }
            }
            ++counts[s];
            slot[i] = s;
        }
        std::vector<double> sums(counts.size() * d, 0.0);
        // The buckets share the threads, in groups of about equal row counts (largest first):
        // each group's task reads only its own rows, all their columns, and sums each (bucket,
        // column) over the rows in order, whoever takes it (the same sums for any grouping).
        const std::size_t workers = std::min(worker_count(threads), counts.size());
        std::vector<std::size_t> group_of(counts.size(), 0);
        if (workers > 1)
        {
            std::vector<std::size_t> by_size(counts.size());
            std::iota(by_size.begin(), by_size.end(), std::size_t(0));
            std::stable_sort(by_size.begin(), by_size.end(),
                             [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
            std::vector<std::size_t> load(workers, 0);
            for (std::size_t k : by_size)
            {
                const std::size_t g =
                    static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
                group_of[k] = g;
                load[g] += counts[k];
            }
        }
        std::vector<char> non_finite(std::max<std::size_t>(1, workers), 0);
        parallel_for(std::max<std::size_t>(1, workers), threads, [&](std::size_t task, std::size_t) {
            typename float_bits<T>::type flags = 0;
            for (std::size_t i = 0; i < n; ++i)
            {
                if (group_of[slot[i]] != task)
                {
                    continue;
                }
                const T* row = keys.row(i);
                double* acc = sums.data() + slot[i] * d;
                for (std::size_t j = 0; j < d; ++j)
                {
                    acc[j] += static_cast<double>(row[j]);
                    flags |= non_finite_flag(row[j]);
                }
            }
            non_finite[task] = has_non_finite_flag<T>(flags) ? 1 : 0;
        });
        if (std::find(non_finite.begin(), non_finite.end(), char(1)) != non_finite.end())
        {
            for (std::size_t i = 0; i < n; ++i)
            {
                if (any_non_finite(keys.row(i), d))
                {
                    *first_bad_row = i;
                    return {};
                }
            }
        }
        std::vector<double> sign(d, 0.0);
        for (std::size_t k = 0; k < counts.size(); ++k)
        {
            for (std::size_t j = 0; j < d; ++j)
            {
                sign[j] += sums[k * d + j] / static_cast<double>(counts[k]);
            }
        }
        for (auto& value : sign)
        {
            value = value < 0.0 ? -1.0 : 1.0;
        }
        return sign;
    }

    /// docs/method.md §2.2 into `rows`.
    inline void subsample_rows_into(std::size_t n, std::size_t max_rows, std::uint64_t seed,
                                    std::vector<std::size_t>& rows)
    {
        if (n <= max_rows)
        {
            rows.resize(n);
            std::iota(rows.begin(), rows.end(), std::size_t(0));
            return;
        }
        rng generator(seed);
        rows = sample_without_replacement(n, max_rows, generator);
        std::sort(rows.begin(), rows.end());
    }
}  // namespace detail

/// The orientation of a head (docs/method.md §2.1): s_d = sign of the mean over key buckets of
/// the per-bucket mean of key component d, with 0 -> +1, from all keys (n x d) and their
/// bucket ids (n). Every query and key vector is then multiplied by s (X * s).
/// Throws std::invalid_argument on shapes, std::domain_error on a non-finite key. `threads`
/// share the columns (0 or 1: the calling thread only); any number gives the same bits.
template <class EK, class EB>
xt::xtensor<double, 1> orientation_signs(const xt::xexpression<EK>& keys, const xt::xexpression<EB>& key_buckets,
                                         std::size_t threads = 1)
{
    constexpr const char* fn = "orientation_signs";
    const auto k = detail::as_matrix<detail::float_or_double_t<EK>>(keys, fn, "keys");
    const auto b = detail::as_vector<std::int64_t>(key_buckets, fn, "key_buckets");
    if (b.size != k.rows)
    {
        detail::throw_invalid(fn, "key_buckets has ", b.size, " entries but keys has ", k.rows, " rows");
    }
    std::size_t bad_row = 0;
    const std::vector<double> signs = detail::orientation_signs_raw(k, b.data, &bad_row, threads);
    if (signs.size() != k.cols)
    {
        detail::throw_non_finite_row(fn, "keys", k.row(bad_row), bad_row, k.cols);
    }
    xt::xtensor<double, 1> result = xt::xtensor<double, 1>::from_shape({k.cols});
    std::copy(signs.begin(), signs.end(), result.begin());
    return result;
}

/// The rows kept by subsampling (docs/method.md §2.2), in increasing order: all n rows when
/// n <= max_rows, otherwise max_rows of them drawn uniformly without replacement with
/// rng(seed) by sample_without_replacement (random.hpp: a partial Fisher-Yates shuffle of
/// 0..n-1). The seeds of a head: seeds_of_head (seeds.hpp).
inline xt::xtensor<std::size_t, 1> subsample_rows(std::size_t n, std::size_t max_rows, std::uint64_t seed)
{
    std::vector<std::size_t> rows;
    detail::subsample_rows_into(n, max_rows, seed, rows);
    xt::xtensor<std::size_t, 1> result = xt::xtensor<std::size_t, 1>::from_shape({rows.size()});
    std::copy(rows.begin(), rows.end(), result.begin());
    return result;
}
}  // namespace attention_plasticity

#endif
