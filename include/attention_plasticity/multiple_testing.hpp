#ifndef ATTENTION_PLASTICITY_MULTIPLE_TESTING_HPP
#define ATTENTION_PLASTICITY_MULTIPLE_TESTING_HPP

// Adjusted p-values of a family of tests (docs/method.md §8.6): the Benjamini-Hochberg q-values
// (step-up; the false discovery rate of the tests with q <= alpha is at most alpha for
// independent or positively dependent tests) and Holm's step-down adjusted p-values (the
// family-wise error rate of the tests with p_holm <= alpha is at most alpha under any
// dependence). Both as R's p.adjust(p, "BH") and p.adjust(p, "holm") define them. A NaN p is no
// test: it stays NaN and does not count in the family's size m.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>

namespace attention_plasticity
{
/// The adjusted p-values of a family, each in the order of the p-values given.
struct adjusted_p_values
{
    xt::xtensor<double, 1> benjamini_hochberg;  // q_(i) = min over j >= i of p_(j) m / j, at most 1
    xt::xtensor<double, 1> holm;                // max over j <= i of min(1, p_(j) (m - j + 1))
};

/// Benjamini-Hochberg q-values and Holm's adjusted p-values of the p-values `p` (1-D, each in
/// [0, 1] or NaN). p_(1) <= ... <= p_(m) are the m p-values that are not NaN; ties keep their
/// order (the adjusted values of tied p are equal). O(m log m).
template <class E>
adjusted_p_values adjust_p_values(const xt::xexpression<E>& p_expression)
{
    const xt::xtensor<double, 1> p = p_expression.derived_cast();
    const std::size_t n = p.size();
    adjusted_p_values out;
    out.benjamini_hochberg = xt::xtensor<double, 1>::from_shape({n});
    out.holm = xt::xtensor<double, 1>::from_shape({n});
    std::vector<std::size_t> tested;
    for (std::size_t i = 0; i < n; ++i)
    {
        out.benjamini_hochberg(i) = out.holm(i) = std::numeric_limits<double>::quiet_NaN();
        if (!std::isnan(p(i)))
        {
            tested.push_back(i);
        }
    }
    std::stable_sort(tested.begin(), tested.end(), [&](std::size_t u, std::size_t v) { return p(u) < p(v); });
    const std::size_t m = tested.size();
    double running = 1.0;
    for (std::size_t i = m; i-- > 0;)
    {
        running = std::min(running, p(tested[i]) * static_cast<double>(m) / static_cast<double>(i + 1));
        out.benjamini_hochberg(tested[i]) = running;
    }
    running = 0.0;
    for (std::size_t i = 0; i < m; ++i)
    {
        running = std::max(running, std::min(1.0, p(tested[i]) * static_cast<double>(m - i)));
        out.holm(tested[i]) = running;
    }
    return out;
}
}  // namespace attention_plasticity

#endif
