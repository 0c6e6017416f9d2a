"""Attention plasticity against query position, one line per head, from head_profile
(docs/method.md §2.13-2.14, §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _style as S
from . import _tables as T

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TABLE = "head_profile"
COLUMNS = ("layer", "q_head", "k_head", "q_bucket", "tau", "n_queries", "plasticity", "n_pairs")
OPTIONAL_COLUMNS = ("small_bucket",)  # used when the table has it (small_buckets, mean_profile)
INT_COLUMNS = T.ID_COLUMNS + ("q_bucket",)
XSCALES = ("auto", "linear", "log")
PLASTICITY_LABEL = "attention plasticity (mean 4p(1-p) over key pairs)"
SMALL_STYLE = dict(marker="o", s=26, facecolors="none", edgecolors="#d62728", linewidths=1.1, zorder=6)


def _mean_line_style():
    from matplotlib import patheffects

    return dict(color="black", linewidth=2.6, marker="o", markersize=4.5, zorder=5,
                path_effects=[patheffects.withStroke(linewidth=4.2, foreground="white")])


def profile(data, *, layers=None, facet_by_layer=False, xscale="auto", ylim=None, title=None,
            figsize=None, source=None) -> Figure:
    """Attention plasticity against query position: a thin line per head coloured by its layer,
    the mean over heads per query bucket in bold.

    Parameters
    ----------
    data : DataFrame, mapping or result
        head_profile (docs/method.md §3): the DataFrame (``ap.tables(...)["head_profile"]``,
        ``pandas.read_csv("head_profile.csv")``), a mapping of table name to DataFrame, or a result
        that holds it (``DumpResult``, ``ModelProfile``). x is ``tau`` (the mean token position of
        the bucket's queries), y the bucket's ``plasticity``; rows with ``n_pairs`` 0 have none.
        Buckets flagged ``small_bucket`` (§2.14) are drawn as open red circles and left out of the
        mean.
    layers : int or iterable of int, optional
        Only these layers (default: all).
    facet_by_layer : bool
        One panel per layer (lines coloured by query head) instead of all heads in one panel.
    xscale : {"auto", "linear", "log"}
        auto: log when tau spans more than a factor 20.
    ylim : (float, float), optional
        The y range (default 0 to 1, the range of plasticity).
    title, figsize :
        The title (default says how many heads) and the size in inches.
    source : str, optional
        How error messages name the input (default "profile: head_profile").

    Returns
    -------
    matplotlib.figure.Figure
        One axes (and a colour bar) or, with ``facet_by_layer``, one per layer.

    Raises PlotInputError (a ValueError) when the table lacks a column or a value is not a number.
    """
    T.check_choice("profile", "xscale", xscale, XSCALES)
    df, chosen, source = T.checked_table(data, TABLE, "profile", COLUMNS, int_columns=INT_COLUMNS,
                                         layers=layers, source=source)
    df = T.no_pairs_is_nan(df)
    scale = choose_xscale(df, xscale)
    if facet_by_layer:
        return _plot_facets(df, scale, ylim, title, figsize)
    return _plot_all_heads(df, scale, ylim, title, figsize)


def note_no_values(ax, df, text, fontsize=12):
    """Say so on an empty panel, and keep the x range of the table's positions."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=fontsize, color="#555555")
    tau = df["tau"].to_numpy()
    tau = tau[np.isfinite(tau) & ((tau > 0) if ax.get_xscale() == "log" else True)]
    if tau.size and tau.max() > tau.min():
        ax.set_xlim(tau.min(), tau.max())


def mean_style(points, **overrides):
    """The bold mean line; with many buckets markers would turn it into a dotted line."""
    style = dict(_mean_line_style(), **overrides)
    if len(points) > 16:
        style["marker"] = None
    return style


def small_buckets(df):
    """The rows of buckets too small to model (small_bucket = 1, docs/method.md §2.14) with a
    plasticity; none for a table without that column."""
    if "small_bucket" not in df:
        return df.iloc[:0]
    return df[(df["small_bucket"] == 1) & np.isfinite(df["plasticity"].to_numpy())]


def mark_small_buckets(ax, df, handles=None):
    """Open red circles on the small buckets; a legend entry when there are some."""
    from matplotlib.lines import Line2D

    small = small_buckets(df)
    if len(small):
        ax.scatter(small["tau"], small["plasticity"], **SMALL_STYLE)
        if handles is not None:
            handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                                  markeredgecolor=SMALL_STYLE["edgecolors"],
                                  label=f"bucket with too few queries ({len(small)}; small_bucket, "
                                        "not in the aggregates or the mean)"))
    return len(small)


def mean_profile(df):
    """Mean over heads per query bucket: x = mean tau, y = mean of defined plasticities (small
    buckets left out, as in the aggregates)."""
    if "small_bucket" in df:
        df = df[df["small_bucket"] != 1]
    g = df.groupby("q_bucket", sort=True)
    out = g.agg(tau=("tau", "mean"), plasticity=("plasticity", "mean"),
                n_heads=("plasticity", "count")).reset_index()
    return out[np.isfinite(out["tau"]) & np.isfinite(out["plasticity"])]


def head_lines(df):
    """(layer, q_head, tau array, plasticity array) per head, NaN rows dropped."""
    for (layer, q_head), h in df.groupby(["layer", "q_head"], sort=True):
        h = h.sort_values("tau")
        ok = np.isfinite(h["tau"].to_numpy()) & np.isfinite(h["plasticity"].to_numpy())
        yield int(layer), int(q_head), h["tau"].to_numpy()[ok], h["plasticity"].to_numpy()[ok]


def tau_decades(df):
    tau = df["tau"].to_numpy()
    tau = tau[np.isfinite(tau) & (tau > 0)]
    return float(np.log10(tau.max() / tau.min())) if tau.size else 0.0


def choose_xscale(df, requested):
    if requested != "auto":
        return requested
    tau = df["tau"].to_numpy()
    tau = tau[np.isfinite(tau) & (tau > 0)]
    if tau.size and tau.max() / tau.min() > 20:
        return "log"
    return "linear"


def style_axis(ax, xscale, ylim, decades=1.0, numticks=12):
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if xscale == "log":
        ax.set_xscale("log")
        # 1-2-5 ticks over a few decades; over many, powers of ten only (matplotlib's
        # LogLocator gives no ticks at all for several subs over many decades).
        subs = (1.0, 2.0, 5.0) if decades <= 4 else (1.0,)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=numticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: S.format_tokens(x)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(*(ylim or (0.0, 1.0)))
    ax.grid(True, which="major", color="#e3e3e3", linewidth=0.8)
    ax.set_axisbelow(True)


def _plot_all_heads(df, xscale, ylim, title, figsize):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=figsize or (9.0, 5.5), layout="constrained")
    cmap, norm = S.discrete_layer_colours(df["layer"])
    n_heads = 0
    for layer, _q_head, x, y in head_lines(df):
        if x.size == 0:
            continue
        n_heads += 1
        ax.plot(x, y, color=cmap(norm(layer)), linewidth=0.8, alpha=0.6,
                marker="." if x.size == 1 else None, zorder=2)
    mean = mean_profile(df)
    ax.plot(mean["tau"], mean["plasticity"], **mean_style(mean))
    style_axis(ax, xscale, ylim, tau_decades(df))
    if n_heads == 0:
        note_no_values(ax, df, "no plasticity values in this file (all nan)")
    ax.set_xlabel("query position τ (mean token position of the query bucket)"
                  + (", log scale" if xscale == "log" else ""))
    ax.set_ylabel(PLASTICITY_LABEL)
    ax.set_title(title or f"Attention plasticity vs query position "
                 f"({T.head_count_text(df)})")
    handles = [Line2D([], [], color="grey", linewidth=0.8, alpha=0.8,
                      label=f"one head ({n_heads} with values), colour = layer"),
               Line2D([], [], **{k: v for k, v in _mean_line_style().items() if k != "zorder"},
                      label="mean over heads per query bucket")]
    mark_small_buckets(ax, df, handles)
    ax.legend(handles=handles, loc="best", framealpha=0.9)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    cbar = fig.colorbar(sm, ax=ax, pad=0.01, aspect=30)
    cbar.set_label("layer")
    layers = sorted(df["layer"].unique())
    step = S.tick_step(len(range(layers[0], layers[-1] + 1)), 16)
    cbar.set_ticks(list(range(layers[0], layers[-1] + 1, step)))
    cbar.ax.minorticks_off()
    return fig


def _plot_facets(df, xscale, ylim, title, figsize):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    layers = sorted(df["layer"].unique())
    n = len(layers)
    ncols = int(np.ceil(np.sqrt(n * 1.5)))
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    figsize = figsize or (2.9 * ncols + 1.4, max(4.2, 2.3 * nrows + 1.3))
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, sharex=True, sharey=True,
                             squeeze=False, layout="constrained")
    heads = sorted(df["q_head"].unique())
    cmap, norm = S.discrete_layer_colours(heads, cmap_name="plasma")
    overall = mean_profile(df)
    small = 0
    for i, layer in enumerate(layers):
        ax = axes[i // ncols][i % ncols]
        sub = df[df["layer"] == layer]
        drawn = 0
        for _layer, q_head, x, y in head_lines(sub):
            drawn += x.size
            if x.size:
                ax.plot(x, y, color=cmap(norm(q_head)), linewidth=0.9, alpha=0.75,
                        marker="." if x.size == 1 else None)
        ax.plot(overall["tau"], overall["plasticity"], color="#777777", linewidth=1.2,
                linestyle="--", zorder=4)
        m = mean_profile(sub)
        ax.plot(m["tau"], m["plasticity"], **mean_style(m, linewidth=2.0, markersize=3))
        small += mark_small_buckets(ax, sub)
        style_axis(ax, xscale, ylim, tau_decades(df), numticks=6)
        if drawn == 0:
            note_no_values(ax, df, "no values (all nan)", fontsize=9)
        ax.set_title(f"layer {layer}", fontsize=10, pad=3)
    spare = [axes[j // ncols][j % ncols] for j in range(n, nrows * ncols)]
    for ax in spare:
        ax.set_visible(False)
    for j in range(max(0, n - ncols), n):  # panels with an empty cell below them
        if j + ncols >= n:
            axes[j // ncols][j % ncols].xaxis.set_tick_params(labelbottom=True)
    fig.supxlabel("query position τ (mean token position of the query bucket)"
                  + (", log scale" if xscale == "log" else ""))
    fig.supylabel("attention plasticity (mean 4p(1-p))")
    fig.suptitle(title or f"Attention plasticity vs query position, per layer "
                 f"({T.head_count_text(df)})")
    handles = [Line2D([], [], color="grey", linewidth=0.9, label="one head, colour = query head"),
               Line2D([], [], color="black", linewidth=2.0, marker="o", markersize=3,
                      label="mean over the layer's heads"),
               Line2D([], [], color="#777777", linewidth=1.2, linestyle="--",
                      label="mean over all heads")]
    if small:
        handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                              markeredgecolor=SMALL_STYLE["edgecolors"],
                              label=f"bucket with too few queries ({small}; small_bucket)"))
    if spare:  # an empty grid cell holds the legend
        spare[-1].set_visible(True)
        spare[-1].axis("off")
        spare[-1].legend(handles=handles, loc="center", frameon=False, fontsize=9)
    else:
        axes[0][0].legend(handles=handles, loc="best", fontsize=7, framealpha=0.9)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    cbar = fig.colorbar(sm, ax=axes, pad=0.01, aspect=40, shrink=0.9)
    cbar.set_label("query head")
    step = S.tick_step(heads[-1] - heads[0] + 1, 16)
    cbar.set_ticks(list(range(heads[0], heads[-1] + 1, step)))
    cbar.ax.minorticks_off()
    return fig
