// The per-head analysis (docs/method.md §2): the tokens of a head over the caller's arrays,
// the options, analyze_head and its result, with the rows of the CSVs of §3 formatted by the
// C++ programs' own csv_rows.hpp (so that columns added there reach Python unchanged).

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nanobind/stl/optional.h>

#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/run/analyze_config.hpp>

#include "common.hpp"
#include "head_bindings.hpp"

namespace ap_python
{
namespace run = attention_plasticity::run;
namespace io = attention_plasticity::io;

py_tokens::py_tokens(const array_like& vectors_, const array_like& position_, const array_like& bucket_,
                     nb::handle example_id_)
{
    constexpr const char* fn = "Tokens";
    vectors = float_array(vectors_.object, fn, "vectors", 2);
    position = int64_array(position_.object, fn, "position");
    bucket = int64_array(bucket_.object, fn, "bucket");
    if (!example_id_.is_none())
    {
        example_id = int64_array(example_id_, fn, "example_id");
    }
}

nb::dict csv_rows_of(const ap::head_result& result)
{
    const attention_plasticity::io::head_rows rows = attention_plasticity::io::format_head(result);
    nb::dict out;
    for (const auto& table : attention_plasticity::io::result_tables())
    {
        out[table_name(table.file).c_str()] = std::string(table.header) + "\n" + rows.*(table.rows);
    }
    return out;
}

std::string table_name(const std::string& file)
{
    const std::string suffix = ".csv";
    return file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0
               ? file.substr(0, file.size() - suffix.size())
               : file;
}

/// The text an option's value is read from: the table's setters parse text, as for the
/// command line and the --config file.
std::string option_text(const std::string& key, nb::handle value, bool takes_list)
{
    if (PyBool_Check(value.ptr()))
    {
        throw run::usage_error(key + ": expected a number, got a bool");
    }
    if (nb::isinstance<nb::str>(value))
    {
        return nb::cast<std::string>(value);
    }
    if (PyIndex_Check(value.ptr()))  // int, numpy integers
    {
        nb::object index = nb::steal(PyNumber_Index(value.ptr()));
        if (!index.is_valid())
        {
            throw nb::python_error();
        }
        return nb::cast<std::string>(nb::str(index));
    }
    if (PyFloat_Check(value.ptr()) || nb::hasattr(value, "__float__"))  // float, numpy floats
    {
        return nb::cast<std::string>(nb::repr(nb::float_(value)));  // shortest round-trip text
    }
    if (nb::hasattr(value, "__fspath__"))
    {
        return nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(value));
    }
    if (takes_list && (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)
                       || nb::hasattr(value, "__iter__")))
    {
        std::string joined;
        for (nb::handle item : value)
        {
            joined += (joined.empty() ? "" : ",") + option_text(key, item, false);
        }
        if (joined.empty())
        {
            throw run::usage_error(key + ": empty list");
        }
        return joined;
    }
    const nb::handle type(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())));
    throw run::usage_error(key + ": expected " + (takes_list ? "a value or a list of values" : "a single value")
                          + ", got " + nb::cast<std::string>(nb::str(type)));
}


namespace
{
    template <class T>
    ap::tokens_view<T> tokens_view_of(const py_tokens& t)
    {
        static const std::int64_t none = 0;
        array_arg ids = t.example_id;
        if (ids.data == nullptr)
        {
            ids.data = &none;
            ids.shape = {0};
        }
        return ap::tokens_view<T>{view<T, 2>(t.vectors), view<std::int64_t, 1>(t.position),
                                  view<std::int64_t, 1>(t.bucket), view<std::int64_t, 1>(ids)};
    }

    template <class F>
    decltype(auto) visit_tokens(const py_tokens& t, F&& f)
    {
        if (t.vectors.is_float32)
        {
            return f(tokens_view_of<float>(t));
        }
        return f(tokens_view_of<double>(t));
    }

    nb::dict data_addresses(const py_tokens& t)
    {
        nb::dict out;
        out["vectors"] = reinterpret_cast<std::uintptr_t>(t.vectors.data);
        out["position"] = reinterpret_cast<std::uintptr_t>(t.position.data);
        out["bucket"] = reinterpret_cast<std::uintptr_t>(t.bucket.data);
        if (t.example_id.data != nullptr)
        {
            out["example_id"] = reinterpret_cast<std::uintptr_t>(t.example_id.data);
        }
        return out;
    }

    nb::list converted_columns(const py_tokens& t)
    {
        nb::list out;
        const std::pair<const char*, const array_arg*> columns[] = {
            {"vectors", &t.vectors}, {"position", &t.position}, {"bucket", &t.bucket}, {"example_id", &t.example_id}};
        for (const auto& [name, column] : columns)
        {
            if (column->converted)
            {
                out.append(name);
            }
        }
        return out;
    }

    void bind_tokens(nb::module_& m)
    {
        nb::class_<py_tokens>(
            m, "Tokens",
            "One kind (queries or keys) of one head (docs/method.md §1): n vectors of dimension d with their\n"
            "position, bucket and example id columns, held by reference. vectors: a C-contiguous float32 or\n"
            "float64 array [n, d] (NumPy or a CPU torch tensor) is read in place, anything else is converted\n"
            "once (float16/bfloat16 to float32, others to float64); the columns: int64 [n] read in place,\n"
            "other integer dtypes converted once to int64. example_id may be None for queries. The arrays\n"
            "must not be modified while an analysis reads them.")
            .def(nb::init<const array_like&, const array_like&, const array_like&, nb::handle>(), "vectors"_a,
                 "position"_a, "bucket"_a, "example_id"_a = nb::none(),
                 "vectors [n, d] float; position, bucket, example_id [n] integers (see the class docstring).")
            .def_prop_ro("n", [](const py_tokens& t) { return t.vectors.shape[0]; }, "Rows (tokens).")
            .def_prop_ro("d", [](const py_tokens& t) { return t.vectors.shape[1]; }, "Vector dimension.")
            .def_prop_ro(
                "dtype", [](const py_tokens& t) { return t.vectors.is_float32 ? "float32" : "float64"; },
                "The value type the vectors are read in.")
            .def("converted_columns", &converted_columns,
                 "The columns that had to be converted (copied once) rather than read in place.")
            .def("data_addresses", &data_addresses,
                 "The address of the data each column is read from (for checking that nothing was copied).")
            .def("__repr__", [](const py_tokens& t) {
                return "Tokens(n=" + std::to_string(t.vectors.shape[0]) + ", d=" + std::to_string(t.vectors.shape[1])
                       + ", " + (t.vectors.is_float32 ? "float32" : "float64") + ")";
            });
    }

    /// Sets HeadOptions' option `key` from a Python value, by the option table's setter.
    void set_head_option(ap::head_options& options, const std::string& key, nb::handle value)
    {
        const auto& table = run::head_option_table();
        const auto* option = run::find_option(table, key);
        if (option == nullptr)
        {
            throw run::usage_error("HeadOptions: " + run::unknown_name_message("keyword", key, table,
                                                                             [](const std::string& k) { return k; }));
        }
        set_option_value(*option, options, key, value, "HeadOptions");
    }

    /// HeadOptions' constructor signature (keywords, their types and defaults), from the table.
    const std::string& options_signature()
    {
        static const std::string signature = [] {
            std::string sig = "def __init__(self, *";
            const nb::object defaults = nb::cast(ap::head_options{});
            for (const auto& option : run::head_option_table())
            {
                const char* type = std::visit(
                    [](const auto& value) {
                        using T = std::decay_t<decltype(value)>;
                        return std::is_same_v<T, bool>          ? "bool"
                               : std::is_same_v<T, double>      ? "float"
                               : std::is_same_v<T, std::string> ? "str"
                                                                : "int";
                    },
                    option.get(ap::head_options{}));
                sig += std::string(", ") + option.name + ": " + type + " = "
                       + nb::cast<std::string>(nb::repr(defaults.attr(option.name)));
            }
            return sig + ") -> None";
        }();
        return signature;
    }

    /// HeadOptions' property of `option`, typed as its field (int, float, bool or str), read through
    /// the table's getter, set through its setter, documented by its help with HeadOptions()'s
    /// default (head_options{}, the library's: not ap_analyze's, whose --help shows its own).
    template <class T>
    void option_property(nb::class_<ap::head_options>& cls, const run::head_option_spec& option)
    {
        static std::deque<std::string> docs;  // the docstrings, alive as long as the module
        docs.push_back(run::head_option_help(option, ap::head_options{}));
        cls.def_prop_rw(
            option.name, [get = option.get](const ap::head_options& o) { return std::get<T>(get(o)); },
            [key = option.name](ap::head_options& o, nb::handle value) { set_head_option(o, key, value); },
            docs.back().c_str());
    }

    void bind_options(nb::module_& m)
    {
        nb::class_<ap::head_options> cls(
            m, "HeadOptions",
            "The parameters of docs/method.md §2 (defaults as there), the head's sliding window and the\n"
            "extensions of §8 (defaults: the library's, where confidence_intervals is off; ap_analyze and\n"
            "analyze_dump turn it on: analyze_default_options()). Given by keyword, and checked (also when\n"
            "an attribute is set) by the same code and with the same messages as analyze_dump's keywords and\n"
            "ap_analyze's flags and --config keys (include/attention_plasticity/run/analyze_config.hpp): UsageError for an unknown\n"
            "keyword (with the closest name) or a value outside the option's domain.");
        // One property per entry of the option table (its field's type from its value).
        for (const run::head_option_spec& option : run::head_option_table())
        {
            std::visit(
                [&](const auto& value) { option_property<std::decay_t<decltype(value)>>(cls, option); },
                option.get(ap::head_options{}));
        }
        cls.def(
            "__init__",
            [](ap::head_options* self, nb::kwargs kwargs) {
                ap::head_options options;
                for (const auto& [key, value] : kwargs)
                {
                    if (!value.is_none())
                    {
                        set_head_option(options, nb::cast<std::string>(key), value);
                    }
                }
                new (self) ap::head_options(options);
            },
            nb::sig(options_signature().c_str()),
            "The options, by keyword (None: the default); defaults as docs/method.md §2 and §8. Each value\n"
            "is checked as ap_analyze checks its flag (UsageError naming the keyword).");
        cls.def("__repr__", [](nb::handle self) {
            std::string out = "HeadOptions(";
            bool first = true;
            for (const auto& option : run::head_option_table())
            {
                out += std::string(first ? "" : ", ") + option.name + "="
                       + nb::cast<std::string>(nb::repr(self.attr(option.name)));
                first = false;
            }
            return out + ")";
        });
    }

    void bind_result(nb::module_& m)
    {
        using hm = ap::head_metrics;
        nb::class_<hm>(m, "HeadMetrics",
                       "A row of head_metrics.csv (docs/method.md §3.2; units and ranges there). For every column\n"
                       "of the CSV, including any added later: HeadResult.to_dict(), or attention_plasticity.tables(results)\n"
                       "['head_metrics'] for many heads.")
            .def_ro("n_q_tokens", &hm::n_q_tokens, "Queries analyzed (after subsampling).")
            .def_ro("n_k_tokens", &hm::n_k_tokens, "Keys analyzed (after subsampling).")
            .def_ro("d_model", &hm::d_model, "Vector dimension d.")
            .def_ro("q_R2_pos", &hm::q_R2_pos, "Mean R2 of the position regression (§2.3).")
            .def_ro("q_beta_norm", &hm::q_beta_norm, "||beta|| (§2.3), vector units per token.")
            .def_ro("q_R2_scalar", &hm::q_R2_scalar, "R2 of log2(t + 1) on x . beta_hat (§2.4).")
            .def_ro("q_mae_baseline", &hm::q_mae_baseline, "§2.4, log2-position units.")
            .def_ro("q_mae_proj", &hm::q_mae_proj, "§2.4, log2-position units.")
            .def_ro("q_mae_ratio", &hm::q_mae_ratio, "q_mae_proj / q_mae_baseline (§2.4).")
            .def_ro("q_resid0_skew", &hm::q_resid0_skew, "§2.7.")
            .def_ro("q_resid0_kurt", &hm::q_resid0_kurt, "§2.7.")
            .def_ro("q_resid0_ks_p", &hm::q_resid0_ks_p, "§2.7.")
            .def_ro("q_noise_med_abs_skew", &hm::q_noise_med_abs_skew, "§2.8.")
            .def_ro("q_noise_med_abs_kurt", &hm::q_noise_med_abs_kurt, "§2.8.")
            .def_ro("q_noise_med_ks_p", &hm::q_noise_med_ks_p, "§2.8.")
            .def_ro("q_noise_frac_ks_p_lt_alpha", &hm::q_noise_frac_ks_p_lt_alpha, "§2.8.")
            .def_ro("ap_overall", &hm::ap_overall,
                    "Head-level attention plasticity (§2.14), in [0, 1]; NaN when no query bucket of at least\n"
                    "min_bucket_queries queries has a key pair.")
            .def_ro("ap_first20", &hm::ap_first20,
                    "The same over the buckets with tau_j < 0.2 C, C = largest query position + 1 (§2.14); NaN when\n"
                    "there is none (short contexts: the first bucket already starts past 0.2 C).")
            .def_ro("ap_last20", &hm::ap_last20,
                    "The same over the buckets with tau_j >= 0.8 C (§2.14); NaN when there is none (usual with\n"
                    "logarithmic buckets).")
            .def_ro("ap_drop", &hm::ap_drop, "ap_first20 - ap_last20 (§2.14); NaN when either is.")
            .def_ro("ap_empirical_overall", &hm::ap_empirical_overall,
                    "§2.14's aggregate of the empirical AP_j (§8.2); NaN when empirical_ap is off.")
            .def_ro("ap_empirical_overall_se", &hm::ap_empirical_overall_se,
                    "Its standard error over the query sample (§8.2-8.3); NaN unless both extensions are on.")
            .def_ro("ap_overall_se", &hm::ap_overall_se, "Standard error of ap_overall (§8.3); NaN when off.")
            .def_ro("ap_overall_bias", &hm::ap_overall_bias, "Estimated bias of ap_overall (§8.3); NaN when off.")
            .def_ro("ap_overall_ci_low", &hm::ap_overall_ci_low,
                    "Lower end of the interval of ap_overall at confidence_level (§8.3).")
            .def_ro("ap_overall_ci_high", &hm::ap_overall_ci_high,
                    "Upper end of the interval of ap_overall at confidence_level (§8.3).")
            .def_ro("ap_overall_corrected", &hm::ap_overall_corrected,
                    "ap_overall - ap_overall_bias: the bias-corrected estimate the interval is centred on (§8.3).")
            .def_ro("ap_first20_se", &hm::ap_first20_se, "Standard error of ap_first20 (§8.3).")
            .def_ro("ap_first20_bias", &hm::ap_first20_bias, "Estimated bias of ap_first20 (§8.3).")
            .def_ro("ap_last20_se", &hm::ap_last20_se, "Standard error of ap_last20 (§8.3).")
            .def_ro("ap_last20_bias", &hm::ap_last20_bias, "Estimated bias of ap_last20 (§8.3).")
            .def_ro("ap_drop_se", &hm::ap_drop_se,
                    "Standard error of ap_drop, with the covariance of its two terms (§8.3).")
            .def_ro("ap_drop_bias", &hm::ap_drop_bias, "Estimated bias of ap_drop (§8.3).")
            .def_ro("context_length", &hm::context_length,
                    "C of §2.14: the largest kept query position + 1 (ap_first20: tau_j < 0.2 C; ap_last20: >= 0.8 C).")
            .def_ro("n_sequences", &hm::n_sequences,
                    "The head's sequences (distinct example ids of its kept queries and keys) when the intervals are\n"
                    "on (§8.3); 0 otherwise.")
            .def_ro("n_documents", &hm::n_documents,
                    "The documents of those examples (the sequence unit of §8.3; = n_sequences when each example is\n"
                    "its own document) when the intervals are on; 0 otherwise.")
            .def_ro("bias_strength", &hm::bias_strength, "mu_Q^a alpha_K of the planar rotation model (§8.5).")
            .def_ro("bias_strength_se", &hm::bias_strength_se,
                    "Sequence-level standard error of bias_strength: the delete-one-sequence jackknife (§8.5, §8.3).")
            .def_ro("drift_slope_k", &hm::drift_slope_k, "alpha_K, the keys' slope along the drift direction (§8.5).")
            .def_ro("drift_query_mean", &hm::drift_query_mean, "mu_Q^a, the queries' mean on the drift direction (§8.5).")
            .def_ro("pc0_r_q", &hm::pc0_r_q, "r_q of the pooled PC0 (§8.5).")
            .def_ro("pc0_r_k", &hm::pc0_r_k, "r_k of the pooled PC0 (§8.5).")
            .def_prop_ro(
                "pca_class", [](const hm& m) { return std::string(ap::pca_class_name(m.pca_class)); },
                "The PCA class (§8.5): 'position_dominated', 'q_positional', 'content_focused', 'mixed' or 'nan'.");
        nb::class_<ap::bucket_profile>(m, "BucketProfile", "A row of head_profile.csv (docs/method.md §3.4).")
            .def_ro("q_bucket", &ap::bucket_profile::q_bucket, "j > 0.")
            .def_ro("tau", &ap::bucket_profile::tau, "tau_j (tokens).")
            .def_ro("n_queries", &ap::bucket_profile::n_queries, "n_j.")
            .def_ro("plasticity", &ap::bucket_profile::plasticity, "AP_j; NaN without pairs.")
            .def_ro("n_pairs", &ap::bucket_profile::n_pairs, "Pairs of all the cells of the bucket.")
            .def_ro("plasticity_empirical", &ap::bucket_profile::plasticity_empirical,
                    "The empirical AP_j (§8.2); NaN when off.")
            .def_ro("plasticity_empirical_se", &ap::bucket_profile::plasticity_empirical_se,
                    "Its standard error (§8.2-8.3); NaN unless both extensions are on.")
            .def_ro("plasticity_se", &ap::bucket_profile::plasticity_se, "Standard error of AP_j (§8.3).")
            .def_ro("plasticity_bias", &ap::bucket_profile::plasticity_bias, "Estimated bias of AP_j (§8.3).")
            .def_ro("plasticity_ci_low", &ap::bucket_profile::plasticity_ci_low, "Lower end of its interval (§8.3).")
            .def_ro("plasticity_ci_high", &ap::bucket_profile::plasticity_ci_high,
                    "Upper end of its interval (§8.3).")
            .def_ro("plasticity_corrected", &ap::bucket_profile::plasticity_corrected,
                    "plasticity - plasticity_bias: the bias-corrected AP_j its interval is centred on (§8.3).")
            .def_ro("small_bucket", &ap::bucket_profile::small_bucket,
                    "n_queries < min_bucket_queries: left out of the aggregates, no interval (§2.14).");
        nb::class_<ap::stage_timings>(m, "StageTimings", "Wall time of each stage of analyze_head, in seconds.")
            .def_ro("preparation", &ap::stage_timings::preparation,
                    "Checks, orientation, subsampling, query conversion (s).")
            .def_ro("regression", &ap::stage_timings::regression,
                    "Position regression, scalar predictability, query rotation (s).")
            .def_ro("rotation", &ap::stage_timings::rotation, "Key conversion and rotation (s).")
            .def_ro("normality", &ap::stage_timings::normality,
                    "Component-0 fit, first-component and noise summaries (s).")
            .def_ro("bucket_statistics", &ap::stage_timings::bucket_statistics, "Component weights, query models (s).")
            .def_ro("sampling", &ap::stage_timings::sampling, "Key buckets, eligible cells, pair sampling (s).")
            .def_ro("kernel", &ap::stage_timings::kernel, "Key differences, moments and plasticity, aggregates (s).")
            .def_ro("extensions", &ap::stage_timings::extensions,
                    "docs/method.md §8: distance map, empirical AP, intervals (s).")
            .def_ro("total", &ap::stage_timings::total, "The whole of analyze_head (s).");
        nb::class_<py_head_result>(m, "HeadResult",
                                   "Everything analyze_head computes for one head (docs/method.md §3).")
            .def_prop_ro(
                "id", [](const py_head_result& r) { return r.result.id; }, "The head (HeadId).")
            .def_prop_ro(
                "metrics", [](const py_head_result& r) { return r.result.metrics; }, "HeadMetrics.")
            .def_prop_ro(
                "cells", [](const py_head_result& r) { return r.result.cells; },
                "list of CellPlasticity (head_bucket_plasticity.csv), by q_bucket then k_bucket.")
            .def_prop_ro(
                "profile", [](const py_head_result& r) { return r.result.profile; },
                "list of BucketProfile (head_profile.csv), by q_bucket.")
            .def_prop_ro(
                "distance_map", [](const py_head_result& r) { return r.result.distance_map; },
                "list of DistancePlasticityBin (head_distance_plasticity.csv, docs/method.md §8.1); empty when\n"
                "distance_map is off.")
            .def_prop_ro(
                "component_r2",
                [](nb::handle s) { return field_view(nb::cast<py_head_result&>(s).result.component_r2, s); },
                "R2_d of the position regression (§2.3), float64 [d].")
            .def_prop_ro(
                "component_weight",
                [](nb::handle s) { return field_view(nb::cast<py_head_result&>(s).result.component_weight, s); },
                "w_d (§2.9), float64 [d].")
            .def_ro("timings", &py_head_result::timings, "StageTimings when asked for (timings=True), else None.")
            .def(
                "csv_rows", [](const py_head_result& r) { return csv_rows_of(r.result); },
                "The head's rows of each CSV of docs/method.md §3, formatted as ap_analyze writes them, with the\n"
                "header: {table name: text}.");

        m.def(
            "analyze_head",
            [](const py_tokens& queries, const py_tokens& keys, const ap::head_id& head,
               const ap::head_options& options, bool timings) {
                return without_gil([&] {
                    py_head_result out;
                    ap::stage_timings t;
                    out.result = visit_tokens(queries, [&](const auto& q) {
                        return visit_tokens(keys, [&](const auto& k) {
                            return ap::analyze_head(q, k, head, options, timings ? &t : nullptr);
                        });
                    });
                    if (timings)
                    {
                        out.timings = t;
                    }
                    return out;
                });
            },
            "queries"_a, "keys"_a, "head"_a = ap::head_id{}, "options"_a = ap::head_options{}, "timings"_a = false,
            "The attention plasticity of one head: all of docs/method.md §2 (orientation, subsampling, position\n"
            "regression, rotation, normality summaries, component weights, bucket query models, eligible cells,\n"
            "key pairs, pair plasticity, aggregates) on the head's queries and keys (Tokens, read in place;\n"
            "keys need example_id), for head `head` (HeadId: its layer and q_head seed the pair sampler) under\n"
            "`options` (HeadOptions, with the head's sliding window and the extensions of §8 it turns on:\n"
            "distance map, empirical AP, intervals). The same function as ap_analyze's, so the numbers are\n"
            "the same (ap_analyze's defaults differ from HeadOptions() in confidence_intervals, on there). The GIL is released; BLAS runs with set_blas_threads()'s count.\n"
            "timings=True also measures each stage (HeadResult.timings).\n"
            "Raises InvalidArgumentError for inconsistent shapes or options (fewer than 2 queries, no key,\n"
            "different d) and DomainError for a non-finite vector or a negative position (the first, named\n"
            "by row, queries before keys). Returns HeadResult.");
    }
}  // namespace

void bind_head(nb::module_& m)
{
    bind_tokens(m);
    bind_options(m);
    bind_result(m);
}

void bind_head_bench(nb::module_& bench)
{
    bench.def(
        "analyze_head_seconds",
        [](const py_tokens& queries, const py_tokens& keys, const ap::head_id& head, const ap::head_options& options,
           std::size_t repeats) {
            std::vector<double> seconds;
            double checksum = 0.0;
            without_gil([&] {
                for (std::size_t r = 0; r < repeats; ++r)
                {
                    const auto start = std::chrono::steady_clock::now();
                    const ap::head_result result = visit_tokens(queries, [&](const auto& q) {
                        return visit_tokens(keys, [&](const auto& k) { return ap::analyze_head(q, k, head, options); });
                    });
                    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
                    checksum = result.metrics.ap_overall;
                }
            });
            return nb::make_tuple(seconds, checksum);
        },
        "queries"_a, "keys"_a, "head"_a, "options"_a, "repeats"_a = 1,
        "The wall time of each of `repeats` calls of the C++ analyze_head on the same views,\n"
        "made from C++ (no Python in the loop), and the last ap_overall. benchmarks/bench_python.py compares\n"
        "it with ap.analyze_head called from Python.");
}
}  // namespace ap_python
