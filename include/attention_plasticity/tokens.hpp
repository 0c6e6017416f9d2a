#ifndef ATTENTION_PLASTICITY_TOKENS_HPP
#define ATTENTION_PLASTICITY_TOKENS_HPP

// The input of one head (docs/method.md §1): for the queries and for the keys, n vectors of
// dimension d with their position, bucket and example id columns, and which head it is.
// tokens_view reads the caller's buffers in place (float or double vectors, int64 columns);
// head_tokens owns its data and gives such a view.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

namespace attention_plasticity
{
/// Which head (docs/method.md §1): the layer, the query head and the key head of its GQA
/// group. layer and q_head also seed the key-pair sampler (docs/method.md §2.15).
struct head_id
{
    std::int64_t layer = 0;
    std::int64_t q_head = 0;
    std::int64_t k_head = 0;
};

/// A read-only, non-owning N-D tensor over a row-major buffer the caller keeps alive.
template <class T, std::size_t N>
using const_tensor_view = xt::xtensor_adaptor<xt::xbuffer_adaptor<const T*, xt::no_ownership, std::allocator<T>>, N>;

/// One kind (queries or keys) of one head, over the caller's buffers: n vectors of
/// dimension d (row-major, contiguous) and their columns (docs/method.md §1). example_id may
/// be empty for queries (the method does not use it).
template <class T>
struct tokens_view
{
    const_tensor_view<T, 2> vectors;               // n x d
    const_tensor_view<std::int64_t, 1> position;   // n, token position, >= 0
    const_tensor_view<std::int64_t, 1> bucket;     // n, position bucket id
    const_tensor_view<std::int64_t, 1> example_id; // n (keys), or empty (queries)
};

namespace detail
{
    template <class T, std::size_t N>
    const_tensor_view<T, N> const_view_of(const T* data, const std::array<std::size_t, N>& shape)
    {
        std::size_t size = 1;
        for (std::size_t extent : shape)
        {
            size *= extent;
        }
        using buffer = xt::xbuffer_adaptor<const T*, xt::no_ownership, std::allocator<T>>;
        return const_tensor_view<T, N>(buffer(data, size), shape);
    }
}  // namespace detail

/// A view of n tokens of dimension d: vectors is n x d row-major; the columns have n entries
/// each; example_id may be null (then the view's example_id is empty). Nothing is copied:
/// the buffers must outlive the view.
template <class T>
tokens_view<T> make_tokens_view(const T* vectors, std::size_t n, std::size_t d, const std::int64_t* position,
                                const std::int64_t* bucket, const std::int64_t* example_id = nullptr)
{
    return tokens_view<T>{detail::const_view_of<T, 2>(vectors, {n, d}),
                          detail::const_view_of<std::int64_t, 1>(position, {n}),
                          detail::const_view_of<std::int64_t, 1>(bucket, {n}),
                          detail::const_view_of<std::int64_t, 1>(example_id, {example_id != nullptr ? n : 0})};
}

/// One kind of one head with its own storage (docs/method.md §1). example_id may be empty
/// for queries.
template <class T>
struct head_tokens
{
    xt::xtensor<T, 2> vectors;
    xt::xtensor<std::int64_t, 1> position;
    xt::xtensor<std::int64_t, 1> bucket;
    xt::xtensor<std::int64_t, 1> example_id;
};

/// The view of a head_tokens (which must outlive it). Column sizes are taken as they are,
/// so that analyze_head can report a mismatch.
template <class T>
tokens_view<T> as_view(const head_tokens<T>& tokens)
{
    return tokens_view<T>{
        detail::const_view_of<T, 2>(tokens.vectors.data(), {tokens.vectors.shape()[0], tokens.vectors.shape()[1]}),
        detail::const_view_of<std::int64_t, 1>(tokens.position.data(), {tokens.position.size()}),
        detail::const_view_of<std::int64_t, 1>(tokens.bucket.data(), {tokens.bucket.size()}),
        detail::const_view_of<std::int64_t, 1>(tokens.example_id.data(), {tokens.example_id.size()})};
}
}  // namespace attention_plasticity

#endif
