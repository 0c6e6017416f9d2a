#ifndef ATTENTION_PLASTICITY_DETAIL_OPENBLAS_HPP
#define ATTENTION_PLASTICITY_DETAIL_OPENBLAS_HPP

// OpenBLAS's own functions, the one place they are declared. Weak: null unless the program
// links OpenBLAS (another BLAS, or none, is fine). Declared here, not through OpenBLAS's
// <cblas.h>, which clashes with xtensor-blas's declarations of the cblas functions.
// gotoblas_dynamic_quit/init and blas_thread_shutdown_ are exported by DYNAMIC_ARCH builds (as
// Debian's): forget and select the kernels again (reading OPENBLAS_CORETYPE), stop the pool.

#if defined(__GNUC__) && defined(__ELF__)
extern "C" char* openblas_get_corename(void) __attribute__((weak));
extern "C" char* openblas_get_config(void) __attribute__((weak));
extern "C" int openblas_get_num_threads(void) __attribute__((weak));
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
#define ATTENTION_PLASTICITY_HAS_OPENBLAS_HOOKS 1
#endif

#endif
