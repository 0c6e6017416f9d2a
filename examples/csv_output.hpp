#ifndef AP_EXAMPLES_CSV_OUTPUT_HPP
#define AP_EXAMPLES_CSV_OUTPUT_HPP

// The four CSVs of SPEC §3. Rows of one head are formatted as soon as the head is done (in
// the worker), and the files are written once at the end, rows in (layer, q_head) order, so
// the bytes do not depend on the number of threads. Floats with 17 significant digits
// ("%.17g", round-trips a double), NaN as "nan". Each file is written whole: to a temporary
// file in output_dir, renamed over the target once all four are complete.

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <attention_plasticity/pipeline.hpp>

namespace ap_examples
{
inline const char* const metrics_header =
    "layer,q_head,k_head,n_q_tokens,n_k_tokens,d_model,q_R2_pos,q_beta_norm,q_R2_scalar,q_mae_baseline,"
    "q_mae_proj,q_mae_ratio,q_resid0_skew,q_resid0_kurt,q_resid0_ks_p,q_noise_med_abs_skew,"
    "q_noise_med_abs_kurt,q_noise_med_ks_p,q_noise_frac_ks_p_lt_alpha,ap_overall,ap_first20,ap_last20,ap_drop";
inline const char* const bucket_header = "layer,q_head,k_head,q_bucket,k_bucket,plasticity,n_pairs";
inline const char* const profile_header = "layer,q_head,k_head,q_bucket,tau,n_queries,plasticity,n_pairs";
inline const char* const component_header = "layer,q_head,k_head,component,component_r2,weight";

inline const char* const metrics_csv = "head_metrics.csv";
inline const char* const bucket_csv = "head_bucket_plasticity.csv";
inline const char* const profile_csv = "head_profile.csv";
inline const char* const component_csv = "head_component_weights.csv";

/// "%.17g"; NaN (of either sign) as "nan", infinities as "inf" / "-inf".
inline void append_double(std::string& out, double x)
{
    if (std::isnan(x))
    {
        out += "nan";
        return;
    }
    char buf[40];
    const int n = std::snprintf(buf, sizeof(buf), "%.17g", x);
    out.append(buf, static_cast<std::size_t>(n));
}

/// The rows of one head, one string per file, each row ending in '\n'.
struct head_rows
{
    std::string metrics;
    std::string buckets;
    std::string profile;
    std::string components;
};

inline head_rows format_head(const attention_plasticity::head_result& r)
{
    const auto& m = r.metrics;
    const std::string id =
        std::to_string(r.id.layer) + "," + std::to_string(r.id.q_head) + "," + std::to_string(r.id.k_head) + ",";
    head_rows rows;
    std::string& s = rows.metrics;
    s = id + std::to_string(m.n_q_tokens) + "," + std::to_string(m.n_k_tokens) + "," + std::to_string(m.d_model);
    for (double x : {m.q_R2_pos, m.q_beta_norm, m.q_R2_scalar, m.q_mae_baseline, m.q_mae_proj, m.q_mae_ratio,
                     m.q_resid0_skew, m.q_resid0_kurt, m.q_resid0_ks_p, m.q_noise_med_abs_skew,
                     m.q_noise_med_abs_kurt, m.q_noise_med_ks_p, m.q_noise_frac_ks_p_lt_alpha, m.ap_overall,
                     m.ap_first20, m.ap_last20, m.ap_drop})
    {
        s += ',';
        append_double(s, x);
    }
    s += '\n';
    for (const auto& cell : r.cells)
    {
        rows.buckets += id + std::to_string(cell.q_bucket) + "," + std::to_string(cell.k_bucket) + ",";
        append_double(rows.buckets, cell.plasticity);
        rows.buckets += "," + std::to_string(cell.n_pairs) + "\n";
    }
    for (const auto& b : r.profile)
    {
        rows.profile += id + std::to_string(b.q_bucket) + ",";
        append_double(rows.profile, b.tau);
        rows.profile += "," + std::to_string(b.n_queries) + ",";
        append_double(rows.profile, b.plasticity);
        rows.profile += "," + std::to_string(b.n_pairs) + "\n";
    }
    for (std::size_t c = 0; c < r.component_r2.size(); ++c)
    {
        rows.components += id + std::to_string(c) + ",";
        append_double(rows.components, r.component_r2(c));
        rows.components += ",";
        append_double(rows.components, r.component_weight(c));
        rows.components += "\n";
    }
    return rows;
}

/// Writes the four CSVs into output_dir (created if needed) with the rows of the given heads
/// in the given order (nullptr entries: failed heads, no rows). Throws std::runtime_error
/// naming the file on failure; then no target file has been replaced by a partial one.
inline void write_results(const std::string& output_dir, const std::vector<const head_rows*>& heads)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(output_dir, ec);
    if (ec && !fs::is_directory(output_dir))
    {
        throw std::runtime_error(output_dir + ": cannot create the output folder: " + ec.message());
    }
    struct file_spec
    {
        const char* name;
        const char* header;
        std::string head_rows::*member;
    };
    const file_spec files[] = {{metrics_csv, metrics_header, &head_rows::metrics},
                               {bucket_csv, bucket_header, &head_rows::buckets},
                               {profile_csv, profile_header, &head_rows::profile},
                               {component_csv, component_header, &head_rows::components}};
    std::vector<fs::path> temps;
    auto cleanup = [&] {
        for (const auto& t : temps)
        {
            std::error_code ignored;
            fs::remove(t, ignored);
        }
    };
    try
    {
        for (const auto& f : files)
        {
            const fs::path tmp = fs::path(output_dir) / ("." + std::string(f.name) + ".tmp." + std::to_string(::getpid()));
            temps.push_back(tmp);
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out)
            {
                throw std::runtime_error(tmp.string() + ": cannot create: " + std::strerror(errno));
            }
            out << f.header << '\n';
            for (const head_rows* h : heads)
            {
                if (h != nullptr)
                {
                    out << h->*(f.member);
                }
            }
            out.flush();
            out.close();
            if (!out)
            {
                throw std::runtime_error(tmp.string() + ": write failed");
            }
        }
        for (std::size_t i = 0; i < temps.size(); ++i)
        {
            const fs::path target = fs::path(output_dir) / files[i].name;
            fs::rename(temps[i], target, ec);
            if (ec)
            {
                throw std::runtime_error(target.string() + ": cannot replace: " + ec.message());
            }
        }
    }
    catch (...)
    {
        cleanup();
        throw;
    }
}
}  // namespace ap_examples

#endif
