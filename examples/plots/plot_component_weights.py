#!/usr/bin/env python3
"""Bar chart of the share of positional information carried by each query component.

Reads head_component_weights.csv (columns layer,q_head,k_head,component,component_r2,
weight). For a head, component d's weight is max(R2_d, 0) / sum over d of max(R2_d, 0),
where R2_d is how well token position linearly predicts query dimension d; the weights
of a head sum to 1. Each bar is the mean weight of a component over heads (nan weights
are left out), the whiskers one standard deviation over heads, and the dashed line the
uniform share 1/d that a head with position spread evenly over its dimensions would have.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DEFAULT_STEM = "component_weights"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = ("layer", "q_head", "k_head", "component", "component_r2", "weight")
READS = {C.COMPONENT_CSV: COLUMNS}


def build_parser():
    parser = C.base_parser(
        description=__doc__.split("\n\n")[0],
        csv_name=C.COMPONENT_CSV, default_stem=DEFAULT_STEM,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--no-errorbars", action="store_true",
                        help="leave out the standard deviation whiskers")
    parser.add_argument("--logy", action="store_true",
                        help="log scale for the weights (small shares become visible)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.COMPONENT_CSV)
    df = C.load_csv(path, COLUMNS, int_columns=C.ID_COLUMNS + ("component",))
    df = C.select_layers(df, args.layers, path)
    paths = C.output_paths(args, path, DEFAULT_STEM)

    stats = df.groupby("component")["weight"].agg(["mean", "std", "count"])
    components = np.arange(df["component"].min(), df["component"].max() + 1)
    stats = stats.reindex(components)
    mean = stats["mean"].to_numpy()
    std = np.nan_to_num(stats["std"].to_numpy(), nan=0.0)
    n_dims = components.size

    fig, ax = plt.subplots(figsize=args.figsize or (10.0, 5.0), layout="constrained")
    has_value = np.isfinite(mean)
    width = 0.8 if n_dims <= 64 else 1.0
    ax.bar(components[has_value], mean[has_value], width=width, color="#3b75af",
           edgecolor="none", label="mean weight over heads", zorder=2)
    if not args.no_errorbars:
        lo = np.minimum(std, mean)  # whiskers stop at 0: weights are never negative
        ax.errorbar(components[has_value], mean[has_value],
                    yerr=[lo[has_value], std[has_value]], fmt="none", ecolor="#333333",
                    elinewidth=0.7, capsize=1.5 if n_dims <= 64 else 0, zorder=3,
                    label="± 1 standard deviation over heads")
    if n_dims > 0:
        ax.axhline(1.0 / n_dims, color="#d62728", linestyle="--", linewidth=1.2, zorder=4,
                   label=f"uniform share 1/d = 1/{n_dims}")
    missing = components[~has_value]
    if missing.size:
        ax.plot(missing, np.zeros(missing.size), "x", color="grey", zorder=4,
                label="no value (nan in every head)")
    if args.logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0.0)
    ax.set_xlim(components[0] - 0.7, components[-1] + 0.7)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=min(n_dims, 32), integer=True))
    ax.set_xlabel("component: query dimension d (oriented, before the rotation)")
    ax.set_ylabel("share of positional information\nweight = max(R²_d, 0) / Σ max(R², 0)")
    ax.grid(True, axis="y", color="#e3e3e3")
    ax.set_axisbelow(True)
    ax.legend(loc="upper right", framealpha=0.9)
    ax.set_title(args.title or
                 f"Share of positional information per query component, mean over "
                 f"{C.head_count_text(df)}")
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
