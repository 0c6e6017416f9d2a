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

CW = C.plots_module("_components")  # the figure: attention_plasticity.plots.component_weights

DEFAULT_STEM = "component_weights"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = CW.COLUMNS
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
    df = C.load_csv(path, COLUMNS, int_columns=CW.INT_COLUMNS)
    df = C.select_layers(df, args.layers, path)
    paths = C.output_paths(args, path, DEFAULT_STEM)
    fig = C.P.component_weights(df, layers=args.layers, errorbars=not args.no_errorbars, logy=args.logy,
                                title=args.title, figsize=args.figsize, source=path)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
