#!/usr/bin/env python3
"""Layer x head heatmaps of head-level attention plasticity (ap_overall) and its drop
from early to late queries (ap_drop).

Reads head_metrics.csv (columns layer,q_head,k_head,...,ap_overall,ap_first20,
ap_last20,ap_drop). ap_overall is the head's plasticity: the mean of 4p(1-p) over key
pairs, averaged over query buckets weighted by their number of queries (1 = which key
wins depends entirely on the query, 0 = fixed whatever the query). ap_drop =
ap_first20 - ap_last20, the same average over queries in the first 20% of the context
minus over the last 20%: positive when the head becomes less plastic late in the
context. Grey cells have no value (nan in the CSV, or no row for that head) and hatched.

By default both maps are panels of one figure; --separate writes two files, with
suffixes _ap_overall and _ap_drop.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

DEFAULT_STEM = "head_map"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = ("layer", "q_head", "k_head", "ap_overall", "ap_first20", "ap_last20", "ap_drop")
READS = {C.METRICS_CSV: COLUMNS}

PANELS = {
    "ap_overall": dict(
        title="ap_overall: head-level attention plasticity",
        cbar="ap_overall (mean 4p(1-p) over key pairs; 1 = fully query-dependent)",
        cmap="viridis", diverging=False),
    "ap_drop": dict(
        title="ap_drop = ap_first20 − ap_last20",
        cbar="ap_drop (> 0: less plastic for the last 20% of positions\n"
             "than for the first 20%)",
        cmap="RdBu_r", diverging=True),
}


def build_parser():
    parser = C.base_parser(
        description=__doc__.split("\n\n")[0],
        csv_name=C.METRICS_CSV, default_stem=DEFAULT_STEM,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--separate", action="store_true",
                        help="write ap_overall and ap_drop as two files instead of two "
                             "panels of one")
    parser.add_argument("--annotate", choices=("auto", "yes", "no"), default="auto",
                        help="print values in the cells (auto: when a map has at most "
                             "12 layers and 16 heads)")
    return parser


def draw_panel(fig, ax, df, column, annotate_mode, layers=None):
    spec = PANELS[column]
    layers, heads, values = C.head_grid(df, column, layers)
    finite = values[np.isfinite(values)]
    if spec["diverging"]:
        m = C.symmetric_limit(values)
        vmin, vmax = -m, m
    else:
        vmin = float(finite.min()) if finite.size else 0.0
        vmax = float(finite.max()) if finite.size else 1.0
        if vmax <= vmin:
            vmin, vmax = vmin - 0.05, vmax + 0.05
    C.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=C.colourmap_with_missing(spec["cmap"]),
                   vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    nl, nh = values.shape
    C.head_ticks(ax, layers, heads)
    ax.set_xticks(np.arange(nh + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(nl + 1) - 0.5, minor=True)
    if nh <= 48 and nl <= 48:
        ax.grid(which="minor", color="white", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("query head")
    ax.set_ylabel("layer")
    n_missing = int(np.count_nonzero(~np.isfinite(values)))
    ax.set_title(spec["title"] + (f"\n({n_missing} of {values.size} heads without a value: grey, hatched)"
                                  if n_missing else f"\n(all {values.size} heads)"),
                 fontsize=10.5)
    annotate = annotate_mode == "yes" or (annotate_mode == "auto" and nl <= 12 and nh <= 16)
    if annotate:
        fontsize = max(5.5, min(9.0, 110.0 / max(nl, nh)))
        norm = im.norm
        for i in range(nl):
            for j in range(nh):
                v = values[i, j]
                if np.isfinite(v):
                    shade = norm(v)
                    dark = shade < 0.5 if not spec["diverging"] else abs(shade - 0.5) > 0.3
                    ax.text(j, i, C.format_cell(v), ha="center", va="center", fontsize=fontsize,
                            color="white" if dark else "black")
    cbar = fig.colorbar(im, ax=ax, pad=0.02, aspect=30)
    cbar.set_label(spec["cbar"], fontsize=9)
    return n_missing


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.METRICS_CSV)
    df = C.load_csv(path, COLUMNS)
    df = C.select_layers(df, args.layers, path)
    # With --layers, rows for just the chosen layers present; else every layer in range.
    layers = sorted(set(df["layer"])) if args.layers else None
    paths = C.output_paths(args, path, DEFAULT_STEM)
    title = args.title or f"Attention plasticity per head ({C.head_count_text(df)})"
    written = []
    if args.separate:
        for column in ("ap_overall", "ap_drop"):
            fig, ax = plt.subplots(figsize=args.figsize or (7.5, 6.0), layout="constrained")
            draw_panel(fig, ax, df, column, args.annotate, layers)
            fig.suptitle(title)
            written += C.save_figure(fig, C.with_suffix(paths, "_" + column), args.dpi)
    else:
        fig, axes = plt.subplots(1, 2, figsize=args.figsize or (14.0, 6.0),
                                 layout="constrained")
        for ax, column in zip(axes, ("ap_overall", "ap_drop")):
            draw_panel(fig, ax, df, column, args.annotate, layers)
        fig.suptitle(title)
        written += C.save_figure(fig, paths, args.dpi)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
