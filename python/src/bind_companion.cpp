// The companion measures of docs/method.md §8.5 (planar_rotation, pca_roles) and the comparison
// of result sets of §8.6 (compare_runs: the C++ of include/attention_plasticity/run/compare_run.hpp, as ap_compare;
// a result object's tables compared in memory, as columns).

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <attention_plasticity/pca_roles.hpp>
#include <attention_plasticity/planar_rotation.hpp>
#include <attention_plasticity/student_t.hpp>
#include <nanobind/stl/optional.h>

#include <attention_plasticity/run/compare_config.hpp>
#include <attention_plasticity/run/compare_run.hpp>

#include "columns.hpp"
#include "common.hpp"
#include "head_bindings.hpp"

namespace ap_python
{
namespace
{
    const char* const companion_note =
        "\n\nqueries (n_q x d) and keys (n_k x d): float32/float64, read in place when C-contiguous; "
        "query_positions (n_q) and key_positions (n_k): any real or integer array (converted to float64).";

    /// f(Q, TQ, K, TK) over views of the arguments (the vectors float or double each).
    template <class F>
    auto with_qk(const char* fn, const array_like& queries, const array_like& query_positions, const array_like& keys,
                 const array_like& key_positions, F&& f)
    {
        const array_arg q = float_array(queries.object, fn, "queries", 2);
        const array_arg k = float_array(keys.object, fn, "keys", 2);
        const array_arg tq = double_array(query_positions.object, fn, "query_positions");
        const array_arg tk = double_array(key_positions.object, fn, "key_positions");
        return without_gil([&] {
            return visit_float<2>(q, [&](const auto& Q) {
                return visit_float<2>(k, [&](const auto& K) { return f(Q, view<double, 1>(tq), K, view<double, 1>(tk)); });
            });
        });
    }

    void bind_planar_rotation(nb::module_& m)
    {
        using pr = ap::planar_rotation_result;
        nb::class_<pr>(m, "PlanarRotation",
                       "The planar rotation model of a head (docs/method.md §8.5); NaN where undefined.")
            .def_prop_ro(
                "drift_direction", [](nb::handle s) { return field_view(nb::cast<pr&>(s).drift_direction, s); },
                "a = Cov(x, t) / ||Cov(x, t)|| over the pooled queries and keys, float64 [d], unit.")
            .def_prop_ro(
                "separation_direction",
                [](nb::handle s) { return field_view(nb::cast<pr&>(s).separation_direction, s); },
                "b: mu_Q - mu_K without its part along a, normalized, float64 [d].")
            .def_ro("drift_slope_k", &pr::drift_slope_k, "alpha_K: OLS slope of k.a on position (vector units per token).")
            .def_ro("drift_slope_q", &pr::drift_slope_q, "alpha_Q: OLS slope of q.a on position.")
            .def_ro("drift_query_mean", &pr::drift_query_mean, "mu_Q^a: the mean of q.a (vector units).")
            .def_ro("drift_key_mean", &pr::drift_key_mean, "mu_K^a: the mean of k.a.")
            .def_ro("drift_r_q", &pr::drift_r_q, "Pearson r of q.a with position.")
            .def_ro("drift_r_k", &pr::drift_r_k, "Pearson r of k.a with position.")
            .def_ro("separation", &pr::separation, "(mu_Q - mu_K) . b.")
            .def_ro("bias_strength", &pr::bias_strength, "mu_Q^a alpha_K (head_metrics.csv bias_strength).");
        m.def(
            "planar_rotation",
            [](const array_like& queries, const array_like& query_positions, const array_like& keys,
               const array_like& key_positions) {
                return with_qk("planar_rotation", queries, query_positions, keys, key_positions,
                               [](const auto& Q, const auto& TQ, const auto& K, const auto& TK) {
                                   return ap::planar_rotation(Q, TQ, K, TK);
                               });
            },
            "queries"_a, "query_positions"_a, "keys"_a, "key_positions"_a,
            (std::string("The planar rotation model of docs/method.md §8.5: the drift direction a, the separation\n"
                         "direction b, the drift slopes, the query centroid on a and bias_strength = mu_Q^a alpha_K.\n"
                         "Returns PlanarRotation.")
             + companion_note)
                .c_str());
    }

    void bind_pca_roles(nb::module_& m)
    {
        using r = ap::pca_roles_result;
        nb::class_<r>(m, "PcaRoles", "The PCA roles of a head (docs/method.md §8.5).")
            .def_prop_ro(
                "component", [](nb::handle s) { return field_view(nb::cast<r&>(s).component, s); },
                "PC0 of the pooled queries and keys, float64 [d], unit, sign-canonicalized.")
            .def_ro("explained_variance_ratio", &r::explained_variance_ratio, "lambda_0 / trace of the covariance.")
            .def_ro("r_q", &r::r_q, "Pearson r of the queries' projections on PC0 with position (pc0_r_q).")
            .def_ro("r_k", &r::r_k, "Pearson r of the keys' projections on PC0 with position (pc0_r_k).")
            .def_prop_ro(
                "pca_class", [](const r& x) { return std::string(ap::pca_class_name(x.role)); },
                "'position_dominated', 'q_positional', 'content_focused', 'mixed', or 'nan' (head_metrics.csv "
                "pca_class).");
        m.def(
            "pca_roles",
            [](const array_like& queries, const array_like& query_positions, const array_like& keys,
               const array_like& key_positions) {
                return with_qk("pca_roles", queries, query_positions, keys, key_positions,
                               [](const auto& Q, const auto& TQ, const auto& K, const auto& TK) {
                                   return ap::pca_roles(Q, TQ, K, TK);
                               });
            },
            "queries"_a, "query_positions"_a, "keys"_a, "key_positions"_a,
            (std::string("The PCA roles of docs/method.md §8.5: PC0 of the pooled queries and keys, the correlations\n"
                         "r_q, r_k of each kind's projections with position (the larger in magnitude positive) and the\n"
                         "class by the thresholds 0.7 and 0.3. Returns PcaRoles.")
             + companion_note)
                .c_str());
    }

    namespace compare_detail = attention_plasticity::run::compare_detail;

    /// A table of a result object ({column: float64 or int64 array, or list of str}) as the
    /// comparison reads it (run/compare_input.hpp's column_table), the arrays copied.
    compare_detail::column_table compare_table(const std::string& label, const nb::dict& columns)
    {
        compare_detail::column_table table(label);
        for (const auto& [key, value] : columns)
        {
            const std::string name = nb::cast<std::string>(key);
            if (nb::isinstance<nb::list>(value))
            {
                table.add(name, nb::cast<std::vector<std::string>>(value));
                continue;
            }
            const array_arg a = real_array(value, "compare_runs", name.c_str());
            const std::size_t n = a.size();
            if (is_int64(a))
            {
                const auto* data = static_cast<const std::int64_t*>(a.data);
                table.add(name, std::vector<std::int64_t>(data, data + n));
            }
            else
            {
                const auto* data = static_cast<const double*>(a.data);
                table.add(name, std::vector<double>(data, data + n));
            }
        }
        return table;
    }

    /// The tables of a result object (head_metrics, head_profile and, when it has it,
    /// head_sequence_influence), held for the comparison to load (labelled `label`).
    struct held_set
    {
        std::string label;
        compare_detail::column_table metrics, profile;
        std::optional<compare_detail::column_table> influences;
        std::optional<std::string> examples_csv;  // the text of its examples.csv (§8.6: pairing checked)

        compare_detail::loaded_set load(const std::string& name) const
        {
            return compare_detail::load_set(metrics, profile, influences ? &*influences : nullptr, label, name,
                                            examples_csv ? &*examples_csv : nullptr);
        }
    };

    void bind_compare(nb::module_& m)
    {
        namespace run = attention_plasticity::run;
        m.def(
            "_compare_options",
            [] {
                nb::list out;
                for (const auto& option : run::compare_option_table())
                {
                    out.append(nb::make_tuple(option.name, run::flag_of(option.name), option.metavar, option.help));
                }
                return out;
            },
            "The options of ap_compare (one table for the command line and compare_runs): a list of\n"
            "(key, flag, metavar, help); the help ends with the default in brackets.");
        m.def(
            "_t_half_widths",
            [](const array_like& se, const array_like& df, double alpha) {
                constexpr const char* fn = "_t_half_widths";
                const xt::xtensor<double, 1> s = copy_vector(float_array(se.object, fn, "se", 1));
                const xt::xtensor<double, 1> f = copy_vector(float_array(df.object, fn, "df", 1));
                if (s.size() != f.size())
                {
                    throw_invalid(fn, "se has " + std::to_string(s.size()) + " values and df " +
                                          std::to_string(f.size()) + "; expected as many");
                }
                if (!(alpha > 0.0 && alpha < 1.0))
                {
                    throw_invalid(fn, "alpha is " + std::to_string(alpha) + "; expected a number in (0, 1)");
                }
                // Each distinct df's quantile once (a comparison's rows share a few df values).
                std::map<double, double> quantile;
                std::vector<double> out(s.size());
                for (std::size_t i = 0; i < s.size(); ++i)
                {
                    if (std::isnan(f(i)))
                    {
                        out[i] = std::numeric_limits<double>::quiet_NaN();
                        continue;
                    }
                    auto [at, fresh] = quantile.try_emplace(f(i), 0.0);
                    if (fresh)
                    {
                        at->second = ap::student_t_two_sided_quantile(alpha, f(i));
                    }
                    out[i] = at->second * s(i);
                }
                return vector_to_numpy(std::move(out));
            },
            "se"_a, "df"_a, "alpha"_a,
            "The half-widths t_{1 - alpha/2, df} se of the 1 - alpha intervals of Student's t law\n"
            "(student_t.hpp; df +inf: the normal law; NaN for df <= 0 or NaN), float64 [n]: the report's\n"
            "per-bucket intervals of compare_heads.csv (docs/method.md §8.6).");
        m.def(
            "_compare_result_sets",
            [](const std::vector<std::string>& folders, const std::vector<std::string>& names, const nb::dict& options,
               const std::optional<std::string>& output_dir, const std::optional<nb::list>& held_tables) {
                // The options through ap_compare's table (compare_config.hpp): its checks and messages.
                run::compare_config config;
                const auto& table = run::compare_option_table();
                for (const auto& [key_object, value] : options)
                {
                    const std::string key = nb::cast<std::string>(key_object);
                    const auto* option = run::find_option(table, key);
                    if (option == nullptr || key == "output_dir" || key == "names")
                    {
                        throw run::usage_error("compare_runs: "
                                               + run::unknown_name_message("keyword", key, table,
                                                                           [](const std::string& name) { return name; }));
                    }
                    set_option_value(*option, config, key, value, "compare_runs");
                }
                config.options.folders = folders;
                config.options.names = names;  // a list: a name is never split at a comma
                // The result objects' tables, compared as they are held (folders[i] labels set i):
                // converted here (the GIL held), loaded and checked when the comparison reaches them.
                std::vector<std::optional<held_set>> held(folders.size());
                if (held_tables)
                {
                    for (std::size_t i = 0; i < folders.size() && i < held_tables->size(); ++i)
                    {
                        const nb::handle entry = (*held_tables)[i];
                        if (entry.is_none())
                        {
                            continue;
                        }
                        const nb::dict t = nb::cast<nb::dict>(entry);
                        const std::string& label = folders[i];
                        held[i] = held_set{label, compare_table(label + ": head_metrics", nb::cast<nb::dict>(t["head_metrics"])),
                                           compare_table(label + ": head_profile", nb::cast<nb::dict>(t["head_profile"])),
                                           std::nullopt, std::nullopt};
                        if (t.contains("examples_csv"))
                        {
                            held[i]->examples_csv = nb::cast<std::string>(t["examples_csv"]);
                        }
                        if (t.contains("head_sequence_influence"))
                        {
                            held[i]->influences = compare_table(label + ": head_sequence_influence",
                                                                nb::cast<nb::dict>(t["head_sequence_influence"]));
                        }
                    }
                }
                std::vector<run::set_loader> given(folders.size());
                for (std::size_t i = 0; i < folders.size(); ++i)
                {
                    if (held[i])
                    {
                        given[i] = [set = &*held[i]](const std::string& name) { return set->load(name); };
                    }
                }
                std::vector<std::string> notes;
                std::optional<run::compare_run> compared;
                without_gil([&] {
                    compared.emplace(config.options, output_dir, given);
                    notes = compared->notes();
                    compared->commit();
                });
                const run::compare_result& result = compared->result();
                // The tables as columns (the values the CSVs are written from), not their text.
                std::vector<table_values> columns;
                run::for_each_compare_table(result.tables, [&](const char* file, const auto& list, const auto& rows) {
                    const std::string name(file);
                    columns.push_back(collect_columns(name.substr(0, name.size() - 4), list, rows));
                });
                nb::dict tables;
                for (table_values& t : columns)
                {
                    tables[t.name.c_str()] = columns_dict(t);
                }
                return nb::make_tuple(tables, notes, result.compared_heads, result.changed_heads);
            },
            "folders"_a, "names"_a, "options"_a, "output_dir"_a = nb::none(), "tables"_a = nb::none(),
            "The comparison of result sets of docs/method.md §8.6 (include/attention_plasticity/run/compare_run.hpp, as\n"
            "ap_compare; `options`: {key: value} of _compare_options(); `tables`: per set, None (read folders[i]) or\n"
            "the tables of a result object held in memory, {table name: {column: float64/int64 array or list of\n"
            "str}} with head_metrics, head_profile and optionally head_sequence_influence, folders[i] labelling it):\n"
            "({table name: {column: array or list of str}}, notes, compared heads, head changes), the tables written\n"
            "into output_dir as one result set when given. Use attention_plasticity.compare_runs.");
    }
}  // namespace

void bind_companion(nb::module_& m)
{
    bind_planar_rotation(m);
    bind_pca_roles(m);
    bind_compare(m);
}
}  // namespace ap_python
