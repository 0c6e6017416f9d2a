#!/usr/bin/python3
"""ap_analyze reports its OpenBLAS kernels, and when OpenBLAS fell back to generic kernels on a
CPU with AVX2 it runs itself once more with OPENBLAS_CORETYPE=Haswell (examples/blas_core.hpp).

usage: test_blas_core.py AP_ANALYZE SMALL_DUMP WORK_DIR

The machines at hand do not fall back by themselves: AP_OPENBLAS_ASSUME_CORE=Prescott makes
the driver take OpenBLAS's choice for Prescott. Checked: the report line; the re-run (said
once, never twice, the results complete); AP_OPENBLAS_REEXEC=0 keeps the kernels and prints
the exact fix; a user's own OPENBLAS_CORETYPE is never overridden. Skipped (77) on a CPU
without AVX2, where no fallback exists.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402


def has_avx2():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


def main():
    analyze, dump, work = sys.argv[1:4]
    if not has_avx2():
        print("SKIP: this CPU has no AVX2")
        sys.exit(77)
    u.fresh_dir(work)
    c = u.Checker()
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("OPENBLAS_CORETYPE", "AP_OPENBLAS_REEXEC", "AP_OPENBLAS_ASSUME_CORE")}

    def run(name, **env):
        e = dict(base_env, **env)
        args = [analyze, "--data-root", dump, "--output-dir", os.path.join(work, name), "--threads", "1"]
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=e)
        return proc.returncode, proc.stderr

    code, err = run("default")
    c.check(code == 0, "default run exited %d:\n%s" % (code, err))
    c.check("ap_analyze: BLAS: OpenBLAS" in err and "; kernels " in err, "no BLAS report line:\n%s" % err)

    code, err = run("fallback", AP_OPENBLAS_ASSUME_CORE="Prescott")
    c.check(code == 0, "fallback run exited %d:\n%s" % (code, err))
    c.check(err.count("running again with OPENBLAS_CORETYPE=Haswell") == 1, "the re-run is not said once:\n%s" % err)
    c.check("kernels Haswell" in err, "the re-run does not use Haswell kernels:\n%s" % err)
    c.check("warning" not in err, "a warning after the re-run:\n%s" % err)
    c.check(os.path.exists(os.path.join(work, "fallback", "head_metrics.csv")), "the re-run wrote no results")

    code, err = run("kept", AP_OPENBLAS_ASSUME_CORE="Prescott", AP_OPENBLAS_REEXEC="0")
    c.check(code == 0, "kept run exited %d:\n%s" % (code, err))
    c.check("running again" not in err, "re-ran although AP_OPENBLAS_REEXEC=0:\n%s" % err)
    c.check("run with OPENBLAS_CORETYPE=Haswell in the environment" in err, "no exact fix printed:\n%s" % err)

    code, err = run("user", OPENBLAS_CORETYPE="Prescott")
    c.check(code == 0, "user-chosen run exited %d:\n%s" % (code, err))
    c.check("running again" not in err, "overrode the user's OPENBLAS_CORETYPE:\n%s" % err)
    c.check("kernels Prescott" in err and "OPENBLAS_CORETYPE=Haswell" in err, "no report and fix:\n%s" % err)
    c.close("test_blas_core")


if __name__ == "__main__":
    main()
