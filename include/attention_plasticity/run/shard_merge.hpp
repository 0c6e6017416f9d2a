#ifndef ATTENTION_PLASTICITY_RUN_SHARD_MERGE_HPP
#define ATTENTION_PLASTICITY_RUN_SHARD_MERGE_HPP

// Merging the output folders of `ap_analyze --shard I/N` (docs/method.md §8.4) into the
// files an unsharded run of the same options writes, byte for byte: each file's header line,
// then the rows of every analyzed head in (layer, q_head) order. Nothing numeric is parsed:
// rows are moved as bytes, cut into heads by the row counts of the shards' manifests (and
// each row checked to start with its head's "layer,q_head," when the file's header starts
// with those columns). The files are the tables of csv_rows.hpp (docs/method.md §3), all of
// them: a manifest that lists another file or none is refused, so that the merge never
// writes a name it does not know into the output folder; all shards must have the same
// header lines.
//
// A shard folder is read through result_set_reader.hpp (as ap_compare reads its sets): the set
// `current` names, resolved once, so that the manifest and the CSVs come from one run; a plain
// folder (a copy with the files themselves) is read as it is; each file a regular file of
// bounded size (the manifest max_manifest_bytes, a table the machine's memory), never a FIFO
// waited on. The merge holds a shared lock on each shard folder while it lives, so that no
// ap_analyze run starts writing there meanwhile, and refuses a folder that a running
// ap_analyze holds.
//
// Refused (merge_error, every problem found listed): a folder that cannot be read, without a
// manifest or a complete set (its run did not finish), still being written; shards of
// different N, a missing or duplicated shard, other options, another dump, another program;
// other files or header lines, a file missing or not listed, rows that do not match the
// manifest.

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/bounded_read.hpp"
#include "../io/csv_rows.hpp"
#include "../io/config_file.hpp"
#include "../io/errors.hpp"
#include "../io/examples_table.hpp"
#include "../io/json.hpp"
#include "../io/result_file.hpp"
#include "result_set.hpp"
#include "result_set_reader.hpp"
#include "run_report.hpp"
#include "shard_manifest.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// A head that failed in its shard: reported by the merge like by an unsharded run.
struct failed_shard_head
{
    std::size_t layer = 0;
    std::size_t q_head = 0;
    std::string error;
    std::string folder;  // the shard folder that reports it
};

class shard_merge
{
public:
    /// Reads and checks the shard folders. Throws merge_error listing every problem found.
    explicit shard_merge(const std::vector<std::string>& folders)
    {
        if (folders.empty())
        {
            throw merge_error("no shard folder given");
        }
        std::vector<std::string> problems;
        for (const auto& folder : folders)
        {
            m_shards.emplace_back();
            m_shards.back().folder = folder;
            load(m_shards.back(), problems);
        }
        raise(problems);
        check_together();
        collect_heads();
    }

    shard_merge(const shard_merge&) = delete;
    shard_merge& operator=(const shard_merge&) = delete;

    /// The files of the merged set, in the shards' order, and examples.csv when they hold it.
    std::vector<std::string> file_names() const
    {
        std::vector<std::string> names = reference().manifest.files;
        if (reference().examples)
        {
            names.emplace_back(io::examples_csv);
        }
        return names;
    }

    /// run.json's members of the merged set (analysis_run::run_json_members): "units" and the
    /// shards' "capture" (docs/method.md §8.3).
    std::string run_json_members() const
    {
        const shard& ref = reference();
        std::string members = ", " + io::json_string("units") + ": " + io::json_string(ref.examples ? "documents" : "examples");
        if (!ref.capture.empty())
        {
            members += ", " + io::json_string("capture") + ": " + ref.capture;
        }
        return members;
    }

    /// The merged files; the views point into this object.
    std::vector<io::result_file> files() const
    {
        const shard& ref = reference();
        std::vector<io::result_file> out;
        for (std::size_t f = 0; f < ref.manifest.files.size(); ++f)
        {
            io::result_file file;
            file.name = ref.manifest.files[f];
            const std::string& data = ref.contents[f];
            file.pieces.emplace_back(std::string_view(data).substr(0, data.find('\n') + 1));
            for (const auto& head : m_heads)
            {
                file.pieces.push_back(head.rows[f]);
            }
            out.push_back(std::move(file));
        }
        if (ref.examples)
        {
            out.push_back({io::examples_csv, {std::string_view(*ref.examples)}});
        }
        return out;
    }

    const std::vector<failed_shard_head>& failed() const { return m_failed; }
    std::size_t analyzed() const { return m_heads.size(); }
    const shard_manifest& run() const { return reference().manifest; }

    /// The heads of the merged run as its report counts them (run_report.hpp).
    head_counts counts() const
    {
        const shard_manifest& m = run();
        head_counts c;
        c.merged_shards = m.shard.count;
        c.present_heads = m.present_heads;
        c.layout_heads = m.layout_heads;
        c.run_heads = m.run_heads;
        c.analyzed = analyzed();
        c.failed = m_failed.size();
        return c;
    }
    /// The folders given, for messages.
    std::vector<std::string> folders() const
    {
        std::vector<std::string> out;
        for (const auto& s : m_shards)
        {
            out.push_back(s.folder);
        }
        return out;
    }

private:
    struct shard
    {
        std::string folder;  // as given
        std::optional<result_set_reader> reader;  // holds the folder's shared lock while the merge lives
        shard_manifest manifest;
        std::vector<std::string> contents;  // per file of the manifest
        std::optional<std::string> examples;  // its examples.csv (docs/method.md §1.1), when it has one
        std::string capture;                  // its run.json's "capture" ("" none)
    };

    struct head_rows_view
    {
        std::size_t layer = 0;
        std::size_t q_head = 0;
        std::vector<std::string_view> rows;  // per file
    };

    const shard& reference() const { return m_shards[m_reference]; }

    static std::string quoted(const std::string& folder) { return "'" + folder + "'"; }

    static void raise(const std::vector<std::string>& problems)
    {
        if (problems.empty())
        {
            return;
        }
        if (problems.size() == 1)
        {
            throw merge_error(problems.front());
        }
        std::string text = "cannot merge, " + std::to_string(problems.size()) + " problems:";
        const std::size_t shown = std::min<std::size_t>(problems.size(), 20);
        for (std::size_t i = 0; i < shown; ++i)
        {
            text += "\n  " + problems[i];
        }
        if (shown < problems.size())
        {
            text += "\n  (and " + std::to_string(problems.size() - shown) + " more)";
        }
        throw merge_error(text);
    }

    /// Locks, resolves and reads one shard folder; adds its problems.
    static void load(shard& s, std::vector<std::string>& problems)
    {
        const std::string name = "shard folder " + quoted(s.folder);
        try
        {
            s.reader.emplace(s.folder);
        }
        catch (const result_folder_error& e)
        {
            const result_folder_problem kind = e.problem();
            problems.push_back(name + ": " + e.what()
                               + (kind == result_folder_problem::busy         ? ", then merge"
                                  : kind == result_folder_problem::incomplete ? " (rerun that shard)"
                                                                              : ""));
            return;
        }
        const result_set_reader& reader = *s.reader;
        std::string text;
        try
        {
            text = reader.read(shard_manifest_file, max_manifest_bytes);
        }
        catch (const io::input_error& e)
        {
            problems.push_back(
                name + ": " + shard_manifest_file + ": " + e.reason()
                + (!reader.holds(shard_manifest_file)
                       ? " (its results come from a run without --shard, or it is not an output folder of ap_analyze "
                         "--shard)"
                       : ""));
            return;
        }
        try
        {
            s.manifest = parse_manifest(text, reader.display(shard_manifest_file));
        }
        catch (const merge_error& e)
        {
            problems.push_back(e.what());
            return;
        }
        // The merge writes only the tables of docs/method.md §3, all of them: a manifest that
        // lists another file (which would replace a file of the user's in the output folder)
        // or none (which would leave the output folder's result links dangling) is refused.
        if (s.manifest.files != io::result_file_names())
        {
            problems.push_back(name + ": " + shard_manifest_file + " lists the files " + list_text(s.manifest.files)
                               + ", but a shard's set holds exactly " + list_text(io::result_file_names())
                               + " (docs/method.md §3); it was not written by this version of ap_analyze, or edited");
            return;
        }
        const std::size_t before = problems.size();
        // The files of the set: exactly the manifest's (in a plain folder, among its *.csv), besides
        // the manifest itself and the set's run.json (result_set_writer).
        std::set<std::string> listed(s.manifest.files.begin(), s.manifest.files.end());
        std::vector<std::string> entries;
        try
        {
            entries = reader.entries();
        }
        catch (const io::input_error& e)
        {
            problems.push_back(name + ": " + e.what());
            return;
        }
        for (const auto& file : entries)
        {
            const bool candidate = reader.is_set() || (file.size() > 4 && file.compare(file.size() - 4, 4, ".csv") == 0);
            if (file == io::examples_csv && listed.count(file) == 0)
            {
                // The dump's examples.csv: beside the tables, the same in every shard (check_together).
                try
                {
                    s.examples = reader.read(file, io::max_examples_csv_bytes);
                    io::parse_examples_csv(*s.examples, reader.display(file));
                }
                catch (const io::input_error& e)
                {
                    problems.push_back(name + ": " + e.what());
                }
                continue;
            }
            if (reader.is_set() && file == result_set_writer::run_json_file)
            {
                s.capture = run_json_capture(reader);
            }
            if (candidate && file != shard_manifest_file && file != result_set_writer::run_json_file
                && listed.count(file) == 0)
            {
                problems.push_back(name + ": holds " + file + ", which its manifest does not list (a file of another run?)");
            }
        }
        // The merged set is held in memory: each file at most the machine's memory.
        const std::uintmax_t memory = io::physical_memory_bytes();
        for (const auto& file : s.manifest.files)
        {
            s.contents.emplace_back();
            try
            {
                s.contents.back() = reader.read(file, memory);
            }
            catch (const io::input_error& e)
            {
                problems.push_back(name + ": " + file + ", listed in its manifest: " + e.reason());
            }
        }
        if (problems.size() == before)
        {
            check_rows(s, problems);
        }
    }

    /// The "capture" member of a set's run.json as JSON text ("" when it has none or it cannot be read).
    static std::string run_json_capture(const result_set_reader& reader)
    {
        try
        {
            const std::string text = reader.read(result_set_writer::run_json_file, io::max_config_bytes);
            const io::json_document doc = io::parse_json(text, reader.display(result_set_writer::run_json_file));
            const auto member = doc.value.find("capture");
            return doc.value.is_object() && member != doc.value.end() && member->is_object() ? member->dump() : "";
        }
        catch (const std::exception&)
        {
            return "";
        }
    }

    /// The rows of each file are the rows the manifest announces, head by head.
    static void check_rows(const shard& s, std::vector<std::string>& problems)
    {
        const std::string name = "shard folder " + quoted(s.folder);
        for (std::size_t f = 0; f < s.manifest.files.size(); ++f)
        {
            const std::string& file = s.manifest.files[f];
            const std::string& data = s.contents[f];
            const std::size_t header_end = data.find('\n');
            if (header_end == std::string::npos)
            {
                problems.push_back(name + ": " + file + " has no header line");
                continue;
            }
            const bool prefixed = data.compare(0, 13, "layer,q_head,") == 0;
            std::size_t pos = header_end + 1;
            std::uint64_t line = 1;
            bool ok = true;
            for (const auto& head : s.manifest.heads)
            {
                if (!head.analyzed)
                {
                    continue;
                }
                const std::string prefix = std::to_string(head.layer) + "," + std::to_string(head.q_head) + ",";
                for (std::uint64_t r = 0; r < head.rows[f] && ok; ++r)
                {
                    const std::size_t end = data.find('\n', pos);
                    ++line;
                    if (end == std::string::npos)
                    {
                        problems.push_back(name + ": " + file + " ends at line " + std::to_string(line - 1)
                                           + ", before the rows its manifest announces for layer "
                                           + std::to_string(head.layer) + " q_head " + std::to_string(head.q_head));
                        ok = false;
                    }
                    else if (prefixed && data.compare(pos, prefix.size(), prefix) != 0)
                    {
                        problems.push_back(name + ": " + file + ": line " + std::to_string(line)
                                           + " is not a row of layer " + std::to_string(head.layer) + " q_head "
                                           + std::to_string(head.q_head) + ", as its manifest announces");
                        ok = false;
                    }
                    else
                    {
                        pos = end + 1;
                    }
                }
                if (!ok)
                {
                    break;
                }
            }
            if (ok && pos != data.size())
            {
                problems.push_back(name + ": " + file + " holds more than the rows its manifest announces (from line "
                                   + std::to_string(line + 1) + ")");
            }
        }
    }

    /// All shards of one run, each once, with the same options, dump, program and files.
    void check_together()
    {
        // The reference: the lowest shard index (the first folder given among equals).
        m_reference = 0;
        for (std::size_t i = 1; i < m_shards.size(); ++i)
        {
            if (m_shards[i].manifest.shard.index < m_shards[m_reference].manifest.shard.index)
            {
                m_reference = i;
            }
        }
        const shard& ref = reference();
        const std::string ref_name = quoted(ref.folder);
        std::vector<std::string> problems;
        for (const auto& s : m_shards)
        {
            if (s.manifest.shard.count != ref.manifest.shard.count)
            {
                problems.push_back(quoted(s.folder) + " is shard " + s.manifest.shard.text() + " but " + ref_name
                                   + " is shard " + ref.manifest.shard.text()
                                   + ": shards of runs with a different number of shards cannot be merged");
            }
        }
        for (const auto& s : m_shards)
        {
            if (s.examples != ref.examples)
            {
                problems.push_back(quoted(s.folder) + " and " + ref_name + " have "
                                   + (s.examples && ref.examples ? "different examples.csv files"
                                                                 : "examples.csv in one of them only")
                                   + ": the shards of one dump have the same (docs/method.md §1.1)");
            }
        }
        raise(problems);

        const std::size_t count = ref.manifest.shard.count;
        std::map<std::size_t, std::vector<std::string>> holders;
        for (const auto& s : m_shards)
        {
            holders[s.manifest.shard.index].push_back(s.folder);
        }
        for (const auto& [index, where] : holders)
        {
            if (where.size() > 1)
            {
                std::string list;
                for (std::size_t i = 0; i < where.size(); ++i)
                {
                    list += (i == 0 ? "" : i + 1 == where.size() ? " and " : ", ") + quoted(where[i]);
                }
                problems.push_back("shard " + std::to_string(index) + " of " + std::to_string(count) + " is given "
                                   + (where.size() == 2 ? "twice" : std::to_string(where.size()) + " times") + ": "
                                   + list + " (give each shard once)");
            }
        }
        std::vector<index_set::range> missing;
        for (std::size_t i = 0; i < count; ++i)
        {
            if (holders.count(i) == 0)
            {
                missing.emplace_back(i, i);
            }
        }
        if (!missing.empty())
        {
            const index_set set(missing);
            const bool one = set.count() == 1;
            problems.push_back((one ? "shard " : "shards ") + set.text() + " of " + std::to_string(count) + " (0-"
                               + std::to_string(count - 1) + ") " + (one ? "is" : "are")
                               + " missing: no folder given holds " + (one ? "it" : "them") + " (run "
                               + (one ? "it" : "them") + ", e.g. sbatch --array=" + set.text()
                               + " ap_array.sbatch ..., and merge again)");
        }
        raise(problems);

        for (const auto& s : m_shards)
        {
            if (&s == &ref)
            {
                continue;
            }
            const std::string here = quoted(s.folder);
            const shard_manifest& a = s.manifest;
            const shard_manifest& b = ref.manifest;
            if (a.program != b.program)
            {
                problems.push_back(here + " was written by " + a.program + " but " + ref_name + " by " + b.program);
            }
            if (a.options != b.options)
            {
                problems.push_back(here + " was run with other options than " + ref_name + ": " + option_difference(a, b));
            }
            if (a.dump_fingerprint != b.dump_fingerprint || a.run_heads != b.run_heads
                || a.present_heads != b.present_heads || a.layout_heads != b.layout_heads)
            {
                problems.push_back(here + " analyzed another dump than " + ref_name + " (data_root '" + a.data_root
                                   + "' and '" + b.data_root + "'; dump fingerprint " + a.dump_fingerprint + " and "
                                   + b.dump_fingerprint + ", " + std::to_string(a.run_heads) + " and "
                                   + std::to_string(b.run_heads)
                                   + " heads): the heads or their vector files differ");
            }
            if (a.files != b.files)
            {
                problems.push_back(here + " holds the files " + list_text(a.files) + " but " + ref_name + " holds "
                                   + list_text(b.files));
                continue;
            }
            for (std::size_t f = 0; f < a.files.size(); ++f)
            {
                const std::string_view mine = header_of(s.contents[f]);
                const std::string_view theirs = header_of(ref.contents[f]);
                if (mine != theirs)
                {
                    problems.push_back(here + ": " + a.files[f] + " has another header line than in " + ref_name + ": "
                                       + column_difference(mine, theirs));
                }
            }
        }
        raise(problems);
    }

    static std::string option_difference(const shard_manifest& a, const shard_manifest& b)
    {
        std::map<std::string, std::string> theirs(b.options.begin(), b.options.end());
        std::map<std::string, std::string> mine(a.options.begin(), a.options.end());
        for (const auto& [key, value] : a.options)
        {
            const auto other = theirs.find(key);
            if (other == theirs.end())
            {
                return key + " is " + value + " there and unknown here";
            }
            if (other->second != value)
            {
                return key + " is " + value + " there but " + other->second + " here";
            }
        }
        for (const auto& [key, value] : b.options)
        {
            if (mine.count(key) == 0)
            {
                return key + " is unknown there and " + value + " here";
            }
        }
        return "the options are listed in another order";
    }

    static std::string list_text(const std::vector<std::string>& names)
    {
        std::string out;
        for (const auto& n : names)
        {
            out += (out.empty() ? "" : ", ") + n;
        }
        return "[" + out + "]";
    }

    static std::string_view header_of(const std::string& data)
    {
        return std::string_view(data).substr(0, data.find('\n'));
    }

    static std::string shortened(std::string_view text)
    {
        return text.size() <= 100 ? std::string(text) : std::string(text.substr(0, 100)) + "...";
    }

    /// The first column where two header lines differ, in words.
    static std::string column_difference(std::string_view there, std::string_view here)
    {
        auto split = [](std::string_view line) {
            std::vector<std::string_view> columns;
            for (std::size_t start = 0;;)
            {
                const std::size_t comma = line.find(',', start);
                columns.push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
                if (comma == std::string_view::npos)
                {
                    return columns;
                }
                start = comma + 1;
            }
        };
        const auto a = split(there);
        const auto b = split(here);
        std::size_t i = 0;
        while (i < a.size() && i < b.size() && a[i] == b[i])
        {
            ++i;
        }
        auto column = [](const std::vector<std::string_view>& columns, std::size_t k) {
            return k < columns.size() ? "'" + shortened(columns[k]) + "'" : std::string("absent");
        };
        return "column " + std::to_string(i + 1) + " is " + column(a, i) + " there but " + column(b, i) + " here";
    }

    /// The analyzed heads' rows in (layer, q_head) order; the failed heads.
    void collect_heads()
    {
        std::vector<std::string> problems;
        std::map<std::pair<std::size_t, std::size_t>, const std::string*> owner;
        std::uint64_t total = 0;
        for (const auto& s : m_shards)
        {
            total += s.manifest.heads.size();
            std::vector<std::size_t> pos(s.contents.size());
            for (std::size_t f = 0; f < s.contents.size(); ++f)
            {
                pos[f] = s.contents[f].find('\n') + 1;
            }
            for (const auto& head : s.manifest.heads)
            {
                const auto id = std::make_pair(head.layer, head.q_head);
                const auto [it, fresh] = owner.emplace(id, &s.folder);
                if (!fresh)
                {
                    problems.push_back("layer " + std::to_string(head.layer) + " q_head " + std::to_string(head.q_head)
                                       + " is in both " + quoted(*it->second) + " and " + quoted(s.folder));
                    continue;
                }
                if (!head.analyzed)
                {
                    m_failed.push_back({head.layer, head.q_head, head.error, s.folder});
                    continue;
                }
                head_rows_view view;
                view.layer = head.layer;
                view.q_head = head.q_head;
                for (std::size_t f = 0; f < s.contents.size(); ++f)
                {
                    const std::size_t start = pos[f];
                    for (std::uint64_t r = 0; r < head.rows[f]; ++r)
                    {
                        pos[f] = s.contents[f].find('\n', pos[f]) + 1;  // check_rows: every row ends with '\n'
                    }
                    view.rows.push_back(std::string_view(s.contents[f]).substr(start, pos[f] - start));
                }
                m_heads.push_back(std::move(view));
            }
        }
        if (problems.empty() && total != reference().manifest.run_heads)
        {
            problems.push_back("the shards hold " + std::to_string(total) + " heads but their run has "
                               + std::to_string(reference().manifest.run_heads));
        }
        raise(problems);
        std::sort(m_heads.begin(), m_heads.end(), [](const head_rows_view& a, const head_rows_view& b) {
            return std::make_pair(a.layer, a.q_head) < std::make_pair(b.layer, b.q_head);
        });
        std::sort(m_failed.begin(), m_failed.end(), [](const failed_shard_head& a, const failed_shard_head& b) {
            return std::make_pair(a.layer, a.q_head) < std::make_pair(b.layer, b.q_head);
        });
    }

    std::vector<shard> m_shards;
    std::size_t m_reference = 0;
    std::vector<head_rows_view> m_heads;
    std::vector<failed_shard_head> m_failed;
};

/// The end of ap_merge: writes the merged set through `writer` (made for merge.file_names() in
/// `output_dir`) when some head was analyzed, else drops its temporary set, and makes the closing
/// report (run_report.hpp): each failed head first ("error: layer L q_head H: ERROR (in shard
/// folder 'F')", as an unsharded run reports it), then the counts. A failed writing is reported,
/// not thrown.
inline run_report finish_merge(const shard_merge& merge, result_set_writer& writer, const std::string& output_dir)
{
    run_outcome outcome;
    for (const auto& head : merge.failed())
    {
        outcome.notes.push_back("error: layer " + std::to_string(head.layer) + " q_head " + std::to_string(head.q_head)
                                + ": " + head.error + " (in shard folder '" + head.folder + "')");
    }
    outcome.counts = merge.counts();
    outcome.has_results = merge.analyzed() > 0;
    outcome.output_dir = output_dir;
    if (!outcome.has_results)
    {
        writer.abandon();
    }
    else
    {
        try
        {
            writer.commit(merge.files(), merge.run_json_members());
        }
        catch (const std::exception& e)
        {
            outcome.write_failed = true;
            outcome.write_error = e.what();
        }
    }
    if (!outcome.has_results || outcome.write_failed)
    {
        outcome.unchanged_text = writer.unchanged_text(!outcome.has_results);
    }
    return make_run_report(outcome);
}
}  // namespace attention_plasticity::run

#endif
