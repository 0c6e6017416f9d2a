#ifndef ATTENTION_PLASTICITY_EMPIRICAL_HPP
#define ATTENTION_PLASTICITY_EMPIRICAL_HPP

// The model-free (empirical) attention plasticity (docs/method.md §8.2): for a key pair
// w = k1 - k2, the share p_hat of the ACTUAL queries q of the bucket with q.w > 0 (a tie q.w = 0
// counts one half), and from it the unbiased estimate of 4 p (1 - p),
//   PP_hat = (4 p_hat (1 - p_hat) n - t_hat) / (n - 1),  t_hat = share of ties,
// which is 4 p_hat (1 - p_hat) n / (n - 1) when there is no tie. The products q.w of all pairs
// and queries come from GEMMs over blocks (256 pairs x 512 queries), so no pairs x queries
// matrix is formed. Also the variance of a mean of such estimates over the query sample (the
// first-order U-statistic variance), for the intervals of §8.3.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

#include "cells.hpp"
#include "detail/blas.hpp"
#include "detail/errors.hpp"
#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "plasticity.hpp"

namespace attention_plasticity
{
/// How the queries of a sample choose within each pair (docs/method.md §8.2).
struct empirical_preferences
{
    xt::xtensor<double, 1> preference;    // p_hat: share with q.w > 0, ties counted one half
    xt::xtensor<double, 1> tie_fraction;  // t_hat: share with q.w = 0
    std::size_t n_queries = 0;            // n, the queries of the sample
};

namespace detail
{
    constexpr std::size_t empirical_pair_block = 256;
    constexpr std::size_t empirical_query_block = 512;

    /// Calls visit(pair index, query index, q.w) block by block over all pairs x queries: one
    /// GEMM of (pair block x d) by (d x query block) into a buffer of at most 256 x 512 values.
    template <class T, class Visit>
    void for_each_score(const matrix_view<T>& q, const matrix_view<T>& w, Visit&& visit)
    {
        const std::size_t d = q.cols;
        std::vector<T> scores(empirical_pair_block * empirical_query_block);
        for (std::size_t p0 = 0; p0 < w.rows; p0 += empirical_pair_block)
        {
            const std::size_t pb = std::min(empirical_pair_block, w.rows - p0);
            for (std::size_t i0 = 0; i0 < q.rows; i0 += empirical_query_block)
            {
                const std::size_t qb = std::min(empirical_query_block, q.rows - i0);
                gemm<T>(false, true, pb, qb, d, T(1), w.row(p0), w.ld, q.row(i0), q.ld, T(0), scores.data(), qb);
                for (std::size_t p = 0; p < pb; ++p)
                {
                    const T* row = scores.data() + p * qb;
                    visit(p0 + p, i0, row, qb);
                }
            }
        }
    }

    template <class T>
    empirical_preferences preferences_raw(const matrix_view<T>& q, const matrix_view<T>& w)
    {
        std::vector<std::size_t> wins(w.rows, 0), ties(w.rows, 0);
        if (q.cols > 0)
        {
            for_each_score(q, w, [&](std::size_t p, std::size_t, const T* scores, std::size_t count) {
                std::size_t above = 0, equal = 0;
                for (std::size_t i = 0; i < count; ++i)
                {
                    above += scores[i] > T(0) ? 1u : 0u;
                    equal += scores[i] == T(0) ? 1u : 0u;
                }
                wins[p] += above;
                ties[p] += equal;
            });
        }
        else
        {
            std::fill(ties.begin(), ties.end(), q.rows);  // d = 0: every score is 0
        }
        empirical_preferences result{xt::xtensor<double, 1>::from_shape({w.rows}),
                                     xt::xtensor<double, 1>::from_shape({w.rows}), q.rows};
        const auto n = static_cast<double>(q.rows);
        for (std::size_t p = 0; p < w.rows; ++p)
        {
            result.preference(p) = (static_cast<double>(wins[p]) + 0.5 * static_cast<double>(ties[p])) / n;
            result.tie_fraction(p) = static_cast<double>(ties[p]) / n;
        }
        return result;
    }

    inline double empirical_plasticity_raw(double preference, double tie_fraction, double n)
    {
        return (4.0 * preference * (1.0 - preference) * n - tie_fraction) / (n - 1.0);
    }

    /// The operands of an empirical step in the working type T, checked: 2-D, same d, finite.
    /// Errors name the queries `queries_name` and say where the differences' d comes from with
    /// `differences_have` (the arguments as the caller of `fn` named them).
    template <class T, class EQ, class EW>
    std::pair<matrix_view<T>, matrix_view<T>> empirical_operands(const char* fn, const xt::xexpression<EQ>& queries,
                                                                 const xt::xexpression<EW>& differences,
                                                                 std::size_t min_queries,
                                                                 const char* queries_name = "queries",
                                                                 const char* differences_have = "differences have")
    {
        auto q = as_matrix<T>(queries, fn, queries_name);
        auto w = as_matrix<T>(differences, fn, "differences");
        if (q.cols != w.cols)
        {
            throw_invalid(fn, queries_name, " have d = ", q.cols, " columns but ", differences_have, " d = ", w.cols);
        }
        if (q.rows < min_queries)
        {
            throw_invalid(fn, "needs at least ", min_queries, " queries, got ", q.rows);
        }
        require_finite(fn, queries_name, q);
        require_finite(fn, "differences", w);
        return {std::move(q), std::move(w)};
    }
}  // namespace detail

/// For every key difference w (a row of differences, P x d) and the n queries (n x d, n >= 1),
/// the share of queries with q.w > 0, ties q.w = 0 counted one half, and the share of ties
/// (docs/method.md §8.2). The products q.w are GEMMs in the working type T (T = void: the
/// differences' value type; double is advised, a tie is an exact 0). Shapes:
/// std::invalid_argument; non-finite values: std::domain_error.
template <class T = void, class EQ, class EW>
empirical_preferences pair_preferences(const xt::xexpression<EQ>& queries, const xt::xexpression<EW>& differences)
{
    using value_type = detail::working_type_t<T, EW>;
    static_assert(std::is_floating_point<value_type>::value, "pair_preferences: T must be float or double");
    const auto [q, w] = detail::empirical_operands<value_type>("pair_preferences", queries, differences, 1);
    return detail::preferences_raw(q, w);
}

/// The unbiased estimate of 4 p (1 - p) of every pair from its preferences (docs/method.md
/// §8.2): (4 p_hat (1 - p_hat) n - t_hat) / (n - 1), which is 4 p_hat (1 - p_hat) n / (n - 1)
/// without ties. It lies in [0, n / (n - 1)]: an unbiased estimate may exceed 1 (by at most
/// 1 / (n - 1)). R: the result's value type (R = void: double). n < 2: std::invalid_argument;
/// shares outside [0, 1] or sizes that disagree: std::domain_error / std::invalid_argument.
template <class R = void>
auto empirical_plasticity_from_preferences(const empirical_preferences& preferences)
{
    using result_type = std::conditional_t<std::is_void<R>::value, double, R>;
    constexpr const char* fn = "empirical_plasticity_from_preferences";
    const std::size_t count = preferences.preference.size();
    if (preferences.tie_fraction.size() != count)
    {
        detail::throw_invalid(fn, "preferences.preference has ", count, " entries but preferences.tie_fraction has ",
                              preferences.tie_fraction.size());
    }
    if (preferences.n_queries < 2)
    {
        detail::throw_invalid(fn, "needs n_queries >= 2 for an unbiased estimate, got ", preferences.n_queries);
    }
    const auto n = static_cast<double>(preferences.n_queries);
    xt::xtensor<result_type, 1> result = xt::xtensor<result_type, 1>::from_shape({count});
    for (std::size_t p = 0; p < count; ++p)
    {
        const double share = preferences.preference(p);
        const double ties = preferences.tie_fraction(p);
        if (!(share >= 0.0 && share <= 1.0) || !(ties >= 0.0 && ties <= 1.0))
        {
            detail::throw_domain(fn, "pair ", p, ": preference ", share, " and tie_fraction ", ties,
                                 " must lie in [0, 1]");
        }
        result(p) = static_cast<result_type>(detail::empirical_plasticity_raw(share, ties, n));
    }
    return result;
}

/// The empirical plasticity of every pair (docs/method.md §8.2): pair_preferences followed by
/// empirical_plasticity_from_preferences. n >= 2 queries. T as pair_preferences, R as
/// empirical_plasticity_from_preferences.
template <class T = void, class R = void, class EQ, class EW>
auto empirical_pair_plasticity(const xt::xexpression<EQ>& queries, const xt::xexpression<EW>& differences)
{
    using value_type = detail::working_type_t<T, EW>;
    static_assert(std::is_floating_point<value_type>::value, "empirical_pair_plasticity: T must be float or double");
    const auto [q, w] = detail::empirical_operands<value_type>("empirical_pair_plasticity", queries, differences, 2);
    return empirical_plasticity_from_preferences<R>(detail::preferences_raw(q, w));
}

namespace detail
{
    /// docs/method.md §8.2 for one query bucket from the preferences of its pairs' queries.
    inline bucket_plasticity_result bucket_empirical_of_preferences(const empirical_preferences& preferences,
                                                                    const std::vector<cell_pairs>& cells)
    {
        const std::size_t count = preferences.preference.size();
        xt::xtensor<double, 1> values = xt::xtensor<double, 1>::from_shape({count});
        const auto n = static_cast<double>(preferences.n_queries);
        for (std::size_t p = 0; p < count; ++p)
        {
            values(p) = empirical_plasticity_raw(preferences.preference(p), preferences.tie_fraction(p), n);
        }
        return bucket_result_of_pairs(cells, std::move(values));
    }
}  // namespace detail

/// The empirical cell and bucket plasticity of one query bucket (docs/method.md §8.2): for every
/// pair (k1, k2) of every cell, w = k1 - k2 of the rotated keys keys_rot (n x d) and the
/// empirical PP over the bucket's queries (m x d, m >= 2, in the same rotated basis: dot
/// products do not depend on the basis); a cell's value is the mean over its pairs (NaN
/// without pairs), AP_j the mean over all pairs. The result's pair_plasticity holds every
/// pair's empirical PP in the order of bucket_key_differences; its moments are empty.
/// T: the working type of the GEMMs (T = void: the keys' value type).
template <class T = void, class EK, class EQ>
bucket_plasticity_result query_bucket_empirical_plasticity(const xt::xexpression<EK>& keys_rot,
                                                           const std::vector<cell_pairs>& cells,
                                                           const xt::xexpression<EQ>& bucket_queries)
{
    using value_type = detail::working_type_t<T, EK>;
    static_assert(std::is_floating_point<value_type>::value,
                  "query_bucket_empirical_plasticity: T must be float or double");
    constexpr const char* fn = "query_bucket_empirical_plasticity";
    const auto w = detail::checked_bucket_key_differences<value_type>(fn, keys_rot, cells);
    // (w has the columns of keys_rot)
    const auto [q, wv] = detail::empirical_operands<value_type>(fn, bucket_queries, w, 2, "bucket_queries",
                                                                "keys_rot has");
    return detail::bucket_empirical_of_preferences(detail::preferences_raw(q, wv), cells);
}

namespace detail
{
    /// f_i = (1/P) sum_p (1 - 2 p_hat_p) s_ip for every query: 4 (f_i - mean f) / n is query i's
    /// first-order influence on the mean empirical PP of the pairs (docs/method.md §8.3). Empty
    /// without pairs.
    template <class T>
    std::vector<double> empirical_query_scores_raw(const matrix_view<T>& q, const matrix_view<T>& w,
                                                   const empirical_preferences& preferences)
    {
        const std::size_t n = q.rows;
        const std::size_t pairs = w.rows;
        if (pairs == 0)
        {
            return {};
        }
        std::vector<double> weight(pairs);
        for (std::size_t p = 0; p < pairs; ++p)
        {
            weight[p] = (1.0 - 2.0 * preferences.preference(p)) / static_cast<double>(pairs);
        }
        std::vector<double> f(n, 0.0);
        if (q.cols > 0)
        {
            for_each_score(q, w, [&](std::size_t p, std::size_t i0, const T* scores, std::size_t count) {
                const double c = weight[p];
                double* fi = f.data() + i0;
                for (std::size_t i = 0; i < count; ++i)
                {
                    fi[i] += scores[i] > T(0) ? c : (scores[i] == T(0) ? 0.5 * c : 0.0);
                }
            });
        }
        return f;
    }

    /// (16 / n) * var_i(f_i), f_i of empirical_query_scores_raw, var with divisor n - 1.
    template <class T>
    double empirical_mean_variance_raw(const matrix_view<T>& q, const matrix_view<T>& w,
                                       const empirical_preferences& preferences)
    {
        const std::size_t n = q.rows;
        const std::vector<double> f = empirical_query_scores_raw(q, w, preferences);
        if (f.empty())
        {
            return 0.0;
        }
        double mean = 0.0;
        for (double x : f)
        {
            mean += x;
        }
        mean /= static_cast<double>(n);
        double sum_squares = 0.0;
        for (double x : f)
        {
            sum_squares += (x - mean) * (x - mean);
        }
        return 16.0 / static_cast<double>(n) * sum_squares / static_cast<double>(n - 1);
    }
}  // namespace detail

/// The variance, over the sample of n queries (n >= 2), of the mean of the empirical PP of the
/// pairs (docs/method.md §8.2-§8.3): each empirical PP is a U-statistic of the queries, their
/// mean has the first-order variance (16 / n) var_q(f(q)) with f(q) = (1/P) sum_p (1 - 2 p_p)
/// s_p(q), s_p(q) = 1, 1/2, 0 as q.w_p >, =, < 0; estimated with p_p = p_hat_p (preferences, as
/// pair_preferences returned them for these queries and differences) and the sample variance
/// of f over the queries. A second pass of GEMMs over the same blocks. The pairs are held fixed
/// (their sampling is not in this variance). T as pair_preferences.
template <class T = void, class EQ, class EW>
double empirical_plasticity_variance(const xt::xexpression<EQ>& queries, const xt::xexpression<EW>& differences,
                                     const empirical_preferences& preferences)
{
    using value_type = detail::working_type_t<T, EW>;
    static_assert(std::is_floating_point<value_type>::value, "empirical_plasticity_variance: T must be float or double");
    constexpr const char* fn = "empirical_plasticity_variance";
    const auto [q, w] = detail::empirical_operands<value_type>(fn, queries, differences, 2);
    if (preferences.preference.size() != w.rows || preferences.n_queries != q.rows)
    {
        detail::throw_invalid(fn, "preferences are of ", preferences.preference.size(), " pairs and ",
                              preferences.n_queries, " queries, but differences has ", w.rows,
                              " rows and queries has ", q.rows);
    }
    return detail::empirical_mean_variance_raw(q, w, preferences);
}
}  // namespace attention_plasticity

#endif
