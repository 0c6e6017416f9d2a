#ifndef ATTENTION_PLASTICITY_IO_CSV_ROWS_HPP
#define ATTENTION_PLASTICITY_IO_CSV_ROWS_HPP

// The CSVs of docs/method.md §3 (and §8.1): their names and headers, and the rows of one head.
// Rows of a head are formatted as soon as the head is done (in the worker); the files are
// assembled from the heads' rows in (layer, q_head) order, so the bytes depend neither on the
// number of threads nor on which process analyzed which head (a merge of shards assembles
// the same bytes). Numbers: format_number() below, the one formatting of every program.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "result_file.hpp"

namespace attention_plasticity::io
{
inline const char* const metrics_header =
    "layer,q_head,k_head,n_q_tokens,n_k_tokens,d_model,q_R2_pos,q_beta_norm,q_R2_scalar,q_mae_baseline,"
    "q_mae_proj,q_mae_ratio,q_resid0_skew,q_resid0_kurt,q_resid0_ks_p,q_noise_med_abs_skew,"
    "q_noise_med_abs_kurt,q_noise_med_ks_p,q_noise_frac_ks_p_lt_alpha,ap_overall,ap_first20,ap_last20,ap_drop,"
    "ap_empirical_overall,ap_empirical_overall_se,ap_overall_se,ap_overall_bias,ap_overall_ci_low,ap_overall_ci_high,"
    "ap_overall_corrected,ap_first20_se,ap_first20_bias,ap_last20_se,ap_last20_bias,ap_drop_se,ap_drop_bias,"
    "context_length,n_sequences,bias_strength,drift_slope_k,drift_query_mean,pc0_r_q,pc0_r_k,pca_class";
inline const char* const bucket_header = "layer,q_head,k_head,q_bucket,k_bucket,plasticity,n_pairs,plasticity_empirical";
inline const char* const profile_header =
    "layer,q_head,k_head,q_bucket,tau,n_queries,plasticity,n_pairs,plasticity_empirical,plasticity_empirical_se,"
    "plasticity_se,plasticity_bias,plasticity_ci_low,plasticity_ci_high,plasticity_corrected,small_bucket";
inline const char* const component_header = "layer,q_head,k_head,component,component_r2,weight";
inline const char* const distance_header =
    "layer,q_head,k_head,key_distance_low,key_distance_high,query_distance_low,query_distance_high,plasticity,"
    "n_pairs";
inline const char* const influence_header = "layer,q_head,k_head,example_id,quantity,q_bucket,influence";

inline const char* const metrics_csv = "head_metrics.csv";
inline const char* const bucket_csv = "head_bucket_plasticity.csv";
inline const char* const profile_csv = "head_profile.csv";
inline const char* const component_csv = "head_component_weights.csv";
inline const char* const distance_csv = "head_distance_plasticity.csv";
inline const char* const influence_csv = "head_sequence_influence.csv";

/// "%.17g" (round-trips a double); NaN (of either sign) as "nan", infinities as "inf" and
/// "-inf". Every number a program writes in a CSV goes through here.
inline void append_double(std::string& out, double x)
{
    if (std::isnan(x))
    {
        out += "nan";
        return;
    }
    char buf[40];
    const int n = std::snprintf(buf, sizeof(buf), "%.17g", x);
    out.append(buf, static_cast<std::size_t>(n));
}

/// ",x1,x2,..." (each through append_double): the tail of a row of numbers.
inline void append_doubles(std::string& out, std::initializer_list<double> values)
{
    for (double x : values)
    {
        out += ',';
        append_double(out, x);
    }
}

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

/// The one definition of what each column of §3 holds: emits the rows of one head, value by
/// value, into `sink`: sink.row(table) starts a row of that table, sink.integer(i) and
/// sink.real(x) give the next column (in the order of the table's header), sink.end() ends
/// the row (sink.text(s) gives a column of names, written as they are, e.g. pca_class). format_head()
/// writes them as CSV text; the Python package collects them as
/// arrays (its DataFrames), so a column added here reaches both, with its type.
template <class Sink>
void emit_head(const attention_plasticity::head_result& r, Sink& sink)
{
    const auto& m = r.metrics;
    auto start = [&](table_index table) {
        sink.row(table);
        sink.integer(r.id.layer);
        sink.integer(r.id.q_head);
        sink.integer(r.id.k_head);
    };
    auto count = [&](std::size_t n) { sink.integer(static_cast<std::int64_t>(n)); };
    start(metrics_table);
    count(m.n_q_tokens);
    count(m.n_k_tokens);
    count(m.d_model);
    for (double x : {m.q_R2_pos, m.q_beta_norm, m.q_R2_scalar, m.q_mae_baseline, m.q_mae_proj, m.q_mae_ratio,
                     m.q_resid0_skew, m.q_resid0_kurt, m.q_resid0_ks_p, m.q_noise_med_abs_skew,
                     m.q_noise_med_abs_kurt, m.q_noise_med_ks_p, m.q_noise_frac_ks_p_lt_alpha, m.ap_overall,
                     m.ap_first20, m.ap_last20, m.ap_drop, m.ap_empirical_overall, m.ap_empirical_overall_se,
                     m.ap_overall_se, m.ap_overall_bias, m.ap_overall_ci_low, m.ap_overall_ci_high,
                     m.ap_overall_corrected, m.ap_first20_se, m.ap_first20_bias, m.ap_last20_se, m.ap_last20_bias,
                     m.ap_drop_se, m.ap_drop_bias, m.context_length})
    {
        sink.real(x);
    }
    count(m.n_sequences);
    for (double x : {m.bias_strength, m.drift_slope_k, m.drift_query_mean, m.pc0_r_q, m.pc0_r_k})
    {
        sink.real(x);
    }
    sink.text(attention_plasticity::pca_class_name(m.pca_class));
    sink.end();
    for (const auto& cell : r.cells)
    {
        start(bucket_table);
        sink.integer(cell.q_bucket);
        sink.integer(cell.k_bucket);
        sink.real(cell.plasticity);
        count(cell.n_pairs);
        sink.real(cell.plasticity_empirical);
        sink.end();
    }
    for (const auto& b : r.profile)
    {
        start(profile_table);
        sink.integer(b.q_bucket);
        sink.real(b.tau);
        count(b.n_queries);
        sink.real(b.plasticity);
        count(b.n_pairs);
        for (double x : {b.plasticity_empirical, b.plasticity_empirical_se, b.plasticity_se, b.plasticity_bias,
                         b.plasticity_ci_low, b.plasticity_ci_high, b.plasticity_corrected})
        {
            sink.real(x);
        }
        sink.integer(b.small_bucket ? 1 : 0);
        sink.end();
    }
    for (const auto& bin : r.distance_map)
    {
        start(distance_table);
        for (double x : {bin.key_distance.low, bin.key_distance.high, bin.query_distance.low, bin.query_distance.high,
                         bin.plasticity})
        {
            sink.real(x);
        }
        count(bin.n_pairs);
        sink.end();
    }
    for (std::size_t c = 0; c < r.component_r2.size(); ++c)
    {
        start(component_table);
        count(c);
        sink.real(r.component_r2(c));
        sink.real(r.component_weight(c));
        sink.end();
    }
    for (const auto& e : r.sequence_influences)
    {
        start(influence_table);
        sink.integer(e.example_id);
        sink.text(attention_plasticity::influence_quantity_name(e.quantity));
        sink.integer(e.q_bucket);
        sink.real(e.influence);
        sink.end();
    }
}

inline std::string format_number(double x)
{
    std::string s;
    append_double(s, x);
    return s;
}

/// One CSV of a result set: file name, header, and which rows of a head it holds.
struct csv_table
{
    const char* file;
    const char* header;
    std::string head_rows::*rows;
};

inline const std::vector<csv_table>& result_tables()
{
    static const std::vector<csv_table> tables = {{metrics_csv, metrics_header, &head_rows::metrics},
                                                  {bucket_csv, bucket_header, &head_rows::buckets},
                                                  {profile_csv, profile_header, &head_rows::profile},
                                                  {component_csv, component_header, &head_rows::components},
                                                  {distance_csv, distance_header, &head_rows::distances},
                                                  {influence_csv, influence_header, &head_rows::influences}};
    return tables;
}

/// The rows of one head as the CSV text of each file (emit_head's values, comma-separated).
inline head_rows format_head(const attention_plasticity::head_result& r)
{
    struct text_sink
    {
        head_rows& rows;
        std::string* out = nullptr;
        bool first = true;

        void row(table_index table)
        {
            out = &(rows.*(result_tables()[table].rows));
            first = true;
        }
        void next()
        {
            if (!first)
            {
                *out += ',';
            }
            first = false;
        }
        void integer(std::int64_t i)
        {
            next();
            *out += std::to_string(i);
        }
        void real(double x)
        {
            next();
            append_double(*out, x);
        }
        void text(std::string_view name)
        {
            next();
            *out += name;
        }
        void end() { *out += '\n'; }
    };
    head_rows rows;
    text_sink sink{rows};
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
