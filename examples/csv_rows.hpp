#ifndef AP_EXAMPLES_CSV_ROWS_HPP
#define AP_EXAMPLES_CSV_ROWS_HPP

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
#include <string>
#include <string_view>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "result_set.hpp"

namespace ap_examples
{
inline const char* const metrics_header =
    "layer,q_head,k_head,n_q_tokens,n_k_tokens,d_model,q_R2_pos,q_beta_norm,q_R2_scalar,q_mae_baseline,"
    "q_mae_proj,q_mae_ratio,q_resid0_skew,q_resid0_kurt,q_resid0_ks_p,q_noise_med_abs_skew,"
    "q_noise_med_abs_kurt,q_noise_med_ks_p,q_noise_frac_ks_p_lt_alpha,ap_overall,ap_first20,ap_last20,ap_drop,"
    "ap_empirical_overall,ap_empirical_overall_se,ap_overall_se,ap_overall_bias,ap_overall_ci_low,ap_overall_ci_high,"
    "bias_strength,drift_slope_k,drift_query_mean,pc0_r_q,pc0_r_k,pca_class";
inline const char* const bucket_header = "layer,q_head,k_head,q_bucket,k_bucket,plasticity,n_pairs,plasticity_empirical";
inline const char* const profile_header =
    "layer,q_head,k_head,q_bucket,tau,n_queries,plasticity,n_pairs,plasticity_empirical,plasticity_empirical_se,"
    "plasticity_se,plasticity_bias,plasticity_ci_low,plasticity_ci_high";
inline const char* const component_header = "layer,q_head,k_head,component,component_r2,weight";
inline const char* const distance_header =
    "layer,q_head,k_head,key_distance_low,key_distance_high,query_distance_low,query_distance_high,plasticity,"
    "n_pairs";

inline const char* const metrics_csv = "head_metrics.csv";
inline const char* const bucket_csv = "head_bucket_plasticity.csv";
inline const char* const profile_csv = "head_profile.csv";
inline const char* const component_csv = "head_component_weights.csv";
inline const char* const distance_csv = "head_distance_plasticity.csv";

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

/// The rows of one head, one string per file, each row ending in '\n'.
struct head_rows
{
    std::string metrics;
    std::string buckets;
    std::string profile;
    std::string components;
    std::string distances;  // docs/method.md §8.1
};

/// Appends ",x" for each x.
inline void append_doubles(std::string& out, std::initializer_list<double> values)
{
    for (double x : values)
    {
        out += ',';
        append_double(out, x);
    }
}

inline head_rows format_head(const attention_plasticity::head_result& r)
{
    const auto& m = r.metrics;
    const std::string id =
        std::to_string(r.id.layer) + "," + std::to_string(r.id.q_head) + "," + std::to_string(r.id.k_head) + ",";
    head_rows rows;
    std::string& s = rows.metrics;
    s = id + std::to_string(m.n_q_tokens) + "," + std::to_string(m.n_k_tokens) + "," + std::to_string(m.d_model);
    for (double x : {m.q_R2_pos, m.q_beta_norm, m.q_R2_scalar, m.q_mae_baseline, m.q_mae_proj, m.q_mae_ratio,
                     m.q_resid0_skew, m.q_resid0_kurt, m.q_resid0_ks_p, m.q_noise_med_abs_skew,
                     m.q_noise_med_abs_kurt, m.q_noise_med_ks_p, m.q_noise_frac_ks_p_lt_alpha, m.ap_overall,
                     m.ap_first20, m.ap_last20, m.ap_drop, m.ap_empirical_overall, m.ap_empirical_overall_se,
                     m.ap_overall_se, m.ap_overall_bias, m.ap_overall_ci_low, m.ap_overall_ci_high, m.bias_strength,
                     m.drift_slope_k, m.drift_query_mean, m.pc0_r_q, m.pc0_r_k})
    {
        s += ',';
        append_double(s, x);
    }
    s += ',';
    s += attention_plasticity::pca_class_name(m.pca_class);
    s += '\n';
    for (const auto& cell : r.cells)
    {
        rows.buckets += id + std::to_string(cell.q_bucket) + "," + std::to_string(cell.k_bucket) + ",";
        append_double(rows.buckets, cell.plasticity);
        rows.buckets += "," + std::to_string(cell.n_pairs);
        append_doubles(rows.buckets, {cell.plasticity_empirical});
        rows.buckets += "\n";
    }
    for (const auto& b : r.profile)
    {
        rows.profile += id + std::to_string(b.q_bucket) + ",";
        append_double(rows.profile, b.tau);
        rows.profile += "," + std::to_string(b.n_queries) + ",";
        append_double(rows.profile, b.plasticity);
        rows.profile += "," + std::to_string(b.n_pairs);
        append_doubles(rows.profile, {b.plasticity_empirical, b.plasticity_empirical_se, b.plasticity_se,
                                      b.plasticity_bias, b.plasticity_ci_low, b.plasticity_ci_high});
        rows.profile += "\n";
    }
    for (const auto& bin : r.distance_map)
    {
        rows.distances += id;
        append_double(rows.distances, bin.key_distance.low);
        append_doubles(rows.distances, {bin.key_distance.high, bin.query_distance.low, bin.query_distance.high,
                                        bin.plasticity});
        rows.distances += "," + std::to_string(bin.n_pairs) + "\n";
    }
    for (std::size_t c = 0; c < r.component_r2.size(); ++c)
    {
        rows.components += id + std::to_string(c) + ",";
        append_double(rows.components, r.component_r2(c));
        rows.components += ",";
        append_double(rows.components, r.component_weight(c));
        rows.components += "\n";
    }
    return rows;
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
                                                  {distance_csv, distance_header, &head_rows::distances}};
    return tables;
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
}  // namespace ap_examples

#endif
