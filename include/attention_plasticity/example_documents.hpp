#ifndef ATTENTION_PLASTICITY_EXAMPLE_DOCUMENTS_HPP
#define ATTENTION_PLASTICITY_EXAMPLE_DOCUMENTS_HPP

// The document of each example (docs/method.md §1.1, §8.3): the sampling unit of the
// sequence-level errors is the document an example was cut from. Without this table each
// example is its own document. The run reads it from <data_root>/examples.csv
// (io/examples_table.hpp); analyze_head takes it through head_options::documents.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "detail/errors.hpp"

namespace attention_plasticity
{
/// example id -> document id, sorted by example id (distinct).
struct example_documents
{
    std::vector<std::int64_t> example_id;   // sorted, distinct
    std::vector<std::int64_t> document_id;  // the document of example_id[i]
    std::string source = "the examples table";  // names the table in messages (e.g. its file)

    /// The document of `example`, or nullptr when the table has no row for it.
    const std::int64_t* find(std::int64_t example) const noexcept
    {
        const auto it = std::lower_bound(example_id.begin(), example_id.end(), example);
        if (it == example_id.end() || *it != example)
        {
            return nullptr;
        }
        return document_id.data() + (it - example_id.begin());
    }

    /// Whether every example is its own document (document id = example id).
    bool is_identity() const noexcept { return example_id == document_id; }
};

/// The table of the given rows (any order): throws std::invalid_argument naming `fn` on sizes
/// that differ or an example id given twice.
inline example_documents make_example_documents(const std::vector<std::int64_t>& example_ids,
                                                const std::vector<std::int64_t>& document_ids,
                                                std::string source = "the examples table",
                                                const char* fn = "make_example_documents")
{
    if (example_ids.size() != document_ids.size())
    {
        detail::throw_invalid(fn, "example_ids has ", example_ids.size(), " entries but document_ids has ",
                              document_ids.size());
    }
    std::vector<std::size_t> order(example_ids.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return example_ids[a] < example_ids[b]; });
    example_documents out;
    out.source = std::move(source);
    out.example_id.reserve(order.size());
    out.document_id.reserve(order.size());
    for (std::size_t i : order)
    {
        if (!out.example_id.empty() && out.example_id.back() == example_ids[i])
        {
            detail::throw_invalid(fn, "example id ", example_ids[i], " has two rows in ", out.source);
        }
        out.example_id.push_back(example_ids[i]);
        out.document_id.push_back(document_ids[i]);
    }
    return out;
}

namespace detail
{
    /// The documents of `n` example ids into `out` (resized); throws std::invalid_argument
    /// naming `fn` for an example id without a row in the table.
    inline void documents_of(const example_documents& table, const std::int64_t* example_ids, std::size_t n,
                             std::vector<std::int64_t>& out, const char* fn)
    {
        out.resize(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            // The rows of an example usually follow each other: one search per run of rows.
            if (i > 0 && example_ids[i] == example_ids[i - 1])
            {
                out[i] = out[i - 1];
                continue;
            }
            const std::int64_t* document = table.find(example_ids[i]);
            if (document == nullptr)
            {
                throw_invalid(fn, "example id ", example_ids[i], " has no row in ", table.source,
                              " (docs/method.md §1.1: every example needs its document)");
            }
            out[i] = *document;
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif  // ATTENTION_PLASTICITY_EXAMPLE_DOCUMENTS_HPP
