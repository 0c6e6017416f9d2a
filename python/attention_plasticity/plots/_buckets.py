"""Attention plasticity per query bucket x key bucket over all heads, from
head_bucket_plasticity (docs/method.md §2.12-2.13, §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TABLE = "head_bucket_plasticity"
COLUMNS = ("layer", "q_head", "k_head", "q_bucket", "k_bucket", "plasticity", "n_pairs")
INT_COLUMNS = T.ID_COLUMNS + ("q_bucket", "k_bucket")
PROFILE_TABLE = "head_profile"
PROFILE_COLUMNS = ("layer", "q_bucket", "tau")  # the buckets' positions
PROFILE_INT_COLUMNS = ("layer", "q_bucket")
STATS = ("mean", "median")


def bucket_heatmap(data, *, profile=None, layers=None, stat="mean", vmin=None, vmax=None,
                   annotate="auto", title=None, figsize=None, source=None, profile_source=None) -> Figure:
    """Heatmap of plasticity per query bucket (rows) x key bucket (columns), combined over heads.

    A cell is the mean (``stat="median"``: the median) over the heads that have a value there of
    the cell's plasticity, the mean of 4p(1-p) over its key pairs. Only key buckets before the
    query bucket are eligible, so the filled cells lie below the diagonal; grey hatched cells have
    no value (no pairs, NaN, or not eligible).

    Parameters
    ----------
    data : DataFrame, mapping or result
        head_bucket_plasticity (docs/method.md §3): the DataFrame, a mapping of table name to
        DataFrame (``ap.tables(...)``), or a result that holds it (``DumpResult``, ``ModelProfile``).
    profile : DataFrame, mapping, result, False or None
        head_profile, to label both axes in tokens with each bucket's mean query position tau (mean
        over heads). None (default): ``data``'s own head_profile when ``data`` is a mapping or a
        result that has one, else bucket ids; False: bucket ids.
    layers : int or iterable of int, optional
        Only these layers (default: all).
    stat : {"mean", "median"}
        How to combine the heads in a cell.
    vmin, vmax : float, optional
        The colour range (default: the smallest and largest cell values).
    annotate : {"auto", "yes", "no"}
        Print the values in the cells (auto: when the grid is at most 16 x 16).
    title, figsize, source, profile_source :
        The title, the size in inches, and how error messages name the two tables (default
        "bucket_heatmap: head_bucket_plasticity", "bucket_heatmap: head_profile").

    Returns
    -------
    matplotlib.figure.Figure
        One axes (and its colour bar) whose image holds the cell values, row i = the i-th query
        bucket from the first, column j = the j-th key bucket.

    Raises PlotInputError (a ValueError) when a table lacks a column or a value is not a number.
    """
    import matplotlib.pyplot as plt

    T.check_choice("bucket_heatmap", "stat", stat, STATS)
    T.check_choice("bucket_heatmap", "annotate", annotate, S.ANNOTATE)
    df, chosen, source = T.checked_table(data, TABLE, "bucket_heatmap", COLUMNS, int_columns=INT_COLUMNS,
                                         layers=layers, source=source)
    df = T.no_pairs_is_nan(df)
    if profile is None and not isinstance(data, pd.DataFrame):
        try:
            T.table_of(data, PROFILE_TABLE, "bucket_heatmap")
            profile = data
        except T.PlotInputError:
            profile = None
    positions = None
    if profile is not None and profile is not False:
        prof, prof_name = T.table_of(profile, PROFILE_TABLE, "bucket_heatmap")
        positions = bucket_positions(prof, chosen, profile_source or prof_name)

    q_buckets, k_buckets, values, counts = cell_matrix(df, stat)
    finite, lo, hi = S.colour_range(values, vmin, vmax)

    fig, ax = plt.subplots(figsize=figsize or (8.5, 7.0), layout="constrained")
    cmap = S.colourmap_with_missing("viridis")
    S.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=lo, vmax=hi,
                   aspect="auto", interpolation="nearest", origin="upper")
    nq, nk = values.shape
    ax.set_xticks(np.arange(nk))
    ax.set_yticks(np.arange(nq))
    xl = tick_labels(k_buckets, positions)
    yl = tick_labels(q_buckets, positions)
    sx, sy = S.tick_step(nk, 20), S.tick_step(nq, 24)
    ax.set_xticklabels([lab if i % sx == 0 else "" for i, lab in enumerate(xl)],
                       rotation=45 if positions else 0, ha="right" if positions else "center")
    ax.set_yticklabels([lab if i % sy == 0 else "" for i, lab in enumerate(yl)])
    ax.tick_params(length=2)
    S.cell_grid(ax, nq, nk)

    if positions is not None:
        ax.set_ylabel("query bucket, labelled by its mean query position τ (tokens)")
        ax.set_xlabel("key bucket, labelled by the mean query position τ of the same "
                      "bucket id (tokens; #id where none)")
    else:
        ax.set_ylabel("query bucket id (no head_profile: ids, not tokens)")
        ax.set_xlabel("key bucket id (no head_profile: ids, not tokens)")

    S.annotate_cells(ax, values, lo, hi, annotate)

    if finite.size == 0:
        ax.text(0.5, 0.5, "no plasticity values in this file (all nan)",
                transform=ax.transAxes, ha="center", va="center", fontsize=12,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    stat_word = "median" if stat == "median" else "mean"
    cbar = fig.colorbar(im, ax=ax, pad=0.01, aspect=30)
    cbar.set_label(f"{stat_word} over heads of cell plasticity (mean 4p(1-p) over key pairs)")
    ax.legend(handles=[S.missing_patch("no value (no pairs / not eligible)")],
              loc="upper right", fontsize=8, framealpha=0.9)
    n_heads_max = int(counts.max()) if counts.size else 0
    ax.set_title(title or
                 f"Plasticity by query bucket × key bucket: {stat_word} over heads\n"
                 f"({T.head_count_text(df)}; up to {n_heads_max} heads with a value per cell)",
                 fontsize=11)
    return fig


def cell_matrix(df, stat):
    """(q_buckets, k_buckets, values [nq, nk], head counts [nq, nk])."""
    q_buckets = S.index_axis(df["q_bucket"])
    k_buckets = S.index_axis(df["k_bucket"])
    g = df.groupby(["q_bucket", "k_bucket"])["plasticity"]
    agg = g.median() if stat == "median" else g.mean()
    count = g.count()
    values = np.full((q_buckets.size, k_buckets.size), np.nan)
    counts = np.zeros_like(values, dtype=int)
    qi = S.axis_positions(q_buckets, agg.index.get_level_values(0).to_numpy())
    ki = S.axis_positions(k_buckets, agg.index.get_level_values(1).to_numpy())
    values[qi, ki] = agg.to_numpy()
    counts[qi, ki] = count.to_numpy()
    return q_buckets, k_buckets, values, counts


def bucket_positions(prof, layers, source):
    """q_bucket -> mean tau over heads, from head_profile (checked: ``source`` names it)."""
    prof = T.check_columns(prof, PROFILE_COLUMNS, source, int_columns=PROFILE_INT_COLUMNS)
    prof = T.select_layers(prof, layers, source)
    tau = prof.groupby("q_bucket")["tau"].mean()
    return {int(b): float(t) for b, t in tau.items() if np.isfinite(t)}


def tick_labels(buckets, positions):
    if positions is None:
        return [str(b) for b in buckets]
    return [S.format_tokens(positions[b]) if b in positions else f"#{b}" for b in buckets]
