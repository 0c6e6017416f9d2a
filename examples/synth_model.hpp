#ifndef AP_SYNTH_MODEL_HPP
#define AP_SYNTH_MODEL_HPP

// A synthetic qk dump whose query distribution is exactly the Gaussian model of
// docs/method.md §2.10,
// so that the attention plasticity it should have is known.
//
// Per key-head group (layer, k_head) there is one random orthogonal matrix R (d x d); every
// vector is generated in a latent frame and written as R z. In the latent frame, for a
// token at position t (0 <= t < L) of an example:
//
//   query of q_head, in bucket j:
//     z_0    = a0 + b0 t + s0 eps                      (positional component)
//     z_1..  ~ N(mu, Sigma_j)                          (content; mean independent of t and j,
//                                                       Sigma_j = diag(sigma_k^2 g_jk))
//   key of k_head:
//     y_0    = c0 + e0 t / L + r0 eps                  (a positional drift of its own)
//     y_1..  ~ N(m_k, diag(kappa_k^2))                 (content)
//
// The drift strength lambda of a query head sets a0 and b0 (a0 = lambda A, b0 = lambda B / L);
// it is spread log-uniformly over the heads so that they range from high to low plasticity.
//
// Buckets are uniform in position: bucket = t * num_buckets / L. Every example holds every
// position 0..L-1 once, for queries and keys alike; rows of each folder are shuffled. With
// centred_queries (ap_synth --query-positions centre) every query sits at its bucket's centre
// position instead, so that the queries of a bucket have exactly one Gaussian law.
//
// The true AP of a query head follows docs/method.md §2.10-2.14 with the TRUE query model:
// for each query bucket j > 0 with >= 2 queries, tau_j = mean query position of the bucket,
// model mean R [a0 + b0 tau_j, mu] and covariance R blockdiag(s0^2, Sigma_j) R^T (the output
// frame); key buckets eligible per §2.11; pairs of the generated keys (as written, i.e. after
// rounding to the stored precision) and the library's kernel; AP = sum_j n_j AP_j / sum_j n_j.
// The query buckets, key buckets, eligibility, cell pair streams and aggregates are the
// library's own steps. The expectation over the key-pair sampler is either exact
// (true_pairs = 0, the default: every pair the sampler of docs/method.md §5 can draw, weighted
// by its probability, see exact_pair_distribution) or a Monte Carlo mean over true_pairs pairs
// per cell drawn as the pipeline draws a cell's pairs (§2.12).

#include <algorithm>
#include <array>
#include <optional>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

#include <attention_plasticity/aggregates.hpp>
#include <attention_plasticity/cells.hpp>
#include <attention_plasticity/plasticity.hpp>
#include <attention_plasticity/query_model.hpp>
#include <attention_plasticity/random.hpp>
#include <attention_plasticity/sampler.hpp>

namespace ap_synth
{
namespace ap = attention_plasticity;

struct synth_options
{
    std::size_t num_layers = 4;
    std::size_t num_q_heads = 8;
    std::size_t num_k_heads = 2;
    std::size_t dim = 64;
    std::size_t tokens = 4096;       // per head: examples * sequence length
    std::size_t examples = 4;
    std::size_t buckets = 16;
    std::uint64_t seed = 0;
    std::vector<std::size_t> sliding_window_layers;
    std::int64_t sliding_window = 0;  // 0: a quarter of the sequence length
    std::size_t true_pairs = 0;       // per cell for the true AP; 0: the exact expectation
    double max_rel_dist = 0.05;       // of the sampler; must match the analysis
    double min_drift = 0.3;           // drift strength lambda of the least positional head
    double max_drift = 150.0;         // ... and of the most positional one
    bool centred_queries = false;     // every query of bucket j at the bucket's centre position
    // Pairs of dumps with known differences (docs/method.md §8.6): the query vectors' noise from
    // its own seed (the keys, the model and the truth stay those of `seed`), and the query heads
    // of some layers with their drift strength multiplied by change_factor.
    std::optional<std::uint64_t> query_seed;
    std::vector<std::size_t> changed_layers;
    double change_factor = 1.0;
    // Documents of several examples (docs/method.md §1.1, §8.3): examples e of document e / K
    // (chunk e % K), written to examples.csv; with K > 1 the queries of a document share an
    // effect (a latent mean shift of SD document_effect times the noise's, from `seed`), so that
    // the examples of one document are dependent. Unset: no examples.csv, no effect.
    std::optional<std::size_t> examples_per_document;
    double document_effect = 1.0;

    std::size_t sequence_length() const { return tokens / examples; }
    std::size_t per_document() const { return examples_per_document.value_or(1); }
    std::size_t group_size() const { return num_q_heads / num_k_heads; }
    std::int64_t window_for(std::size_t layer) const
    {
        if (std::find(sliding_window_layers.begin(), sliding_window_layers.end(), layer)
            == sliding_window_layers.end())
        {
            return 0;
        }
        return sliding_window > 0 ? sliding_window : std::max<std::int64_t>(1, sequence_length() / 4);
    }
};

/// Gaussian variates (and the uniform stream under them) from the library's generator.
using normal_source = ap::normal_generator;

/// Independent streams from one seed: (seed, purpose, layer, head, extra) -> seed.
inline std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t purpose, std::uint64_t layer, std::uint64_t head,
                                 std::uint64_t extra = 0)
{
    ap::rng mixer(seed ^ 0x5DEECE66DULL);
    std::uint64_t h = mixer();
    for (std::uint64_t x : {purpose, layer, head, extra})
    {
        ap::rng step(h ^ (x * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL));
        h = step();
    }
    return h;
}

/// A random orthogonal d x d matrix (row-major): modified Gram-Schmidt, twice, on the
/// columns of a Gaussian matrix.
inline xt::xtensor<double, 2> random_orthogonal(std::size_t d, normal_source& normal)
{
    xt::xtensor<double, 2> a = xt::xtensor<double, 2>::from_shape({d, d});
    for (auto& x : a)
    {
        x = normal();
    }
    for (std::size_t c = 0; c < d; ++c)
    {
        for (int pass = 0; pass < 2; ++pass)
        {
            for (std::size_t p = 0; p < c; ++p)
            {
                double dot = 0.0;
                for (std::size_t r = 0; r < d; ++r)
                {
                    dot += a(r, p) * a(r, c);
                }
                for (std::size_t r = 0; r < d; ++r)
                {
                    a(r, c) -= dot * a(r, p);
                }
            }
        }
        double norm = 0.0;
        for (std::size_t r = 0; r < d; ++r)
        {
            norm += a(r, c) * a(r, c);
        }
        norm = std::sqrt(norm);
        for (std::size_t r = 0; r < d; ++r)
        {
            a(r, c) /= norm;
        }
    }
    return a;
}

/// Rows out_i = R z_i (z_i the rows of latent): out = latent R^T.
inline xt::xtensor<double, 2> to_output_frame(const xt::xtensor<double, 2>& latent, const xt::xtensor<double, 2>& r)
{
    const std::size_t n = latent.shape()[0];
    const std::size_t d = latent.shape()[1];
    xt::xtensor<double, 2> out = xt::zeros<double>({n, d});
    for (std::size_t i = 0; i < n; ++i)
    {
        const double* z = latent.data() + i * d;
        double* o = out.data() + i * d;
        for (std::size_t row = 0; row < d; ++row)
        {
            const double* rr = r.data() + row * d;
            double s = 0.0;
            for (std::size_t c = 0; c < d; ++c)
            {
                s += rr[c] * z[c];
            }
            o[row] = s;
        }
    }
    return out;
}

/// Token layout shared by queries and keys of a head: rows in (example, position) order.
struct token_layout
{
    std::vector<std::int64_t> position;
    std::vector<std::int64_t> bucket;
    std::vector<std::int64_t> example_id;
};

inline token_layout make_layout(const synth_options& o)
{
    token_layout t;
    const std::size_t len = o.sequence_length();
    for (std::size_t e = 0; e < o.examples; ++e)
    {
        for (std::size_t p = 0; p < len; ++p)
        {
            t.position.push_back(static_cast<std::int64_t>(p));
            t.bucket.push_back(static_cast<std::int64_t>(p * o.buckets / len));
            t.example_id.push_back(static_cast<std::int64_t>(17 * e + 5));
        }
    }
    return t;
}

/// The queries' layout: the shared layout, or with centred_queries every query moved to the
/// centre position floor((first + last) / 2) of its bucket (same rows, buckets and examples).
/// Then the queries of a bucket all have the law N(R [a0 + b0 tau_j, mu], R blockdiag(s0^2,
/// Sigma_j) R^T) of the model at tau_j, so the bucket's actual queries follow the pipeline's
/// Gaussian query model exactly (docs/method.md §8.2) and the true AP is also the AP of the
/// actual query law.
inline token_layout make_query_layout(const synth_options& o)
{
    token_layout t = make_layout(o);
    if (!o.centred_queries)
    {
        return t;
    }
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> range;
    for (std::size_t i = 0; i < t.position.size(); ++i)
    {
        auto it = range.emplace(t.bucket[i], std::make_pair(t.position[i], t.position[i])).first;
        it->second.first = std::min(it->second.first, t.position[i]);
        it->second.second = std::max(it->second.second, t.position[i]);
    }
    for (std::size_t i = 0; i < t.position.size(); ++i)
    {
        const auto& r = range[t.bucket[i]];
        t.position[i] = (r.first + r.second) / 2;
    }
    return t;
}

/// Parameters of one key head (latent frame).
struct key_params
{
    double c0 = 0.0, e0 = 0.0, r0 = 1.0;
    std::vector<double> mean;   // m_k, k = 1..d-1
    std::vector<double> scale;  // kappa_k
};

/// Parameters of one query head (latent frame).
struct query_params
{
    double drift = 0.0;  // lambda
    double a0 = 0.0, b0 = 0.0, s0 = 1.0;
    std::vector<double> mean;                // mu, k = 1..d-1
    std::vector<double> scale;               // sigma_k
    std::vector<std::vector<double>> gain;   // g_jk per bucket j: Sigma_j = diag(sigma_k^2 g_jk)
};

inline key_params make_key_params(const synth_options& o, std::size_t layer, std::size_t k_head)
{
    normal_source normal(stream_seed(o.seed, 1, layer, k_head));
    key_params p;
    p.c0 = 0.5 * normal();
    p.e0 = 2.0 * normal();
    p.r0 = 2.0 + normal.uniform();
    for (std::size_t k = 1; k < o.dim; ++k)
    {
        p.mean.push_back(0.5 * normal());
        p.scale.push_back(0.5 + normal.uniform());
    }
    return p;
}

/// Drift strength of head number `index` of `count`: log-uniform between min and max,
/// heads permuted so that strength does not follow the (layer, head) order.
inline double drift_of(const synth_options& o, std::size_t index, std::size_t count)
{
    std::vector<std::size_t> order(count);
    std::iota(order.begin(), order.end(), std::size_t(0));
    normal_source shuffle(stream_seed(o.seed, 2, 0, 0));
    for (std::size_t i = count; i > 1; --i)
    {
        std::swap(order[i - 1], order[static_cast<std::size_t>(shuffle.below(i))]);
    }
    const double rank = count > 1 ? static_cast<double>(order[index]) / static_cast<double>(count - 1) : 0.5;
    return std::exp(std::log(o.min_drift) + rank * (std::log(o.max_drift) - std::log(o.min_drift)));
}

inline query_params make_query_params(const synth_options& o, std::size_t layer, std::size_t q_head)
{
    normal_source normal(stream_seed(o.seed, 3, layer, q_head));
    query_params p;
    const std::size_t heads = o.num_layers * o.num_q_heads;
    p.drift = drift_of(o, layer * o.num_q_heads + q_head, heads);
    if (std::find(o.changed_layers.begin(), o.changed_layers.end(), layer) != o.changed_layers.end())
    {
        p.drift *= o.change_factor;
    }
    const double len = static_cast<double>(o.sequence_length());
    const double sign = normal.uniform() < 0.5 ? -1.0 : 1.0;
    p.a0 = sign * p.drift * (0.2 + 0.3 * normal.uniform());
    p.b0 = sign * p.drift * (0.8 + 0.4 * normal.uniform()) / len;
    p.s0 = 0.8 + 0.4 * normal.uniform();
    std::vector<double> phase;
    for (std::size_t k = 1; k < o.dim; ++k)
    {
        p.mean.push_back(0.1 * normal());
        p.scale.push_back(0.5 + normal.uniform());
        phase.push_back(6.283185307179586 * normal.uniform());
    }
    p.gain.resize(o.buckets);
    for (std::size_t j = 0; j < o.buckets; ++j)
    {
        for (std::size_t k = 0; k + 1 < o.dim; ++k)
        {
            const double angle = 6.283185307179586 * static_cast<double>(j) / static_cast<double>(o.buckets) + phase[k];
            p.gain[j].push_back(std::exp(0.4 * std::sin(angle)));
        }
    }
    return p;
}

/// Latent keys of a key head, rows in layout order.
inline xt::xtensor<double, 2> make_latent_keys(const synth_options& o, const key_params& p, const token_layout& t,
                                               std::size_t layer, std::size_t k_head)
{
    normal_source normal(stream_seed(o.seed, 4, layer, k_head));
    const std::size_t n = t.position.size();
    const double len = static_cast<double>(o.sequence_length());
    xt::xtensor<double, 2> y = xt::xtensor<double, 2>::from_shape({n, o.dim});
    for (std::size_t i = 0; i < n; ++i)
    {
        y(i, 0) = p.c0 + p.e0 * static_cast<double>(t.position[i]) / len + p.r0 * normal();
        for (std::size_t k = 1; k < o.dim; ++k)
        {
            y(i, k) = p.mean[k - 1] + p.scale[k - 1] * normal();
        }
    }
    return y;
}

/// Latent queries of a query head, rows in layout order.
inline xt::xtensor<double, 2> make_latent_queries(const synth_options& o, const query_params& p,
                                                  const token_layout& t, std::size_t layer, std::size_t q_head)
{
    normal_source normal(stream_seed(o.query_seed.value_or(o.seed), 5, layer, q_head));
    const std::size_t n = t.position.size();
    xt::xtensor<double, 2> z = xt::xtensor<double, 2>::from_shape({n, o.dim});
    for (std::size_t i = 0; i < n; ++i)
    {
        const auto j = static_cast<std::size_t>(t.bucket[i]);
        z(i, 0) = p.a0 + p.b0 * static_cast<double>(t.position[i]) + p.s0 * normal();
        for (std::size_t k = 1; k < o.dim; ++k)
        {
            z(i, k) = p.mean[k - 1] + p.scale[k - 1] * std::sqrt(p.gain[j][k - 1]) * normal();
        }
    }
    const std::size_t per_document = o.per_document();
    if (per_document > 1 && o.document_effect > 0.0)
    {
        // The document's shared effect (of the texts: --seed's, not --query-seed's): a mean
        // shift of every latent coordinate, the same for all the queries of its examples.
        const std::size_t len = o.sequence_length();
        std::vector<double> shift(o.dim);
        std::size_t current = static_cast<std::size_t>(-1);
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::size_t document = i / len / per_document;
            if (document != current)
            {
                normal_source effect(stream_seed(o.seed, 11, layer, q_head, document));
                shift[0] = o.document_effect * p.s0 * effect();
                for (std::size_t k = 1; k < o.dim; ++k)
                {
                    shift[k] = o.document_effect * p.scale[k - 1] * effect();
                }
                current = document;
            }
            for (std::size_t k = 0; k < o.dim; ++k)
            {
                z(i, k) += shift[k];
            }
        }
    }
    return z;
}

/// A random permutation of n rows (the order the rows are written in).
inline std::vector<std::size_t> row_order(const synth_options& o, std::uint64_t purpose, std::size_t layer,
                                          std::size_t head, std::size_t n)
{
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t(0));
    normal_source g(stream_seed(o.seed, purpose, layer, head));
    for (std::size_t i = n; i > 1; --i)
    {
        std::swap(order[i - 1], order[static_cast<std::size_t>(g.below(i))]);
    }
    return order;
}

/// The distinct unordered key pairs the key-pair sampler (docs/method.md §5) can draw from the examples of one
/// bucket, with their probabilities (summing to 1). An example is drawn with probability
/// L_b / sum L (examples with L < 2 are never used), the anchor i uniformly, the neighbour j
/// uniformly among the right - left positions of [max(0, i - Delta), min(L - 1, i + Delta)]
/// other than i; the order coin does not matter since 4p(1-p) is symmetric in the pair.
/// first/second are the rows of the caller's key table.
struct sampler_support
{
    xt::xtensor<std::size_t, 1> first;
    xt::xtensor<std::size_t, 1> second;
    std::vector<double> weight;
};

inline sampler_support exact_pair_distribution(const ap::example_groups& groups, double max_rel_dist)
{
    double total = 0.0;
    for (std::size_t b = 0; b < groups.count(); ++b)
    {
        if (groups.length(b) >= 2)
        {
            total += static_cast<double>(groups.length(b));
        }
    }
    std::vector<std::size_t> first, second;
    std::vector<double> weight;
    for (std::size_t b = 0; b < groups.count(); ++b)
    {
        const std::size_t len = groups.length(b);
        if (len < 2)
        {
            continue;
        }
        const std::size_t delta = ap::pair_window(len, max_rel_dist);
        auto neighbours = [&](std::size_t i) {
            const std::size_t left = i >= delta ? i - delta : 0;
            const std::size_t right = std::min(len - 1, i + delta);
            return static_cast<double>(right - left);
        };
        for (std::size_t i = 0; i < len; ++i)
        {
            // Unordered pairs {i, j} with i < j <= i + delta: drawn as (anchor i, neighbour j)
            // or (anchor j, neighbour i).
            for (std::size_t j = i + 1; j <= std::min(len - 1, i + delta); ++j)
            {
                first.push_back(groups.rows[groups.offsets[b] + i]);
                second.push_back(groups.rows[groups.offsets[b] + j]);
                weight.push_back((1.0 / neighbours(i) + 1.0 / neighbours(j)) / total);
            }
        }
    }
    sampler_support s;
    s.first = xt::xtensor<std::size_t, 1>::from_shape({first.size()});
    s.second = xt::xtensor<std::size_t, 1>::from_shape({second.size()});
    std::copy(first.begin(), first.end(), s.first.begin());
    std::copy(second.begin(), second.end(), s.second.begin());
    s.weight = std::move(weight);
    return s;
}

/// The true query model of bucket j (mean position tau) in the output frame: R [a0 + b0 tau,
/// mu] and R blockdiag(s0^2, Sigma_j) R^T.
inline ap::gaussian true_query_model(const query_params& qp, const xt::xtensor<double, 2>& r, std::size_t d,
                                     std::int64_t j, double tau)
{
    xt::xtensor<double, 1> mean_latent = xt::zeros<double>({d});
    mean_latent(0) = qp.a0 + qp.b0 * tau;
    for (std::size_t k = 1; k < d; ++k)
    {
        mean_latent(k) = qp.mean[k - 1];
    }
    std::vector<double> var_latent(d);
    var_latent[0] = qp.s0 * qp.s0;
    for (std::size_t k = 1; k < d; ++k)
    {
        var_latent[k] = qp.scale[k - 1] * qp.scale[k - 1] * qp.gain[static_cast<std::size_t>(j)][k - 1];
    }
    ap::gaussian model{xt::zeros<double>({d}), xt::zeros<double>({d, d})};
    for (std::size_t a = 0; a < d; ++a)
    {
        for (std::size_t c = 0; c < d; ++c)
        {
            model.mean(a) += r(a, c) * mean_latent(c);
        }
        for (std::size_t b = 0; b <= a; ++b)
        {
            double s = 0.0;
            for (std::size_t c = 0; c < d; ++c)
            {
                s += r(a, c) * var_latent[c] * r(b, c);
            }
            model.covariance(a, b) = s;
            model.covariance(b, a) = s;
        }
    }
    return model;
}

struct true_profile_row
{
    std::int64_t q_bucket = 0;
    double tau = 0.0;
    std::size_t n_queries = 0;
    double ap = std::numeric_limits<double>::quiet_NaN();
    std::size_t n_pairs = 0;
};

struct true_ap_result
{
    double ap = std::numeric_limits<double>::quiet_NaN();
    double ap_first20 = std::numeric_limits<double>::quiet_NaN();
    double ap_last20 = std::numeric_limits<double>::quiet_NaN();
    std::vector<true_profile_row> profile;
};

/// The true AP of a query head (see the top of this file). keys: the stored keys (output
/// frame, in double), rows in `key_layout` order; queries are described by their layout
/// (positions, buckets) and the true parameters; r maps latent to output. The query buckets,
/// key buckets, eligible cells, cell pair streams and aggregates are the library's steps
/// (docs/method.md §2.10-2.14); head_seed plays the part of the head's pair-sampler seed
/// (§2.15) for the Monte Carlo truth.
inline true_ap_result true_ap(const synth_options& o, const query_params& qp, const xt::xtensor<double, 2>& r,
                              const xt::xtensor<double, 2>& keys, const token_layout& key_layout,
                              const token_layout& query_layout, std::int64_t window, std::uint64_t head_seed)
{
    const std::size_t d = o.dim;
    auto column = [](const std::vector<std::int64_t>& v) {
        return xt::adapt(v.data(), v.size(), xt::no_ownership(), std::array<std::size_t, 1>{v.size()});
    };
    const std::vector<ap::key_bucket> key_buckets =
        ap::group_key_buckets(column(key_layout.position), column(key_layout.bucket), column(key_layout.example_id));

    true_ap_result out;
    for (const ap::query_bucket& qb : ap::query_buckets(column(query_layout.position), column(query_layout.bucket)))
    {
        const std::int64_t j = qb.bucket;
        true_profile_row row;
        row.q_bucket = j;
        row.n_queries = qb.n_queries;
        row.tau = qb.tau;
        const ap::gaussian model = true_query_model(qp, r, d, j, row.tau);
        double cell_sum = 0.0;
        std::size_t cells = 0;
        std::size_t pair_count = 0;
        for (std::size_t c : ap::eligible_key_buckets(key_buckets, j, row.tau, window))
        {
            const ap::key_bucket& kb = key_buckets[c];
            if (!kb.examples.can_form_pair())
            {
                continue;
            }
            if (o.true_pairs == 0)
            {
                // The exact expectation over the sampler's distribution.
                const sampler_support support = exact_pair_distribution(kb.examples, o.max_rel_dist);
                const auto w = ap::key_differences<double>(keys, support.first, support.second);
                const auto pp = ap::pair_plasticity<double, double>(w, model.mean, model.covariance);
                double cell = 0.0;
                for (std::size_t p = 0; p < pp.size(); ++p)
                {
                    cell += support.weight[p] * pp(p);
                }
                cell_sum += cell;
                pair_count += pp.size();
            }
            else
            {
                const ap::cell_pairs cell = ap::cell_key_pairs(kb, j, o.true_pairs, o.max_rel_dist, head_seed);
                const auto w = ap::key_differences<double>(keys, cell.pairs.first, cell.pairs.second);
                const auto pp = ap::pair_plasticity<double, double>(w, model.mean, model.covariance);
                cell_sum += ap::mean_plasticity(pp);
                pair_count += pp.size();
            }
            ++cells;
        }
        // Every cell with pairs holds the same number of pairs in the pipeline, so AP_j is
        // the mean of the cells' expectations.
        row.n_pairs = pair_count;
        if (cells > 0)
        {
            row.ap = cell_sum / static_cast<double>(cells);
        }
        out.profile.push_back(row);
    }
    std::vector<double> tau, n_queries, ap_j;
    for (const auto& row : out.profile)
    {
        tau.push_back(row.tau);
        n_queries.push_back(static_cast<double>(row.n_queries));
        ap_j.push_back(row.ap);
    }
    const std::int64_t max_position = *std::max_element(query_layout.position.begin(), query_layout.position.end());
    auto vector = [](const std::vector<double>& v) {
        return xt::adapt(v.data(), v.size(), xt::no_ownership(), std::array<std::size_t, 1>{v.size()});
    };
    const ap::plasticity_aggregates_result aggregates = ap::plasticity_aggregates(
        vector(tau), vector(n_queries), vector(ap_j), static_cast<double>(max_position) + 1.0);
    out.ap = aggregates.ap_overall;
    out.ap_first20 = aggregates.ap_first20;
    out.ap_last20 = aggregates.ap_last20;
    return out;
}
}  // namespace ap_synth

#endif
