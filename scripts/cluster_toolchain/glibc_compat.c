/* The glibc functions newer than 2.28 that the cluster wheel's module would otherwise need
 * (scripts/build_wheel.sh): its code is compiled by Debian's g++ against Debian's glibc 2.36
 * headers and libstdc++ 12 (linked in statically), then linked against glibc 2.28's symbols, and
 * these four are what that link finds missing (-z defs). Each is given here, hidden (the module
 * binds to its own copy; nothing is exported), with the meaning glibc gives it:
 *
 * - __libc_single_threaded (2.32): libstdc++'s shortcut for reference counts; 0 = "maybe several
 *   threads", always true and always safe (the atomic path, as on glibc before 2.32).
 * - pthread_cond_clockwait (2.30): a wait until a time of a given clock (std::condition_variable
 *   with steady_clock); done as pthread_cond_timedwait until the same remaining time measured on
 *   CLOCK_REALTIME, which is how libstdc++ waits on glibc without it.
 * - arc4random (2.36): std::random_device's "default" source in libstdc++ 12; the kernel's
 *   getrandom (glibc 2.25), retried on EINTR.
 * - _dl_find_object (2.35): not needed: the module unwinds with the system's libgcc_s (the
 *   manylinux policy's), not libgcc_eh, whose lookup of exception tables calls it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#define AP_HIDDEN __attribute__((visibility("hidden")))

AP_HIDDEN char __libc_single_threaded = 0;

AP_HIDDEN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                     const struct timespec* abstime)
{
    if (clock == CLOCK_REALTIME)
    {
        return pthread_cond_timedwait(cond, mutex, abstime);
    }
    struct timespec now, real, until;
    if (clock_gettime(clock, &now) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0)
    {
        return EINVAL;
    }
    long long ns = (long long)(abstime->tv_sec - now.tv_sec) * 1000000000LL + (abstime->tv_nsec - now.tv_nsec);
    if (ns < 0)
    {
        ns = 0;
    }
    ns += real.tv_nsec;
    until.tv_sec = real.tv_sec + (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    return pthread_cond_timedwait(cond, mutex, &until);
}

AP_HIDDEN uint32_t arc4random(void)
{
    uint32_t value = 0;
    while (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value)
    {
        if (errno != EINTR)
        {
            break;
        }
    }
    return value;
}
