#!/usr/bin/env python3
"""The cost of calling the library from Python: ap.analyze_head on the Qwen-shaped head of
bench_pipeline.cpp (50,000 queries and keys, d = 128, 12 buckets, 8 examples, float32, the
default options) against the same C++ analyze_head called from C++, in one run.

The head is the one benchmarks/bench_common.hpp builds (synthetic_head: the same
NormalGenerator draws, in the same order, the same double arithmetic), made here with the
bound generator, so the C++ benchmark program sees the same numbers (its ap_overall counter
is compared). Rounds alternate, in one process: (a) Python: ap.Tokens(...) on the arrays
and ap.analyze_head(...), the whole call as a user makes it; (b) C++: the hook
attention_plasticity._core._bench.analyze_head_seconds, which calls
attention_plasticity::analyze_head from a C++ loop on the same views (no Python in the
loop). One BLAS thread, as ap_analyze. Then
ap_bench_pipeline's BM_pipeline_qwen3_8b runs once for reference, and (--big) a 1 GiB input
shows its peak memory.

    OPENBLAS_CORETYPE=Haswell .venv/bin/python benchmarks/bench_python.py \
        --bench build/benchmarks/ap_bench_pipeline [--rounds 15] [--big]
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import attention_plasticity as ap
from attention_plasticity._core import _bench


def synthetic_tokens(n, d, examples, buckets, drift, seed):
    """bench_common.hpp's synthetic_tokens<float>: the same draws in the same order."""
    normal = ap.kernel.NormalGenerator(seed)
    u = np.array([normal() for _ in range(d)])
    scale = 0.5 + 1.5 * ((np.arange(d) * 37) % d) / d
    u /= np.sqrt((u * u).sum())
    length = n // examples
    i = np.arange(n)
    t = i % length
    z = np.fromiter((normal() for _ in range(n * d)), dtype=np.float64, count=n * d).reshape(n, d)
    s = drift * t / length
    vectors = (s[:, None] * u[None, :] + scale[None, :] * z).astype(np.float32)
    return vectors, t.astype(np.int64), (t * buckets // length).astype(np.int64), (i // length).astype(np.int64)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", help="ap_bench_pipeline, run once for reference")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--big", action="store_true", help="also a 1 GiB input: peak memory")
    args = parser.parse_args()

    ap.set_blas_threads(1)
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, BLAS {_bench.blas_library()}, "
          f"{ap.get_blas_threads()} BLAS thread")
    start = time.perf_counter()
    q = synthetic_tokens(50000, 128, 8, 12, 6.0, 1)
    k = synthetic_tokens(50000, 128, 8, 12, 2.0, 2)
    print(f"head generated in {time.perf_counter() - start:.1f} s: 2 x {q[0].shape} float32")
    head, options = ap.HeadId(3, 5, 1), ap.HeadOptions()

    def python_call():
        t0 = time.perf_counter()
        result = ap.analyze_head(ap.Tokens(q[0], q[1], q[2]), ap.Tokens(*k), head, options)
        return time.perf_counter() - t0, result.metrics.ap_overall

    queries, keys = ap.Tokens(q[0], q[1], q[2]), ap.Tokens(*k)
    assert queries.converted_columns() == [] and keys.converted_columns() == []
    python_call()  # warm-up (page faults of the first working copies, the KS spline table)
    py, cpp = [], []

    def cpp_call():
        (seconds, ), ap_cpp = _bench.analyze_head_seconds(queries, keys, head, options, 1)
        return seconds, ap_cpp

    for r in range(args.rounds):  # the two calls back to back, in turn first (no order bias)
        first, second = (python_call, cpp_call) if r % 2 == 0 else (cpp_call, python_call)
        a, b = first(), second()
        (t_py, ap_py), (t_cpp, ap_cpp) = (a, b) if r % 2 == 0 else (b, a)
        py.append(t_py)
        cpp.append(t_cpp)
        assert ap_py == ap_cpp
    med_py, med_cpp = statistics.median(py), statistics.median(cpp)
    ratios = sorted(a / b for a, b in zip(py, cpp))
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"{args.rounds} rounds, ms per head: Python median {med_py * 1e3:.1f} (min {min(py) * 1e3:.1f}), "
          f"C++ median {med_cpp * 1e3:.1f} (min {min(cpp) * 1e3:.1f})")
    print(f"Python / C++: ratio of medians {med_py / med_cpp:.4f}, of minima {min(py) / min(cpp):.4f}; per-round "
          f"ratios: median {statistics.median(ratios):.4f}, quartiles {quartiles[0]:.4f} - {quartiles[2]:.4f}")
    print(f"ap_overall {ap_py!r}")

    # The fixed cost of the binding (argument conversion, the result object), where it is
    # visible: a small head, best of many alternating calls.
    small_q = [a[:256] for a in q]
    small_k = [a[:256] for a in k]
    sq, sk = ap.Tokens(*small_q[:3]), ap.Tokens(*small_k)
    small_py, small_cpp = [], []
    for _ in range(300):
        t0 = time.perf_counter()
        ap.analyze_head(ap.Tokens(*small_q[:3]), ap.Tokens(*small_k), head, options)
        small_py.append(time.perf_counter() - t0)
        small_cpp.append(_bench.analyze_head_seconds(sq, sk, head, options, 1)[0][0])
    overhead = min(small_py) - min(small_cpp)
    print(f"small head (256 tokens): best Python call {min(small_py) * 1e6:.0f} us, best C++ call "
          f"{min(small_cpp) * 1e6:.0f} us: the binding costs {overhead * 1e6:.0f} us per call, "
          f"{overhead / med_cpp:.2e} of the Qwen-shaped head")

    if args.bench:
        proc = subprocess.run([args.bench, "--benchmark_filter=BM_pipeline_qwen3_8b"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True)
        line = next(x for x in proc.stdout.splitlines() if x.startswith("BM_pipeline_qwen3_8b"))
        print("ap_bench_pipeline:", re.sub(r"\s+", " ", line))
        found = re.search(r"ap_overall=([0-9.]+)", line)
        if found:
            print(f"  same head: its ap_overall {found.group(1)} vs {ap_py:.6g} here")

    if args.big:
        n = 1 << 21  # x 128 float32 = 1 GiB
        big = np.empty((n, 128), dtype=np.float32)
        rng = np.random.default_rng(0)
        for s in range(0, n, 1 << 17):
            big[s:s + (1 << 17)] = rng.standard_normal((1 << 17, 128), dtype=np.float32)
        position = np.tile(np.arange(1 << 14, dtype=np.int64), n >> 14)
        bucket, example_id = position >> 11, np.repeat(np.arange(n >> 14, dtype=np.int64), 1 << 14)
        before = peak_rss_mb()
        t0 = time.perf_counter()
        result = ap.analyze_head(ap.Tokens(big, position, bucket), ap.Tokens(big, position, bucket, example_id))
        print(f"1 GiB queries and keys (the same array, {n} x 128 float32): {time.perf_counter() - t0:.2f} s, "
              f"peak RSS {before:.0f} MB before the call, +{peak_rss_mb() - before:.0f} MB during it "
              f"(n_q_tokens {result.metrics.n_q_tokens}: subsampled working copies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
