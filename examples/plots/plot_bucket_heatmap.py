#!/usr/bin/env python3
"""Heatmap of attention plasticity per query bucket x key bucket, over all heads.

Reads head_bucket_plasticity.csv (columns layer,q_head,k_head,q_bucket,k_bucket,
plasticity,n_pairs). A cell (query bucket j, key bucket c) is the plasticity of that
cell, the mean of 4p(1-p) over its key pairs, averaged (or with --stat median, the
median) over the heads that have a value there. Only key buckets before the query
bucket are eligible, so the filled cells lie below the diagonal. Grey hatched cells
have no value: no head has key pairs there (nan or n_pairs 0 in the CSV), or no head
has that cell at all (not eligible, e.g. outside a sliding window).

The query axis is labelled with tau, the mean token position of the bucket's queries,
when --profile gives head_profile.csv (mean over heads); otherwise with bucket ids. The
key axis uses the same position for the same bucket id (buckets are a function of
position, shared by queries and keys); key bucket 0 and buckets without a query tau
keep their id. Each axis label says which labelling it uses.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

DEFAULT_STEM = "bucket_heatmap"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = ("layer", "q_head", "k_head", "q_bucket", "k_bucket", "plasticity", "n_pairs")
PROFILE_COLUMNS = ("layer", "q_bucket", "tau")  # --profile: the buckets' positions
READS = {C.BUCKET_CSV: COLUMNS, C.PROFILE_CSV: PROFILE_COLUMNS}


def build_parser():
    parser = C.base_parser(
        description=__doc__.split("\n\n")[0],
        csv_name=C.BUCKET_CSV, default_stem=DEFAULT_STEM,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--profile", metavar="CSV",
                        help="head_profile.csv (or its directory), to label the axes "
                             "in tokens with each bucket's mean query position tau")
    parser.add_argument("--stat", choices=("mean", "median"), default="mean",
                        help="how to combine the heads in a cell (default: mean)")
    C.add_heatmap_options(parser)
    return parser


def cell_matrix(df, stat):
    """(q_buckets, k_buckets, values [nq, nk], head counts [nq, nk])."""
    q_buckets = np.arange(df["q_bucket"].min(), df["q_bucket"].max() + 1)
    k_buckets = np.arange(df["k_bucket"].min(), df["k_bucket"].max() + 1)
    g = df.groupby(["q_bucket", "k_bucket"])["plasticity"]
    agg = g.median() if stat == "median" else g.mean()
    count = g.count()
    values = np.full((q_buckets.size, k_buckets.size), np.nan)
    counts = np.zeros_like(values, dtype=int)
    qi = agg.index.get_level_values(0).to_numpy() - q_buckets[0]
    ki = agg.index.get_level_values(1).to_numpy() - k_buckets[0]
    values[qi, ki] = agg.to_numpy()
    counts[qi, ki] = count.to_numpy()
    return q_buckets, k_buckets, values, counts


def bucket_positions(profile_path, layers):
    """q_bucket -> mean tau over heads, from head_profile.csv."""
    prof = C.load_csv(profile_path, PROFILE_COLUMNS,
                      int_columns=("layer", "q_bucket"))
    prof = C.select_layers(prof, layers, profile_path)
    tau = prof.groupby("q_bucket")["tau"].mean()
    return {int(b): float(t) for b, t in tau.items() if np.isfinite(t)}


def tick_labels(buckets, positions):
    if positions is None:
        return [str(b) for b in buckets]
    return [C.format_tokens(positions[b]) if b in positions else f"#{b}" for b in buckets]


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.BUCKET_CSV)
    df = C.load_csv(path, COLUMNS,
                    int_columns=C.ID_COLUMNS + ("q_bucket", "k_bucket"))
    df = C.select_layers(df, args.layers, path)
    df = C.no_pairs_is_nan(df)
    positions = None
    if args.profile:
        positions = bucket_positions(C.resolve_csv(args.profile, C.PROFILE_CSV),
                                     args.layers)
    paths = C.output_paths(args, path, DEFAULT_STEM)

    q_buckets, k_buckets, values, counts = cell_matrix(df, args.stat)
    finite, vmin, vmax = C.colour_range(values, args)

    fig, ax = plt.subplots(figsize=args.figsize or (8.5, 7.0), layout="constrained")
    cmap = C.colourmap_with_missing("viridis")
    C.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax,
                   aspect="auto", interpolation="nearest", origin="upper")
    nq, nk = values.shape
    ax.set_xticks(np.arange(nk))
    ax.set_yticks(np.arange(nq))
    xl = tick_labels(k_buckets, positions)
    yl = tick_labels(q_buckets, positions)
    sx, sy = C.tick_step(nk, 20), C.tick_step(nq, 24)
    ax.set_xticklabels([lab if i % sx == 0 else "" for i, lab in enumerate(xl)],
                       rotation=45 if positions else 0, ha="right" if positions else "center")
    ax.set_yticklabels([lab if i % sy == 0 else "" for i, lab in enumerate(yl)])
    ax.tick_params(length=2)
    C.cell_grid(ax, nq, nk)

    if positions is not None:
        ax.set_ylabel("query bucket, labelled by its mean query position τ (tokens)")
        ax.set_xlabel("key bucket, labelled by the mean query position τ of the same "
                      "bucket id (tokens; #id where none)")
    else:
        ax.set_ylabel("query bucket id (no --profile: ids, not tokens)")
        ax.set_xlabel("key bucket id (no --profile: ids, not tokens)")

    C.annotate_cells(ax, values, vmin, vmax, args.annotate)

    if finite.size == 0:
        ax.text(0.5, 0.5, "no plasticity values in this file (all nan)",
                transform=ax.transAxes, ha="center", va="center", fontsize=12,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    stat_word = "median" if args.stat == "median" else "mean"
    cbar = fig.colorbar(im, ax=ax, pad=0.01, aspect=30)
    cbar.set_label(f"{stat_word} over heads of cell plasticity (mean 4p(1-p) over key pairs)")
    ax.legend(handles=[C.missing_patch("no value (no pairs / not eligible)")],
              loc="upper right", fontsize=8, framealpha=0.9)
    n_heads_max = int(counts.max()) if counts.size else 0
    ax.set_title(args.title or
                 f"Plasticity by query bucket × key bucket: {stat_word} over heads\n"
                 f"({C.head_count_text(df)}; up to {n_heads_max} heads with a value per cell)",
                 fontsize=11)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
