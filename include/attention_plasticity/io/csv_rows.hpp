#ifndef ATTENTION_PLASTICITY_IO_CSV_ROWS_HPP
#define ATTENTION_PLASTICITY_IO_CSV_ROWS_HPP

// The CSVs of docs/method.md §3 (and §8.1): their names and headers, and the rows of one head.
// Rows of a head are formatted as soon as the head is done (in the worker); the files are
// assembled from the heads' rows in (layer, q_head) order, so the bytes depend neither on the
// number of threads nor on which process analyzed which head (a merge of shards assembles
// the same bytes). Numbers and text: csv_format.hpp, the one formatting of every program.

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "csv_format.hpp"
#include "result_file.hpp"
#include "table_columns.hpp"

namespace attention_plasticity::io
{
/// A row of a table with one row per item of a head (a cell, a profile row, a component, ...):
/// the head (for its identifier columns) and the item.
template <class Item>
struct head_item
{
    const attention_plasticity::head_result& head;
    const Item& item;
};

inline const attention_plasticity::head_result& head_of(const attention_plasticity::head_result& r)
{
    return r;
}

template <class Item>
const attention_plasticity::head_result& head_of(const head_item<Item>& row)
{
    return row.head;
}

/// `own` after the identifier columns every table starts with: layer, q_head, k_head (§3.1).
template <class Row, std::size_t N>
constexpr std::array<column<Row>, N + 3> head_table(const column<Row> (&own)[N])
{
    std::array<column<Row>, N + 3> all{
        {integer_column<Row>("layer", [](const Row& row) { return head_of(row).id.layer; }),
         integer_column<Row>("q_head", [](const Row& row) { return head_of(row).id.q_head; }),
         integer_column<Row>("k_head", [](const Row& row) { return head_of(row).id.k_head; })}};
    for (std::size_t i = 0; i < N; ++i)
    {
        all[3 + i] = own[i];
    }
    return all;
}

/// A count (std::size_t in the result) as an integer column.
inline std::int64_t count_value(std::size_t n)
{
    return static_cast<std::int64_t>(n);
}

// The rows of each table of docs/method.md §3 (§3.2-§3.7), and their columns: the one definition
// of what each column holds, in the order of the file. emit_head() and the headers below come
// from these lists (and the Python package's column types, python/src/bind_tables.cpp); a column
// is added here (and in method.md §3, which tests/run/test_csv_rows.cpp compares with these).
using metrics_row = attention_plasticity::head_result;
using bucket_row = head_item<attention_plasticity::cell_plasticity>;
using profile_row = head_item<attention_plasticity::bucket_profile>;
using component_row = head_item<std::size_t>;  // the component's index
using distance_row = head_item<attention_plasticity::distance_plasticity_bin>;
using influence_row = head_item<attention_plasticity::sequence_influence>;

inline constexpr auto metrics_columns = head_table<metrics_row>({
    integer_column<metrics_row>("n_q_tokens", [](const metrics_row& r) { return count_value(r.metrics.n_q_tokens); }),
    integer_column<metrics_row>("n_k_tokens", [](const metrics_row& r) { return count_value(r.metrics.n_k_tokens); }),
    integer_column<metrics_row>("d_model", [](const metrics_row& r) { return count_value(r.metrics.d_model); }),
    real_column<metrics_row>("q_R2_pos", [](const metrics_row& r) { return r.metrics.q_R2_pos; }),
    real_column<metrics_row>("q_beta_norm", [](const metrics_row& r) { return r.metrics.q_beta_norm; }),
    real_column<metrics_row>("q_R2_scalar", [](const metrics_row& r) { return r.metrics.q_R2_scalar; }),
    real_column<metrics_row>("q_mae_baseline", [](const metrics_row& r) { return r.metrics.q_mae_baseline; }),
    real_column<metrics_row>("q_mae_proj", [](const metrics_row& r) { return r.metrics.q_mae_proj; }),
    real_column<metrics_row>("q_mae_ratio", [](const metrics_row& r) { return r.metrics.q_mae_ratio; }),
    real_column<metrics_row>("q_resid0_skew", [](const metrics_row& r) { return r.metrics.q_resid0_skew; }),
    real_column<metrics_row>("q_resid0_kurt", [](const metrics_row& r) { return r.metrics.q_resid0_kurt; }),
    real_column<metrics_row>("q_resid0_ks_p", [](const metrics_row& r) { return r.metrics.q_resid0_ks_p; }),
    real_column<metrics_row>("q_noise_med_abs_skew", [](const metrics_row& r) { return r.metrics.q_noise_med_abs_skew; }),
    real_column<metrics_row>("q_noise_med_abs_kurt", [](const metrics_row& r) { return r.metrics.q_noise_med_abs_kurt; }),
    real_column<metrics_row>("q_noise_med_ks_p", [](const metrics_row& r) { return r.metrics.q_noise_med_ks_p; }),
    real_column<metrics_row>("q_noise_frac_ks_p_lt_alpha",
                             [](const metrics_row& r) { return r.metrics.q_noise_frac_ks_p_lt_alpha; }),
    real_column<metrics_row>("ap_overall", [](const metrics_row& r) { return r.metrics.ap_overall; }),
    real_column<metrics_row>("ap_first20", [](const metrics_row& r) { return r.metrics.ap_first20; }),
    real_column<metrics_row>("ap_last20", [](const metrics_row& r) { return r.metrics.ap_last20; }),
    real_column<metrics_row>("ap_drop", [](const metrics_row& r) { return r.metrics.ap_drop; }),
    real_column<metrics_row>("ap_empirical_overall", [](const metrics_row& r) { return r.metrics.ap_empirical_overall; }),
    real_column<metrics_row>("ap_empirical_overall_se",
                             [](const metrics_row& r) { return r.metrics.ap_empirical_overall_se; }),
    real_column<metrics_row>("ap_overall_se", [](const metrics_row& r) { return r.metrics.ap_overall_se; }),
    real_column<metrics_row>("ap_overall_bias", [](const metrics_row& r) { return r.metrics.ap_overall_bias; }),
    real_column<metrics_row>("ap_overall_ci_low", [](const metrics_row& r) { return r.metrics.ap_overall_ci_low; }),
    real_column<metrics_row>("ap_overall_ci_high", [](const metrics_row& r) { return r.metrics.ap_overall_ci_high; }),
    real_column<metrics_row>("ap_overall_corrected", [](const metrics_row& r) { return r.metrics.ap_overall_corrected; }),
    real_column<metrics_row>("ap_first20_se", [](const metrics_row& r) { return r.metrics.ap_first20_se; }),
    real_column<metrics_row>("ap_first20_bias", [](const metrics_row& r) { return r.metrics.ap_first20_bias; }),
    real_column<metrics_row>("ap_last20_se", [](const metrics_row& r) { return r.metrics.ap_last20_se; }),
    real_column<metrics_row>("ap_last20_bias", [](const metrics_row& r) { return r.metrics.ap_last20_bias; }),
    real_column<metrics_row>("ap_drop_se", [](const metrics_row& r) { return r.metrics.ap_drop_se; }),
    real_column<metrics_row>("ap_drop_bias", [](const metrics_row& r) { return r.metrics.ap_drop_bias; }),
    real_column<metrics_row>("context_length", [](const metrics_row& r) { return r.metrics.context_length; }),
    integer_column<metrics_row>("n_sequences", [](const metrics_row& r) { return count_value(r.metrics.n_sequences); }),
    real_column<metrics_row>("bias_strength", [](const metrics_row& r) { return r.metrics.bias_strength; }),
    real_column<metrics_row>("bias_strength_se", [](const metrics_row& r) { return r.metrics.bias_strength_se; }),
    real_column<metrics_row>("drift_slope_k", [](const metrics_row& r) { return r.metrics.drift_slope_k; }),
    real_column<metrics_row>("drift_query_mean", [](const metrics_row& r) { return r.metrics.drift_query_mean; }),
    real_column<metrics_row>("pc0_r_q", [](const metrics_row& r) { return r.metrics.pc0_r_q; }),
    real_column<metrics_row>("pc0_r_k", [](const metrics_row& r) { return r.metrics.pc0_r_k; }),
    text_column<metrics_row>("pca_class",
                             [](const metrics_row& r) -> std::string_view {
                                 return attention_plasticity::pca_class_name(r.metrics.pca_class);
                             }),
    integer_column<metrics_row>("n_documents", [](const metrics_row& r) { return count_value(r.metrics.n_documents); }),
});

inline constexpr auto bucket_columns = head_table<bucket_row>({
    integer_column<bucket_row>("q_bucket", [](const bucket_row& r) { return r.item.q_bucket; }),
    integer_column<bucket_row>("k_bucket", [](const bucket_row& r) { return r.item.k_bucket; }),
    real_column<bucket_row>("plasticity", [](const bucket_row& r) { return r.item.plasticity; }),
    integer_column<bucket_row>("n_pairs", [](const bucket_row& r) { return count_value(r.item.n_pairs); }),
    real_column<bucket_row>("plasticity_empirical", [](const bucket_row& r) { return r.item.plasticity_empirical; }),
});

inline constexpr auto profile_columns = head_table<profile_row>({
    integer_column<profile_row>("q_bucket", [](const profile_row& r) { return r.item.q_bucket; }),
    real_column<profile_row>("tau", [](const profile_row& r) { return r.item.tau; }),
    integer_column<profile_row>("n_queries", [](const profile_row& r) { return count_value(r.item.n_queries); }),
    real_column<profile_row>("plasticity", [](const profile_row& r) { return r.item.plasticity; }),
    integer_column<profile_row>("n_pairs", [](const profile_row& r) { return count_value(r.item.n_pairs); }),
    real_column<profile_row>("plasticity_empirical", [](const profile_row& r) { return r.item.plasticity_empirical; }),
    real_column<profile_row>("plasticity_empirical_se",
                             [](const profile_row& r) { return r.item.plasticity_empirical_se; }),
    real_column<profile_row>("plasticity_se", [](const profile_row& r) { return r.item.plasticity_se; }),
    real_column<profile_row>("plasticity_bias", [](const profile_row& r) { return r.item.plasticity_bias; }),
    real_column<profile_row>("plasticity_ci_low", [](const profile_row& r) { return r.item.plasticity_ci_low; }),
    real_column<profile_row>("plasticity_ci_high", [](const profile_row& r) { return r.item.plasticity_ci_high; }),
    real_column<profile_row>("plasticity_corrected", [](const profile_row& r) { return r.item.plasticity_corrected; }),
    integer_column<profile_row>("small_bucket",
                                [](const profile_row& r) -> std::int64_t { return r.item.small_bucket ? 1 : 0; }),
});

inline constexpr auto component_columns = head_table<component_row>({
    integer_column<component_row>("component", [](const component_row& r) { return count_value(r.item); }),
    real_column<component_row>("component_r2", [](const component_row& r) { return r.head.component_r2(r.item); }),
    real_column<component_row>("weight", [](const component_row& r) { return r.head.component_weight(r.item); }),
});

inline constexpr auto distance_columns = head_table<distance_row>({
    real_column<distance_row>("key_distance_low", [](const distance_row& r) { return r.item.key_distance.low; }),
    real_column<distance_row>("key_distance_high", [](const distance_row& r) { return r.item.key_distance.high; }),
    real_column<distance_row>("query_distance_low", [](const distance_row& r) { return r.item.query_distance.low; }),
    real_column<distance_row>("query_distance_high", [](const distance_row& r) { return r.item.query_distance.high; }),
    real_column<distance_row>("plasticity", [](const distance_row& r) { return r.item.plasticity; }),
    integer_column<distance_row>("n_pairs", [](const distance_row& r) { return count_value(r.item.n_pairs); }),
});

inline constexpr auto influence_columns = head_table<influence_row>({
    integer_column<influence_row>("document_id", [](const influence_row& r) { return r.item.document_id; }),
    text_column<influence_row>("quantity",
                               [](const influence_row& r) -> std::string_view {
                                   return attention_plasticity::influence_quantity_name(r.item.quantity);
                               }),
    integer_column<influence_row>("q_bucket", [](const influence_row& r) { return r.item.q_bucket; }),
    real_column<influence_row>("influence", [](const influence_row& r) { return r.item.influence; }),
});

// The headers (without the line end), made from the lists.
inline const std::string metrics_header = header_text(metrics_columns);
inline const std::string bucket_header = header_text(bucket_columns);
inline const std::string profile_header = header_text(profile_columns);
inline const std::string component_header = header_text(component_columns);
inline const std::string distance_header = header_text(distance_columns);
inline const std::string influence_header = header_text(influence_columns);

inline const char* const metrics_csv = "head_metrics.csv";
inline const char* const bucket_csv = "head_bucket_plasticity.csv";
inline const char* const profile_csv = "head_profile.csv";
inline const char* const component_csv = "head_component_weights.csv";
inline const char* const distance_csv = "head_distance_plasticity.csv";
inline const char* const influence_csv = "head_sequence_influence.csv";

/// The rows of one head, one string per file, each row ending in '\n'.
struct head_rows
{
    std::string metrics;
    std::string buckets;
    std::string profile;
    std::string components;
    std::string distances;  // docs/method.md §8.1
    std::string influences;  // docs/method.md §8.3, with sequence_influences on
    // The head asked for sequence-level errors (§8.3) but has too few sequences (or queries
    // without example ids): its standard errors are NaN (the run says so).
    bool undefined_sequence_errors = false;
    /// The head's result itself, kept only when a run is asked to (analyze_config::keep_results:
    /// the Python package builds its DataFrames from the numbers, emit_head below).
    std::shared_ptr<const attention_plasticity::head_result> result;
};

/// The tables of result_tables(), by index.
enum table_index : std::size_t
{
    metrics_table,
    bucket_table,
    profile_table,
    component_table,
    distance_table,
    influence_table,
    table_count
};

/// The rows of one head, value by value, into `sink`, each table's through its column list
/// above: sink.row(table) starts a row of that table, sink.integer(i), sink.real(x) and
/// sink.text(s) give the next column (in the order of the table's header), sink.end() ends the
/// row. format_head() writes them as CSV text; the Python package collects them as arrays (its
/// DataFrames), so a column added to a list reaches both, with its type.
template <class Sink>
void emit_head(const attention_plasticity::head_result& r, Sink& sink)
{
    emit_static_row<metrics_columns>(metrics_table, r, sink);
    for (const auto& cell : r.cells)
    {
        emit_static_row<bucket_columns>(bucket_table, bucket_row{r, cell}, sink);
    }
    for (const auto& b : r.profile)
    {
        emit_static_row<profile_columns>(profile_table, profile_row{r, b}, sink);
    }
    for (const auto& bin : r.distance_map)
    {
        emit_static_row<distance_columns>(distance_table, distance_row{r, bin}, sink);
    }
    for (std::size_t c = 0; c < r.component_r2.size(); ++c)
    {
        emit_static_row<component_columns>(component_table, component_row{r, c}, sink);
    }
    for (const auto& e : r.sequence_influences)
    {
        emit_static_row<influence_columns>(influence_table, influence_row{r, e}, sink);
    }
}

/// One CSV of a result set: file name, header, and which rows of a head it holds.
struct csv_table
{
    const char* file;
    const char* header;
    std::string head_rows::*rows;
    std::vector<column_schema> columns;  // the header's columns with their types
};

inline const std::vector<csv_table>& result_tables()
{
    static const std::vector<csv_table> tables = {
        {metrics_csv, metrics_header.c_str(), &head_rows::metrics, schema_of(metrics_columns)},
        {bucket_csv, bucket_header.c_str(), &head_rows::buckets, schema_of(bucket_columns)},
        {profile_csv, profile_header.c_str(), &head_rows::profile, schema_of(profile_columns)},
        {component_csv, component_header.c_str(), &head_rows::components, schema_of(component_columns)},
        {distance_csv, distance_header.c_str(), &head_rows::distances, schema_of(distance_columns)},
        {influence_csv, influence_header.c_str(), &head_rows::influences, schema_of(influence_columns)}};
    return tables;
}

/// The rows of one head as the CSV text of each file (emit_head's values, comma-separated).
inline head_rows format_head(const attention_plasticity::head_result& r)
{
    // The one text sink (csv_format.hpp), each table's rows into that table's string.
    struct head_text_sink : csv_text_sink
    {
        head_rows& rows;

        explicit head_text_sink(head_rows& r) : csv_text_sink(r.metrics), rows(r) {}

        void row(table_index table)
        {
            write_to(rows.*(result_tables()[table].rows));
            csv_text_sink::row(table);
        }
    };
    head_rows rows;
    head_text_sink sink{rows};
    emit_head(r, sink);
    return rows;
}

inline std::vector<std::string> result_file_names()
{
    std::vector<std::string> names;
    for (const auto& table : result_tables())
    {
        names.emplace_back(table.file);
    }
    return names;
}

/// How many rows one head has in each file of result_tables(), in that order.
inline std::vector<std::uint64_t> row_counts(const head_rows& rows)
{
    std::vector<std::uint64_t> counts;
    for (const auto& table : result_tables())
    {
        const std::string& text = rows.*(table.rows);
        counts.push_back(static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n')));
    }
    return counts;
}

/// The files of a result set from the rows of its heads, in the order given (the caller
/// sorts by (layer, q_head)). The views point into `heads`, which must outlive the result.
inline std::vector<result_file> result_files(const std::vector<const head_rows*>& heads)
{
    std::vector<result_file> files;
    for (const auto& table : result_tables())
    {
        result_file file;
        file.name = table.file;
        file.pieces.emplace_back(table.header);
        file.pieces.emplace_back("\n");
        for (const head_rows* h : heads)
        {
            file.pieces.emplace_back(h->*(table.rows));
        }
        files.push_back(std::move(file));
    }
    return files;
}
}  // namespace attention_plasticity::io

#endif
