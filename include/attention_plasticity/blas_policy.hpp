#ifndef ATTENTION_PLASTICITY_BLAS_POLICY_HPP
#define ATTENTION_PLASTICITY_BLAS_POLICY_HPP

// The BLAS kernel policy (docs/method.md §7.7): which OpenBLAS kernels and how many OpenBLAS
// threads every front end runs with, so that the same dump and options give the same bytes from
// the C++ programs and the Python package on any CPU, and a run with N threads uses N CPUs.
//
// OpenBLAS picks its kernels when it is loaded: the variable OPENBLAS_CORETYPE when set, else its
// own detection, which falls back to the generic SSE3 "Prescott" kernels on CPUs it does not know
// (Debian's 0.3.21 on recent ones); kernels differ in speed and in the last bits of a GEMM. Its
// thread pool spins beside the caller's threads after it starts, and a GEMM's last bits also
// depend on how many threads share it. So every front end calls select_blas_kernels() once, at
// its start, before any BLAS call:
// - on an x86-64 CPU with AVX2 and FMA, unless OPENBLAS_CORETYPE is set (the user's choice is
//   kept), the kernels become OpenBLAS's "Haswell" ones (AVX2 + FMA): the same on every such CPU,
//   whichever OpenBLAS picked. OpenBLAS (built with DYNAMIC_ARCH, as Debian's is) selects them
//   again in the running process: no second process, no change to the environment;
// - OpenBLAS runs on one thread and its pool is stopped: the library shares its work among its
//   own threads (the same results for any number of them, docs/method.md §7.1).
// AP_OPENBLAS_POLICY=off in the environment keeps OpenBLAS's own choice of kernels (threads are
// still one). Another BLAS, or an OpenBLAS without DYNAMIC_ARCH: kept as it is, and reported.
// This header includes no BLAS header; the OpenBLAS functions it calls are declared weak.

#include <cstdlib>
#include <mutex>
#include <string>

#include <strings.h>

#include "detail/openblas.hpp"

namespace attention_plasticity
{
/// The kernels the policy chooses on an x86-64 CPU with AVX2 and FMA.
constexpr const char* blas_policy_coretype = "Haswell";

/// What select_blas_kernels() found and did.
struct blas_selection
{
    bool openblas = false;        // the process runs on OpenBLAS
    std::string loaded_core;      // the kernels OpenBLAS had chosen when it was loaded
    std::string core;             // the kernels in use now, e.g. "Haswell", "Prescott"
    std::string config;           // openblas_get_config(), e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
    bool cpu_avx2 = false;        // the CPU has AVX2 and FMA
    bool cpu_avx512 = false;      // the CPU has AVX-512F
    bool user_coretype = false;   // OPENBLAS_CORETYPE was set in the environment (kept)
    bool policy_off = false;      // AP_OPENBLAS_POLICY=off (OpenBLAS's choice kept)
    bool switched = false;        // the kernels were selected again (loaded_core -> core)
    bool cannot_switch = false;   // the policy asked for other kernels, this OpenBLAS cannot
    int threads = 0;              // OpenBLAS threads now (1 after the selection)
    bool generic = false;         // AVX2 CPU, kernels without AVX2
};

namespace detail
{
    inline bool cpu_has_avx2_fma() noexcept
    {
#if defined(__GNUC__) && defined(__x86_64__)
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        return false;
#endif
    }

    inline bool cpu_has_avx512() noexcept
    {
#if defined(__GNUC__) && defined(__x86_64__)
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
#else
        return false;
#endif
    }

#ifdef ATTENTION_PLASTICITY_HAS_OPENBLAS_HOOKS
    inline std::string openblas_core()
    {
        const char* core = openblas_get_corename != nullptr ? openblas_get_corename() : nullptr;
        return core != nullptr ? core : "";
    }
#endif

    /// Whether OpenBLAS's kernels for `core` use AVX2 + FMA (or AVX-512), in OpenBLAS 0.3.x.
    inline bool avx2_core(const std::string& core) noexcept
    {
        static const char* const names[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
        for (const char* name : names)
        {
            if (strcasecmp(core.c_str(), name) == 0)
            {
                return true;
            }
        }
        return false;
    }

    inline blas_selection select_blas_kernels_once()
    {
        blas_selection s;
        s.cpu_avx2 = cpu_has_avx2_fma();
        s.cpu_avx512 = cpu_has_avx512();
#ifdef ATTENTION_PLASTICITY_HAS_OPENBLAS_HOOKS
        if (openblas_get_corename == nullptr)
        {
            return s;
        }
        s.openblas = true;
        s.loaded_core = openblas_core();
        const char* policy = std::getenv("AP_OPENBLAS_POLICY");
        s.policy_off = policy != nullptr && strcasecmp(policy, "off") == 0;
        s.user_coretype = std::getenv("OPENBLAS_CORETYPE") != nullptr;
        if (!s.policy_off && !s.user_coretype && s.cpu_avx2
            && strcasecmp(s.loaded_core.c_str(), blas_policy_coretype) != 0)
        {
            if (gotoblas_dynamic_quit != nullptr && gotoblas_dynamic_init != nullptr)
            {
                // OpenBLAS reads the variable while it selects; the environment is restored at once.
                setenv("OPENBLAS_CORETYPE", blas_policy_coretype, 1);
                gotoblas_dynamic_quit();
                gotoblas_dynamic_init();
                unsetenv("OPENBLAS_CORETYPE");
                s.switched = true;
            }
            else
            {
                s.cannot_switch = true;
            }
        }
        if (openblas_set_num_threads != nullptr)
        {
            openblas_set_num_threads(1);
        }
        if (blas_thread_shutdown_ != nullptr)
        {
            blas_thread_shutdown_();
        }
        const char* config = openblas_get_config != nullptr ? openblas_get_config() : nullptr;
        s.config = config != nullptr ? config : "";
        s.core = openblas_core();
        s.threads = openblas_get_num_threads != nullptr ? openblas_get_num_threads() : 1;
        s.generic = s.cpu_avx2 && !avx2_core(s.core);
#endif
        return s;
    }
}  // namespace detail

/// Applies the kernel policy (above) once per process and returns what it found and did; later
/// calls return the same. Call it before the first BLAS call of the process: selecting kernels
/// while another thread runs a BLAS call is not safe.
inline const blas_selection& select_blas_kernels()
{
    static std::once_flag once;
    static blas_selection selection;
    std::call_once(once, [] { selection = detail::select_blas_kernels_once(); });
    return selection;
}

/// The report every front end prints once, before its work ("PROGRAM: BLAS: ..."): the library,
/// the kernels and who chose them, OpenBLAS's threads; with generic kernels on an AVX2 CPU, a
/// second line with the exact fix.
inline std::string blas_report(const std::string& program)
{
    const blas_selection& s = select_blas_kernels();
    if (!s.openblas)
    {
        return program + ": BLAS: not OpenBLAS (no kernel report)";
    }
    const char* cpu = s.cpu_avx512 ? "AVX2, AVX-512" : (s.cpu_avx2 ? "AVX2" : "no AVX2");
    std::string chosen;
    if (s.switched)
    {
        chosen = "selected by attention_plasticity; OpenBLAS had chosen " + s.loaded_core;
    }
    else if (s.user_coretype)
    {
        chosen = "OPENBLAS_CORETYPE in the environment";
    }
    else if (s.policy_off)
    {
        chosen = "OpenBLAS's own choice, AP_OPENBLAS_POLICY=off";
    }
    else if (s.cannot_switch)
    {
        chosen = "OpenBLAS's own choice; this OpenBLAS cannot select others (no DYNAMIC_ARCH)";
    }
    else
    {
        chosen = "OpenBLAS's own choice";
    }
    std::string line = program + ": BLAS: " + s.config + "; kernels " + s.core + " (" + chosen + "; CPU: " + cpu
                       + "), " + std::to_string(s.threads) + " OpenBLAS thread" + (s.threads == 1 ? "" : "s");
    if (s.generic)
    {
        line += "\n" + program + ": warning: these generic kernels make the BLAS parts 2-3x slower on this CPU, "
                "and their last bits differ from a run with the default kernels; unset OPENBLAS_CORETYPE and "
                "AP_OPENBLAS_POLICY, or set OPENBLAS_CORETYPE=Haswell";
    }
    return line;
}
}  // namespace attention_plasticity

#endif
