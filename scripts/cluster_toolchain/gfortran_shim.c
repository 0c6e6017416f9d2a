/* The two pieces of the GNU Fortran runtime that the reference LAPACK objects of Debian's
 * liblapack-pic need once OpenBLAS has replaced xerbla (which alone does Fortran I/O), so that
 * the wheel's OpenBLAS carries no libgfortran (built against glibc 2.34 by Debian) and needs no
 * Fortran compiler: scripts/build_cluster_deps.sh, docs/method.md §7.7.
 *
 * _gfortran_concat_string: Fortran's // into a fixed-length result (ilaenv, the *la_ routines'
 * option strings), libgfortran's intrinsics/string_intrinsics_inc.c semantics: the first string,
 * then the second, cut to the result's length, blank-padded. Lengths are size_t (gfortran >= 8).
 * second_/dsecnd_: LAPACK's CPU-time timers (Debian builds them from second_INT_ETIME.f and
 * dsecnd_INT_ETIME.f, which call ETIME: the process's user time in seconds), given here in C so
 * that _gfortran_etime is not needed; the script drops those two objects. The string function is
 * hidden: LAPACK's objects in the same library bind to it, and it never stands in for a
 * libgfortran of another library in the process. */
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>

__attribute__((visibility("hidden"))) void _gfortran_concat_string(size_t destlen, char* dest, size_t len1, const char* s1, size_t len2,
                             const char* s2)
{
    if (len1 >= destlen)
    {
        memcpy(dest, s1, destlen);
        return;
    }
    memcpy(dest, s1, len1);
    dest += len1;
    destlen -= len1;
    if (len2 >= destlen)
    {
        memcpy(dest, s2, destlen);
        return;
    }
    memcpy(dest, s2, len2);
    memset(dest + len2, ' ', destlen - len2);
}

static double user_seconds(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
    {
        return 0.0;
    }
    return (double)usage.ru_utime.tv_sec + 1e-6 * (double)usage.ru_utime.tv_usec;
}

float second_(void)
{
    return (float)user_seconds();
}

double dsecnd_(void)
{
    return user_seconds();
}
