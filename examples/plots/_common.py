"""Code shared by the plot scripts: CSV loading, options, saving.

The figures themselves are drawn by the package's ``attention_plasticity.plots``
(python/attention_plasticity/plots: pure NumPy, pandas and matplotlib). ``plots()`` loads it from
this source tree by path, so that the scripts run with a Python that has matplotlib and pandas but
not the compiled package (Debian's /usr/bin/python3, examples/run_demo.sh) and draw with the code
of this checkout; without the source tree (a script copied elsewhere), the installed package's.

The scripts read the CSVs that ``ap_analyze`` writes (docs/method.md §3). Every problem
with an input (missing file, missing column, unusable value) raises ``InputError``;
``run_main`` turns it into one line on stderr and exit status 2.
"""

import argparse
import importlib
import importlib.util
import os
import sys

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display (the scripts' choice, not the library's)

import pandas as pd  # noqa: E402

PLOTS_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                            "python", "attention_plasticity", "plots")
# The name the source tree's copy is loaded under: not attention_plasticity.plots, whose parent
# package (with the compiled module) may be absent, or installed from other sources.
_PLOTS_MODULE = "_attention_plasticity_plots_source"


def plots():
    """The package attention_plasticity.plots: this checkout's (by path), else the installed one."""
    if _PLOTS_MODULE in sys.modules:
        return sys.modules[_PLOTS_MODULE]
    init = os.path.join(PLOTS_SOURCE, "__init__.py")
    if not os.path.isfile(init):
        try:
            import attention_plasticity.plots as installed
        except ImportError as exc:
            raise ImportError(f"{os.path.basename(sys.argv[0])}: the figures are drawn by attention_plasticity.plots: "
                              f"neither {os.path.normpath(PLOTS_SOURCE)} (the scripts' source tree) nor an installed "
                              f"package has it ({exc})") from None
        return installed
    spec = importlib.util.spec_from_file_location(_PLOTS_MODULE, init,
                                                  submodule_search_locations=[os.path.dirname(init)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[_PLOTS_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_PLOTS_MODULE]
        raise
    return module


P = plots()


def plots_module(name):
    """A module of the plots package, e.g. "_head_map" (the columns a figure reads, its helpers)."""
    return importlib.import_module(f"{P.__name__}.{name}")


T = plots_module("_tables")  # the tables' checks, shared with the library

EXIT_INPUT_ERROR = 2

# The files of docs/method.md §3 the scripts read. Each script declares the columns it reads
# (its COLUMNS, READS: the library's); the tables' columns themselves are defined once, by the C++ writer
# (include/attention_plasticity/io/csv_rows.hpp, attention_plasticity.result_schema()), and
# tests/python/test_results_api.py checks every script's READS against that definition.
PROFILE_CSV = "head_profile.csv"
BUCKET_CSV = "head_bucket_plasticity.csv"
COMPONENT_CSV = "head_component_weights.csv"
DISTANCE_CSV = "head_distance_plasticity.csv"
METRICS_CSV = "head_metrics.csv"

ID_COLUMNS = T.ID_COLUMNS
FORMATS = ("png", "pdf", "svg")
DEFAULT_DPI = 100.0

# An input the scripts cannot use; the message names the file and the problem. The library's
# error, so that its checks of a table (with the file's name as ``source``) report alike.
InputError = T.PlotInputError
format_layer_set = T.format_layer_set


class UsageError(Exception):
    """A bad option value; reported like argparse does, exit status 2."""


def resolve_csv(path, default_name):
    """A directory stands for ``<dir>/<default_name>``."""
    if path is not None and os.path.isdir(path):
        return os.path.join(path, default_name)
    return path


def load_csv(path, required, int_columns=ID_COLUMNS, text_columns=()):
    """Read ``path`` and check it (attention_plasticity.plots' check of a table, messages with the
    file's name and line numbers).

    ``required`` columns must all be present; they are converted to numbers, and the
    text ``nan`` (as the driver writes it) becomes NaN. ``int_columns`` must hold
    whole numbers in every row; ``text_columns`` must be present. Extra columns are kept as read.
    """
    if not os.path.exists(path):
        raise InputError(f"{path}: file not found")
    if not os.path.isfile(path):
        raise InputError(f"{path}: not a regular file")
    try:
        df = pd.read_csv(path, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: file is empty (expected a header row with columns "
                         f"{', '.join(required)})") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InputError(f"{path}: cannot read as CSV: {exc}") from None
    return T.check_columns(df, required, path, int_columns=int_columns, csv=True,
                           text_columns=text_columns)


def parse_layers(text):
    """'0-3,7' -> {0, 1, 2, 3, 7}."""
    layers = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                lo, hi = int(lo), int(hi)
                if lo > hi or lo < 0:
                    raise ValueError
                layers.update(range(lo, hi + 1))
            else:
                layers.add(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid layer list {text!r} (expected e.g. '0-3,7')") from None
    if not layers:
        raise argparse.ArgumentTypeError(f"empty layer list {text!r}")
    return layers


def select_layers(df, layers, path):
    """The rows of ``layers`` (None: all); InputError naming the file when none is there."""
    return T.select_layers(df, layers, path, where="file")


def base_parser(description, csv_name, default_stem, epilog=None):
    """Options every plot script has."""
    parser = argparse.ArgumentParser(
        description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "csv", metavar="CSV",
        help=f"the driver's {csv_name}, or a results directory that contains it")
    parser.add_argument(
        "-o", "--out", metavar="PATH",
        help=f"output file; its extension is replaced by each format written "
             f"(default: {default_stem}.png beside the CSV)")
    parser.add_argument(
        "--format", metavar="FMT[,FMT]",
        help="formats to write, comma separated, from: " + ", ".join(FORMATS) +
             " (default: the extension of --out if it is one of these, else png)")
    parser.add_argument("--pdf", action="store_true",
                        help="also write a PDF (same as adding pdf to --format)")
    parser.add_argument("--dpi", type=float, default=DEFAULT_DPI,
                        help="resolution of raster output; the PNG is "
                             "figsize x dpi pixels (default: %(default)g)")
    parser.add_argument("--figsize", type=float, nargs=2, metavar=("W", "H"),
                        help="figure size in inches (default depends on the plot)")
    parser.add_argument("--layers", type=parse_layers, metavar="LIST",
                        help="only these layers, e.g. '0-3,7' (default: all)")
    parser.add_argument("--title", help="replace the figure title")
    return parser


def output_paths(args, csv_path, default_stem):
    """The files to write, one per format."""
    out = args.out
    if out is None:
        out = os.path.join(os.path.dirname(os.path.abspath(csv_path)), default_stem + ".png")
    root, ext = os.path.splitext(out)
    ext = ext.lstrip(".").lower()
    if ext not in FORMATS:
        root, ext = out, ""
    if args.format:
        formats = [f.strip().lower() for f in args.format.split(",") if f.strip()]
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            raise UsageError(f"unknown format {', '.join(unknown)} "
                             f"(choose from {', '.join(FORMATS)})")
    else:
        formats = [ext or "png"]
    if args.pdf and "pdf" not in formats:
        formats.append("pdf")
    return [f"{root}.{fmt}" for fmt in dict.fromkeys(formats)]


def with_suffix(paths, suffix):
    """['a/x.png', 'a/x.pdf'] + '_drop' -> ['a/x_drop.png', 'a/x_drop.pdf']."""
    return [f"{os.path.splitext(p)[0]}{suffix}{os.path.splitext(p)[1]}" for p in paths]


def save_figure(fig, paths, dpi):
    """Write ``fig`` to each path whole (temporary name, then rename)."""
    import matplotlib.pyplot as plt

    written = []
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fmt = os.path.splitext(path)[1].lstrip(".").lower()
        tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
        try:
            fig.savefig(tmp, format=fmt, dpi=dpi)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        written.append(path)
    plt.close(fig)
    return written


def run_main(main, argv, prog):
    """Call ``main(argv)``; report input errors as 'prog: error: ...' with exit status 2."""
    try:
        return main(argv)
    except (InputError, UsageError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR


def add_heatmap_options(parser):
    """--vmin, --vmax and --annotate, the options every heatmap has."""
    parser.add_argument("--vmin", type=float,
                        help="colour scale minimum (default: smallest cell value)")
    parser.add_argument("--vmax", type=float,
                        help="colour scale maximum (default: largest cell value)")
    parser.add_argument("--annotate", choices=("auto", "yes", "no"), default="auto",
                        help="print values in the cells (auto: when the grid is at "
                             "most 16 x 16)")
