#ifndef ATTENTION_PLASTICITY_RUN_ANALYZE_CONFIG_HPP
#define ATTENTION_PLASTICITY_RUN_ANALYZE_CONFIG_HPP

// The options of ap_analyze (and of the Python module's analyze_dump): one table, read from
// the command line and a YAML --config file by config.hpp. Defaults as docs/method.md §2.
// Every count is bounded here, before anything is sized by it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <attention_plasticity/pipeline.hpp>

#include "../io/csv_rows.hpp"
#include "cli_util.hpp"
#include "config.hpp"
#include "dump_layout.hpp"
#include "shard_plan.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

/// ap_analyze's defaults: the library's (docs/method.md §2), with the confidence intervals of
/// §8.3 on (they cost about one more kernel per head; the empirical AP of §8.2 stays opt-in).
inline attention_plasticity::head_options analyze_default_options()
{
    attention_plasticity::head_options options;
    options.confidence_intervals = true;
    return options;
}

struct analyze_config
{
    std::string data_root;
    layout_counts layout;      // unset counts come from model_config or metadata.json (never guessed)
    std::string model_config;  // the model's config.json ("" none)
    head_selection selection;  // --layers / --heads
    attention_plasticity::head_options options = analyze_default_options();  // docs/method.md §2 and §8
    std::string output_dir = ".";
    std::size_t threads = 0;  // 0: std::thread::hardware_concurrency()
    std::optional<shard_spec> shard;  // --shard I/N: this shard's heads only (docs/method.md §8.4)
    /// The text each option was last set from (key -> text), as the option table's setters
    /// record it: what a shard's manifest says of an option it has no canonical form for.
    std::map<std::string, std::string> given;
    /// How the front end names the options in the messages built for it (flags, or keywords).
    option_words words;
    /// Keep each analyzed head's result beside its rows (head_rows::result): the Python package's
    /// DataFrames are made from the numbers, not from the CSV text.
    bool keep_results = false;

    std::size_t worker_threads() const
    {
        return threads > 0 ? threads : std::max<std::size_t>(1, std::thread::hardware_concurrency());
    }
};

/// The largest thread count accepted.
inline constexpr std::size_t max_threads = 4096;

/// Integer in [INT64_MIN, INT64_MAX] (an optional '-' then digits).
inline std::int64_t parse_signed(const std::string& name, const std::string& raw)
{
    const std::string text = trim(raw);
    const bool negative = !text.empty() && text[0] == '-';
    const std::uint64_t magnitude =
        parse_unsigned(name, negative ? text.substr(1) : text, 0, std::uint64_t{1} << 63);
    if (!negative && magnitude > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    {
        throw usage_error(name + ": '" + raw + "' is out of range");
    }
    return negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
}

/// Where a head option is offered: the parameters of the method (docs/method.md §2) and the
/// extensions (§8) are ap_analyze's options too (two groups of its --help, and of the options a
/// shard's manifest records); the library's own are HeadOptions' only.
enum class head_option_group
{
    method,
    extension,
    library
};

/// A head option's value as its field holds it: a count, a signed integer, a real, on|off, or a
/// name (sampling_unit).
using head_option_value = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;

/// The canonical text of a head option's value: what a shard's manifest records (docs/method.md
/// §8.4) and the setters read back (integers in decimal, reals by io::format_number, on|off).
inline std::string head_option_text(const head_option_value& value)
{
    struct text_of
    {
        std::string operator()(std::uint64_t v) const { return std::to_string(v); }
        std::string operator()(std::int64_t v) const { return std::to_string(v); }
        std::string operator()(double v) const { return io::format_number(v); }
        std::string operator()(bool v) const { return v ? "on" : "off"; }
        std::string operator()(const std::string& v) const { return v; }
    };
    return std::visit(text_of{}, value);
}

/// One option of a head (a field of attention_plasticity::head_options): the option_spec every
/// front end sets it by (name, metavar, help, setter), its group, and how its value is read.
struct head_option_spec : option_spec<attention_plasticity::head_options>
{
    head_option_group group = head_option_group::method;
    /// The field's value (the member pointer is captured here, as in the setter).
    std::function<head_option_value(const attention_plasticity::head_options&)> get;
};

namespace detail
{
    inline const char* sampling_unit_name(attention_plasticity::sampling_unit unit)
    {
        return unit == attention_plasticity::sampling_unit::sequence ? "sequence" : "token";
    }

    template <class T>
    head_option_value head_option_value_of(const T& value)
    {
        if constexpr (std::is_same_v<T, bool>)
        {
            return value;
        }
        else if constexpr (std::is_same_v<T, attention_plasticity::sampling_unit>)
        {
            return std::string(sampling_unit_name(value));
        }
        else if constexpr (std::is_floating_point_v<T>)
        {
            return static_cast<double>(value);
        }
        else if constexpr (std::is_unsigned_v<T>)
        {
            return static_cast<std::uint64_t>(value);
        }
        else
        {
            return static_cast<std::int64_t>(value);
        }
    }

    /// The entry of head option `field`: `parse(label, text)` gives its value (or throws
    /// usage_error naming `label`).
    template <class T, class Parse>
    head_option_spec head_option(const char* name, const char* metavar, const char* help, head_option_group group,
                                 T attention_plasticity::head_options::*field, Parse parse)
    {
        head_option_spec spec;
        spec.name = name;
        spec.metavar = metavar;
        spec.help = help;
        spec.set = [field, parse](attention_plasticity::head_options& options, const std::string& label,
                                  const std::string& text) { options.*field = static_cast<T>(parse(label, text)); };
        spec.group = group;
        spec.get = [field](const attention_plasticity::head_options& options) {
            return head_option_value_of(options.*field);
        };
        return spec;
    }
}  // namespace detail

/// The options of one head (attention_plasticity::head_options, docs/method.md §2 and §8) with
/// their domains: the one check of every front end, and the one list of them. ap_analyze's flags
/// and --config keys and analyze_dump's keywords (analyze_options() below takes these entries),
/// the canonical values of a shard's manifest (result_options()), and the Python HeadOptions'
/// keywords, properties and their docstrings come from these entries, so the same value is
/// refused with the same message (naming the option as the user wrote it) everywhere. The help
/// texts state no default: head_option_help() appends the default of the front end that shows
/// it (ap_analyze's analyze_default_options(), HeadOptions()'s head_options{}), read from its
/// options by the entry's getter, so no default is typed twice. The library group is the
/// library's only.
inline const std::vector<head_option_spec>& head_option_table()
{
    using o = attention_plasticity::head_options;
    using detail::head_option;
    constexpr auto method = head_option_group::method;
    constexpr auto extension = head_option_group::extension;
    constexpr auto library = head_option_group::library;
    auto count_in = [](std::uint64_t min_value, std::uint64_t max_value) {
        return [=](const std::string& label, const std::string& text) {
            return parse_unsigned(label, text, min_value, max_value);
        };
    };
    auto real_in = [](double min_value, double max_value) {
        return [=](const std::string& label, const std::string& text) {
            return parse_real(label, text, min_value, max_value);
        };
    };
    static const std::vector<head_option_spec> table = {
        head_option("max_tokens_per_head", "N", "subsample queries (keys) above this many", method,
                    &o::max_tokens_per_head, count_in(2, std::uint64_t{1} << 40)),
        head_option("normality_max_dims", "N", "noise components with a KS test", method, &o::normality_max_dims,
                    count_in(1, std::uint64_t{1} << 40)),
        head_option("p_alpha", "X", "KS significance level, in [0, 1]", method, &o::p_alpha, real_in(0.0, 1.0)),
        head_option("seed", "N", "seed of subsampling, KS component choice and pair sampling", method, &o::seed,
                    count_in(0, std::numeric_limits<std::uint64_t>::max())),
        head_option("num_pairs_per_bucket", "N", "key pairs per (query bucket, key bucket) cell", method,
                    &o::num_pairs_per_bucket, count_in(1, std::uint64_t{1} << 32)),
        head_option("max_rel_dist", "X", "pair window as a fraction of the example length, in [0, 1]", method,
                    &o::max_rel_dist, real_in(0.0, 1.0)),
        head_option("min_bucket_queries", "N",
                    "query buckets with fewer queries are flagged (small_bucket) and left out of the aggregates and "
                    "intervals (§2.14)",
                    method, &o::min_bucket_queries, count_in(2, std::uint64_t{1} << 40)),
        head_option("distance_map", "on|off", "head_distance_plasticity.csv, PP by key and query distance (§8.1)",
                    extension, &o::distance_map, parse_on_off),
        head_option("distance_map_extra_pairs", "N", "extra pairs per cell for the distance map, own streams (§8.1)",
                    extension, &o::distance_map_extra_pairs, count_in(0, std::uint64_t{1} << 32)),
        head_option("distance_bins_per_octave", "N",
                    "bins of the distance map per doubling of distance, 1-1024 (§8.1)", extension,
                    &o::distance_bins_per_octave, count_in(1, attention_plasticity::max_bins_per_octave)),
        head_option("empirical_ap", "on|off",
                    "model-free AP from the actual queries, pairs x queries GEMMs (§8.2)", extension,
                    &o::empirical_ap, parse_on_off),
        head_option("empirical_max_queries", "N",
                    "queries per bucket for the empirical AP, seeded subsample; 0 = all (§8.2)", extension,
                    &o::empirical_max_queries, count_in(0, std::uint64_t{1} << 40)),
        head_option("confidence_intervals", "on|off",
                    "standard errors, bias and intervals of AP_j and ap_* (§8.3)", extension,
                    &o::confidence_intervals, parse_on_off),
        head_option("planar_rotation", "on|off",
                    "head_metrics.csv bias_strength, drift_slope_k, drift_query_mean (§8.5)", extension,
                    &o::planar_rotation, parse_on_off),
        head_option("pca_roles", "on|off",
                    "head_metrics.csv pc0_r_q, pc0_r_k, pca_class: a SYRK of the vectors (§8.5)", extension,
                    &o::pca_roles, parse_on_off),
        head_option("confidence_level", "X", "level of the intervals, in (0, 1) (§8.3)", extension,
                    &o::confidence_level,
                    [](const std::string& label, const std::string& text) {
                        const double level = parse_real(label, text, std::numeric_limits<double>::lowest(),
                                                        std::numeric_limits<double>::max());
                        if (!(level > 0.0 && level < 1.0))
                        {
                            throw usage_error(label + ": " + text + " is not strictly between 0 and 1");
                        }
                        return level;
                    }),
        head_option("sampling_unit", "sequence|token",
                    "what the standard errors take as independent draws: the sequences (example_id: their queries, "
                    "keys and pairs dependent) or the tokens (queries independent given position, keys fixed; for "
                    "synthetic data) (§8.3)",
                    extension, &o::sampling_unit,
                    [](const std::string& label, const std::string& text) {
                        if (text != "sequence" && text != "token")
                        {
                            throw usage_error(label + ": '" + text + "' is not sequence or token");
                        }
                        return text == "sequence" ? attention_plasticity::sampling_unit::sequence
                                                  : attention_plasticity::sampling_unit::token;
                    }),
        head_option("sequence_influences", "on|off",
                    "head_sequence_influence.csv: each sequence's influence on ap_* and AP_j, for paired comparisons "
                    "(§8.3, §8.6)",
                    extension, &o::sequence_influences, parse_on_off),
        head_option("covariance_epsilon", "X", "ridge added to the diagonal of Sigma_j (§2.10), finite, >= 0",
                    library, &o::covariance_epsilon, real_in(0.0, std::numeric_limits<double>::max())),
        head_option("sliding_window", "N", "the head's sliding window in tokens (§2.11); <= 0: none", library,
                    &o::sliding_window, parse_signed),
        head_option("threads", "N",
                    "threads for this one head, the calling thread included; 0 or 1: one; the results are identical "
                    "for any number (analyze_dump sets it when there are fewer heads than threads)",
                    library, &o::threads, count_in(0, max_threads)),
    };
    return table;
}

/// The help of head option `option` as a front end whose options start as `defaults` shows it:
/// its help text, then its default there in brackets ("... (§8.3) [on]"): canonically, but a
/// real in the fewest significant digits that read back as it ("0.05", not %.17g's
/// "0.050000000000000003").
inline std::string head_option_help(const head_option_spec& option, const attention_plasticity::head_options& defaults)
{
    const head_option_value value = option.get(defaults);
    std::string text = head_option_text(value);
    if (const double* real = std::get_if<double>(&value); real != nullptr && std::isfinite(*real))
    {
        for (int digits = 1; digits < 17; ++digits)
        {
            char buffer[32];
            std::snprintf(buffer, sizeof buffer, "%.*g", digits, *real);
            if (std::strtod(buffer, nullptr) == *real)
            {
                text = buffer;
                break;
            }
        }
    }
    return std::string(option.help) + " [" + text + "]";
}

inline const option_table<analyze_config>& analyze_options()
{
    using c = analyze_config;
    constexpr std::uint64_t max_count = max_layout_count;
    auto count = [](std::optional<std::size_t> layout_counts::*field) {
        return [field](c& config, const std::string& label, const std::string& text) {
            config.layout.*field = static_cast<std::size_t>(parse_unsigned(label, text, 1, max_count));
        };
    };
    // The options of head_option_table() in `group`, setting config.options; their help ends
    // with ap_analyze's default (kept here: option_spec holds the text by pointer).
    auto head_options = [](option_table<c>& table, head_option_group group) {
        static std::deque<std::string> helps;
        for (const head_option_spec& spec : head_option_table())
        {
            if (spec.group == group)
            {
                helps.push_back(head_option_help(spec, analyze_default_options()));
                table.push_back({spec.name, spec.metavar, helps.back().c_str(),
                                 [set = spec.set](c& config, const std::string& label, const std::string& text) {
                                     set(config.options, label, text);
                                 }});
            }
        }
    };
    static option_table<analyze_config> table = [&] {
        option_table<c> t = {
        {"data_root", "DIR", "root of the dump: its l{LL}h{HH}{q|k} folders (required)", set_option::path(&c::data_root)},
        {"num_layers", "N", "layers of the model [metadata.json, else the highest layer present + 1]",
         count(&layout_counts::num_layers)},
        {"num_q_heads", "N", "query heads per layer [--model-config or metadata.json; required otherwise]",
         count(&layout_counts::num_q_heads)},
        {"num_k_heads", "N", "key heads per layer; divides num_q_heads (GQA) [as num_q_heads]",
         count(&layout_counts::num_k_heads)},
        {"model_config", "PATH",
         "the model's config.json: num_q_heads, num_k_heads, num_layers from its num_attention_heads, "
         "num_key_value_heads, num_hidden_layers (or text_config's; n_head, n_layer, multi_query, num_kv_heads)",
         set_option::path(&c::model_config)},
        {"layers", "LIST", "layers to analyze, e.g. 0-3,7 [all]",
         [](c& config, const std::string& label, const std::string& text) {
             config.selection.layers = parse_index_set(label, text, max_count - 1);
             config.selection.layers_label = label;
         },
         true},
        {"heads", "LIST", "query heads to analyze, e.g. 0-3,7 [all]",
         [](c& config, const std::string& label, const std::string& text) {
             config.selection.q_heads = parse_index_set(label, text, max_count - 1);
             config.selection.heads_label = label;
         },
         true},
        };
        head_options(t, head_option_group::method);  // docs/method.md §2
        t.insert(t.end(), {
        {"output_dir", "DIR", "where the CSVs are written (created if needed) [.]", set_option::path(&c::output_dir)},
        {"threads", "N", "worker threads, 0 = hardware concurrency [0]", set_option::unsigned_in(&c::threads, 0, max_threads)},
        {"shard", "I/N",
         "analyze shard I of N only (0 <= I < N; in a Slurm array job $SLURM_ARRAY_TASK_ID/N): a share of the heads "
         "balanced by token count, with shard.json for ap_merge [all heads]",
         [](c& config, const std::string& label, const std::string& text) {
             config.shard = parse_shard_spec(label, text);
         }},
        });
        // The extensions of docs/method.md §8 (they add columns and files, never change the others).
        head_options(t, head_option_group::extension);
        return t;
    }();
    static const bool recording = [] {
        for (auto& option : table)
        {
            option.set = [set = option.set, key = std::string(option.name)](c& config, const std::string& label,
                                                                         const std::string& text) {
                set(config, label, text);
                config.given[key] = text;
            };
        }
        return true;
    }();
    (void)recording;
    return table;
}

/// Options that change no number of any head: where a run reads and writes, how many
/// threads, which shard. Every other option determines the results.
inline bool is_run_option(const std::string& key)
{
    // model_config gives the layout, which result_options() records as resolved.
    return key == "data_root" || key == "output_dir" || key == "threads" || key == "shard" || key == "model_config";
}

/// The options that determine a run's results, key -> canonical value, in the order of the
/// option table: what shards must share to be merged (docs/method.md §8.4). The layout is the
/// resolved one (whatever it came from); an option without a canonical form here is
/// compared by the text it was given ("(default)" when it was not).
inline std::vector<std::pair<std::string, std::string>> result_options(const analyze_config& config,
                                                                      const dump_layout& layout)
{
    const auto& o = config.options;
    auto set_text = [](const std::optional<index_set>& set) { return set ? set->text() : std::string("all"); };
    std::map<std::string, std::string> canonical = {
        {"num_layers", std::to_string(layout.num_layers)},
        {"num_q_heads", std::to_string(layout.num_q_heads)},
        {"num_k_heads", std::to_string(layout.num_k_heads)},
        {"layers", set_text(config.selection.layers)},
        {"heads", set_text(config.selection.q_heads)},
    };
    for (const head_option_spec& option : head_option_table())
    {
        if (option.group != head_option_group::library)
        {
            canonical.emplace(option.name, head_option_text(option.get(o)));
        }
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& option : analyze_options())
    {
        const std::string key = option.name;
        if (is_run_option(key))
        {
            continue;
        }
        const auto known = canonical.find(key);
        const auto given = config.given.find(key);
        out.emplace_back(key, known != canonical.end() ? known->second
                              : given != config.given.end() ? "given as '" + given->second + "'"
                                                            : std::string("(default)"));
    }
    // A library option only, but one that changes the numbers.
    out.emplace_back("covariance_epsilon",
                     head_option_text(find_option(head_option_table(), "covariance_epsilon")->get(o)));
    return out;
}

/// The --help text. `reads_parquet`: the front end also reads qk-sniffer's data.parquet
/// folders (the Python module's).
inline std::string analyze_help(const char* program, bool reads_parquet = false)
{
    std::ostringstream out;
    out << "usage: " << program << " --data-root DIR --output-dir DIR [--config FILE] [options]\n\n"
        << "Measures the attention plasticity of the heads of a qk dump (docs/method.md §1) and\n"
        << "writes head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv,\n"
        << "head_component_weights.csv and head_distance_plasticity.csv into output_dir\n"
        << "(docs/method.md §3, §8.1), as one set: a reader sees the whole earlier set or the whole\n"
        << "new one. Columns of an extension that is off (§8) are nan.\n\n"
        << "With --shard I/N it analyzes shard I of N only (docs/method.md §8.4) and writes, besides\n"
        << "its part of the CSVs, shard.json; ap_merge joins the N shard folders into the CSVs of one\n"
        << "run, byte for byte.\n\n"
        << (reads_parquet ? "Each head folder of data_root is read in qk-sniffer's Parquet layout when it holds\n"
                            "data.parquet (docs/method.md §1.2), else in the NPY layout (vector.npy, position.npy,\n"
                            "... §1.1).\n\n"
                          : "Each head folder of data_root holds the NPY files of docs/method.md §1.1 (vector.npy,\n"
                            "position.npy, bucket.npy, example_id.npy).\n\n")
        << "Heads that were not captured (no query folder) are not errors. The layout (num_layers,\n"
        << "num_q_heads, num_k_heads) comes from the options, the model's config.json (--model-config)\n"
        << "or data_root/" << dump_metadata_file << "; the head counts are never guessed from the folder\n"
        << "names (a capture may hold some heads only), num_layers alone may be (the highest layer).\n\n"
        << options_help(analyze_options()) << "\n"
        << "Exit status: 0 every present head analyzed, 1 some head failed (reported on stderr as\n"
        << "'error: layer L q_head H: FILE: reason'; its rows are left out) or the results could\n"
        << "not be written, 2 a usage or configuration error (nothing analyzed). A run in which no\n"
        << "head succeeded leaves earlier results alone. Relative paths (also in the --config\n"
        << "file) are taken from the current directory.\n";
    return out.str();
}

/// The checks of a whole configuration (after the file and the flags): usage_error.
inline void check_analyze_config(const analyze_config& config)
{
    if (config.data_root.empty())
    {
        throw usage_error("data_root is required (--data-root DIR or 'data_root:' in the --config file)");
    }
    const auto& counts = config.layout;
    if (counts.num_q_heads && counts.num_k_heads && *counts.num_q_heads % *counts.num_k_heads != 0)
    {
        throw usage_error("num_q_heads (" + std::to_string(*counts.num_q_heads)
                          + ", given) must be a multiple of num_k_heads (" + std::to_string(*counts.num_k_heads)
                          + ", given)");
    }
}

/// The configuration of a command line; nullopt for --help. Reads only the --config file;
/// the dump is looked at by dump_layout.hpp. Throws usage_error.
inline std::optional<analyze_config> parse_analyze_command_line(int argc, const char* const* argv)
{
    analyze_config config;
    if (!parse_command_line(argc, argv, analyze_options(), config))
    {
        return std::nullopt;
    }
    check_analyze_config(config);
    return config;
}
}  // namespace attention_plasticity::run

#endif
