"""Code shared by the plot scripts: CSV loading and checking, options, saving.

The scripts read the CSVs that ``ap_analyze`` writes (docs/method.md §3). Every problem
with an input (missing file, missing column, unusable value) raises ``InputError``;
``run_main`` turns it into one line on stderr and exit status 2.
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

EXIT_INPUT_ERROR = 2

# The files of docs/method.md §3 the scripts read. Each script declares the columns it reads
# (its COLUMNS, READS); the tables' columns themselves are defined once, by the C++ writer
# (include/attention_plasticity/io/csv_rows.hpp, attention_plasticity.result_schema()), and
# tests/python/test_results_api.py checks every script's READS against that definition.
PROFILE_CSV = "head_profile.csv"
BUCKET_CSV = "head_bucket_plasticity.csv"
COMPONENT_CSV = "head_component_weights.csv"
DISTANCE_CSV = "head_distance_plasticity.csv"
METRICS_CSV = "head_metrics.csv"

ID_COLUMNS = ("layer", "q_head", "k_head")
FORMATS = ("png", "pdf", "svg")
DEFAULT_DPI = 100.0

# Grey for cells without a value (NaN) in every heatmap.
MISSING_COLOUR = "#dcdcdc"
MISSING_HATCH = "#9a9a9a"


class InputError(Exception):
    """An input the scripts cannot use; the message names the file and the problem."""


class UsageError(Exception):
    """A bad option value; reported like argparse does, exit status 2."""


def resolve_csv(path, default_name):
    """A directory stands for ``<dir>/<default_name>``."""
    if path is not None and os.path.isdir(path):
        return os.path.join(path, default_name)
    return path


def load_csv(path, required, int_columns=ID_COLUMNS):
    """Read ``path`` and check it.

    ``required`` columns must all be present; they are converted to numbers, and the
    text ``nan`` (as the driver writes it) becomes NaN. ``int_columns`` must hold
    whole numbers in every row. Extra columns are kept as read.
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
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        noun = "column" if len(missing) == 1 else "columns"
        raise InputError(f"{path}: missing {noun} {', '.join(repr(c) for c in missing)} "
                         f"(the header has: {', '.join(df.columns)})")
    if df.empty:
        raise InputError(f"{path}: no data rows (only a header)")
    for col in required:
        raw = df[col]
        num = pd.to_numeric(raw, errors="coerce")
        bad = num.isna() & raw.notna() & ~raw.astype(str).str.strip().str.lower().isin(
            ("nan", "-nan", "+nan", ""))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"{path}: column '{col}' has a non-numeric value "
                             f"{raw.iloc[row]!r} on line {row + 2}")
        df[col] = num.astype(float)
    for col in int_columns:
        if col not in df.columns:
            continue
        vals = df[col].to_numpy()
        bad = ~np.isfinite(vals) | (vals != np.round(vals))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"{path}: column '{col}' must hold whole numbers; line "
                             f"{row + 2} has {df[col].iloc[row]!r}")
        df[col] = vals.astype(np.int64)
    return df


def no_pairs_is_nan(df):
    """Plasticity of a row without key pairs (n_pairs 0) is undefined, whatever is written."""
    df = df.copy()
    df.loc[df["n_pairs"] == 0, "plasticity"] = np.nan
    return df


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
    if layers is None:
        return df
    out = df[df["layer"].isin(sorted(layers))]
    if out.empty:
        raise InputError(f"{path}: none of the requested layers "
                         f"{format_layer_set(layers)} is in the file (it has "
                         f"{format_layer_set(set(df['layer']))})")
    return out


def format_layer_set(layers):
    """{0,1,2,5} -> '0-2, 5'."""
    layers = sorted(int(x) for x in layers)
    if not layers:
        return "none"
    runs, start, prev = [], layers[0], layers[0]
    for x in layers[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(runs)


def head_count_text(df):
    heads = df[["layer", "q_head"]].drop_duplicates()
    n_layers = heads["layer"].nunique()
    return (f"{len(heads)} head{'s' if len(heads) != 1 else ''} in "
            f"{n_layers} layer{'s' if n_layers != 1 else ''}")


def format_tokens(x):
    """A token position for a tick label: 7, 130, 1.5k, 12k."""
    if not np.isfinite(x):
        return "?"
    if abs(x) < 1000:
        return f"{x:.0f}" if abs(x) >= 10 or float(x).is_integer() else f"{x:.1f}"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.1f}{unit}" if abs(v) < 10 else f"{v:.0f}{unit}"
    return f"{x:.0f}"


def tick_step(n, max_ticks):
    """Show every k-th tick label so that at most ``max_ticks`` are shown."""
    return max(1, int(np.ceil(n / max(1, max_ticks))))


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


def discrete_layer_colours(layers, cmap_name="viridis"):
    """A colour map and norm with one colour per layer value, for lines and colour bars."""
    from matplotlib import colors

    layers = sorted(set(int(x) for x in layers))
    lo, hi = layers[0], layers[-1]
    n = hi - lo + 1
    base = matplotlib.colormaps[cmap_name]  # cm.get_cmap is gone in matplotlib 3.9
    # Stop short of viridis' light yellow end so that thin lines stay visible on white.
    cmap = colors.ListedColormap(base(np.linspace(0.0, 0.88, max(n, 2)))[:n] if n > 1
                                 else base([0.35]))
    norm = colors.BoundaryNorm(np.arange(lo - 0.5, hi + 1.5), cmap.N)
    return cmap, norm


def colourmap_with_missing(name):
    """A colour map whose NaN cells are transparent: ``hatch_missing`` shows through."""
    cmap = matplotlib.colormaps[name].copy()
    cmap.set_bad((0.0, 0.0, 0.0, 0.0))
    return cmap


def hatch_missing(ax):
    """Grey hatched background, seen where a heatmap cell has no value."""
    ax.patch.set_facecolor(MISSING_COLOUR)
    ax.patch.set_edgecolor(MISSING_HATCH)
    ax.patch.set_hatch("////")
    ax.patch.set_linewidth(0.0)


def missing_patch(label):
    from matplotlib.patches import Patch

    return Patch(facecolor=MISSING_COLOUR, edgecolor=MISSING_HATCH, hatch="////",
                 linewidth=0.0, label=label)


def format_cell(v):
    text = f"{v:.2f}"
    return "0.00" if text == "-0.00" else text


def add_heatmap_options(parser):
    """--vmin, --vmax and --annotate, the options every heatmap has."""
    parser.add_argument("--vmin", type=float,
                        help="colour scale minimum (default: smallest cell value)")
    parser.add_argument("--vmax", type=float,
                        help="colour scale maximum (default: largest cell value)")
    parser.add_argument("--annotate", choices=("auto", "yes", "no"), default="auto",
                        help="print values in the cells (auto: when the grid is at "
                             "most 16 x 16)")


def colour_range(values, args):
    """(finite cell values, vmin, vmax) from the cells and --vmin/--vmax."""
    finite = values[np.isfinite(values)]
    vmin = args.vmin if args.vmin is not None else (finite.min() if finite.size else 0.0)
    vmax = args.vmax if args.vmax is not None else (finite.max() if finite.size else 1.0)
    if vmax <= vmin:
        vmin, vmax = vmin - 0.05, vmax + 0.05
    return finite, vmin, vmax


def head_grid(df, column, layers=None):
    """layers, heads, values [n_layers, n_heads] with NaN where there is no value.

    Rows are ``layers`` (default: every layer from the first to the last in ``df``);
    columns every query head from the first to the last.
    """
    if layers is None:
        layers = np.arange(df["layer"].min(), df["layer"].max() + 1)
    layers = np.asarray(sorted(layers))
    heads = np.arange(df["q_head"].min(), df["q_head"].max() + 1)
    values = np.full((layers.size, heads.size), np.nan)
    g = df.groupby(["layer", "q_head"])[column].mean()
    row = {int(layer): i for i, layer in enumerate(layers)}
    for (layer, q_head), v in g.items():
        if int(layer) in row:
            values[row[int(layer)], int(q_head) - heads[0]] = v
    return layers, heads, values


def head_ticks(ax, layers, heads):
    """The layer and query head labels of a head_grid heatmap (at most 40 and 32 of them)."""
    sx, sy = tick_step(len(heads), 32), tick_step(len(layers), 40)
    ax.set_xticks(np.arange(0, len(heads), sx))
    ax.set_xticklabels([str(h) for h in heads[::sx]])
    ax.set_yticks(np.arange(0, len(layers), sy))
    ax.set_yticklabels([str(layer) for layer in layers[::sy]])


def symmetric_limit(values):
    """The largest |value| of the finite cells (1 when there is none or it is 0): the colour
    range -m..m of a diverging map."""
    finite = values[np.isfinite(values)]
    m = float(np.abs(finite).max()) if finite.size else 1.0
    return m if m > 0 else 1.0


def cell_grid(ax, rows, columns):
    """White lines between the cells of a rows x columns heatmap."""
    ax.set_xticks(np.arange(columns + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)


def annotate_cells(ax, values, vmin, vmax, mode):
    """The value of each finite cell printed in it (mode 'yes', or 'auto' up to 16 x 16)."""
    rows, columns = values.shape
    if not (mode == "yes" or (mode == "auto" and rows <= 16 and columns <= 16)):
        return
    mid = vmin + 0.5 * (vmax - vmin)
    fontsize = max(5.5, min(9.0, 90.0 / max(rows, columns, 1)))
    for i in range(rows):
        for j in range(columns):
            v = values[i, j]
            if np.isfinite(v):
                ax.text(j, i, format_cell(v), ha="center", va="center", fontsize=fontsize,
                        color="black" if v > mid else "white")
