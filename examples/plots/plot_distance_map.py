#!/usr/bin/env python3
"""Heatmap of attention plasticity by inter-key distance x key-to-query distance.

Reads head_distance_plasticity.csv (columns layer,q_head,k_head,key_distance_low,
key_distance_high,query_distance_low,query_distance_high,plasticity,n_pairs; docs/method.md
§8.1). Each row is one bin of one head: the mean pair plasticity 4p(1-p) of that head's sampled
key pairs whose keys are |pos(k1) - pos(k2)| tokens apart (rows of the heatmap) and whose mean
position lies tau_j - (pos(k1) + pos(k2))/2 tokens before the queries' mean position (columns).
Bins are log-spaced: [0, 1), [1, 2), [2, 4), ... (finer with --distance-bins-per-octave in
ap_analyze); "<0" holds pairs whose keys lie after the queries' mean position.

A cell is the mean (or median) over the heads that have at least --min-pairs pairs there, or
with --stat pooled the pair-weighted mean over all heads. Grey hatched cells have no value.
Plasticity falling to the right means the head is less plastic for keys far back in the
context; falling downwards, less plastic between keys far from each other.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

DEFAULT_STEM = "distance_map"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = ("layer", "q_head", "k_head", "key_distance_low", "key_distance_high", "query_distance_low",
           "query_distance_high", "plasticity", "n_pairs")
READS = {C.DISTANCE_CSV: COLUMNS}


def build_parser():
    parser = C.base_parser(
        description=__doc__.split("\n\n")[0],
        csv_name=C.DISTANCE_CSV, default_stem=DEFAULT_STEM,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--stat", choices=("mean", "median", "pooled"), default="mean",
                        help="how to combine the heads in a cell: mean or median of the heads' "
                             "bin values, or pooled (weighted by pairs) (default: mean)")
    parser.add_argument("--min-pairs", type=int, default=10, metavar="N",
                        help="a head's bin with fewer pairs is left out (default: %(default)s)")
    C.add_heatmap_options(parser)
    return parser


def edge_label(low, high):
    """'<0', '0-1', '2-4', '1.4-2' (tokens)."""
    if not np.isfinite(low):
        return "<0"

    def fmt(x):
        if x >= 1000 or float(x).is_integer():
            return C.format_tokens(x)
        return f"{x:.3g}"

    return f"{fmt(low)}-{fmt(high)}"


def cell_matrix(df, stat, min_pairs):
    """(key bins [(low, high)], query bins, values [nk, nq], head counts [nk, nq])."""
    df = df[df["n_pairs"] >= max(1, min_pairs)]
    key_bins = sorted(set(zip(df["key_distance_low"], df["key_distance_high"])))
    query_bins = sorted(set(zip(df["query_distance_low"], df["query_distance_high"])))
    values = np.full((len(key_bins), len(query_bins)), np.nan)
    counts = np.zeros(values.shape, dtype=int)
    ki = {b: i for i, b in enumerate(key_bins)}
    qi = {b: i for i, b in enumerate(query_bins)}
    groups = df.groupby(["key_distance_low", "key_distance_high", "query_distance_low",
                         "query_distance_high"])
    for (klo, khi, qlo, qhi), g in groups:
        i, j = ki[(klo, khi)], qi[(qlo, qhi)]
        if stat == "pooled":
            values[i, j] = float((g["plasticity"] * g["n_pairs"]).sum() / g["n_pairs"].sum())
        elif stat == "median":
            values[i, j] = float(g["plasticity"].median())
        else:
            values[i, j] = float(g["plasticity"].mean())
        counts[i, j] = len(g)
    return key_bins, query_bins, values, counts


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.min_pairs < 1:
        raise C.UsageError(f"--min-pairs must be at least 1, got {args.min_pairs}")
    path = C.resolve_csv(args.csv, C.DISTANCE_CSV)
    df = C.load_csv(path, COLUMNS, int_columns=C.ID_COLUMNS + ("n_pairs",))
    df = C.select_layers(df, args.layers, path)
    bad = df["plasticity"].isna() | ~np.isfinite(df["key_distance_high"]) | ~np.isfinite(
        df["query_distance_high"])
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise C.InputError(f"{path}: line {row + 2} has no plasticity or an infinite upper bin edge")
    paths = C.output_paths(args, path, DEFAULT_STEM)
    key_bins, query_bins, values, counts = cell_matrix(df, args.stat, args.min_pairs)
    finite, vmin, vmax = C.colour_range(values, args)

    fig, ax = plt.subplots(figsize=args.figsize or (9.0, 6.5), layout="constrained")
    C.hatch_missing(ax)
    nk, nq = values.shape
    if nk and nq:
        im = ax.imshow(np.ma.masked_invalid(values), cmap=C.colourmap_with_missing("viridis"),
                       vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest", origin="lower")
    else:
        im = ax.imshow(np.full((1, 1), np.nan), cmap=C.colourmap_with_missing("viridis"), vmin=vmin,
                       vmax=vmax, aspect="auto")
    xl = [edge_label(lo, hi) for lo, hi in query_bins]
    yl = [edge_label(lo, hi) for lo, hi in key_bins]
    sx, sy = C.tick_step(nq, 20), C.tick_step(nk, 24)
    ax.set_xticks(np.arange(nq))
    ax.set_yticks(np.arange(nk))
    ax.set_xticklabels([lab if i % sx == 0 else "" for i, lab in enumerate(xl)], rotation=45, ha="right")
    ax.set_yticklabels([lab if i % sy == 0 else "" for i, lab in enumerate(yl)])
    C.cell_grid(ax, nk, nq)
    ax.tick_params(length=2)
    ax.set_xlabel("key-to-query distance τ_j − (pos(k1) + pos(k2))/2 (tokens, log bins)")
    ax.set_ylabel("inter-key distance |pos(k1) − pos(k2)| (tokens, log bins)")
    C.annotate_cells(ax, values, vmin, vmax, args.annotate)
    if finite.size == 0:
        ax.text(0.5, 0.5, f"no bin with at least {args.min_pairs} pairs in this file",
                transform=ax.transAxes, ha="center", va="center", fontsize=12,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    words = {"mean": "mean over heads", "median": "median over heads", "pooled": "pair-weighted mean"}
    cbar = fig.colorbar(im, ax=ax, pad=0.01, aspect=30)
    cbar.set_label(f"{words[args.stat]} of the bin's plasticity (mean 4p(1-p) of its pairs)")
    ax.legend(handles=[C.missing_patch(f"no value (no head with ≥ {args.min_pairs} pairs)")],
              loc="upper right", fontsize=8, framealpha=0.9)
    heads_max = int(counts.max()) if counts.size else 0
    ax.set_title(args.title or
                 f"Plasticity by key distance × distance to the query: {words[args.stat]}\n"
                 f"({C.head_count_text(df)}; up to {heads_max} heads per cell)", fontsize=11)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
