#!/usr/bin/env python3
"""Render every plot of a results directory written by ap_analyze.

Reads, from --results DIR, head_profile.csv, head_bucket_plasticity.csv,
head_component_weights.csv, head_metrics.csv and head_distance_plasticity.csv, and writes
into --out DIR:

  plasticity_profile.png   plot_profile.py         plasticity vs query position
  bucket_heatmap.png       plot_bucket_heatmap.py  query bucket x key bucket (axes in
                                                   tokens when head_profile.csv exists)
  component_weights.png    plot_component_weights.py  positional share per component
  head_map.png             plot_head_map.py        ap_overall and ap_drop, layer x head
  distance_map.png         plot_distance_map.py    inter-key x key-to-query distance

and prints the path of each file written, one per line. A plot whose input is missing
or unusable is reported on stderr and the others are still rendered; the exit status
is then 2.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402
import plot_bucket_heatmap  # noqa: E402
import plot_component_weights  # noqa: E402
import plot_distance_map  # noqa: E402
import plot_head_map  # noqa: E402
import plot_profile  # noqa: E402


def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, metavar="DIR",
                        help="directory with the driver's CSV files")
    parser.add_argument("--out", metavar="DIR",
                        help="directory for the figures (created if needed; "
                             "default: the results directory)")
    parser.add_argument("--format", metavar="FMT[,FMT]",
                        help="formats to write, comma separated, from: "
                             + ", ".join(C.FORMATS) + " (default: png)")
    parser.add_argument("--pdf", action="store_true", help="also write PDFs")
    parser.add_argument("--dpi", type=float, default=C.DEFAULT_DPI,
                        help="resolution of the PNGs (default: %(default)g)")
    parser.add_argument("--layers", metavar="LIST", type=C.parse_layers,
                        help="only these layers, e.g. '0-3,7' (default: all)")
    parser.add_argument("--facet-by-layer", action="store_true",
                        help="also write plasticity_profile_by_layer.png, one panel "
                             "per layer")
    return parser


def jobs(args):
    """(program name, main function, argv) for each plot."""
    res, out = args.results, args.out or args.results
    profile_csv = os.path.join(res, C.PROFILE_CSV)
    common = ["--dpi", repr(args.dpi)]
    if args.format:
        common += ["--format", args.format]
    if args.pdf:
        common.append("--pdf")
    if args.layers is not None:
        common += ["--layers", ",".join(str(x) for x in sorted(args.layers))]
    heatmap = [os.path.join(res, C.BUCKET_CSV),
               "-o", os.path.join(out, plot_bucket_heatmap.DEFAULT_STEM + ".png")]
    if os.path.isfile(profile_csv):
        heatmap += ["--profile", profile_csv]
    out_list = [
        ("plot_profile.py", plot_profile.main,
         [profile_csv, "-o", os.path.join(out, plot_profile.DEFAULT_STEM + ".png")]),
        ("plot_bucket_heatmap.py", plot_bucket_heatmap.main, heatmap),
        ("plot_component_weights.py", plot_component_weights.main,
         [os.path.join(res, C.COMPONENT_CSV),
          "-o", os.path.join(out, plot_component_weights.DEFAULT_STEM + ".png")]),
        ("plot_head_map.py", plot_head_map.main,
         [os.path.join(res, C.METRICS_CSV),
          "-o", os.path.join(out, plot_head_map.DEFAULT_STEM + ".png")]),
        ("plot_distance_map.py", plot_distance_map.main,
         [os.path.join(res, C.DISTANCE_CSV),
          "-o", os.path.join(out, plot_distance_map.DEFAULT_STEM + ".png")]),
    ]
    if args.facet_by_layer:
        out_list.insert(1, ("plot_profile.py", plot_profile.main,
                            [profile_csv, "--facet-by-layer", "-o",
                             os.path.join(out, plot_profile.DEFAULT_STEM
                                          + "_by_layer.png")]))
    return [(prog, fn, argv + common) for prog, fn, argv in out_list]


def main(argv=None):
    args = build_parser().parse_args(argv)
    prog = "render_all.py"
    if not os.path.isdir(args.results):
        print(f"{prog}: error: {args.results}: results directory not found",
              file=sys.stderr)
        return C.EXIT_INPUT_ERROR
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name, fn, job_argv in jobs(args):
        if C.run_main(fn, job_argv, name) != 0:
            failed += 1
        sys.stdout.flush()
    if failed:
        print(f"{prog}: {failed} plot(s) not rendered (see the errors above)",
              file=sys.stderr)
        return C.EXIT_INPUT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
