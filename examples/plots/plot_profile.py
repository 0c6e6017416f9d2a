#!/usr/bin/env python3
"""Plot attention plasticity against query position, one line per head.

Reads head_profile.csv (columns layer,q_head,k_head,q_bucket,tau,n_queries,
plasticity,n_pairs). For each query bucket the x value is tau, the mean token
position of the bucket's queries, and the y value is the bucket's plasticity AP_j:
the mean of 4p(1-p) over the key pairs of the bucket (1 = which key wins depends
entirely on the query, 0 = it is fixed whatever the query).

Each head is a thin line coloured by its layer; the bold line is the mean over heads
per query bucket (buckets where a head has no value, written as nan, are left out of
that head's line and of the mean). Buckets with fewer queries than min_bucket_queries (the
small_bucket column, docs/method.md §2.14: too few queries to model, left out of ap_overall)
are drawn as open red circles on their head's line and left out of the mean. With
--facet-by-layer there is one panel per layer.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

PR = C.plots_module("_profile")  # the figure: attention_plasticity.plots.profile

DEFAULT_STEM = "plasticity_profile"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = PR.COLUMNS
OPTIONAL_COLUMNS = PR.OPTIONAL_COLUMNS  # used when the file has it (small_buckets, mean_profile)
READS = {C.PROFILE_CSV: COLUMNS + OPTIONAL_COLUMNS}
small_buckets, mean_profile = PR.small_buckets, PR.mean_profile


def build_parser():
    parser = C.base_parser(
        description=__doc__.split("\n\n")[0],
        csv_name=C.PROFILE_CSV, default_stem=DEFAULT_STEM,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--facet-by-layer", action="store_true",
                        help="one panel per layer (lines coloured by query head) "
                             "instead of all heads in one panel")
    parser.add_argument("--xscale", choices=("auto", "linear", "log"), default="auto",
                        help="x axis scale; auto uses log when tau spans more than a "
                             "factor 20 (default: auto)")
    parser.add_argument("--ylim", type=float, nargs=2, metavar=("LO", "HI"),
                        help="y axis range (default: 0 to 1, the range of plasticity)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.PROFILE_CSV)
    df = C.load_csv(path, COLUMNS, int_columns=PR.INT_COLUMNS)
    df = C.select_layers(df, args.layers, path)
    paths = C.output_paths(args, path, DEFAULT_STEM + ("_by_layer" if args.facet_by_layer
                                                        else ""))
    fig = C.P.profile(df, layers=args.layers, facet_by_layer=args.facet_by_layer, xscale=args.xscale,
                      ylim=args.ylim, title=args.title, figsize=args.figsize, source=path)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
