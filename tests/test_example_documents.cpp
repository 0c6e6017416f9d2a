// The document as the sampling unit of docs/method.md §8.3 (example_documents.hpp, through
// head_options::documents): one example per document gives exactly the errors without a table;
// documents of several examples sum their examples' influences; the "fewer than 10" rule counts
// documents; bias_strength's jackknife deletes documents (checked against leave-one-document-out
// values of planar_rotation itself, an independent path from the jackknife's per-unit sums).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include <attention_plasticity/example_documents.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/planar_rotation.hpp>
#include <attention_plasticity/random.hpp>

namespace ap = attention_plasticity;

namespace
{
/// n tokens of dimension d in examples of `length` positions (example id 3 e + 1), with a
/// shared effect per group of `per_document` examples so that a document's examples depend.
template <class T>
ap::head_tokens<T> document_tokens(std::size_t n, std::size_t d, std::uint64_t seed, double drift,
                                   std::size_t length, std::size_t per_document)
{
    ap::rng gen(seed);
    auto normal = [&gen]() {
        const double u1 = 1.0 - gen.uniform();
        const double u2 = gen.uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    std::map<std::size_t, std::vector<double>> effect;
    ap::head_tokens<T> t;
    t.vectors = xt::xtensor<T, 2>::from_shape({n, d});
    t.position = xt::xtensor<std::int64_t, 1>::from_shape({n});
    t.bucket = xt::xtensor<std::int64_t, 1>::from_shape({n});
    t.example_id = xt::xtensor<std::int64_t, 1>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
    {
        const std::size_t example = i / length;
        const std::size_t document = example / per_document;
        if (effect.count(document) == 0)
        {
            for (std::size_t j = 0; j < d; ++j)
            {
                effect[document].push_back(0.7 * normal());
            }
        }
        const auto pos = static_cast<std::int64_t>(i % length);
        t.position(i) = pos;
        t.bucket(i) = pos / static_cast<std::int64_t>(length / 8);
        t.example_id(i) = static_cast<std::int64_t>(3 * example + 1);
        for (std::size_t j = 0; j < d; ++j)
        {
            t.vectors(i, j) = static_cast<T>(normal() * (1.0 + 0.2 * static_cast<double>(j)) + effect[document][j]
                                             + (j % 3 == 0 ? drift * static_cast<double>(pos) / 100.0 : 0.3));
        }
    }
    return t;
}

/// The table mapping example 3 e + 1 to document `first + e / per_document`, for `examples` examples.
std::shared_ptr<const ap::example_documents> documents(std::size_t examples, std::size_t per_document,
                                                       std::int64_t first = 0)
{
    std::vector<std::int64_t> e, doc;
    for (std::size_t i = 0; i < examples; ++i)
    {
        e.push_back(static_cast<std::int64_t>(3 * i + 1));
        doc.push_back(first + static_cast<std::int64_t>(i / per_document));
    }
    return std::make_shared<const ap::example_documents>(ap::make_example_documents(e, doc, "examples.csv"));
}

ap::head_options interval_options()
{
    ap::head_options o;
    o.confidence_intervals = true;
    o.sequence_influences = true;
    o.empirical_ap = true;
    return o;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

template <class T>
void check_identity_table()
{
    const auto q = document_tokens<T>(24 * 64, 6, 3, 2.0, 64, 1);
    const auto k = document_tokens<T>(24 * 64, 6, 4, 1.0, 64, 1);
    const ap::head_options plain = interval_options();
    ap::head_options identity = plain;
    std::vector<std::int64_t> ids;
    for (std::size_t e = 0; e < 24; ++e)
    {
        ids.push_back(static_cast<std::int64_t>(3 * e + 1));
    }
    identity.documents = std::make_shared<const ap::example_documents>(ap::make_example_documents(ids, ids));
    const auto a = ap::analyze_head(q, k, {0, 1, 0}, plain);
    const auto b = ap::analyze_head(q, k, {0, 1, 0}, identity);
    CHECK(a.metrics.n_sequences == 24);
    CHECK(a.metrics.n_documents == 24);
    CHECK(b.metrics.n_sequences == 24);
    CHECK(b.metrics.n_documents == 24);
    CHECK(std::isfinite(a.metrics.ap_overall_se));
    for (auto field : {&ap::head_metrics::ap_overall_se, &ap::head_metrics::ap_first20_se,
                       &ap::head_metrics::ap_last20_se, &ap::head_metrics::ap_drop_se,
                       &ap::head_metrics::ap_empirical_overall_se, &ap::head_metrics::bias_strength_se,
                       &ap::head_metrics::ap_overall_bias})
    {
        CHECK(same(a.metrics.*field, b.metrics.*field));
    }
    REQUIRE(a.profile.size() == b.profile.size());
    for (std::size_t j = 0; j < a.profile.size(); ++j)
    {
        CHECK(same(a.profile[j].plasticity_se, b.profile[j].plasticity_se));
        CHECK(same(a.profile[j].plasticity_empirical_se, b.profile[j].plasticity_empirical_se));
    }
    REQUIRE(a.sequence_influences.size() == b.sequence_influences.size());
    for (std::size_t i = 0; i < a.sequence_influences.size(); ++i)
    {
        CHECK(a.sequence_influences[i].document_id == b.sequence_influences[i].document_id);
        CHECK(a.sequence_influences[i].influence == b.sequence_influences[i].influence);
    }
}

template <class T>
void check_documents_sum_examples()
{
    const std::size_t per = 3, examples = 36;
    const auto q = document_tokens<T>(examples * 64, 5, 7, 2.0, 64, per);
    const auto k = document_tokens<T>(examples * 64, 5, 8, 1.0, 64, per);
    const ap::head_options plain = interval_options();
    ap::head_options grouped = plain;
    grouped.documents = documents(examples, per, 100);
    const auto a = ap::analyze_head(q, k, {2, 0, 0}, plain);
    const auto b = ap::analyze_head(q, k, {2, 0, 0}, grouped);
    CHECK(b.metrics.n_sequences == examples);
    CHECK(b.metrics.n_documents == examples / per);
    // The estimates themselves do not depend on the unit.
    CHECK(a.metrics.ap_overall == b.metrics.ap_overall);
    CHECK(a.metrics.bias_strength == b.metrics.bias_strength);
    // Every quantity: the document's influence is the sum of its examples'; the standard error
    // is sqrt(G / (G - 1) sum_d (sum_{e in d} phi_e)^2) over the G documents (the per-example
    // influences are centred, so are their document sums).
    std::map<std::pair<int, std::int64_t>, std::map<std::int64_t, double>> by_document;
    for (const auto& s : a.sequence_influences)
    {
        const std::int64_t document = 100 + (s.document_id - 1) / 3 / static_cast<std::int64_t>(per);
        by_document[{static_cast<int>(s.quantity), s.q_bucket}][document] += s.influence;
    }
    std::size_t checked = 0;
    for (const auto& s : b.sequence_influences)
    {
        const double want = by_document.at({static_cast<int>(s.quantity), s.q_bucket}).at(s.document_id);
        CHECK(std::abs(s.influence - want) <= 1e-12 * (std::abs(want) + 1e-6));
        ++checked;
    }
    CHECK(checked == b.sequence_influences.size());
    const auto se = [&](ap::influence_quantity quantity, std::int64_t bucket) {
        const auto& sums = by_document.at({static_cast<int>(quantity), bucket});
        double squares = 0.0;
        for (const auto& [document, phi] : sums)
        {
            squares += phi * phi;
        }
        const auto g = static_cast<double>(sums.size());
        return std::sqrt(g / (g - 1.0) * squares);
    };
    CHECK(b.metrics.ap_overall_se == Approx(se(ap::influence_quantity::ap_overall, 0)).epsilon(1e-12));
    CHECK(b.metrics.ap_drop_se == Approx(se(ap::influence_quantity::ap_drop, 0)).epsilon(1e-12));
    CHECK(b.metrics.ap_overall_se > 1.2 * a.metrics.ap_overall_se);  // the shared effects matter
    for (const auto& row : b.profile)
    {
        if (std::isfinite(row.plasticity_se))
        {
            CHECK(row.plasticity_se == Approx(se(ap::influence_quantity::ap_bucket, row.q_bucket)).epsilon(1e-12));
        }
    }
}
}  // namespace

TEST_CASE("example_documents: one example per document gives exactly the errors without a table")
{
    check_identity_table<double>();
    check_identity_table<float>();
}

TEST_CASE("example_documents: a document's influence is the sum of its examples', its error clusters them")
{
    check_documents_sum_examples<double>();
    check_documents_sum_examples<float>();
}

TEST_CASE("example_documents: fewer than 10 documents of 10 or more examples give NaN sequence-level errors")
{
    const auto q = document_tokens<double>(20 * 64, 5, 9, 2.0, 64, 3);
    const auto k = document_tokens<double>(20 * 64, 5, 10, 1.0, 64, 3);
    ap::head_options o = interval_options();
    const auto examples = ap::analyze_head(q, k, {0, 0, 0}, o);
    CHECK(std::isfinite(examples.metrics.ap_overall_se));
    CHECK(std::isfinite(examples.metrics.bias_strength_se));
    o.documents = documents(20, 3);  // 7 documents
    const auto r = ap::analyze_head(q, k, {0, 0, 0}, o);
    CHECK(r.metrics.n_sequences == 20);
    CHECK(r.metrics.n_documents == 7);
    CHECK(std::isnan(r.metrics.ap_overall_se));
    CHECK(std::isnan(r.metrics.ap_drop_se));
    CHECK(std::isnan(r.metrics.bias_strength_se));
    CHECK(std::isnan(r.metrics.ap_empirical_overall_se));
    CHECK(std::isfinite(r.metrics.ap_overall_bias));
    CHECK(r.sequence_influences.empty());
}

TEST_CASE("example_documents: bias_strength's jackknife deletes documents")
{
    const std::size_t per = 2, examples = 24, length = 64;
    const auto q = document_tokens<double>(examples * length, 4, 21, 3.0, length, per);
    const auto k = document_tokens<double>(examples * length, 4, 22, 1.5, length, per);
    ap::head_options o = interval_options();
    o.documents = documents(examples, per);
    const auto r = ap::analyze_head(q, k, {0, 0, 0}, o);
    // The reference: planar_rotation's bias_strength on the tokens of all documents but one,
    // each document left out in turn (the analysis orients keys by a sign that bias_strength
    // does not depend on, docs/method.md §8.5).
    const std::size_t g = examples / per;
    std::vector<double> theta;
    for (std::size_t left = 0; left < g; ++left)
    {
        auto keep = [&](const ap::head_tokens<double>& t) {
            std::vector<std::size_t> rows;
            for (std::size_t i = 0; i < t.example_id.size(); ++i)
            {
                if (static_cast<std::size_t>((t.example_id(i) - 1) / 3) / per != left)
                {
                    rows.push_back(i);
                }
            }
            xt::xtensor<double, 2> x = xt::xtensor<double, 2>::from_shape({rows.size(), t.vectors.shape()[1]});
            xt::xtensor<double, 1> pos = xt::xtensor<double, 1>::from_shape({rows.size()});
            for (std::size_t i = 0; i < rows.size(); ++i)
            {
                for (std::size_t c = 0; c < x.shape()[1]; ++c)
                {
                    x(i, c) = t.vectors(rows[i], c);
                }
                pos(i) = static_cast<double>(t.position(rows[i]));
            }
            return std::make_pair(x, pos);
        };
        const auto [qx, qt] = keep(q);
        const auto [kx, kt] = keep(k);
        theta.push_back(ap::planar_rotation(qx, qt, kx, kt).bias_strength);
    }
    double mean = 0.0;
    for (double x : theta)
    {
        mean += x / static_cast<double>(g);
    }
    double squares = 0.0;
    for (double x : theta)
    {
        squares += (x - mean) * (x - mean);
    }
    const double want = std::sqrt(static_cast<double>(g - 1) / static_cast<double>(g) * squares);
    CHECK(r.metrics.n_documents == g);
    CHECK(r.metrics.bias_strength_se == Approx(want).epsilon(1e-9));
    // And not the delete-one-example jackknife.
    const auto examples_run = ap::analyze_head(q, k, {0, 0, 0}, interval_options());
    CHECK(std::abs(examples_run.metrics.bias_strength_se - want) > 1e-6 * want);
}

TEST_CASE("example_documents: an example id without a row is refused, naming the table and the id")
{
    const auto q = document_tokens<double>(12 * 64, 4, 1, 2.0, 64, 1);
    const auto k = document_tokens<double>(12 * 64, 4, 2, 1.0, 64, 1);
    ap::head_options o = interval_options();
    o.documents = documents(11, 1);  // example 34 (the 12th) has no row
    CHECK_THROWS_WITH(ap::analyze_head(q, k, {0, 0, 0}, o),
                      Catch::Contains("example id 34") && Catch::Contains("examples.csv"));
    CHECK_THROWS_WITH(ap::make_example_documents({1, 2, 1}, {0, 0, 0}), Catch::Contains("example id 1 has two rows"));
    CHECK_THROWS_AS(ap::make_example_documents({1, 2}, {0}), std::invalid_argument);
}
