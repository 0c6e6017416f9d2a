#ifndef ATTENTION_PLASTICITY_DETAIL_STRIDED_HPP
#define ATTENTION_PLASTICITY_DETAIL_STRIDED_HPP

// Samples of xtensor expressions as (pointer, strides) without copying when possible, and
// gathered into contiguous doubles for the statistics (which accumulate in double), with the
// checks every public statistic makes: dimension (std::invalid_argument) and finite values
// (std::domain_error), named after the caller's function and argument.

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xutils.hpp>

#include "errors.hpp"
#include "finite.hpp"

namespace attention_plasticity
{
namespace detail
{
    template <class E, class = void>
    struct has_data_offset : std::false_type
    {
    };

    template <class E>
    struct has_data_offset<E, std::void_t<decltype(std::declval<const E&>().data_offset())>> : std::true_type
    {
    };

    template <class E>
    constexpr bool is_strided_expression_v = xt::has_data_interface<E>::value && xt::has_strides<E>::value
                                             && has_data_offset<E>::value
                                             && std::is_arithmetic<typename E::value_type>::value;

    // Calls f(pointer, strides) on e, evaluating e into a temporary container first when it
    // has no strided storage (e.g. an xfunction).
    template <std::size_t N, class E, class F>
    decltype(auto) with_strided(const E& e, F&& f)
    {
        if constexpr (is_strided_expression_v<E>)
        {
            const auto* p = e.data() + e.data_offset();
            return f(p, e.strides());
        }
        else
        {
            using value_type = std::decay_t<typename E::value_type>;
            const xt::xtensor<value_type, N> tmp = e;
            return f(tmp.data(), tmp.strides());
        }
    }

    template <class T>
    void gather(const T* data, std::size_t n, std::ptrdiff_t stride, std::vector<double>& out)
    {
        out.resize(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            out[i] = static_cast<double>(data[static_cast<std::ptrdiff_t>(i) * stride]);
        }
    }

    /// The 1-D sample x of a public statistic as contiguous doubles in `out`, checked: 1-D
    /// (std::invalid_argument), every value finite (std::domain_error naming its index).
    template <class E>
    void gather_sample(const char* function, const char* name, const xt::xexpression<E>& x, std::vector<double>& out)
    {
        const E& e = x.derived_cast();
        require_dimension(function, name, e, 1);
        with_strided<1>(e, [&](const auto* p, const auto& strides) {
            gather(p, e.shape()[0], static_cast<std::ptrdiff_t>(strides[0]), out);
        });
        require_finite(function, name, out.data(), out.size());
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
