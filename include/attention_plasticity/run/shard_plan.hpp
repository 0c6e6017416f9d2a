#ifndef ATTENTION_PLASTICITY_RUN_SHARD_PLAN_HPP
#define ATTENTION_PLASTICITY_RUN_SHARD_PLAN_HPP

// Splitting a run's heads into shards (docs/method.md §8.4): `ap_analyze --shard I/N`
// analyzes the heads of shard I, which depend only on the dump, the options that select the
// heads and on N, never on timing or thread counts, so that every array task computes the
// same split on its own.
//
// The rule: a head weighs the tokens it analyzes, min(n_q, cap) + min(n_k, cap), with n_q and
// n_k the rows of its query and key vectors as their files announce them (no payload is read:
// the NPY header of vector.npy; for the Python module's qk-sniffer folders, the footer of
// data.parquet, through a folder_probe of its own) and cap = max_tokens_per_head; a head whose
// file cannot be read weighs 0 (it fails in its shard like in any run). Heads in decreasing
// weight (ties in (layer, q_head) order) go one by one to the shard with the least weight so
// far (ties to the lowest index): the greedy longest-processing-time rule. A head's result
// does not depend on its shard.
//
// The dump's fingerprint, which ap_merge compares between shards, is a hash of the run's
// head list and of every file in the query and key folder of each head of the run (not only
// the shard's): names, sizes and all bytes, streamed (folder_fingerprint). Every shard thus
// reads the whole dump once before its work (about as long as reading it from disk: see
// docs/method.md §8.4 for the measured cost), so that shards of two dumps that differ in any
// byte are never merged.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ios>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/fs_util.hpp"
#include "../io/npy_reader.hpp"
#include "cli_util.hpp"
#include "dump_layout.hpp"

namespace attention_plasticity::run
{
// The run layer reads and writes through the io layer, by qualified names (run -> io -> core).

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
        // The example as the option was given: a flag on the command line, else a key's value.
        const bool flag = label.rfind("--", 0) == 0;
        throw usage_error(label + ": '" + raw + "' is not I/N (shard I of N, 0 <= I < N; e.g. "
                          + (flag ? label + " 3/8, or " + label + " $SLURM_ARRAY_TASK_ID/8 in an array job)"
                                  : std::string("'3/8')")));
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

/// What the shard plan reads of the file of a folder's vectors: its rows (as the file
/// announces them).
struct vector_file_probe
{
    std::uint64_t rows = 0;  // 0 when the file cannot be read
};

namespace detail
{
    /// A streamed 64-bit hash of everything `fd` reads (four FNV-style lanes over 64-bit
    /// little-endian words, then the tail bytes): fast enough to be bounded by the disk, fixed
    /// and portable. nullopt when a read fails.
    inline std::optional<std::uint64_t> stream_hash(int fd, std::uint64_t seed)
    {
        constexpr std::uint64_t prime = 1099511628211ull;
        std::uint64_t lane[4] = {seed, seed ^ 0x9e3779b97f4a7c15ull, seed ^ 0xc2b2ae3d27d4eb4full,
                                 seed ^ 0x165667b19e3779f9ull};
        std::vector<unsigned char> buffer(std::size_t{1} << 20);
        std::uint64_t total = 0;
        for (;;)
        {
            // Fill the buffer whole (but at the end), so that words never straddle two reads.
            std::size_t filled = 0;
            while (filled < buffer.size())
            {
                const ssize_t n = ::read(fd, buffer.data() + filled, buffer.size() - filled);
                if (n < 0 && errno == EINTR)
                {
                    continue;
                }
                if (n < 0)
                {
                    return std::nullopt;
                }
                if (n == 0)
                {
                    break;
                }
                filled += static_cast<std::size_t>(n);
            }
            total += filled;
            const std::size_t words = filled / 32 * 32;
            for (std::size_t i = 0; i < words; i += 32)
            {
                for (std::size_t k = 0; k < 4; ++k)
                {
                    std::uint64_t w = 0;
                    for (std::size_t b = 0; b < 8; ++b)
                    {
                        w |= static_cast<std::uint64_t>(buffer[i + 8 * k + b]) << (8 * b);
                    }
                    lane[k] = (lane[k] ^ w) * prime;
                }
            }
            if (filled < buffer.size())
            {
                std::uint64_t hash = seed;
                for (const std::uint64_t l : lane)
                {
                    hash = (hash ^ l) * prime;
                    hash ^= hash >> 29;
                }
                for (std::size_t i = words; i < filled; ++i)
                {
                    hash = (hash ^ buffer[i]) * prime;
                }
                return (hash ^ total) * prime;
            }
        }
    }
}  // namespace detail

/// The fingerprint of a head folder: of every entry in it, in name order: for a file (links
/// followed), its name, size and a hash of all its bytes; for anything else, its name and
/// kind (a FIFO is opened with O_NONBLOCK and never read, so nothing waits). Reads the
/// folder's files whole: the cost of the dump check of ap_merge (docs/method.md §8.4).
inline std::uint64_t folder_fingerprint(const std::string& folder)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    {
        names.push_back(it->path().filename().string());
    }
    if (ec)
    {
        return fnv1a64("unreadable folder: " + ec.message());
    }
    std::sort(names.begin(), names.end());
    std::uint64_t hash = fnv1a64("folder\n");
    for (const auto& name : names)
    {
        const std::string path = (std::filesystem::path(folder) / name).string();
        std::string line = name;
        const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || ::fstat(fd, &st) != 0)
        {
            line += " unreadable: " + io::errno_text(errno);
        }
        else if (!S_ISREG(st.st_mode))
        {
            line += " " + io::detail::kind_of(st.st_mode);
        }
        else
        {
            const auto content = detail::stream_hash(fd, hash);
            line += " " + std::to_string(st.st_size) + " " + (content ? hex64(*content) : std::string("read failed"));
        }
        if (fd >= 0)
        {
            ::close(fd);
        }
        hash = fnv1a64(line + "\n", hash);
    }
    return hash;
}

/// A vector.npy: its rows from the NPY header (0 when it is not a regular file: a FIFO is
/// never opened, so that planning a shard never waits).
inline vector_file_probe probe_vector_file(const std::string& path)
{
    vector_file_probe probe;
    if (!io::inspect_path(path).is_regular)
    {
        return probe;  // analyzing the head reports what is wrong
    }
    try
    {
        std::ifstream in;
        const io::npy_header h = io::open_npy(in, path);
        if (h.shape.size() == 2)
        {
            probe.rows = h.shape[0];
        }
    }
    catch (const io::input_error&)
    {
        probe.rows = 0;  // analyzing the head reports what is wrong
    }
    return probe;
}

/// How the shard plan reads a head folder (its path): the probe of the file of its vectors.
/// A front end that reads other layouts than NPY gives its own.
using folder_probe = std::function<vector_file_probe(const std::string& folder)>;

/// A folder of the NPY layout: its vector.npy.
inline vector_file_probe probe_npy_folder(const std::string& folder)
{
    return probe_vector_file(folder + "/vector.npy");
}

/// The weights of a run's heads and the dump's fingerprint.
struct head_weights
{
    std::vector<std::uint64_t> tokens;  // per head of the run, in its order
    std::uint64_t dump_fingerprint = 0;
};

/// Probes the query and key folder of every head (each key folder once) and reads their
/// files whole for the dump's fingerprint. `cap`:
/// max_tokens_per_head.
inline head_weights weigh_heads(const std::string& data_root, const std::vector<head_task>& heads, std::uint64_t cap,
                                const folder_probe& probe = probe_npy_folder)
{
    head_weights out;
    std::map<std::pair<std::size_t, std::size_t>, std::pair<vector_file_probe, std::uint64_t>> keys;
    std::uint64_t fingerprint = fnv1a64("ap dump 2\n");
    for (const head_task& head : heads)
    {
        const std::string q_folder = head_folder_path(data_root, head.layer, head.q_head, 'q');
        const vector_file_probe q = probe(q_folder);
        const std::uint64_t q_print = folder_fingerprint(q_folder);
        auto key = keys.find({head.layer, head.k_head});
        if (key == keys.end())
        {
            const std::string k_folder = head_folder_path(data_root, head.layer, head.k_head, 'k');
            key = keys.emplace(std::make_pair(head.layer, head.k_head),
                               std::make_pair(probe(k_folder), folder_fingerprint(k_folder)))
                      .first;
        }
        const vector_file_probe& k = key->second.first;
        out.tokens.push_back(std::min(q.rows, cap) + std::min(k.rows, cap));
        fingerprint = fnv1a64(head_folder_name(head.layer, head.q_head, 'q') + " " + hex64(q_print) + " "
                                  + head_folder_name(head.layer, head.k_head, 'k') + " " + hex64(key->second.second)
                                  + "\n",
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
inline shard_selection select_shard(const std::string& data_root, const std::vector<head_task>& heads,
                                    std::uint64_t cap, const shard_spec& spec,
                                    const folder_probe& probe = probe_npy_folder)
{
    const head_weights weights = weigh_heads(data_root, heads, cap, probe);
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
}  // namespace attention_plasticity::run

#endif
