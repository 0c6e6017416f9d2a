"""Attention plasticity over the steps of a training run watched by ``ap.PlasticityMonitor``
(issue 35): the model-level means with their intervals (compare_trajectory's rows, docs/method.md
§8.6) against the step, and the steps where heads changed against the previous observation."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from . import _tables as T

TRAJECTORY_FILE = "trajectory.csv"
CHANGES_FILE = "changes.csv"
COLUMNS = ("step", "quantity", "layer", "mean", "ci_low", "ci_high")
LINES = (("ap_overall", "-", "tab:blue"), ("ap_first20", "--", "tab:green"), ("ap_last20", ":", "tab:purple"))


def _inputs(data):
    """(trajectory DataFrame, changes DataFrame or None, source name) of a monitor's folder, a
    PlasticityMonitor, or a trajectory DataFrame."""
    if isinstance(data, pd.DataFrame):
        return data, None, "monitor_trajectory: trajectory"
    folder = getattr(data, "output_dir", data)
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"monitor_trajectory: expected a PlasticityMonitor's folder, the monitor or its "
                        f"trajectory DataFrame, got {type(data).__name__}")
    folder = os.fspath(folder)
    path = os.path.join(folder, TRAJECTORY_FILE)
    if not os.path.isfile(path):
        raise T.PlotInputError(f"monitor_trajectory: {folder}: no {TRAJECTORY_FILE} (not a PlasticityMonitor "
                               f"folder, or no observation finished yet)")
    trajectory = pd.read_csv(path, dtype={"layer": str})
    changes_path = os.path.join(folder, CHANGES_FILE)
    changes = pd.read_csv(changes_path) if os.path.isfile(changes_path) else None
    return trajectory, changes, f"monitor_trajectory: {path}"


def monitor_trajectory(data, *, layer="all", title=None, figsize=None):
    """The plasticity of a training run against the step (``ap.PlasticityMonitor``'s folder).

    Top: the mean over heads of ap_overall, ap_first20 and ap_last20 at each observation, with
    their intervals as bands (the model-level intervals of compare_trajectory, docs/method.md
    §8.6; they account for the heads sharing sequences). Bottom: the mean ap_drop with its band,
    and bars of the number of heads that changed since the previous observation (paired, BH q <=
    alpha), whose steps are also marked by dotted lines in the top panel.

    Parameters
    ----------
    data : str, os.PathLike, PlasticityMonitor or DataFrame
        The monitor's ``output_dir`` (its trajectory.csv and changes.csv), the monitor, or the
        trajectory table (then no changes are drawn).
    layer : "all" or int
        The means over all layers (default) or over one layer's heads.
    title, figsize :
        The title and the size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Made without pyplot (it is drawn in the monitor's worker thread); save it with
        ``fig.savefig(path)``; in a notebook, display it with ``IPython.display.display(fig)``.

    Raises PlotInputError (a ValueError) when the folder holds no trajectory, the table lacks a
    column, or the layer has no rows.
    """
    from matplotlib.figure import Figure

    df, changes, source = _inputs(data)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise T.PlotInputError(f"{source}: no column {', '.join(missing)}")
    key = str(layer)
    df = df[T.layer_key(df["layer"]) == key]
    if df.empty:
        raise T.PlotInputError(f"{source}: no rows for layer {key}")
    fig = Figure(figsize=figsize or (8.0, 6.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.0, 1.2]})
    for quantity, style, colour in LINES:
        rows = df[df["quantity"] == quantity].sort_values("step")
        if rows.empty:
            continue
        x = rows["step"].to_numpy(float)
        top.fill_between(x, rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float), color=colour,
                         alpha=0.18, linewidth=0)
        top.plot(x, rows["mean"].to_numpy(float), style, marker="o", markersize=3.5, color=colour,
                 label=f"{quantity} (mean over heads; band: interval)")
    drop = df[df["quantity"] == "ap_drop"].sort_values("step")
    if not drop.empty:
        x = drop["step"].to_numpy(float)
        bottom.fill_between(x, drop["ci_low"].to_numpy(float), drop["ci_high"].to_numpy(float), color="tab:red",
                            alpha=0.18, linewidth=0)
        bottom.plot(x, drop["mean"].to_numpy(float), "-o", markersize=3.5, color="tab:red", label="ap_drop")
    bottom.axhline(0.0, color="black", linewidth=0.6)
    bottom.set_ylabel("mean ap_drop")
    if changes is not None and not changes.empty:
        prev = changes[changes["against"] == "previous"].sort_values("step")
        steps = prev["step"].to_numpy(float)
        counts = prev["heads_changed"].to_numpy(float)
        twin = bottom.twinx()
        width = 0.6 * (np.min(np.diff(np.unique(df["step"]))) if df["step"].nunique() > 1 else 1.0)
        twin.bar(steps, counts, width=width, color="grey", alpha=0.35, label="heads changed vs previous")
        twin.set_ylabel("heads changed\n(vs previous, BH q <= alpha)", fontsize=8)
        twin.set_ylim(0, max(1.0, float(counts.max()) * 1.15) if len(counts) else 1.0)
        from matplotlib.ticker import MaxNLocator
        twin.yaxis.set_major_locator(MaxNLocator(integer=True))
        for s in steps[counts > 0]:
            top.axvline(s, color="grey", linestyle=":", linewidth=0.9)
        twin.legend(fontsize=8, loc="upper right")
    top.set_ylabel("attention plasticity\n(model-level mean, §8.6)")
    top.legend(fontsize=8, loc="best")
    top.grid(alpha=0.3)
    bottom.legend(fontsize=8, loc="upper left")
    bottom.grid(alpha=0.3)
    bottom.set_xlabel("training step (dotted: heads changed since the previous observation)")
    where = "all layers" if key == "all" else f"layer {key}"
    fig.suptitle(title or f"Attention plasticity during training ({where}, paired observations)")
    return fig
