"""What the figures share: tick labels in tokens, colours per layer, and the heatmaps' grid, grey
hatched missing cells, colour range and cell annotations."""

from __future__ import annotations

import matplotlib
import numpy as np

# Grey for cells without a value (NaN) in every heatmap.
MISSING_COLOUR = "#dcdcdc"
MISSING_HATCH = "#9a9a9a"
ANNOTATE = ("auto", "yes", "no")


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


def discrete_layer_colours(layers, cmap_name="viridis"):
    """A colour map and norm with one colour per layer value, for lines and colour bars."""
    from matplotlib import colors

    layers = sorted(set(int(x) for x in layers))
    lo, hi = layers[0], layers[-1]
    n = hi - lo + 1
    base = matplotlib.colormaps[cmap_name]  # cm.get_cmap is gone in matplotlib 3.9
    if n > SPAN_FACTOR * len(layers) + SPAN_SLACK:
        # Values far apart (index_axis): a continuous scale over lo..hi, 256 colours, not one per value.
        cmap = colors.ListedColormap(base(np.linspace(0.0, 0.88, 256)))
        return cmap, colors.Normalize(vmin=lo - 0.5, vmax=hi + 0.5)
    # Stop short of viridis' light yellow end so that thin lines stay visible on white.
    cmap = colors.ListedColormap(base(np.linspace(0.0, 0.88, max(n, 2)))[:n] if n > 1
                                 else base([0.35]))
    norm = colors.BoundaryNorm(np.arange(lo - 0.5, hi + 1.5), cmap.N)
    return cmap, norm


def colourmap_with_missing(name):
    """A colour map whose NaN cells are transparent: ``hatch_missing`` shows through."""
    return matplotlib.colormaps[name].with_extremes(bad=(0.0, 0.0, 0.0, 0.0))  # a copy


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


def colour_range(values, vmin=None, vmax=None):
    """(finite cell values, vmin, vmax) from the cells and the caller's vmin/vmax."""
    finite = values[np.isfinite(values)]
    vmin = vmin if vmin is not None else (finite.min() if finite.size else 0.0)
    vmax = vmax if vmax is not None else (finite.max() if finite.size else 1.0)
    if vmax <= vmin:
        vmin, vmax = vmin - 0.05, vmax + 0.05
    return finite, vmin, vmax


# An index axis spans every index from the first to the last present while that span is at most
# this many times the indices present, plus SPAN_SLACK; beyond, only the indices present (issue 33,
# item 6: memory and drawing proportional to the rows, not to the largest index).
SPAN_FACTOR = 4
SPAN_SLACK = 64


def index_axis(values):
    """The axis of an integer index column (layer, q_head, q_bucket, component, ...): every index
    from the smallest to the largest present, the missing ones drawn as gaps, when that span is at
    most SPAN_FACTOR times the distinct indices plus SPAN_SLACK; else only the distinct indices
    present, in order (compacted: a q_head of 2**20 beside 0 to 7 gives nine columns, not a
    million). Memory proportional to the rows either way."""
    present = np.unique(np.asarray(values, dtype=np.int64))
    if present.size == 0:
        return present
    span = int(present[-1]) - int(present[0]) + 1  # Python ints: no int64 overflow
    if span <= SPAN_FACTOR * present.size + SPAN_SLACK:
        return np.arange(present[0], present[-1] + 1, dtype=np.int64)
    return present


def axis_positions(axis, values):
    """The positions on ``axis`` (index_axis, sorted) of ``values``, all present on it."""
    return np.searchsorted(axis, np.asarray(values, dtype=np.int64))


def head_grid(df, column, layers=None):
    """layers, heads, values [n_layers, n_heads] with NaN where there is no value.

    Rows are ``layers`` (default: index_axis of the layers in ``df``: every layer from the first
    to the last); columns index_axis of the query heads (every query head from the first to the
    last, or only those present when the span is far beyond them).
    """
    if layers is None:
        layers = index_axis(df["layer"])
    layers = np.asarray(sorted(layers))
    heads = index_axis(df["q_head"])
    values = np.full((layers.size, heads.size), np.nan)
    g = df.groupby(["layer", "q_head"])[column].mean()
    row = {int(layer): i for i, layer in enumerate(layers)}
    for (layer, q_head), v in g.items():
        if int(layer) in row:
            values[row[int(layer)], int(axis_positions(heads, [int(q_head)])[0])] = v
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

