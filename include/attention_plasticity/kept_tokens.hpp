#ifndef ATTENTION_PLASTICITY_KEPT_TOKENS_HPP
#define ATTENTION_PLASTICITY_KEPT_TOKENS_HPP

// The rows of a head that docs/method.md §2.2 keeps, and the row sources that read them from
// the caller's buffers, oriented (§2.1): what analyze_head's steps and extensions read.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "detail/finite.hpp"
#include "detail/matrix.hpp"
#include "detail/row_source.hpp"
#include "example_documents.hpp"
#include "preparation.hpp"
#include "tokens.hpp"

namespace attention_plasticity
{
namespace detail
{
    template <class T>
    matrix_view<T> matrix_of(const tokens_view<T>& tokens)
    {
        matrix_view<T> v;
        v.data = tokens.vectors.data();
        v.rows = tokens.vectors.shape()[0];
        v.cols = tokens.vectors.shape()[1];
        v.ld = v.cols;
        return v;
    }

    inline matrix_view<double> matrix_of(const xt::xtensor<double, 2>& x)
    {
        matrix_view<double> v;
        v.data = x.data();
        v.rows = x.shape()[0];
        v.cols = x.shape()[1];
        v.ld = v.cols;
        return v;
    }

    /// Every vector of one kind is finite, else the error naming the first non-finite value.
    template <class T>
    void check_finite_rows(const tokens_view<T>& tokens, const char* name)
    {
        const matrix_view<T> x = matrix_of(tokens);
        require_finite("analyze_head", name, x.data, x.rows, x.cols, x.ld);
    }

    /// The rows of one kind kept by §2.2 and their columns. When every row is kept, nothing is
    /// copied (`rows` is empty and the columns point to the caller's).
    struct kept_tokens
    {
        std::vector<std::size_t> rows;  // the caller's rows kept, increasing; empty: all of them
        std::size_t n = 0;
        std::vector<double> t;          // positions as double (queries; keys for §8.5), else empty
        const std::int64_t* position = nullptr;
        const std::int64_t* bucket = nullptr;
        const std::int64_t* example_id = nullptr;
        // The sampling unit of each kept row (docs/method.md §8.3): its document (head_options::
        // documents), else its example id (then the same pointer as example_id).
        const std::int64_t* unit_id = nullptr;
        std::vector<std::int64_t> storage;  // the kept columns, when rows were left out
        std::vector<std::int64_t> unit_storage;  // the documents, with an examples table

        const std::size_t* index() const noexcept { return rows.empty() ? nullptr : rows.data(); }
    };

    /// The head's sampling units (docs/method.md §8.3): the distinct unit ids (documents) of the
    /// kept queries and keys, sorted (the queries' only when they have example ids); with
    /// `examples`, the distinct example ids instead.
    inline std::vector<std::int64_t> head_sequences(const kept_tokens& q, const kept_tokens& k, bool examples = false)
    {
        const std::int64_t* q_ids = examples ? q.example_id : q.unit_id;
        const std::int64_t* k_ids = examples ? k.example_id : k.unit_id;
        std::vector<std::int64_t> ids;
        if (q_ids != nullptr)
        {
            ids.assign(q_ids, q_ids + q.n);
        }
        ids.insert(ids.end(), k_ids, k_ids + k.n);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }

    /// Sets k.unit_id: the documents of its example ids by `documents` (std::invalid_argument
    /// for an example id without a row), or the example ids themselves without a table.
    inline void assign_units(kept_tokens& k, const example_documents* documents)
    {
        if (documents == nullptr || k.example_id == nullptr)
        {
            k.unit_id = k.example_id;
            return;
        }
        documents_of(*documents, k.example_id, k.n, k.unit_storage, "analyze_head");
        k.unit_id = k.unit_storage.data();
    }

    /// The rows kept by §2.2 (with rng(seed)) and their columns. With a check_name, when rows
    /// are left out, every row is checked for non-finite values first (the first pass over the
    /// kept rows checks only those).
    template <class T>
    kept_tokens kept_tokens_of(const tokens_view<T>& tokens, std::size_t max_rows, std::uint64_t seed,
                               const char* check_name, bool positions_as_double, bool with_example_id)
    {
        kept_tokens k;
        const std::size_t total = tokens.vectors.shape()[0];
        if (total > max_rows)
        {
            subsample_rows_into(total, max_rows, seed, k.rows);
        }
        k.n = k.rows.empty() ? total : k.rows.size();
        k.position = tokens.position.data();
        k.bucket = tokens.bucket.data();
        k.example_id = with_example_id ? tokens.example_id.data() : nullptr;
        if (k.n < total)
        {
            if (check_name != nullptr)
            {
                check_finite_rows(tokens, check_name);
            }
            const std::size_t columns = with_example_id ? 3 : 2;
            k.storage.resize(columns * k.n);
            for (std::size_t r = 0; r < k.n; ++r)
            {
                k.storage[r] = tokens.position(k.rows[r]);
                k.storage[k.n + r] = tokens.bucket(k.rows[r]);
                if (with_example_id)
                {
                    k.storage[2 * k.n + r] = tokens.example_id(k.rows[r]);
                }
            }
            k.position = k.storage.data();
            k.bucket = k.storage.data() + k.n;
            k.example_id = with_example_id ? k.storage.data() + 2 * k.n : nullptr;
        }
        k.unit_id = k.example_id;
        if (positions_as_double)
        {
            k.t.resize(k.n);
            for (std::size_t r = 0; r < k.n; ++r)
            {
                k.t[r] = static_cast<double>(k.position[r]);
            }
        }
        return k;
    }

    /// The kept rows of one kind, oriented (§2.1), read from the caller's buffer.
    template <class T>
    row_source<T> oriented_rows(const tokens_view<T>& tokens, const kept_tokens& kept, const std::vector<double>& sign)
    {
        row_source<T> s = rows_of(matrix_of(tokens));
        s.rows = kept.n;
        s.index = kept.index();
        s.sign = sign.data();
        return s;
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_KEPT_TOKENS_HPP
