#ifndef AP_EXAMPLES_SHARD_PLAN_HPP
#define AP_EXAMPLES_SHARD_PLAN_HPP

// Splitting a run's heads into shards (docs/method.md §8.4): `ap_analyze --shard I/N`
// analyzes the heads of shard I, which depend only on the dump, the options that select the
// heads and on N, never on timing or thread counts, so that every array task computes the
// same split on its own.
//
// The rule: a head weighs the tokens it analyzes, min(n_q, cap) + min(n_k, cap), with n_q and
// n_k the rows of its query and key vector.npy as their NPY headers announce (no payload is
// read) and cap = max_tokens_per_head; a head whose header cannot be read weighs 0 (it fails
// in its shard like in any run). Heads in decreasing weight (ties in (layer, q_head) order)
// go one by one to the shard with the least weight so far (ties to the lowest index): the
// greedy longest-processing-time rule. A head's result does not depend on its shard.
//
// The dump's fingerprint, which ap_merge compares between shards, is a hash of the run's
// head list and, for the query and key vector.npy of each head, of the file's size and its
// first 4 KiB (header and first values): a cheap check that every shard read the same dump.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cli_util.hpp"
#include "dump_layout.hpp"
#include "npy_reader.hpp"

namespace ap_examples
{
/// Shard `index` of `count` (0 <= index < count).
struct shard_spec
{
    std::size_t index = 0;
    std::size_t count = 1;

    /// "I/N", as --shard takes it.
    std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

/// The largest number of shards (Slurm's MaxArraySize is 1001 by default).
inline constexpr std::size_t max_shards = 100000;

/// Parses "I/N" (Slurm: "$SLURM_ARRAY_TASK_ID/N"); usage_error naming the option otherwise.
inline shard_spec parse_shard_spec(const std::string& label, const std::string& raw)
{
    const std::string text = trim(raw);
    const std::size_t slash = text.find('/');
    if (text.empty() || slash == std::string::npos)
    {
        throw usage_error(label + ": '" + raw + "' is not I/N (shard I of N, 0 <= I < N; e.g. --shard 3/8, or "
                                                "--shard $SLURM_ARRAY_TASK_ID/8 in an array job)");
    }
    shard_spec spec;
    spec.count = static_cast<std::size_t>(parse_unsigned(label + " (N)", text.substr(slash + 1), 1, max_shards));
    spec.index = static_cast<std::size_t>(parse_unsigned(label + " (I)", text.substr(0, slash)));
    if (spec.index >= spec.count)
    {
        throw usage_error(label + ": shard " + std::to_string(spec.index) + " of " + std::to_string(spec.count)
                          + " does not exist (shards are numbered 0-" + std::to_string(spec.count - 1) + ")");
    }
    return spec;
}

/// 64-bit FNV-1a: a fixed, portable hash for fingerprints (not a cryptographic one).
inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = 14695981039346656037ull)
{
    for (const char c : bytes)
    {
        hash ^= static_cast<unsigned char>(c);
        hash *= 1099511628211ull;
    }
    return hash;
}

/// 16 lower-case hexadecimal digits.
inline std::string hex64(std::uint64_t value)
{
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
    return text;
}

/// What the shard plan reads of a vector.npy: its rows (from the header) and a fingerprint.
struct vector_file_probe
{
    std::uint64_t rows = 0;         // 0 when the header cannot be read
    std::uint64_t fingerprint = 0;  // of the size and the first 4 KiB, or of "unreadable"
};

/// Bytes of a vector.npy that enter the dump's fingerprint.
inline constexpr std::size_t fingerprint_prefix_bytes = 4096;

inline vector_file_probe probe_vector_file(const std::string& path)
{
    vector_file_probe probe;
    std::ifstream in;
    try
    {
        const npy_header h = open_npy(in, path);
        if (h.shape.size() == 2)
        {
            probe.rows = h.shape[0];
        }
    }
    catch (const input_error&)
    {
        probe.rows = 0;  // analyzing the head reports what is wrong
    }
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!in.is_open() || ec)
    {
        probe.fingerprint = fnv1a64("unreadable");
        return probe;
    }
    in.clear();
    in.seekg(0);
    std::string prefix(fingerprint_prefix_bytes, '\0');
    in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
    prefix.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    probe.fingerprint = fnv1a64(prefix, fnv1a64("size " + std::to_string(size) + "\n"));
    return probe;
}

/// The weights of a run's heads and the dump's fingerprint.
struct head_weights
{
    std::vector<std::uint64_t> tokens;  // per head of the run, in its order
    std::uint64_t dump_fingerprint = 0;
};

/// Reads the NPY headers of the query and key vector.npy of every head (each key folder
/// once). `cap`: max_tokens_per_head.
inline head_weights weigh_heads(const std::string& data_root, const std::vector<head_task>& heads, std::uint64_t cap)
{
    head_weights out;
    std::map<std::pair<std::size_t, std::size_t>, vector_file_probe> keys;
    std::uint64_t fingerprint = fnv1a64("ap dump\n");
    for (const head_task& head : heads)
    {
        const vector_file_probe q =
            probe_vector_file(head_folder_path(data_root, head.layer, head.q_head, 'q') + "/vector.npy");
        auto key = keys.find({head.layer, head.k_head});
        if (key == keys.end())
        {
            key = keys.emplace(std::make_pair(head.layer, head.k_head),
                               probe_vector_file(head_folder_path(data_root, head.layer, head.k_head, 'k') + "/vector.npy"))
                      .first;
        }
        const vector_file_probe& k = key->second;
        out.tokens.push_back(std::min(q.rows, cap) + std::min(k.rows, cap));
        fingerprint = fnv1a64(head_folder_name(head.layer, head.q_head, 'q') + " " + hex64(q.fingerprint) + " "
                                  + head_folder_name(head.layer, head.k_head, 'k') + " " + hex64(k.fingerprint) + "\n",
                              fingerprint);
    }
    out.dump_fingerprint = fingerprint;
    return out;
}

/// The shard of each head (greedy longest-processing-time, see the top of this file).
inline std::vector<std::size_t> assign_shards(const std::vector<std::uint64_t>& weights, std::size_t count)
{
    std::vector<std::size_t> order(weights.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return weights[a] > weights[b]; });
    using load = std::pair<std::uint64_t, std::size_t>;  // (weight so far, shard): least first
    std::priority_queue<load, std::vector<load>, std::greater<load>> shards;
    for (std::size_t s = 0; s < count; ++s)
    {
        shards.push({0, s});
    }
    std::vector<std::size_t> shard_of(weights.size(), 0);
    for (const std::size_t head : order)
    {
        const load least = shards.top();
        shards.pop();
        shard_of[head] = least.second;
        const std::uint64_t sum = least.first + weights[head];
        shards.push({sum < least.first ? ~std::uint64_t{0} : sum, least.second});  // saturating
    }
    return shard_of;
}
/// The heads of one shard of a run, with what its manifest records of the plan.
struct shard_selection
{
    std::vector<head_task> heads;       // the shard's heads, in the run's order
    std::vector<std::uint64_t> tokens;  // their weights
    std::uint64_t shard_tokens = 0;
    std::uint64_t run_tokens = 0;
    std::size_t run_heads = 0;
    std::uint64_t dump_fingerprint = 0;
};

/// The heads of shard `spec` among the run's `heads` ((layer, q_head) order, kept).
inline shard_selection select_shard(const std::string& data_root, const std::vector<head_task>& heads, std::uint64_t cap,
                                    const shard_spec& spec)
{
    const head_weights weights = weigh_heads(data_root, heads, cap);
    const std::vector<std::size_t> shard_of = assign_shards(weights.tokens, spec.count);
    shard_selection out;
    out.run_heads = heads.size();
    out.dump_fingerprint = weights.dump_fingerprint;
    for (std::size_t i = 0; i < heads.size(); ++i)
    {
        out.run_tokens += weights.tokens[i];
        if (shard_of[i] == spec.index)
        {
            out.heads.push_back(heads[i]);
            out.tokens.push_back(weights.tokens[i]);
            out.shard_tokens += weights.tokens[i];
        }
    }
    return out;
}
}  // namespace ap_examples

#endif
