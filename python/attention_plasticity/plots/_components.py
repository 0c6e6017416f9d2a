"""The share of positional information carried by each query component, from
head_component_weights (docs/method.md §2.6, §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TABLE = "head_component_weights"
COLUMNS = ("layer", "q_head", "k_head", "component", "component_r2", "weight")
INT_COLUMNS = T.ID_COLUMNS + ("component",)


def component_weights(data, *, layers=None, errorbars=True, logy=False, title=None, figsize=None,
                      source=None) -> Figure:
    """Bar chart of each query component's mean weight over heads.

    A head's component d has weight max(R2_d, 0) / sum over d of max(R2_d, 0), R2_d being how well
    token position linearly predicts query dimension d; a head's weights sum to 1. Each bar is the
    mean over heads (NaN weights left out), the whiskers one standard deviation over heads, the
    dashed line the uniform share 1/d.

    Parameters
    ----------
    data : DataFrame, mapping or result
        head_component_weights (docs/method.md §3): the DataFrame, a mapping of table name to
        DataFrame (``ap.tables(...)``), or a result that holds it (``DumpResult``, ``ModelProfile``).
    layers : int or iterable of int, optional
        Only these layers (default: all).
    errorbars : bool
        Draw the standard deviation whiskers (default True).
    logy : bool
        Log scale for the weights (small shares become visible).
    title, figsize, source :
        The title, the size in inches, and how error messages name the input (default
        "component_weights: head_component_weights").

    Returns
    -------
    matplotlib.figure.Figure
        One axes; its bars are the components with a value, in order.

    Raises PlotInputError (a ValueError) when the table lacks a column or a value is not a number.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    df, chosen, source = T.checked_table(data, TABLE, "component_weights", COLUMNS, int_columns=INT_COLUMNS,
                                         layers=layers, source=source)

    stats = df.groupby("component")["weight"].agg(["mean", "std", "count"])
    components = S.index_axis(df["component"])
    stats = stats.reindex(components)
    mean = stats["mean"].to_numpy()
    std = np.nan_to_num(stats["std"].to_numpy(), nan=0.0)
    n_dims = components.size

    fig, ax = plt.subplots(figsize=figsize or (10.0, 5.0), layout="constrained")
    has_value = np.isfinite(mean)
    width = 0.8 if n_dims <= 64 else 1.0
    ax.bar(components[has_value], mean[has_value], width=width, color="#3b75af",
           edgecolor="none", label="mean weight over heads", zorder=2)
    if errorbars:
        lo = np.minimum(std, mean)  # whiskers stop at 0: weights are never negative
        ax.errorbar(components[has_value], mean[has_value],
                    yerr=[lo[has_value], std[has_value]], fmt="none", ecolor="#333333",
                    elinewidth=0.7, capsize=1.5 if n_dims <= 64 else 0, zorder=3,
                    label="± 1 standard deviation over heads")
    if n_dims > 0:
        ax.axhline(1.0 / n_dims, color="#d62728", linestyle="--", linewidth=1.2, zorder=4,
                   label=f"uniform share 1/d = 1/{n_dims}")
    missing = components[~has_value]
    if missing.size:
        ax.plot(missing, np.zeros(missing.size), "x", color="grey", zorder=4,
                label="no value (nan in every head)")
    if logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0.0)
    ax.set_xlim(components[0] - 0.7, components[-1] + 0.7)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=min(n_dims, 32), integer=True))
    ax.set_xlabel("component: query dimension d (oriented, before the rotation)")
    ax.set_ylabel("share of positional information\nweight = max(R²_d, 0) / Σ max(R², 0)")
    ax.grid(True, axis="y", color="#e3e3e3")
    ax.set_axisbelow(True)
    ax.legend(loc="upper right", framealpha=0.9)
    ax.set_title(title or
                 f"Share of positional information per query component, mean over "
                 f"{T.head_count_text(df)}")
    return fig
