#!/usr/bin/env python3
"""Trajectory of attention plasticity over ordered result sets (checkpoints), and the per-head
change between two of them, from the files of ap_compare / attention_plasticity.compare_runs
(docs/method.md §8.6).

Reads compare_trajectory.csv (set,order,quantity,layer,n_heads,mean,se,df,ci_low,ci_high): the top
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

TR = C.plots_module("_trajectory")  # the figures: attention_plasticity.plots.trajectory, .changes

DEFAULT_STEM = "trajectory"
TRAJECTORY_CSV = "compare_trajectory.csv"
HEADS_CSV = "compare_heads.csv"


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


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, TRAJECTORY_CSV)
    df = C.load_csv(path, TR.TRAJECTORY_COLUMNS, int_columns=TR.TRAJECTORY_INT_COLUMNS,
                    text_columns=TR.TRAJECTORY_TEXT_COLUMNS)
    layers = sorted(args.layers) if args.layers else None
    fig = C.P.trajectory(df, layers=layers, title=args.title, figsize=args.figsize, source=path)
    paths = C.output_paths(args, path, DEFAULT_STEM)
    written = C.save_figure(fig, paths, args.dpi)
    if args.changes:
        heads_path = os.path.join(os.path.dirname(os.path.abspath(path)), HEADS_CSV)
        heads = C.load_csv(heads_path, TR.HEADS_COLUMNS, int_columns=TR.HEADS_INT_COLUMNS,
                           text_columns=TR.HEADS_TEXT_COLUMNS)
        pair = None
        if args.pair:
            pair = tuple(s.strip() for s in args.pair.split(","))
            if len(pair) != 2:
                raise C.UsageError(f"--pair: expected A,B, got {args.pair!r}")
        fig = C.P.changes(heads, quantity=args.quantity, pair=pair, figsize=args.figsize, source=HEADS_CSV)
        written += C.save_figure(fig, C.with_suffix(paths, "_changes"), args.dpi)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
