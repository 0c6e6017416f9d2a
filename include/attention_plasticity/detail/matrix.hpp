#ifndef ATTENTION_PLASTICITY_DETAIL_MATRIX_HPP
#define ATTENTION_PLASTICITY_DETAIL_MATRIX_HPP

// Row-major views over xtensor expressions: a pointer and a leading dimension when the
// expression already has that layout and value type, an owned copy otherwise. The
// algorithms work on these, so user tensors are read without copies where possible.

#include <cstddef>
#include <type_traits>
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
    template <class T>
    struct matrix_view
    {
        const T* data = nullptr;
        std::size_t rows = 0;
        std::size_t cols = 0;
        std::size_t ld = 0;
        std::vector<T> storage;  // holds the copy when one was needed

        const T* row(std::size_t i) const noexcept { return data + i * ld; }
        T operator()(std::size_t i, std::size_t j) const noexcept { return data[i * ld + j]; }
    };

    template <class T>
    struct vector_view
    {
        const T* data = nullptr;
        std::size_t size = 0;
        std::vector<T> storage;

        T operator[](std::size_t i) const noexcept { return data[i]; }
        const T* begin() const noexcept { return data; }
        const T* end() const noexcept { return data + size; }
    };

    template <class E>
    using expression_value_t = typename std::decay_t<E>::value_type;

    /// A 2-D expression as a row-major matrix of T. Throws std::invalid_argument when the
    /// expression is not 2-D.
    template <class T, class E>
    matrix_view<T> as_matrix(const xt::xexpression<E>& expression, const char* function, const char* name)
    {
        const auto& e = expression.derived_cast();
        if (e.dimension() != 2)
        {
            throw_invalid(function, name, " must be 2-D, got ", e.dimension(), " dimensions");
        }
        matrix_view<T> view;
        view.rows = e.shape()[0];
        view.cols = e.shape()[1];
        view.ld = view.cols;
        if constexpr (xt::has_data_interface<std::decay_t<E>>::value
                      && std::is_same<std::decay_t<expression_value_t<E>>, T>::value)
        {
            const auto& strides = e.strides();
            const bool unit_cols = view.cols <= 1 || strides[1] == 1;
            const auto row_stride = static_cast<std::ptrdiff_t>(strides[0]);
            const bool rows_ok = view.rows <= 1 || row_stride >= static_cast<std::ptrdiff_t>(view.cols);
            if (unit_cols && rows_ok)
            {
                view.data = e.data() + e.data_offset();
                view.ld = view.rows <= 1 ? view.cols : static_cast<std::size_t>(row_stride);
                return view;
            }
        }
        view.storage.resize(view.rows * view.cols);
        std::size_t k = 0;
        for (std::size_t i = 0; i < view.rows; ++i)
        {
            for (std::size_t j = 0; j < view.cols; ++j)
            {
                view.storage[k++] = static_cast<T>(e(i, j));
            }
        }
        view.data = view.storage.data();
        return view;
    }

    /// A 1-D expression as a contiguous vector of T.
    template <class T, class E>
    vector_view<T> as_vector(const xt::xexpression<E>& expression, const char* function, const char* name)
    {
        const auto& e = expression.derived_cast();
        if (e.dimension() != 1)
        {
            throw_invalid(function, name, " must be 1-D, got ", e.dimension(), " dimensions");
        }
        vector_view<T> view;
        view.size = e.shape()[0];
        if constexpr (xt::has_data_interface<std::decay_t<E>>::value
                      && std::is_same<std::decay_t<expression_value_t<E>>, T>::value)
        {
            if (view.size <= 1 || e.strides()[0] == 1)
            {
                view.data = e.data() + e.data_offset();
                return view;
            }
        }
        view.storage.resize(view.size);
        for (std::size_t i = 0; i < view.size; ++i)
        {
            view.storage[i] = static_cast<T>(e(i));
        }
        view.data = view.storage.data();
        return view;
    }

    /// std::domain_error naming the first non-finite value by row and column.
    template <class T>
    void require_finite(const char* function, const char* name, const matrix_view<T>& m)
    {
        require_finite(function, name, m.data, m.rows, m.cols, m.ld);
    }

    /// std::domain_error naming the first non-finite value by its index.
    template <class T>
    void require_finite(const char* function, const char* name, const vector_view<T>& v)
    {
        require_finite(function, name, v.data, v.size);
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
