"""Attention plasticity by inter-key distance x key-to-query distance, from
head_distance_plasticity (docs/method.md §8.1, §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TABLE = "head_distance_plasticity"
COLUMNS = ("layer", "q_head", "k_head", "key_distance_low", "key_distance_high", "query_distance_low",
           "query_distance_high", "plasticity", "n_pairs")
INT_COLUMNS = T.ID_COLUMNS + ("n_pairs",)
STATS = ("mean", "median", "pooled")
WORDS = {"mean": "mean over heads", "median": "median over heads", "pooled": "pair-weighted mean"}


def distance_map(data, *, layers=None, stat="mean", min_pairs=10, vmin=None, vmax=None,
                 annotate="auto", title=None, figsize=None, source=None) -> Figure:
    """Heatmap of plasticity by inter-key distance (rows, from the bottom) x key-to-query distance
    (columns), combined over heads.

    Each row of the table is one log-spaced bin of one head: the mean pair plasticity 4p(1-p) of
    the head's sampled key pairs whose keys are |pos(k1) - pos(k2)| apart and whose mean position
    lies tau_j - (pos(k1) + pos(k2))/2 before the queries' mean position ("<0": after it).

    Parameters
    ----------
    data : DataFrame, mapping or result
        head_distance_plasticity (docs/method.md §8.1): the DataFrame, a mapping of table name to
        DataFrame (``ap.tables(...)``), or a result that holds it (``DumpResult``, ``ModelProfile``).
    layers : int or iterable of int, optional
        Only these layers (default: all).
    stat : {"mean", "median", "pooled"}
        A cell is the mean or median over the heads with at least ``min_pairs`` pairs there of
        their bin values, or (pooled) the pair-weighted mean over them.
    min_pairs : int
        A head's bin with fewer pairs is left out (at least 1; default 10).
    vmin, vmax, annotate, title, figsize :
        The colour range (default: the cells' range), the cell values printed ("auto": up to
        16 x 16 cells, "yes", "no"), the title and the size in inches.
    source : str, optional
        How error messages name the input (default "distance_map: head_distance_plasticity").

    Returns
    -------
    matplotlib.figure.Figure
        One axes (and its colour bar) whose image holds the cell values, row i = the i-th key
        distance bin from the smallest, column j = the j-th key-to-query bin.

    Raises PlotInputError (a ValueError) when the table lacks a column, a value is not a number,
    or a row has no plasticity or an infinite upper bin edge.
    """
    import matplotlib.pyplot as plt

    T.check_choice("distance_map", "stat", stat, STATS)
    T.check_choice("distance_map", "annotate", annotate, S.ANNOTATE)
    if isinstance(min_pairs, bool) or not isinstance(min_pairs, (int, np.integer)) or min_pairs < 1:
        raise T.PlotInputError(f"distance_map: min_pairs: must be an integer >= 1, got {min_pairs!r}")
    df, chosen, source = T.checked_table(data, TABLE, "distance_map", COLUMNS, int_columns=INT_COLUMNS,
                                         layers=layers, source=source)
    check_bins(df, source)
    key_bins, query_bins, values, counts = cell_matrix(df, stat, min_pairs)
    finite, lo, hi = S.colour_range(values, vmin, vmax)

    fig, ax = plt.subplots(figsize=figsize or (9.0, 6.5), layout="constrained")
    S.hatch_missing(ax)
    nk, nq = values.shape
    if nk and nq:
        im = ax.imshow(np.ma.masked_invalid(values), cmap=S.colourmap_with_missing("viridis"),
                       vmin=lo, vmax=hi, aspect="auto", interpolation="nearest", origin="lower")
    else:
        im = ax.imshow(np.full((1, 1), np.nan), cmap=S.colourmap_with_missing("viridis"), vmin=lo,
                       vmax=hi, aspect="auto")
    xl = [edge_label(a, b) for a, b in query_bins]
    yl = [edge_label(a, b) for a, b in key_bins]
    sx, sy = S.tick_step(nq, 20), S.tick_step(nk, 24)
    ax.set_xticks(np.arange(nq))
    ax.set_yticks(np.arange(nk))
    ax.set_xticklabels([lab if i % sx == 0 else "" for i, lab in enumerate(xl)], rotation=45, ha="right")
    ax.set_yticklabels([lab if i % sy == 0 else "" for i, lab in enumerate(yl)])
    S.cell_grid(ax, nk, nq)
    ax.tick_params(length=2)
    ax.set_xlabel("key-to-query distance τ_j − (pos(k1) + pos(k2))/2 (tokens, log bins)")
    ax.set_ylabel("inter-key distance |pos(k1) − pos(k2)| (tokens, log bins)")
    S.annotate_cells(ax, values, lo, hi, annotate)
    if finite.size == 0:
        ax.text(0.5, 0.5, f"no bin with at least {min_pairs} pairs in this file",
                transform=ax.transAxes, ha="center", va="center", fontsize=12,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    cbar = fig.colorbar(im, ax=ax, pad=0.01, aspect=30)
    cbar.set_label(f"{WORDS[stat]} of the bin's plasticity (mean 4p(1-p) of its pairs)")
    ax.legend(handles=[S.missing_patch(f"no value (no head with ≥ {min_pairs} pairs)")],
              loc="upper right", fontsize=8, framealpha=0.9)
    heads_max = int(counts.max()) if counts.size else 0
    ax.set_title(title or
                 f"Plasticity by key distance × distance to the query: {WORDS[stat]}\n"
                 f"({T.head_count_text(df)}; up to {heads_max} heads per cell)", fontsize=11)
    return fig


def check_bins(df, source, csv=False):
    """PlotInputError when a row has no plasticity or an infinite upper bin edge (the writer never
    writes one: such a row is not a bin of §8.1). ``csv``: ``df`` is the file ``source`` as read
    (row i is line i + 2)."""
    bad = df["plasticity"].isna() | ~np.isfinite(df["key_distance_high"]) | ~np.isfinite(
        df["query_distance_high"])
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        row = f"line {pos + 2}" if csv else f"row {pos}"
        raise T.PlotInputError(f"{source}: {row} has no plasticity or an infinite upper bin edge")


def edge_label(low, high):
    """'<0', '0-1', '2-4', '1.4-2' (tokens)."""
    if not np.isfinite(low):
        return "<0"

    def fmt(x):
        if x >= 1000 or float(x).is_integer():
            return S.format_tokens(x)
        return f"{x:.3g}"

    return f"{fmt(low)}-{fmt(high)}"


def cell_matrix(df, stat, min_pairs):
    """(key bins [(low, high)], query bins, values [nk, nq], head counts [nk, nq])."""
    df = df[df["n_pairs"] >= max(1, min_pairs)]
    key_bins = sorted(set(zip(df["key_distance_low"], df["key_distance_high"])))
    query_bins = sorted(set(zip(df["query_distance_low"], df["query_distance_high"])))
    values = np.full((len(key_bins), len(query_bins)), np.nan)
    counts = np.zeros(values.shape, dtype=int)
    ki = {b: i for i, b in enumerate(key_bins)}
    qi = {b: i for i, b in enumerate(query_bins)}
    groups = df.groupby(["key_distance_low", "key_distance_high", "query_distance_low",
                         "query_distance_high"])
    for (klo, khi, qlo, qhi), g in groups:
        i, j = ki[(klo, khi)], qi[(qlo, qhi)]
        if stat == "pooled":
            values[i, j] = float((g["plasticity"] * g["n_pairs"]).sum() / g["n_pairs"].sum())
        elif stat == "median":
            values[i, j] = float(g["plasticity"].median())
        else:
            values[i, j] = float(g["plasticity"].mean())
        counts[i, j] = len(g)
    return key_bins, query_bins, values, counts
