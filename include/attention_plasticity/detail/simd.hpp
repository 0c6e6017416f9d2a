#ifndef ATTENTION_PLASTICITY_DETAIL_SIMD_HPP
#define ATTENTION_PLASTICITY_DETAIL_SIMD_HPP

// Wider SIMD for loops whose order of operations is fixed in the source (docs/method.md §7.1):
// sums side by side over columns, or over a fixed number of lanes. Such a loop gives the same
// bits whatever the vector width, so on x86-64 it is also compiled for AVX2, without FMA (no
// contraction of a product and a sum: the same operations), and that copy is chosen when the
// running CPU has AVX2. AP_NO_AVX2_DISPATCH turns it off (the baseline copy only).
//
//   template <class T> AP_SIMD_INLINE void body(...);            // the loop, once
//   AP_SIMD_AVX2 void body_avx2(...) { body(...); }               // its AVX2 copy
//   if (cpu_has_avx2()) body_avx2(...); else body(...);           // under AP_SIMD_DISPATCH
// (lambdas the body calls: AP_SIMD_LAMBDA after their parameters, so they are inlined too).

#if defined(__GNUC__) && defined(__x86_64__) && !defined(AP_NO_AVX2_DISPATCH)
#define AP_SIMD_DISPATCH 1
#define AP_SIMD_INLINE __attribute__((always_inline)) inline
#define AP_SIMD_AVX2 __attribute__((target("avx2")))
#define AP_SIMD_LAMBDA __attribute__((always_inline))
#else
#define AP_SIMD_INLINE inline
#define AP_SIMD_LAMBDA
#endif

namespace attention_plasticity
{
namespace detail
{
#ifdef AP_SIMD_DISPATCH
    /// Whether the running CPU has AVX2 (asked once).
    inline bool cpu_has_avx2() noexcept
    {
        static const bool avx2 = __builtin_cpu_supports("avx2");
        return avx2;
    }
#endif
}  // namespace detail
}  // namespace attention_plasticity

#endif
