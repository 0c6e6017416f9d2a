#ifndef AP_EXAMPLES_CONFIG_HPP
#define AP_EXAMPLES_CONFIG_HPP

// Configuration of ap_analyze: a YAML file (--config FILE) whose keys may each be given as a
// flag too (data_root -> --data-root); flags override the file. Defaults as SPEC §2.
// Unknown keys or flags and bad values are usage errors naming the key.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <attention_plasticity/pipeline.hpp>

#include "cli_util.hpp"

namespace ap_examples
{
struct analyze_config
{
    std::string data_root;
    std::optional<std::size_t> num_layers;   // inferred from data_root when not given
    std::optional<std::size_t> num_q_heads;
    std::optional<std::size_t> num_k_heads;
    attention_plasticity::head_options options;  // the SPEC §2 parameters, SPEC defaults
    std::string output_dir = ".";
    std::size_t threads = 0;  // 0: std::thread::hardware_concurrency()

    std::size_t layers() const { return *num_layers; }
    std::size_t q_heads() const { return *num_q_heads; }
    std::size_t k_heads() const { return *num_k_heads; }
    std::size_t group_size() const { return q_heads() / k_heads(); }
    std::size_t worker_threads() const
    {
        return threads > 0 ? threads : std::max<std::size_t>(1, std::thread::hardware_concurrency());
    }
};

namespace detail
{
    struct config_key
    {
        const char* name;
        const char* value;
        const char* help;
        std::function<void(analyze_config&, const std::string& label, const std::string& text)> set;
    };

    inline std::string non_empty(const std::string& label, const std::string& text)
    {
        if (trim(text).empty())
        {
            throw usage_error(label + ": empty value (expected a path)");
        }
        return text;
    }

    inline const std::vector<config_key>& config_keys()
    {
        static const std::vector<config_key> keys = {
            {"data_root", "DIR", "root of the dump: l{LL}h{HH}{q|k}/*.npy (required)",
             [](analyze_config& c, const std::string& l, const std::string& t) { c.data_root = non_empty(l, t); }},
            {"num_layers", "N", "layers to analyze, 0..N-1 [inferred from the data_root folders]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.num_layers = parse_unsigned(l, t, 1, 100000);
             }},
            {"num_q_heads", "N", "query heads per layer [inferred]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.num_q_heads = parse_unsigned(l, t, 1, 100000);
             }},
            {"num_k_heads", "N", "key heads per layer; divides num_q_heads (GQA) [inferred]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.num_k_heads = parse_unsigned(l, t, 1, 100000);
             }},
            {"max_tokens_per_head", "N", "subsample queries (keys) above this many [50000]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.options.max_tokens_per_head = parse_unsigned(l, t, 2, static_cast<std::uint64_t>(1) << 40);
             }},
            {"normality_max_dims", "N", "noise components with a KS test [64]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.options.normality_max_dims = parse_unsigned(l, t, 1, static_cast<std::uint64_t>(1) << 40);
             }},
            {"p_alpha", "X", "KS significance level, in [0, 1] [0.01]",
             [](analyze_config& c, const std::string& l, const std::string& t) { c.options.p_alpha = parse_real(l, t, 0.0, 1.0); }},
            {"seed", "N", "seed of subsampling, KS component choice and pair sampling [0]",
             [](analyze_config& c, const std::string& l, const std::string& t) { c.options.seed = parse_unsigned(l, t); }},
            {"num_pairs_per_bucket", "N", "key pairs per (query bucket, key bucket) cell [256]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.options.num_pairs_per_bucket = parse_unsigned(l, t, 1, static_cast<std::uint64_t>(1) << 32);
             }},
            {"max_rel_dist", "X", "pair window as a fraction of the example length, in [0, 1] [0.05]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.options.max_rel_dist = parse_real(l, t, 0.0, 1.0);
             }},
            {"output_dir", "DIR", "where the four CSVs are written (created if needed) [.]",
             [](analyze_config& c, const std::string& l, const std::string& t) { c.output_dir = non_empty(l, t); }},
            {"threads", "N", "worker threads, 0 = hardware concurrency [0]",
             [](analyze_config& c, const std::string& l, const std::string& t) {
                 c.threads = parse_unsigned(l, t, 0, 4096);
             }},
        };
        return keys;
    }

    inline std::string flag_of(const std::string& key)
    {
        std::string flag = "--" + key;
        for (char& ch : flag)
        {
            if (ch == '_')
            {
                ch = '-';
            }
        }
        return flag;
    }

    inline const config_key* find_key(const std::string& name)
    {
        for (const auto& key : config_keys())
        {
            if (name == key.name)
            {
                return &key;
            }
        }
        return nullptr;
    }

    inline const config_key* find_flag(const std::string& flag)
    {
        for (const auto& key : config_keys())
        {
            if (flag == flag_of(key.name))
            {
                return &key;
            }
        }
        return nullptr;
    }

    inline void load_yaml(analyze_config& config, const std::string& path)
    {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec))
        {
            throw usage_error("--config " + path + ": file not found");
        }
        YAML::Node root;
        try
        {
            root = YAML::LoadFile(path);
        }
        catch (const YAML::Exception& e)
        {
            throw usage_error(path + ": not valid YAML: " + e.what());
        }
        if (root.IsNull())
        {
            return;  // an empty file sets nothing
        }
        if (!root.IsMap())
        {
            throw usage_error(path + ": expected a mapping of keys to values at the top level");
        }
        for (const auto& entry : root)
        {
            if (!entry.first.IsScalar())
            {
                throw usage_error(path + ": a key is not a plain name");
            }
            const std::string name = entry.first.Scalar();
            const config_key* key = find_key(name);
            const std::string label = path + ": " + name;
            if (key == nullptr)
            {
                throw usage_error(path + ": unknown key '" + name + "' (see --help)");
            }
            if (entry.second.IsNull())
            {
                throw usage_error(label + ": missing value");
            }
            if (!entry.second.IsScalar())
            {
                throw usage_error(label + ": expected a single value, not a list or mapping");
            }
            key->set(config, label, entry.second.Scalar());
        }
    }

    /// num_layers / num_q_heads / num_k_heads from the folder names of data_root.
    inline void infer_shape(analyze_config& config)
    {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::is_directory(config.data_root, ec))
        {
            throw usage_error("data_root: folder '" + config.data_root + "' not found");
        }
        if (config.num_layers && config.num_q_heads && config.num_k_heads)
        {
            return;
        }
        const std::regex pattern("l([0-9]{2,})h([0-9]{2,})([qk])");
        std::size_t layers = 0, q_heads = 0, k_heads = 0;
        for (const auto& entry : fs::directory_iterator(config.data_root, ec))
        {
            std::smatch m;
            const std::string name = entry.path().filename().string();
            if (!std::regex_match(name, m, pattern) || !entry.is_directory(ec))
            {
                continue;
            }
            const std::size_t layer = std::stoul(m[1].str());
            const std::size_t head = std::stoul(m[2].str());
            layers = std::max(layers, layer + 1);
            (m[3].str() == "q" ? q_heads : k_heads) = std::max(m[3].str() == "q" ? q_heads : k_heads, head + 1);
        }
        if (layers == 0 || q_heads == 0 || k_heads == 0)
        {
            throw usage_error("data_root: no l{LL}h{HH}q and l{LL}h{HH}k folders in '" + config.data_root
                              + "' to infer the number of layers and heads from; give --num-layers, "
                                "--num-q-heads and --num-k-heads");
        }
        if (!config.num_layers)
        {
            config.num_layers = layers;
        }
        if (!config.num_q_heads)
        {
            config.num_q_heads = q_heads;
        }
        if (!config.num_k_heads)
        {
            config.num_k_heads = k_heads;
        }
    }
}  // namespace detail

inline std::string config_help(const char* program)
{
    std::ostringstream out;
    out << "usage: " << program << " [--config FILE] [options]\n\n"
        << "Measures the attention plasticity of every head of a qk dump (SPEC §1) and writes\n"
        << "head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv and\n"
        << "head_component_weights.csv into output_dir (SPEC §3).\n\n"
        << "  --config FILE                YAML file with any of the keys below; flags override it\n";
    for (const auto& key : detail::config_keys())
    {
        std::string left = "  " + detail::flag_of(key.name) + " " + key.value;
        left.resize(std::max<std::size_t>(left.size() + 1, 31), ' ');
        out << left << key.help << "   (key: " << key.name << ")\n";
    }
    out << "  --help                       this text\n\n"
        << "Exit status: 0 all heads analyzed, 1 some head failed (reported on stderr as\n"
        << "'error: layer L q_head H: FILE: reason'; its rows are left out) or the output could\n"
        << "not be written, 2 a usage or configuration error. Relative paths (also in the\n"
        << "--config file) are taken from the current directory.\n";
    return out.str();
}

/// Parses the command line (and the --config file). Returns nullopt for --help.
inline std::optional<analyze_config> parse_config(int argc, char** argv)
{
    std::string config_file;
    std::vector<std::pair<const detail::config_key*, std::pair<std::string, std::string>>> flags;
    for (int i = 1; i < argc; ++i)
    {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h")
        {
            return std::nullopt;
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
        const detail::config_key* key = arg == "--config" ? nullptr : detail::find_flag(arg);
        if (arg != "--config" && key == nullptr)
        {
            std::string hint;
            if (arg.find('_') != std::string::npos)
            {
                std::string dashed = arg;
                for (std::size_t k = 2; k < dashed.size(); ++k)
                {
                    dashed[k] = dashed[k] == '_' ? '-' : dashed[k];
                }
                if (detail::find_flag(dashed) != nullptr)
                {
                    hint = " (did you mean " + dashed + "?)";
                }
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
        if (key == nullptr)
        {
            if (trim(value).empty())
            {
                throw usage_error("--config: empty path");
            }
            config_file = value;
        }
        else
        {
            flags.push_back({key, {arg, value}});
        }
    }
    analyze_config config;
    if (!config_file.empty())
    {
        detail::load_yaml(config, config_file);
    }
    for (const auto& [key, flag] : flags)
    {
        key->set(config, flag.first, flag.second);
    }
    if (config.data_root.empty())
    {
        throw usage_error("data_root is required (--data-root DIR or 'data_root:' in the --config file)");
    }
    detail::infer_shape(config);
    if (config.q_heads() % config.k_heads() != 0)
    {
        throw usage_error("num_q_heads (" + std::to_string(config.q_heads()) + ") must be a multiple of num_k_heads ("
                          + std::to_string(config.k_heads()) + ")");
    }
    return config;
}
}  // namespace ap_examples

#endif
