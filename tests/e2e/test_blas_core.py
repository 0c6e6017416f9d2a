#!/usr/bin/python3
"""The BLAS kernel policy of every front end (docs/method.md §7.7), as on a CPU where OpenBLAS
itself falls back to its generic kernels, and the threads a run uses.

usage: test_blas_core.py AP_SYNTH AP_ANALYZE FALLBACK_LIBRARY SMALL_DUMP WORK_DIR [--python]

FALLBACK_LIBRARY (tests/blas/openblas_fallback.c), preloaded, makes OpenBLAS choose its generic
Prescott kernels by itself, exactly as on a CPU it does not know; the front ends cannot tell the
difference. Checked, for ap_analyze and (with --python) `python -m attention_plasticity` (this
interpreter, with the package installed):
- the simulation is real: with the policy off (AP_OPENBLAS_POLICY=off) the run reports OpenBLAS's
  own Prescott kernels and the warning with the fix;
- with the policy, each front end reports the Haswell kernels it selected, and the CSVs are
  byte-identical to the run on OpenBLAS's own choice of this machine and to the other front end's;
- a user's OPENBLAS_CORETYPE is kept (reported as such, with the fix when generic), and both
  front ends give the same bytes with it;
- threads honoured: on a head large enough for the BLAS calls to matter, `--threads 1` uses at
  most 1.1 CPUs (task clock / wall time, from the child's rusage; the lowest of three runs) and
  `--threads 2` at most 2.1: no OpenBLAS pool thread spins beside the workers.
Skipped (77) on a CPU without AVX2 and FMA, where the policy selects nothing.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

CSVS = ("head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv",
        "head_distance_plasticity.csv")


def has_avx2_fma():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


def main():
    synth, analyze, fallback, small_dump, work = sys.argv[1:6]
    with_python = "--python" in sys.argv[6:]
    if not has_avx2_fma():
        print("SKIP: this CPU has no AVX2 and FMA")
        sys.exit(u.SKIP)
    u.fresh_dir(work)
    c = u.Checker()
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "AP_OPENBLAS_POLICY", "LD_PRELOAD")}

    def command(front, dump, out, threads):
        program = [analyze] if front == "cpp" else [sys.executable, "-m", "attention_plasticity"]
        # synthetic dumps of few sequences: the token-level errors (no NaN-error warning, docs/method.md §8.3)
        return program + ["--data-root", dump, "--output-dir", out, "--threads", str(threads), "--sampling-unit",
                          "token"]

    def run(front, name, dump, **env):
        """(exit status, stderr, output folder) of one front end's run."""
        out = os.path.join(work, name)
        proc = subprocess.run(command(front, dump, out, 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(base_env, **env), universal_newlines=True, timeout=600)
        return proc.returncode, proc.stderr, out

    def cpu_ratio(front, name, dump, threads):
        """(exit status, CPU time / wall time) of a run, from the child's own rusage."""
        with open(os.devnull, "w") as devnull:
            start = time.monotonic()
            proc = subprocess.Popen(command(front, dump, os.path.join(work, name), threads), stdout=devnull,
                                    stderr=devnull, env=base_env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        print("%s --threads %d: %.3f s CPU / %.3f s wall = %.3f" % (front, threads, cpu, wall, cpu / wall))
        return proc.returncode, cpu / wall

    def same_csvs(a, b):
        for name in CSVS:
            pa, pb = os.path.join(a, name), os.path.join(b, name)
            if not (os.path.exists(pa) and os.path.exists(pb)):
                return "%s missing in %s or %s" % (name, a, b)
            with open(pa, "rb") as fa, open(pb, "rb") as fb:
                if fa.read() != fb.read():
                    return "%s differs between %s and %s" % (name, a, b)
        return None

    def report(err):
        return [line for line in err.splitlines() if ": BLAS: " in line or ": warning: these generic" in line]

    fronts = ["cpp", "python"] if with_python else ["cpp"]
    shim = {"LD_PRELOAD": fallback}
    for front in fronts:
        code, err, own = run(front, front + "_own", small_dump)
        c.check(code == 0, "%s on OpenBLAS's own choice exited %d:\n%s" % (front, code, err))
        c.check(len(report(err)) == 1 and "1 OpenBLAS thread" in err, "%s: no single report line:\n%s" % (front, err))

        code, err, _ = run(front, front + "_fallback_off", small_dump, AP_OPENBLAS_POLICY="off", **shim)
        c.check(code == 0, "%s, fallback, policy off exited %d:\n%s" % (front, code, err))
        c.check("kernels Prescott (OpenBLAS's own choice, AP_OPENBLAS_POLICY=off" in err,
                "%s: the simulated fallback is not seen with the policy off (the simulation does not work):\n%s"
                % (front, err))
        c.check("warning: these generic kernels" in err and "OPENBLAS_CORETYPE=Haswell" in err,
                "%s: no warning with the fix on generic kernels:\n%s" % (front, err))

        code, err, selected = run(front, front + "_fallback", small_dump, **shim)
        c.check(code == 0, "%s, fallback exited %d:\n%s" % (front, code, err))
        c.check("kernels Haswell (selected by attention_plasticity; OpenBLAS had chosen Prescott" in err,
                "%s: the policy did not select Haswell over the fallback:\n%s" % (front, err))
        c.check("warning" not in err, "%s: a warning after the selection:\n%s" % (front, err))
        diff = same_csvs(selected, own)
        c.check(diff is None, "%s: the fallback machine's results differ from this machine's: %s" % (front, diff))

        code, err, user = run(front, front + "_user", small_dump, OPENBLAS_CORETYPE="Prescott")
        c.check(code == 0, "%s, user's kernels exited %d:\n%s" % (front, code, err))
        c.check("kernels Prescott (OPENBLAS_CORETYPE in the environment" in err and "warning" in err,
                "%s: the user's OPENBLAS_CORETYPE is not kept and reported:\n%s" % (front, err))
    if with_python:
        for name in ("own", "fallback", "fallback_off", "user"):
            diff = same_csvs(os.path.join(work, "cpp_" + name), os.path.join(work, "python_" + name))
            c.check(diff is None, "ap_analyze and python -m attention_plasticity differ (%s): %s" % (name, diff))

    # Threads: one head of 40,000 queries and keys, d = 128 (the BLAS calls take most of its time).
    big = os.path.join(work, "big_dump")
    u.run([synth, "--out", big, "--num-layers", 1, "--num-q-heads", 1, "--num-k-heads", 1, "--dim", 128,
           "--tokens", 40000, "--examples", 8, "--buckets", 16, "--seed", 5], expect=0)
    # The lowest of three runs: a spinning pool adds its CPU time to every run, while a passing
    # event of the machine (another process's burst, a cold page cache) does not repeat.
    for front in fronts:
        for threads in (1, 2):
            runs = [cpu_ratio(front, "%s_threads%d_%d" % (front, threads, i), big, threads) for i in range(3)]
            code = max(code for code, _ in runs)
            ratio = min(ratio for _, ratio in runs)
            c.check(code == 0, "%s --threads %d exited %d" % (front, threads, code))
            c.check(ratio <= threads + 0.1, "%s --threads %d used %.2f CPUs (at most %.1f)"
                    % (front, threads, ratio, threads + 0.1))
    c.close("test_blas_core")


if __name__ == "__main__":
    main()
