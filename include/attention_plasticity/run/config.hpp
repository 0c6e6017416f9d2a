#ifndef ATTENTION_PLASTICITY_RUN_CONFIG_HPP
#define ATTENTION_PLASTICITY_RUN_CONFIG_HPP

// The table-driven option parser of every front end: a program describes its options once
// (key, value name, help, setter) and gets from that table its command line (--name VALUE
// and --name=VALUE, key data_root <-> flag --data-root), an optional YAML file (--config
// FILE, the same keys; flags override it) and its --help text. A setter parses the text of
// the value and throws usage_error naming the option as the user wrote it. The Python
// module can set options by key through the same table.
//
// Everything read is bounded: a configuration file is a regular file of at most 1 MiB, with
// a flat mapping of keys to scalars (or, for list options, a list of scalars).

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "../io/config_file.hpp"
#include "../io/fs_util.hpp"
#include "cli_util.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// One option: key `name` in a --config file, flag --name-with-dashes on the command line.
template <class Config>
struct option_spec
{
    const char* name;
    const char* metavar;
    const char* help;
    /// Sets the option from the text of its value; `label` names it as the user wrote it.
    std::function<void(Config&, const std::string& label, const std::string& text)> set;
    /// A YAML list is accepted too; its items are joined with ',' ("0-3,7" == [0-3, 7]).
    bool takes_list = false;
};

template <class Config>
using option_table = std::vector<option_spec<Config>>;

/// The largest configuration file accepted (io/config_file.hpp).
using io::max_config_bytes;

/// "data_root" -> "--data-root".
inline std::string flag_of(const std::string& key)
{
    std::string flag = "--" + key;
    std::replace(flag.begin() + 2, flag.end(), '_', '-');
    return flag;
}

/// How a front end names the options in the messages the run layer builds for it: ap_analyze's
/// command line says "--num-q-heads" and "the --config file"; analyze_dump says "num_q_heads" and
/// "the config file" (its keywords).
struct option_words
{
    bool flags = true;  // command-line flags; else keywords

    std::string option(const std::string& key) const { return flags ? flag_of(key) : key; }
    std::string config_file() const { return flags ? "the --config file" : "the config file"; }
};

/// The entry of `table` (an option_table, or a list of entries derived from option_spec) named
/// `key`; null when there is none.
template <class Table>
const typename Table::value_type* find_option(const Table& table, const std::string& key)
{
    for (const auto& option : table)
    {
        if (key == option.name)
        {
            return &option;
        }
    }
    return nullptr;
}

template <class Config>
const option_spec<Config>* find_flag(const option_table<Config>& table, const std::string& flag)
{
    for (const auto& option : table)
    {
        if (flag == flag_of(option.name))
        {
            return &option;
        }
    }
    return nullptr;
}

/// The name of `names` closest to `name` by edit distance, when close enough to be a
/// misspelling of it (at most 2 edits, or a quarter of its length); "" otherwise.
inline std::string closest_name(const std::string& name, const std::vector<std::string>& names)
{
    std::string best;
    std::size_t best_distance = std::max<std::size_t>(2, name.size() / 4) + 1;
    for (const std::string& candidate : names)
    {
        std::vector<std::size_t> row(candidate.size() + 1);
        for (std::size_t j = 0; j <= candidate.size(); ++j)
        {
            row[j] = j;
        }
        for (std::size_t i = 1; i <= name.size(); ++i)
        {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= candidate.size(); ++j)
            {
                const std::size_t above = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (name[i - 1] == candidate[j - 1] ? 0 : 1)});
                diagonal = above;
            }
        }
        if (row.back() < best_distance)
        {
            best_distance = row.back();
            best = candidate;
        }
    }
    return best;
}

/// "unknown keyword 'x'; did you mean 'y'?" (`what`: keyword, key, option): an unknown name of
/// `table` with the closest known one, if any, as the user would write it (`spell`: the key as
/// written in that front end, e.g. flag_of for the command line).
template <class Table, class Spell>
std::string unknown_name_message(const std::string& what, const std::string& given, const Table& table, Spell&& spell)
{
    std::vector<std::string> names;
    for (const auto& option : table)
    {
        names.push_back(spell(std::string(option.name)));
    }
    const std::string closest = closest_name(given, names);
    return "unknown " + what + " '" + given + "'" + (closest.empty() ? "" : "; did you mean '" + closest + "'?");
}

/// The text of a configuration file (a regular file of at most max_config_bytes);
/// usage_error naming the file and the problem otherwise.
inline std::string read_config_file(const std::string& path, const std::string& label)
{
    if (path.find('\0') != std::string::npos)
    {
        throw usage_error(label + " '" + path.substr(0, path.find('\0'))
                          + "\\0...': holds a NUL character, which no path may hold");
    }
    try
    {
        return io::read_config_text(path, max_config_bytes);
    }
    catch (const io::input_error& e)
    {
        throw usage_error(label + " " + e.what());  // "model_config PATH: is a folder, ..."
    }
}

/// The one YAML document of `text` (a null node for an empty text); usage_error naming
/// `source` when it is not valid YAML or holds a second document ("---"), which would
/// otherwise be ignored without a word.
namespace detail
{
    /// Counts nothing but documents: what load_one_yaml_document needs to see a second one.
    struct yaml_document_counter : YAML::EventHandler
    {
        void OnDocumentStart(const YAML::Mark&) override {}
        void OnDocumentEnd() override {}
        void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
        void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
        void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
        void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override
        {
        }
        void OnSequenceEnd() override {}
        void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
        void OnMapEnd() override {}
    };
}  // namespace detail

inline YAML::Node load_one_yaml_document(const std::string& text, const std::string& source)
{
    // A NUL is no text (and yaml-cpp 0.7's document loop can run forever on one).
    if (text.find('\0') != std::string::npos)
    {
        throw usage_error(source + ": not valid YAML: it holds a NUL byte");
    }
    YAML::Node first;
    std::size_t documents = 0;
    try
    {
        first = YAML::Load(text);
        // The documents counted, up to a bound: never a loop without end.
        std::istringstream stream(text);
        YAML::Parser parser(stream);
        detail::yaml_document_counter counter;
        while (documents < 1000 && parser.HandleNextDocument(counter))
        {
            ++documents;
        }
    }
    catch (const YAML::Exception& e)
    {
        throw usage_error(source + ": not valid YAML: " + e.what());
    }
    if (documents > 1)
    {
        throw usage_error(source + ": holds " + std::to_string(documents) + (documents == 1000 ? " or more" : "")
                          + " YAML documents (separated by '---'); give one");
    }
    return first;
}

/// Applies a YAML document (a mapping of keys to scalars) to `config`; `source` names it in
/// messages ("my.yaml"). Unknown keys, repeated keys, lists and mappings where a scalar is
/// expected are usage errors.
template <class Config>
void apply_yaml(Config& config, const option_table<Config>& table, const std::string& text, const std::string& source)
{
    const YAML::Node root = load_one_yaml_document(text, source);
    if (!root.IsDefined() || root.IsNull())
    {
        return;  // an empty file sets nothing
    }
    if (!root.IsMap())
    {
        throw usage_error(source + ": expected a mapping of keys to values at the top level");
    }
    std::set<std::string> seen;
    for (const auto& entry : root)
    {
        if (!entry.first.IsScalar())
        {
            throw usage_error(source + ": a key is not a plain name");
        }
        const std::string name = entry.first.Scalar();
        const option_spec<Config>* option = find_option(table, name);
        const std::string label = source + ": " + name;
        if (option == nullptr)
        {
            throw usage_error(source + ": "
                              + unknown_name_message("key", name, table, [](const std::string& key) { return key; })
                              + " (see --help)");
        }
        if (!seen.insert(name).second)
        {
            throw usage_error(label + ": given twice");
        }
        const YAML::Node& value = entry.second;
        if (value.IsNull())
        {
            throw usage_error(label + ": missing value");
        }
        if (value.IsSequence() && option->takes_list)
        {
            std::string joined;
            for (const auto& item : value)
            {
                if (!item.IsScalar())
                {
                    throw usage_error(label + ": expected a list of numbers or ranges");
                }
                joined += (joined.empty() ? "" : ",") + item.Scalar();
            }
            if (joined.empty())
            {
                throw usage_error(label + ": empty list");
            }
            option->set(config, label, joined);
            continue;
        }
        if (!value.IsScalar())
        {
            throw usage_error(label + (option->takes_list ? ": expected a value or a list of values"
                                                          : ": expected a single value, not a list or mapping"));
        }
        option->set(config, label, value.Scalar());
    }
}

/// Parses the command line into `config`: --config FILE (when `with_config_file`) is applied
/// first, then the flags in order (a later flag overrides an earlier one). Returns false
/// when --help was asked for. Throws usage_error. `positional`: where arguments that are not
/// options go (all arguments after "--" too); null when the program takes none.
template <class Config>
bool parse_command_line(int argc, const char* const* argv, const option_table<Config>& table, Config& config,
                        bool with_config_file = true, std::vector<std::string>* positional = nullptr)
{
    std::string config_file;
    std::vector<std::pair<const option_spec<Config>*, std::pair<std::string, std::string>>> flags;
    bool options_ended = false;
    for (int i = 1; i < argc; ++i)
    {
        std::string arg = argv[i];
        if (!options_ended && (arg == "--help" || arg == "-h"))
        {
            return false;
        }
        if (positional != nullptr && (options_ended || arg.rfind("--", 0) != 0))
        {
            positional->push_back(arg);
            continue;
        }
        if (positional != nullptr && arg == "--")
        {
            options_ended = true;
            continue;
        }
        if (arg.rfind("--", 0) != 0)
        {
            throw usage_error("unexpected argument '" + arg + "' (options are --name VALUE; see --help)");
        }
        std::string value;
        bool has_value = false;
        const auto eq = arg.find('=');
        if (eq != std::string::npos)
        {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        const bool is_config = with_config_file && arg == "--config";
        const option_spec<Config>* option = is_config ? nullptr : find_flag(table, arg);
        if (!is_config && option == nullptr)
        {
            std::string hint;
            std::string dashed = arg;
            std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
            if (dashed != arg && (find_flag(table, dashed) != nullptr || (with_config_file && dashed == "--config")))
            {
                hint = " (did you mean " + dashed + "?)";
            }
            else
            {
                throw usage_error(unknown_name_message("option", arg, table,
                                                       [](const std::string& key) { return flag_of(key); })
                                  + " (see --help)");
            }
            throw usage_error("unknown option '" + arg + "'" + hint + " (see --help)");
        }
        if (!has_value)
        {
            if (i + 1 >= argc)
            {
                throw usage_error(arg + ": missing value");
            }
            value = argv[++i];
        }
        if (is_config)
        {
            if (trim(value).empty())
            {
                throw usage_error("--config: empty path");
            }
            config_file = value;
        }
        else
        {
            flags.push_back({option, {arg, value}});
        }
    }
    if (!config_file.empty())
    {
        apply_yaml(config, table, read_config_file(config_file, "--config"), config_file);
    }
    for (const auto& [option, flag] : flags)
    {
        option->set(config, flag.first, flag.second);
    }
    return true;
}

/// The option lines of --help: "  --flag VALUE   help   (key: name)".
template <class Config>
std::string options_help(const option_table<Config>& table, bool with_config_file = true)
{
    std::ostringstream out;
    if (with_config_file)
    {
        out << "  --config FILE                YAML file with any of the keys below; flags override it\n";
    }
    for (const auto& option : table)
    {
        std::string left = "  " + flag_of(option.name) + " " + option.metavar;
        left.resize(std::max<std::size_t>(left.size() + 1, 31), ' ');
        out << left << option.help;
        if (with_config_file)
        {
            out << "   (key: " << option.name << ")";
        }
        out << "\n";
    }
    out << "  --help                       this text\n";
    // Every program with this table answers --version (run/cli_util.hpp: asks_version).
    out << "  --version                    the program and the version of attention_plasticity\n";
    return out.str();
}

/// The usual setters.
/// The value of an on|off option: the one parser of every on|off option (usage_error otherwise).
inline bool parse_on_off(const std::string& label, const std::string& text)
{
    if (text != "on" && text != "off")
    {
        throw usage_error(label + ": '" + text + "' is not on or off");
    }
    return text == "on";
}

namespace set_option
{
    template <class Config>
    auto on_off(bool Config::*field)
    {
        return [field](Config& c, const std::string& label, const std::string& text) {
            c.*field = parse_on_off(label, text);
        };
    }

    template <class Config, class Field>
    auto unsigned_in(Field Config::*field, std::uint64_t min_value, std::uint64_t max_value)
    {
        return [field, min_value, max_value](Config& c, const std::string& label, const std::string& text) {
            c.*field = static_cast<Field>(parse_unsigned(label, text, min_value, max_value));
        };
    }

    template <class Config>
    auto path(std::string Config::*field)
    {
        return [field](Config& c, const std::string& label, const std::string& text) {
            if (trim(text).empty())
            {
                throw usage_error(label + ": empty value (expected a path)");
            }
            if (text.find('\0') != std::string::npos)
            {
                // The system would read the path up to the NUL: another folder than the one named.
                throw usage_error(label + ": '" + text.substr(0, text.find('\0'))
                                  + "\\0...' holds a NUL character, which no path may hold");
            }
            c.*field = text;
        };
    }
}  // namespace set_option
}  // namespace attention_plasticity::run

#endif
