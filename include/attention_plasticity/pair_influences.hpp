#ifndef ATTENTION_PLASTICITY_PAIR_INFLUENCES_HPP
#define ATTENTION_PLASTICITY_PAIR_INFLUENCES_HPP

// What a bucket's pairs bring to the sequence-level errors of docs/method.md §8.3 (the
// pair_sequence and pair_deviation of a bucket_estimate): pair_sequences, the example id of each
// pair's keys, and pair_deviations, each pair's PP minus its cell's mean. Part of the intervals
// topic (intervals.hpp).

#include <cstddef>
#include <cstdint>
#include <vector>

#include <xtensor/xexpression.hpp>

#include "cells.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"

namespace attention_plasticity
{
/// The example id of each pair of the cells (docs/method.md §8.3): the sequence of its keys,
/// `key_example_ids` indexed by the pairs' rows (those of the key table the key buckets were
/// grouped from), in the cells' order (as a bucket's pair_plasticity).
template <class EE>
std::vector<std::int64_t> pair_sequences(const std::vector<cell_pairs>& cells, const xt::xexpression<EE>& key_example_ids)
{
    constexpr const char* fn = "pair_sequences";
    const auto ids = detail::as_vector<std::int64_t>(key_example_ids, fn, "key_example_ids");
    std::vector<std::int64_t> out;
    out.reserve(detail::total_pairs(cells));
    for (const cell_pairs& cell : cells)
    {
        for (std::size_t p = 0; p < cell.pairs.size(); ++p)
        {
            const std::size_t row = cell.pairs.first(p);
            if (row >= ids.size)
            {
                detail::throw_invalid(fn, "a pair of cell (", cell.q_bucket, ", ", cell.k_bucket, ") uses key row ", row,
                                      " but key_example_ids has ", ids.size, " entries");
            }
            out.push_back(ids[row]);
        }
    }
    return out;
}

/// Each pair's PP minus the mean PP of its cell (docs/method.md §8.3), in the cells' order.
template <class EP>
std::vector<double> pair_deviations(const xt::xexpression<EP>& pair_plasticity, const std::vector<cell_pairs>& cells)
{
    constexpr const char* fn = "pair_deviations";
    const auto pp = detail::as_vector<double>(pair_plasticity, fn, "pair_plasticity");
    const std::size_t total = detail::total_pairs(cells);
    if (pp.size != total)
    {
        detail::throw_invalid(fn, "pair_plasticity has ", pp.size, " entries but the cells hold ", total, " pairs");
    }
    detail::require_finite(fn, "pair_plasticity", pp);
    std::vector<double> out(total);
    std::size_t at = 0;
    for (const cell_pairs& cell : cells)
    {
        const std::size_t count = cell.pairs.size();
        double mean = 0.0;
        for (std::size_t p = 0; p < count; ++p)
        {
            mean += pp[at + p];
        }
        mean /= static_cast<double>(count > 0 ? count : 1);
        for (std::size_t p = 0; p < count; ++p)
        {
            out[at + p] = pp[at + p] - mean;
        }
        at += count;
    }
    return out;
}
}  // namespace attention_plasticity

#endif
