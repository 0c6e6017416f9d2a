#ifndef ATTENTION_PLASTICITY_CELLS_HPP
#define ATTENTION_PLASTICITY_CELLS_HPP

// The cells of a head (docs/method.md §2.11-2.13): the key buckets grouped into examples,
// the key buckets eligible for a query bucket, the key pairs of a cell (query bucket j, key
// bucket c) drawn from the cell's own seeded stream, and the plasticity of every cell of a
// query bucket with the bucket's AP_j, from one batched kernel call.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "detail/dots.hpp"
#include "detail/errors.hpp"
#include "detail/matrix.hpp"
#include "detail/finite.hpp"
#include "detail/row_source.hpp"
#include "detail/rows.hpp"
#include "detail/simd.hpp"
#include "plasticity.hpp"
#include "query_model.hpp"
#include "sampler.hpp"
#include "seeds.hpp"

namespace attention_plasticity
{
/// The keys of one key bucket, ready for the eligibility rule and the pair sampler.
struct key_bucket
{
    std::int64_t bucket = 0;
    std::int64_t max_position = 0;  // the largest position of its keys (docs/method.md §2.11)
    example_groups examples;        // its keys by example, ordered by position (§2.12)
};

namespace detail
{
    inline std::vector<key_bucket> group_key_buckets_raw(const std::int64_t* positions, const std::int64_t* buckets,
                                                         const std::int64_t* example_ids, std::size_t n)
    {
        std::vector<key_bucket> result;
        for (const auto& [bucket, rows] : rows_by_bucket(buckets, n))
        {
            key_bucket kb;
            kb.bucket = bucket;
            kb.max_position = std::numeric_limits<std::int64_t>::min();
            for (std::size_t r : rows)
            {
                kb.max_position = std::max(kb.max_position, positions[r]);
            }
            kb.examples = group_examples(rows, positions, example_ids);
            result.push_back(std::move(kb));
        }
        return result;
    }
}  // namespace detail

/// The key buckets of a head in increasing id (docs/method.md §2.11-2.12): for each, its
/// largest key position and its keys grouped into examples (the keys with one example id,
/// ordered by position; example.rows are rows of the given columns). Positions must be >= 0.
template <class EP, class EB, class EE>
std::vector<key_bucket> group_key_buckets(const xt::xexpression<EP>& positions, const xt::xexpression<EB>& buckets,
                                          const xt::xexpression<EE>& example_ids)
{
    constexpr const char* fn = "group_key_buckets";
    const auto p = detail::as_vector<std::int64_t>(positions, fn, "positions");
    const auto b = detail::as_vector<std::int64_t>(buckets, fn, "buckets");
    const auto e = detail::as_vector<std::int64_t>(example_ids, fn, "example_ids");
    if (b.size != p.size || e.size != p.size)
    {
        detail::throw_invalid(fn, "positions, buckets and example_ids must have one entry per key, got ", p.size, ", ",
                              b.size, " and ", e.size);
    }
    for (std::size_t i = 0; i < p.size; ++i)
    {
        if (p[i] < 0)
        {
            detail::throw_domain(fn, "positions[", i, "] = ", p[i], " is negative");
        }
    }
    return detail::group_key_buckets_raw(p.data, b.data, e.data, p.size);
}

/// The key buckets eligible for query bucket j with mean position tau_j (docs/method.md
/// §2.11), as indices into key_buckets (in increasing bucket id, as group_key_buckets returns
/// them): the buckets c < j; with a sliding window of w > 0 tokens, only those with c = j - 1
/// or a key position > tau_j - w. sliding_window <= 0 means none. `origin`: positions and tau
/// are compared as position - origin > (tau - origin) - w, `tau` being then tau_j - origin (exact
/// for positions far from 0, docs/method.md §2.3; origin 0: the positions themselves).
inline std::vector<std::size_t> eligible_key_buckets(const std::vector<key_bucket>& key_buckets, std::int64_t q_bucket,
                                                     double tau, std::int64_t sliding_window, double origin = 0.0)
{
    if (detail::is_non_finite(tau))
    {
        detail::throw_domain("eligible_key_buckets", "tau must be finite, got ", tau);
    }
    std::vector<std::size_t> eligible;
    for (std::size_t index = 0; index < key_buckets.size(); ++index)
    {
        const key_bucket& kb = key_buckets[index];
        if (kb.bucket >= q_bucket)
        {
            break;
        }
        if (sliding_window > 0 && kb.bucket != q_bucket - 1
            && !(static_cast<double>(kb.max_position) - origin > tau - static_cast<double>(sliding_window)))
        {
            continue;
        }
        eligible.push_back(index);
    }
    return eligible;
}

/// The key pairs of one cell (query bucket j, key bucket c); first/second are rows of the key
/// table the key bucket was grouped from.
struct cell_pairs
{
    std::int64_t q_bucket = 0;
    std::int64_t k_bucket = 0;
    key_pairs pairs;
};

namespace detail
{
    /// num_pairs pairs of the sampler (§5) over the examples of a key bucket from rng(stream_seed);
    /// none when no example has 2 keys or num_pairs is 0. Errors name `fn`.
    inline cell_pairs cell_pairs_from_stream(const key_bucket& keys, std::int64_t q_bucket, std::size_t num_pairs,
                                             double max_rel_dist, std::uint64_t stream_seed, const char* fn)
    {
        check_max_rel_dist(fn, max_rel_dist);
        cell_pairs cell;
        cell.q_bucket = q_bucket;
        cell.k_bucket = keys.bucket;
        if (num_pairs > 0 && keys.examples.can_form_pair())
        {
            rng generator(stream_seed);
            cell.pairs = sample_grouped_key_pairs(keys.examples, num_pairs, max_rel_dist, generator, fn);
        }
        else
        {
            cell.pairs = make_key_pairs(0);
        }
        return cell;
    }
}  // namespace detail

/// The key pairs of cell (q_bucket, keys.bucket) (docs/method.md §2.12): num_pairs pairs of the
/// key-pair sampler (§5) over the examples of the key bucket, from rng(cell_pair_seed(
/// pair_sampler_seed, j, c)) (§2.15); none when no example has 2 keys or num_pairs is 0.
inline cell_pairs cell_key_pairs(const key_bucket& keys, std::int64_t q_bucket, std::size_t num_pairs,
                                 double max_rel_dist, std::uint64_t pair_sampler_seed)
{
    return detail::cell_pairs_from_stream(keys, q_bucket, num_pairs, max_rel_dist,
                                          cell_pair_seed(pair_sampler_seed, q_bucket, keys.bucket), "cell_key_pairs");
}

/// The plasticity of one cell (a row of head_bucket_plasticity.csv).
struct cell_plasticity
{
    std::int64_t q_bucket = 0;
    std::int64_t k_bucket = 0;
    double plasticity = 0.0;  // mean PP of its pairs; NaN when n_pairs == 0
    std::size_t n_pairs = 0;
    double plasticity_empirical = std::numeric_limits<double>::quiet_NaN();  // docs/method.md §8.2, when computed
};

/// The cells of one query bucket and the bucket's plasticity, with what every pair gave: the
/// pairs are those of the cells, cell after cell in the order given, each cell's in its order
/// (the rows of bucket_key_differences).
struct bucket_plasticity_result
{
    std::vector<cell_plasticity> cells;  // in the order of the cells given
    double plasticity = std::numeric_limits<double>::quiet_NaN();  // AP_j; NaN without pairs
    std::size_t n_pairs = 0;
    xt::xtensor<double, 1> pair_plasticity;  // PP of every pair (docs/method.md §2.13)
    pair_moments moments;                    // its m and v as the kernel returned them (§4, §4.6)
};

namespace detail
{
    /// The number of pairs in all the cells.
    inline std::size_t total_pairs(const std::vector<cell_pairs>& cells)
    {
        std::size_t total = 0;
        for (const auto& cell : cells)
        {
            total += cell.pairs.size();
        }
        return total;
    }

    /// The rows of keys_rot of every pair of the cells, cell after cell: (first, second).
    inline std::pair<xt::xtensor<std::size_t, 1>, xt::xtensor<std::size_t, 1>> pair_rows(
        const std::vector<cell_pairs>& cells)
    {
        const std::size_t total = total_pairs(cells);
        xt::xtensor<std::size_t, 1> first = xt::xtensor<std::size_t, 1>::from_shape({total});
        xt::xtensor<std::size_t, 1> second = xt::xtensor<std::size_t, 1>::from_shape({total});
        std::size_t at = 0;
        for (const auto& cell : cells)
        {
            for (std::size_t p = 0; p < cell.pairs.size(); ++p, ++at)
            {
                first(at) = cell.pairs.first(p);
                second(at) = cell.pairs.second(p);
            }
        }
        return {std::move(first), std::move(second)};
    }

    /// The cells' own checks for the public function `fn`: first and second of one size, every
    /// pair's rows below `rows` (the rows of the table the pairs index; the error says
    /// "<table_has><rows><unit>"), then check_row(row) on each row a pair uses.
    template <class CheckRow>
    void check_cell_rows(const char* fn, const std::vector<cell_pairs>& cells, std::size_t rows,
                         const char* table_has, const char* unit, CheckRow&& check_row)
    {
        for (std::size_t c = 0; c < cells.size(); ++c)
        {
            const key_pairs& pairs = cells[c].pairs;
            if (pairs.first.size() != pairs.second.size())
            {
                throw_invalid(fn, "cells[", c, "] has ", pairs.first.size(), " first but ", pairs.second.size(),
                              " second rows");
            }
            for (std::size_t p = 0; p < pairs.size(); ++p)
            {
                for (std::size_t row : {pairs.first(p), pairs.second(p)})
                {
                    if (row >= rows)
                    {
                        throw_invalid(fn, "cells[", c, "] pair ", p, " uses key row ", row, " but ", table_has, rows,
                                      unit);
                    }
                    check_row(row);
                }
            }
        }
    }

    /// The checks of the cells against keys_rot (n x d): pair rows in range, keys they use finite.
    template <class T>
    void check_cells(const char* fn, const matrix_view<T>& keys, const std::vector<cell_pairs>& cells)
    {
        check_cell_rows(fn, cells, keys.rows, "keys_rot has ", " rows", [&](std::size_t row) {
            if (any_non_finite(keys.row(row), keys.cols))
            {
                throw_non_finite_row(fn, "keys_rot", keys.row(row), row, keys.cols);
            }
        });
    }

    /// bucket_key_differences for the public function `fn` (its errors name fn): the cells
    /// checked against keys_rot, then the differences of their pairs' rows.
    template <class T, class EK>
    auto checked_bucket_key_differences(const char* fn, const xt::xexpression<EK>& keys_rot,
                                        const std::vector<cell_pairs>& cells)
    {
        const auto keys = as_matrix<source_type_t<EK>>(keys_rot, fn, "keys_rot");
        check_cells(fn, keys, cells);
        const auto rows = pair_rows(cells);
        return key_differences<T>(keys_rot, rows.first, rows.second);
    }
}  // namespace detail

/// The key differences w = k1 - k2 of every pair of the cells (docs/method.md §2.12), cell after
/// cell, as the rows of one (total pairs) x d matrix: the W of the kernel (§4.4) for a query
/// bucket. T: the value type of the result (T = void: the keys' value type).
template <class T = void, class EK>
auto bucket_key_differences(const xt::xexpression<EK>& keys_rot, const std::vector<cell_pairs>& cells)
{
    return detail::checked_bucket_key_differences<T>("bucket_key_differences", keys_rot, cells);
}

namespace detail
{
    /// The cells and AP_j of a query bucket from a value for each pair of its cells, cell after
    /// cell (docs/method.md §2.14): a cell's value is the mean over its pairs (NaN without pairs),
    /// AP_j the mean over all pairs (NaN without any). The moments are left empty.
    inline bucket_plasticity_result bucket_result_of_pairs(const std::vector<cell_pairs>& cells,
                                                           xt::xtensor<double, 1> pair_values)
    {
        bucket_plasticity_result result;
        double bucket_sum = 0.0;
        std::size_t at = 0;
        for (const auto& cell : cells)
        {
            double cell_sum = 0.0;
            const std::size_t count = cell.pairs.size();
            for (std::size_t p = 0; p < count; ++p, ++at)
            {
                cell_sum += pair_values(at);
            }
            bucket_sum += cell_sum;
            result.cells.push_back({cell.q_bucket, cell.k_bucket,
                                    count ? cell_sum / static_cast<double>(count)
                                          : std::numeric_limits<double>::quiet_NaN(),
                                    count});
        }
        result.n_pairs = at;
        result.plasticity = at ? bucket_sum / static_cast<double>(at) : std::numeric_limits<double>::quiet_NaN();
        result.pair_plasticity = std::move(pair_values);
        result.moments = pair_moments{xt::xtensor<double, 1>::from_shape({0}), xt::xtensor<double, 1>::from_shape({0})};
        return result;
    }

    /// docs/method.md §2.13-2.14 for one query bucket: differences(first, second) gives the key
    /// differences W (pairs x d, of value type T) of the pairs' rows (xt::xtensor<size_t, 1>
    /// each), for the pairs of the bucket cell by cell, kernel_block_rows at a time (the blocks
    /// the kernel uses inside one call over all of them: the same values, W never held whole).
    template <class T, class Differences>
    bucket_plasticity_result query_bucket_plasticity_of(const std::vector<cell_pairs>& cells,
                                                        const bucket_query_model& model, Differences&& differences)
    {
        const auto rows_of_pairs = pair_rows(cells);
        const xt::xtensor<std::size_t, 1>& first = rows_of_pairs.first;
        const xt::xtensor<std::size_t, 1>& second = rows_of_pairs.second;
        const std::size_t total = first.size();
        pair_moments moments{xt::xtensor<double, 1>::from_shape({total}), xt::xtensor<double, 1>::from_shape({total})};
        xt::xtensor<double, 1> pp = xt::xtensor<double, 1>::from_shape({total});
        std::optional<structured_operands<double, double>> operands;
        for (std::size_t b0 = 0; b0 < total; b0 += kernel_block_rows)
        {
            const std::size_t rows = std::min(kernel_block_rows, total - b0);
            xt::xtensor<std::size_t, 1> block_first = xt::xtensor<std::size_t, 1>::from_shape({rows});
            xt::xtensor<std::size_t, 1> block_second = xt::xtensor<std::size_t, 1>::from_shape({rows});
            std::copy(first.begin() + static_cast<std::ptrdiff_t>(b0),
                      first.begin() + static_cast<std::ptrdiff_t>(b0 + rows), block_first.begin());
            std::copy(second.begin() + static_cast<std::ptrdiff_t>(b0),
                      second.begin() + static_cast<std::ptrdiff_t>(b0 + rows), block_second.begin());
            const xt::xtensor<T, 2> w = differences(block_first, block_second);
            // structured_pair_moments, its checks of the model made once (at the first block).
            if (!operands)
            {
                operands.emplace("structured_pair_moments", w.shape()[1], model.position_mean,
                                 model.position_variance, model.semantic.mean, model.semantic.covariance);
            }
            const pair_moments block =
                operands->template moments<T>("structured_pair_moments", as_matrix<T>(w, "structured_pair_moments",
                                                                                      "differences"));
            for (std::size_t p = 0; p < rows; ++p)
            {
                moments.mean(b0 + p) = block.mean(p);
                moments.variance(b0 + p) = block.variance(p);
                pp(b0 + p) = pair_plasticity_from_moments(block.mean(p), block.variance(p));
            }
        }
        bucket_plasticity_result result = bucket_result_of_pairs(cells, std::move(pp));
        result.moments = std::move(moments);
        return result;
    }

#ifdef AP_SIMD_DISPATCH
    /// The differences of `count` pairs of float rows (rows[2p], rows[2p + 1]) of a source that
    /// reflects them (factors computed, keys.reflection_factors null) or not (keys.reflection
    /// null), in AVX2: each row's reflection factor 2 x.v from its float values with the signs
    /// in `oriented` (s_j v_j; float_rows8_dots, eight rows at a time), then per component
    /// ((s_j a_j) - f_a v_j) - ((s_j b_j) - f_b v_j): the operations of load and of the
    /// difference, in their order, without FMA (the same bits). False when a difference is
    /// not finite (the caller reports it).
    AP_SIMD_AVX2 inline bool float_pair_differences_avx2(const row_source<float>& keys, const float* const* rows,
                                                         std::size_t count, const double* oriented, double* out)
    {
        const std::size_t d = keys.cols;
        const std::size_t d8 = d - d % 8;
        const std::size_t d4 = d - d % 4;
        const double* v = keys.reflection;
        const double* sign = keys.sign;
        double scale[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        if (v != nullptr)
        {
            if (count == 4)
            {
                float_rows8_dots<false>(rows, d8, oriented, nullptr, scale, nullptr);
                for (std::size_t r = 0; r < 8; ++r)
                {
                    for (std::size_t j = d8; j < d; ++j)
                    {
                        scale[r] += static_cast<double>(rows[r][j]) * oriented[j];
                    }
                }
            }
            else
            {
                for (std::size_t r = 0; r < 2 * count; ++r)
                {
                    for (std::size_t j = 0; j < d; ++j)
                    {
                        scale[r] += static_cast<double>(rows[r][j]) * oriented[j];
                    }
                }
            }
            for (std::size_t r = 0; r < 2 * count; ++r)
            {
                scale[r] = 2.0 * scale[r];
            }
        }
        __m256d bad = _mm256_setzero_pd();
        for (std::size_t p = 0; p < count; ++p)
        {
            const float* a = rows[2 * p];
            const float* b = rows[2 * p + 1];
            double* o = out + p * d;
            const __m256d fa = _mm256_set1_pd(scale[2 * p]);
            const __m256d fb = _mm256_set1_pd(scale[2 * p + 1]);
            std::size_t j = 0;
            for (; j < d4; j += 4)
            {
                __m256d xa = _mm256_cvtps_pd(_mm_loadu_ps(a + j));
                __m256d xb = _mm256_cvtps_pd(_mm_loadu_ps(b + j));
                if (sign != nullptr)
                {
                    const __m256d s = _mm256_loadu_pd(sign + j);
                    xa = _mm256_mul_pd(s, xa);
                    xb = _mm256_mul_pd(s, xb);
                }
                if (v != nullptr)
                {
                    const __m256d vj = _mm256_loadu_pd(v + j);
                    xa = _mm256_sub_pd(xa, _mm256_mul_pd(fa, vj));
                    xb = _mm256_sub_pd(xb, _mm256_mul_pd(fb, vj));
                }
                const __m256d diff = _mm256_sub_pd(xa, xb);
                _mm256_storeu_pd(o + j, diff);
                bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_sub_pd(diff, diff), _mm256_setzero_pd(), _CMP_NEQ_UQ));
            }
            bool tail_bad = false;
            for (; j < d; ++j)
            {
                double xa = static_cast<double>(a[j]);
                double xb = static_cast<double>(b[j]);
                if (sign != nullptr)
                {
                    xa = sign[j] * xa;
                    xb = sign[j] * xb;
                }
                if (v != nullptr)
                {
                    xa = reflected(xa, scale[2 * p], v[j]);
                    xb = reflected(xb, scale[2 * p + 1], v[j]);
                }
                o[j] = xa - xb;
                tail_bad = tail_bad || is_non_finite(o[j]);
            }
            if (tail_bad)
            {
                return false;
            }
        }
        return _mm256_movemask_pd(bad) == 0;
    }
#endif

    /// Key differences W(p) = keys[first(p)] - keys[second(p)] of the rows of a source, in
    /// double: the rows of a few pairs are read together (the pipeline's source orients and
    /// reflects them as it reads), the rows of the pairs after them requested from memory
    /// meanwhile. A difference that is not finite gets key_differences' error.
    template <class TK, class EI>
    xt::xtensor<double, 2> key_row_differences(const row_source<TK>& keys, const EI& first, const EI& second)
    {
        const std::size_t n = first.size();
        const std::size_t d = keys.cols;
        xt::xtensor<double, 2> w = xt::xtensor<double, 2>::from_shape({n, d});
        constexpr std::size_t group = 4;  // pairs read together
        constexpr std::size_t ahead = 4;  // groups requested ahead
        std::size_t ids[2 * group];
        std::vector<double> rows(2 * group * d);
#ifdef AP_SIMD_DISPATCH
        // Float rows with their factors computed here (the pipeline's keys): straight from the
        // caller's values, the signs folded into v for the factors (s_j x_j v_j exactly).
        std::vector<double> oriented;
        bool fast = false;
        if constexpr (std::is_same<TK, float>::value)
        {
            fast = cpu_has_avx2() && (keys.reflection == nullptr || keys.reflection_factors == nullptr);
            if (fast && keys.reflection != nullptr)
            {
                oriented.resize(d);
                for (std::size_t j = 0; j < d; ++j)
                {
                    oriented[j] = keys.sign != nullptr ? keys.sign[j] * keys.reflection[j] : keys.reflection[j];
                }
            }
        }
#endif
        for (std::size_t p = 0; p < n && p < ahead * group; ++p)
        {
            keys.prefetch(first(p));
            keys.prefetch(second(p));
        }
        for (std::size_t p0 = 0; p0 < n; p0 += group)
        {
            const std::size_t count = std::min(group, n - p0);
            for (std::size_t p = p0 + ahead * group; p < n && p < p0 + (ahead + 1) * group; ++p)
            {
                keys.prefetch(first(p));
                keys.prefetch(second(p));
            }
            for (std::size_t p = 0; p < count; ++p)
            {
                ids[2 * p] = first(p0 + p);
                ids[2 * p + 1] = second(p0 + p);
            }
#ifdef AP_SIMD_DISPATCH
            if constexpr (std::is_same<TK, float>::value)
            {
                if (fast)
                {
                    const float* in[2 * group];
                    for (std::size_t r = 0; r < 2 * count; ++r)
                    {
                        in[r] = keys.raw(ids[r]);
                    }
                    if (float_pair_differences_avx2(keys, in, count, oriented.data(), w.data() + p0 * d))
                    {
                        continue;
                    }
                    // A difference that is not finite: the plain path below names it.
                }
            }
#endif
            keys.load_rows(ids, 2 * count, rows.data());
            for (std::size_t p = 0; p < count; ++p)
            {
                const double* a = rows.data() + 2 * p * d;
                const double* b = a + d;
                double* out = w.data() + (p0 + p) * d;
                for (std::size_t j = 0; j < d; ++j)
                {
                    out[j] = a[j] - b[j];
                }
                check_difference_row("key_differences", out, a, b, ids[2 * p], ids[2 * p + 1], d);
            }
        }
        return w;
    }

    /// query_bucket_plasticity_of with the differences of the rows of a source (the pipeline:
    /// the caller's keys, kept, oriented and reflected as they are read; docs/method.md §2.12).
    template <class TK>
    bucket_plasticity_result query_bucket_plasticity_raw(const row_source<TK>& keys,
                                                         const std::vector<cell_pairs>& cells,
                                                         const bucket_query_model& model)
    {
        return query_bucket_plasticity_of<double>(cells, model, [&](const auto& first, const auto& second) {
            return key_row_differences(keys, first, second);
        });
    }
}  // namespace detail

/// Cell and bucket plasticity of one query bucket (docs/method.md §2.13-2.14): for every pair
/// (k1, k2) of every cell, w = k1 - k2 of the rotated keys keys_rot (n x d), m = w^T mean and
/// v = w^T cov w of the bucket's query model (§2.10), PP = 4 p (1 - p) with p = Phi(m / sqrt v)
/// (the degenerate rule of §2.13 when v <= 0), all pairs in one batched kernel call (§4).
/// A cell's plasticity is the mean PP of its pairs (NaN without pairs); AP_j the mean PP over
/// all pairs of all the cells. The result also holds every pair's PP and moments (m, v), in
/// the order of bucket_key_differences (for the extensions of docs/method.md §8). T: the
/// precision of the kernel's products (T = void: the keys' value type); sums in double.
template <class T = void, class EK>
bucket_plasticity_result query_bucket_plasticity(const xt::xexpression<EK>& keys_rot,
                                                 const std::vector<cell_pairs>& cells,
                                                 const bucket_query_model& model)
{
    using value_type = std::conditional_t<std::is_void<T>::value, detail::expression_value_t<EK>, T>;
    constexpr const char* fn = "query_bucket_plasticity";
    const auto keys = detail::as_matrix<value_type>(keys_rot, fn, "keys_rot");
    if (keys.cols == 0 || model.semantic.mean.size() + 1 != keys.cols
        || model.semantic.covariance.shape()[0] != keys.cols - 1
        || model.semantic.covariance.shape()[1] != keys.cols - 1)
    {
        detail::throw_invalid(fn, "keys_rot has d = ", keys.cols, " columns but the model's semantic mean has ",
                              model.semantic.mean.size(), " entries and covariance ",
                              model.semantic.covariance.shape()[0], " x ", model.semantic.covariance.shape()[1],
                              " (d - 1 each)");
    }
    detail::check_cells(fn, keys, cells);
    return detail::query_bucket_plasticity_of<value_type>(cells, model, [&](const auto& first, const auto& second) {
        return key_differences<value_type>(keys_rot, first, second);
    });
}
}  // namespace attention_plasticity

#endif
