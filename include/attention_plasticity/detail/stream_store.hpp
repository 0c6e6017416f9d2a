#ifndef ATTENTION_PLASTICITY_DETAIL_STREAM_STORE_HPP
#define ATTENTION_PLASTICITY_DETAIL_STREAM_STORE_HPP

// Writing a buffer far larger than the caches (the column blocks of the noise normality,
// docs/method.md §2.8): whole 64-byte lines are stored without first reading them into the
// cache (SSE2 non-temporal stores, part of every x86-64 CPU), which halves the memory
// traffic of the write. Elsewhere, or for a line that is not 64-byte aligned, a plain copy.
// The values written are the same either way.

#include <cstddef>
#include <cstdint>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace attention_plasticity
{
namespace detail
{
    /// dst[0..8) = src[0..8).
    inline void store_line(double* dst, const double* src) noexcept
    {
#if defined(__SSE2__)
        if ((reinterpret_cast<std::uintptr_t>(dst) & 63u) == 0)
        {
            for (std::size_t k = 0; k < 8; k += 2)
            {
                _mm_stream_pd(dst + k, _mm_loadu_pd(src + k));
            }
            return;
        }
#endif
        for (std::size_t k = 0; k < 8; ++k)
        {
            dst[k] = src[k];
        }
    }

    /// Orders the stores of store_line before later stores (call before another thread reads
    /// the buffer).
    inline void stores_done() noexcept
    {
#if defined(__SSE2__)
        _mm_sfence();
#endif
    }

    /// A buffer of doubles whose data() is 64-byte aligned; resize leaves the values
    /// unspecified (nothing is written: the buffer is filled by its user).
    class aligned_doubles
    {
    public:
        void resize(std::size_t n)
        {
            if (n > m_size)
            {
                m_storage.reset(new double[n + 8]);
                m_size = n;
                const auto address = reinterpret_cast<std::uintptr_t>(m_storage.get());
                m_offset = ((64 - (address & 63u)) & 63u) / sizeof(double);
            }
        }

        double* data() noexcept { return m_storage.get() + m_offset; }

    private:
        std::unique_ptr<double[]> m_storage;
        std::size_t m_size = 0;
        std::size_t m_offset = 0;
    };
}  // namespace detail
}  // namespace attention_plasticity

#endif
