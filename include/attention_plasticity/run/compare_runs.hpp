#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP

// Comparing result sets head by head (docs/method.md §8.6): two or more result folders of
// ap_analyze (or ap_merge, or the Python package), named and ordered (checkpoints, variants),
// each compared with the next. Per head and quantity (ap_overall, ap_first20, ap_last20,
// ap_drop, and AP_j of each query bucket): the bias-corrected difference, its standard error
// from the intervals of §8.3, z, the two-sided p-value, Benjamini-Hochberg q-values and Holm's
// adjusted p-values across heads; the heads that changed; a model-level summary by layer; and
// each set's means over heads in order (the trajectory of checkpoints).
// ap_compare (ap_compare_main.cpp) and attention_plasticity.compare_runs (python/src) both
// call compare_result_sets() below and write its files, so their CSVs are the same bytes.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <attention_plasticity/intervals.hpp>
#include <attention_plasticity/normal.hpp>

#include "../io/csv_rows.hpp"
#include "../io/fs_util.hpp"
#include "cli_util.hpp"
#include "errors.hpp"
#include "result_set.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer (run -> io -> core, never back).
using namespace attention_plasticity::io;

/// What to compare and how.
struct compare_options
{
    std::vector<std::string> folders;  // the result sets, in order (at least 2)
    std::vector<std::string> names;    // their names; empty: the folders' last components
    double alpha = 0.05;               // level of the BH procedure (and of the intervals: 1 - alpha)
    bool common_heads = false;         // compare the heads common to all sets instead of refusing
    bool same_dump = false;            // the sets analyzed the same dump (different options)
};

inline const char* const compare_heads_csv = "compare_heads.csv";
inline const char* const compare_changed_csv = "compare_changed.csv";
inline const char* const compare_summary_csv = "compare_summary.csv";
inline const char* const compare_trajectory_csv = "compare_trajectory.csv";

inline const char* const compare_heads_header =
    "set_a,set_b,layer,q_head,k_head,quantity,q_bucket,value_a,value_b,difference,se,z,p,q_bh,p_holm,significant";
inline const char* const compare_changed_header = "set_a,set_b,layer,q_head,k_head,n_significant,quantities";
inline const char* const compare_summary_header =
    "set_a,set_b,quantity,layer,n_heads,mean_a,mean_b,mean_difference,se,ci_low,ci_high,z,p,sd_difference,"
    "n_significant";
inline const char* const compare_trajectory_header = "set,order,quantity,layer,n_heads,mean,se,ci_low,ci_high";

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
        double tau = 0.0;
        double n_queries = 0.0;
        estimate ap;
    };

    /// One head of one set: its four head-level estimates and its buckets.
    struct head
    {
        std::int64_t layer = 0, q_head = 0, k_head = 0, d_model = 0;
        estimate overall, first20, last20, drop;
        double bias_strength = std::numeric_limits<double>::quiet_NaN();  // §8.5; NaN when not written
        std::vector<bucket_row> buckets;  // in q_bucket order
    };

    using head_key = std::pair<std::int64_t, std::int64_t>;

    struct loaded_set
    {
        std::string name, folder;
        std::map<head_key, head> heads;
    };

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
                for (std::size_t i = 0; i < fields.size(); ++i)
                {
                    t.column[fields[i]] = i;
                }
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

    inline double number(const table& t, const std::vector<std::string>& row, const std::string& column)
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
            throw compare_error(t.file + ": column " + column + ": '" + text + "' is not a number");
        }
        return x;
    }

    inline std::int64_t integer(const table& t, const std::vector<std::string>& row, const std::string& column)
    {
        const double x = number(t, row, column);
        if (!(std::floor(x) == x) || std::abs(x) > 9e15)
        {
            throw compare_error(t.file + ": column " + column + ": '" + row[t.index(column)] + "' is not an integer");
        }
        return static_cast<std::int64_t>(x);
    }

    /// The folder holding the current files of a result folder: its current set (a result
    /// set of result_set.hpp, resolved once so that all files come from the same set), or the
    /// folder itself (plain copies of the files).
    inline std::string files_folder(const std::string& folder, const std::string& label)
    {
        namespace fs = std::filesystem;
        const path_info info = inspect_path(folder, "folder");
        if (!info.exists || !info.is_directory)
        {
            throw compare_error(label + ": " + (info.exists ? "is " + info.kind + ", not a folder" : info.problem));
        }
        const std::string state = (fs::path(folder) / result_set_writer::state_folder).string();
        struct stat st;
        if (::lstat(state.c_str(), &st) != 0)
        {
            return folder;
        }
        const std::string current = (fs::path(state) / "current").string();
        if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
        {
            throw compare_error(label + ": holds no complete result set (its run did not finish)");
        }
        const std::string set = detail::link_text(current);
        if ((set.rfind("set-", 0) != 0 && set.rfind("legacy-", 0) != 0) || set.find('/') != std::string::npos)
        {
            throw compare_error(label + ": " + current + " names '" + set + "', not a result set");
        }
        return (fs::path(state) / set).string();
    }

    inline std::string read_whole(const std::string& path, const std::string& label)
    {
        std::ifstream in(path, std::ios::binary);
        if (!in)
        {
            throw compare_error(label + ": cannot open " + path + ": " + errno_text(errno));
        }
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (in.bad())
        {
            throw compare_error(label + ": cannot read " + path);
        }
        return text;
    }

    /// §2.14's aggregate over the buckets of `keep` (in q_bucket order, NaN AP_j skipped), with
    /// the bias and standard error of §8.6 (buckets taken as independent).
    template <class Keep>
    estimate aggregate(const std::vector<bucket_row>& buckets, Keep&& keep)
    {
        double numerator = 0.0, weight = 0.0, bias = 0.0, variance = 0.0;
        for (const bucket_row& b : buckets)
        {
            if (!std::isnan(b.ap.value) && keep(b))
            {
                numerator += b.n_queries * b.ap.value;
                weight += b.n_queries;
                bias += b.n_queries * b.ap.bias;
                variance += b.n_queries * b.n_queries * b.ap.se * b.ap.se;
            }
        }
        estimate e;
        if (weight > 0.0)
        {
            e.value = numerator / weight;
            e.bias = bias / weight;
            e.se = std::sqrt(variance) / weight;
        }
        return e;
    }

    /// The buckets of ap_first20 (tau_j < 0.2 C) or ap_last20 (tau_j >= 0.8 C): C is not
    /// written, so the set is the shortest run of buckets from the lowest (highest) tau whose
    /// aggregate is the head's value, bit for bit. NaN: none.
    inline estimate tail_estimate(const std::vector<bucket_row>& buckets, double value, bool from_low,
                                  const std::string& where)
    {
        if (std::isnan(value))
        {
            return estimate{};
        }
        std::vector<double> taus;
        for (const bucket_row& b : buckets)
        {
            taus.push_back(b.tau);
        }
        std::sort(taus.begin(), taus.end());
        if (!from_low)
        {
            std::reverse(taus.begin(), taus.end());
        }
        for (const double limit : taus)
        {
            const estimate e = aggregate(buckets, [&](const bucket_row& b) {
                return from_low ? b.tau <= limit : b.tau >= limit;
            });
            if (e.value == value)
            {
                return e;
            }
        }
        throw compare_error(where + ": no run of its buckets in head_profile.csv gives its "
                            + std::string(from_low ? "ap_first20" : "ap_last20")
                            + " (head_metrics.csv and head_profile.csv of different runs?)");
    }

    inline loaded_set load_set(const std::string& folder, const std::string& name)
    {
        namespace fs = std::filesystem;
        const std::string label = "result set '" + folder + "'";
        loaded_set s;
        s.name = name;
        s.folder = folder;
        const std::string dir = files_folder(folder, label);
        // The folder's lock, shared: a run writing into it now would replace the set.
        const std::string lock_path = (fs::path(folder) / result_set_writer::state_folder / "lock").string();
        const int lock = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (lock >= 0 && ::flock(lock, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        {
            ::close(lock);
            throw compare_error(label + ": a run is writing into it; wait for it to finish, then compare");
        }
        const table metrics = parse_table(read_whole((fs::path(dir) / metrics_csv).string(), label),
                                          folder + "/" + metrics_csv);
        const table profile = parse_table(read_whole((fs::path(dir) / profile_csv).string(), label),
                                          folder + "/" + profile_csv);
        if (lock >= 0)
        {
            ::close(lock);
        }
        for (const auto& row : metrics.rows)
        {
            head h;
            h.layer = integer(metrics, row, "layer");
            h.q_head = integer(metrics, row, "q_head");
            h.k_head = integer(metrics, row, "k_head");
            h.d_model = integer(metrics, row, "d_model");
            h.overall = {number(metrics, row, "ap_overall"), number(metrics, row, "ap_overall_bias"),
                         number(metrics, row, "ap_overall_se")};
            h.first20.value = number(metrics, row, "ap_first20");
            h.last20.value = number(metrics, row, "ap_last20");
            if (metrics.column.count("bias_strength") != 0)
            {
                h.bias_strength = number(metrics, row, "bias_strength");
            }
            if (!std::isnan(h.overall.value) && std::isnan(h.overall.se))
            {
                throw compare_error(label + ": head layer " + std::to_string(h.layer) + " q_head "
                                    + std::to_string(h.q_head)
                                    + " has no standard error (ap_overall_se is nan): analyze it with "
                                      "confidence_intervals on (docs/method.md §8.3)");
            }
            if (!s.heads.emplace(head_key{h.layer, h.q_head}, h).second)
            {
                throw compare_error(metrics.file + ": head layer " + std::to_string(h.layer) + " q_head "
                                    + std::to_string(h.q_head) + " has two rows");
            }
        }
        for (const auto& row : profile.rows)
        {
            const head_key key{integer(profile, row, "layer"), integer(profile, row, "q_head")};
            const auto it = s.heads.find(key);
            if (it == s.heads.end())
            {
                throw compare_error(profile.file + ": head layer " + std::to_string(key.first) + " q_head "
                                    + std::to_string(key.second) + " has no row in " + metrics_csv);
            }
            bucket_row b;
            b.q_bucket = integer(profile, row, "q_bucket");
            b.tau = number(profile, row, "tau");
            b.n_queries = number(profile, row, "n_queries");
            b.ap = {number(profile, row, "plasticity"), number(profile, row, "plasticity_bias"),
                    number(profile, row, "plasticity_se")};
            it->second.buckets.push_back(b);
        }
        for (auto& [key, h] : s.heads)
        {
            const std::string where = label + ": head layer " + std::to_string(key.first) + " q_head "
                                      + std::to_string(key.second);
            h.first20 = tail_estimate(h.buckets, h.first20.value, true, where);
            h.last20 = tail_estimate(h.buckets, h.last20.value, false, where);
            h.drop.value = h.first20.value - h.last20.value;
            h.drop.bias = h.first20.bias - h.last20.bias;
            h.drop.se = std::sqrt(h.first20.se * h.first20.se + h.last20.se * h.last20.se);
        }
        return s;
    }

    /// One compared quantity of one head.
    struct comparison
    {
        const head* a = nullptr;
        std::string quantity;
        std::int64_t q_bucket = -1;  // -1: a head-level quantity
        estimate x, y;
        double difference = std::numeric_limits<double>::quiet_NaN();
        double se = std::numeric_limits<double>::quiet_NaN();
        double z = std::numeric_limits<double>::quiet_NaN();
        double p = std::numeric_limits<double>::quiet_NaN();
        double q_bh = std::numeric_limits<double>::quiet_NaN();
        double p_holm = std::numeric_limits<double>::quiet_NaN();
    };

    inline comparison compare(const head& a, const std::string& quantity, std::int64_t bucket, const estimate& x,
                              const estimate& y)
    {
        comparison c;
        c.a = &a;
        c.quantity = quantity;
        c.q_bucket = bucket;
        c.x = x;
        c.y = y;
        c.difference = (y.value - y.bias) - (x.value - x.bias);
        c.se = std::sqrt(x.se * x.se + y.se * y.se);
        if (std::isfinite(c.difference) && c.se > 0.0)
        {
            c.z = c.difference / c.se;
            c.p = std::erfc(std::abs(c.z) / std::sqrt(2.0));  // two-sided, accurate in the tail
        }
        return c;
    }

    /// Benjamini-Hochberg q-values and Holm's adjusted p-values of the finite p of `family`.
    inline void adjust(std::vector<comparison*>& family)
    {
        std::vector<comparison*> tested;
        for (comparison* c : family)
        {
            if (!std::isnan(c->p))
            {
                tested.push_back(c);
            }
        }
        std::stable_sort(tested.begin(), tested.end(), [](const comparison* u, const comparison* v) { return u->p < v->p; });
        const std::size_t m = tested.size();
        double running = 1.0;
        for (std::size_t i = m; i-- > 0;)
        {
            running = std::min(running, tested[i]->p * static_cast<double>(m) / static_cast<double>(i + 1));
            tested[i]->q_bh = running;
        }
        running = 0.0;
        for (std::size_t i = 0; i < m; ++i)
        {
            running = std::max(running, std::min(1.0, tested[i]->p * static_cast<double>(m - i)));
            tested[i]->p_holm = running;
        }
    }

    /// Appends ",x" for each x (csv_rows.hpp's number format).
    inline void append_reals(std::string& out, std::initializer_list<double> values)
    {
        for (double x : values)
        {
            out += ',';
            append_double(out, x);
        }
    }

    inline std::string number_text(double x)
    {
        std::string s;
        append_double(s, x);
        return s;
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
        if (name.find_first_of(",\n") != std::string::npos)
        {
            throw compare_error("set name '" + name + "' holds a comma or a line break (give --names)");
        }
        if (!seen.insert(name).second)
        {
            throw compare_error("two result sets are named '" + name + "' (give --names)");
        }
        sets.push_back(load_set(options.folders[i], name));
    }
    // The heads: the same layout in every set, or (common_heads) the heads of all of them.
    compare_result result;
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
        if (s.heads.size() != keys.size() && !options.common_heads)
        {
            throw compare_error("result sets '" + sets[0].name + "' and '" + s.name + "' have different heads ("
                                + std::to_string(sets[0].heads.size()) + " and " + std::to_string(s.heads.size())
                                + " heads, " + std::to_string(keys.size())
                                + " in common): compare the common heads with --common-heads (common_heads=True)");
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
        for (const head_key& key : keys)
        {
            const head& a = A.heads.at(key);
            const head& b = B.heads.at(key);
            const estimate* ea[] = {&a.overall, &a.first20, &a.last20, &a.drop};
            const estimate* eb[] = {&b.overall, &b.first20, &b.last20, &b.drop};
            for (std::size_t q = 0; q < 4; ++q)
            {
                rows.push_back(compare(a, head_quantities[q], -1, *ea[q], *eb[q]));
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
                rows.push_back(compare(a, "ap_bucket", bucket, pair.first, pair.second));
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
            heads_text += significant ? ",1\n" : ",0\n";
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
                const double se = std::sqrt(variance) / n;
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
            std::map<std::int64_t, std::vector<estimate>> groups;
            for (const head_key& key : keys)
            {
                const head& h = sets[s].heads.at(key);
                const estimate e = q == 0   ? h.overall
                                   : q == 1 ? h.first20
                                   : q == 2 ? h.last20
                                   : q == 3 ? h.drop
                                            : estimate{h.bias_strength, 0.0, std::numeric_limits<double>::quiet_NaN()};
                if (std::isfinite(e.value))
                {
                    groups[-1].push_back(e);
                    groups[key.first].push_back(e);
                }
            }
            for (const auto& [layer, members] : groups)
            {
                const double n = static_cast<double>(members.size());
                double mean = 0.0, variance = 0.0;
                for (const estimate& e : members)
                {
                    mean += e.value / n;
                    variance += e.se * e.se;
                }
                const double se = std::sqrt(variance) / n;
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
            "same dump: the standard errors add the two analyses' variances as for independent samples; the "
            "analyses share the query sample, so the difference's true variance is smaller and the tests are "
            "conservative (docs/method.md §8.6)");
    }
    result.names = {compare_heads_csv, compare_changed_csv, compare_summary_csv, compare_trajectory_csv};
    result.texts = {std::move(heads_text), std::move(changed_text), std::move(summary_text), std::move(trajectory_text)};
    return result;
}

/// Throws compare_error when the output folder is one of the result sets: the comparison's
/// set would replace theirs as the folder's current set.
inline void check_output_folder(const compare_options& options, const std::string& output_dir)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path out = fs::weakly_canonical(output_dir, ec);
    for (const auto& folder : options.folders)
    {
        std::error_code ec2;
        if (!ec && fs::weakly_canonical(folder, ec2) == out && !ec2)
        {
            throw compare_error("the output folder '" + output_dir + "' is the result set '" + folder
                                + "'; write the comparison into another folder");
        }
    }
}

/// The files of a comparison for result_set_writer::commit (views of `r`'s texts).
inline std::vector<result_file> compare_files(const compare_result& r)
{
    std::vector<result_file> files;
    for (std::size_t i = 0; i < r.names.size(); ++i)
    {
        files.push_back({r.names[i], {r.texts[i]}});
    }
    return files;
}
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_RUNS_HPP
