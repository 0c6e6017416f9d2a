"""Attention plasticity over ordered result sets (checkpoints) and the per-head change between two
of them, from the tables of ap_compare / ``compare_runs`` (docs/method.md §8.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TRAJECTORY_TABLE = "compare_trajectory"
HEADS_TABLE = "compare_heads"
TRAJECTORY_COLUMNS = ("order", "n_heads", "mean", "se", "ci_low", "ci_high")
TRAJECTORY_INT_COLUMNS = ("order", "n_heads")
HEADS_COLUMNS = ("layer", "q_head", "difference", "se", "q_bh", "significant")
# Names, read as they are: the sets, the quantity, the layer (a number; NA or empty on the
# model-level rows, "all" in tables written before: T.layer_key).
TRAJECTORY_TEXT_COLUMNS = ("set", "quantity", "layer")
HEADS_TEXT_COLUMNS = ("set_a", "set_b", "quantity")
HEADS_INT_COLUMNS = ("layer", "q_head", "significant")
QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop")


def trajectory(data, *, layers=None, title=None, figsize=None, source=None) -> Figure:
    """AP_first20 and AP_last20 over the result sets in order (top), mean bias_strength (bottom).

    The top panel shows, per set, the mean over heads of ap_first20 and ap_last20 with their
    intervals (error bars) and the gap between them shaded (red where ap_last20 is below
    ap_first20: the heads lose plasticity late in the context); the bottom panel the mean
    bias_strength of the planar rotation model (§8.5) as bars.

    Parameters
    ----------
    data : DataFrame, mapping or result
        compare_trajectory (docs/method.md §8.6): the DataFrame, a ``CompareResult``
        (``ap.compare_runs(...)``, its ``trajectory``) or a mapping with ``compare_trajectory``.
    layers : int or iterable of int, optional
        Default: the means over all layers; with layers, one line per layer (the rows of those
        layers).
    title, figsize, source :
        The title, the size in inches, and how error messages name the input (default
        "trajectory: compare_trajectory").

    Returns
    -------
    matplotlib.figure.Figure
        Two axes (top: the plasticity means, bottom: bias_strength); x = the sets in order.

    A folder (str or os.PathLike) or a PlasticityMonitor is an ``ap.PlasticityMonitor``'s
    output_dir: drawn by ``monitor_trajectory`` (the means against the training step, error
    bands, the steps where heads changed marked; ``layers``: one layer or None).

    Raises PlotInputError (a ValueError) when the table lacks a column, a value is not a number, or
    a layer asked for has no rows.
    """
    import os
    if isinstance(data, (str, os.PathLike)) or hasattr(data, "output_dir"):
        from ._monitor import monitor_trajectory
        return monitor_trajectory(data, layer="all" if layers is None else layers, title=title, figsize=figsize)
    chosen = T.layer_set(layers, "trajectory")  # rows "all" or one layer's: chosen below
    df, _, source = T.checked_table(data, TRAJECTORY_TABLE, "trajectory", TRAJECTORY_COLUMNS,
                                    int_columns=TRAJECTORY_INT_COLUMNS, source=source,
                                    text_columns=TRAJECTORY_TEXT_COLUMNS, aliases=("trajectory",))
    layer_keys = ["all"] if chosen is None else [str(x) for x in sorted(chosen)]
    missing = [k for k in layer_keys if not (T.layer_key(df["layer"]) == k).any()]
    if missing:
        raise T.PlotInputError(f"{source}: no rows for layer {', '.join(missing)}")
    return _draw_trajectory(df, layer_keys,
                            title or "Attention plasticity over the result sets (mean over heads)",
                            figsize)


def changes(data, *, quantity="ap_overall", pair=None, title=None, figsize=None, source=None) -> Figure:
    """Layer x query head heatmap of the bias-corrected change of ``quantity`` from one set to the
    next; the heads whose change is significant (BH q <= alpha) outlined.

    Parameters
    ----------
    data : DataFrame, mapping or result
        compare_heads (docs/method.md §8.6): the DataFrame, a ``CompareResult`` (its ``heads``) or
        a mapping with ``compare_heads``.
    quantity : {"ap_overall", "ap_first20", "ap_last20", "ap_drop"}
    pair : (str, str), optional
        The two consecutive sets (set_a, set_b); default the table's first pair.
    title, figsize, source :
        The title (default: the quantity, the pair and how many heads changed), the size in inches,
        and how error messages name the input (default "changes: compare_heads").

    Returns
    -------
    matplotlib.figure.Figure
        One axes (and its colour bar) whose image holds the differences (second set minus first),
        row i = the i-th layer from the first, NaN where a head has no row.

    Raises PlotInputError (a ValueError) when the table lacks a column, a value is not a number, or
    there is no row of ``quantity`` for ``pair``.
    """
    import matplotlib.pyplot as plt

    T.check_choice("changes", "quantity", quantity, QUANTITIES)
    heads, _, source = T.checked_table(data, HEADS_TABLE, "changes", HEADS_COLUMNS,
                                       int_columns=HEADS_INT_COLUMNS, source=source,
                                       text_columns=HEADS_TEXT_COLUMNS, aliases=("heads",))
    if pair is None:
        pair = (str(heads["set_a"].iloc[0]), str(heads["set_b"].iloc[0]))
    elif isinstance(pair, str) or len(pair) != 2:
        raise T.PlotInputError(f"changes: pair: expected two set names (A, B), got {pair!r}")
    rows = heads[(heads["quantity"] == quantity) & (heads["set_a"] == pair[0]) & (heads["set_b"] == pair[1])]
    if rows.empty:
        raise T.PlotInputError(f"{source}: no rows of {quantity} for the pair {pair[0]} -> {pair[1]}")
    layers, heads_axis, values = S.head_grid(rows, "difference")
    significant = S.head_grid(rows, "significant")[2] == 1  # no row: NaN, not significant
    fig, ax = plt.subplots(figsize=figsize or (7.5, 6.0), layout="constrained")
    m = S.symmetric_limit(values)
    S.hatch_missing(ax)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=S.colourmap_with_missing("RdBu_r"), vmin=-m, vmax=m,
                   aspect="auto", interpolation="nearest")
    for i, j in zip(*np.nonzero(significant)):
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.4))
    S.head_ticks(ax, layers, heads_axis)
    ax.set_xlabel("query head")
    ax.set_ylabel("layer")
    ax.set_title(title or
                 f"change of {quantity}: {pair[0]} -> {pair[1]} (bias-corrected)\n"
                 f"{int(significant.sum())} of {int(np.isfinite(values).sum())} heads changed at BH q <= alpha "
                 "(outlined)", fontsize=10.5)
    cbar = fig.colorbar(im, ax=ax, pad=0.02, aspect=30)
    cbar.set_label(f"{quantity}, second set minus first", fontsize=9)
    return fig


def _series(df, quantity, layer):
    return df[(df["quantity"] == quantity) & (T.layer_key(df["layer"]) == layer)].sort_values("order")


def _draw_trajectory(df, layer_keys, title, figsize):
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=figsize or (8.0, 6.5), sharex=True, layout="constrained",
                                      gridspec_kw={"height_ratios": [2.2, 1.0]})
    names = df.sort_values("order").drop_duplicates("order")["set"].tolist()
    x = np.arange(len(names))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, layer in enumerate(layer_keys):
        first, last = _series(df, "ap_first20", layer), _series(df, "ap_last20", layer)
        label = "" if layer == "all" else f" (layer {layer})"
        if not first.empty and not last.empty and len(first) == len(last):
            f, la = first["mean"].to_numpy(), last["mean"].to_numpy()
            top.fill_between(x, f, la, where=f >= la, color="tab:red", alpha=0.15, interpolate=True,
                             label="gap: AP_last20 below AP_first20" if i == 0 else None)
            top.fill_between(x, f, la, where=f < la, color="tab:blue", alpha=0.12, interpolate=True,
                             label="gap: AP_last20 above AP_first20" if i == 0 else None)
        for rows, style, name in ((first, "-o", "AP_first20"), (last, "--s", "AP_last20")):
            if rows.empty:
                continue
            xi = rows["order"].to_numpy()
            err = np.vstack([rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]])
            top.errorbar(xi, rows["mean"], yerr=err, fmt=style, capsize=3, color=colours[i % len(colours)],
                         label=name + label)
        bias = _series(df, "bias_strength", layer)
        if not bias.empty:
            width = 0.8 / len(layer_keys)
            bottom.bar(bias["order"].to_numpy() - 0.4 + width * (i + 0.5), bias["mean"], width=width,
                       color=colours[i % len(colours)], label="bias_strength" + label)
    top.set_ylabel("mean attention plasticity over heads\n(bars: intervals of §8.3)")
    top.legend(fontsize=8, loc="best")
    top.grid(alpha=0.3)
    bottom.axhline(0.0, color="black", linewidth=0.6)
    bottom.set_ylabel("mean bias_strength\n(mu_Q^a alpha_K, §8.5)")
    bottom.set_xticks(x)
    bottom.set_xticklabels(names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    bottom.set_xlabel("result set (in order)")
    bottom.grid(alpha=0.3, axis="y")
    fig.suptitle(title)
    return fig
