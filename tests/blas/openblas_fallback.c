/* A CPU on which OpenBLAS falls back to its generic kernels, simulated for the tests
 * (docs/method.md §7.7). Preloaded (LD_PRELOAD), this library answers OpenBLAS's own
 * getenv("OPENBLAS_CORETYPE") with "Prescott" when the variable is not set, which is exactly
 * what OpenBLAS 0.3.21 does by itself on a CPU it does not know (its dynamic-arch code takes the
 * variable when set, else detects the CPU). Every other caller, and OpenBLAS itself when the
 * variable is set, gets the true environment: a front end cannot tell this from a real
 * fallback. The caller is OpenBLAS when the return address lies in a shared object whose file
 * name holds "openblas" (Debian: .../openblas-pthread/libblas.so.3, libopenblas.so.0) but not
 * "scipy_openblas" (NumPy's own copy, which knows the CPU).
 *
 * Built by tests/CMakeLists.txt (target ap_openblas_fallback).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

static char* (*real_getenv)(const char*) = NULL;

static int called_from_openblas(const void* address)
{
    Dl_info info;
    if (dladdr(address, &info) == 0 || info.dli_fname == NULL)
    {
        return 0;
    }
    return strstr(info.dli_fname, "openblas") != NULL && strstr(info.dli_fname, "scipy_openblas") == NULL;
}

char* getenv(const char* name)
{
    if (real_getenv == NULL)
    {
        /* POSIX's dlsym returns an object pointer: copied, not cast (ISO C has no such cast). */
        void* symbol = dlsym(RTLD_NEXT, "getenv");
        memcpy(&real_getenv, &symbol, sizeof symbol);
    }
    char* value = real_getenv(name);
    if (value == NULL && strcmp(name, "OPENBLAS_CORETYPE") == 0
        && called_from_openblas(__builtin_return_address(0)))
    {
        static char prescott[] = "Prescott";
        return prescott;
    }
    return value;
}
