#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_TABLES_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_TABLES_HPP

// The tables of a comparison (docs/method.md §8.6): compare_heads.csv, compare_changed.csv,
// compare_summary.csv and compare_trajectory.csv, each a row struct and one column list
// (io/table_columns.hpp) from which its header and its rows come, whether written as CSV text
// (io/csv_format.hpp) or collected as arrays (the Python package). The integer columns that can
// be NA (compare_heads' q_bucket, the summary's and trajectory's layer: empty on a head-level or
// model-level row) are held as their decimal text or empty; the Python package reads them as
// pandas Int64 (compare.py).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../io/csv_format.hpp"
#include "../io/table_columns.hpp"

namespace attention_plasticity::run
{
inline const char* const compare_heads_csv = "compare_heads.csv";
inline const char* const compare_changed_csv = "compare_changed.csv";
inline const char* const compare_summary_csv = "compare_summary.csv";
inline const char* const compare_trajectory_csv = "compare_trajectory.csv";

/// One quantity of one head compared between two consecutive sets.
struct compare_heads_row
{
    std::string set_a, set_b;
    std::int64_t layer = 0, q_head = 0, k_head = 0;
    std::string quantity;
    std::string q_bucket;  // an integer column: the bucket of an ap_bucket row, empty (NA) for a head-level one
    double value_a = 0, value_b = 0, difference = 0, se = 0;
    double df = 0;  // the degrees of freedom of se: Student's t law of z (§8.6); inf: the normal law
    double z = 0, p = 0, q_bh = 0, p_holm = 0;
    std::int64_t significant = 0;  // 1 when selected as changed (the hierarchical selection, §8.6)
    std::string design;
    double head_p = 0, head_q = 0;  // the head's Simes p and its BH q across heads
    double q_within = 0;            // BH q within the head (selected: head_q <= alpha, q_within <= alpha R / m)
    double resolution = 0;          // the rounding bound of the difference (comparison.hpp's resolution_bound)
    std::string reason;             // why p is empty: identical, equal within rounding, ...; empty when tested
};

/// A head selected as changed between two consecutive sets (§8.6), with the tests that carried it.
struct compare_changed_row
{
    std::string set_a, set_b;
    std::int64_t layer = 0, q_head = 0, k_head = 0, n_significant = 0;  // n_significant: its selected tests
    std::string quantities;         // the selected head-level quantities, space-separated
    double head_p = 0, head_q = 0;  // the head's Simes p and its BH q across heads
    std::string buckets;            // the selected query buckets (AP_j), space-separated
};

/// The mean change over heads of one quantity, all layers (`layer` empty: NA) or one layer.
struct compare_summary_row
{
    std::string set_a, set_b, quantity, layer;
    std::int64_t n_heads = 0;
    double mean_a = 0, mean_b = 0, mean_difference = 0, se = 0;
    double df = 0;  // of se (§8.6)
    double ci_low = 0, ci_high = 0, z = 0, p = 0, sd_difference = 0;
    std::int64_t n_significant = 0;
    double resolution = 0;  // the mean's rounding bound: the mean of its heads' (§8.6)
    std::string reason;     // why p is empty (as compare_heads'), empty when tested
};

/// One set's mean over heads of one quantity, all layers (`layer` empty: NA) or one layer.
struct compare_trajectory_row
{
    std::string set;
    std::int64_t order = 0;
    std::string quantity, layer;
    std::int64_t n_heads = 0;
    double mean = 0, se = 0;
    double df = 0;  // of se (§8.6)
    double ci_low = 0, ci_high = 0;
};

// Captureless lambdas as the getters: one line per column, in the order of the file.
#define AP_COMPARE_INTEGER(Row, name) io::integer_column<Row>(#name, [](const Row& r) -> std::int64_t { return r.name; })
#define AP_COMPARE_REAL(Row, name) io::real_column<Row>(#name, [](const Row& r) -> double { return r.name; })
#define AP_COMPARE_TEXT(Row, name) io::text_column<Row>(#name, [](const Row& r) -> std::string_view { return r.name; })

inline const io::column<compare_heads_row> compare_heads_columns[] = {
    AP_COMPARE_TEXT(compare_heads_row, set_a),      AP_COMPARE_TEXT(compare_heads_row, set_b),
    AP_COMPARE_INTEGER(compare_heads_row, layer),   AP_COMPARE_INTEGER(compare_heads_row, q_head),
    AP_COMPARE_INTEGER(compare_heads_row, k_head),  AP_COMPARE_TEXT(compare_heads_row, quantity),
    AP_COMPARE_TEXT(compare_heads_row, q_bucket),   AP_COMPARE_REAL(compare_heads_row, value_a),
    AP_COMPARE_REAL(compare_heads_row, value_b),    AP_COMPARE_REAL(compare_heads_row, difference),
    AP_COMPARE_REAL(compare_heads_row, se),         AP_COMPARE_REAL(compare_heads_row, df),
    AP_COMPARE_REAL(compare_heads_row, z),
    AP_COMPARE_REAL(compare_heads_row, p),          AP_COMPARE_REAL(compare_heads_row, q_bh),
    AP_COMPARE_REAL(compare_heads_row, p_holm),     AP_COMPARE_INTEGER(compare_heads_row, significant),
    AP_COMPARE_TEXT(compare_heads_row, design),     AP_COMPARE_REAL(compare_heads_row, head_p),
    AP_COMPARE_REAL(compare_heads_row, head_q),     AP_COMPARE_REAL(compare_heads_row, q_within),
    AP_COMPARE_REAL(compare_heads_row, resolution), AP_COMPARE_TEXT(compare_heads_row, reason)};

inline const io::column<compare_changed_row> compare_changed_columns[] = {
    AP_COMPARE_TEXT(compare_changed_row, set_a),         AP_COMPARE_TEXT(compare_changed_row, set_b),
    AP_COMPARE_INTEGER(compare_changed_row, layer),      AP_COMPARE_INTEGER(compare_changed_row, q_head),
    AP_COMPARE_INTEGER(compare_changed_row, k_head),     AP_COMPARE_INTEGER(compare_changed_row, n_significant),
    AP_COMPARE_TEXT(compare_changed_row, quantities),    AP_COMPARE_REAL(compare_changed_row, head_p),
    AP_COMPARE_REAL(compare_changed_row, head_q),        AP_COMPARE_TEXT(compare_changed_row, buckets)};

inline const io::column<compare_summary_row> compare_summary_columns[] = {
    AP_COMPARE_TEXT(compare_summary_row, set_a),         AP_COMPARE_TEXT(compare_summary_row, set_b),
    AP_COMPARE_TEXT(compare_summary_row, quantity),      AP_COMPARE_TEXT(compare_summary_row, layer),
    AP_COMPARE_INTEGER(compare_summary_row, n_heads),    AP_COMPARE_REAL(compare_summary_row, mean_a),
    AP_COMPARE_REAL(compare_summary_row, mean_b),        AP_COMPARE_REAL(compare_summary_row, mean_difference),
    AP_COMPARE_REAL(compare_summary_row, se),            AP_COMPARE_REAL(compare_summary_row, df),
    AP_COMPARE_REAL(compare_summary_row, ci_low),
    AP_COMPARE_REAL(compare_summary_row, ci_high),       AP_COMPARE_REAL(compare_summary_row, z),
    AP_COMPARE_REAL(compare_summary_row, p),             AP_COMPARE_REAL(compare_summary_row, sd_difference),
    AP_COMPARE_INTEGER(compare_summary_row, n_significant), AP_COMPARE_REAL(compare_summary_row, resolution),
    AP_COMPARE_TEXT(compare_summary_row, reason)};

inline const io::column<compare_trajectory_row> compare_trajectory_columns[] = {
    AP_COMPARE_TEXT(compare_trajectory_row, set),        AP_COMPARE_INTEGER(compare_trajectory_row, order),
    AP_COMPARE_TEXT(compare_trajectory_row, quantity),   AP_COMPARE_TEXT(compare_trajectory_row, layer),
    AP_COMPARE_INTEGER(compare_trajectory_row, n_heads), AP_COMPARE_REAL(compare_trajectory_row, mean),
    AP_COMPARE_REAL(compare_trajectory_row, se),         AP_COMPARE_REAL(compare_trajectory_row, df),
    AP_COMPARE_REAL(compare_trajectory_row, ci_low),
    AP_COMPARE_REAL(compare_trajectory_row, ci_high)};

#undef AP_COMPARE_INTEGER
#undef AP_COMPARE_REAL
#undef AP_COMPARE_TEXT

/// The rows of a comparison's four tables.
struct compare_tables
{
    std::vector<compare_heads_row> heads;
    std::vector<compare_changed_row> changed;
    std::vector<compare_summary_row> summary;
    std::vector<compare_trajectory_row> trajectory;
};

/// f(file name, column list, rows) for each table of `t`, in the order of the files.
template <class Tables, class F>
void for_each_compare_table(Tables& t, F&& f)
{
    f(compare_heads_csv, compare_heads_columns, t.heads);
    f(compare_changed_csv, compare_changed_columns, t.changed);
    f(compare_summary_csv, compare_summary_columns, t.summary);
    f(compare_trajectory_csv, compare_trajectory_columns, t.trajectory);
}

/// The file names of a comparison, in order.
inline std::vector<std::string> compare_file_names()
{
    return {compare_heads_csv, compare_changed_csv, compare_summary_csv, compare_trajectory_csv};
}
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_TABLES_HPP
