#ifndef ATTENTION_PLASTICITY_RUN_SHARD_MANIFEST_HPP
#define ATTENTION_PLASTICITY_RUN_SHARD_MANIFEST_HPP

// The manifest of a shard, shard.json (docs/method.md §8.4): written by `ap_analyze --shard
// I/N` into its result set, beside its part of the CSVs (so both appear together or not at
// all), and read by ap_merge to check that the shards it is given are all the shards of one
// run and that each finished. It says:
//   - which shard (shard, num_shards) and which program wrote it;
//   - the options that determine the results, key -> canonical value, and their fingerprint;
//   - the dump: its fingerprint (shard_plan.hpp), data_root (for messages only) and how many
//     heads the run has, were present and the layout has;
//   - the files of the set other than the manifest (the CSVs, whatever they are), in order;
//   - each head of the shard, in (layer, q_head) order: its weight in tokens, whether it was
//     analyzed (else the error), and how many rows it has in each file (in the files' order).
// make_shard_manifest() assembles it from a run (analysis_run.hpp: ap_analyze's and the
// Python module's).
// JSON, one head per line: read and quoted by io/json.hpp (the project's one JSON home);
// everything read is bounded.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../io/csv_rows.hpp"
#include "../io/json.hpp"
#include "analyze_config.hpp"
#include "cli_util.hpp"
#include "dump_layout.hpp"
#include "errors.hpp"
#include "result_set.hpp"
#include "shard_plan.hpp"
#include "../version.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

inline constexpr const char* shard_manifest_file = "shard.json";

/// The largest manifest read (about 150 bytes per head).
inline constexpr std::uintmax_t max_manifest_bytes = std::uintmax_t{64} << 20;

/// The format number written as "ap_shard_manifest".
inline constexpr unsigned shard_manifest_format = 1;

/// One head of a shard.
struct shard_head
{
    std::size_t layer = 0;
    std::size_t q_head = 0;
    std::size_t k_head = 0;
    std::uint64_t tokens = 0;         // its weight in the shard plan
    bool analyzed = false;
    std::string error;                // when not analyzed: "FILE: reason"
    std::vector<std::uint64_t> rows;  // rows in each file (analyzed heads)
};

struct shard_manifest
{
    std::string program;  // "ap_analyze 0.1.0"
    shard_spec shard;
    std::vector<std::pair<std::string, std::string>> options;
    std::string dump_fingerprint;
    std::string data_root;
    std::uint64_t run_heads = 0;      // heads of the whole run (every shard)
    std::uint64_t present_heads = 0;  // query heads of the layout present in the dump
    std::uint64_t layout_heads = 0;   // num_layers x num_q_heads
    std::string host;
    double seconds = 0.0;
    std::vector<std::string> files;
    std::vector<shard_head> heads;

    /// The fingerprint of `options` (16 hexadecimal digits).
    std::string options_fingerprint() const
    {
        std::uint64_t hash = fnv1a64("ap options\n");
        for (const auto& [key, value] : options)
        {
            hash = fnv1a64(key + "=" + value + "\n", hash);
        }
        return hex64(hash);
    }
};

/// The text of shard.json (strings quoted by io::json_string, the writers' one quoting).
inline std::string manifest_json(const shard_manifest& m)
{
    using io::json_string;
    std::string out = "{\n";
    auto field = [&](const char* key, const std::string& value) {
        out += "  " + json_string(key) + ": " + value + ",\n";
    };
    field("ap_shard_manifest", std::to_string(shard_manifest_format));
    field("program", json_string(m.program));
    field("shard", std::to_string(m.shard.index));
    field("num_shards", std::to_string(m.shard.count));
    field("options_fingerprint", json_string(m.options_fingerprint()));
    std::string options = "{";
    for (std::size_t i = 0; i < m.options.size(); ++i)
    {
        options += (i ? ", " : "") + json_string(m.options[i].first) + ": " + json_string(m.options[i].second);
    }
    field("options", options + "}");
    field("dump_fingerprint", json_string(m.dump_fingerprint));
    field("data_root", json_string(m.data_root));
    field("run_heads", std::to_string(m.run_heads));
    field("present_heads", std::to_string(m.present_heads));
    field("layout_heads", std::to_string(m.layout_heads));
    field("host", json_string(m.host));
    char seconds[48];
    std::snprintf(seconds, sizeof(seconds), "%.3f", m.seconds);
    field("seconds", seconds);
    std::string files = "[";
    for (std::size_t i = 0; i < m.files.size(); ++i)
    {
        files += (i ? ", " : "") + json_string(m.files[i]);
    }
    field("files", files + "]");
    out += "  \"heads\": [";
    for (std::size_t i = 0; i < m.heads.size(); ++i)
    {
        const shard_head& h = m.heads[i];
        out += (i ? ",\n    " : "\n    ");
        out += "{\"layer\": " + std::to_string(h.layer) + ", \"q_head\": " + std::to_string(h.q_head)
               + ", \"k_head\": " + std::to_string(h.k_head) + ", \"tokens\": " + std::to_string(h.tokens)
               + ", \"analyzed\": " + (h.analyzed ? "true" : "false");
        if (!h.analyzed)
        {
            out += ", \"error\": " + json_string(h.error);
        }
        out += ", \"rows\": [";
        for (std::size_t r = 0; r < h.rows.size(); ++r)
        {
            out += (r ? ", " : "") + std::to_string(h.rows[r]);
        }
        out += "]}";
    }
    out += m.heads.empty() ? "]\n}\n" : "\n  ]\n}\n";
    return out;
}

namespace detail
{
    /// Reads the members of a parsed manifest (io/json.hpp); every problem is a merge_error
    /// "PATH: not a valid shard manifest: ...".
    class manifest_reader
    {
    public:
        explicit manifest_reader(std::string path) : m_path(std::move(path)) {}

        [[noreturn]] void fail(const std::string& what) const
        {
            throw merge_error(m_path + ": not a valid shard manifest: " + what);
        }

        const io::json& member(const io::json& object, const char* key, const std::string& where) const
        {
            const auto value = object.find(key);
            if (value == object.end() || value->is_null())
            {
                fail("'" + where + key + "' is missing");
            }
            return *value;
        }

        /// A scalar's text (a string's, a number's, true or false), as the YAML reader saw it.
        std::string text(const io::json& object, const char* key, const std::string& where = "") const
        {
            const io::json& value = member(object, key, where);
            if (value.is_structured())
            {
                fail("'" + where + key + "' is not a string");
            }
            return io::json_scalar_text(value);
        }

        std::uint64_t number(const io::json& object, const char* key, std::uint64_t max_value,
                             const std::string& where = "") const
        {
            const io::json& value = member(object, key, where);
            if (value.is_structured())
            {
                fail("'" + where + key + "' is not a number");
            }
            return number_of(io::json_scalar_text(value), where + key, max_value);
        }

        std::uint64_t number_of(const std::string& scalar, const std::string& what, std::uint64_t max_value) const
        {
            try
            {
                return parse_unsigned(what, scalar, 0, max_value);
            }
            catch (const usage_error& e)
            {
                fail(e.what());
            }
        }

        bool flag(const io::json& object, const char* key, const std::string& where) const
        {
            const std::string value = text(object, key, where);
            if (value != "true" && value != "false")
            {
                fail("'" + where + key + "' is not true or false");
            }
            return value == "true";
        }

        const io::json& sequence(const io::json& object, const char* key, const std::string& where = "") const
        {
            const io::json& value = member(object, key, where);
            if (!value.is_array())
            {
                fail("'" + where + key + "' is not a list");
            }
            return value;
        }

    private:
        std::string m_path;
    };
}  // namespace detail

/// The manifest of a shard's run. `plan`: the run's plan with the shard's heads (the
/// selection's); per head, in that order, its rows when it was analyzed (else null) and its
/// error ("FILE: reason") when it failed; `program`: who writes it ("ap_analyze 0.1.0").
inline shard_manifest make_shard_manifest(const std::string& program, const analyze_config& config,
                                          const head_plan& plan, const shard_selection& selection,
                                          const std::vector<const io::head_rows*>& rows,
                                          const std::vector<std::string>& errors, double seconds)
{
    shard_manifest m;
    m.program = program;
    m.shard = config.shard.value_or(shard_spec{});
    m.options = result_options(config, plan.layout);
    m.dump_fingerprint = hex64(selection.dump_fingerprint);
    m.data_root = config.data_root;
    m.run_heads = selection.run_heads;
    m.present_heads = plan.present_heads;
    m.layout_heads = plan.layout_heads;
    m.host = this_process().host;
    m.seconds = seconds;
    m.files = io::result_file_names();
    for (std::size_t i = 0; i < plan.heads.size(); ++i)
    {
        shard_head head;
        head.layer = plan.heads[i].layer;
        head.q_head = plan.heads[i].q_head;
        head.k_head = plan.heads[i].k_head;
        head.tokens = selection.tokens[i];
        head.analyzed = rows[i] != nullptr;
        if (head.analyzed)
        {
            head.rows = row_counts(*rows[i]);
        }
        else
        {
            head.error = errors[i];
        }
        m.heads.push_back(std::move(head));
    }
    return m;
}

/// Parses the text of a shard.json (`path` names it in messages). Throws merge_error.
inline shard_manifest parse_manifest(const std::string& text, const std::string& path)
{
    const detail::manifest_reader read(path);
    io::json_document doc;
    try
    {
        doc = io::parse_json(text, path, io::json_limits{static_cast<std::size_t>(max_manifest_bytes), 64});
    }
    catch (const io::input_error& e)
    {
        read.fail(e.reason());  // "not valid JSON: ...", "key 'options.seed' is given twice; ..."
    }
    if (!doc.value.is_object())
    {
        read.fail("expected a JSON object");
    }
    const io::json& r = doc.value;
    if (read.number(r, "ap_shard_manifest", 1000) != shard_manifest_format)
    {
        read.fail("format " + io::json_scalar_text(r["ap_shard_manifest"]) + " (this program reads format "
                  + std::to_string(shard_manifest_format) + ")");
    }
    shard_manifest m;
    m.program = read.text(r, "program");
    m.shard.count = static_cast<std::size_t>(read.number(r, "num_shards", max_shards));
    m.shard.index = static_cast<std::size_t>(read.number(r, "shard", max_shards));
    if (m.shard.count == 0 || m.shard.index >= m.shard.count)
    {
        read.fail("shard " + std::to_string(m.shard.index) + " of " + std::to_string(m.shard.count));
    }
    const io::json& options = read.member(r, "options", "");
    if (!options.is_object())
    {
        read.fail("'options' is not an object");
    }
    for (const auto& entry : options.items())  // in the file's order; a key twice was refused by parse_json
    {
        if (entry.value().is_structured() || entry.value().is_null())
        {
            read.fail("'options' holds something else than names and values");
        }
        m.options.emplace_back(entry.key(), io::json_scalar_text(entry.value()));
    }
    if (read.text(r, "options_fingerprint") != m.options_fingerprint())
    {
        read.fail("'options_fingerprint' does not match 'options' (the file was edited)");
    }
    m.dump_fingerprint = read.text(r, "dump_fingerprint");
    m.data_root = read.text(r, "data_root");
    constexpr std::uint64_t max_heads = static_cast<std::uint64_t>(max_layout_count) * max_layout_count;
    m.run_heads = read.number(r, "run_heads", max_heads);
    m.present_heads = read.number(r, "present_heads", max_heads);
    m.layout_heads = read.number(r, "layout_heads", max_heads);
    m.host = read.text(r, "host");
    const io::json& files = read.sequence(r, "files");
    std::set<std::string> names;
    for (const io::json& file : files)
    {
        if (file.is_structured() || file.is_null())
        {
            read.fail("'files' holds something else than names");
        }
        const std::string name = io::json_scalar_text(file);
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos
            || name.find('\0') != std::string::npos || name == shard_manifest_file || name.size() > 255)
        {
            read.fail("'files' names '" + name + "', which is not the name of a result file");
        }
        if (!names.insert(name).second)
        {
            read.fail("'files' names '" + name + "' twice");
        }
        m.files.push_back(name);
    }
    const io::json& heads = read.sequence(r, "heads");
    if (heads.size() > m.run_heads)
    {
        read.fail(std::to_string(heads.size()) + " heads in a run of " + std::to_string(m.run_heads));
    }
    for (std::size_t i = 0; i < heads.size(); ++i)
    {
        const io::json& h = heads[i];
        const std::string where = "heads[" + std::to_string(i) + "].";
        if (!h.is_object())
        {
            read.fail("heads[" + std::to_string(i) + "] is not an object");
        }
        shard_head head;
        head.layer = static_cast<std::size_t>(read.number(h, "layer", max_layout_count - 1, where));
        head.q_head = static_cast<std::size_t>(read.number(h, "q_head", max_layout_count - 1, where));
        head.k_head = static_cast<std::size_t>(read.number(h, "k_head", max_layout_count - 1, where));
        head.tokens = read.number(h, "tokens", ~std::uint64_t{0}, where);
        head.analyzed = read.flag(h, "analyzed", where);
        if (!head.analyzed)
        {
            head.error = read.text(h, "error", where);
        }
        const io::json& rows = read.sequence(h, "rows", where);
        for (const io::json& count : rows)
        {
            if (count.is_structured() || count.is_null())
            {
                read.fail(where + "rows holds something else than numbers");
            }
            head.rows.push_back(read.number_of(io::json_scalar_text(count), where + "rows", ~std::uint64_t{0}));
        }
        if (head.rows.size() != (head.analyzed ? m.files.size() : 0))
        {
            read.fail(where + "rows has " + std::to_string(head.rows.size()) + " counts for "
                      + std::to_string(head.analyzed ? m.files.size() : 0) + " files");
        }
        if (!m.heads.empty()
            && std::make_pair(m.heads.back().layer, m.heads.back().q_head) >= std::make_pair(head.layer, head.q_head))
        {
            read.fail("heads[" + std::to_string(i) + "] is out of order (the heads are in increasing (layer, q_head) order)");
        }
        m.heads.push_back(std::move(head));
    }
    return m;
}
}  // namespace attention_plasticity::run

#endif
