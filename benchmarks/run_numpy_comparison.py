#!/usr/bin/env python3
"""The C++ library against the NumPy implementation of the same pipeline, on the same head, in
one run (issue 11, target 5).

usage: run_numpy_comparison.py [--build BUILD] [--work DIR] [--tokens N] [--dim D]
                               [--buckets B] [--rounds R] [--json OUT]

1. Generates one synthetic head with NumPy (the shape of the pipeline benchmark: N queries and
   N keys, dimension D, B uniform position buckets, 8 examples, a positional drift along a
   random direction plus anisotropic noise; float32 vectors) and writes it as an NPY dump.
2. Times analyze_head on it with BUILD/benchmarks/ap_bench_head, on 1 and on 2 threads (the
   load is not timed), R rounds each.
3. Times tests/reference/numpy_pipeline.py's analyze_head on the same arrays (loaded once, not
   timed), R rounds, in a child process with NumPy's BLAS on 1 thread and in one on every core.
4. Prints the medians, the ratios, and how far the two implementations' metrics are apart (the
   deterministic ones to about 1e-9; the plasticities differ by the Monte Carlo error of the
   pairs, which the two draw from different random streams).
Needs NumPy and SciPy (the project's .venv: scripts/setup_python.sh).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

DETERMINISTIC = ["q_R2_pos", "q_beta_norm", "q_R2_scalar", "q_mae_baseline", "q_mae_proj", "q_mae_ratio",
                 "q_resid0_skew", "q_resid0_kurt", "q_resid0_ks_p", "q_noise_med_abs_skew", "q_noise_med_abs_kurt"]
RANDOM = ["q_noise_med_ks_p", "q_noise_frac_ks_p_lt_alpha", "ap_overall", "ap_first20", "ap_last20", "ap_drop"]


def synthetic_kind(rng, n, d, buckets, drift, examples=8):
    """One kind of the head: positions 0..L-1 in each of `examples` sequences, uniform buckets,
    vectors drift (t / L) u + N(0, diag(scale^2))."""
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    scale = 0.5 + 1.5 * ((np.arange(d) * 37) % d) / d
    length = n // examples
    i = np.arange(n)
    t = i % length
    vectors = (drift * (t / length))[:, None] * u + rng.standard_normal((n, d)) * scale
    return {"vector": vectors.astype(np.float32), "position": t.astype(np.int64),
            "bucket": (t * buckets // length).astype(np.int64), "example_id": (i // length).astype(np.int64)}


def write_dump(root, queries, keys):
    for kind, data in (("q", queries), ("k", keys)):
        folder = os.path.join(root, "l00h00" + kind)
        os.makedirs(folder, exist_ok=True)
        for name, values in data.items():
            np.save(os.path.join(folder, name + ".npy"), values)


def load_dump(root):
    def kind(k):
        folder = os.path.join(root, "l00h00" + k)
        return {name: np.load(os.path.join(folder, name + ".npy"))
                for name in ("vector", "position", "bucket", "example_id")}
    return kind("q"), kind("k")


def time_numpy(root, rounds):
    """In this process: the NumPy pipeline on the dump, `rounds` times; JSON on stdout."""
    import numpy_pipeline as npp
    queries, keys = load_dump(root)
    seconds, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = npp.analyze_head(queries, keys, layer=0, q_head=0)
        seconds.append(time.perf_counter() - start)
    metrics = {k: (v if isinstance(v, str) else None if isinstance(v, float) and v != v else float(v))
               for k, v in result["metrics"].items()}
    print(json.dumps({"seconds": seconds, "median_seconds": statistics.median(seconds), "metrics": metrics}))


def run_json(args, env=None):
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, universal_newlines=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--work", default="/tmp/ap_numpy_comparison")
    parser.add_argument("--tokens", type=int, default=50000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--buckets", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the summary here")
    parser.add_argument("--numpy-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.numpy_child:
        time_numpy(args.numpy_child, args.rounds)
        return 0

    root = os.path.join(args.work, "dump")
    rng = np.random.default_rng(20261127)
    write_dump(root, synthetic_kind(rng, args.tokens, args.dim, args.buckets, 6.0),
               synthetic_kind(rng, args.tokens, args.dim, args.buckets, 2.0))
    tool = os.path.join(args.build, "benchmarks", "ap_bench_head")
    cpp = {t: run_json([tool, root, "--threads", str(t), "--rounds", str(args.rounds)]) for t in (1, 2)}
    child = [sys.executable, os.path.abspath(__file__), "--numpy-child", root, "--rounds", str(args.rounds)]
    one_thread = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    numpy = {1: run_json(child, env=one_thread), "all": run_json(child)}

    load = os.getloadavg()
    print("head: %d queries and %d keys, d = %d, %d buckets, float32; %d rounds each; load average %.2f %.2f %.2f"
          % (args.tokens, args.tokens, args.dim, args.buckets, args.rounds, *load))
    print("OpenBLAS kernels of the C++ run: %s" % cpp[1]["blas_core"])
    rows = [("C++ analyze_head, 1 thread", cpp[1]["median_seconds"]),
            ("C++ analyze_head, 2 threads", cpp[2]["median_seconds"]),
            ("NumPy pipeline, BLAS on 1 thread", numpy[1]["median_seconds"]),
            ("NumPy pipeline, BLAS on all cores", numpy["all"]["median_seconds"])]
    for name, s in rows:
        print("  %-36s %9.1f ms" % (name, s * 1e3))
    ratio_1 = numpy[1]["median_seconds"] / cpp[1]["median_seconds"]
    ratio_all = numpy["all"]["median_seconds"] / cpp[2]["median_seconds"]
    print("NumPy / C++: %.1fx on one thread each, %.1fx with every core each" % (ratio_1, ratio_all))
    worst_det = 0.0
    print("metrics (C++ vs NumPy):")
    for key in DETERMINISTIC + RANDOM:
        a, b = cpp[1]["metrics"][key], numpy[1]["metrics"][key]
        if a is None or b is None:
            print("  %-28s %s vs %s" % (key, a, b))
            continue
        rel = abs(a - b) / max(abs(b), 1e-300)
        if key in DETERMINISTIC:
            worst_det = max(worst_det, rel)
        print("  %-28s %.10g vs %.10g (%s %.2g)" % (key, a, b, "relative" if key in DETERMINISTIC else "difference",
                                                    rel if key in DETERMINISTIC else abs(a - b)))
    print("largest relative difference of the deterministic metrics: %.2g" % worst_det)
    summary = {"tokens": args.tokens, "dim": args.dim, "buckets": args.buckets, "rounds": args.rounds,
               "load_average": load, "blas_core": cpp[1]["blas_core"],
               "cpp_1_thread_s": cpp[1]["median_seconds"], "cpp_2_threads_s": cpp[2]["median_seconds"],
               "numpy_1_thread_s": numpy[1]["median_seconds"], "numpy_all_cores_s": numpy["all"]["median_seconds"],
               "ratio_1_thread": ratio_1, "ratio_all_cores": ratio_all, "worst_deterministic_rel": worst_det}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if worst_det < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
