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

BH = C.plots_module("_buckets")  # the figure: attention_plasticity.plots.bucket_heatmap

DEFAULT_STEM = "bucket_heatmap"
# What this plot reads (checked against the C++ definition of the tables by tests/python/test_results_api.py).
COLUMNS = BH.COLUMNS
PROFILE_COLUMNS = BH.PROFILE_COLUMNS  # --profile: the buckets' positions
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


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = C.resolve_csv(args.csv, C.BUCKET_CSV)
    df = C.load_csv(path, COLUMNS, int_columns=BH.INT_COLUMNS)
    df = C.select_layers(df, args.layers, path)
    profile = False
    if args.profile:
        profile_path = C.resolve_csv(args.profile, C.PROFILE_CSV)
        profile = C.load_csv(profile_path, PROFILE_COLUMNS, int_columns=BH.PROFILE_INT_COLUMNS)
        profile = C.select_layers(profile, args.layers, profile_path)
    paths = C.output_paths(args, path, DEFAULT_STEM)
    fig = C.P.bucket_heatmap(df, profile=profile, layers=args.layers, stat=args.stat, vmin=args.vmin,
                             vmax=args.vmax, annotate=args.annotate, title=args.title,
                             figsize=args.figsize, source=path,
                             profile_source=args.profile and profile_path)
    for p in C.save_figure(fig, paths, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(C.run_main(main, None, os.path.basename(__file__)))
