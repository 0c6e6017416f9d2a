#ifndef ATTENTION_PLASTICITY_DETAIL_BLAS_HPP
#define ATTENTION_PLASTICITY_DETAIL_BLAS_HPP

// Raw-pointer BLAS calls through xtensor-blas's bundled cxxblas layer. Never include the
// system <cblas.h> next to this: xtensor-blas declares the cblas symbols itself.

#include <cstddef>

#include <xtensor-blas/xblas.hpp>

namespace attention_plasticity
{
namespace detail
{
    using blas_int = xt::blas_index_t;

    /// C (m x n, row-major, ldc) = alpha * op(A) * op(B) + beta * C.
    template <class T>
    void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
              const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc)
    {
        if (m == 0 || n == 0)
        {
            return;
        }
        cxxblas::gemm<blas_int>(cxxblas::RowMajor, transpose_a ? cxxblas::Trans : cxxblas::NoTrans,
                                transpose_b ? cxxblas::Trans : cxxblas::NoTrans, static_cast<blas_int>(m),
                                static_cast<blas_int>(n), static_cast<blas_int>(k), alpha, a,
                                static_cast<blas_int>(lda), b, static_cast<blas_int>(ldb), beta, c,
                                static_cast<blas_int>(ldc));
    }

    /// Upper triangle of C (n x n, row-major) = alpha * A^T A + beta * C, A is k x n.
    template <class T>
    void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda, T beta, T* c,
                  std::size_t ldc)
    {
        if (n == 0)
        {
            return;
        }
        cxxblas::syrk<blas_int>(cxxblas::RowMajor, cxxblas::Upper, cxxblas::Trans, static_cast<blas_int>(n),
                                static_cast<blas_int>(k), alpha, a, static_cast<blas_int>(lda), beta, c,
                                static_cast<blas_int>(ldc));
    }

    /// B (m x n, row-major, ldb) = B * T, T the upper triangle (diagonal included) of an n x n
    /// row-major matrix (its lower triangle is not read): half the flops of a GEMM.
    template <class T>
    void trmm_right_upper(std::size_t m, std::size_t n, const T* t, std::size_t ldt, T* b, std::size_t ldb)
    {
        if (m == 0 || n == 0)
        {
            return;
        }
        cxxblas::trmm<blas_int>(cxxblas::RowMajor, cxxblas::Right, cxxblas::Upper, cxxblas::NoTrans,
                                cxxblas::NonUnit, static_cast<blas_int>(m), static_cast<blas_int>(n), T(1), t,
                                static_cast<blas_int>(ldt), b, static_cast<blas_int>(ldb));
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
