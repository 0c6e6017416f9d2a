// Unit tests of the key-pair sampler (docs/method.md §5, §2.12): structural constraints, the
// distribution (chi-square against the exact law of the sampler), determinism and the error
// contract, for the form over example lengths and the per-bucket form.
//
// Chi-square critical values: scipy.stats.chi2.ppf(0.999, df) from
// tests/reference/core_reference.hpp (regenerate with /usr/bin/python3 tests/reference/gen_core_reference.py).
// Each chi-square test therefore has a 0.1% false-alarm probability for a random seed; the seeds
// are fixed, so the outcome is deterministic.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

#include <attention_plasticity/random.hpp>
#include <attention_plasticity/sampler.hpp>

#include "reference/core_reference.hpp"

namespace ap = attention_plasticity;

namespace
{
// Delta_b = max(1, floor(max_rel_dist * L)) (docs/method.md §5), clamped to L as the header documents.
std::size_t window_of(std::size_t length, double max_rel_dist)
{
    const double f = std::floor(max_rel_dist * static_cast<double>(length));
    return std::max<std::size_t>(1, static_cast<std::size_t>(std::min(f, static_cast<double>(length))));
}

// Number of neighbours of position i (window without i): |N(i)| in docs/method.md §5.
std::size_t neighbour_count(std::size_t i, std::size_t length, std::size_t delta)
{
    const std::size_t left = i >= delta ? i - delta : 0;
    const std::size_t right = std::min(length - 1, i + delta);
    return right - left;
}

// Wilson-Hilferty approximation of the 0.999 quantile of chi-square(df): accurate to a few
// 1e-4 relative for df >= 100 (checked against the SciPy table below).
double wilson_hilferty_999(std::size_t df)
{
    const double z = 3.090232306167813;  // scipy.stats.norm.ppf(0.999)
    const double k = static_cast<double>(df);
    const double c = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
    return k * c * c * c;
}

// scipy.stats.chi2.ppf(0.999, df) from the fixture table; Wilson-Hilferty beyond the table.
double critical_999(std::size_t df)
{
    REQUIRE(df >= 1);
    if (df > core_ref::chi2_max_df)
    {
        return wilson_hilferty_999(df);
    }
    return core_ref::chi2_999[df - 1];
}

struct chi_square_result
{
    double statistic = 0.0;
    std::size_t df = 0;
    double critical = 0.0;
    double min_expected = 0.0;
};

chi_square_result chi_square(const std::vector<double>& observed, const std::vector<double>& probability)
{
    REQUIRE(observed.size() == probability.size());
    const double total = std::accumulate(observed.begin(), observed.end(), 0.0);
    chi_square_result r;
    r.min_expected = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < observed.size(); ++i)
    {
        const double e = total * probability[i];
        r.min_expected = std::min(r.min_expected, e);
        r.statistic += (observed[i] - e) * (observed[i] - e) / e;
    }
    r.df = observed.size() - 1;
    r.critical = critical_999(r.df);
    return r;
}

// Exact law of the sampler (docs/method.md §5) over ordered pairs (b, k1, k2): example b with probability
// L_b / sum of usable L (L >= 2), anchor i uniform, neighbour j uniform on N(i), fair order:
//   P(b, k1, k2) = P(b) (1 / (2 L_b)) (1 / |N(k1)| + 1 / |N(k2)|),  0 < |k1 - k2| <= Delta_b.
// Returns the chi-square of the observed triples against it; triples outside the support are
// counted in `outside` (they must be 0).
chi_square_result exact_law_chi_square(const std::vector<std::size_t>& lengths, double max_rel_dist,
                                       const std::vector<std::size_t>& example, const std::vector<std::size_t>& k1,
                                       const std::vector<std::size_t>& k2, std::size_t& outside)
{
    double usable_total = 0.0;
    for (auto l : lengths)
    {
        usable_total += l >= 2 ? static_cast<double>(l) : 0.0;
    }
    std::vector<std::size_t> base(lengths.size() + 1, 0);
    std::vector<std::size_t> deltas(lengths.size(), 0);
    for (std::size_t b = 0; b < lengths.size(); ++b)
    {
        deltas[b] = window_of(lengths[b], max_rel_dist);
        base[b + 1] = base[b] + lengths[b] * (2 * deltas[b] + 1);
    }
    std::vector<double> dense(base.back(), 0.0);
    outside = 0;
    for (std::size_t n = 0; n < example.size(); ++n)
    {
        const std::size_t b = example[n];
        if (b >= lengths.size() || lengths[b] < 2 || k1[n] >= lengths[b] || k2[n] >= lengths[b] || k1[n] == k2[n]
            || (k1[n] > k2[n] ? k1[n] - k2[n] : k2[n] - k1[n]) > deltas[b])
        {
            ++outside;
            continue;
        }
        dense[base[b] + k1[n] * (2 * deltas[b] + 1) + (k2[n] + deltas[b] - k1[n])] += 1.0;
    }
    std::vector<double> observed;
    std::vector<double> probability;
    for (std::size_t b = 0; b < lengths.size(); ++b)
    {
        const std::size_t length = lengths[b];
        if (length < 2)
        {
            continue;
        }
        const std::size_t delta = deltas[b];
        const double pb = static_cast<double>(length) / usable_total;
        for (std::size_t a = 0; a < length; ++a)
        {
            for (std::size_t c = (a >= delta ? a - delta : 0); c <= std::min(length - 1, a + delta); ++c)
            {
                if (c == a)
                {
                    continue;
                }
                observed.push_back(dense[base[b] + a * (2 * delta + 1) + (c + delta - a)]);
                probability.push_back(pb / (2.0 * static_cast<double>(length))
                                      * (1.0 / static_cast<double>(neighbour_count(a, length, delta))
                                         + 1.0 / static_cast<double>(neighbour_count(c, length, delta))));
            }
        }
    }
    const double psum = std::accumulate(probability.begin(), probability.end(), 0.0);
    CHECK(psum == Approx(1.0).epsilon(1e-12));  // the law is normalised (checks the enumeration)
    return chi_square(observed, probability);
}

template <class Pairs>
void to_vectors(const Pairs& pairs, std::vector<std::size_t>& example, std::vector<std::size_t>& k1,
                std::vector<std::size_t>& k2)
{
    example.assign(pairs.example.begin(), pairs.example.end());
    k1.assign(pairs.first.begin(), pairs.first.end());
    k2.assign(pairs.second.begin(), pairs.second.end());
}
}  // namespace

TEST_CASE("chi-square critical values: the Wilson-Hilferty fallback agrees with the SciPy table", "[sampler]")
{
    for (std::size_t df : {100, 300, 785, 1000})
    {
        CAPTURE(df);
        CHECK(wilson_hilferty_999(df) == Approx(core_ref::chi2_999[df - 1]).epsilon(1e-3));
    }
}

TEST_CASE("pair_window: Delta = max(1, floor(max_rel_dist * L)), clamped to L", "[sampler]")
{
    CHECK(ap::pair_window(0, 0.05) == 1);
    CHECK(ap::pair_window(1, 0.05) == 1);
    CHECK(ap::pair_window(19, 0.05) == 1);
    CHECK(ap::pair_window(39, 0.05) == 1);
    CHECK(ap::pair_window(40, 0.05) == 2);
    CHECK(ap::pair_window(100, 0.05) == 5);
    CHECK(ap::pair_window(1000, 0.05) == 50);
    CHECK(ap::pair_window(60, 0.1) == 6);
    CHECK(ap::pair_window(1000, 0.0) == 1);
    CHECK(ap::pair_window(10, 2.0) == 10);
    CHECK(ap::pair_window(10, 1e300) == 10);
}

TEST_CASE("sample_key_pairs: same example, |k1 - k2| <= Delta_b, k1 != k2, 0 <= k < L_b, order symmetric",
          "[sampler]")
{
    const std::vector<std::size_t> lengths = {0, 1, 2, 3, 7, 20, 60, 137, 1000, 1};
    const xt::xtensor<std::int64_t, 1> lengths_x = xt::adapt(std::vector<std::int64_t>(lengths.begin(), lengths.end()),
                                                             {lengths.size()});
    std::size_t total_pairs = 0;
    std::size_t total_first_smaller = 0;
    for (double rel : {0.0, 0.05, 0.1, 0.5, 3.0})
    {
        CAPTURE(rel);
        ap::rng generator(2024);
        const std::size_t n = 200000;
        const auto pairs = ap::sample_key_pairs(lengths_x, n, rel, generator);
        REQUIRE(pairs.size() == n);
        REQUIRE(pairs.example.size() == n);
        REQUIRE(pairs.second.size() == n);
        std::size_t bad = 0;
        std::size_t first_smaller = 0;
        std::size_t max_gap_seen_1000 = 0;
        std::vector<std::size_t> chosen(lengths.size(), 0);
        for (std::size_t i = 0; i < n; ++i)
        {
            const std::size_t b = pairs.example(i);
            if (b >= lengths.size())
            {
                ++bad;
                continue;
            }
            ++chosen[b];
            const std::size_t length = lengths[b];
            const std::size_t k1 = pairs.first(i);
            const std::size_t k2 = pairs.second(i);
            const std::size_t gap = k1 > k2 ? k1 - k2 : k2 - k1;
            const bool ok = length >= 2 && k1 < length && k2 < length && k1 != k2 && gap <= window_of(length, rel);
            bad += ok ? 0 : 1;
            first_smaller += k1 < k2 ? 1 : 0;
            if (length == 1000)
            {
                max_gap_seen_1000 = std::max(max_gap_seen_1000, gap);
            }
        }
        CHECK(bad == 0);
        // Examples of length < 2 are never chosen; every other one is (N is large).
        CHECK(chosen[0] == 0);
        CHECK(chosen[1] == 0);
        CHECK(chosen[9] == 0);
        for (std::size_t b = 2; b < 9; ++b)
        {
            CHECK(chosen[b] > 0);
        }
        // The window is used in full (the largest gap is reached) when it is not clamped.
        if (rel <= 0.5)
        {
            CHECK(max_gap_seen_1000 == window_of(1000, rel));
        }
        else
        {
            CHECK(max_gap_seen_1000 <= 999);
        }
        // Fair order: the fraction with k1 < k2 is Binomial(n, 1/2) / n; 4 standard errors
        // (0.5 / sqrt(n) each) around 1/2.
        const double fraction = static_cast<double>(first_smaller) / static_cast<double>(n);
        CAPTURE(fraction);
        CHECK(std::fabs(fraction - 0.5) <= 4.0 * 0.5 / std::sqrt(static_cast<double>(n)));
        total_pairs += n;
        total_first_smaller += first_smaller;
    }
    // All 10^6 pairs together: 4 standard errors = 0.002 (detects a coin biased by 0.5%).
    const double fraction = static_cast<double>(total_first_smaller) / static_cast<double>(total_pairs);
    CAPTURE(fraction);
    CHECK(std::fabs(fraction - 0.5) <= 4.0 * 0.5 / std::sqrt(static_cast<double>(total_pairs)));
}

TEST_CASE("sample_key_pairs: examples are chosen in proportion to their length (chi-square)", "[sampler]")
{
    const std::vector<std::size_t> lengths = {0, 1, 2, 3, 5, 10, 37, 100, 250, 1000};
    const xt::xtensor<int, 1> lengths_x = {0, 1, 2, 3, 5, 10, 37, 100, 250, 1000};
    ap::rng generator(77);
    const std::size_t n = 500000;
    const auto pairs = ap::sample_key_pairs(lengths_x, n, 0.05, generator);
    std::vector<double> counts(lengths.size(), 0.0);
    for (std::size_t i = 0; i < n; ++i)
    {
        counts[pairs.example(i)] += 1.0;
    }
    CHECK(counts[0] == 0.0);
    CHECK(counts[1] == 0.0);
    std::vector<double> observed(counts.begin() + 2, counts.end());
    std::vector<double> probability;
    const double total = 2 + 3 + 5 + 10 + 37 + 100 + 250 + 1000;
    for (std::size_t b = 2; b < lengths.size(); ++b)
    {
        probability.push_back(static_cast<double>(lengths[b]) / total);
    }
    const auto r = chi_square(observed, probability);
    CAPTURE(r.statistic, r.df, r.critical, r.min_expected);
    CHECK(r.df == 7);
    CHECK(r.statistic < r.critical);
}

TEST_CASE("sample_key_pairs: uniform anchors and uniform neighbours in the window - chi-square against the "
          "exact law of the sampler over (example, k1, k2)",
          "[sampler]")
{
    // The anchor is not observable in the output, so the test uses the exact law of the triple
    // (b, k1, k2) implied by: b ~ L_b, anchor uniform, neighbour uniform on the window without the
    // anchor, fair coin for the order. Any deviation in one of the four steps changes this law.
    struct config
    {
        std::vector<std::size_t> lengths;
        double rel;
        std::size_t n;
        std::uint64_t seed;
    };
    const config configs[] = {
        {{1, 2, 3, 7, 24, 60, 0}, 0.1, 2000000, 11},  // Deltas 1, 1, 1, 2, 6; 786 cells
        {{5, 9}, 10.0, 200000, 12},                   // Delta clamped: any other position, 92 cells
        {{200}, 0.05, 2000000, 13},                   // Delta 10, 3890 cells (Wilson-Hilferty)
    };
    for (const auto& c : configs)
    {
        CAPTURE(c.lengths.size(), c.rel);
        std::size_t cells = 0;
        for (auto l : c.lengths)
        {
            if (l >= 2)
            {
                const std::size_t delta = window_of(l, c.rel);
                for (std::size_t i = 0; i < l; ++i)
                {
                    cells += neighbour_count(i, l, delta);
                }
            }
        }
        xt::xtensor<std::size_t, 1> lengths_x = xt::adapt(c.lengths, {c.lengths.size()});
        ap::rng generator(c.seed);
        const auto pairs = ap::sample_key_pairs(lengths_x, c.n, c.rel, generator);
        std::vector<std::size_t> example, k1, k2;
        to_vectors(pairs, example, k1, k2);
        std::size_t outside = 0;
        const auto r = exact_law_chi_square(c.lengths, c.rel, example, k1, k2, outside);
        CAPTURE(r.statistic, r.df, r.critical, r.min_expected);
        CHECK(outside == 0);
        CHECK(r.df + 1 == cells);
        CHECK(r.min_expected > 20.0);
        CHECK(r.statistic < r.critical);
    }
}

TEST_CASE("sample_key_pairs: the neighbour of an interior anchor is uniform over the window without the anchor "
          "(chi-square of the signed offset)",
          "[sampler]")
{
    // L = 400, max_rel_dist 0.05: Delta = 20. For pairs whose smaller position lo lies in
    // [Delta, L - 1 - 2 Delta], both positions have full windows (|N| = 2 Delta), so each signed
    // offset k2 - k1 in {-Delta..-1, 1..Delta} has the same probability 1 / (2 L Delta) per lo:
    // conditionally on that event the offset is uniform on 2 Delta values (df = 2 Delta - 1).
    const std::size_t length = 400;
    const double rel = 0.05;
    const std::size_t delta = window_of(length, rel);
    REQUIRE(delta == 20);
    const xt::xtensor<std::size_t, 1> lengths_x = {length};
    ap::rng generator(99);
    const std::size_t n = 1000000;
    const auto pairs = ap::sample_key_pairs(lengths_x, n, rel, generator);
    std::vector<double> observed(2 * delta, 0.0);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t k1 = pairs.first(i);
        const std::size_t k2 = pairs.second(i);
        const std::size_t lo = std::min(k1, k2);
        if (lo < delta || lo > length - 1 - 2 * delta)
        {
            continue;
        }
        const long offset = static_cast<long>(k2) - static_cast<long>(k1);
        if (offset == 0 || std::labs(offset) > static_cast<long>(delta))
        {
            ++bad;
            continue;
        }
        observed[static_cast<std::size_t>(offset < 0 ? offset + static_cast<long>(delta)
                                                     : offset + static_cast<long>(delta) - 1)] += 1.0;
    }
    CHECK(bad == 0);
    // Fair order: positive and negative offsets equally likely (Binomial, 4 standard errors).
    const double counted = std::accumulate(observed.begin(), observed.end(), 0.0);
    const double positive = std::accumulate(observed.begin() + static_cast<long>(delta), observed.end(), 0.0);
    CHECK(std::fabs(positive / counted - 0.5) <= 4.0 * 0.5 / std::sqrt(counted));
    const std::vector<double> probability(2 * delta, 1.0 / static_cast<double>(2 * delta));
    const auto r = chi_square(observed, probability);
    CAPTURE(r.statistic, r.df, r.critical, r.min_expected);
    CHECK(r.df == 39);
    CHECK(r.statistic < r.critical);
}

TEST_CASE("sample_key_pairs: determinism - same seed gives identical pairs, another seed different ones",
          "[sampler]")
{
    const xt::xtensor<long, 1> lengths = {5, 40, 3, 100};
    ap::rng g1(123);
    ap::rng g2(123);
    ap::rng g3(124);
    const auto a = ap::sample_key_pairs(lengths, 1000, 0.05, g1);
    const auto b = ap::sample_key_pairs(lengths, 1000, 0.05, g2);
    const auto c = ap::sample_key_pairs(lengths, 1000, 0.05, g3);
    CHECK((a.example == b.example));
    CHECK((a.first == b.first));
    CHECK((a.second == b.second));
    CHECK_FALSE((a.example == c.example && a.first == c.first && a.second == c.second));
    // The generator advances: a second draw from the same generator differs from the first.
    const auto a2 = ap::sample_key_pairs(lengths, 1000, 0.05, g1);
    CHECK_FALSE((a.example == a2.example && a.first == a2.first && a.second == a2.second));
}

TEST_CASE("sample_key_pairs: no example with 2 keys throws std::domain_error, num_pairs = 0 gives empty, "
          "invalid arguments throw std::invalid_argument",
          "[sampler]")
{
    ap::rng generator(5);
    const xt::xtensor<int, 1> none = xt::xtensor<int, 1>::from_shape({0});
    const xt::xtensor<int, 1> zeros = {0, 0};
    const xt::xtensor<int, 1> singles = {1, 0, 1, 1};
    for (const auto* lengths : {&none, &zeros, &singles})
    {
        CHECK_THROWS_AS(ap::sample_key_pairs(*lengths, 1, 0.05, generator), std::domain_error);
        CHECK_THROWS_AS(ap::sample_key_pairs(*lengths, 100000, 0.05, generator), std::domain_error);
    }
    const xt::xtensor<int, 1> valid = {1, 2, 30};
    const auto empty = ap::sample_key_pairs(valid, 0, 0.05, generator);
    CHECK(empty.size() == 0);
    CHECK(empty.example.size() == 0);
    CHECK(empty.second.size() == 0);
    // Exactly one usable example of length 2: every pair is (b, 0, 1) or (b, 1, 0).
    const auto two = ap::sample_key_pairs(singles + xt::xtensor<int, 1>{0, 2, 0, 0}, 1000, 0.05, generator);
    for (std::size_t i = 0; i < two.size(); ++i)
    {
        CHECK(two.example(i) == 1);
        CHECK(two.first(i) + two.second(i) == 1);
    }

    const xt::xtensor<int, 1> negative = {3, -1, 4};
    CHECK_THROWS_AS(ap::sample_key_pairs(negative, 10, 0.05, generator), std::invalid_argument);
    CHECK_THROWS_AS(ap::sample_key_pairs(valid, 10, -0.1, generator), std::invalid_argument);
    CHECK_THROWS_AS(ap::sample_key_pairs(valid, 10, std::nan(""), generator), std::invalid_argument);
    CHECK_THROWS_AS(ap::sample_key_pairs(valid, 10, std::numeric_limits<double>::infinity(), generator),
                    std::invalid_argument);
    const xt::xtensor<int, 2> two_d = {{1, 2}, {3, 4}};
    CHECK_THROWS_AS(ap::sample_key_pairs(two_d, 10, 0.05, generator), std::invalid_argument);
}

// --------------------------------------------------------------------- per-bucket form

namespace
{
struct bucket_fixture
{
    xt::xtensor<std::int32_t, 1> positions;
    xt::xtensor<std::int64_t, 1> example_ids;
    std::vector<std::int64_t> sorted_ids;            // distinct ids, increasing
    std::vector<std::size_t> lengths;                // per sorted id
    std::vector<std::size_t> rank;                   // per row: index in its example ordered by position
};

// Keys of one bucket: examples with ids {42, -3, 5, 11, 0} and 61, 1, 40, 2, 23 keys; distinct
// positions per example drawn from 0..4999; rows shuffled, so the input is unordered.
bucket_fixture make_bucket_fixture()
{
    const std::vector<std::int64_t> ids = {42, -3, 5, 11, 0};
    const std::vector<std::size_t> sizes = {61, 1, 40, 2, 23};
    ap::rng generator(31337);
    std::vector<std::int64_t> row_ids;
    std::vector<std::int32_t> row_positions;
    for (std::size_t e = 0; e < ids.size(); ++e)
    {
        std::vector<std::int32_t> pool(5000);
        std::iota(pool.begin(), pool.end(), 0);
        for (std::size_t i = 0; i < sizes[e]; ++i)  // partial Fisher-Yates
        {
            const std::size_t j = i + static_cast<std::size_t>(generator.below(pool.size() - i));
            std::swap(pool[i], pool[j]);
            row_ids.push_back(ids[e]);
            row_positions.push_back(pool[i]);
        }
    }
    const std::size_t n = row_ids.size();
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t i = n - 1; i > 0; --i)
    {
        std::swap(order[i], order[static_cast<std::size_t>(generator.below(i + 1))]);
    }
    bucket_fixture f;
    f.positions = xt::xtensor<std::int32_t, 1>::from_shape({n});
    f.example_ids = xt::xtensor<std::int64_t, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        f.positions(i) = row_positions[order[i]];
        f.example_ids(i) = row_ids[order[i]];
    }
    f.sorted_ids = ids;
    std::sort(f.sorted_ids.begin(), f.sorted_ids.end());
    f.rank.assign(n, 0);
    for (auto id : f.sorted_ids)
    {
        std::vector<std::size_t> rows;
        for (std::size_t i = 0; i < n; ++i)
        {
            if (f.example_ids(i) == id)
            {
                rows.push_back(i);
            }
        }
        std::sort(rows.begin(), rows.end(),
                  [&](std::size_t a, std::size_t b) { return f.positions(a) < f.positions(b); });
        for (std::size_t r = 0; r < rows.size(); ++r)
        {
            f.rank[rows[r]] = r;
        }
        f.lengths.push_back(rows.size());
    }
    return f;
}
}  // namespace

TEST_CASE("sample_bucket_key_pairs: rows of one example, within Delta in the position-ordered list, unordered "
          "input rows, distribution equals the sampler's over the examples (chi-square)",
          "[sampler]")
{
    const auto f = make_bucket_fixture();
    const std::size_t rows = f.positions.size();
    const double rel = 0.05;
    ap::rng generator(2718);
    const std::size_t n = 600000;
    const auto pairs = ap::sample_bucket_key_pairs(f.positions, f.example_ids, n, rel, generator);
    REQUIRE(pairs.size() == n);
    std::size_t bad = 0;
    std::vector<std::size_t> example(n), k1(n), k2(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t r1 = pairs.first(i);
        const std::size_t r2 = pairs.second(i);
        const std::size_t b = pairs.example(i);
        if (r1 >= rows || r2 >= rows || b >= f.sorted_ids.size())
        {
            ++bad;
            continue;
        }
        const std::size_t length = f.lengths[b];
        const std::size_t gap = f.rank[r1] > f.rank[r2] ? f.rank[r1] - f.rank[r2] : f.rank[r2] - f.rank[r1];
        const bool ok = r1 != r2 && f.example_ids(r1) == f.example_ids(r2) && f.example_ids(r1) == f.sorted_ids[b]
                     && length >= 2 && gap >= 1 && gap <= window_of(length, rel);
        bad += ok ? 0 : 1;
        example[i] = b;
        k1[i] = f.rank[r1];
        k2[i] = f.rank[r2];
    }
    CHECK(bad == 0);
    // Same law as the sampler over the examples' lengths, with positions replaced by ranks.
    std::size_t outside = 0;
    const auto r = exact_law_chi_square(f.lengths, rel, example, k1, k2, outside);
    CAPTURE(r.statistic, r.df, r.critical, r.min_expected);
    CHECK(outside == 0);
    CHECK(r.min_expected > 20.0);
    CHECK(r.statistic < r.critical);

    // Determinism.
    ap::rng g1(5);
    ap::rng g2(5);
    const auto a = ap::sample_bucket_key_pairs(f.positions, f.example_ids, 500, rel, g1);
    const auto b = ap::sample_bucket_key_pairs(f.positions, f.example_ids, 500, rel, g2);
    CHECK((a.first == b.first));
    CHECK((a.second == b.second));
    CHECK((a.example == b.example));
}

TEST_CASE("sample_bucket_key_pairs: single-key examples never chosen, errors and empty results", "[sampler]")
{
    ap::rng generator(8);
    // Two rows of example 7 (positions 10 and 3) among singletons: every pair is those two rows.
    const xt::xtensor<std::int64_t, 1> positions = {5, 10, 8, 3, 1};
    const xt::xtensor<std::int64_t, 1> ids = {1, 7, 2, 7, 3};
    const auto pairs = ap::sample_bucket_key_pairs(positions, ids, 2000, 0.05, generator);
    std::size_t first_is_1 = 0;
    for (std::size_t i = 0; i < pairs.size(); ++i)
    {
        const bool ok = (pairs.first(i) == 1 && pairs.second(i) == 3) || (pairs.first(i) == 3 && pairs.second(i) == 1);
        CHECK(ok);
        first_is_1 += pairs.first(i) == 1 ? 1 : 0;
    }
    // Fair order: Binomial(2000, 1/2), 4 standard errors.
    CHECK(std::fabs(static_cast<double>(first_is_1) / 2000.0 - 0.5) <= 4.0 * 0.5 / std::sqrt(2000.0));

    const xt::xtensor<std::int64_t, 1> all_single_ids = {1, 2, 3, 4, 5};
    CHECK_THROWS_AS(ap::sample_bucket_key_pairs(positions, all_single_ids, 10, 0.05, generator), std::domain_error);
    const xt::xtensor<std::int64_t, 1> empty = xt::xtensor<std::int64_t, 1>::from_shape({0});
    CHECK_THROWS_AS(ap::sample_bucket_key_pairs(empty, empty, 10, 0.05, generator), std::domain_error);
    CHECK(ap::sample_bucket_key_pairs(positions, ids, 0, 0.05, generator).size() == 0);
    const xt::xtensor<std::int64_t, 1> short_ids = {1, 7, 2, 7};
    CHECK_THROWS_AS(ap::sample_bucket_key_pairs(positions, short_ids, 10, 0.05, generator), std::invalid_argument);
    CHECK_THROWS_AS(ap::sample_bucket_key_pairs(positions, ids, 10, -1.0, generator), std::invalid_argument);
}
