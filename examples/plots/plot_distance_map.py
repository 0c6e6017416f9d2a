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

DM = C.plots_module("_distance")  # the figure: attention_plasticity.plots.distance_map

DEFAULT_STEM = "distance_map"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = DM.COLUMNS
READS = {C.DISTANCE_CSV: COLUMNS}
edge_label, cell_matrix = DM.edge_label, DM.cell_matrix


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


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.min_pairs < 1:
        raise C.UsageError(f"--min-pairs must be at least 1, got {args.min_pairs}")
    path = C.resolve_csv(args.csv, C.DISTANCE_CSV)
    df = C.load_csv(path, COLUMNS, int_columns=DM.INT_COLUMNS)
    df = C.select_layers(df, args.layers, path)
    DM.check_bins(df, path, csv=True)
    paths = C.output_paths(args, path, DEFAULT_STEM)
    fig = C.P.distance_map(df, layers=args.layers, stat=args.stat, min_pairs=args.min_pairs,
                           vmin=args.vmin, vmax=args.vmax, annotate=args.annotate, title=args.title,
                           figsize=args.figsize, source=path)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
