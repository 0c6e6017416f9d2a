#ifndef ATTENTION_PLASTICITY_IO_DUMP_FOLDER_HPP
#define ATTENTION_PLASTICITY_IO_DUMP_FOLDER_HPP

// The folder format of a dump (docs/method.md §1): one sub-folder per captured (layer, head,
// kind), l{LL}h{HH}q for queries and l{LL}h{HH}k for keys (two-digit, zero-padded numbers;
// l100h07q past 99), and an optional metadata.json with the layout's counts. What is in a head's
// folder is npy_dump.hpp's; which heads to analyze, and the layout from the flags and the
// model's config, is the run layer's (run/dump_layout.hpp).
//
// Everything read from folder names and metadata.json is bounded (max_layout_count) before it
// is used, and nothing is allocated per head of the layout: only per folder present. Errors are
// input_error; the run layer turns them into its usage errors.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "config_file.hpp"
#include "errors.hpp"
#include "fs_util.hpp"
#include "json.hpp"

namespace attention_plasticity::io
{
/// Layers, query heads and key heads are each at most this many (indices below it).
inline constexpr std::size_t max_layout_count = 10000;

/// The dump's optional metadata: a JSON object with any of num_layers,
/// num_q_heads and num_k_heads (other keys are the capture's own and are ignored).
inline constexpr const char* dump_metadata_file = "metadata.json";

/// "l00h01q": the folder of (layer, head, kind) in a dump. kind is 'q' or 'k'.
inline std::string head_folder_name(std::size_t layer, std::size_t head, char kind)
{
    char name[64];
    std::snprintf(name, sizeof(name), "l%02zuh%02zu%c", layer, head, kind);
    return name;
}

inline std::string head_folder_path(const std::string& data_root, std::size_t layer, std::size_t head, char kind)
{
    return (std::filesystem::path(data_root) / head_folder_name(layer, head, kind)).string();
}

/// What a directory entry's name says: not a head folder, a head folder, or a name that
/// looks like one but cannot be used (`problem` says why).
struct parsed_folder_name
{
    bool is_head_folder = false;
    std::size_t layer = 0;
    std::size_t head = 0;
    char kind = 'q';
    std::string problem;
};

/// Parses l<digits>h<digits>{q|k}; numbers above max_layout_count - 1 and names that are
/// not in the dump's format (l0h0q, l000h00q) are problems, never numbers that overflow.
inline parsed_folder_name parse_head_folder_name(const std::string& name)
{
    parsed_folder_name out;
    std::size_t pos = 0;
    auto number = [&](const char* what, std::size_t& value) {
        const std::size_t start = pos;
        while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9')
        {
            ++pos;
        }
        const std::string digits = name.substr(start, pos - start);
        if (digits.empty())
        {
            return false;
        }
        value = 0;
        for (const char c : digits)
        {
            value = value * 10 + static_cast<std::size_t>(c - '0');
            if (value >= max_layout_count)
            {
                if (out.problem.empty())
                {
                    out.problem = std::string(what) + " number "
                                  + (digits.size() > 24 ? digits.substr(0, 24) + "..." : digits)
                                  + " is above the limit " + std::to_string(max_layout_count - 1);
                }
                break;
            }
        }
        return true;
    };
    if (name.empty() || name[0] != 'l')
    {
        return out;
    }
    pos = 1;
    if (!number("layer", out.layer) || pos >= name.size() || name[pos] != 'h')
    {
        return out;
    }
    ++pos;
    if (!number("head", out.head))
    {
        return out;
    }
    if (pos + 1 != name.size() || (name[pos] != 'q' && name[pos] != 'k'))
    {
        out.problem.clear();
        return out;
    }
    out.kind = name[pos];
    out.is_head_folder = true;
    if (out.problem.empty() && name != head_folder_name(out.layer, out.head, out.kind))
    {
        out.problem = "not in the dump's format (expected '" + head_folder_name(out.layer, out.head, out.kind)
                      + "': numbers two-digit, zero-padded, without further leading zeros)";
    }
    return out;
}

/// The head folders present in a dump (sorted by layer, then head).
struct dump_scan
{
    std::string data_root;
    std::vector<std::pair<std::size_t, std::size_t>> query;  // (layer, head)
    std::vector<std::pair<std::size_t, std::size_t>> key;

    bool has_query(std::size_t layer, std::size_t head) const
    {
        return std::binary_search(query.begin(), query.end(), std::make_pair(layer, head));
    }
    bool has_key(std::size_t layer, std::size_t head) const
    {
        return std::binary_search(key.begin(), key.end(), std::make_pair(layer, head));
    }
};

/// Lists data_root. Throws input_error(label, ...) for a data_root that cannot be listed and
/// for names of head folders that cannot be used (the first one, sorted, and how many there
/// are); `label` names the folder as the caller knows it ("data_root").
inline dump_scan scan_dump_folder(const std::string& data_root, const std::string& label)
{
    namespace fs = std::filesystem;
    const path_info info = inspect_path(data_root, "folder");
    if (!info.exists)
    {
        throw input_error(label, "'" + data_root + "': " + info.problem);
    }
    if (!info.is_directory)
    {
        throw input_error(label, "'" + data_root + "' is " + info.kind + ", not a folder");
    }
    dump_scan scan;
    scan.data_root = data_root;
    std::vector<std::string> problems;
    std::error_code ec;
    fs::directory_iterator it(data_root, ec);
    const fs::directory_iterator end;
    for (; !ec && it != end; it.increment(ec))
    {
        const std::string name = it->path().filename().string();
        const parsed_folder_name parsed = parse_head_folder_name(name);
        if (!parsed.is_head_folder)
        {
            continue;
        }
        if (!parsed.problem.empty())
        {
            problems.push_back((fs::path(data_root) / name).string() + ": " + parsed.problem);
            continue;
        }
        (parsed.kind == 'q' ? scan.query : scan.key).emplace_back(parsed.layer, parsed.head);
    }
    if (ec)
    {
        const std::string reason = ec == std::errc::permission_denied ? "permission denied" : ec.message();
        throw input_error(label, "cannot list '" + data_root + "': " + reason);
    }
    if (!problems.empty())
    {
        std::sort(problems.begin(), problems.end());
        throw input_error(label, problems.front()
                          + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more such folders)"
                                                 : std::string()));
    }
    std::sort(scan.query.begin(), scan.query.end());
    std::sort(scan.key.begin(), scan.key.end());
    return scan;
}

/// The three counts of a layout, each known or not.
struct layout_counts
{
    std::optional<std::size_t> num_layers;
    std::optional<std::size_t> num_q_heads;
    std::optional<std::size_t> num_k_heads;
};

namespace detail
{
    /// A layout count of metadata.json, 1 to max_layout_count: the reason it is not one, or "".
    inline std::string layout_count_problem(const std::string& raw, std::size_t& value)
    {
        const auto first = raw.find_first_not_of(" \t\r\n");
        const std::string text =
            first == std::string::npos ? "" : raw.substr(first, raw.find_last_not_of(" \t\r\n") - first + 1);
        if (text.empty())
        {
            return "missing value (expected an integer)";
        }
        if (text.find_first_not_of("0123456789") != std::string::npos)
        {
            return "'" + raw + "' is not a non-negative integer";
        }
        // As strtoull reads it: more than 64 bits is out of range, any other number a count or not.
        const std::string digits = text.substr(std::min(text.find_first_not_of('0'), text.size()));
        const std::string max_u64 = "18446744073709551615";
        if (digits.size() > max_u64.size() || (digits.size() == max_u64.size() && digits > max_u64))
        {
            return "'" + raw + "' is out of range";
        }
        const std::uint64_t number = digits.size() > 5 ? max_layout_count + 1 : digits.empty() ? 0 : std::stoull(digits);
        if (number < 1 || number > max_layout_count)
        {
            return text + " must be >= 1 and <= " + std::to_string(max_layout_count);
        }
        value = static_cast<std::size_t>(number);
        return "";
    }
}  // namespace detail

/// The layout counts of a metadata text: a JSON object with any of num_layers, num_q_heads and
/// num_k_heads (other keys are the capture's own and are ignored). input_error(path, reason)
/// when it is not valid JSON (json.hpp's strict reading: a key given twice at any depth is
/// refused too), not an object, or gives a count that is not 1 to max_layout_count.
inline layout_counts parse_dump_metadata(const std::string& text, const std::string& path)
{
    const json_document doc = parse_json(text, path);  // a key twice, NaN, deep nesting: refused there
    if (!doc.value.is_object())
    {
        throw input_error(path, "expected a JSON object ({\"num_layers\": ..., ...})");
    }
    layout_counts counts;
    const std::pair<const char*, std::optional<std::size_t>*> fields[] = {
        {"num_layers", &counts.num_layers}, {"num_q_heads", &counts.num_q_heads}, {"num_k_heads", &counts.num_k_heads}};
    for (const auto& [key, field] : fields)
    {
        const auto member = doc.value.find(key);
        if (member == doc.value.end() || member->is_null())
        {
            continue;
        }
        if (member->is_structured())
        {
            throw input_error(path, std::string(key) + ": expected a number");
        }
        // A number as written (99999999999999999999 is no double's text), a string's text (a
        // quoted number is read, as before), true or false.
        const std::string raw = member->is_number() ? doc.number_text(std::string("/") + key, *member)
                                                    : json_scalar_text(*member);
        std::size_t value = 0;
        const std::string problem = detail::layout_count_problem(raw, value);
        if (!problem.empty())
        {
            throw input_error(path, std::string(key) + ": " + problem);
        }
        *field = value;
    }
    return counts;
}

/// The text of a metadata.json that gives the three counts (what ap_synth writes):
/// {"num_layers": 2, "num_q_heads": 8, "num_k_heads": 2} and a newline.
inline std::string dump_metadata_text(std::size_t num_layers, std::size_t num_q_heads, std::size_t num_k_heads)
{
    return "{" + json_string("num_layers") + ": " + std::to_string(num_layers) + ", " + json_string("num_q_heads")
           + ": " + std::to_string(num_q_heads) + ", " + json_string("num_k_heads") + ": "
           + std::to_string(num_k_heads) + "}\n";
}

/// The JSON text of a JSON object (docs/method.md §1.1: metadata.json's "capture", how the
/// examples were chosen), written compactly; input_error(name, reason) when `text` is not one.
inline std::string capture_object_text(const std::string& text, const std::string& name)
{
    const json_document doc = parse_json(text, name);
    if (!doc.value.is_object())
    {
        throw input_error(name, "expected a JSON object (how the examples were chosen, docs/method.md §1.1)");
    }
    return doc.value.dump();
}

/// The "capture" object of a metadata text as JSON text; "" when it has none, or a "capture"
/// that is not an object (older captures wrote their own entry there). input_error(path,
/// reason) when it is not valid JSON.
inline std::string parse_dump_capture(const std::string& text, const std::string& path)
{
    const json_document doc = parse_json(text, path);
    if (!doc.value.is_object())
    {
        return "";  // parse_dump_metadata refuses it
    }
    const auto member = doc.value.find("capture");
    if (member == doc.value.end() || member->is_null())
    {
        return "";
    }
    if (!member->is_object())
    {
        return "";  // an older capture's own "capture" entry (a name): not the description of §1.1
    }
    return member->dump();
}

/// The "capture" object of <data_root>/metadata.json as JSON text ("" without one).
inline std::string read_dump_capture(const std::string& data_root)
{
    const std::string path = (std::filesystem::path(data_root) / dump_metadata_file).string();
    if (inspect_path(path).absent)
    {
        return "";
    }
    return parse_dump_capture(read_config_text(path), path);
}

/// The layout counts of <data_root>/metadata.json (none when there is no such file);
/// input_error(path, reason) when it cannot be read or parsed.
inline layout_counts read_dump_metadata(const std::string& data_root)
{
    const std::string path = (std::filesystem::path(data_root) / dump_metadata_file).string();
    if (inspect_path(path).absent)
    {
        return {};
    }
    return parse_dump_metadata(read_config_text(path), path);
}
}  // namespace attention_plasticity::io

#endif
