// Tests of the per-head pipeline (docs/method.md §2): bucket rules, the plasticity of a head
// whose answer follows in closed form from sample statistics, invariances, determinism,
// errors, and that analyze_head is exactly the composition of the public steps.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include <xtensor/xadapt.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

#include <attention_plasticity/pipeline.hpp>

#include "test_util.hpp"

namespace ap = attention_plasticity;

namespace
{
// PP = 4 p (1 - p), p = Phi(m / sqrt v), written out independently of the library.
double reference_pp(double m, double v)
{
    const double p = 0.5 * std::erfc(-(m / std::sqrt(v)) / std::sqrt(2.0));
    return 4.0 * p * (1.0 - p);
}

struct crafted_head
{
    ap::head_tokens<double> queries;
    ap::head_tokens<double> keys;
    std::vector<std::vector<double>> key_a;  // per key bucket c: first key of every example
    std::vector<std::vector<double>> key_b;  // second key
};

// d = 3. Queries at positions 0..39 in two examples, bucket = t / 10: component 0 is
// 0.5 + 0.02 t + e with e = +-0.3 (one sign per example), components 1, 2 are symmetric
// about constants at every t, so the position slope is exactly along e1 and the rotation is
// the identity. Key bucket c (0..3) holds 3 examples of exactly 2 keys (positions 10c and
// 10c + 1) with the same two vectors A_c and B_c: every pair of the cell is +-(A_c - B_c),
// so every cell's plasticity is one closed-form PP. Key bucket 4 has single-key examples
// only (a cell without pairs), and one query sits alone in bucket 5 (no model).
crafted_head make_crafted_head()
{
    crafted_head head;
    std::vector<double> qv;
    std::vector<std::int64_t> qp, qb, qe;
    for (int t = 0; t < 50; ++t)
    {
        for (int example = 0; example < 2; ++example)
        {
            const double s = example == 0 ? 1.0 : -1.0;
            qv.push_back(0.5 + 0.02 * t + 0.3 * s);
            qv.push_back(1.0 + s * (0.2 + 0.1 * ((t * 7) % 5)));
            qv.push_back(-0.5 + s * (0.3 + 0.05 * ((t * 3) % 4)));
            qp.push_back(t);
            qb.push_back(t / 10);
            qe.push_back(example);
        }
    }
    // One lonely query in bucket 5, on the model's line so the fits are unchanged.
    qv.insert(qv.end(), {0.5 + 0.02 * 52, 1.0, -0.5});
    qp.push_back(52);
    qb.push_back(5);
    qe.push_back(0);

    std::vector<double> kv;
    std::vector<std::int64_t> kp, kb, ke;
    for (int c = 0; c < 4; ++c)
    {
        const std::vector<double> a{1.0 + 0.3 * c, 2.0 - 0.2 * c, 0.5 + 0.1 * c};
        const std::vector<double> b{1.2 + 0.1 * c, 1.0 + 0.3 * c, 0.9 - 0.05 * c};
        head.key_a.push_back(a);
        head.key_b.push_back(b);
        for (int example = 0; example < 3; ++example)
        {
            kv.insert(kv.end(), a.begin(), a.end());
            kp.push_back(10 * c);
            kb.push_back(c);
            ke.push_back(example);
            kv.insert(kv.end(), b.begin(), b.end());
            kp.push_back(10 * c + 1);
            kb.push_back(c);
            ke.push_back(example);
        }
    }
    for (int example = 0; example < 3; ++example)
    {
        kv.insert(kv.end(), {2.0, 2.0, 2.0});
        kp.push_back(40 + example);
        kb.push_back(4);
        ke.push_back(example);
    }
    auto to_matrix = [](const std::vector<double>& v) {
        xt::xtensor<double, 2> m = xt::xtensor<double, 2>::from_shape({v.size() / 3, 3});
        std::copy(v.begin(), v.end(), m.begin());
        return m;
    };
    auto to_column = [](const std::vector<std::int64_t>& v) {
        xt::xtensor<std::int64_t, 1> c = xt::xtensor<std::int64_t, 1>::from_shape({v.size()});
        std::copy(v.begin(), v.end(), c.begin());
        return c;
    };
    head.queries = {to_matrix(qv), to_column(qp), to_column(qb), to_column(qe)};
    head.keys = {to_matrix(kv), to_column(kp), to_column(kb), to_column(ke)};
    return head;
}

// Expected plasticity of cell (j, c) from sample statistics, computed directly.
double expected_cell(const crafted_head& head, std::int64_t j, std::size_t c)
{
    const auto& q = head.queries;
    const std::size_t n = q.position.size();
    auto t = [&q](std::size_t i) { return static_cast<double>(q.position(i)); };
    const double count = static_cast<double>(n);
    double tm = 0.0, xm = 0.0;
    for (std::size_t i = 0; i < n; ++i)
    {
        tm += t(i);
        xm += q.vectors(i, 0);
    }
    tm /= count;
    xm /= count;
    double stt = 0.0, stx = 0.0;
    for (std::size_t i = 0; i < n; ++i)
    {
        stt += (t(i) - tm) * (t(i) - tm);
        stx += (t(i) - tm) * (q.vectors(i, 0) - xm);
    }
    const double beta = stx / stt;
    const double alpha = xm - beta * tm;
    double rss = 0.0;
    for (std::size_t i = 0; i < n; ++i)
    {
        const double r = q.vectors(i, 0) - alpha - beta * t(i);
        rss += r * r;
    }
    const double sigma2 = rss / (count - 1.0);  // residuals of an OLS fit with intercept have mean 0
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < n; ++i)
    {
        if (q.bucket(i) == j)
        {
            rows.push_back(i);
        }
    }
    double tau = 0.0, mu1 = 0.0, mu2 = 0.0;
    for (auto i : rows)
    {
        tau += t(i);
        mu1 += q.vectors(i, 1);
        mu2 += q.vectors(i, 2);
    }
    const double nj = static_cast<double>(rows.size());
    tau /= nj;
    mu1 /= nj;
    mu2 /= nj;
    double s11 = 0.0, s12 = 0.0, s22 = 0.0;
    for (auto i : rows)
    {
        s11 += (q.vectors(i, 1) - mu1) * (q.vectors(i, 1) - mu1);
        s12 += (q.vectors(i, 1) - mu1) * (q.vectors(i, 2) - mu2);
        s22 += (q.vectors(i, 2) - mu2) * (q.vectors(i, 2) - mu2);
    }
    s11 = s11 / (nj - 1) + 1e-12;
    s12 = s12 / (nj - 1);
    s22 = s22 / (nj - 1) + 1e-12;
    const auto& a = head.key_a[c];
    const auto& b = head.key_b[c];
    const double w0 = a[0] - b[0], w1 = a[1] - b[1], w2 = a[2] - b[2];
    const double m = w0 * (alpha + beta * tau) + w1 * mu1 + w2 * mu2;
    const double v = w0 * w0 * sigma2 + w1 * w1 * s11 + 2 * w1 * w2 * s12 + w2 * w2 * s22;
    return reference_pp(m, v);
}

const ap::cell_plasticity* find_cell(const ap::head_result& r, std::int64_t j, std::int64_t c)
{
    for (const auto& cell : r.cells)
    {
        if (cell.q_bucket == j && cell.k_bucket == c)
        {
            return &cell;
        }
    }
    return nullptr;
}

// A random head: n queries and keys, d dims, a position drift and bucket structure.
ap::head_tokens<double> random_tokens(std::size_t n, std::size_t d, std::uint64_t seed, double drift,
                                      std::size_t length = 200)
{
    ap::rng gen(seed);
    auto normal = [&gen]() {
        const double u1 = 1.0 - gen.uniform();
        const double u2 = gen.uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    ap::head_tokens<double> t;
    t.vectors = xt::xtensor<double, 2>::from_shape({n, d});
    t.position = xt::xtensor<std::int64_t, 1>::from_shape({n});
    t.bucket = xt::xtensor<std::int64_t, 1>::from_shape({n});
    t.example_id = xt::xtensor<std::int64_t, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        const auto pos = static_cast<std::int64_t>(i % length);
        t.position(i) = pos;
        t.bucket(i) = pos / static_cast<std::int64_t>(length / 8);
        t.example_id(i) = static_cast<std::int64_t>(i / length);
        for (std::size_t j = 0; j < d; ++j)
        {
            t.vectors(i, j) = normal() * (1.0 + 0.2 * static_cast<double>(j))
                              + (j % 3 == 0 ? drift * static_cast<double>(pos) / 100.0 : 0.3);
        }
    }
    return t;
}

xt::xtensor<double, 2> random_orthogonal(std::size_t d, std::uint64_t seed)
{
    // Product of d random Householder reflections: orthogonal by construction.
    ap::rng gen(seed);
    xt::xtensor<double, 2> q = xt::zeros<double>({d, d});
    for (std::size_t i = 0; i < d; ++i)
    {
        q(i, i) = 1.0;
    }
    for (std::size_t r = 0; r < d; ++r)
    {
        std::vector<double> v(d);
        double norm = 0.0;
        for (auto& x : v)
        {
            x = gen.uniform() - 0.5;
            norm += x * x;
        }
        norm = std::sqrt(norm);
        for (auto& x : v)
        {
            x /= norm;
        }
        for (std::size_t i = 0; i < d; ++i)
        {
            double dot = 0.0;
            for (std::size_t j = 0; j < d; ++j)
            {
                dot += q(i, j) * v[j];
            }
            for (std::size_t j = 0; j < d; ++j)
            {
                q(i, j) -= 2.0 * dot * v[j];
            }
        }
    }
    return q;
}
}  // namespace

TEST_CASE("pipeline: cell plasticity equals the closed-form PP of the query model (docs/method.md §2.10-2.13)",
          "[pipeline]")
{
    const crafted_head head = make_crafted_head();
    const ap::head_result r = ap::analyze_head(head.queries, head.keys, {1, 2, 0});

    // Query buckets 1..4 have models; 0 is skipped, 5 has a single query.
    std::vector<std::int64_t> profile_buckets;
    for (const auto& row : r.profile)
    {
        profile_buckets.push_back(row.q_bucket);
    }
    CHECK(profile_buckets == std::vector<std::int64_t>{1, 2, 3, 4});

    // Causal cells only: (j, c) for c < j, including c = 4 only for j > 4 (none here).
    for (const auto& cell : r.cells)
    {
        CHECK(cell.k_bucket < cell.q_bucket);
        CHECK(cell.n_pairs == 256);
        CHECK(cell.plasticity == Approx(expected_cell(head, cell.q_bucket, cell.k_bucket)).epsilon(1e-9));
    }
    CHECK(r.cells.size() == 1 + 2 + 3 + 4);

    // AP_j is the mean over cells (equal pair counts), ap_overall the n_j-weighted mean.
    double numerator = 0.0, denominator = 0.0;
    for (const auto& row : r.profile)
    {
        double sum = 0.0;
        for (std::int64_t c = 0; c < row.q_bucket; ++c)
        {
            sum += expected_cell(head, row.q_bucket, static_cast<std::size_t>(c));
        }
        const double ap_j = sum / static_cast<double>(row.q_bucket);
        CHECK(row.plasticity == Approx(ap_j).epsilon(1e-9));
        CHECK(row.n_queries == 20);
        CHECK(row.tau == Approx(10.0 * static_cast<double>(row.q_bucket) + 4.5).epsilon(1e-15));
        numerator += 20 * ap_j;
        denominator += 20;
    }
    CHECK(r.metrics.ap_overall == Approx(numerator / denominator).epsilon(1e-9));
    // C = 53: the first 20% is tau < 10.6 (no bucket), the last 20% tau >= 42.4 (bucket 4).
    CHECK(std::isnan(r.metrics.ap_first20));
    CHECK(r.metrics.ap_last20 == Approx(r.profile[3].plasticity).epsilon(1e-15));
    CHECK(std::isnan(r.metrics.ap_drop));
}

TEST_CASE("pipeline: cells without pairs are NaN with n_pairs 0", "[pipeline]")
{
    crafted_head head = make_crafted_head();
    // A second query in bucket 5 gives it a model: its cell with key bucket 4 (single-key
    // examples only) has no pairs.
    auto q = head.queries;
    const std::size_t n = q.position.size();
    ap::head_tokens<double> grown;
    grown.vectors = xt::xtensor<double, 2>::from_shape({n + 1, 3});
    grown.position = xt::xtensor<std::int64_t, 1>::from_shape({n + 1});
    grown.bucket = xt::xtensor<std::int64_t, 1>::from_shape({n + 1});
    grown.example_id = xt::xtensor<std::int64_t, 1>::from_shape({n + 1});
    for (std::size_t i = 0; i < n; ++i)
    {
        for (std::size_t j = 0; j < 3; ++j)
        {
            grown.vectors(i, j) = q.vectors(i, j);
        }
        grown.position(i) = q.position(i);
        grown.bucket(i) = q.bucket(i);
        grown.example_id(i) = q.example_id(i);
    }
    grown.vectors(n, 0) = 1.5;
    grown.vectors(n, 1) = 1.0;
    grown.vectors(n, 2) = 2.0;
    grown.position(n) = 58;
    grown.bucket(n) = 5;
    grown.example_id(n) = 1;
    const ap::head_result r = ap::analyze_head(grown, head.keys, {0, 0, 0});
    const auto* empty = find_cell(r, 5, 4);
    REQUIRE(empty != nullptr);
    CHECK(empty->n_pairs == 0);
    CHECK(std::isnan(empty->plasticity));
    const auto* full = find_cell(r, 5, 3);
    REQUIRE(full != nullptr);
    CHECK(full->n_pairs == 256);
    REQUIRE(r.profile.back().q_bucket == 5);
    CHECK(r.profile.back().n_pairs == 4 * 256);
}

TEST_CASE("pipeline: sliding window keeps c = j - 1 and key buckets reaching into the window",
          "[pipeline]")
{
    const crafted_head head = make_crafted_head();
    auto cells_of = [](const ap::head_result& r, std::int64_t j) {
        std::vector<std::int64_t> cs;
        for (const auto& cell : r.cells)
        {
            if (cell.q_bucket == j)
            {
                cs.push_back(cell.k_bucket);
            }
        }
        return cs;
    };
    // Key bucket c reaches position 10c + 1. j = 3 has tau = 34.5.
    auto window = [](std::int64_t w) {
        ap::head_options options;
        options.sliding_window = w;
        return options;
    };
    const auto w20 = ap::analyze_head(head.queries, head.keys, {0, 0, 0}, window(20));
    CHECK(cells_of(w20, 3) == std::vector<std::int64_t>{2});  // 21 > 14.5; 11 is not
    const auto w25 = ap::analyze_head(head.queries, head.keys, {0, 0, 0}, window(25));
    CHECK(cells_of(w25, 3) == std::vector<std::int64_t>{1, 2});  // 11 > 9.5
    const auto w1 = ap::analyze_head(head.queries, head.keys, {0, 0, 0}, window(1));
    CHECK(cells_of(w1, 4) == std::vector<std::int64_t>{3});  // only c = j - 1
    const auto none = ap::analyze_head(head.queries, head.keys, {0, 0, 0});
    CHECK(cells_of(none, 4) == std::vector<std::int64_t>{0, 1, 2, 3});
    // A window never changes the plasticity of a cell that stays eligible.
    CHECK(find_cell(w20, 3, 2)->plasticity == Approx(find_cell(none, 3, 2)->plasticity).epsilon(1e-12));
}

TEST_CASE("pipeline: plasticity is invariant under an orthogonal map of queries and keys", "[pipeline]")
{
    auto queries = random_tokens(1200, 7, 11, 2.0);
    auto keys = random_tokens(1000, 7, 12, 1.0);
    const auto base = ap::analyze_head(queries, keys, {3, 5, 1});
    const auto q = random_orthogonal(7, 99);
    auto rotate = [&q](ap::head_tokens<double> t) {
        xt::xtensor<double, 2> out = xt::zeros<double>(t.vectors.shape());
        for (std::size_t i = 0; i < out.shape()[0]; ++i)
        {
            for (std::size_t j = 0; j < 7; ++j)
            {
                for (std::size_t k = 0; k < 7; ++k)
                {
                    out(i, j) += t.vectors(i, k) * q(k, j);
                }
            }
        }
        t.vectors = out;
        return t;
    };
    const auto turned = ap::analyze_head(rotate(queries), rotate(keys), {3, 5, 1});
    REQUIRE(base.cells.size() == turned.cells.size());
    REQUIRE(base.cells.size() > 10);
    for (std::size_t i = 0; i < base.cells.size(); ++i)
    {
        CHECK(turned.cells[i].plasticity == Approx(base.cells[i].plasticity).epsilon(1e-8));
    }
    CHECK(turned.metrics.ap_overall == Approx(base.metrics.ap_overall).epsilon(1e-9));
    CHECK(turned.metrics.q_beta_norm == Approx(base.metrics.q_beta_norm).epsilon(1e-10));
    CHECK(turned.metrics.q_R2_scalar == Approx(base.metrics.q_R2_scalar).epsilon(1e-9));
    CHECK(base.metrics.ap_overall > 0.0);
    CHECK(base.metrics.ap_overall < 1.0);
}

TEST_CASE("pipeline: row order does not matter and a seed fixes every result", "[pipeline]")
{
    auto queries = random_tokens(600, 5, 21, 1.0);
    auto keys = random_tokens(600, 5, 22, 1.0);
    const auto base = ap::analyze_head(queries, keys, {0, 0, 0});
    const auto again = ap::analyze_head(queries, keys, {0, 0, 0});
    REQUIRE(base.cells.size() == again.cells.size());
    for (std::size_t i = 0; i < base.cells.size(); ++i)
    {
        CHECK(base.cells[i].plasticity == again.cells[i].plasticity);  // bitwise
    }
    // Reverse the key rows: examples are ordered by position, so the pairs are the same.
    auto reversed = keys;
    const std::size_t n = keys.position.size();
    for (std::size_t i = 0; i < n; ++i)
    {
        for (std::size_t j = 0; j < 5; ++j)
        {
            reversed.vectors(i, j) = keys.vectors(n - 1 - i, j);
        }
        reversed.position(i) = keys.position(n - 1 - i);
        reversed.bucket(i) = keys.bucket(n - 1 - i);
        reversed.example_id(i) = keys.example_id(n - 1 - i);
    }
    const auto flipped = ap::analyze_head(queries, reversed, {0, 0, 0});
    CHECK(flipped.metrics.ap_overall == Approx(base.metrics.ap_overall).epsilon(1e-10));
    // Another head id or seed draws other pairs.
    const auto other_head = ap::analyze_head(queries, keys, {0, 1, 0});
    CHECK(other_head.metrics.ap_overall != base.metrics.ap_overall);
    ap::head_options options;
    options.seed = 7;
    const auto other_seed = ap::analyze_head(queries, keys, {0, 0, 0}, options);
    CHECK(other_seed.metrics.ap_overall != base.metrics.ap_overall);
}

TEST_CASE("pipeline: subsampling keeps max_tokens_per_head tokens", "[pipeline]")
{
    auto queries = random_tokens(900, 4, 31, 1.0);
    auto keys = random_tokens(800, 4, 32, 1.0);
    ap::head_options options;
    options.max_tokens_per_head = 500;
    const auto r = ap::analyze_head(queries, keys, {0, 0, 0}, options);
    CHECK(r.metrics.n_q_tokens == 500);
    CHECK(r.metrics.n_k_tokens == 500);
    std::size_t counted = 0;
    for (const auto& row : r.profile)
    {
        counted += row.n_queries;
    }
    CHECK(counted <= 500);
    const auto again = ap::analyze_head(queries, keys, {0, 0, 0}, options);
    CHECK(again.metrics.ap_overall == r.metrics.ap_overall);
}

TEST_CASE("pipeline: float and double inputs agree", "[pipeline]")
{
    auto queries = random_tokens(500, 6, 41, 1.0);
    auto keys = random_tokens(500, 6, 42, 1.0);
    ap::head_tokens<float> qf{xt::cast<float>(queries.vectors), queries.position, queries.bucket, queries.example_id};
    ap::head_tokens<float> kf{xt::cast<float>(keys.vectors), keys.position, keys.bucket, keys.example_id};
    // Round the double inputs to float so both runs see the same numbers.
    queries.vectors = xt::cast<double>(qf.vectors);
    keys.vectors = xt::cast<double>(kf.vectors);
    const auto rd = ap::analyze_head(queries, keys, {0, 0, 0});
    const auto rf = ap::analyze_head(qf, kf, {0, 0, 0});
    CHECK(rf.metrics.ap_overall == Approx(rd.metrics.ap_overall).epsilon(1e-12));
    CHECK(rf.metrics.q_R2_pos == Approx(rd.metrics.q_R2_pos).epsilon(1e-12));
}

TEST_CASE("pipeline: component weights are clipped R2 shares", "[pipeline]")
{
    auto queries = random_tokens(400, 5, 51, 3.0);
    auto keys = random_tokens(400, 5, 52, 1.0);
    const auto r = ap::analyze_head(queries, keys, {0, 0, 0});
    double sum = 0.0, positive = 0.0;
    for (std::size_t j = 0; j < 5; ++j)
    {
        positive += std::max(r.component_r2(j), 0.0);
    }
    for (std::size_t j = 0; j < 5; ++j)
    {
        CHECK(r.component_weight(j) == Approx(std::max(r.component_r2(j), 0.0) / positive).epsilon(1e-14));
        sum += r.component_weight(j);
    }
    CHECK(sum == Approx(1.0).epsilon(1e-14));
    // Columns 0 and 3 carry the drift: they hold most of the positional information.
    CHECK(r.component_weight(0) + r.component_weight(3) > 0.9);

    // No variance in position: every R2 is 0 and the weights are uniform.
    auto flat = queries;
    for (auto& p : flat.position)
    {
        p = 7;
    }
    flat.bucket.fill(1);
    const auto u = ap::analyze_head(flat, keys, {0, 0, 0});
    for (std::size_t j = 0; j < 5; ++j)
    {
        CHECK(u.component_r2(j) == 0.0);
        CHECK(u.component_weight(j) == Approx(0.2).epsilon(1e-15));
    }
    CHECK(u.metrics.q_beta_norm == 0.0);
    CHECK(u.metrics.q_R2_scalar == 0.0);
    CHECK(u.metrics.q_mae_ratio == 1.0);
}

TEST_CASE("pipeline: bad input is rejected with a message naming what is wrong", "[pipeline]")
{
    auto queries = random_tokens(100, 4, 61, 1.0);
    auto keys = random_tokens(100, 4, 62, 1.0);
    SECTION("d mismatch")
    {
        auto k3 = random_tokens(100, 3, 62, 1.0);
        CHECK_THROWS_WITH(ap::analyze_head(queries, k3, {}), Catch::Contains("d = 4") && Catch::Contains("d = 3"));
    }
    SECTION("non-finite vectors")
    {
        queries.vectors(5, 2) = std::numeric_limits<double>::quiet_NaN();
        CHECK_THROWS_AS(ap::analyze_head(queries, keys, {}), std::domain_error);
        CHECK_THROWS_WITH(ap::analyze_head(queries, keys, {}), Catch::Contains("row 5"));
    }
    SECTION("negative position")
    {
        keys.position(3) = -1;
        CHECK_THROWS_AS(ap::analyze_head(queries, keys, {}), std::domain_error);
    }
    SECTION("column length mismatch")
    {
        keys.bucket = xt::zeros<std::int64_t>({99});
        CHECK_THROWS_AS(ap::analyze_head(queries, keys, {}), std::invalid_argument);
    }
    SECTION("too few queries")
    {
        auto one = random_tokens(1, 4, 63, 1.0);
        CHECK_THROWS_WITH(ap::analyze_head(one, keys, {}), Catch::Contains("at least 2 queries"));
    }
    SECTION("bad options")
    {
        ap::head_options options;
        options.max_rel_dist = -1.0;
        CHECK_THROWS_AS(ap::analyze_head(queries, keys, {}, options), std::invalid_argument);
        options = {};
        options.p_alpha = 2.0;
        CHECK_THROWS_AS(ap::analyze_head(queries, keys, {}, options), std::invalid_argument);
        options = {};
        options.distance_bins_per_octave = 0;
        CHECK_THROWS_WITH(ap::analyze_head(queries, keys, {}, options),
                          "analyze_head: options.distance_bins_per_octave must be in [1, 1024], got 0");
        options = {};
        options.confidence_level = 1.0;
        CHECK_THROWS_WITH(ap::analyze_head(queries, keys, {}, options),
                          "analyze_head: options.confidence_level must be in (0, 1), got 1");
    }
}

namespace
{
// docs/method.md §2 composed from the public steps as examples/compose_head.cpp composes them
// (with head_options::threads given to the steps that take threads), and the extensions of §8.
template <class TQ, class TK>
ap::head_result compose_steps(const ap::head_tokens<TQ>& queries, const ap::head_tokens<TK>& keys,
                              const ap::head_id& id, const ap::head_options& options)
{
    const std::size_t d = queries.vectors.shape()[1];
    const std::size_t threads = options.threads;
    const ap::head_seeds seeds = ap::seeds_of_head(options.seed, id);
    // §2.1-2.2
    const xt::xtensor<double, 1> signs = ap::orientation_signs(keys.vectors, keys.bucket, threads);
    const ap::prepared_tokens q =
        ap::prepare_tokens(queries, signs, options.max_tokens_per_head, seeds.query_subsample);
    const ap::prepared_tokens k = ap::prepare_tokens(keys, signs, options.max_tokens_per_head, seeds.key_subsample);
    // §2.3-2.5
    const ap::linear_fit fit = ap::fit_linear(q.t, q.vectors, threads);
    const ap::householder rotation = ap::householder_to_e1(fit.beta);
    const ap::scalar_predictability scalar = ap::scalar_position_predictability(q.t, q.vectors, fit.beta, threads);
    const xt::xtensor<double, 2> xq_rot = rotation.apply(q.vectors);
    const xt::xtensor<double, 2> xk_rot = rotation.apply(k.vectors);
    // §2.6-2.9
    const ap::position_component_fit component0 = ap::fit_position_component(q.t, xq_rot);
    const auto first = ap::standardized_normality(component0.residual);
    const auto noise = ap::noise_normality(xt::view(xq_rot, xt::all(), xt::range(1, d)), options.normality_max_dims,
                                           options.p_alpha, seeds.noise_components, threads);
    ap::head_result r;
    r.id = id;
    r.component_r2 = fit.r2;
    r.component_weight = ap::component_weights(fit.r2);
    // §2.10-2.13
    const auto models = ap::bucket_query_models(q.t, q.bucket, xq_rot, component0, options.covariance_epsilon, threads);
    const auto key_buckets = ap::group_key_buckets(k.position, k.bucket, k.example_id);
    std::vector<double> map_key, map_query, map_pp;                      // §8.1
    std::vector<double> empirical_variance;                              // §8.2
    std::vector<ap::bucket_estimate> estimates;                          // §8.3
    auto append = [](std::vector<double>& to, const auto& values) { to.insert(to.end(), values.begin(), values.end()); };
    for (const auto& model : models)
    {
        const std::vector<ap::cell_pairs> cells = ap::query_bucket_cells(key_buckets, model, options, seeds.pair_sampler);
        const auto bucket = ap::query_bucket_plasticity(xk_rot, cells, model);
        r.cells.insert(r.cells.end(), bucket.cells.begin(), bucket.cells.end());
        r.profile.push_back(ap::profile_row(model, bucket, options.min_bucket_queries));
        // §8.1: the method's pairs and the extra ones, with their distances.
        if (options.distance_map)
        {
            const ap::pair_distances dist = ap::cell_pair_distances(k.position, cells, model.tau);
            append(map_key, dist.key_distance);
            append(map_query, dist.query_distance);
            append(map_pp, bucket.pair_plasticity);
            if (options.distance_map_extra_pairs > 0)
            {
                std::vector<ap::cell_pairs> extra;
                for (const auto& cell : cells)
                {
                    for (const auto& kb : key_buckets)
                    {
                        if (kb.bucket == cell.k_bucket)
                        {
                            extra.push_back(ap::distance_map_cell_pairs(kb, model.bucket,
                                                                        options.distance_map_extra_pairs,
                                                                        options.max_rel_dist, seeds.pair_sampler));
                        }
                    }
                }
                const ap::pair_distances extra_dist = ap::cell_pair_distances(k.position, extra, model.tau);
                append(map_key, extra_dist.key_distance);
                append(map_query, extra_dist.query_distance);
                append(map_pp, ap::query_bucket_plasticity(xk_rot, extra, model).pair_plasticity);
            }
        }
        const auto w = ap::bucket_key_differences(xk_rot, cells);
        // §8.2: the bucket's queries (a seeded subsample of the cap).
        if (options.empirical_ap && bucket.n_pairs > 0)
        {
            std::vector<std::size_t> rows;
            for (std::size_t i = 0; i < q.bucket.size(); ++i)
            {
                if (q.bucket(i) == model.bucket)
                {
                    rows.push_back(i);
                }
            }
            const std::size_t cap = options.empirical_max_queries ? options.empirical_max_queries : rows.size();
            const auto picked = ap::subsample_rows(rows.size(), cap, ap::empirical_query_seed(seeds.pair_sampler,
                                                                                              model.bucket));
            xt::xtensor<double, 2> qj = xt::xtensor<double, 2>::from_shape({picked.size(), d});
            for (std::size_t i = 0; i < picked.size(); ++i)
            {
                xt::view(qj, i, xt::all()) = xt::view(xq_rot, rows[picked(i)], xt::all());
            }
            const auto empirical = ap::query_bucket_empirical_plasticity(xk_rot, cells, qj);
            for (std::size_t c = 0; c < cells.size(); ++c)
            {
                r.cells[r.cells.size() - cells.size() + c].plasticity_empirical = empirical.cells[c].plasticity;
            }
            r.profile.back().plasticity_empirical = empirical.plasticity;
            if (options.confidence_intervals)
            {
                const double variance = ap::empirical_plasticity_variance(qj, w, ap::pair_preferences(qj, w))
                                        + ap::pair_sampling_variance(empirical.pair_plasticity, cells);
                r.profile.back().plasticity_empirical_se = std::sqrt(variance);
                empirical_variance.push_back(variance);
            }
        }
        // §8.3: the bucket's sensitivity and pair-sampling variance.
        if (options.confidence_intervals)
        {
            ap::bucket_estimate e;
            e.plasticity = ap::value_in_d(r.profile.back(), bucket.plasticity);
            e.sensitivity = ap::bucket_plasticity_sensitivity(w, bucket.moments, model);
            e.pair_variance = bucket.n_pairs ? ap::pair_sampling_variance(bucket.pair_plasticity, cells)
                                             : std::numeric_limits<double>::quiet_NaN();
            if (options.sampling_unit == ap::sampling_unit::sequence && bucket.n_pairs > 0)
            {
                e.pair_sequence = ap::pair_sequences(cells, k.example_id);
                e.pair_deviation = ap::pair_deviations(bucket.pair_plasticity, cells);
            }
            estimates.push_back(e);
        }
    }
    // §2.14
    const auto aggregates = ap::plasticity_aggregates(r.profile, xt::amax(q.t)() + 1.0);
    ap::head_metrics& m = r.metrics;
    m = ap::make_head_metrics({q.rows.size(), k.rows.size()}, fit, scalar, first, noise, aggregates);
    // §8: the head-level results.
    if (options.distance_map)
    {
        const std::vector<std::size_t> map_shape{map_pp.size()};
        r.distance_map = ap::distance_plasticity_map(xt::adapt(map_key, map_shape), xt::adapt(map_query, map_shape),
                                                     xt::adapt(map_pp, map_shape), options.distance_bins_per_octave);
    }
    if (options.empirical_ap)
    {
        m.ap_empirical_overall =
            ap::plasticity_aggregates(r.profile, 1.0, &ap::bucket_profile::plasticity_empirical).ap_overall;
        if (options.confidence_intervals)
        {
            double numerator = 0.0, total = 0.0;
            std::size_t next = 0;
            for (const auto& row : r.profile)
            {
                if (!std::isnan(row.plasticity_empirical))
                {
                    const double nj = static_cast<double>(row.n_queries);
                    const double variance = empirical_variance[next++];
                    if (!row.small_bucket)
                    {
                        numerator += nj * nj * variance;
                        total += nj;
                    }
                }
            }
            m.ap_empirical_overall_se = std::sqrt(numerator) / total;
        }
    }
    if (options.confidence_intervals)
    {
        ap::uncertainty_design design;
        design.unit = options.sampling_unit;
        design.context_length = xt::amax(q.t)() + 1.0;
        design.keep_influences = options.sequence_influences;
        if (design.unit == ap::sampling_unit::sequence)
        {
            // The head's sequences: those of its kept queries and keys.
            std::vector<std::int64_t> ids(q.example_id.begin(), q.example_id.end());
            ids.insert(ids.end(), k.example_id.begin(), k.example_id.end());
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            design.sequences = ids;
        }
        const ap::plasticity_uncertainty u = ap::plasticity_standard_errors(
            q.t, q.bucket, q.example_id, xq_rot, component0, fit.beta_norm, models, estimates, design);
        m.n_sequences = u.n_sequences;
        m.ap_first20_se = u.first20.standard_error;
        m.ap_first20_bias = u.first20.bias;
        m.ap_last20_se = u.last20.standard_error;
        m.ap_last20_bias = u.last20.bias;
        m.ap_drop_se = u.drop.standard_error;
        m.ap_drop_bias = u.drop.bias;
        r.sequence_influences = u.influences;
        for (std::size_t j = 0; j < r.profile.size(); ++j)
        {
            auto& row = r.profile[j];
            row.plasticity_se = u.bucket_standard_error[j];
            row.plasticity_bias = u.bucket_bias[j];
            const ap::interval ci =
                ap::plasticity_interval(row.plasticity, row.plasticity_bias, row.plasticity_se, options.confidence_level);
            row.plasticity_ci_low = ci.low;
            row.plasticity_ci_high = ci.high;
            row.plasticity_corrected = ci.centre;
        }
        m.ap_overall_se = u.standard_error;
        m.ap_overall_bias = u.bias;
        const ap::interval ci = ap::plasticity_interval(m.ap_overall, u.bias, u.standard_error, options.confidence_level);
        m.ap_overall_ci_low = ci.low;
        m.ap_overall_ci_high = ci.high;
        m.ap_overall_corrected = ci.centre;
    }
    return r;
}

// Bitwise equality, NaN equal to NaN.
bool same(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

void check_identical(const ap::head_result& a, const ap::head_result& b)
{
    const ap::head_metrics& x = a.metrics;
    const ap::head_metrics& y = b.metrics;
    CHECK(x.n_q_tokens == y.n_q_tokens);
    CHECK(x.n_k_tokens == y.n_k_tokens);
    CHECK(x.d_model == y.d_model);
    const double xs[] = {x.q_R2_pos, x.q_beta_norm, x.q_R2_scalar, x.q_mae_baseline, x.q_mae_proj, x.q_mae_ratio,
                         x.q_resid0_skew, x.q_resid0_kurt, x.q_resid0_ks_p, x.q_noise_med_abs_skew,
                         x.q_noise_med_abs_kurt, x.q_noise_med_ks_p, x.q_noise_frac_ks_p_lt_alpha, x.ap_overall,
                         x.ap_first20, x.ap_last20, x.ap_drop};
    const double ys[] = {y.q_R2_pos, y.q_beta_norm, y.q_R2_scalar, y.q_mae_baseline, y.q_mae_proj, y.q_mae_ratio,
                         y.q_resid0_skew, y.q_resid0_kurt, y.q_resid0_ks_p, y.q_noise_med_abs_skew,
                         y.q_noise_med_abs_kurt, y.q_noise_med_ks_p, y.q_noise_frac_ks_p_lt_alpha, y.ap_overall,
                         y.ap_first20, y.ap_last20, y.ap_drop};
    for (std::size_t i = 0; i < sizeof xs / sizeof xs[0]; ++i)
    {
        CAPTURE(i, xs[i], ys[i]);
        CHECK(same(xs[i], ys[i]));
    }
    REQUIRE(a.cells.size() == b.cells.size());
    for (std::size_t i = 0; i < a.cells.size(); ++i)
    {
        CAPTURE(i);
        CHECK(a.cells[i].q_bucket == b.cells[i].q_bucket);
        CHECK(a.cells[i].k_bucket == b.cells[i].k_bucket);
        CHECK(a.cells[i].n_pairs == b.cells[i].n_pairs);
        CHECK(same(a.cells[i].plasticity, b.cells[i].plasticity));
    }
    REQUIRE(a.profile.size() == b.profile.size());
    for (std::size_t i = 0; i < a.profile.size(); ++i)
    {
        CAPTURE(i);
        CHECK(a.profile[i].q_bucket == b.profile[i].q_bucket);
        CHECK(a.profile[i].tau == b.profile[i].tau);
        CHECK(a.profile[i].n_queries == b.profile[i].n_queries);
        CHECK(a.profile[i].n_pairs == b.profile[i].n_pairs);
        CHECK(same(a.profile[i].plasticity, b.profile[i].plasticity));
    }
    CHECK((a.component_r2 == b.component_r2));
    CHECK((a.component_weight == b.component_weight));
}

// The results of docs/method.md §8 are identical too (NaN equal to NaN).
void check_identical_extensions(const ap::head_result& a, const ap::head_result& b)
{
    const ap::head_metrics& x = a.metrics;
    const ap::head_metrics& y = b.metrics;
    CHECK(same(x.ap_empirical_overall, y.ap_empirical_overall));
    CHECK(same(x.ap_empirical_overall_se, y.ap_empirical_overall_se));
    CHECK(same(x.ap_overall_se, y.ap_overall_se));
    CHECK(same(x.ap_overall_bias, y.ap_overall_bias));
    CHECK(same(x.ap_overall_ci_low, y.ap_overall_ci_low));
    CHECK(same(x.ap_overall_ci_high, y.ap_overall_ci_high));
    CHECK(same(x.ap_overall_corrected, y.ap_overall_corrected));
    CHECK(same(x.ap_first20_se, y.ap_first20_se));
    CHECK(same(x.ap_first20_bias, y.ap_first20_bias));
    CHECK(same(x.ap_last20_se, y.ap_last20_se));
    CHECK(same(x.ap_last20_bias, y.ap_last20_bias));
    CHECK(same(x.ap_drop_se, y.ap_drop_se));
    CHECK(same(x.ap_drop_bias, y.ap_drop_bias));
    CHECK(same(x.context_length, y.context_length));
    CHECK(x.n_sequences == y.n_sequences);
    REQUIRE(a.sequence_influences.size() == b.sequence_influences.size());
    for (std::size_t i = 0; i < a.sequence_influences.size(); ++i)
    {
        CAPTURE(i);
        CHECK(a.sequence_influences[i].document_id == b.sequence_influences[i].document_id);
        CHECK(a.sequence_influences[i].quantity == b.sequence_influences[i].quantity);
        CHECK(a.sequence_influences[i].q_bucket == b.sequence_influences[i].q_bucket);
        CHECK(same(a.sequence_influences[i].influence, b.sequence_influences[i].influence));
    }
    REQUIRE(a.cells.size() == b.cells.size());
    for (std::size_t i = 0; i < a.cells.size(); ++i)
    {
        CAPTURE(i);
        CHECK(same(a.cells[i].plasticity_empirical, b.cells[i].plasticity_empirical));
    }
    REQUIRE(a.profile.size() == b.profile.size());
    for (std::size_t i = 0; i < a.profile.size(); ++i)
    {
        CAPTURE(i);
        const ap::bucket_profile& p = a.profile[i];
        const ap::bucket_profile& q = b.profile[i];
        CHECK(same(p.plasticity_empirical, q.plasticity_empirical));
        CHECK(same(p.plasticity_empirical_se, q.plasticity_empirical_se));
        CHECK(same(p.plasticity_se, q.plasticity_se));
        CHECK(same(p.plasticity_bias, q.plasticity_bias));
        CHECK(same(p.plasticity_ci_low, q.plasticity_ci_low));
        CHECK(same(p.plasticity_ci_high, q.plasticity_ci_high));
        CHECK(same(p.plasticity_corrected, q.plasticity_corrected));
        CHECK(p.small_bucket == q.small_bucket);
    }
    REQUIRE(a.distance_map.size() == b.distance_map.size());
    for (std::size_t i = 0; i < a.distance_map.size(); ++i)
    {
        CAPTURE(i);
        CHECK(a.distance_map[i].key_bin == b.distance_map[i].key_bin);
        CHECK(a.distance_map[i].query_bin == b.distance_map[i].query_bin);
        CHECK(a.distance_map[i].n_pairs == b.distance_map[i].n_pairs);
        CHECK(a.distance_map[i].plasticity == b.distance_map[i].plasticity);
    }
}
}  // namespace

TEST_CASE("pipeline: the public steps composed by hand give exactly analyze_head's result", "[pipeline]")
{
    const auto queries64 = random_tokens(900, 7, 71, 2.0);
    const auto keys = random_tokens(800, 7, 72, 1.0);
    const ap::head_tokens<float> queries{xt::cast<float>(queries64.vectors), queries64.position, queries64.bucket,
                                         queries64.example_id};
    ap::head_options options;
    options.seed = 13;
    options.max_tokens_per_head = 600;  // both kinds subsampled
    options.normality_max_dims = 3;     // a seeded choice of 3 of the 6 noise components
    options.num_pairs_per_bucket = 64;
    options.sliding_window = 60;
    const ap::head_id id{2, 5, 1};
    SECTION("float queries, double keys, subsampled, sliding window")
    {
        check_identical(ap::analyze_head(queries, keys, id, options), compose_steps(queries, keys, id, options));
    }
    SECTION("double queries and keys, defaults")
    {
        const auto composed = compose_steps(queries64, keys, id, {});
        const auto analyzed = ap::analyze_head(queries64, keys, id);
        check_identical(analyzed, composed);
        check_identical_extensions(analyzed, composed);
        CHECK(!analyzed.distance_map.empty());  // the distance map is on by default, the others off
        CHECK(std::isnan(analyzed.metrics.ap_overall_se));
        CHECK(std::isnan(analyzed.profile[0].plasticity_empirical));
    }
    SECTION("every extension of §8: extra map pairs, 2 bins per octave, empirical AP on a capped subsample, "
            "intervals at 0.9")
    {
        options.distance_map_extra_pairs = 40;
        options.distance_bins_per_octave = 2;
        options.empirical_ap = true;
        options.empirical_max_queries = 30;
        options.confidence_intervals = true;
        options.confidence_level = 0.9;
        options.sampling_unit = ap::sampling_unit::token;  // 5 sequences: too few for sequence-level errors
        const auto composed = compose_steps(queries, keys, id, options);
        const auto analyzed = ap::analyze_head(queries, keys, id, options);
        check_identical(analyzed, composed);
        check_identical_extensions(analyzed, composed);
        CHECK(std::isfinite(analyzed.metrics.ap_empirical_overall));
        CHECK(std::isfinite(analyzed.metrics.ap_empirical_overall_se));
        CHECK(analyzed.metrics.ap_overall_ci_low < analyzed.metrics.ap_overall);
        CHECK(std::isfinite(analyzed.metrics.ap_drop_se));
        CHECK(analyzed.metrics.n_sequences == 0);
        CHECK(analyzed.sequence_influences.empty());
        // The default unit with 5 sequences: NaN errors (never the token-level ones), biases kept.
        options.sampling_unit = ap::sampling_unit::sequence;
        const auto few = ap::analyze_head(queries, keys, id, options);
        CHECK(few.metrics.n_sequences == 5);
        CHECK(std::isnan(few.metrics.ap_empirical_overall_se));
        CHECK(std::isnan(few.profile[1].plasticity_empirical_se));
        CHECK(few.metrics.ap_empirical_overall == analyzed.metrics.ap_empirical_overall);
        CHECK(std::isnan(few.metrics.ap_overall_se));
        CHECK(std::isnan(few.metrics.ap_overall_ci_low));
        CHECK(std::isnan(few.profile[1].plasticity_se));
        CHECK(few.metrics.ap_overall_bias == analyzed.metrics.ap_overall_bias);
    }
    SECTION("sequence-level errors with the influences (15 sequences of 60 positions)")
    {
        const auto short64 = random_tokens(900, 7, 71, 2.0, 60);
        const ap::head_tokens<float> short_queries{xt::cast<float>(short64.vectors), short64.position,
                                                   short64.bucket, short64.example_id};
        const auto short_keys = random_tokens(840, 7, 72, 1.0, 60);
        options.confidence_intervals = true;
        options.sequence_influences = true;
        options.sliding_window = 0;
        const auto composed = compose_steps(short_queries, short_keys, id, options);
        const auto analyzed = ap::analyze_head(short_queries, short_keys, id, options);
        check_identical(analyzed, composed);
        check_identical_extensions(analyzed, composed);
        CHECK(analyzed.metrics.n_sequences == 15);
        CHECK(std::isfinite(analyzed.metrics.ap_overall_se));
        CHECK(std::isfinite(analyzed.metrics.ap_drop_se));
        // The empirical AP's errors by sequence too (§8.2-8.3): defined, and not the token-level ones.
        ap::head_options empirical = options;
        empirical.empirical_ap = true;
        const auto with_empirical = ap::analyze_head(short_queries, short_keys, id, empirical);
        empirical.sampling_unit = ap::sampling_unit::token;
        const auto token_empirical = ap::analyze_head(short_queries, short_keys, id, empirical);
        CHECK(with_empirical.metrics.ap_overall_se == analyzed.metrics.ap_overall_se);
        CHECK(with_empirical.metrics.ap_empirical_overall_se > 0.0);
        CHECK(with_empirical.metrics.ap_empirical_overall_se != token_empirical.metrics.ap_empirical_overall_se);
        for (std::size_t j = 0; j < with_empirical.profile.size(); ++j)
        {
            CAPTURE(j);
            CHECK(std::isnan(with_empirical.profile[j].plasticity_empirical) ==
                  std::isnan(with_empirical.profile[j].plasticity_empirical_se));
        }
        // One row per sequence and quantity with an error; each quantity's rows give its error.
        std::map<std::pair<int, std::int64_t>, std::vector<double>> by_quantity;
        for (const auto& e : analyzed.sequence_influences)
        {
            by_quantity[{static_cast<int>(e.quantity), e.q_bucket}].push_back(e.influence);
        }
        auto se_of = [](const std::vector<double>& phi) {
            double squares = 0.0;
            for (double x : phi)
            {
                squares += x * x;
            }
            const auto g = static_cast<double>(phi.size());
            return std::sqrt(g / (g - 1.0) * squares);
        };
        const auto& overall = by_quantity.at({static_cast<int>(ap::influence_quantity::ap_overall), 0});
        REQUIRE(overall.size() == 15);
        CHECK(se_of(overall) == Approx(analyzed.metrics.ap_overall_se).epsilon(1e-12));
        CHECK(se_of(by_quantity.at({static_cast<int>(ap::influence_quantity::ap_drop), 0}))
              == Approx(analyzed.metrics.ap_drop_se).epsilon(1e-12));
        for (const auto& row : analyzed.profile)
        {
            if (std::isfinite(row.plasticity_se))
            {
                CHECK(se_of(by_quantity.at({static_cast<int>(ap::influence_quantity::ap_bucket), row.q_bucket}))
                      == Approx(row.plasticity_se).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("pipeline: the companion measures of §8.5 are planar_rotation and pca_roles of the oriented rows",
          "[pipeline]")
{
    const auto queries = random_tokens(900, 7, 71, 2.0);
    const auto keys = random_tokens(800, 7, 72, 1.0);
    // Every row kept (no subsampling), oriented by the keys' signs as analyze_head does (§2.1).
    const xt::xtensor<double, 1> signs = ap::orientation_signs(keys.vectors, keys.bucket);
    const xt::xtensor<double, 2> xq = queries.vectors * signs;
    const xt::xtensor<double, 2> xk = keys.vectors * signs;
    const xt::xtensor<double, 1> tq = xt::cast<double>(queries.position);
    const xt::xtensor<double, 1> tk = xt::cast<double>(keys.position);
    const ap::planar_rotation_result plane = ap::planar_rotation(xq, tq, xk, tk);
    const ap::pca_roles_result roles = ap::pca_roles(xq, tq, xk, tk);
    REQUIRE(roles.role != ap::pca_class::undefined);
    const double want[] = {plane.bias_strength, plane.drift_slope_k, plane.drift_query_mean, roles.r_q, roles.r_k};
    const auto got = [](const ap::head_metrics& m) {
        return std::vector<double>{m.bias_strength, m.drift_slope_k, m.drift_query_mean, m.pc0_r_q, m.pc0_r_k};
    };
    const ap::head_id id{0, 0, 0};
    ap::head_options options;
    options.pca_roles = true;
    for (std::size_t threads : {1, 3})
    {
        options.threads = threads;
        const ap::head_metrics m = ap::analyze_head(queries, keys, id, options).metrics;
        const std::vector<double> values = got(m);
        for (std::size_t i = 0; i < values.size(); ++i)
        {
            CAPTURE(threads, i, values[i], want[i]);
            CHECK(same(values[i], want[i]));
        }
        CHECK(m.pca_class == roles.role);
    }
    // Without the PCA roles the moments skip S_xx, and S_xt, S_tt come from a plain pass instead
    // of the SYRK of [x, t]: the same numbers to rounding, not to the bit.
    options.pca_roles = false;
    const ap::head_metrics m = ap::analyze_head(queries, keys, id, options).metrics;
    const std::vector<double> values = got(m);
    for (std::size_t i = 0; i < 3; ++i)
    {
        CAPTURE(i, values[i], want[i]);
        CHECK(ap_test::near_rel(values[i], want[i], 1e-12));
    }
    CHECK(std::isnan(m.pc0_r_q));
    CHECK(m.pca_class == ap::pca_class::undefined);
    options.planar_rotation = false;
    CHECK(std::isnan(ap::analyze_head(queries, keys, id, options).metrics.bias_strength));
}

TEST_CASE("pipeline: bias_strength_se is the delete-one-sequence jackknife of planar_rotation", "[pipeline]")
{
    // 15 sequences of 60 positions; every row kept, oriented as analyze_head does (§2.1).
    const auto queries = random_tokens(900, 7, 81, 2.0, 60);
    const auto keys = random_tokens(840, 7, 82, 1.0, 60);
    const xt::xtensor<double, 1> signs = ap::orientation_signs(keys.vectors, keys.bucket);
    const xt::xtensor<double, 2> xq = queries.vectors * signs;
    const xt::xtensor<double, 2> xk = keys.vectors * signs;
    const xt::xtensor<double, 1> tq = xt::cast<double>(queries.position);
    const xt::xtensor<double, 1> tk = xt::cast<double>(keys.position);
    // The reference: planar_rotation (two-pass moments) rerun without each sequence in turn.
    std::vector<double> theta;
    for (std::int64_t e = 0; e < 15; ++e)
    {
        std::vector<std::size_t> qi, ki;
        for (std::size_t i = 0; i < queries.example_id.size(); ++i)
        {
            if (queries.example_id(i) != e)
            {
                qi.push_back(i);
            }
        }
        for (std::size_t i = 0; i < keys.example_id.size(); ++i)
        {
            if (keys.example_id(i) != e)
            {
                ki.push_back(i);
            }
        }
        const xt::xtensor<double, 2> q_rest = xt::view(xq, xt::keep(qi), xt::all());
        const xt::xtensor<double, 2> k_rest = xt::view(xk, xt::keep(ki), xt::all());
        const xt::xtensor<double, 1> tq_rest = xt::view(tq, xt::keep(qi));
        const xt::xtensor<double, 1> tk_rest = xt::view(tk, xt::keep(ki));
        theta.push_back(ap::planar_rotation(q_rest, tq_rest, k_rest, tk_rest).bias_strength);
    }
    double mean = 0.0, squares = 0.0;
    for (double x : theta)
    {
        mean += x / 15.0;
    }
    for (double x : theta)
    {
        squares += (x - mean) * (x - mean);
    }
    const double want = std::sqrt(14.0 / 15.0 * squares);
    const double direct =
        ap::bias_strength_standard_error(xq, tq, queries.example_id, xk, tk, keys.example_id);
    CHECK(ap_test::near_rel(direct, want, 1e-9));
    ap::head_options options;
    options.confidence_intervals = true;
    const ap::head_metrics m = ap::analyze_head(queries, keys, {0, 0, 0}, options).metrics;
    CHECK(ap_test::near_rel(m.bias_strength_se, want, 1e-9));
    CHECK(m.bias_strength_se > 0.0);
    // Too few sequences, the token unit, or the intervals off: NaN.
    CHECK(std::isnan(ap::bias_strength_standard_error(xq, tq, queries.example_id, xk, tk, keys.example_id, 16)));
    options.sampling_unit = ap::sampling_unit::token;
    CHECK(std::isnan(ap::analyze_head(queries, keys, {0, 0, 0}, options).metrics.bias_strength_se));
    options.sampling_unit = ap::sampling_unit::sequence;
    options.confidence_intervals = false;
    CHECK(std::isnan(ap::analyze_head(queries, keys, {0, 0, 0}, options).metrics.bias_strength_se));
}

TEST_CASE("pipeline: the extensions of §8 at the edges - d = 1, one pair per cell, no pair at all", "[pipeline]")
{
    ap::head_options options;
    options.empirical_ap = true;
    options.confidence_intervals = true;
    options.sampling_unit = ap::sampling_unit::token;  // 3 sequences of 200 positions
    options.distance_map_extra_pairs = 5;
    SECTION("d = 1: no semantic components, no rotation to estimate")
    {
        const auto r = ap::analyze_head(random_tokens(600, 1, 11, 2.0), random_tokens(500, 1, 12, 1.0), {}, options);
        CHECK(std::isfinite(r.metrics.ap_overall_se));
        CHECK(std::isfinite(r.metrics.ap_empirical_overall));
        CHECK(!r.distance_map.empty());
    }
    SECTION("one pair per cell: no pair-sampling variance, so no interval (NaN), the rest as usual")
    {
        options.num_pairs_per_bucket = 1;
        // The sequence unit too: a cell's single pair leaves its pair noise unmeasured.
        ap::head_options sequences = options;
        sequences.sampling_unit = ap::sampling_unit::sequence;
        const auto s = ap::analyze_head(random_tokens(600, 3, 13, 2.0, 30), random_tokens(500, 3, 14, 1.0, 30), {},
                                        sequences);
        CHECK(s.metrics.n_sequences == 20);
        CHECK(std::isnan(s.metrics.ap_overall_se));
        CHECK(std::isnan(s.profile[0].plasticity_se));
        CHECK(std::isfinite(s.metrics.ap_overall_bias));
        const auto r = ap::analyze_head(random_tokens(600, 3, 13, 2.0), random_tokens(500, 3, 14, 1.0), {}, options);
        CHECK(std::isnan(r.metrics.ap_overall_se));
        CHECK(std::isnan(r.profile[0].plasticity_ci_low));
        CHECK(std::isfinite(r.metrics.ap_empirical_overall));
    }
    SECTION("keys that never form a pair: every extension is NaN or empty")
    {
        auto keys = random_tokens(50, 3, 15, 1.0);
        for (std::size_t i = 0; i < 50; ++i)
        {
            keys.example_id(i) = static_cast<std::int64_t>(i);  // one key per example
        }
        const auto r = ap::analyze_head(random_tokens(300, 3, 16, 2.0), keys, {}, options);
        CHECK(std::isnan(r.metrics.ap_overall));
        CHECK(std::isnan(r.metrics.ap_overall_se));
        CHECK(std::isnan(r.metrics.ap_empirical_overall));
        CHECK(r.distance_map.empty());
    }
}

TEST_CASE("pipeline: the extensions of §8 add results and never change the method's", "[pipeline]")
{
    const auto queries = random_tokens(1200, 6, 91, 1.0);
    const auto keys = random_tokens(1100, 6, 92, 1.0);
    ap::head_options off;
    off.distance_map = false;
    off.seed = 4;
    ap::head_options on = off;
    on.distance_map = true;
    on.distance_map_extra_pairs = 100;
    on.empirical_ap = true;
    on.empirical_max_queries = 50;
    on.confidence_intervals = true;
    on.sampling_unit = ap::sampling_unit::token;  // 6 sequences of 200 positions
    const ap::head_id id{0, 3, 0};
    const auto a = ap::analyze_head(queries, keys, id, off);
    const auto b = ap::analyze_head(queries, keys, id, on);
    check_identical(a, b);
    // Off: NaN columns and no map.
    CHECK(a.distance_map.empty());
    CHECK(std::isnan(a.metrics.ap_empirical_overall));
    CHECK(std::isnan(a.metrics.ap_overall_ci_high));
    CHECK(std::isnan(a.cells[0].plasticity_empirical));
    CHECK(std::isnan(a.profile[0].plasticity_se));
    // On: every bucket with pairs has its values; the map counts the method's and the extra pairs.
    std::size_t pairs = 0, cells_with_pairs = 0;
    for (const auto& cell : b.cells)
    {
        pairs += cell.n_pairs;
        cells_with_pairs += cell.n_pairs > 0;
        CHECK(std::isnan(cell.plasticity_empirical) == (cell.n_pairs == 0));
    }
    std::size_t mapped = 0;
    for (const auto& bin : b.distance_map)
    {
        mapped += bin.n_pairs;
        CHECK(bin.plasticity >= 0.0);
        CHECK(bin.plasticity <= 1.0);
    }
    CHECK(mapped == pairs + 100 * cells_with_pairs);
    for (const auto& row : b.profile)
    {
        CAPTURE(row.q_bucket);
        CHECK(row.plasticity_se > 0.0);
        CHECK(row.plasticity_ci_low <= row.plasticity - row.plasticity_bias);
        CHECK(row.plasticity_ci_high >= row.plasticity - row.plasticity_bias);
        CHECK(row.plasticity_empirical_se > 0.0);
    }
    // Each extension alone gives the same values as all of them together (own streams).
    ap::head_options only_empirical = off;
    only_empirical.empirical_ap = true;
    only_empirical.empirical_max_queries = 50;
    const auto c = ap::analyze_head(queries, keys, id, only_empirical);
    CHECK(c.metrics.ap_empirical_overall == b.metrics.ap_empirical_overall);
    CHECK(std::isnan(c.metrics.ap_empirical_overall_se));  // its SE belongs to the intervals
}

TEST_CASE("pipeline: positions offset by 2^48 or 2^52 give the same results, bit for bit, but for absolute positions",
          "[pipeline]")
{
    // docs/method.md §2.3 "Large positions": every step takes positions from the head's smallest
    // one (t - t_min is exact for integer positions up to 2^53), so adding a constant to every
    // position changes only what is defined on absolute positions: y = log2(t + 1) of §2.4 (q_R2_scalar,
    // the MAEs), C and tau_j / C of §2.14 (ap_first20, ap_last20, ap_drop, their errors), tau_j.
    // Before this rule q_R2_pos and q_beta_norm were 46% off at +2^52 (issue 25, item 9).
    const auto queries = random_tokens(1200, 6, 41, 1.5, 100);  // 12 sequences: the jackknife needs 10
    const auto keys = random_tokens(1000, 6, 42, 1.0, 100);
    ap::head_options options;
    options.seed = 9;
    options.sliding_window = 60;  // §2.11's rule compares tau_j with key positions
    options.distance_map = true;
    options.distance_map_extra_pairs = 20;
    options.confidence_intervals = true;
    options.sampling_unit = ap::sampling_unit::sequence;
    options.sequence_influences = true;
    options.pca_roles = true;
    const ap::head_id id{0, 1, 0};
    const ap::head_result base = ap::analyze_head(queries, keys, id, options);
    REQUIRE(base.metrics.q_beta_norm > 0.0);
    REQUIRE(!base.distance_map.empty());
    REQUIRE(std::isfinite(base.metrics.bias_strength_se));
    for (const std::int64_t offset : {std::int64_t{1} << 48, std::int64_t{1} << 52})
    {
        CAPTURE(offset);
        ap::head_tokens<double> q = queries, k = keys;
        q.position += offset;
        k.position += offset;
        const ap::head_result far = ap::analyze_head(q, k, id, options);
        const ap::head_metrics& x = base.metrics;
        const ap::head_metrics& y = far.metrics;
        const double xs[] = {x.q_R2_pos, x.q_beta_norm, x.q_resid0_skew, x.q_resid0_kurt, x.q_resid0_ks_p,
                             x.q_noise_med_abs_skew, x.q_noise_med_abs_kurt, x.q_noise_med_ks_p, x.ap_overall,
                             x.ap_overall_se, x.ap_overall_bias, x.bias_strength, x.drift_slope_k,
                             x.drift_query_mean, x.bias_strength_se, x.pc0_r_q, x.pc0_r_k};
        const double ys[] = {y.q_R2_pos, y.q_beta_norm, y.q_resid0_skew, y.q_resid0_kurt, y.q_resid0_ks_p,
                             y.q_noise_med_abs_skew, y.q_noise_med_abs_kurt, y.q_noise_med_ks_p, y.ap_overall,
                             y.ap_overall_se, y.ap_overall_bias, y.bias_strength, y.drift_slope_k,
                             y.drift_query_mean, y.bias_strength_se, y.pc0_r_q, y.pc0_r_k};
        for (std::size_t i = 0; i < sizeof xs / sizeof xs[0]; ++i)
        {
            CAPTURE(i, xs[i], ys[i]);
            CHECK(same(xs[i], ys[i]));
        }
        CHECK(x.pca_class == y.pca_class);
        CHECK((base.component_r2 == far.component_r2));
        REQUIRE(base.cells.size() == far.cells.size());
        for (std::size_t i = 0; i < base.cells.size(); ++i)
        {
            CAPTURE(i);
            CHECK(base.cells[i].k_bucket == far.cells[i].k_bucket);
            CHECK(base.cells[i].n_pairs == far.cells[i].n_pairs);
            CHECK(same(base.cells[i].plasticity, far.cells[i].plasticity));
        }
        REQUIRE(base.profile.size() == far.profile.size());
        for (std::size_t i = 0; i < base.profile.size(); ++i)
        {
            CAPTURE(i);
            CHECK(far.profile[i].tau == Approx(base.profile[i].tau + static_cast<double>(offset)).margin(0.5));
            CHECK(same(base.profile[i].plasticity, far.profile[i].plasticity));
            CHECK(same(base.profile[i].plasticity_se, far.profile[i].plasticity_se));
            CHECK(same(base.profile[i].plasticity_bias, far.profile[i].plasticity_bias));
        }
        // The influences on ap_overall and AP_j (those on ap_first20, ap_last20 and ap_drop
        // depend on tau_j / C, absolute).
        auto relative = [](const ap::head_result& r) {
            std::vector<ap::sequence_influence> kept;
            for (const ap::sequence_influence& s : r.sequence_influences)
            {
                if (s.quantity == ap::influence_quantity::ap_overall || s.quantity == ap::influence_quantity::ap_bucket)
                {
                    kept.push_back(s);
                }
            }
            return kept;
        };
        const std::vector<ap::sequence_influence> mine = relative(far), want = relative(base);
        REQUIRE(mine.size() == want.size());
        REQUIRE(!want.empty());
        for (std::size_t i = 0; i < want.size(); ++i)
        {
            CAPTURE(i);
            CHECK(mine[i].document_id == want[i].document_id);
            CHECK(mine[i].q_bucket == want[i].q_bucket);
            CHECK(same(mine[i].influence, want[i].influence));
        }
        REQUIRE(base.distance_map.size() == far.distance_map.size());
        for (std::size_t i = 0; i < base.distance_map.size(); ++i)
        {
            CAPTURE(i);
            CHECK(base.distance_map[i].key_bin == far.distance_map[i].key_bin);
            CHECK(base.distance_map[i].query_bin == far.distance_map[i].query_bin);
            CHECK(base.distance_map[i].n_pairs == far.distance_map[i].n_pairs);
            CHECK(same(base.distance_map[i].plasticity, far.distance_map[i].plasticity));
        }
    }
}

TEST_CASE("pipeline: views over raw buffers, independent value types, float and double keys of the same values "
          "give identical results",
          "[pipeline]")
{
    const auto q = random_tokens(500, 6, 81, 1.5);
    const auto k = random_tokens(450, 6, 82, 1.0);
    // The caller's own buffers (e.g. NumPy arrays): no copy into head_tokens.
    const std::vector<float> q_vectors(xt::cast<float>(q.vectors).begin(), xt::cast<float>(q.vectors).end());
    const std::vector<double> k_vectors(k.vectors.begin(), k.vectors.end());
    const std::vector<float> k_vectors32(k_vectors.begin(), k_vectors.end());
    const std::vector<double> k_rounded(k_vectors32.begin(), k_vectors32.end());
    const auto qv = ap::make_tokens_view(q_vectors.data(), 500, 6, q.position.data(), q.bucket.data());
    const auto kv32 = ap::make_tokens_view(k_vectors32.data(), 450, 6, k.position.data(), k.bucket.data(),
                                           k.example_id.data());
    const auto kv64 = ap::make_tokens_view(k_rounded.data(), 450, 6, k.position.data(), k.bucket.data(),
                                           k.example_id.data());
    CHECK(qv.example_id.size() == 0);
    CHECK(qv.vectors.data() == q_vectors.data());  // a view, not a copy
    ap::head_options options;
    options.sliding_window = 80;
    const auto r32 = ap::analyze_head(qv, kv32, {1, 1, 0}, options);
    const auto r64 = ap::analyze_head(qv, kv64, {1, 1, 0}, options);
    check_identical(r32, r64);
    // The same through head_tokens.
    const ap::head_tokens<float> qt{xt::cast<float>(q.vectors), q.position, q.bucket, {}};
    check_identical(ap::analyze_head(qt, k, {1, 1, 0}, options),
                    ap::analyze_head(qv, ap::as_view(k), {1, 1, 0}, options));
    CHECK(r32.metrics.ap_overall > 0.0);
}

TEST_CASE("pipeline: any number of threads gives byte-identical results", "[pipeline][threads]")
{
    // Large enough that every parallel step has several tasks: a query bucket of 12,750 kept
    // rows (two chunks of the covariance), 39 noise columns (three blocks), 20,000 rows (several
    // row tasks); subsampled keys, a sliding window.
    auto queries = random_tokens(20000, 40, 91, 2.0);
    auto keys = random_tokens(16000, 40, 92, 1.0);
    for (auto* t : {&queries, &keys})
    {
        for (std::size_t i = 0; i < t->position.size(); ++i)
        {
            t->bucket(i) = t->position(i) < 20 ? 1 : (t->position(i) < 190 ? 2 : 3);
        }
    }
    ap::head_options options;
    options.max_tokens_per_head = 15000;
    options.normality_max_dims = 20;
    options.num_pairs_per_bucket = 300;
    options.sliding_window = 150;
    const ap::head_id id{4, 2, 1};
    options.threads = 1;
    const ap::head_result one = ap::analyze_head(queries, keys, id, options);
    CHECK(one.metrics.n_q_tokens == 15000);
    CHECK(one.profile.size() == 3);
    for (std::size_t threads : {0, 2, 3, 8})
    {
        CAPTURE(threads);
        options.threads = threads;
        check_identical(ap::analyze_head(queries, keys, id, options), one);
    }
    // The public steps given threads (their trailing argument) give the same bits too.
    options.threads = 3;
    check_identical(compose_steps(queries, keys, id, options), one);
}

TEST_CASE("pipeline: with the sequence-level errors, any number of threads gives byte-identical results",
          "[pipeline][threads]")
{
    // ap_analyze's default errors (§8.3, sequence unit: 100 sequences of 200 positions), the
    // influences kept, the jackknife of bias_strength (§8.5) and extra pairs of the distance map
    // (§8.1): the work that runs beside the kernel (one task per bucket, and the jackknife) and
    // the influence passes shared by buckets, by blocks of rows and by ranges of columns (the
    // line and position-mean influences by blocks of rows, the sums by sequence by ranges of
    // targets, the rows' models in query_statistics_of by blocks), the orientation's sums by
    // groups of buckets, the normality columns tested first, the distance map's bins formed
    // in the buckets' tasks. On 0-2 threads the jackknife's sums by sequence come with the
    // companion moments' first pass (one task per kind), on 3 and 8 beside the kernel: the
    // two paths give the same bits.
    auto queries = random_tokens(20000, 40, 93, 2.0);
    auto keys = random_tokens(16000, 40, 94, 1.0);
    ap::head_options options;
    options.max_tokens_per_head = 15000;
    options.normality_max_dims = 20;
    options.num_pairs_per_bucket = 200;
    options.confidence_intervals = true;
    options.sequence_influences = true;
    options.distance_map_extra_pairs = 16;
    options.pca_roles = true;
    const ap::head_id id{1, 3, 0};
    options.threads = 1;
    const ap::head_result one = ap::analyze_head(queries, keys, id, options);
    REQUIRE(one.metrics.n_sequences >= 10);
    REQUIRE(std::isfinite(one.metrics.ap_overall_se));
    REQUIRE(std::isfinite(one.metrics.bias_strength_se));
    REQUIRE(!one.sequence_influences.empty());
    for (std::size_t threads : {0, 2, 3, 8})
    {
        CAPTURE(threads);
        options.threads = threads;
        const ap::head_result other = ap::analyze_head(queries, keys, id, options);
        check_identical(other, one);
        check_identical_extensions(other, one);
        CHECK(same(other.metrics.bias_strength, one.metrics.bias_strength));
        CHECK(same(other.metrics.bias_strength_se, one.metrics.bias_strength_se));
        CHECK(same(other.metrics.pc0_r_q, one.metrics.pc0_r_q));
    }
}
