#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_RESULT_SETS_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_RESULT_SETS_HPP

// Comparing result sets head by head (docs/method.md §8.6): two or more result folders of
// ap_analyze (or ap_merge, or the Python package), named and ordered (checkpoints, variants),
// each compared with the next. The statistics are the core's (comparison.hpp: a head's change in
// each design, the families' Benjamini-Hochberg and Holm adjustments, the model-level mean over
// heads and the trajectory); here: the options checked, the sets named and loaded
// (compare_input.hpp; or given loaded, by the Python package's result objects), their heads
// matched, the notes, and the rows of the tables (compare_tables.hpp's column lists) built from
// the core's results. ap_compare and attention_plasticity.compare_runs both run compare_run.hpp
// (which calls compare_result_sets() below and writes its files), so their CSVs are the same bytes.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <attention_plasticity/comparison.hpp>

#include "../io/csv_rows.hpp"
#include "cli_util.hpp"
#include "compare_input.hpp"
#include "compare_tables.hpp"
#include "errors.hpp"
#include "output_folder.hpp"
#include "result_set_reader.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// How the standard error of a head's change is made (docs/method.md §8.6; comparison.hpp):
/// unpaired, s = sqrt(s_A^2 + s_B^2); paired, the per-sequence differences of the influences.
using compare_design = attention_plasticity::change_design;

inline const char* design_name(compare_design design)
{
    return design == compare_design::paired ? "paired" : "unpaired";
}

/// The design asked for (docs/method.md §8.6): auto (paired when the sets hold the same documents,
/// by their fingerprints, else unpaired), paired or unpaired.
enum class design_choice
{
    automatic,
    paired,
    unpaired
};

/// "auto", "paired" or "unpaired"; anything else: usage_error naming `label` (the option) and the text.
inline design_choice parse_design(const std::string& text, const std::string& label)
{
    if (text == "auto")
    {
        return design_choice::automatic;
    }
    if (text == "paired")
    {
        return design_choice::paired;
    }
    if (text == "unpaired")
    {
        return design_choice::unpaired;
    }
    throw usage_error(label + ": '" + text + "' is not auto, paired or unpaired");
}

/// What to compare and how.
struct compare_options
{
    std::vector<std::string> folders;  // the result sets, in order (at least 2)
    std::vector<std::string> names;    // their names; empty: the folders' last components
    double alpha = 0.05;               // level of the BH procedure (and of the intervals: 1 - alpha)
    bool common_heads = false;         // compare the heads common to all sets instead of refusing
    bool same_dump = false;            // the sets analyzed the same dump (different options)
    design_choice requested = design_choice::automatic;  // the design asked for (§8.6)
    compare_design design = compare_design::unpaired;  // the design used (set by compare_result_sets)
    std::string design_label;  // compare_heads.csv's `design` (set by compare_result_sets; empty: design's name)
};

/// The compared result sets as rows and files (compare_heads.csv, compare_changed.csv,
/// compare_summary.csv, compare_trajectory.csv) and messages worth showing. Throws compare_error naming the set and the
/// problem when the sets cannot be compared.
struct compare_result
{
    compare_tables tables;           // the rows of the files
    std::vector<std::string> names;  // of the files, in order
    std::vector<std::string> texts;  // their bytes
    std::vector<std::string> notes;  // e.g. heads left out with common_heads
    std::size_t compared_heads = 0;
    std::size_t changed_heads = 0;   // heads with a significant change, over all pairs
    compare_design design = compare_design::unpaired;  // the design used (the options')
};

/// A set the caller loads itself (the Python package's result objects, held in memory): called
/// with the set's name when its turn comes, as a folder would be read then; an empty function:
/// read the folder.
using set_loader = std::function<compare_detail::loaded_set(const std::string& name)>;

namespace compare_detail
{
    /// One compared quantity of one head: which, and its change (comparison.hpp).
    struct comparison
    {
        const head* a = nullptr;
        std::string quantity;
        std::int64_t q_bucket = -1;  // -1: a head-level quantity
        quantity_change change;
        // The hierarchical selection (comparison.hpp's select_changes, set by adjust_families):
        // the head's Simes p and its q across heads, this test's q within its head, selected.
        double head_p = std::numeric_limits<double>::quiet_NaN();
        double head_q = std::numeric_limits<double>::quiet_NaN();
        double q_within = std::numeric_limits<double>::quiet_NaN();
        bool selected = false;
    };

    /// The change of one quantity from head `a` (estimate x) to head `b` (estimate y), with the
    /// heads' influences of that quantity (§8.6).
    inline comparison compare(const head& a, const head& b, const std::string& quantity, std::int64_t bucket,
                              const estimate& x, const estimate& y, compare_design design)
    {
        const quantity_key key{quantity, bucket};
        return {&a, quantity, bucket, compare_quantity(x, y, a.influences_of(key), b.influences_of(key), design)};
    }

    /// The options' counts and alpha; compare_error when they cannot be compared.
    inline void check_options(const compare_options& options)
    {
        if (options.folders.size() < 2)
        {
            throw compare_error("needs at least 2 result sets to compare, got "
                                + std::to_string(options.folders.size()));
        }
        if (!options.names.empty() && options.names.size() != options.folders.size())
        {
            throw compare_error(std::to_string(options.names.size()) + " names for "
                                + std::to_string(options.folders.size()) + " result sets");
        }
        if (!(options.alpha > 0.0 && options.alpha < 1.0))
        {
            throw compare_error("alpha must be in (0, 1), got " + io::format_number(options.alpha));
        }
    }

    /// The sets named (the names given, or the folders' last components) and loaded, in order:
    /// set i from its folder, or by `given[i]` when given (the Python package's result objects;
    /// options.folders[i] then only labels it). Each refused as it comes (compare_error).
    inline std::vector<loaded_set> load_sets(const compare_options& options, const std::vector<set_loader>& given)
    {
        std::vector<loaded_set> sets;
        std::set<std::string> seen;
        for (std::size_t i = 0; i < options.folders.size(); ++i)
        {
            std::string name = options.names.empty()
                                   ? std::filesystem::path(options.folders[i]).lexically_normal().filename().string()
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
            if (i < given.size() && given[i])
            {
                sets.push_back(given[i](name));
                sets.back().name = name;
            }
            else
            {
                sets.push_back(load_set(options.folders[i], name));
            }
            if (options.requested == design_choice::paired && !sets.back().has_influences)
            {
                throw compare_error("design paired (--design paired, design='paired'): result set '" + options.folders[i]
                                    + "' has no per-sequence influences (" + io::influence_csv
                                    + " absent, or without rows; the paired errors need them): analyze it with "
                                      "--sequence-influences on (sequence_influences: on), or compare unpaired");
            }
        }
        return sets;
    }

    /// The heads compared: the same layout in every set, or (common_heads) the heads of all of
    /// them; compare_error for a head of other sizes, other heads (without common_heads) or none
    /// in common. A note when heads are left out.
    inline std::vector<head_key> match_heads(const std::vector<loaded_set>& sets, const compare_options& options,
                                             std::vector<std::string>& notes)
    {
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
                    throw compare_error("head layer " + std::to_string(key.first) + " q_head "
                                        + std::to_string(key.second) + " differs: k_head " + std::to_string(h.k_head)
                                        + ", d_model " + std::to_string(h.d_model) + " in '" + sets[0].name
                                        + "' but k_head " + std::to_string(it->second.k_head) + ", d_model "
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
                    throw compare_error("result sets '" + sets[0].name + "' and '" + sets[i].name
                                        + "' have different heads (" + std::to_string(sets[0].heads.size()) + " and "
                                        + std::to_string(sets[i].heads.size()) + " heads, " + std::to_string(common)
                                        + " in common): compare the common heads with --common-heads "
                                          "(common_heads=True)");
                }
            }
        }
        if (keys.empty())
        {
            throw compare_error("the result sets have no head in common");
        }
        if (keys.size() < total)
        {
            notes.push_back("compared the " + std::to_string(keys.size()) + " heads common to every set ("
                            + std::to_string(total - keys.size()) + " heads of some sets left out)");
        }
        return keys;
    }

    /// The notes on the design and on the model-level errors of sets without influences.
    inline void design_notes(const std::vector<loaded_set>& sets, const compare_options& options,
                             std::vector<std::string>& notes)
    {
        notes.push_back(
            options.design == compare_design::paired
                ? "design paired: a head's change has the standard error of the per-sequence differences of the two "
                  "sets' influences (head_sequence_influence.csv), the sets taken to share their documents (matched by "
                  "document_fingerprint, or by document_id when the sets have none); the errors cover what the "
                  "analyses' errors cover (by default sequence-level: the sampling of the texts and of the tokens, "
                  "docs/method.md §8.3, §8.6)"
                : "design unpaired: a head's change has the standard error sqrt(s_A^2 + s_B^2) of the two sets' own "
                  "errors, the sets taken as independent samples of sequences (different texts); the errors cover "
                  "what the analyses' errors cover (by default sequence-level, docs/method.md §8.3, §8.6); for sets "
                  "analyzed on the same texts, --design paired (design='paired') is valid and more powerful");
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
            notes.push_back(
                "the model-level standard errors (compare_summary.csv, compare_trajectory.csv) take the heads as "
                "independent (sqrt(sum s^2)/n) where a set has no "
                + std::string(io::influence_csv) + " (" + without
                + "): the heads of a model see the same sequences, so their errors are correlated and these are "
                  "likely too small; analyze with --sequence-influences on for errors that account for it");
        }
    }

    /// Every compared quantity of every head from set `A` to set `B`, in the tables' order: the
    /// head-level quantities, then the query buckets of either set (a bucket of one only: NaN in
    /// the other). The note on heads of another context length.
    inline std::vector<comparison> compare_heads(const loaded_set& A, const loaded_set& B,
                                                 const std::vector<head_key>& keys, compare_design design,
                                                 std::vector<std::string>& notes)
    {
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
                    context_example = head_text(key.first, key.second) + ": C " + io::format_number(a.context_length)
                                      + " and " + io::format_number(b.context_length);
                }
            }
            for (const head_quantity& q : head_quantities)
            {
                rows.push_back(compare(a, b, q.name(), -1, a.*q.member, b.*q.member, design));
            }
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
                rows.push_back(compare(a, b, "ap_bucket", bucket, pair.first, pair.second, design));
            }
        }
        if (other_context > 0)
        {
            notes.push_back("'" + A.name + "' and '" + B.name + "': " + std::to_string(other_context)
                            + " heads have another context length C (context_length; e.g. " + context_example
                            + "): their ap_first20 and ap_last20 are over other positions (tau < 0.2 C, "
                              "tau >= 0.8 C)");
        }
        return rows;
    }

    /// Paired: a note when example ids of `A` or `B` are in one set only (pairing assumes the
    /// same example ids in both sets).
    inline void pairing_note(const loaded_set& A, const loaded_set& B, const std::vector<head_key>& keys,
                             std::vector<std::string>& notes)
    {
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
            notes.push_back("design paired: '" + A.name + "' and '" + B.name + "' have " + std::to_string(all - common)
                            + " of their " + std::to_string(all)
                            + " document ids in one set only (their influences count as 0 in the other): "
                              "pairing assumes the same document_id is the same text in both sets");
        }
    }

    /// The text key of each document of `s` (docs/method.md §8.6): its document_fingerprint, and for
    /// the second and later documents of one text in the set (a corpus that holds a text twice)
    /// the fingerprint with "#k" (k-th document of that text by increasing document_id), so that
    /// sets holding the same texts, duplicates included, match document for document. False when
    /// the set cannot show its documents' texts (no examples.csv, an empty document_fingerprint);
    /// `why` says which.
    inline bool document_prints(const loaded_set& s, std::map<std::int64_t, std::string>& prints, std::string& why)
    {
        prints.clear();
        if (!s.examples)
        {
            why = "'" + s.name + "' has no examples.csv";
            return false;
        }
        std::map<std::int64_t, std::string> documents;
        for (const io::example_row& r : s.examples->rows)
        {
            if (r.document_fingerprint.empty())
            {
                why = "'" + s.name + "' has documents without a document_fingerprint (" + s.examples_file + ")";
                return false;
            }
            documents.emplace(r.document_id, r.document_fingerprint);
        }
        if (documents.empty())
        {
            why = "'" + s.name + "' has an empty examples.csv";
            return false;
        }
        std::map<std::string, std::size_t> seen;
        for (const auto& [id, print] : documents)
        {
            const std::size_t k = ++seen[print];
            prints[id] = k == 1 ? print : print + "#" + std::to_string(k);
        }
        return true;
    }

    /// The first (up to 3) documents of `a` (id -> fingerprint) whose text is not in `b`, as text.
    inline std::string unmatched_documents(const loaded_set& A, const std::map<std::int64_t, std::string>& a,
                                           const loaded_set& B, const std::map<std::int64_t, std::string>& b,
                                           std::size_t& count)
    {
        std::set<std::string> in_b;
        for (const auto& entry : b)
        {
            in_b.insert(entry.second);
        }
        std::string text;
        count = 0;
        for (const auto& [id, print] : a)
        {
            if (in_b.count(print) == 0 && count++ < 3)
            {
                text += (text.empty() ? "" : ", ") + std::string("document_id ") + std::to_string(id)
                        + " (document_fingerprint " + print + ")";
            }
        }
        return count == 0 ? std::string()
                          : std::to_string(count) + " documents of '" + A.name + "' are not in '" + B.name
                                + "', the first " + text;
    }

    /// The design used (docs/method.md §8.6) from the one asked for: auto is paired when every set
    /// has a document_fingerprint for each document and consecutive sets hold the same documents
    /// (and every set has its influences), else unpaired; paired on sets of other documents is
    /// refused (compare_error naming the first unmatched documents); paired on sets without
    /// fingerprints pairs by document id, with a note. Paired by fingerprint, every set's influences
    /// are put on the first set's document ids (ids may differ between sets). The note says which
    /// design and why.
    inline compare_design resolve_design(std::vector<loaded_set>& sets, compare_options& options, std::string& reason)
    {
        std::string& label = options.design_label;
        if (options.requested == design_choice::unpaired)
        {
            reason = "as asked (--design unpaired, design='unpaired')";
            return compare_design::unpaired;
        }
        std::vector<std::map<std::int64_t, std::string>> prints(sets.size());
        std::string unchecked;
        for (std::size_t i = 0; i < sets.size() && unchecked.empty(); ++i)
        {
            document_prints(sets[i], prints[i], unchecked);
        }
        if (!unchecked.empty())
        {
            if (options.requested == design_choice::paired)
            {
                label = "paired (by id: unchecked)";
                reason = "as asked (--design paired, design='paired'), documents matched by id: pairing could not be "
                         "checked from the texts ("
                         + unchecked + ")";
                return compare_design::paired;
            }
            label = "unpaired (auto: no fingerprints)";
            reason = "auto: pairing could not be checked from the texts (" + unchecked
                     + "); --design paired (design='paired') pairs by document id if the sets analyzed the same texts";
            return compare_design::unpaired;
        }
        for (std::size_t i = 0; i + 1 < sets.size(); ++i)
        {
            std::size_t only_a = 0, only_b = 0;
            const std::string a = unmatched_documents(sets[i], prints[i], sets[i + 1], prints[i + 1], only_a);
            const std::string b = unmatched_documents(sets[i + 1], prints[i + 1], sets[i], prints[i], only_b);
            if (only_a + only_b > 0)
            {
                const std::string what = "'" + sets[i].name + "' and '" + sets[i + 1].name
                                         + "' do not hold the same documents (document_fingerprint of examples.csv): "
                                         + a + (a.empty() || b.empty() ? "" : "; ") + b;
                if (options.requested == design_choice::paired)
                {
                    throw compare_error("design paired (--design paired, design='paired'): " + what
                                        + " (docs/method.md §8.6): compare them unpaired (--design unpaired)");
                }
                label = "unpaired (auto: other documents)";
                reason = "auto: " + what;
                return compare_design::unpaired;
            }
        }
        for (const loaded_set& s : sets)
        {
            if (!s.has_influences)
            {
                // Only auto comes here: paired without influences was refused by load_sets.
                label = "unpaired (auto: no influences)";
                reason = "auto: the sets hold the same documents, but '" + s.name + "' has no per-sequence influences ("
                         + io::influence_csv + "; analyze it with --sequence-influences on for the paired design)";
                return compare_design::unpaired;
            }
        }
        // Every set's influences on the first set's document ids, matched by fingerprint.
        std::map<std::string, std::int64_t> first;
        for (const auto& [id, print] : prints[0])
        {
            first[print] = id;
        }
        for (std::size_t i = 1; i < sets.size(); ++i)
        {
            for (auto& [key, h] : sets[i].heads)
            {
                for (auto& [quantity, list] : h.influences)
                {
                    for (auto& entry : list)
                    {
                        // check_influences: every id is a document of the set's examples.csv.
                        entry.first = first.at(prints[i].at(entry.first));
                    }
                    std::sort(list.begin(), list.end(), [](const auto& u, const auto& v) { return u.first < v.first; });
                }
            }
        }
        label = options.requested == design_choice::paired ? "paired" : "paired (auto: same documents)";
        reason = std::string(options.requested == design_choice::paired ? "as asked" : "auto")
                 + ": the sets hold the same documents (equal document_fingerprint in their examples.csv), "
                   "matched by fingerprint";
        return compare_design::paired;
    }

    /// The families (one per quantity and bucket, across heads) adjusted, and the hierarchical
    /// selection of "changed" over the heads (comparison.hpp's select_changes; the rows of a head
    /// are consecutive). The note counting the rows without a p-value, by reason.
    inline void adjust_families(std::vector<comparison>& rows, double alpha, const std::string& pair,
                                std::vector<std::string>& notes)
    {
        std::map<std::pair<std::string, std::int64_t>, std::vector<quantity_change*>> families;
        for (comparison& c : rows)
        {
            families[{c.quantity, c.q_bucket}].push_back(&c.change);
        }
        for (auto& [name, family] : families)
        {
            adjust_family(family);
        }
        std::vector<std::vector<double>> p;
        std::vector<std::vector<comparison*>> members;
        for (std::size_t i = 0; i < rows.size(); ++i)
        {
            if (i == 0 || rows[i].a != rows[i - 1].a)
            {
                p.emplace_back();
                members.emplace_back();
            }
            p.back().push_back(rows[i].change.p);
            members.back().push_back(&rows[i]);
        }
        const change_selection selection = select_changes(p, alpha);
        std::map<untested_reason, std::size_t> untested;
        double largest_bound = 0.0;
        for (std::size_t h = 0; h < members.size(); ++h)
        {
            for (std::size_t i = 0; i < members[h].size(); ++i)
            {
                comparison& c = *members[h][i];
                c.head_p = selection.head_p[h];
                c.head_q = selection.head_q[h];
                c.q_within = selection.q_within[h][i];
                c.selected = selection.selected[h][i];
                if (c.change.reason != untested_reason::tested)
                {
                    ++untested[c.change.reason];
                }
                if (c.change.reason == untested_reason::within_rounding || c.change.reason == untested_reason::identical)
                {
                    largest_bound = std::max(largest_bound, c.change.resolution);
                }
            }
        }
        if (!untested.empty())
        {
            std::string counts;
            std::size_t total = 0;
            for (const auto& [reason, count] : untested)
            {
                counts += (counts.empty() ? "" : ", ") + std::to_string(count) + " " + untested_reason_text(reason);
                total += count;
            }
            notes.push_back(pair + ": " + std::to_string(total) + " of " + std::to_string(rows.size())
                            + " rows have no p-value (compare_heads.csv `reason`): " + counts
                            + (largest_bound > 0.0 ? " (rounding bound up to " + io::format_number(largest_bound)
                                                         + ", docs/method.md §8.6)"
                                                   : std::string(" (docs/method.md §8.6)")));
        }
    }

    /// The rows of compare_heads.csv and compare_changed.csv of the pair (A, B); the number of
    /// changed heads (the hierarchical selection, §8.6).
    inline std::size_t head_rows(const loaded_set& A, const loaded_set& B, const std::vector<comparison>& rows,
                                 const compare_options& options, compare_tables& tables)
    {
        struct changed_head
        {
            double head_p = 0, head_q = 0;
            std::int64_t n_selected = 0;
            std::string quantities, buckets;
        };
        std::map<head_key, changed_head> changed;
        for (const comparison& r : rows)
        {
            const quantity_change& c = r.change;
            tables.heads.push_back({A.name, B.name, r.a->layer, r.a->q_head, r.a->k_head, r.quantity,
                                    r.quantity == "ap_bucket" ? std::to_string(r.q_bucket) : "", c.a.value, c.b.value,
                                    c.difference, c.se, c.df, c.z, c.p, c.q_bh, c.p_holm, r.selected ? 1 : 0,
                                    options.design_label.empty() ? std::string(design_name(options.design)) : options.design_label, r.head_p, r.head_q, r.q_within, c.resolution,
                                    untested_reason_text(c.reason)});
            if (r.selected)
            {
                changed_head& h = changed[{r.a->layer, r.a->q_head}];
                h.head_p = r.head_p;
                h.head_q = r.head_q;
                ++h.n_selected;
                std::string& list = r.quantity == "ap_bucket" ? h.buckets : h.quantities;
                list += (list.empty() ? "" : " ") + (r.quantity == "ap_bucket" ? std::to_string(r.q_bucket) : r.quantity);
            }
        }
        for (const auto& [key, h] : changed)
        {
            tables.changed.push_back({A.name, B.name, key.first, key.second, A.heads.at(key).k_head, h.n_selected,
                                      h.quantities, h.head_p, h.head_q, h.buckets});
        }
        return changed.size();
    }

    /// The `layer` of a model-level row (-1: the mean over every layer) is empty (NA), else the layer.
    inline std::string layer_text(std::int64_t layer)
    {
        return layer < 0 ? std::string() : std::to_string(layer);
    }

    /// The rows of compare_summary.csv of the pair (A, B): per head-level quantity, the mean
    /// change over the tested heads (comparison.hpp's mean_change), all layers then by layer.
    inline void summary_rows(const loaded_set& A, const loaded_set& B, const std::vector<comparison>& rows,
                             const compare_options& options, compare_tables& tables)
    {
        // Heads share their sequences: with the per-sequence influences, the mean's error is the
        // sequences' (§8.6); without, the heads are taken as independent.
        const bool sequence_level = A.has_influences && B.has_influences;
        for (const head_quantity& q : head_quantities)
        {
            std::map<std::int64_t, std::vector<const quantity_change*>> groups;
            std::map<std::int64_t, std::int64_t> selected;  // the changed heads (select_changes) carried by q
            for (const comparison& r : rows)
            {
                if (r.quantity == q.name() && std::isfinite(r.change.difference) && std::isfinite(r.change.se))
                {
                    groups[-1].push_back(&r.change);
                    groups[r.a->layer].push_back(&r.change);
                    selected[-1] += r.selected ? 1 : 0;
                    selected[r.a->layer] += r.selected ? 1 : 0;
                }
            }
            for (const auto& [layer, members] : groups)
            {
                mean_change_result m = mean_change(members, options.design, options.alpha, sequence_level);
                // The mean's rounding bound: the mean of the members' (§8.6); below it, no test.
                double bound = 0.0;
                bool identical = true;
                for (const quantity_change* c : members)
                {
                    bound += c->resolution / static_cast<double>(members.size());
                    identical = identical && c->reason == untested_reason::identical;
                }
                untested_reason reason = untested_reason::tested;
                if (identical)
                {
                    reason = untested_reason::identical;
                }
                else if (std::abs(m.mean_difference) <= bound)
                {
                    reason = untested_reason::within_rounding;
                }
                else if (!(m.se > 0.0))
                {
                    reason = std::isnan(m.se) ? untested_reason::no_error : untested_reason::zero_error;
                }
                if (reason != untested_reason::tested)
                {
                    m.z = m.p = std::numeric_limits<double>::quiet_NaN();
                }
                tables.summary.push_back({A.name, B.name, q.name(), layer_text(layer),
                                          static_cast<std::int64_t>(m.n_heads), m.mean_a, m.mean_b, m.mean_difference,
                                          m.se, m.df, m.ci_low, m.ci_high, m.z, m.p, m.sd_difference, selected[layer], bound,
                                          untested_reason_text(reason)});
            }
        }
    }

    /// The rows of compare_trajectory.csv: each set's mean over the compared heads
    /// (comparison.hpp's mean_over_heads) of the head-level quantities, then of bias_strength
    /// (§8.5: a value without an error), all layers then by layer.
    inline void trajectory_rows(const std::vector<loaded_set>& sets, const std::vector<head_key>& keys,
                                const compare_options& options, compare_tables& tables)
    {
        for (std::size_t s = 0; s < sets.size(); ++s)
        {
            constexpr std::size_t n_quantities = std::size(head_quantities);
            for (std::size_t q = 0; q <= n_quantities; ++q)
            {
                const bool estimated = q < n_quantities;
                const char* const quantity = estimated ? head_quantities[q].name() : "bias_strength";
                std::map<std::int64_t, std::vector<head_estimate>> groups;
                for (const head_key& key : keys)
                {
                    const head& h = sets[s].heads.at(key);
                    const influence_list* influences = estimated ? h.influences_of({quantity, -1}) : nullptr;
                    const estimate e = estimated
                                           ? h.*head_quantities[q].member
                                           : estimate{h.bias_strength, 0.0, std::numeric_limits<double>::quiet_NaN()};
                    if (std::isfinite(e.value))
                    {
                        groups[-1].push_back({e, influences});
                        groups[key.first].push_back({e, influences});
                    }
                }
                // As the summary's: the sequences' error of the mean when the set has influences.
                const bool sequence_level = estimated && sets[s].has_influences;
                for (const auto& [layer, members] : groups)
                {
                    const set_mean_result m = mean_over_heads(members, options.alpha, sequence_level);
                    tables.trajectory.push_back({sets[s].name, static_cast<std::int64_t>(s), quantity,
                                                 layer_text(layer), static_cast<std::int64_t>(m.n_heads), m.mean,
                                                 m.se, m.df, m.ci_low, m.ci_high});
                }
            }
        }
    }
}  // namespace compare_detail

/// The comparison of the result sets of `options` (docs/method.md §8.6): set i read from
/// options.folders[i], or loaded by `given[i]` when given (the Python package's result objects,
/// compared as they are held). Throws compare_error naming the set and the problem when the sets
/// cannot be compared.
inline compare_result compare_result_sets(const compare_options& options, const std::vector<set_loader>& given = {})
{
    using namespace compare_detail;
    check_options(options);
    std::vector<loaded_set> sets = load_sets(options, given);
    compare_result result;
    std::string design_reason;
    compare_options resolved = options;
    resolved.design = resolve_design(sets, resolved, design_reason);
    result.design = resolved.design;
    const std::vector<head_key> keys = match_heads(sets, resolved, result.notes);
    result.compared_heads = keys.size();
    design_notes(sets, resolved, result.notes);
    result.notes.push_back("design " + std::string(design_name(resolved.design)) + ", " + design_reason
                           + " (docs/method.md §8.6)");
    for (std::size_t s = 0; s + 1 < sets.size(); ++s)
    {
        std::vector<comparison> rows = compare_heads(sets[s], sets[s + 1], keys, resolved.design, result.notes);
        if (resolved.design == compare_design::paired)
        {
            pairing_note(sets[s], sets[s + 1], keys, result.notes);
        }
        adjust_families(rows, resolved.alpha, "'" + sets[s].name + "' and '" + sets[s + 1].name + "'", result.notes);
        result.changed_heads += head_rows(sets[s], sets[s + 1], rows, resolved, result.tables);
        summary_rows(sets[s], sets[s + 1], rows, resolved, result.tables);
    }
    trajectory_rows(sets, keys, resolved, result.tables);
    if (resolved.same_dump)
    {
        result.notes.push_back(
            resolved.design == compare_design::paired
                ? "same dump, design paired: the per-sequence differences of the influences account for the "
                  "sequences and tokens the two analyses share (docs/method.md §8.6)"
                : "same dump: the standard errors add the two analyses' variances as for independent samples; the "
                  "analyses share the query sample, so the difference's true variance is smaller and the tests are "
                  "conservative (docs/method.md §8.6; --design paired accounts for the shared sequences)");
    }
    result.names = compare_file_names();
    for_each_compare_table(result.tables, [&](const char*, const auto& columns, const auto& rows) {
        result.texts.push_back(io::csv_text(columns, rows));
    });
    return result;
}

/// Throws compare_error when the output folder is one of the result sets or lies inside one
/// (io/folder_overlap.hpp: by the folders themselves, not their paths), or holds the results of
/// another program (an analysis): the comparison's set would replace theirs as the folder's
/// current set and strand their links. A folder holding the sets as subfolders is fine.
inline void check_output_folder(const compare_options& options, const std::string& output_dir)
{
    output_folder_words words;
    words.output = "the output folder";
    words.input = "the result set";
    words.input_noun = "result set";
    words.replacement = "the comparison would replace them as its current set";
    words.advice = "write the comparison into another folder";
    refuse_output_folder<compare_error>(output_dir, options.folders, compare_file_names(), words);
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

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_RESULT_SETS_HPP
