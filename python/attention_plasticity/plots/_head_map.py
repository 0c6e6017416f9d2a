"""Layer x query head heatmaps of the head-level plasticity (ap_overall) and its drop from early
to late queries (ap_drop) of head_metrics (docs/method.md §2.14, §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TABLE = "head_metrics"
COLUMNS = ("layer", "q_head", "k_head", "ap_overall", "ap_first20", "ap_last20", "ap_drop")

PANELS = {
    "ap_overall": dict(
        title="ap_overall: head-level attention plasticity",
        cbar="ap_overall (mean 4p(1-p) over key pairs; 1 = fully query-dependent)",
        cmap="viridis", diverging=False),
    "ap_drop": dict(
        title="ap_drop = ap_first20 − ap_last20",
        cbar="ap_drop (> 0: less plastic for the last 20% of positions\n"
             "than for the first 20%)",
        cmap="RdBu_r", diverging=True),
    "ap_first20": dict(
        title="ap_first20: plasticity of the queries in the first 20% of the context",
        cbar="ap_first20 (mean 4p(1-p) over key pairs)", cmap="viridis", diverging=False),
    "ap_last20": dict(
        title="ap_last20: plasticity of the queries in the last 20% of the context",
        cbar="ap_last20 (mean 4p(1-p) over key pairs)", cmap="viridis", diverging=False),
}


def head_map(data, quantities=("ap_overall", "ap_drop"), *, layers=None, annotate="auto",
             title=None, figsize=None, source=None) -> Figure:
    """Layer x query head heatmaps of head_metrics, one panel per quantity.

    Parameters
    ----------
    data : DataFrame, mapping or result
        head_metrics (docs/method.md §3): the DataFrame itself (``ap.tables(...)["head_metrics"]``,
        ``pandas.read_csv("head_metrics.csv")``), a mapping of table name to DataFrame, or a result
        that holds it (``DumpResult``, ``ModelProfile``).
    quantities : sequence of str
        The panels, from ``ap_overall`` (viridis), ``ap_drop`` (diverging, centred on 0),
        ``ap_first20``, ``ap_last20``. Default: ap_overall and ap_drop, as plot_head_map.py draws.
    layers : int or iterable of int, optional
        Only these layers (rows: the chosen layers present); default every layer from the first
        to the last.
    annotate : {"auto", "yes", "no"}
        Print the values in the cells (auto: when a map has at most 12 layers and 16 heads).
    title, figsize :
        The figure title (default says how many heads) and size in inches (default 7.5 x 6 for
        one panel, 6.5 more per further panel).
    source : str, optional
        How error messages name the input (default "head_map: head_metrics").

    Returns
    -------
    matplotlib.figure.Figure
        One axes per panel (plus one colour bar each); each panel's image holds the values, NaN
        (grey, hatched) where a head has no value. Grey cells: no value (NaN, or no row).

    Raises PlotInputError (a ValueError) when the table lacks a column or a value is not a number.
    """
    import matplotlib.pyplot as plt

    quantities = [quantities] if isinstance(quantities, str) else list(quantities)
    if not quantities:
        raise T.PlotInputError("head_map: quantities: expected at least one of "
                               + ", ".join(PANELS))
    for q in quantities:
        T.check_choice("head_map", "quantities", q, tuple(PANELS))
    T.check_choice("head_map", "annotate", annotate, S.ANNOTATE)
    df, chosen, source = T.checked_table(data, TABLE, "head_map", COLUMNS, layers=layers,
                                         source=source)
    # With layers, rows for just the chosen layers present; else every layer in range.
    rows = sorted(set(df["layer"])) if chosen is not None else None
    n = len(quantities)
    fig, axes = plt.subplots(1, n, figsize=figsize or (7.5 + 6.5 * (n - 1), 6.0),
                             layout="constrained", squeeze=False)
    for ax, quantity in zip(axes[0], quantities):
        _draw_panel(fig, ax, df, quantity, annotate, rows)
    fig.suptitle(title or f"Attention plasticity per head ({T.head_count_text(df)})")
    return fig


def _draw_panel(fig, ax, df, column, annotate_mode, layers=None):
    spec = PANELS[column]
    layers, heads, values = S.head_grid(df, column, layers)
    finite = values[np.isfinite(values)]
    if spec["diverging"]:
        m = S.symmetric_limit(values)
        vmin, vmax = -m, m
    else:
        vmin = float(finite.min()) if finite.size else 0.0
        vmax = float(finite.max()) if finite.size else 1.0
        if vmax <= vmin:
            vmin, vmax = vmin - 0.05, vmax + 0.05
    S.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=S.colourmap_with_missing(spec["cmap"]),
                   vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    nl, nh = values.shape
    S.head_ticks(ax, layers, heads)
    ax.set_xticks(np.arange(nh + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(nl + 1) - 0.5, minor=True)
    if nh <= 48 and nl <= 48:
        ax.grid(which="minor", color="white", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("query head")
    ax.set_ylabel("layer")
    n_missing = int(np.count_nonzero(~np.isfinite(values)))
    ax.set_title(spec["title"] + (f"\n({n_missing} of {values.size} heads without a value: grey, hatched)"
                                  if n_missing else f"\n(all {values.size} heads)"),
                 fontsize=10.5)
    annotate = annotate_mode == "yes" or (annotate_mode == "auto" and nl <= 12 and nh <= 16)
    if annotate:
        fontsize = max(5.5, min(9.0, 110.0 / max(nl, nh)))
        norm = im.norm
        for i in range(nl):
            for j in range(nh):
                v = values[i, j]
                if np.isfinite(v):
                    shade = norm(v)
                    dark = shade < 0.5 if not spec["diverging"] else abs(shade - 0.5) > 0.3
                    ax.text(j, i, S.format_cell(v), ha="center", va="center", fontsize=fontsize,
                            color="white" if dark else "black")
    cbar = fig.colorbar(im, ax=ax, pad=0.02, aspect=30)
    cbar.set_label(spec["cbar"], fontsize=9)
    return n_missing
