#!/usr/bin/env python3
"""The figures of benchmarks/README.md from one run of ap_bench_pipeline.

usage: plot_scaling.py BENCH_JSON [OUT_DIR]

BENCH_JSON is ap_bench_pipeline's --benchmark_out (JSON). Writes into OUT_DIR (default:
benchmarks/figures):
  scaling_tokens.png   time per head vs tokens (log-log, fitted exponent), and the peak memory
                       of analyze_head as a multiple of the head's input
  scaling_dim.png      time per head vs d (64, 128, 256), fitted exponent
  scaling_buckets.png  time per head vs the number of position buckets, fitted exponent
  stages.png           the Qwen3-8B head's stages beside their floors, 1 and 2 threads
Needs matplotlib (the project's .venv).
"""

import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        data = json.load(f)
    series = {}
    stages = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = b["name"]
        m = re.match(r"BM_scaling_(\w+)/\w+:(\d+)", name)
        if m:
            series.setdefault(m.group(1), {})[int(m.group(2))] = b
        m = re.match(r"BM_pipeline_qwen3_8b/threads:(\d+)", name)
        if m:
            stages[int(m.group(1))] = b
    return data.get("context", {}), series, stages


def fit(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    n = len(xs)
    sx, sy = sum(lx), sum(ly)
    sxx = sum(v * v for v in lx)
    sxy = sum(a * b for a, b in zip(lx, ly))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return slope, (sy - slope * sx) / n


def scaling_figure(points, xlabel, title, path, memory=False):
    xs = sorted(points)
    ys = [points[x]["total_ms"] for x in xs]
    slope, intercept = fit(xs, ys)
    rows = 2 if memory else 1
    fig, axes = plt.subplots(rows, 1, figsize=(6.4, 4.2 * rows), squeeze=False)
    ax = axes[0][0]
    ax.loglog(xs, ys, "o-", label="analyze_head, 1 thread")
    ax.loglog(xs, [math.exp(intercept) * x ** slope for x in xs], "--", color="gray",
              label="fit: time ~ x^%.3f" % slope)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per head (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    for x, y in zip(xs, ys):
        ax.annotate("%.0f" % y, (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8)
    if memory:
        ax = axes[1][0]
        ax.semilogx(xs, [points[x]["peak_over_input"] for x in xs], "s-", color="C2")
        ax.axhline(1.5, color="C3", linestyle=":", label="target 1.5x")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("(input + peak allocation) / input")
        ax.set_ylim(1.0, 2.0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return slope


def stages_figure(stages, path):
    names = [("prep_ms", "preparation", "stream_floor_ms"), ("regression_ms", "regression", "stream_floor_ms"),
             ("rotation_ms", "rotation", "stream_floor_ms"), ("normality_ms", "normality", None),
             ("bucket_stats_ms", "bucket statistics", "syrk_floor_ms"), ("sampling_ms", "sampling", None),
             ("kernel_ms", "kernel", "gemm_floor_ms")]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.27
    threads = sorted(stages)
    for k, t in enumerate(threads):
        b = stages[t]
        ax.bar([i + k * width for i in range(len(names))], [b[key] for key, _, _ in names], width,
               label="%d thread%s (total %.0f ms)" % (t, "" if t == 1 else "s", b["total_ms"]))
    one = stages[threads[0]]
    floors = [one[f] if f else 0.0 for _, _, f in names]
    ax.bar([i + len(threads) * width for i in range(len(names))], floors, width, color="lightgray",
           label="floor (stream pass / BLAS calls alone)")
    ax.set_xticks([i + width for i in range(len(names))])
    ax.set_xticklabels([n for _, n, _ in names], rotation=20)
    ax.set_ylabel("ms per head")
    ax.set_title("Qwen3-8B head (50,000 q + k, d = 128): stages and floors")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")
    os.makedirs(out, exist_ok=True)
    _context, series, stages = load(sys.argv[1])
    if "tokens" in series:
        a = scaling_figure(series["tokens"], "tokens (queries = keys, no subsampling)",
                           "time per head vs tokens (d = 128, 12 buckets)", os.path.join(out, "scaling_tokens.png"),
                           memory=True)
        print("tokens: fitted exponent %.3f" % a)
    if "dim" in series:
        a = scaling_figure(series["dim"], "d", "time per head vs d (50,000 tokens, 12 buckets)",
                           os.path.join(out, "scaling_dim.png"))
        print("d: fitted exponent %.3f" % a)
    if "buckets" in series:
        a = scaling_figure(series["buckets"], "position buckets", "time per head vs buckets (50,000 tokens, d = 128)",
                           os.path.join(out, "scaling_buckets.png"))
        print("buckets: fitted exponent %.3f" % a)
    if stages:
        stages_figure(stages, os.path.join(out, "stages.png"))
    print("figures in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
