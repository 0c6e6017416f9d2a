#!/usr/bin/env python3
"""Trajectory of attention plasticity over ordered result sets (checkpoints), and the per-head
change between two of them, from the files of ap_compare / attention_plasticity.compare_runs
(docs/method.md §8.6).

Reads compare_trajectory.csv (set,order,quantity,layer,n_heads,mean,se,ci_low,ci_high): the top
panel shows, per set in order, the mean over heads of ap_first20 and ap_last20 with their
intervals (error bars) and the gap between them shaded (red where ap_last20 is below
ap_first20: the head loses plasticity late in the context); the bottom panel the mean
bias_strength of the planar rotation model (§8.5) as bars. With --changes, it also draws
compare_heads.csv of the same folder as a layer x head heatmap of the bias-corrected change of
one quantity (--quantity, default ap_overall) from one set to the next (--pair, default the
first pair), the heads whose change is significant (BH q <= alpha) outlined; suffix _changes.
The means are over all layers; --layers keeps the rows of those layers only (one layer: its
own means; several: drawn one line per layer).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

DEFAULT_STEM = "trajectory"
TRAJECTORY_CSV = "compare_trajectory.csv"
HEADS_CSV = "compare_heads.csv"
TRAJECTORY_COLUMNS = ("order", "n_heads", "mean", "se", "ci_low", "ci_high")
HEADS_COLUMNS = ("layer", "q_head", "difference", "se", "q_bh", "significant")


def build_parser():
    parser = C.base_parser(description=__doc__.split("\n\n")[0], csv_name=TRAJECTORY_CSV,
                           default_stem=DEFAULT_STEM, epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--changes", action="store_true",
                        help="also draw the per-head change heatmap from compare_heads.csv")
    parser.add_argument("--quantity", default="ap_overall",
                        choices=("ap_overall", "ap_first20", "ap_last20", "ap_drop"),
                        help="the quantity of the change heatmap (default: %(default)s)")
    parser.add_argument("--pair", metavar="A,B", help="the pair of sets of the heatmap (default: the first)")
    return parser


def series(df, quantity, layer):
    rows = df[(df["quantity"] == quantity) & (df["layer"].astype(str) == layer)].sort_values("order")
    return rows


def draw_trajectory(df, layer_keys, title, figsize):
    fig, (top, bottom) = plt.subplots(2, 1, figsize=figsize or (8.0, 6.5), sharex=True, layout="constrained",
                                      gridspec_kw={"height_ratios": [2.2, 1.0]})
    names = df.sort_values("order").drop_duplicates("order")["set"].tolist()
    x = np.arange(len(names))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, layer in enumerate(layer_keys):
        first, last = series(df, "ap_first20", layer), series(df, "ap_last20", layer)
        label = "" if layer == "all" else f" (layer {layer})"
        if not first.empty and not last.empty and len(first) == len(last):
            f, la = first["mean"].to_numpy(), last["mean"].to_numpy()
            top.fill_between(x, f, la, where=f >= la, color="tab:red", alpha=0.15, interpolate=True,
                             label="gap: AP_last20 below AP_first20" if i == 0 else None)
            top.fill_between(x, f, la, where=f < la, color="tab:blue", alpha=0.12, interpolate=True,
                             label="gap: AP_last20 above AP_first20" if i == 0 else None)
        for rows, style, name in ((first, "-o", "AP_first20"), (last, "--s", "AP_last20")):
            if rows.empty:
                continue
            xi = rows["order"].to_numpy()
            err = np.vstack([rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]])
            top.errorbar(xi, rows["mean"], yerr=err, fmt=style, capsize=3, color=colours[i % len(colours)],
                         label=name + label)
        bias = series(df, "bias_strength", layer)
        if not bias.empty:
            width = 0.8 / len(layer_keys)
            bottom.bar(bias["order"].to_numpy() - 0.4 + width * (i + 0.5), bias["mean"], width=width,
                       color=colours[i % len(colours)], label="bias_strength" + label)
    top.set_ylabel("mean attention plasticity over heads\n(bars: intervals of §8.3)")
    top.legend(fontsize=8, loc="best")
    top.grid(alpha=0.3)
    bottom.axhline(0.0, color="black", linewidth=0.6)
    bottom.set_ylabel("mean bias_strength\n(mu_Q^a alpha_K, §8.5)")
    bottom.set_xticks(x)
    bottom.set_xticklabels(names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    bottom.set_xlabel("result set (in order)")
    bottom.grid(alpha=0.3, axis="y")
    fig.suptitle(title)
    return fig


def draw_changes(heads, quantity, pair, figsize):
    rows = heads[(heads["quantity"] == quantity) & (heads["set_a"] == pair[0]) & (heads["set_b"] == pair[1])]
    if rows.empty:
        raise C.InputError(f"{HEADS_CSV}: no rows of {quantity} for the pair {pair[0]} -> {pair[1]}")
    layers, heads_axis, values = C.head_grid(rows, "difference")
    significant = C.head_grid(rows, "significant")[2] == 1  # no row: NaN, not significant
    fig, ax = plt.subplots(figsize=figsize or (7.5, 6.0), layout="constrained")
    m = C.symmetric_limit(values)
    C.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=C.colourmap_with_missing("RdBu_r"), vmin=-m, vmax=m,
                   aspect="auto", interpolation="nearest")
    for i, j in zip(*np.nonzero(significant)):
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.4))
    C.head_ticks(ax, layers, heads_axis)
    ax.set_xlabel("query head")
    ax.set_ylabel("layer")
    ax.set_title(f"change of {quantity}: {pair[0]} -> {pair[1]} (bias-corrected)\n"
                 f"{int(significant.sum())} of {int(np.isfinite(values).sum())} heads changed at BH q <= alpha "
                 "(outlined)", fontsize=10.5)
    cbar = fig.colorbar(im, ax=ax, pad=0.02, aspect=30)
    cbar.set_label(f"{quantity}, second set minus first", fontsize=9)
    return fig


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, TRAJECTORY_CSV)
    df = C.load_csv(path, TRAJECTORY_COLUMNS, int_columns=("order", "n_heads"))
    layer_keys = ["all"] if not args.layers else [str(x) for x in sorted(args.layers)]
    missing = [k for k in layer_keys if not (df["layer"].astype(str) == k).any()]
    if missing:
        raise C.InputError(f"{path}: no rows for layer {', '.join(missing)}")
    paths = C.output_paths(args, path, DEFAULT_STEM)
    title = args.title or "Attention plasticity over the result sets (mean over heads)"
    written = C.save_figure(draw_trajectory(df, layer_keys, title, args.figsize), paths, args.dpi)
    if args.changes:
        heads_path = os.path.join(os.path.dirname(os.path.abspath(path)), HEADS_CSV)
        heads = C.load_csv(heads_path, HEADS_COLUMNS, int_columns=("layer", "q_head", "significant"))
        if args.pair:
            pair = tuple(s.strip() for s in args.pair.split(","))
            if len(pair) != 2:
                raise C.UsageError(f"--pair: expected A,B, got {args.pair!r}")
        else:
            first = heads.iloc[0]
            pair = (str(first["set_a"]), str(first["set_b"]))
        written += C.save_figure(draw_changes(heads, args.quantity, pair, args.figsize), C.with_suffix(paths, "_changes"),
                                 args.dpi)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
