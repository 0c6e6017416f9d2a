#ifndef ATTENTION_PLASTICITY_RUN_COMPARE_CONFIG_HPP
#define ATTENTION_PLASTICITY_RUN_COMPARE_CONFIG_HPP

// The options of a comparison of result sets (docs/method.md §8.6): one table (config.hpp's
// machinery: flags, --config keys, --help), read by ap_compare and by the Python package's
// compare_runs, and the help of ap_compare.

#include <limits>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "compare_result_sets.hpp"
#include "config.hpp"
#include "errors.hpp"

namespace attention_plasticity::run
{
/// What ap_compare is asked: where to write, and what to compare how.
struct compare_config
{
    std::string output_dir;
    compare_options options;
};

inline const option_table<compare_config>& compare_option_table()
{
    static const option_table<compare_config> table = {
        {"output_dir", "DIR", "where the comparison's CSVs are written (created if needed; required)",
         set_option::path(&compare_config::output_dir)},
        {"names", "A,B,...", "the sets' names in the tables (default: the folders' names)",
         [](compare_config& c, const std::string& label, const std::string& text) {
             c.options.names.clear();
             std::size_t start = 0;
             while (true)
             {
                 const std::size_t comma = text.find(',', start);
                 c.options.names.push_back(trim(text.substr(start, comma == std::string::npos ? comma : comma - start)));
                 if (c.options.names.back().empty())
                 {
                     throw usage_error(label + ": an empty name in '" + text + "'");
                 }
                 if (comma == std::string::npos)
                 {
                     break;
                 }
                 start = comma + 1;
             }
         }},
        {"alpha", "A", "false discovery rate of the Benjamini-Hochberg selection, in (0, 1) [0.05]",
         [](compare_config& c, const std::string& label, const std::string& text) {
             // An open interval: parse_real's bounds are closed, so they are checked here.
             c.options.alpha = parse_real(label, text, -std::numeric_limits<double>::max(),
                                          std::numeric_limits<double>::max());
             if (!(c.options.alpha > 0.0 && c.options.alpha < 1.0))
             {
                 throw usage_error(label + ": " + trim(text) + " must be in (0, 1)");
             }
         }},
        {"common_heads", "on|off", "compare the heads common to every set instead of refusing [off]",
         [](compare_config& c, const std::string& label, const std::string& text) {
             c.options.common_heads = parse_on_off(label, text);
         }},
        {"same_dump", "on|off", "the sets analyzed the same dump under different options [off]",
         [](compare_config& c, const std::string& label, const std::string& text) {
             c.options.same_dump = parse_on_off(label, text);
         }},
        {"design", "auto|paired|unpaired",
         "auto: paired when the sets hold the same documents (equal document fingerprints in their examples.csv) "
         "and have their influences, else unpaired; paired: the sets analyzed the same texts (each with "
         "--sequence-influences on; refused when their fingerprints show other documents); unpaired: "
         "independent samples of texts (docs/method.md §8.6) [auto]",
         [](compare_config& c, const std::string& label, const std::string& text) {
             c.options.requested = parse_design(text, label);
             c.options.design = c.options.requested == design_choice::paired ? compare_design::paired
                                                                              : compare_design::unpaired;
         }},
    };
    return table;
}

inline std::string compare_help()
{
    return "usage: ap_compare --output-dir DIR SET_A SET_B [SET_C ...]\n\n"
           "Compares result sets of ap_analyze head by head, each with the next (A with B, B with C, ...):\n"
           "for ap_overall, ap_first20, ap_last20, ap_drop and each query bucket's AP_j, the bias-corrected\n"
           "difference, its standard error from the intervals (docs/method.md §8.3, §8.6), z, the two-sided\n"
           "p-value, Benjamini-Hochberg q-values and Holm's adjusted p-values across heads. Writes\n"
           "compare_heads.csv (a row per pair of sets, head and quantity), compare_changed.csv (the heads\n"
           "with a change at q <= alpha), compare_summary.csv (the mean change over heads, all layers and by\n"
           "layer) and compare_trajectory.csv (each set's means over heads, in the sets' order).\n"
           "The sets need their standard errors (confidence_intervals: on, ap_analyze's default), the standard\n"
           "errors of ap_first20, ap_last20 and ap_drop in head_metrics.csv (this version's ap_analyze) and the\n"
           "same heads.\n\n"
           "The errors are the analyses' own: by default sequence-level (the texts and the tokens drawn are\n"
           "samples; docs/method.md §8.3). A head's quantity \"changed\" when its Benjamini-Hochberg q-value\n"
           "is at most alpha: the difference is larger than that sampling explains, in a selection whose\n"
           "false discovery rate is alpha for independent heads. The design (--design, said in compare_heads.csv's column design\n"
           "and printed): auto (default), paired when the sets hold the same documents (equal\n"
           "document_fingerprint in their examples.csv, whatever their ids) and have their influences, else\n"
           "unpaired; unpaired, the sets are independent samples of texts (s = sqrt(s_A^2 + s_B^2));\n"
           "paired, the sets were analyzed on the same texts, and s is the spread of the per-document\n"
           "differences of the two sets' influences (head_sequence_influence.csv); refused when the\n"
           "fingerprints show other documents, by document id with a note for sets without them.\n"
           "The influence table is checked on reading (docs/method.md §8.6). With the influence tables,\n"
           "the model-level means over heads account for the heads sharing sequences; without them the\n"
           "heads are taken as independent (a note says so).\n\n"
           + options_help(compare_option_table(), false)
           + "\nExit status: 0 compared, 1 the results could not be written, 2 a usage error or sets that\n"
             "cannot be compared (nothing written).\n";
}
}  // namespace attention_plasticity::run

#endif  // ATTENTION_PLASTICITY_RUN_COMPARE_CONFIG_HPP
