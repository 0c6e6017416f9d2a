#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP

// Comparing result sets head by head (docs/method.md §8.6): two or more result folders of
// ap_analyze (or ap_merge, or the Python package), named and ordered (checkpoints, variants),
// each compared with the next. Per head and quantity (ap_overall, ap_first20, ap_last20,
// ap_drop, and AP_j of each query bucket): the bias-corrected difference, its standard error
// (the sequence-level errors of the analysis, §8.3: unpaired, the two sets' variances added;
// paired, the per-sequence differences of the two sets' influences), z, the two-sided p-value,
// Benjamini-Hochberg q-values and Holm's adjusted p-values across heads; the heads that changed;
// a model-level summary by layer (its standard error from the per-sequence influences summed
// over heads when the sets have them); and each set's means over heads in order (the
// trajectory of checkpoints).
// ap_compare (ap_compare_main.cpp) and attention_plasticity.compare_runs (python/src) both
// call compare_result_sets() below and write its files, so their CSVs are the same bytes.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <attention_plasticity/intervals.hpp>
#include <attention_plasticity/multiple_testing.hpp>
#include <attention_plasticity/normal.hpp>

#include "../io/csv_rows.hpp"
#include "../io/bounded_read.hpp"
#include "../io/folder_overlap.hpp"
#include "cli_util.hpp"
#include "errors.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// How the standard error of a head's change is made (docs/method.md §8.6).
enum class compare_design
{
    unpaired,  // the sets are independent samples of sequences: s = sqrt(s_A^2 + s_B^2)
    paired,    // the sets share their sequences: the per-sequence differences of the influences
};

inline const char* design_name(compare_design design)
{
    return design == compare_design::paired ? "paired" : "unpaired";
}

/// "paired" or "unpaired"; anything else: usage_error naming `label` (the option) and the text.
inline compare_design parse_design(const std::string& text, const std::string& label)
{
    if (text == "paired")
    {
        return compare_design::paired;
    }
    if (text == "unpaired")
    {
        return compare_design::unpaired;
    }
    throw usage_error(label + ": '" + text + "' is not paired or unpaired");
}

/// What to compare and how.
struct compare_options
{
    std::vector<std::string> folders;  // the result sets, in order (at least 2)
    std::vector<std::string> names;    // their names; empty: the folders' last components
    double alpha = 0.05;               // level of the BH procedure (and of the intervals: 1 - alpha)
    bool common_heads = false;         // compare the heads common to all sets instead of refusing
    bool same_dump = false;            // the sets analyzed the same dump (different options)
    compare_design design = compare_design::unpaired;  // paired: the sets share their sequences
};

inline const char* const compare_heads_csv = "compare_heads.csv";
inline const char* const compare_changed_csv = "compare_changed.csv";
inline const char* const compare_summary_csv = "compare_summary.csv";
inline const char* const compare_trajectory_csv = "compare_trajectory.csv";

inline const char* const compare_heads_header =
    "set_a,set_b,layer,q_head,k_head,quantity,q_bucket,value_a,value_b,difference,se,z,p,q_bh,p_holm,significant,"
    "design";
inline const char* const compare_changed_header = "set_a,set_b,layer,q_head,k_head,n_significant,quantities";
inline const char* const compare_summary_header =
    "set_a,set_b,quantity,layer,n_heads,mean_a,mean_b,mean_difference,se,ci_low,ci_high,z,p,sd_difference,"
    "n_significant";
inline const char* const compare_trajectory_header = "set,order,quantity,layer,n_heads,mean,se,ci_low,ci_high";

// The per-sequence influences of a result set analyzed with sequence_influences on (issue 23;
// docs/method.md §8.3): one row per (head, sequence, quantity).

/// The columns of head_metrics.csv the comparison reads besides the identity and ap_overall's:
/// a set without one of them (written before the sequence-level errors) is refused.
inline const char* const compare_metrics_columns[] = {
    "ap_first20",   "ap_last20",      "ap_drop",    "ap_first20_se", "ap_first20_bias",
    "ap_last20_se", "ap_last20_bias", "ap_drop_se", "ap_drop_bias",  "context_length"};

namespace compare_detail
{
    /// One estimate: the reported value, its estimated bias and standard error (§8.3).
    struct estimate
    {
        double value = std::numeric_limits<double>::quiet_NaN();
        double bias = std::numeric_limits<double>::quiet_NaN();
        double se = std::numeric_limits<double>::quiet_NaN();
    };

    struct bucket_row
    {
        std::int64_t q_bucket = 0;
        estimate ap;
    };

    /// A head-level quantity (ap_overall, ap_first20, ap_last20, ap_drop: -1) or a query
    /// bucket's AP_j (ap_bucket, q_bucket) of one head.
    using quantity_key = std::pair<std::string, std::int64_t>;

    /// The per-sequence influences Phi_e of one quantity of one head: (example_id, Phi_e), in
    /// increasing example_id.
    using influence_list = std::vector<std::pair<std::int64_t, double>>;

    /// One head of one set: its four head-level estimates and its buckets.
    struct head
    {
        std::int64_t layer = 0, q_head = 0, k_head = 0, d_model = 0;
        estimate overall, first20, last20, drop;
        double context_length = std::numeric_limits<double>::quiet_NaN();  // C of §2.14
        double bias_strength = std::numeric_limits<double>::quiet_NaN();  // §8.5; NaN when not written
        std::vector<bucket_row> buckets;  // in q_bucket order
        std::map<quantity_key, influence_list> influences;  // empty without an influence table

        /// The influences of a quantity, or nullptr when the set has none for it.
        const influence_list* influences_of(const quantity_key& key) const
        {
            const auto it = influences.find(key);
            return it == influences.end() ? nullptr : &it->second;
        }
    };

    using head_key = std::pair<std::int64_t, std::int64_t>;

    struct loaded_set
    {
        std::string name, folder;
        std::map<head_key, head> heads;
        bool has_influences = false;  // head_sequence_influence.csv was read
    };

    inline std::string number_text(double x)
    {
        std::string s;
        io::append_double(s, x);
        return s;
    }

    inline std::string head_text(std::int64_t layer, std::int64_t q_head)
    {
        return "head layer " + std::to_string(layer) + " q_head " + std::to_string(q_head);
    }

    /// A CSV of the set: its header's column indices and its rows' fields.
    struct table
    {
        std::string file;
        std::map<std::string, std::size_t> column;
        std::vector<std::vector<std::string>> rows;

        std::size_t index(const std::string& name) const
        {
            const auto it = column.find(name);
            if (it == column.end())
            {
                throw compare_error(file + ": has no column '" + name
                                    + "' (written by an older program, or not a head_metrics/head_profile file)");
            }
            return it->second;
        }
    };

    inline std::vector<std::string> split(const std::string& line)
    {
        std::vector<std::string> fields;
        std::size_t start = 0;
        while (true)
        {
            const std::size_t comma = line.find(',', start);
            fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
            if (comma == std::string::npos)
            {
                return fields;
            }
            start = comma + 1;
        }
    }

    /// The columns of a header line, by name; a name given twice is refused (which of the two
    /// would be read?).
    inline std::map<std::string, std::size_t> header_columns(const std::vector<std::string>& fields,
                                                             const std::string& file)
    {
        std::map<std::string, std::size_t> columns;
        for (std::size_t i = 0; i < fields.size(); ++i)
        {
            const auto [it, fresh] = columns.emplace(fields[i], i);
            if (!fresh)
            {
                throw compare_error(file + ": line 1: column '" + fields[i] + "' appears twice (columns "
                                    + std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
            }
        }
        return columns;
    }

    /// The table of `text` (a CSV of the set named `file`): a header and rows of its width, each
    /// line ended; row i is line i + 2.
    inline table parse_table(const std::string& text, const std::string& file)
    {
        table t;
        t.file = file;
        std::size_t start = 0, line_number = 0;
        std::size_t width = 0;
        while (start < text.size())
        {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos)
            {
                throw compare_error(file + ": the last line has no end (a truncated file?)");
            }
            const std::vector<std::string> fields = split(text.substr(start, end - start));
            ++line_number;
            if (line_number == 1)
            {
                width = fields.size();
                t.column = header_columns(fields, file);
            }
            else if (fields.size() != width)
            {
                throw compare_error(file + ": line " + std::to_string(line_number) + " has " +
                                    std::to_string(fields.size()) + " fields, the header " + std::to_string(width));
            }
            else
            {
                t.rows.push_back(fields);
            }
            start = end + 1;
        }
        if (line_number == 0)
        {
            throw compare_error(file + ": is empty (no header line)");
        }
        return t;
    }

    /// "FILE: line N: column C" for messages about one value.
    inline std::string cell_text(const table& t, std::size_t line, const std::string& column)
    {
        return t.file + ": line " + std::to_string(line) + ": column " + column;
    }

    inline double number(const table& t, const std::vector<std::string>& row, std::size_t line, const std::string& column)
    {
        const std::string& text = row[t.index(column)];
        if (text == "nan")
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        char* end = nullptr;
        errno = 0;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size())
        {
            throw compare_error(cell_text(t, line, column) + ": '" + text + "' is not a number");
        }
        return x;
    }

    inline std::int64_t integer(const table& t, const std::vector<std::string>& row, std::size_t line,
                                const std::string& column)
    {
        const double x = number(t, row, line, column);
        if (!(std::floor(x) == x) || std::abs(x) > 9e15)
        {
            throw compare_error(cell_text(t, line, column) + ": '" + row[t.index(column)] + "' is not an integer");
        }
        return static_cast<std::int64_t>(x);
    }

    /// An estimate read from columns `value`, `bias`, `se` of a row, checked: the value NaN or
    /// within [low, high] (a plasticity is in [0, 1], a difference of two in [-1, 1]: docs/method.md
    /// §3.2, §3.4; a rounding's margin allowed), the bias NaN or finite, the standard error NaN or
    /// finite and >= 0. An impossible value is refused (compare_error naming the file, the line
    /// and the column): an infinite error would make any change "no change", a plasticity of 7.5
    /// is not one.
    inline estimate read_estimate(const table& t, const std::vector<std::string>& row, std::size_t line,
                                  const std::string& value, const std::string& bias, const std::string& se,
                                  double low, double high)
    {
        const estimate e{number(t, row, line, value), number(t, row, line, bias), number(t, row, line, se)};
        constexpr double margin = 1e-9;
        if (!std::isnan(e.value) && !(e.value >= low - margin && e.value <= high + margin))
        {
            throw compare_error(cell_text(t, line, value) + ": " + row[t.index(value)] + " is not a plasticity"
                                + (low < 0.0 ? " difference" : "") + " (within [" + number_text(low) + ", "
                                + number_text(high) + "], docs/method.md §3.2)");
        }
        if (std::isinf(e.bias))
        {
            throw compare_error(cell_text(t, line, bias) + ": " + row[t.index(bias)] + " is not a bias (finite or nan)");
        }
        if (!std::isnan(e.se) && !(std::isfinite(e.se) && e.se >= 0.0))
        {
            throw compare_error(cell_text(t, line, se) + ": " + row[t.index(se)]
                                + " is not a standard error (finite and >= 0, or nan)");
        }
        return e;
    }

    /// The longest line accepted in the influence table (its rows are a few dozen bytes): a
    /// file of one endless line is refused, not read into memory.
    inline constexpr std::size_t max_influence_line_bytes = 1 << 16;

    /// The per-sequence influences of the set's head_sequence_influence.csv into the heads of `s`,
    /// read line by line (a large table is not held as text); the number of rows. Throws
    /// compare_error naming the file, the line and the problem (io::input_error when the file
    /// cannot be read).
    inline std::size_t read_influences(loaded_set& s, const result_set_reader& reader)
    {
        io::line_reader in = reader.lines(io::influence_csv, max_influence_line_bytes);
        const std::string file = in.name();
        table t;
        t.file = file;
        std::string line;
        if (!in.next(line))
        {
            throw compare_error(file + ": is empty (no header line)");
        }
        const std::vector<std::string> header = split(line);
        t.column = header_columns(header, file);
        for (const std::string& name : split(io::influence_header))
        {
            if (t.column.count(name) == 0)
            {
                throw compare_error(file + ": has no column '" + name + "' (its header should be "
                                    + io::influence_header + ")");
            }
        }
        const std::size_t quantity_column = t.index("quantity"), bucket_column = t.index("q_bucket");
        std::size_t line_number = 1;
        while (in.next(line))
        {
            ++line_number;
            const std::size_t n = line_number;
            const std::vector<std::string> row = split(line);
            const std::string where = file + ": line " + std::to_string(line_number);
            if (row.size() != header.size())
            {
                throw compare_error(where + " has " + std::to_string(row.size()) + " fields, the header "
                                    + std::to_string(header.size()));
            }
            const std::int64_t layer = integer(t, row, n, "layer"), q_head = integer(t, row, n, "q_head");
            const auto it = s.heads.find(head_key{layer, q_head});
            if (it == s.heads.end())
            {
                throw compare_error(where + ": " + head_text(layer, q_head) + " has no row in " + io::metrics_csv);
            }
            if (integer(t, row, n, "k_head") != it->second.k_head)
            {
                throw compare_error(where + ": " + head_text(layer, q_head) + " has k_head " + row[t.index("k_head")]
                                    + ", " + std::to_string(it->second.k_head) + " in " + io::metrics_csv);
            }
            const std::string& quantity = row[quantity_column];
            std::int64_t bucket = -1;
            if (quantity == "ap_bucket")
            {
                bucket = integer(t, row, n, "q_bucket");
            }
            else if (quantity != "ap_overall" && quantity != "ap_first20" && quantity != "ap_last20"
                     && quantity != "ap_drop")
            {
                throw compare_error(where + ": quantity '" + quantity
                                    + "' is not ap_overall, ap_first20, ap_last20, ap_drop or ap_bucket");
            }
            else if (row[bucket_column] != "0")
            {
                throw compare_error(where + ": " + quantity + " has q_bucket '" + row[bucket_column]
                                    + "' (0 on the head-level rows; only ap_bucket rows name a bucket, docs/method.md §3.7)");
            }
            const double influence = number(t, row, n, "influence");
            if (std::isinf(influence))
            {
                throw compare_error(cell_text(t, n, "influence") + ": " + row[t.index("influence")]
                                    + " is not an influence (finite or nan)");
            }
            it->second.influences[{quantity, bucket}].emplace_back(integer(t, row, n, "example_id"), influence);
        }
        if (!in.last_line_ended())
        {
            throw compare_error(file + ": the last line has no end (a truncated file?)");
        }
        const std::size_t rows = line_number - 1;
        for (auto& [key, h] : s.heads)
        {
            for (auto& [quantity, list] : h.influences)
            {
                std::stable_sort(list.begin(), list.end(),
                                 [](const auto& u, const auto& v) { return u.first < v.first; });
                for (std::size_t i = 1; i < list.size(); ++i)
                {
                    if (list[i].first == list[i - 1].first)
                    {
                        throw compare_error(file + ": " + head_text(key.first, key.second) + ", "
                                            + quantity.first
                                            + (quantity.second >= 0 ? " " + std::to_string(quantity.second) : "")
                                            + ": example_id " + std::to_string(list[i].first) + " has two rows");
                    }
                }
            }
        }
        return rows;
    }

    /// Every quantity of `s` with a standard error has its sequences' influences (a table of
    /// another run, or cut short, would pair the wrong numbers); else compare_error naming `file`.
    inline void check_influences(const loaded_set& s, const std::string& file)
    {
        for (const auto& [key, h] : s.heads)
        {
            const std::pair<const char*, const estimate*> quantities[] = {
                {"ap_overall", &h.overall}, {"ap_first20", &h.first20}, {"ap_last20", &h.last20},
                {"ap_drop", &h.drop}};
            std::vector<quantity_key> needed;
            for (const auto& [quantity, e] : quantities)
            {
                if (std::isfinite(e->value) && std::isfinite(e->se))
                {
                    needed.push_back({quantity, -1});
                }
            }
            for (const bucket_row& b : h.buckets)
            {
                if (std::isfinite(b.ap.value) && std::isfinite(b.ap.se))
                {
                    needed.push_back({"ap_bucket", b.q_bucket});
                }
            }
            for (const quantity_key& q : needed)
            {
                if (h.influences_of(q) == nullptr)
                {
                    throw compare_error(file + ": " + head_text(key.first, key.second) + " has no rows of "
                                        + q.first + (q.second >= 0 ? " " + std::to_string(q.second) : "")
                                        + ", which has a standard error in " + io::metrics_csv + "/" + io::profile_csv
                                        + " (files of different runs?)");
                }
            }
        }
    }

    /// The largest head_metrics.csv or head_profile.csv read (each is held whole while it is
    /// parsed): the machine's memory / 4, the parsed fields taking a few times the text.
    inline std::uintmax_t max_table_bytes()
    {
        return io::physical_memory_bytes() / 4;
    }

    inline loaded_set load_set(const result_set_reader& reader, const std::string& name)
    {
        const std::string& folder = reader.folder();
        const std::string label = "result set '" + folder + "'";
        loaded_set s;
        s.name = name;
        s.folder = folder;
        const table metrics = parse_table(reader.read(io::metrics_csv, max_table_bytes()), reader.display(io::metrics_csv));
        const table profile = parse_table(reader.read(io::profile_csv, max_table_bytes()), reader.display(io::profile_csv));
        for (const char* column : compare_metrics_columns)
        {
            if (metrics.column.count(column) == 0)
            {
                throw compare_error(metrics.file + ": has no column '" + column
                                    + "' (written before head_metrics.csv had the standard errors of ap_first20, "
                                      "ap_last20 and ap_drop: analyze the dump again with this version; "
                                      "docs/method.md §8.6)");
            }
        }
        const bool with_sequences = metrics.column.count("n_sequences") != 0;
        for (std::size_t r = 0; r < metrics.rows.size(); ++r)
        {
            const std::vector<std::string>& row = metrics.rows[r];
            const std::size_t n = r + 2;
            head h;
            h.layer = integer(metrics, row, n, "layer");
            h.q_head = integer(metrics, row, n, "q_head");
            h.k_head = integer(metrics, row, n, "k_head");
            h.d_model = integer(metrics, row, n, "d_model");
            h.overall = read_estimate(metrics, row, n, "ap_overall", "ap_overall_bias", "ap_overall_se", 0.0, 1.0);
            h.first20 = read_estimate(metrics, row, n, "ap_first20", "ap_first20_bias", "ap_first20_se", 0.0, 1.0);
            h.last20 = read_estimate(metrics, row, n, "ap_last20", "ap_last20_bias", "ap_last20_se", 0.0, 1.0);
            h.drop = read_estimate(metrics, row, n, "ap_drop", "ap_drop_bias", "ap_drop_se", -1.0, 1.0);
            h.context_length = number(metrics, row, n, "context_length");
            if (metrics.column.count("bias_strength") != 0)
            {
                h.bias_strength = number(metrics, row, n, "bias_strength");
            }
            if (!std::isnan(h.overall.value) && std::isnan(h.overall.se))
            {
                const double sequences =
                    with_sequences ? number(metrics, row, n, "n_sequences") : std::numeric_limits<double>::quiet_NaN();
                throw compare_error(label + ": " + head_text(h.layer, h.q_head)
                                    + " has no standard error (ap_overall_se is nan): analyze it with "
                                      "confidence_intervals on (docs/method.md §8.3)"
                                    + (sequences < 10.0
                                           ? "; it has " + number_text(sequences)
                                                 + " sequences (n_sequences), and sequence-level errors need at "
                                                   "least 10: give it more sequences, or analyze it with "
                                                   "sampling_unit token (errors that take the tokens as independent)"
                                           : std::string()));
            }
            if (!s.heads.emplace(head_key{h.layer, h.q_head}, h).second)
            {
                throw compare_error(metrics.file + ": line " + std::to_string(n) + ": "
                                    + head_text(h.layer, h.q_head) + " has two rows");
            }
        }
        std::set<std::pair<head_key, std::int64_t>> buckets_seen;
        for (std::size_t r = 0; r < profile.rows.size(); ++r)
        {
            const std::vector<std::string>& row = profile.rows[r];
            const std::size_t n = r + 2;
            const head_key key{integer(profile, row, n, "layer"), integer(profile, row, n, "q_head")};
            const auto it = s.heads.find(key);
            if (it == s.heads.end())
            {
                throw compare_error(profile.file + ": line " + std::to_string(n) + ": "
                                    + head_text(key.first, key.second) + " has no row in " + io::metrics_csv);
            }
            if (integer(profile, row, n, "k_head") != it->second.k_head)
            {
                throw compare_error(cell_text(profile, n, "k_head") + ": " + head_text(key.first, key.second)
                                    + " has k_head " + row[profile.index("k_head")] + ", "
                                    + std::to_string(it->second.k_head) + " in " + io::metrics_csv);
            }
            bucket_row b;
            b.q_bucket = integer(profile, row, n, "q_bucket");
            if (!buckets_seen.insert({key, b.q_bucket}).second)
            {
                throw compare_error(profile.file + ": line " + std::to_string(n) + ": "
                                    + head_text(key.first, key.second) + " q_bucket " + std::to_string(b.q_bucket)
                                    + " has two rows");
            }
            b.ap = read_estimate(profile, row, n, "plasticity", "plasticity_bias", "plasticity_se", 0.0, 1.0);
            it->second.buckets.push_back(b);
        }
        if (reader.holds(io::influence_csv))
        {
            // A table of its header only: the set was analyzed without the influences.
            s.has_influences = read_influences(s, reader) > 0;
            if (s.has_influences)
            {
                check_influences(s, reader.display(io::influence_csv));
            }
        }
        return s;
    }

    /// The result set in `folder` (result_set_reader.hpp: its shared lock held while it is read,
    /// one set, each file bounded), checked; compare_error naming the file, line and column.
    inline loaded_set load_set(const std::string& folder, const std::string& name)
    {
        const std::string label = "result set '" + folder + "'";
        std::optional<result_set_reader> reader;
        try
        {
            reader.emplace(folder);
        }
        catch (const result_folder_error& e)
        {
            throw compare_error(label + ": " + e.what()
                                + (e.problem() == result_folder_problem::busy ? ", then compare" : ""));
        }
        try
        {
            return load_set(*reader, name);
        }
        catch (const io::input_error& e)
        {
            throw compare_error(e.what());
        }
    }

    /// f(example_id, Phi^A_e, Phi^B_e) over the union of the example ids of `a` and `b` (each in
    /// increasing example_id), in increasing example_id; an id of one list only has 0 in the other.
    template <class F>
    void for_union(const influence_list& a, const influence_list& b, F&& f)
    {
        std::size_t i = 0, k = 0;
        while (i < a.size() || k < b.size())
        {
            if (k == b.size() || (i < a.size() && a[i].first < b[k].first))
            {
                f(a[i].first, a[i].second, 0.0);
                ++i;
            }
            else if (i == a.size() || b[k].first < a[i].first)
            {
                f(b[k].first, 0.0, b[k].second);
                ++k;
            }
            else
            {
                f(a[i].first, a[i].second, b[k].second);
                ++i;
                ++k;
            }
        }
    }

    /// The sequence-level standard error of a sum of per-sequence terms x_e (influences, or their
    /// differences): sqrt(G/(G-1) sum_e (x_e - mean x)^2) over the G sequences; NaN when G < 2.
    template <class Values>
    double sequence_se(const Values& x)
    {
        const double g = static_cast<double>(x.size());
        if (x.size() < 2)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        double mean = 0.0;
        for (const auto& v : x)
        {
            mean += v.second;
        }
        mean /= g;
        double sum = 0.0;
        for (const auto& v : x)
        {
            sum += (v.second - mean) * (v.second - mean);
        }
        return std::sqrt(g / (g - 1.0) * sum);
    }

    /// The paired standard error of a head's change: D_e = Phi^B_e - Phi^A_e over the union of
    /// the two sets' example ids; NaN when either set has no influences for the quantity.
    inline double paired_se(const influence_list* a, const influence_list* b)
    {
        if (a == nullptr || b == nullptr)
        {
            return std::numeric_limits<double>::quiet_NaN();
        }
        std::vector<std::pair<std::int64_t, double>> d;
        d.reserve(std::max(a->size(), b->size()));
        for_union(*a, *b, [&](std::int64_t id, double x, double y) { d.emplace_back(id, y - x); });
        return sequence_se(d);
    }

    /// One compared quantity of one head.
    struct comparison
    {
        const head* a = nullptr;
        std::string quantity;
        std::int64_t q_bucket = -1;  // -1: a head-level quantity
        estimate x, y;
        const influence_list* influence_a = nullptr;  // the sets' per-sequence influences, when read
        const influence_list* influence_b = nullptr;
        double difference = std::numeric_limits<double>::quiet_NaN();
        double se = std::numeric_limits<double>::quiet_NaN();
        double z = std::numeric_limits<double>::quiet_NaN();
        double p = std::numeric_limits<double>::quiet_NaN();
        double q_bh = std::numeric_limits<double>::quiet_NaN();
        double p_holm = std::numeric_limits<double>::quiet_NaN();
    };

    /// The change of one quantity from head `a` (estimate x) to head `b` (estimate y), its
    /// standard error by `design` (§8.6), z and p.
    inline comparison compare(const head& a, const head& b, const std::string& quantity, std::int64_t bucket,
                              const estimate& x, const estimate& y, compare_design design)
    {
        comparison c;
        c.a = &a;
        c.quantity = quantity;
        c.q_bucket = bucket;
        c.x = x;
        c.y = y;
        const quantity_key key{quantity, bucket};
        c.influence_a = a.influences_of(key);
        c.influence_b = b.influences_of(key);
        c.difference = (y.value - y.bias) - (x.value - x.bias);
        if (design == compare_design::paired)
        {
            // Both sets need an error of their own: a quantity without one (too few sequences,
            // no interval) is not tested in either design.
            c.se = std::isfinite(x.se) && std::isfinite(y.se) ? paired_se(c.influence_a, c.influence_b)
                                                               : std::numeric_limits<double>::quiet_NaN();
        }
        else
        {
            c.se = std::sqrt(x.se * x.se + y.se * y.se);
        }
        if (std::isfinite(c.difference) && c.se > 0.0)
        {
            c.z = c.difference / c.se;
            c.p = std::erfc(std::abs(c.z) / std::sqrt(2.0));  // two-sided, accurate in the tail
        }
        return c;
    }

    /// The sequence-level standard error of the mean over `members` (n heads) of one set's
    /// estimates: the per-sequence influences averaged over the heads (an example id a head
    /// lacks contributes 0 to it), then sequence_se. NaN when a member has no influences.
    inline double mean_se_of_set(const std::vector<const influence_list*>& members)
    {
        const double n = static_cast<double>(members.size());
        std::map<std::int64_t, double> sum;
        for (const influence_list* list : members)
        {
            if (list == nullptr)
            {
                return std::numeric_limits<double>::quiet_NaN();
            }
            for (const auto& [id, phi] : *list)
            {
                sum[id] += phi / n;
            }
        }
        return sequence_se(sum);
    }

    /// The standard error of the mean change over heads (the model-level summary) from the
    /// per-sequence influences, the heads sharing their sequences: paired, the per-sequence
    /// mean over heads of D_e; unpaired, each set's mean_se_of_set, variances added.
    inline double mean_se_of_changes(const std::vector<const comparison*>& members, compare_design design)
    {
        if (design == compare_design::unpaired)
        {
            std::vector<const influence_list*> a, b;
            for (const comparison* c : members)
            {
                a.push_back(c->influence_a);
                b.push_back(c->influence_b);
            }
            return std::hypot(mean_se_of_set(a), mean_se_of_set(b));
        }
        const double n = static_cast<double>(members.size());
        std::map<std::int64_t, double> sum;
        for (const comparison* c : members)
        {
            if (c->influence_a == nullptr || c->influence_b == nullptr)
            {
                return std::numeric_limits<double>::quiet_NaN();
            }
            for_union(*c->influence_a, *c->influence_b,
                      [&](std::int64_t id, double x, double y) { sum[id] += (y - x) / n; });
        }
        return sequence_se(sum);
    }

    /// Benjamini-Hochberg q-values and Holm's adjusted p-values of `family` (multiple_testing.hpp;
    /// a NaN p is no test).
    inline void adjust(std::vector<comparison*>& family)
    {
        xt::xtensor<double, 1> p = xt::xtensor<double, 1>::from_shape({family.size()});
        for (std::size_t i = 0; i < family.size(); ++i)
        {
            p(i) = family[i]->p;
        }
        const adjusted_p_values adjusted = adjust_p_values(p);
        for (std::size_t i = 0; i < family.size(); ++i)
        {
            if (!std::isnan(family[i]->p))
            {
                family[i]->q_bh = adjusted.benjamini_hochberg(i);
                family[i]->p_holm = adjusted.holm(i);
            }
        }
    }

    /// Appends ",x" for each x (csv_rows.hpp's number format).
    inline void append_reals(std::string& out, std::initializer_list<double> values)
    {
        for (double x : values)
        {
            out += ',';
            io::append_double(out, x);
        }
    }

}  // namespace compare_detail

/// The compared result sets as files (compare_heads.csv, compare_changed.csv,
/// compare_summary.csv) and messages worth showing. Throws compare_error naming the set and the
/// problem when the sets cannot be compared.
struct compare_result
{
    std::vector<std::string> names;  // of the files, in order
    std::vector<std::string> texts;  // their bytes
    std::vector<std::string> notes;  // e.g. heads left out with common_heads
    std::size_t compared_heads = 0;
    std::size_t changed_heads = 0;   // heads with a significant change, over all pairs
    compare_design design = compare_design::unpaired;  // the design used (the options')
};

inline compare_result compare_result_sets(const compare_options& options)
{
    using namespace compare_detail;
    if (options.folders.size() < 2)
    {
        throw compare_error("needs at least 2 result sets to compare, got " + std::to_string(options.folders.size()));
    }
    if (!options.names.empty() && options.names.size() != options.folders.size())
    {
        throw compare_error(std::to_string(options.names.size()) + " names for " + std::to_string(options.folders.size())
                            + " result sets");
    }
    if (!(options.alpha > 0.0 && options.alpha < 1.0))
    {
        throw compare_error("alpha must be in (0, 1), got " + number_text(options.alpha));
    }
    std::vector<loaded_set> sets;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < options.folders.size(); ++i)
    {
        std::string name = options.names.empty() ? std::filesystem::path(options.folders[i]).lexically_normal().filename().string()
                                                 : options.names[i];
        if (name.empty() || name == ".")
        {
            name = options.folders[i];
        }
        // The tables are written without quoting (docs/method.md §3.1): a name with a comma, a
        // double quote or a line break would not read back as one field.
        if (name.find_first_of(",\"\r\n") != std::string::npos)
        {
            throw compare_error("set name '" + name + "' holds a comma, a double quote or a line break (give --names)");
        }
        if (!seen.insert(name).second)
        {
            throw compare_error("two result sets are named '" + name + "' (give --names)");
        }
        sets.push_back(load_set(options.folders[i], name));
        if (options.design == compare_design::paired && !sets.back().has_influences)
        {
            throw compare_error("design paired (--design paired, design='paired'): result set '" + options.folders[i]
                                + "' has no per-sequence influences (" + io::influence_csv
                                + " absent, or without rows; the paired errors need them): analyze it with "
                                  "--sequence-influences on (sequence_influences: on), or compare unpaired");
        }
    }
    // The heads: the same layout in every set, or (common_heads) the heads of all of them.
    compare_result result;
    result.design = options.design;
    std::vector<head_key> keys;
    for (const auto& [key, h] : sets[0].heads)
    {
        bool everywhere = true;
        for (std::size_t s = 1; s < sets.size(); ++s)
        {
            const auto it = sets[s].heads.find(key);
            if (it == sets[s].heads.end())
            {
                everywhere = false;
                continue;
            }
            if (it->second.d_model != h.d_model || it->second.k_head != h.k_head)
            {
                throw compare_error("head layer " + std::to_string(key.first) + " q_head " + std::to_string(key.second)
                                    + " differs: k_head " + std::to_string(h.k_head) + ", d_model "
                                    + std::to_string(h.d_model) + " in '" + sets[0].name + "' but k_head "
                                    + std::to_string(it->second.k_head) + ", d_model "
                                    + std::to_string(it->second.d_model) + " in '" + sets[s].name
                                    + "' (results of different models cannot be compared)");
            }
        }
        if (everywhere)
        {
            keys.push_back(key);
        }
    }
    std::size_t total = 0;
    for (const auto& s : sets)
    {
        total = std::max(total, s.heads.size());
    }
    if (!options.common_heads)
    {
        // The first set whose heads are not the first set's: named with its own count.
        for (std::size_t i = 1; i < sets.size(); ++i)
        {
            std::size_t common = 0;
            for (const auto& entry : sets[i].heads)
            {
                common += sets[0].heads.count(entry.first);
            }
            if (common != sets[0].heads.size() || common != sets[i].heads.size())
            {
                throw compare_error("result sets '" + sets[0].name + "' and '" + sets[i].name + "' have different heads ("
                                    + std::to_string(sets[0].heads.size()) + " and "
                                    + std::to_string(sets[i].heads.size()) + " heads, " + std::to_string(common)
                                    + " in common): compare the common heads with --common-heads (common_heads=True)");
            }
        }
    }
    if (keys.empty())
    {
        throw compare_error("the result sets have no head in common");
    }
    if (keys.size() < total)
    {
        result.notes.push_back("compared the " + std::to_string(keys.size()) + " heads common to every set ("
                               + std::to_string(total - keys.size()) + " heads of some sets left out)");
    }
    result.compared_heads = keys.size();
    result.notes.push_back(
        options.design == compare_design::paired
            ? "design paired: a head's change has the standard error of the per-sequence differences of the two "
              "sets' influences (head_sequence_influence.csv), the sets taken to share their sequences (the same "
              "example_id is the same text in both, as stated by choosing paired); the errors cover what the "
              "analyses' errors cover (by default sequence-level: the sampling of the texts and of the tokens, "
              "docs/method.md §8.3, §8.6)"
            : "design unpaired: a head's change has the standard error sqrt(s_A^2 + s_B^2) of the two sets' own "
              "errors, the sets taken as independent samples of sequences (different texts); the errors cover what "
              "the analyses' errors cover (by default sequence-level, docs/method.md §8.3, §8.6); for sets "
              "analyzed on the same texts, --design paired (design='paired') is valid and more powerful");
    {
        std::string without;
        for (const auto& set : sets)
        {
            if (!set.has_influences)
            {
                without += (without.empty() ? "'" : ", '") + set.name + "'";
            }
        }
        if (!without.empty())
        {
            result.notes.push_back(
                "the model-level standard errors (compare_summary.csv, compare_trajectory.csv) take the heads as "
                "independent (sqrt(sum s^2)/n) where a set has no "
                + std::string(io::influence_csv) + " (" + without
                + "): the heads of a model see the same sequences, so their errors are correlated and these are "
                  "likely too small; analyze with --sequence-influences on for errors that account for it");
        }
    }

    std::string heads_text = std::string(compare_heads_header) + "\n";
    std::string changed_text = std::string(compare_changed_header) + "\n";
    std::string summary_text = std::string(compare_summary_header) + "\n";
    const double z_level = attention_plasticity::normal_quantile(1.0 - 0.5 * options.alpha);
    const char* const head_quantities[] = {"ap_overall", "ap_first20", "ap_last20", "ap_drop"};
    for (std::size_t s = 0; s + 1 < sets.size(); ++s)
    {
        const loaded_set& A = sets[s];
        const loaded_set& B = sets[s + 1];
        std::vector<comparison> rows;
        std::size_t other_context = 0;
        std::string context_example;
        for (const head_key& key : keys)
        {
            const head& a = A.heads.at(key);
            const head& b = B.heads.at(key);
            if (std::isfinite(a.context_length) && std::isfinite(b.context_length)
                && a.context_length != b.context_length)
            {
                if (other_context++ == 0)
                {
                    context_example = head_text(key.first, key.second) + ": C " + number_text(a.context_length)
                                      + " and " + number_text(b.context_length);
                }
            }
            const estimate* ea[] = {&a.overall, &a.first20, &a.last20, &a.drop};
            const estimate* eb[] = {&b.overall, &b.first20, &b.last20, &b.drop};
            for (std::size_t q = 0; q < 4; ++q)
            {
                rows.push_back(compare(a, b, head_quantities[q], -1, *ea[q], *eb[q], options.design));
            }
            // The query buckets of either set (a bucket of one only: NaN in the other).
            std::map<std::int64_t, std::pair<estimate, estimate>> buckets;
            for (const bucket_row& r : a.buckets)
            {
                buckets[r.q_bucket].first = r.ap;
            }
            for (const bucket_row& r : b.buckets)
            {
                buckets[r.q_bucket].second = r.ap;
            }
            for (const auto& [bucket, pair] : buckets)
            {
                rows.push_back(compare(a, b, "ap_bucket", bucket, pair.first, pair.second, options.design));
            }
        }
        if (other_context > 0)
        {
            result.notes.push_back("'" + A.name + "' and '" + B.name + "': " + std::to_string(other_context)
                                   + " heads have another context length C (context_length; e.g. " + context_example
                                   + "): their ap_first20 and ap_last20 are over other positions (tau < 0.2 C, "
                                     "tau >= 0.8 C)");
        }
        if (options.design == compare_design::paired)
        {
            // Pairing assumes the same example ids in both sets: say how many are in one only.
            std::set<std::int64_t> ids_a, ids_b;
            for (const head_key& key : keys)
            {
                for (const auto& [set, ids] : {std::make_pair(&A, &ids_a), std::make_pair(&B, &ids_b)})
                {
                    if (const influence_list* list = set->heads.at(key).influences_of({"ap_overall", -1}))
                    {
                        for (const auto& entry : *list)
                        {
                            ids->insert(entry.first);
                        }
                    }
                }
            }
            std::size_t common = 0;
            for (const std::int64_t id : ids_a)
            {
                common += ids_b.count(id);
            }
            const std::size_t all = ids_a.size() + ids_b.size() - common;
            if (common < all)
            {
                result.notes.push_back("design paired: '" + A.name + "' and '" + B.name + "' have "
                                       + std::to_string(all - common) + " of their " + std::to_string(all)
                                       + " example ids in one set only (their influences count as 0 in the other): "
                                         "pairing assumes the same example_id is the same text in both sets");
            }
        }
        // Families: one per quantity (and bucket), across heads.
        std::map<std::pair<std::string, std::int64_t>, std::vector<comparison*>> families;
        for (comparison& c : rows)
        {
            families[{c.quantity, c.q_bucket}].push_back(&c);
        }
        for (auto& [name, family] : families)
        {
            adjust(family);
        }
        std::map<head_key, std::vector<std::string>> changed;
        for (const comparison& c : rows)
        {
            const bool significant = c.q_bh <= options.alpha;
            heads_text += A.name + "," + B.name + "," + std::to_string(c.a->layer) + "," + std::to_string(c.a->q_head)
                          + "," + std::to_string(c.a->k_head) + "," + c.quantity + ","
                          + (c.quantity == "ap_bucket" ? std::to_string(c.q_bucket) : "");
            append_reals(heads_text, {c.x.value, c.y.value, c.difference, c.se, c.z, c.p, c.q_bh, c.p_holm});
            heads_text += significant ? ",1," : ",0,";
            heads_text += design_name(options.design);
            heads_text += '\n';
            if (significant)
            {
                changed[{c.a->layer, c.a->q_head}].push_back(
                    c.quantity == "ap_bucket" ? "ap_bucket_" + std::to_string(c.q_bucket) : c.quantity);
            }
        }
        for (const auto& [key, names] : changed)
        {
            std::string list;
            for (const auto& n : names)
            {
                list += (list.empty() ? "" : " ") + n;
            }
            changed_text += A.name + "," + B.name + "," + std::to_string(key.first) + "," + std::to_string(key.second)
                            + "," + std::to_string(A.heads.at(key).k_head) + "," + std::to_string(names.size()) + ","
                            + list + "\n";
        }
        result.changed_heads += changed.size();
        // The model-level summary: the mean over heads, all layers (layer -1) and per layer.
        const bool sequence_level = A.has_influences && B.has_influences;
        for (std::size_t q = 0; q < 4; ++q)
        {
            std::map<std::int64_t, std::vector<const comparison*>> groups;
            for (const comparison& c : rows)
            {
                if (c.quantity == head_quantities[q] && std::isfinite(c.difference) && std::isfinite(c.se))
                {
                    groups[-1].push_back(&c);
                    groups[c.a->layer].push_back(&c);
                }
            }
            for (const auto& [layer, members] : groups)
            {
                const double n = static_cast<double>(members.size());
                double mean_a = 0.0, mean_b = 0.0, mean_d = 0.0, variance = 0.0, significant = 0.0;
                for (const comparison* c : members)
                {
                    mean_a += c->x.value / n;
                    mean_b += c->y.value / n;
                    mean_d += c->difference / n;
                    variance += c->se * c->se;
                    significant += c->q_bh <= options.alpha ? 1.0 : 0.0;
                }
                double spread = 0.0;
                for (const comparison* c : members)
                {
                    spread += (c->difference - mean_d) * (c->difference - mean_d);
                }
                // Heads share their sequences: with the per-sequence influences, the mean's error
                // is the sequences' (§8.6); without, the heads are taken as independent.
                const double se = sequence_level ? mean_se_of_changes(members, options.design) : std::sqrt(variance) / n;
                const double z = se > 0.0 ? mean_d / se : std::numeric_limits<double>::quiet_NaN();
                summary_text += A.name + "," + B.name + "," + head_quantities[q] + ","
                                + (layer < 0 ? std::string("all") : std::to_string(layer)) + ","
                                + std::to_string(members.size());
                append_reals(summary_text, {mean_a, mean_b, mean_d, se, mean_d - z_level * se, mean_d + z_level * se, z,
                                              std::erfc(std::abs(z) / std::sqrt(2.0)),
                                              members.size() > 1 ? std::sqrt(spread / (n - 1.0))
                                                                 : std::numeric_limits<double>::quiet_NaN()});
                summary_text += "," + std::to_string(static_cast<std::size_t>(significant)) + "\n";
            }
        }
    }
    // The trajectory: each set's mean over the compared heads, all layers and by layer.
    std::string trajectory_text = std::string(compare_trajectory_header) + "\n";
    for (std::size_t s = 0; s < sets.size(); ++s)
    {
        const char* const quantities[] = {"ap_overall", "ap_first20", "ap_last20", "ap_drop", "bias_strength"};
        for (std::size_t q = 0; q < 5; ++q)
        {
            std::map<std::int64_t, std::vector<std::pair<estimate, const influence_list*>>> groups;
            for (const head_key& key : keys)
            {
                const head& h = sets[s].heads.at(key);
                const influence_list* influences = q < 4 ? h.influences_of({quantities[q], -1}) : nullptr;
                const estimate e = q == 0   ? h.overall
                                   : q == 1 ? h.first20
                                   : q == 2 ? h.last20
                                   : q == 3 ? h.drop
                                            : estimate{h.bias_strength, 0.0, std::numeric_limits<double>::quiet_NaN()};
                if (std::isfinite(e.value))
                {
                    groups[-1].push_back({e, influences});
                    groups[key.first].push_back({e, influences});
                }
            }
            for (const auto& [layer, members] : groups)
            {
                const double n = static_cast<double>(members.size());
                double mean = 0.0, variance = 0.0;
                std::vector<const influence_list*> lists;
                for (const auto& [e, influences] : members)
                {
                    mean += e.value / n;
                    variance += e.se * e.se;
                    lists.push_back(std::isfinite(e.se) ? influences : nullptr);
                }
                // As the summary's: the sequences' error of the mean when the set has influences.
                const double se = q < 4 && sets[s].has_influences ? mean_se_of_set(lists) : std::sqrt(variance) / n;
                trajectory_text += sets[s].name + "," + std::to_string(s) + "," + quantities[q] + ","
                                   + (layer < 0 ? std::string("all") : std::to_string(layer)) + ","
                                   + std::to_string(members.size());
                append_reals(trajectory_text, {mean, se, mean - z_level * se, mean + z_level * se});
                trajectory_text += "\n";
            }
        }
    }
    if (options.same_dump)
    {
        result.notes.push_back(
            options.design == compare_design::paired
                ? "same dump, design paired: the per-sequence differences of the influences account for the "
                  "sequences and tokens the two analyses share (docs/method.md §8.6)"
                : "same dump: the standard errors add the two analyses' variances as for independent samples; the "
                  "analyses share the query sample, so the difference's true variance is smaller and the tests are "
                  "conservative (docs/method.md §8.6; --design paired accounts for the shared sequences)");
    }
    result.names = {compare_heads_csv, compare_changed_csv, compare_summary_csv, compare_trajectory_csv};
    result.texts = {std::move(heads_text), std::move(changed_text), std::move(summary_text), std::move(trajectory_text)};
    return result;
}

/// Throws compare_error when the output folder is one of the result sets or lies inside one
/// (io/folder_overlap.hpp: by the folders themselves, not their paths), or holds the results of
/// another program (an analysis): the comparison's set would replace theirs as the folder's
/// current set and strand their links. A folder holding the sets as subfolders is fine.
inline void check_output_folder(const compare_options& options, const std::string& output_dir)
{
    const io::folder_overlap overlap = io::find_folder_overlap(output_dir, options.folders);
    if (io::output_endangers_input(overlap.relation))
    {
        throw compare_error("the output folder '" + output_dir + "' " + io::relation_words(overlap.relation)
                            + " the result set '" + options.folders[overlap.input]
                            + "'; write the comparison into another folder (outside every result set)");
    }
    const std::vector<std::string> foreign = foreign_result_files(
        output_dir, {compare_heads_csv, compare_changed_csv, compare_summary_csv, compare_trajectory_csv});
    if (!foreign.empty())
    {
        throw compare_error("the output folder '" + output_dir + "' holds the results of another program ("
                            + name_list(foreign) + "): the comparison would replace them as its current set and "
                            "leave their links dangling; write the comparison into another folder");
    }
}

/// The files of a comparison for result_set_writer::commit (views of `r`'s texts).
inline std::vector<io::result_file> compare_files(const compare_result& r)
{
    std::vector<io::result_file> files;
    for (std::size_t i = 0; i < r.names.size(); ++i)
    {
        files.push_back({r.names[i], {r.texts[i]}});
    }
    return files;
}
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
