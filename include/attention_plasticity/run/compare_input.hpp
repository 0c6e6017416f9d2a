#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_INPUT_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_INPUT_HPP

// The result sets a comparison reads (docs/method.md §8.6): each head's estimates (value, bias,
// standard error) of head_metrics.csv and head_profile.csv and, when the set has them, the
// per-sequence influences of head_sequence_influence.csv (§8.3), read through io/csv_reader.hpp
// by the schema's column names and checked (an impossible value is refused naming the file, the
// line and the column). compare_result_sets.hpp compares what is loaded here.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <attention_plasticity/comparison.hpp>

#include "../io/bounded_read.hpp"
#include "../io/csv_rows.hpp"
#include "../io/csv_reader.hpp"
#include "../io/examples_table.hpp"
#include "errors.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run::compare_detail
{
// The estimates and the per-sequence influences are the core's (comparison.hpp, §8.6).
using attention_plasticity::estimate;
using attention_plasticity::influence_list;

/// Where an estimate is read: its value, bias and standard error columns, and the range of a
/// possible value (a plasticity is in [0, 1], a difference of two in [-1, 1]: §3.2, §3.4).
struct estimate_columns
{
    const char* value;
    const char* bias;
    const char* se;
    double low, high;
};

struct bucket_row
{
    std::int64_t q_bucket = 0;
    estimate ap;
};

/// A head-level quantity (ap_overall, ap_first20, ap_last20, ap_drop: -1) or a query
/// bucket's AP_j (ap_bucket, q_bucket) of one head.
using quantity_key = std::pair<std::string, std::int64_t>;

/// One head of one set: its four head-level estimates and its buckets.
struct head
{
    std::int64_t layer = 0, q_head = 0, k_head = 0, d_model = 0;
    estimate overall, first20, last20, drop;
    double context_length = std::numeric_limits<double>::quiet_NaN();  // C of §2.14
    double bias_strength = std::numeric_limits<double>::quiet_NaN();  // §8.5; NaN when not written
    std::vector<bucket_row> buckets;  // in q_bucket order
    std::map<quantity_key, influence_list> influences;  // empty without an influence table
    // The head's documents (n_documents of head_metrics.csv; n_sequences in sets written before
    // it, whose units are the examples; -1 when neither is written): no quantity has more rows
    // in the influence table, so reading keeps at most heads x documents rows (§8.6).
    std::int64_t documents = -1;
    const char* documents_column = "n_documents";

    /// The influences of a quantity, or nullptr when the set has none for it.
    const influence_list* influences_of(const quantity_key& key) const
    {
        const auto it = influences.find(key);
        return it == influences.end() ? nullptr : &it->second;
    }
};

/// A head-level quantity compared: its name (that of its value column in head_metrics.csv and
/// of its rows in head_sequence_influence.csv), its columns and its member of `head`.
struct head_quantity
{
    estimate_columns columns;
    estimate head::*member;

    const char* name() const { return columns.value; }
};

/// The head-level quantities compared, in the order of the tables' rows (one list: reading,
/// checking and comparing loop over it).
inline const head_quantity head_quantities[] = {
    {{"ap_overall", "ap_overall_bias", "ap_overall_se", 0.0, 1.0}, &head::overall},
    {{"ap_first20", "ap_first20_bias", "ap_first20_se", 0.0, 1.0}, &head::first20},
    {{"ap_last20", "ap_last20_bias", "ap_last20_se", 0.0, 1.0}, &head::last20},
    {{"ap_drop", "ap_drop_bias", "ap_drop_se", -1.0, 1.0}, &head::drop}};

/// A query bucket's AP_j in head_profile.csv.
inline const estimate_columns bucket_columns = {"plasticity", "plasticity_bias", "plasticity_se", 0.0, 1.0};

using head_key = std::pair<std::int64_t, std::int64_t>;

struct loaded_set
{
    std::string name, folder;
    std::map<head_key, head> heads;
    bool has_influences = false;  // head_sequence_influence.csv was read
    // The set's examples.csv (docs/method.md §1.1): the documents and their fingerprints, by
    // which pairing is checked (§8.6); none: older sets, or dumps without one.
    std::optional<io::examples_table> examples;
    std::string examples_file;  // names it in messages
};

inline std::string head_text(std::int64_t layer, std::int64_t q_head)
{
    return "head layer " + std::to_string(layer) + " q_head " + std::to_string(q_head);
}

/// An estimate read from `row` at `c`, checked: the value NaN or within [low, high] (a rounding's
/// margin allowed), the bias NaN or finite, the standard error NaN or finite and >= 0. An
/// impossible value is refused (input_error naming the file, the line and the column): an
/// infinite error would make any change "no change", a plasticity of 7.5 is not one.
template <class Row>
estimate read_estimate(const Row& row, const estimate_columns& c)
{
    const estimate e{row.real(c.value), row.real(c.bias), row.real(c.se)};
    constexpr double margin = 1e-9;
    if (!std::isnan(e.value) && !(e.value >= c.low - margin && e.value <= c.high + margin))
    {
        throw row.error(c.value, row.text(c.value) + " is not a plasticity" + (c.low < 0.0 ? " difference" : "")
                                     + " (within [" + io::format_number(c.low) + ", " + io::format_number(c.high)
                                     + "], docs/method.md §3.2)");
    }
    if (std::isinf(e.bias))
    {
        throw row.error(c.bias, row.text(c.bias) + " is not a bias (finite or nan)");
    }
    if (!std::isnan(e.se) && !(std::isfinite(e.se) && e.se >= 0.0))
    {
        throw row.error(c.se, row.text(c.se) + " is not a standard error (finite and >= 0, or nan)");
    }
    return e;
}

/// The longest line accepted in the influence table (its rows are a few dozen bytes): a
/// file of one endless line is refused, not read into memory.
inline constexpr std::size_t max_influence_line_bytes = 1 << 16;

/// The influence table's columns (io::influence_header), each required; compare_error naming
/// `file` for the first absent.
template <class Header>
void check_influence_columns(const Header& header, const std::string& file)
{
    std::vector<std::string> schema;
    io::split_fields(io::influence_header, schema);
    for (const std::string& name : schema)
    {
        if (!header.has(name) && !(name == "document_id" && header.has("example_id")))  // older sets: example_id
        {
            throw compare_error(file + ": has no column '" + name + "' (its header should be " + io::influence_header
                                + ")");
        }
    }
}

/// The influence table's unit column: document_id, or example_id in older sets (docs/method.md §3.7).
template <class Header>
const char* influence_unit_column(const Header& header)
{
    return header.has("document_id") ? "document_id" : "example_id";
}

/// One row of the influence table into the heads of `s`, checked (io::input_error naming the row).
template <class Row>
void add_influence(loaded_set& s, const Row& row, const char* unit_column)
{
    const std::int64_t layer = row.integer("layer"), q_head = row.integer("q_head");
    const auto it = s.heads.find(head_key{layer, q_head});
    if (it == s.heads.end())
    {
        throw row.error(head_text(layer, q_head) + " has no row in " + io::metrics_csv);
    }
    if (row.integer("k_head") != it->second.k_head)
    {
        throw row.error(head_text(layer, q_head) + " has k_head " + row.text("k_head") + ", "
                        + std::to_string(it->second.k_head) + " in " + io::metrics_csv);
    }
    const std::string quantity = row.text("quantity");
    std::int64_t bucket = -1;
    if (quantity == "ap_bucket")
    {
        bucket = row.integer("q_bucket");
        const std::vector<bucket_row>& buckets = it->second.buckets;
        if (std::none_of(buckets.begin(), buckets.end(), [&](const bucket_row& b) { return b.q_bucket == bucket; }))
        {
            throw row.error("q_bucket", head_text(layer, q_head) + " has no bucket " + row.text("q_bucket") + " in "
                                            + io::profile_csv + " (a table of another run?)");
        }
    }
    else if (std::none_of(std::begin(head_quantities), std::end(head_quantities),
                          [&](const head_quantity& q) { return quantity == q.name(); }))
    {
        throw row.error("quantity '" + quantity + "' is not ap_overall, ap_first20, ap_last20, ap_drop or ap_bucket");
    }
    else if (row.text("q_bucket") != "0")
    {
        throw row.error(quantity + " has q_bucket '" + row.text("q_bucket")
                        + "' (0 on the head-level rows; only ap_bucket rows name a bucket, docs/method.md §3.7)");
    }
    const double influence = row.real("influence");
    if (std::isinf(influence))
    {
        throw row.error("influence", row.text("influence") + " is not an influence (finite or nan)");
    }
    // The document id exactly as an int64 (ids beyond 2^53 are not doubles); else as the reader's integer.
    std::int64_t id = 0;
    if (!io::detail::parse_int64_exact(row.text(unit_column), id))
    {
        id = row.integer(unit_column);
    }
    influence_list& list = it->second.influences[{quantity, bucket}];
    // Bounded by the data kept (§8.6): a quantity has a row per document of the head, so a row
    // beyond the head's documents (rows repeated, a table of another run, an oversized file) is
    // refused as it is read, before memory grows with the file.
    if (it->second.documents >= 0 && list.size() >= static_cast<std::size_t>(it->second.documents))
    {
        throw row.error(head_text(layer, q_head) + ", " + quantity + (bucket >= 0 ? " " + std::to_string(bucket) : "")
                        + ": more rows than the head's " + std::to_string(it->second.documents) + " documents ("
                        + it->second.documents_column + " in " + io::metrics_csv
                        + "): rows repeated, or a table of another run?");
    }
    list.emplace_back(id, influence);
}

/// The influence lists of `s` in increasing example_id; compare_error naming `file` for an id
/// with two rows.
inline void sort_influences(loaded_set& s, const std::string& file)
{
    for (auto& [key, h] : s.heads)
    {
        for (auto& [quantity, list] : h.influences)
        {
            std::stable_sort(list.begin(), list.end(), [](const auto& u, const auto& v) { return u.first < v.first; });
            for (std::size_t i = 1; i < list.size(); ++i)
            {
                if (list[i].first == list[i - 1].first)
                {
                    throw compare_error(file + ": " + head_text(key.first, key.second) + ", " + quantity.first
                                        + (quantity.second >= 0 ? " " + std::to_string(quantity.second) : "")
                                        + ": document_id " + std::to_string(list[i].first) + " has two rows");
                }
            }
        }
    }
}

/// The per-sequence influences of the set's head_sequence_influence.csv into the heads of `s`,
/// read line by line (a large table is not held as text); the number of rows. Throws
/// compare_error or io::input_error naming the file, the line and the problem.
inline std::size_t read_influences(loaded_set& s, const result_set_reader& reader)
{
    io::table_lines table(reader.lines(io::influence_csv, max_influence_line_bytes));
    const std::string& file = table.header().file();
    check_influence_columns(table.header(), file);
    while (table.next())
    {
        add_influence(s, table.row(), influence_unit_column(table.header()));
    }
    sort_influences(s, file);
    return table.rows();
}

/// Every quantity of `s` with a standard error has its sequences' influences (a table of
/// another run, or cut short, would pair the wrong numbers); else compare_error naming `file`.
inline void check_influences(const loaded_set& s, const std::string& file)
{
    std::set<std::int64_t> documents;
    if (s.examples)
    {
        for (const io::example_row& r : s.examples->rows)
        {
            documents.insert(r.document_id);
        }
    }
    for (const auto& [key, h] : s.heads)
    {
        for (const auto& [quantity, list] : h.influences)
        {
            for (const auto& [id, influence] : list)
            {
                if (s.examples && documents.count(id) == 0)
                {
                    throw compare_error(file + ": " + head_text(key.first, key.second) + ", " + quantity.first
                                        + ": document_id " + std::to_string(id) + " is not a document of "
                                        + s.examples_file + " (files of different runs?)");
                }
            }
        }
        std::vector<std::pair<quantity_key, double>> needed;  // each quantity with a standard error, and it
        for (const head_quantity& q : head_quantities)
        {
            const estimate& e = h.*q.member;
            if (std::isfinite(e.value) && std::isfinite(e.se))
            {
                needed.push_back({{q.name(), -1}, e.se});
            }
        }
        for (const bucket_row& b : h.buckets)
        {
            if (std::isfinite(b.ap.value) && std::isfinite(b.ap.se))
            {
                needed.push_back({{"ap_bucket", b.q_bucket}, b.ap.se});
            }
        }
        const auto quantity_text = [](const quantity_key& q) {
            return q.first + (q.second >= 0 ? " " + std::to_string(q.second) : "");
        };
        const std::string where = file + ": " + head_text(key.first, key.second);
        std::set<std::int64_t> units;  // every document of the head's quantities with an error
        for (const auto& [q, se] : needed)
        {
            const influence_list* list = h.influences_of(q);
            if (list == nullptr)
            {
                throw compare_error(where + " has no rows of " + quantity_text(q) + ", which has a standard error in "
                                    + io::metrics_csv + "/" + io::profile_csv + " (files of different runs?)");
            }
            for (const auto& entry : *list)
            {
                units.insert(entry.first);
            }
        }
        for (const auto& [q, se] : needed)
        {
            const influence_list& list = *h.influences_of(q);
            // Every document has a row of every quantity with an error (§8.3: the influences of
            // all the head's documents, centred); a row left out would count as 0.
            if (list.size() != units.size())
            {
                std::size_t i = 0;
                for (const std::int64_t id : units)
                {
                    if (i >= list.size() || list[i].first != id)
                    {
                        throw compare_error(where + ", " + quantity_text(q) + ": document_id " + std::to_string(id)
                                            + " has no row (it has rows of the head's other quantities; a table cut "
                                              "or edited?)");
                    }
                    ++i;
                }
            }
            double squares = 0.0;
            for (const auto& [id, influence] : list)
            {
                if (std::isnan(influence))
                {
                    throw compare_error(where + ", " + quantity_text(q) + ": document_id " + std::to_string(id)
                                        + " has influence nan, but the quantity has a standard error ("
                                        + io::format_number(se) + ")");
                }
                squares += influence * influence;
            }
            // The standard error is sqrt(G/(G-1) sum Phi^2) of the influences written (§8.3, §8.6):
            // both round-trip exactly (%.17g), so they differ only by the order of the float64 sum,
            // a relative (2G + 16) epsilon at most (docs/method.md §8.6).
            const double g = static_cast<double>(list.size());
            if (list.size() >= 2)
            {
                const double from_influences = std::sqrt(g / (g - 1.0) * squares);
                const double tolerance = (2.0 * g + 16.0) * std::numeric_limits<double>::epsilon() * se;
                if (!(std::abs(from_influences - se) <= tolerance))
                {
                    throw compare_error(where + ", " + quantity_text(q)
                                        + ": the influences do not give the head's standard error (sqrt(G/(G-1) "
                                          "sum Phi^2) = "
                                        + io::format_number(from_influences) + " over " + std::to_string(list.size())
                                        + " documents, standard error " + io::format_number(se) + " in "
                                        + io::metrics_csv + "/" + io::profile_csv
                                        + "): a table of another run, or edited (docs/method.md §8.6)");
                }
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

/// The end of the message for a column of head_metrics.csv or head_profile.csv that is absent.
inline const char* const missing_column_note =
    " (written by an older program, or not a head_metrics/head_profile file)";

/// A table of the set held whole (head_metrics.csv, head_profile.csv).
inline io::parsed_table read_table(const result_set_reader& reader, const char* name)
{
    return io::parsed_table(reader.read(name, max_table_bytes()), reader.display(name), missing_column_note);
}

/// The columns of head_metrics.csv a set written before the sequence-level errors lacks (the
/// head-level quantities but ap_overall, whose columns are older: their values, then their
/// standard errors and biases, then context_length): the first absent is named.
inline std::vector<const char*> sequence_error_columns()
{
    std::vector<const char*> columns;
    for (std::size_t q = 1; q < std::size(head_quantities); ++q)
    {
        columns.push_back(head_quantities[q].columns.value);
    }
    for (std::size_t q = 1; q < std::size(head_quantities); ++q)
    {
        columns.push_back(head_quantities[q].columns.se);
        columns.push_back(head_quantities[q].columns.bias);
    }
    columns.push_back("context_length");
    return columns;
}

/// The heads of a set from its head_metrics and head_profile tables (io::parsed_table read from
/// the folder, or column_table held in memory), checked; `label` names the set in the messages.
/// Throws compare_error or io::input_error naming the table, the row and the column.
template <class Table>
loaded_set load_heads(const Table& metrics, const Table& profile, const std::string& name, const std::string& folder,
                      const std::string& label)
{
    loaded_set s;
    s.name = name;
    s.folder = folder;
    for (const char* column : sequence_error_columns())
    {
        if (!metrics.header().has(column))
        {
            throw compare_error(metrics.header().file() + ": has no column '" + column
                                + "' (written before head_metrics.csv had the standard errors of ap_first20, "
                                  "ap_last20 and ap_drop: analyze the dump again with this version; "
                                  "docs/method.md §8.6)");
        }
    }
    const bool with_sequences = metrics.header().has("n_sequences");
    const bool with_documents = metrics.header().has("n_documents");
    const bool with_bias_strength = metrics.header().has("bias_strength");
    for (std::size_t r = 0; r < metrics.size(); ++r)
    {
        const auto row = metrics.row(r);
        head h;
        h.layer = row.integer("layer");
        h.q_head = row.integer("q_head");
        h.k_head = row.integer("k_head");
        h.d_model = row.integer("d_model");
        for (const head_quantity& q : head_quantities)
        {
            h.*q.member = read_estimate(row, q.columns);
        }
        h.context_length = row.real("context_length");
        h.documents_column = with_documents ? "n_documents" : "n_sequences";
        if (with_documents || with_sequences)
        {
            const std::string text = row.text(h.documents_column);
            std::int64_t n = -1;
            if (io::detail::parse_int64_exact(text, n) && n >= 0)
            {
                h.documents = n;
            }
        }
        if (with_bias_strength)
        {
            h.bias_strength = row.real("bias_strength");
        }
        if (!std::isnan(h.overall.value) && std::isnan(h.overall.se))
        {
            const double sequences = with_sequences ? row.real("n_sequences") : std::numeric_limits<double>::quiet_NaN();
            throw compare_error(label + ": " + head_text(h.layer, h.q_head)
                                + " has no standard error (ap_overall_se is nan): analyze it with "
                                  "confidence_intervals on (docs/method.md §8.3)"
                                + (sequences < 10.0 ? "; it has " + io::format_number(sequences)
                                                          + " sequences (n_sequences), and sequence-level errors need at "
                                                            "least 10: give it more sequences, or analyze it with "
                                                            "sampling_unit token (errors that take the tokens as independent)"
                                                    : std::string()));
        }
        if (!s.heads.emplace(head_key{h.layer, h.q_head}, h).second)
        {
            throw row.error(head_text(h.layer, h.q_head) + " has two rows");
        }
    }
    std::set<std::pair<head_key, std::int64_t>> buckets_seen;
    for (std::size_t r = 0; r < profile.size(); ++r)
    {
        const auto row = profile.row(r);
        const head_key key{row.integer("layer"), row.integer("q_head")};
        const auto it = s.heads.find(key);
        if (it == s.heads.end())
        {
            throw row.error(head_text(key.first, key.second) + " has no row in " + io::metrics_csv);
        }
        if (row.integer("k_head") != it->second.k_head)
        {
            throw row.error("k_head", head_text(key.first, key.second) + " has k_head " + row.text("k_head") + ", "
                                          + std::to_string(it->second.k_head) + " in " + io::metrics_csv);
        }
        bucket_row b;
        b.q_bucket = row.integer("q_bucket");
        if (!buckets_seen.insert({key, b.q_bucket}).second)
        {
            throw row.error(head_text(key.first, key.second) + " q_bucket " + std::to_string(b.q_bucket)
                            + " has two rows");
        }
        b.ap = read_estimate(row, bucket_columns);
        it->second.buckets.push_back(b);
    }
    // The degrees of freedom of the errors (§8.6): G - 1 for an error over the head's G documents
    // (n_documents >= 2); a set whose errors are not over documents (sampling_unit token writes
    // n_documents 0; older sets without the column) keeps the normal law (infinity).
    for (auto& entry : s.heads)
    {
        head& h = entry.second;
        const double df = h.documents >= 2 ? static_cast<double>(h.documents - 1) : std::numeric_limits<double>::infinity();
        for (const head_quantity& q : head_quantities)
        {
            (h.*q.member).df = df;
        }
        for (bucket_row& b : h.buckets)
        {
            b.ap.df = df;
        }
    }
    return s;
}

inline loaded_set load_set(const result_set_reader& reader, const std::string& name)
{
    const std::string& folder = reader.folder();
    const io::parsed_table metrics = read_table(reader, io::metrics_csv);
    const io::parsed_table profile = read_table(reader, io::profile_csv);
    loaded_set s = load_heads(metrics, profile, name, folder, "result set '" + folder + "'");
    if (reader.holds(io::examples_csv))
    {
        s.examples_file = reader.display(io::examples_csv);
        s.examples = io::parse_examples_csv(reader.read(io::examples_csv, io::max_examples_csv_bytes), s.examples_file);
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
        throw compare_error(label + ": " + e.what() + (e.problem() == result_folder_problem::busy ? ", then compare" : ""));
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

/// A table held as columns (a result object of the Python package: its DataFrame's columns),
/// read by load_heads and add_influence as io::parsed_table is: the same header() / size() /
/// row(i) and row.text / real / integer / error. Its messages name `label` (e.g. "set2:
/// head_metrics") and the row (0-based, as the DataFrame's).
class column_table
{
public:
    explicit column_table(std::string label) : m_label(std::move(label)) {}

    /// Adds column `name`; every column has the rows of the first (compare_error otherwise).
    void add(const std::string& name, std::vector<double> values)
    {
        fit(name, values.size());
        m_real[name] = std::move(values);
    }
    void add(const std::string& name, std::vector<std::int64_t> values)
    {
        fit(name, values.size());
        m_integer[name] = std::move(values);
    }
    void add(const std::string& name, std::vector<std::string> values)
    {
        fit(name, values.size());
        m_text[name] = std::move(values);
    }

    const column_table& header() const { return *this; }
    const std::string& file() const { return m_label; }
    bool has(const std::string& name) const
    {
        return m_real.count(name) != 0 || m_integer.count(name) != 0 || m_text.count(name) != 0;
    }
    std::size_t size() const { return m_rows; }

    class row_view
    {
    public:
        row_view(const column_table& table, std::size_t i) : m_table(&table), m_i(i) {}

        /// The value of `column` as text (a number as the CSV writes it).
        std::string text(const std::string& column) const
        {
            if (const auto it = m_table->m_text.find(column); it != m_table->m_text.end())
            {
                return it->second[m_i];
            }
            if (const auto it = m_table->m_integer.find(column); it != m_table->m_integer.end())
            {
                return std::to_string(it->second[m_i]);
            }
            return io::format_number(real(column));
        }

        double real(const std::string& column) const
        {
            if (const auto it = m_table->m_real.find(column); it != m_table->m_real.end())
            {
                return it->second[m_i];
            }
            if (const auto it = m_table->m_integer.find(column); it != m_table->m_integer.end())
            {
                return static_cast<double>(it->second[m_i]);
            }
            if (m_table->m_text.count(column) != 0)
            {
                throw error(column, "'" + text(column) + "' is not a number");
            }
            throw io::input_error(m_table->m_label, "has no column '" + column + "'" + missing_column_note);
        }

        std::int64_t integer(const std::string& column) const
        {
            if (const auto it = m_table->m_integer.find(column); it != m_table->m_integer.end())
            {
                return it->second[m_i];
            }
            const double x = real(column);
            if (!(std::floor(x) == x) || std::abs(x) > 9e15)
            {
                throw error(column, "'" + text(column) + "' is not an integer");
            }
            return static_cast<std::int64_t>(x);
        }

        io::input_error error(const std::string& what) const
        {
            return io::input_error(m_table->m_label, "row " + std::to_string(m_i) + ": " + what);
        }

        io::input_error error(const std::string& column, const std::string& what) const
        {
            return error("column " + column + ": " + what);
        }

    private:
        const column_table* m_table;
        std::size_t m_i;
    };

    row_view row(std::size_t i) const { return row_view(*this, i); }

private:
    void fit(const std::string& name, std::size_t rows)
    {
        if (m_columns++ == 0)
        {
            m_rows = rows;
        }
        else if (rows != m_rows)
        {
            throw compare_error(m_label + ": column '" + name + "' has " + std::to_string(rows) + " rows, the others "
                                + std::to_string(m_rows));
        }
    }

    std::string m_label;
    std::map<std::string, std::vector<double>> m_real;
    std::map<std::string, std::vector<std::int64_t>> m_integer;
    std::map<std::string, std::vector<std::string>> m_text;
    std::size_t m_columns = 0, m_rows = 0;
};

/// A set held in memory (`label` naming it in the messages, as a folder would be): its
/// head_metrics and head_profile tables and, when it has one, its head_sequence_influence table
/// (nullptr: none) and the text of its examples.csv (nullptr: none), loaded and checked as
/// load_set checks a folder's files (compare_error).
inline loaded_set load_set(const column_table& metrics, const column_table& profile, const column_table* influences,
                           const std::string& label, const std::string& name,
                           const std::string* examples_csv = nullptr)
{
    try
    {
        loaded_set s = load_heads(metrics, profile, name, label, "result set '" + label + "'");
        if (examples_csv != nullptr)
        {
            s.examples_file = label + ": " + io::examples_csv;
            s.examples = io::parse_examples_csv(*examples_csv, s.examples_file);
        }
        if (influences != nullptr)
        {
            check_influence_columns(influences->header(), influences->file());
            for (std::size_t r = 0; r < influences->size(); ++r)
            {
                add_influence(s, influences->row(r), influence_unit_column(influences->header()));
            }
            sort_influences(s, influences->file());
            // A table without rows: the set was analyzed without the influences.
            s.has_influences = influences->size() > 0;
            if (s.has_influences)
            {
                check_influences(s, influences->file());
            }
        }
        return s;
    }
    catch (const io::input_error& e)
    {
        throw compare_error(e.what());
    }
}
}  // namespace attention_plasticity::run::compare_detail

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_INPUT_HPP
