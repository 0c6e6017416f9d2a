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

HM = C.plots_module("_head_map")  # the figure: attention_plasticity.plots.head_map

DEFAULT_STEM = "head_map"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = HM.COLUMNS
READS = {C.METRICS_CSV: COLUMNS}


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


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.METRICS_CSV)
    df = C.load_csv(path, COLUMNS)
    df = C.select_layers(df, args.layers, path)
    paths = C.output_paths(args, path, DEFAULT_STEM)
    options = dict(layers=args.layers, annotate=args.annotate, title=args.title, source=path)
    written = []
    if args.separate:
        for column in ("ap_overall", "ap_drop"):
            fig = C.P.head_map(df, (column,), figsize=args.figsize, **options)
            written += C.save_figure(fig, C.with_suffix(paths, "_" + column), args.dpi)
    else:
        fig = C.P.head_map(df, ("ap_overall", "ap_drop"), figsize=args.figsize, **options)
        written += C.save_figure(fig, paths, args.dpi)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
