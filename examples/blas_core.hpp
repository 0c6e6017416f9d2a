#ifndef AP_EXAMPLES_BLAS_CORE_HPP
#define AP_EXAMPLES_BLAS_CORE_HPP

// Which OpenBLAS kernels the drivers run on, said on stderr, and the fix when OpenBLAS fell
// back to generic kernels on a CPU that has AVX2: OpenBLAS 0.3.21 (Debian 12) does not know
// recent CPUs (e.g. Intel family 6 model 207) and picks its SSE3 "Prescott" kernels there,
// which makes the BLAS parts of the analysis two to three times slower without a word.
// OPENBLAS_CORETYPE (read once, when OpenBLAS is loaded) selects the kernels; so a driver
// that finds the fallback runs itself again with OPENBLAS_CORETYPE=Haswell (the AVX2 + FMA
// kernels, right for every such CPU), says so, and never does it twice. Set
// OPENBLAS_CORETYPE yourself to choose (e.g. SkylakeX for the AVX-512 kernels), or
// AP_OPENBLAS_REEXEC=0 to keep what OpenBLAS chose.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <strings.h>
#include <unistd.h>

// Weak: the drivers work with another BLAS too (then there is nothing to report).
extern "C" char* openblas_get_corename(void) __attribute__((weak));
extern "C" char* openblas_get_config(void) __attribute__((weak));

namespace ap_examples
{
struct blas_core_state
{
    bool openblas = false;  // the program runs on OpenBLAS
    std::string core;       // openblas_get_corename(), e.g. "Haswell", "Prescott"
    std::string config;     // openblas_get_config(), e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
    bool cpu_avx2 = false;  // the CPU has AVX2 and FMA
    bool cpu_avx512 = false;
    bool fallback = false;  // AVX2 CPU, kernels without AVX2
};

/// The kernels OpenBLAS chose, and whether they waste the CPU.
inline blas_core_state blas_core()
{
    blas_core_state s;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    s.cpu_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    s.cpu_avx512 = __builtin_cpu_supports("avx512f");
#endif
    if (openblas_get_corename == nullptr)
    {
        return s;
    }
    s.openblas = true;
    const char* core = openblas_get_corename();
    const char* config = openblas_get_config != nullptr ? openblas_get_config() : nullptr;
    // For the tests: AP_OPENBLAS_ASSUME_CORE=Prescott makes this run as if OpenBLAS had chosen
    // that core (the machines at hand do not fall back by themselves).
    const char* assumed = std::getenv("AP_OPENBLAS_ASSUME_CORE");
    core = assumed != nullptr ? assumed : core;
    s.core = core != nullptr ? core : "";
    s.config = config != nullptr ? config : "";
    // The cores whose double-precision kernels use AVX2 + FMA (or AVX-512) in OpenBLAS 0.3.x.
    static const char* const avx2_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
    bool avx2_core = false;
    for (const char* name : avx2_cores)
    {
        avx2_core = avx2_core || strcasecmp(s.core.c_str(), name) == 0;
    }
    s.fallback = s.cpu_avx2 && !avx2_core;
    return s;
}

inline std::string cpu_features(const blas_core_state& s)
{
    return s.cpu_avx512 ? "AVX2, AVX-512" : (s.cpu_avx2 ? "AVX2" : "no AVX2");
}

/// At the start of a driver's main, before any other output: when OpenBLAS fell back to
/// generic kernels on an AVX2 CPU and nobody chose the kernels (no OPENBLAS_CORETYPE), runs
/// the program again with OPENBLAS_CORETYPE=Haswell (said on stderr; AP_OPENBLAS_REEXEC=0
/// turns it off). Returns only when the program goes on as it is.
inline void select_blas_core(const char* program, char** argv)
{
    const blas_core_state s = blas_core();
    if (!s.fallback || std::getenv("OPENBLAS_CORETYPE") != nullptr)
    {
        return;
    }
    const char* choice = std::getenv("AP_OPENBLAS_REEXEC");
    if (choice != nullptr)
    {
        return;  // turned off, or this is the run started below: never twice
    }
    std::fprintf(stderr,
                 "%s: OpenBLAS chose its generic %s kernels on this CPU (%s); running again with "
                 "OPENBLAS_CORETYPE=Haswell (its AVX2 kernels; set OPENBLAS_CORETYPE yourself to choose, or "
                 "AP_OPENBLAS_REEXEC=0 to keep %s)\n",
                 program, s.core.c_str(), cpu_features(s).c_str(), s.core.c_str());
    std::fflush(stderr);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    setenv("AP_OPENBLAS_REEXEC", "done", 1);
    unsetenv("AP_OPENBLAS_ASSUME_CORE");
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "%s: could not run again (%s); going on with the %s kernels\n", program,
                 std::strerror(errno), s.core.c_str());
}

/// One line for the run's header: the kernels in use and, when they are generic on an AVX2
/// CPU (OPENBLAS_CORETYPE set to one, or the re-run turned off), the exact fix.
inline std::string blas_core_line(const char* program)
{
    const blas_core_state s = blas_core();
    if (!s.openblas)
    {
        return std::string(program) + ": BLAS: not OpenBLAS (no kernel report)";
    }
    std::string line = std::string(program) + ": BLAS: " + s.config + "; kernels " + s.core + " (CPU: "
                       + cpu_features(s) + ")";
    if (s.fallback)
    {
        line += "\n" + std::string(program) + ": warning: these generic kernels make the BLAS parts 2-3x slower on "
                "this CPU; run with OPENBLAS_CORETYPE=Haswell in the environment";
    }
    return line;
}
}  // namespace ap_examples

#endif
