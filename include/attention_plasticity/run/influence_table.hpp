// The influence table of a result set (head_sequence_influence.csv, docs/method.md §3.7) read as
// columns, bounded by the data it holds (§8.6; issue 33 item 3): read line by line (no line over
// max_influence_line_bytes), each row checked as it is read against the set's head_metrics.csv
// and head_profile.csv: its head is a head of the set, its quantity one of the head's (a bucket
// of head_profile.csv for ap_bucket), and no (head, quantity) has more rows than the head's
// documents (n_documents; n_sequences in sets written before it). So what is kept is at most
// heads x quantities x documents rows, and a sparse, repeated or oversized file is refused by its
// content at its first row beyond them, before memory grows with the file. read_results' reader
// (python/src/bind_dump.cpp); the comparison's own (compare_input.hpp) keeps the same bounds.

#ifndef ATTENTION_PLASTICITY_RUN_INFLUENCE_TABLE_HPP
#define ATTENTION_PLASTICITY_RUN_INFLUENCE_TABLE_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../io/csv_reader.hpp"
#include "../io/csv_rows.hpp"
#include "../io/examples_table.hpp"
#include "compare_input.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run
{

/// The influence table as columns (in the file's row order) and its bytes.
struct influence_table
{
    std::vector<std::int64_t> layer, q_head, k_head, document_id, q_bucket;
    std::vector<std::int8_t> quantity;  // an index into influence_quantity_names()
    std::vector<double> influence;
    std::string text;  // the file as read (header and rows, each ended by '\n')
};

/// The quantities of the influence table's rows: the head-level ones of the comparison
/// (compare_input.hpp's head_quantities), then ap_bucket.
inline std::vector<std::string> influence_quantity_names()
{
    std::vector<std::string> names;
    for (const auto& q : compare_detail::head_quantities)
    {
        names.emplace_back(q.name());
    }
    names.emplace_back("ap_bucket");
    return names;
}

namespace influence_detail
{
/// The integer `field` of `row` at `column`, parsed exactly as an int64 (ids beyond 2^53 are not
/// doubles); input_error naming the line and column otherwise.
inline std::int64_t exact_integer(const io::csv_row& row, const char* column)
{
    std::int64_t x = 0;
    if (!io::detail::parse_int64_exact(row.text(column), x))
    {
        throw row.error(column, "'" + row.text(column) + "' is not an integer");
    }
    return x;
}

/// A head of the set as the influence table is checked against it.
struct head_bound
{
    std::int64_t k_head = 0;
    std::int64_t documents = -1;  // -1: not written (no bound by documents)
    std::set<std::int64_t> buckets;
};
}  // namespace influence_detail

/// The influence table of the set `reader` reads (its head_metrics.csv and head_profile.csv given
/// as `metrics` and `profile`), as columns, each row checked and bounded as the file's comment
/// says. Throws io::input_error naming the file, the line and the problem.
inline influence_table read_influence_table(const result_set_reader& reader, const io::parsed_table& metrics,
                                              const io::parsed_table& profile)
{
    using influence_detail::exact_integer;
    const std::string file = reader.display(io::influence_csv);
    std::map<compare_detail::head_key, influence_detail::head_bound> heads;
    const char* documents_column = metrics.header().has("n_documents")   ? "n_documents"
                                   : metrics.header().has("n_sequences") ? "n_sequences"
                                                                         : nullptr;
    for (std::size_t r = 0; r < metrics.size(); ++r)
    {
        const io::csv_row row = metrics.row(r);
        influence_detail::head_bound& h = heads[{exact_integer(row, "layer"), exact_integer(row, "q_head")}];
        h.k_head = exact_integer(row, "k_head");
        if (documents_column != nullptr)
        {
            std::int64_t n = -1;
            if (io::detail::parse_int64_exact(row.text(documents_column), n) && n >= 0)
            {
                h.documents = n;
            }
        }
    }
    for (std::size_t r = 0; r < profile.size(); ++r)
    {
        const io::csv_row row = profile.row(r);
        const auto it = heads.find({exact_integer(row, "layer"), exact_integer(row, "q_head")});
        if (it != heads.end())
        {
            it->second.buckets.insert(exact_integer(row, "q_bucket"));
        }
    }
    // The rows the table may hold: each head's documents for each of its quantities.
    std::uintmax_t bound = 0;
    bool bounded = true;
    for (const auto& [key, h] : heads)
    {
        bounded = bounded && h.documents >= 0;
        bound += static_cast<std::uintmax_t>(std::max<std::int64_t>(h.documents, 0))
                 * (std::size(compare_detail::head_quantities) + h.buckets.size());
    }

    io::table_lines table(reader.lines(io::influence_csv, compare_detail::max_influence_line_bytes));
    const std::string& expected = io::influence_header;
    std::vector<std::string> schema;
    io::split_fields(expected, schema);
    bool same = table.header().width() == schema.size();
    for (std::size_t i = 0; same && i < schema.size(); ++i)
    {
        same = table.header().has(schema[i]) && table.header().index(schema[i]) == i;
    }
    if (!same)
    {
        throw io::input_error(file, "the header is not the one this version writes (expected '"
                                        + expected.substr(0, 80) + "...')");
    }
    const std::vector<std::string> names = influence_quantity_names();
    influence_table out;
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(std::filesystem::path(reader.files_dir()) / io::influence_csv, ec);
    // Reserved for the rows the table may hold, no more than its size allows (a row is at least
    // 20 bytes): no growth by doubling, and nothing for rows that are not there.
    const std::uintmax_t rows_fit = ec ? 0 : size / 20;
    const std::size_t reserve = static_cast<std::size_t>(bounded ? std::min(bound, rows_fit) : rows_fit / 4);
    for (auto* column : {&out.layer, &out.q_head, &out.k_head, &out.document_id, &out.q_bucket})
    {
        column->reserve(reserve);
    }
    out.quantity.reserve(reserve);
    out.influence.reserve(reserve);
    out.text = expected + "\n";
    std::map<std::tuple<std::int64_t, std::int64_t, int, std::int64_t>, std::int64_t> counts;
    while (table.next())
    {
        const io::csv_row row = table.row();
        const std::int64_t layer = exact_integer(row, "layer"), q_head = exact_integer(row, "q_head");
        const auto it = heads.find({layer, q_head});
        if (it == heads.end())
        {
            throw row.error(compare_detail::head_text(layer, q_head) + " has no row in " + io::metrics_csv);
        }
        const influence_detail::head_bound& h = it->second;
        const std::int64_t k_head = exact_integer(row, "k_head");
        if (k_head != h.k_head)
        {
            throw row.error("k_head", compare_detail::head_text(layer, q_head) + " has k_head " + row.text("k_head")
                                          + ", " + std::to_string(h.k_head) + " in " + io::metrics_csv);
        }
        const std::string& quantity = row.text("quantity");
        const auto q = std::find(names.begin(), names.end(), quantity);
        if (q == names.end())
        {
            throw row.error("quantity", "'" + quantity + "' is not ap_overall, ap_first20, ap_last20, ap_drop or ap_bucket");
        }
        const bool is_bucket = q + 1 == names.end();
        const std::int64_t bucket = exact_integer(row, "q_bucket");
        if (is_bucket ? h.buckets.count(bucket) == 0 : bucket != 0)
        {
            throw row.error("q_bucket", is_bucket ? compare_detail::head_text(layer, q_head) + " has no bucket "
                                                        + row.text("q_bucket") + " in " + io::profile_csv
                                                        + " (a table of another run?)"
                                                  : quantity + " has q_bucket '" + row.text("q_bucket")
                                                        + "' (0 on the head-level rows, docs/method.md §3.7)");
        }
        std::int64_t& count = counts[{layer, q_head, static_cast<int>(q - names.begin()), bucket}];
        if (h.documents >= 0 && count >= h.documents)
        {
            throw row.error(compare_detail::head_text(layer, q_head) + ", " + quantity
                            + (is_bucket ? " " + row.text("q_bucket") : std::string()) + ": more rows than the head's "
                            + std::to_string(h.documents) + " documents (" + documents_column + " in "
                            + io::metrics_csv + "): rows repeated, or a table of another run?");
        }
        ++count;
        out.layer.push_back(layer);
        out.q_head.push_back(q_head);
        out.k_head.push_back(k_head);
        out.document_id.push_back(exact_integer(row, "document_id"));
        out.quantity.push_back(static_cast<std::int8_t>(q - names.begin()));
        out.q_bucket.push_back(bucket);
        out.influence.push_back(row.real("influence"));
        // The row's bytes: its fields as read (no quoting, docs/method.md §3.1), in the header's order.
        for (std::size_t i = 0; i < schema.size(); ++i)
        {
            out.text += row.text(schema[i]);
            out.text += i + 1 == schema.size() ? '\n' : ',';
        }
    }
    return out;
}

}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_INFLUENCE_TABLE_HPP
