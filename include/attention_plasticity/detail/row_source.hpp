#ifndef ATTENTION_PLASTICITY_DETAIL_ROW_SOURCE_HPP
#define ATTENTION_PLASTICITY_DETAIL_ROW_SOURCE_HPP

// The rows a step reads, computed as it reads them from the caller's matrix: row i of the
// step's matrix is row index[i] of the caller's (the rows kept by docs/method.md §2.2),
// multiplied componentwise by the signs of §2.1 and reflected by the H of §2.5, each when
// given. The public steps read a plain matrix through it; the pipeline gives them its
// caller's buffers with the transforms, so no oriented or rotated copy of the queries or keys
// is ever made (a pass converts each row, in double, while it is in cache).

#include <cstddef>
#include <vector>

#include "matrix.hpp"
#include "reflection.hpp"

namespace attention_plasticity
{
namespace detail
{
    /// How many rows ahead of the one it reads a pass over the rows in order asks the memory
    /// system for (row_source::prefetch): the kept rows of a subsampled head are scattered
    /// through the caller's buffer, where the hardware's stream prefetch loses them.
    constexpr std::size_t row_prefetch_distance = 8;

    template <class T>
    struct row_source
    {
        const T* data = nullptr;
        std::size_t rows = 0;
        std::size_t cols = 0;
        std::size_t ld = 0;
        const std::size_t* index = nullptr;         // row i is data row index[i]; null: row i
        const double* sign = nullptr;               // multiplied componentwise; null: none
        const double* reflection = nullptr;         // unit v of H = I - 2 v v^T; null: none
        const double* reflection_factors = nullptr;  // per row i: 2 (s x_i) . v; null: computed

        /// The caller's row behind row i.
        std::size_t source_row(std::size_t i) const noexcept { return index != nullptr ? index[i] : i; }
        const T* raw(std::size_t i) const noexcept { return data + source_row(i) * ld; }

        /// Components [j0, j1) of row i (the signs applied, not reflected) into out, in double.
        void load_oriented(std::size_t i, std::size_t j0, std::size_t j1, double* out) const noexcept
        {
            const T* in = raw(i);
            if (sign != nullptr)
            {
                for (std::size_t j = j0; j < j1; ++j)
                {
                    out[j - j0] = sign[j] * static_cast<double>(in[j]);
                }
            }
            else
            {
                for (std::size_t j = j0; j < j1; ++j)
                {
                    out[j - j0] = static_cast<double>(in[j]);
                }
            }
        }

        /// Components [j0, j1) of row i into out. With a reflection and no per-row scales,
        /// only whole rows (j0 = 0, j1 = cols).
        void load(std::size_t i, std::size_t j0, std::size_t j1, double* out) const noexcept
        {
            load_oriented(i, j0, j1, out);
            if (reflection != nullptr)
            {
                const double scale =
                    reflection_factors != nullptr ? reflection_factors[i] : reflection_scale(out, reflection, cols);
                for (std::size_t j = j0; j < j1; ++j)
                {
                    out[j - j0] = reflected(out[j - j0], scale, reflection[j]);
                }
            }
        }

        void load(std::size_t i, double* out) const noexcept { load(i, 0, cols, out); }

        /// Asks the memory system for the whole of row i ahead of its use: passes that read a
        /// part of each row, or rows out of order, wait for memory on every row otherwise.
        void prefetch(std::size_t i) const noexcept
        {
#if defined(__GNUC__)
            const char* p = reinterpret_cast<const char*>(raw(i));
            for (std::size_t b = 0; b < cols * sizeof(T); b += 64)
            {
                __builtin_prefetch(p + b);
            }
#else
            (void)i;
#endif
        }

        /// prefetch for components [j0, j1) of row i alone.
        void prefetch(std::size_t i, std::size_t j0, std::size_t j1) const noexcept
        {
#if defined(__GNUC__)
            const char* p = reinterpret_cast<const char*>(raw(i) + j0);
            for (std::size_t b = 0; b < (j1 - j0) * sizeof(T); b += 64)
            {
                __builtin_prefetch(p + b);
            }
#else
            (void)i;
            (void)j0;
            (void)j1;
#endif
        }

        /// Whole rows ids[0..count) into out (count x cols, dense): as load, with the rows'
        /// reflection factors computed together (several rows at once) when not given.
        void load_rows(const std::size_t* ids, std::size_t count, double* out) const noexcept
        {
            if (reflection == nullptr || reflection_factors != nullptr)
            {
                for (std::size_t r = 0; r < count; ++r)
                {
                    load(ids[r], 0, cols, out + r * cols);
                }
                return;
            }
            constexpr std::size_t group = 8;
            double scale[group];
            for (std::size_t r0 = 0; r0 < count; r0 += group)
            {
                const std::size_t m = count - r0 < group ? count - r0 : group;
                double* block = out + r0 * cols;
                for (std::size_t r = 0; r < m; ++r)
                {
                    load_oriented(ids[r0 + r], 0, cols, block + r * cols);
                }
                reflection_scales(block, cols, m, reflection, cols, scale);
                for (std::size_t r = 0; r < m; ++r)
                {
                    double* row = block + r * cols;
                    for (std::size_t j = 0; j < cols; ++j)
                    {
                        row[j] = reflected(row[j], scale[r], reflection[j]);
                    }
                }
            }
        }
    };

    /// The plain rows of a matrix.
    template <class T>
    row_source<T> rows_of(const matrix_view<T>& m) noexcept
    {
        row_source<T> s;
        s.data = m.data;
        s.rows = m.rows;
        s.cols = m.cols;
        s.ld = m.ld;
        return s;
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
