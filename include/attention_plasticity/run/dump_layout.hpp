#ifndef ATTENTION_PLASTICITY_RUN_DUMP_LAYOUT_HPP
#define ATTENTION_PLASTICITY_RUN_DUMP_LAYOUT_HPP

// Which heads a dump holds and which of them to analyze (docs/method.md §1).
//
// A dump is a folder with one sub-folder per captured (layer, head, kind), in the format of
// io/dump_folder.hpp (l{LL}h{HH}q for queries, l{LL}h{HH}k for keys, metadata.json). A
// capture may sample heads: query head h of a layer is analyzed when its query folder is
// present, with the keys of head h / (num_q_heads / num_k_heads) (its GQA group). Heads that
// were not captured are not errors.
//
// The layout (num_layers, num_q_heads, num_k_heads) comes from the flags or the --config
// file, from the model's own config.json (--model-config: num_attention_heads,
// num_key_value_heads, num_hidden_layers and the other families' names, read_model_config) or from the dump's metadata file
// <data_root>/metadata.json (see dump_metadata_file), which must agree where several give
// it. The head counts, hence the GQA group size, are never guessed from the folder names: a
// capture may hold some heads only, and query heads 0-5 of an 8-query/2-key model look like
// a complete 6/2 dump. num_layers alone may be inferred from the highest layer present (it
// only bounds --layers and counts the layout in the summary).
//
// Everything read from folder names is bounded (max_layout_count) before it is used, and
// nothing is allocated per head of the layout: only per folder present. The io layer's
// input_errors become usage errors here (exit status 2 of the front ends), word for word.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../io/dump_folder.hpp"
#include "../io/errors.hpp"
#include "../io/json.hpp"
#include "cli_util.hpp"
#include "config.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

// The dump's folder format is the io layer's (io/dump_folder.hpp); its names here too, for the
// run layer and its callers.
using io::dump_metadata_file;
using io::dump_scan;
using io::head_folder_name;
using io::head_folder_path;
using io::layout_counts;
using io::max_layout_count;
using io::parse_head_folder_name;
using io::parsed_folder_name;

/// Lists data_root (io::scan_dump_folder); usage_error for a data_root that cannot be listed
/// and for names of head folders that cannot be used.
inline dump_scan scan_dump(const std::string& data_root)
{
    try
    {
        return io::scan_dump_folder(data_root, "data_root");
    }
    catch (const io::input_error& e)
    {
        throw usage_error(e.what());  // "data_root: ..."
    }
}

/// The layout counts of a metadata text (io::parse_dump_metadata); usage_error "metadata PATH: ...".
inline layout_counts parse_dump_metadata(const std::string& text, const std::string& path)
{
    try
    {
        return io::parse_dump_metadata(text, path);
    }
    catch (const io::input_error& e)
    {
        throw usage_error(std::string("metadata ") + e.what());
    }
}

/// The layout counts of <data_root>/metadata.json (none when there is no such file);
/// usage_error "metadata PATH: ..." when it cannot be read or parsed.
inline layout_counts read_dump_metadata(const std::string& data_root)
{
    try
    {
        return io::read_dump_metadata(data_root);
    }
    catch (const io::input_error& e)
    {
        throw usage_error(std::string("metadata ") + e.what());
    }
}

namespace detail
{
    /// The keys of a transformers config.json that give one layout count, in the names the model
    /// families use (docs/method.md §1.3): Llama-style names first, then GPT-2 / GPT-BigCode /
    /// Falcon ones (transformers' attribute_map aliases; Falcon's n_head_kv is its old name of
    /// num_kv_heads).
    inline constexpr const char* model_q_head_keys[] = {"num_attention_heads", "n_head"};
    inline constexpr const char* model_kv_head_keys[] = {"num_key_value_heads", "num_kv_heads", "n_head_kv"};
    inline constexpr const char* model_layer_keys[] = {"num_hidden_layers", "n_layer"};

    /// A model config.json as read for its layout: the top-level mapping and, for a multimodal
    /// model, its language model's `text_config` (where its counts are). A name may be given in
    /// both, and under several of its aliases, as long as every value agrees.
    struct model_config_view
    {
        std::string source;  // "model_config PATH", the prefix of every message
        io::json root;
        const io::json* text = nullptr;  // text_config (in root), when given

        /// The places `key` is given: {"text_config.key", value} and {"key", value}.
        std::vector<std::pair<std::string, const io::json*>> find(const std::string& key) const
        {
            std::vector<std::pair<std::string, const io::json*>> found;
            for (const auto& [prefix, map] : {std::pair<std::string, const io::json*>{"text_config.", text},
                                              std::pair<std::string, const io::json*>{"", &root}})
            {
                if (map == nullptr)
                {
                    continue;
                }
                const auto value = map->find(key);
                if (value != map->end() && !value->is_null())
                {
                    found.emplace_back(prefix + key, &*value);
                }
            }
            return found;
        }

        /// The one count that the keys give (nullopt when none does); a usage error naming both
        /// keys when two of them disagree.
        template <std::size_t N>
        std::optional<std::size_t> count(const char* const (&keys)[N]) const
        {
            std::optional<std::size_t> result;
            std::string result_key;
            for (const char* key : keys)
            {
                for (const auto& [name, value] : find(key))
                {
                    if (value->is_structured())
                    {
                        throw usage_error(source + ": " + name + ": expected a number");
                    }
                    const auto v = static_cast<std::size_t>(
                        parse_unsigned(source + ": " + name, io::json_scalar_text(*value), 1, max_layout_count));
                    if (result && *result != v)
                    {
                        throw usage_error(source + ": " + result_key + " says " + std::to_string(*result) + " but "
                                          + name + " says " + std::to_string(v)
                                          + "; which one is the language model's? (give --num-q-heads and "
                                            "--num-k-heads instead)");
                    }
                    result = v;
                    result_key = name;
                }
            }
            return result;
        }

        /// A true/false key (`fallback` when absent); a usage error when it is not a boolean or two
        /// places disagree.
        bool flag(const char* key, bool fallback) const
        {
            std::optional<bool> result;
            for (const auto& [name, value] : find(key))
            {
                if (!value->is_boolean())
                {
                    throw usage_error(source + ": " + name + ": expected true or false");
                }
                const bool v = value->get<bool>();
                if (result && *result != v)
                {
                    throw usage_error(source + ": " + key + " is both true and false (at the top and in text_config)");
                }
                result = v;
            }
            return result.value_or(fallback);
        }

        /// The model_type (of text_config when it has one), "" when absent.
        std::string model_type() const
        {
            for (const auto& [name, value] : find("model_type"))
            {
                if (value->is_primitive())
                {
                    return io::json_scalar_text(*value);
                }
            }
            return "";
        }
    };

}  // namespace detail

/// The layout counts of a model's own config.json (Hugging Face transformers; `path` names it
/// in messages), docs/method.md §1.3: read at the top level and in `text_config` (the language
/// model of a multimodal config), under the names of the model families:
/// - num_q_heads: num_attention_heads or n_head (GPT-2, GPT-BigCode);
/// - num_k_heads: multi-query attention (`multi_query: true`, the default of GPT-BigCode and
///   Falcon, unless Falcon's `new_decoder_architecture: true`) has 1 key head, and then a
///   num_key_value_heads other than 1 contradicts it; otherwise num_key_value_heads,
///   num_kv_heads or n_head_kv (Falcon), absent meaning num_q_heads (no GQA), as transformers
///   reads them;
/// - num_layers: num_hidden_layers or n_layer.
/// None when `path` is "". usage_error, naming the file and the key, when it cannot be read,
/// lacks the query head count, or two of these names (or the top level and text_config) give
/// different values.
inline layout_counts read_model_config(const std::string& path)
{
    layout_counts counts;
    if (path.empty())
    {
        return counts;
    }
    detail::model_config_view config;
    config.source = "model_config " + path;
    try
    {
        // Strict JSON (io/json.hpp): a key given twice, at the top or in text_config, is refused.
        config.root = io::parse_json(read_config_file(path, "model_config"), config.source).value;
    }
    catch (const io::input_error& e)
    {
        throw usage_error(e.what());  // "model_config PATH: not valid JSON: ..."
    }
    if (!config.root.is_object())
    {
        throw usage_error(config.source + ": expected a JSON object (a model's config.json)");
    }
    const auto text = config.root.find("text_config");
    if (text != config.root.end() && !text->is_null())
    {
        if (!text->is_object())
        {
            throw usage_error(config.source + ": text_config: expected a JSON object (the language model's config)");
        }
        config.text = &*text;
    }
    counts.num_q_heads = config.count(detail::model_q_head_keys);
    if (!counts.num_q_heads)
    {
        throw usage_error(config.source
                          + ": no num_attention_heads (nor n_head, at the top or in text_config; is it the config.json "
                            "of a transformers model?)");
    }
    const std::string type = config.model_type();
    const bool multi_query_default = type == "falcon" || type == "gpt_bigcode";
    const bool multi_query = config.flag("multi_query", multi_query_default)
                             && !config.flag("new_decoder_architecture", false);
    if (multi_query)
    {
        // transformers ignores Falcon's num_kv_heads here (it keeps num_attention_heads in it).
        const std::optional<std::size_t> declared = config.count({"num_key_value_heads"});
        if (declared && *declared != 1)
        {
            throw usage_error(config.source + ": multi_query is true (one key head) but num_key_value_heads says "
                              + std::to_string(*declared) + "; which one holds?");
        }
        counts.num_k_heads = 1;
    }
    else
    {
        counts.num_k_heads = config.count(detail::model_kv_head_keys);
        if (!counts.num_k_heads)
        {
            counts.num_k_heads = counts.num_q_heads;
        }
    }
    counts.num_layers = config.count(detail::model_layer_keys);
    return counts;
}

/// A dump's layout: how many layers, query heads and key heads the model has.
struct dump_layout
{
    std::size_t num_layers = 0;
    std::size_t num_q_heads = 0;
    std::size_t num_k_heads = 0;
    std::string origin;  // where the counts come from, for the run's first line

    std::size_t group_size() const { return num_q_heads / num_k_heads; }
    std::size_t k_head_of(std::size_t q_head) const { return q_head / group_size(); }
};

namespace detail
{
    inline std::string index_range_text(std::size_t count)
    {
        return count == 1 ? "0" : "0-" + std::to_string(count - 1);
    }
}  // namespace detail

/// The layout from the counts given (flags or --config), the model's config.json (`model`,
/// read from `model_path`), the dump's metadata and, for num_layers only, the folder names.
/// Throws usage_error when they disagree, when a head count is known from none of them (it
/// is never guessed from the folder names: a capture may hold some heads only, and a
/// partial set can look like a complete one of another GQA group size), when num_q_heads is
/// not a multiple of num_k_heads, and when a folder lies outside the layout. `words`: how the
/// messages name the options (the front end's flags or keywords).
inline dump_layout resolve_layout(const dump_scan& scan, const layout_counts& given, const layout_counts& metadata,
                                  const layout_counts& model = {}, const std::string& model_path = "",
                                  const option_words& words = {})
{
    const std::string meta_path = (std::filesystem::path(scan.data_root) / dump_metadata_file).string();
    if (scan.query.empty())
    {
        throw usage_error("data_root: no query folders (l{LL}h{HH}q) in '" + scan.data_root + "'");
    }
    std::size_t seen_layers = 0;
    for (const auto& folders : {&scan.query, &scan.key})
    {
        for (const auto& entry : *folders)
        {
            seen_layers = std::max(seen_layers, entry.first + 1);
        }
    }
    dump_layout layout;
    std::vector<std::pair<std::string, std::string>> origins;  // (key, where its value comes from)
    std::vector<std::string> unknown;
    auto pick = [&](const char* key, std::optional<std::size_t> layout_counts::*field, std::size_t* seen,
                    std::size_t& out) {
        const std::pair<std::string, const std::optional<std::size_t>*> sources[] = {
            {"given", &(given.*field)},
            {"from " + model_path, &(model.*field)},
            {"from " + std::string(dump_metadata_file), &(metadata.*field)}};
        const std::pair<std::string, const std::optional<std::size_t>*>* first = nullptr;
        for (const auto& source : sources)
        {
            if (!*source.second)
            {
                continue;
            }
            if (first == nullptr)
            {
                first = &source;
                continue;
            }
            if (**first->second != **source.second)
            {
                auto name = [&](const std::string& origin) {
                    return origin == "given" ? words.option(key) + " (or " + words.config_file() + ")"
                           : origin == sources[1].first ? words.option("model_config") + " " + model_path
                                                        : meta_path;
                };
                throw usage_error(std::string(key) + ": " + name(first->first) + " says "
                                  + std::to_string(**first->second) + " but " + name(source.first) + " says "
                                  + std::to_string(**source.second) + "; correct or remove one of them");
            }
        }
        if (first != nullptr)
        {
            out = **first->second;
            origins.emplace_back(key, first->first);
        }
        else if (seen != nullptr)
        {
            out = *seen;
            origins.emplace_back(key, "from the folder names");
        }
        else
        {
            unknown.emplace_back(key);
        }
    };
    pick("num_layers", &layout_counts::num_layers, &seen_layers, layout.num_layers);
    pick("num_q_heads", &layout_counts::num_q_heads, nullptr, layout.num_q_heads);
    pick("num_k_heads", &layout_counts::num_k_heads, nullptr, layout.num_k_heads);
    if (!unknown.empty())
    {
        const std::string which = unknown.size() == 2 ? "num_q_heads and num_k_heads" : unknown.front();
        // On the command line the dump's own metadata.json is one place to give them; from Python
        // (someone else's dump, often) the keywords are the hint.
        const std::string sources_text =
            words.flags ? "the flags, the --config file, --model-config or " + meta_path
                        : "the keywords, the config file, model_config or the dump's own metadata";
        const std::string hint =
            words.flags ? "give --num-q-heads and --num-k-heads, or --model-config with the model's config.json "
                          "(num_attention_heads, num_key_value_heads), or num_q_heads and num_k_heads in the "
                          "--config file or in "
                              + meta_path
                        : "give the keywords num_q_heads and num_k_heads (e.g. analyze_dump(path, num_q_heads=12, "
                          "num_k_heads=12)), or model_config with the model's config.json (num_attention_heads, "
                          "num_key_value_heads), or set them in the config file";
        throw usage_error("data_root: " + which + (unknown.size() == 2 ? " are" : " is") + " not known (from "
                          + sources_text
                          + ") and cannot be read from the folder names: a capture may hold some heads only, and "
                            "then the GQA group of each query head would be guessed (query heads 0-5 of a model of "
                            "8 query and 2 key heads look like a complete dump of 6 and 2); "
                          + hint);
    }
    auto origin_of = [&](const char* key) {
        for (const auto& [k, source] : origins)
        {
            if (k == key)
            {
                return source;
            }
        }
        return std::string();
    };

    // Folders outside the layout: the counts are wrong (or the dump is).
    auto outside = [&](const std::vector<std::pair<std::size_t, std::size_t>>& folders, std::size_t heads, char kind) {
        for (const auto& [layer, head] : folders)
        {
            if (layer >= layout.num_layers || head >= heads)
            {
                const bool by_layer = layer >= layout.num_layers;
                throw usage_error(
                    "data_root: folder '" + head_folder_name(layer, head, kind) + "' is outside the layout ("
                    + (by_layer ? "num_layers = " + std::to_string(layout.num_layers)
                                : std::string(kind == 'q' ? "num_q_heads" : "num_k_heads") + " = " + std::to_string(heads))
                    + ", " + (by_layer ? "layers " : "heads ")
                    + detail::index_range_text(by_layer ? layout.num_layers : heads)
                    + "); to analyze some layers or heads only, use " + words.option("layers") + " and "
                    + words.option("heads"));
            }
        }
    };
    outside(scan.query, layout.num_q_heads, 'q');
    outside(scan.key, layout.num_k_heads, 'k');
    if (layout.num_q_heads % layout.num_k_heads != 0)
    {
        throw usage_error("num_q_heads (" + std::to_string(layout.num_q_heads) + ", " + origin_of("num_q_heads")
                          + ") must be a multiple of num_k_heads (" + std::to_string(layout.num_k_heads) + ", "
                          + origin_of("num_k_heads") + ")");
    }
    const bool one_origin = std::all_of(origins.begin(), origins.end(),
                                        [&](const auto& o) { return o.second == origins.front().second; });
    for (std::size_t i = 0; i < origins.size(); ++i)
    {
        const std::string& source = origins[i].second;
        layout.origin += one_origin ? (i ? "" : "layout " + (source == "given" ? "as given" : source))
                                    : (i ? ", " : "") + origins[i].first + " " + source;
    }
    return layout;
}

/// Which layers and query heads to analyze (unset: all of the layout).
struct head_selection
{
    std::optional<index_set> layers;
    std::optional<index_set> q_heads;
    std::string layers_label = "--layers";
    std::string heads_label = "--heads";
};

/// One query head to analyze, with the key head of its GQA group.
struct head_task
{
    std::size_t layer = 0;
    std::size_t q_head = 0;
    std::size_t k_head = 0;
};

/// The heads of a run: the present query heads of the layout that the selection keeps, in
/// (layer, q_head) order. A later sharding step splits `heads`; nothing else depends on
/// which subset it holds.
struct head_plan
{
    dump_layout layout;
    std::vector<head_task> heads;
    std::uint64_t layout_heads = 0;    // num_layers x num_q_heads
    std::uint64_t selected_heads = 0;  // of those, selected by --layers / --heads
    std::size_t present_heads = 0;     // query folders of the layout present (any selection)
};

/// The plan of a run. Throws usage_error for a selection outside the layout or one that
/// matches no head that is present.
inline head_plan plan_heads(const dump_scan& scan, const dump_layout& layout, const head_selection& selection)
{
    auto check = [](const std::optional<index_set>& set, std::size_t count, const std::string& label, const char* what) {
        if (set && set->largest() >= count)
        {
            throw usage_error(label + ": " + what + " " + std::to_string(set->largest()) + " is outside the layout ("
                              + std::to_string(count) + " " + what + "s: " + detail::index_range_text(count) + ")");
        }
    };
    check(selection.layers, layout.num_layers, selection.layers_label, "layer");
    check(selection.q_heads, layout.num_q_heads, selection.heads_label, "query head");
    head_plan plan;
    plan.layout = layout;
    plan.layout_heads = static_cast<std::uint64_t>(layout.num_layers) * layout.num_q_heads;
    plan.selected_heads = (selection.layers ? selection.layers->count() : layout.num_layers)
                          * (selection.q_heads ? selection.q_heads->count() : layout.num_q_heads);
    plan.present_heads = scan.query.size();
    for (const auto& [layer, q_head] : scan.query)
    {
        if ((!selection.layers || selection.layers->contains(layer))
            && (!selection.q_heads || selection.q_heads->contains(q_head)))
        {
            plan.heads.push_back({layer, q_head, layout.k_head_of(q_head)});
        }
    }
    if (plan.heads.empty())
    {
        std::vector<index_set::range> layers;
        for (const auto& folder : scan.query)
        {
            layers.emplace_back(folder.first, folder.first);
        }
        std::string what;
        if (selection.layers)
        {
            what += " " + selection.layers_label + " " + selection.layers->text();
        }
        if (selection.q_heads)
        {
            what += " " + selection.heads_label + " " + selection.q_heads->text();
        }
        throw usage_error("the selection" + what + " matches no query head present in '" + scan.data_root
                          + "' (query folders are present in layers " + index_set(layers).text() + ")");
    }
    return plan;
}
}  // namespace attention_plasticity::run

#endif
