// The companion measures of docs/method.md §8.5 (planar_rotation, pca_roles) and the comparison
// of result sets of §8.6 (compare_runs: the C++ of include/attention_plasticity/run/compare_runs.hpp, as ap_compare).

#include <optional>
#include <string>
#include <vector>

#include <attention_plasticity/pca_roles.hpp>
#include <attention_plasticity/planar_rotation.hpp>
#include <nanobind/stl/optional.h>

#include <attention_plasticity/run/compare_runs.hpp>
#include <attention_plasticity/run/result_set.hpp>

#include "columns.hpp"
#include "common.hpp"

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

    void bind_compare(nb::module_& m)
    {
        using attention_plasticity::run::for_each_compare_table;
        m.def(
            "_compare_result_sets",
            [](const std::vector<std::string>& folders, const std::vector<std::string>& names, double alpha,
               bool common_heads, bool same_dump, const std::string& design,
               const std::optional<std::string>& output_dir) {
                attention_plasticity::run::compare_options options;
                options.folders = folders;
                options.names = names;
                options.alpha = alpha;
                options.common_heads = common_heads;
                options.same_dump = same_dump;
                options.design = attention_plasticity::run::parse_design(design, "compare_runs: design");
                std::vector<std::string> notes;
                const attention_plasticity::run::compare_result result = without_gil([&] {
                    if (output_dir)
                    {
                        attention_plasticity::run::check_output_folder(options, *output_dir);
                    }
                    attention_plasticity::run::compare_result r = attention_plasticity::run::compare_result_sets(options);
                    if (output_dir)
                    {
                        attention_plasticity::run::result_set_writer writer(*output_dir, r.names);
                        notes = writer.notes();
                        writer.commit(attention_plasticity::run::compare_files(r));
                    }
                    return r;
                });
                // The tables as columns (the values the CSVs are written from), not their text.
                std::vector<table_values> columns;
                for_each_compare_table(result.tables, [&](const char* file, const auto& list, const auto& rows) {
                    const std::string name(file);
                    columns.push_back(collect_columns(name.substr(0, name.size() - 4), list, rows));
                });
                nb::dict tables;
                for (table_values& t : columns)
                {
                    tables[t.name.c_str()] = columns_dict(t);
                }
                notes.insert(notes.end(), result.notes.begin(), result.notes.end());
                return nb::make_tuple(tables, notes, result.compared_heads, result.changed_heads);
            },
            "folders"_a, "names"_a, "alpha"_a, "common_heads"_a, "same_dump"_a, "design"_a, "output_dir"_a = nb::none(),
            "The comparison of result sets of docs/method.md §8.6 (include/attention_plasticity/run/compare_runs.hpp, as ap_compare):\n"
            "({table name: {column: array or list of str}}, notes, compared heads, head changes), the tables written into output_dir\n"
            "as one result set when given. Use attention_plasticity.compare_runs.");
    }
}  // namespace

void bind_companion(nb::module_& m)
{
    bind_planar_rotation(m);
    bind_pca_roles(m);
    bind_compare(m);
}
}  // namespace ap_python
