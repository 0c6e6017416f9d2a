"""The plots' inputs: finding a table in what the caller gave, checking its columns, choosing
layers. Pure pandas/NumPy (no matplotlib, nothing of the compiled module), so that
examples/plots/_common.py loads the CSVs with the same checks on a Python without the package.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

ID_COLUMNS = ("layer", "q_head", "k_head")


class PlotInputError(ValueError):
    """A table a plot cannot use; the message names the function (or file), the table and the
    column, and says what is wrong."""


def check_choice(function, argument, value, choices):
    """``value`` if it is one of ``choices``, else PlotInputError naming the argument."""
    if value not in choices:
        raise PlotInputError(f"{function}: {argument}: {value!r} is not one of "
                             f"{', '.join(str(c) for c in choices)}")
    return value


def table_of(data, table, function, aliases=()):
    """The DataFrame ``table`` of ``data`` and the name errors give it ("FUNCTION: TABLE").

    ``data``: the DataFrame itself; a mapping of table name -> DataFrame (``ap.tables(...)``);
    or an object with the table as an attribute, or with a ``tables`` mapping (a DumpResult, a
    ModelProfile; a CompareResult by the ``aliases``, e.g. ``trajectory``)."""
    source = f"{function}: {table}"
    if isinstance(data, pd.DataFrame):
        return data, source
    keys = (table,) + tuple(aliases)
    where = data.get("tables") if isinstance(data, Mapping) else getattr(data, "tables", None)
    for holder in (data, where):
        if isinstance(holder, Mapping):
            for key in keys:
                if key in holder:
                    return _frame(holder[key], source), source
    if not isinstance(data, Mapping):
        for key in keys:
            value = getattr(data, key, None)
            if value is not None:
                return _frame(value, source), source
    if isinstance(data, Mapping) or isinstance(where, Mapping):
        names = list(data if isinstance(data, Mapping) else where)
        raise PlotInputError(f"{source}: no table {table!r} in the {type(data).__name__} given "
                             f"(it has: {', '.join(str(n) for n in names) or 'nothing'})")
    raise TypeError(f"{function}: expected a DataFrame of {table}, a mapping of table name to "
                    f"DataFrame (ap.tables(...)) or a result with the table (DumpResult, "
                    f"ModelProfile), got {type(data).__name__}")


def checked_table(data, table, function, columns, *, int_columns=ID_COLUMNS, layers=None, source=None,
                  text_columns=(), aliases=()):
    """The plot's table of ``data`` (table_of), checked (check_columns) and cut to ``layers``
    (layer_set, select_layers): (DataFrame, the layer set or None, the name errors give it)."""
    chosen = layer_set(layers, function)
    df, name = table_of(data, table, function, aliases)
    source = source or name
    df = check_columns(df, columns, source, int_columns=int_columns, text_columns=text_columns)
    return select_layers(df, chosen, source), chosen, source


def _frame(value, source):
    if not isinstance(value, pd.DataFrame):
        raise PlotInputError(f"{source}: expected a pandas DataFrame, got {type(value).__name__}")
    return value


def check_columns(df, required, source, int_columns=ID_COLUMNS, csv=False, text_columns=()):
    """A copy of ``df`` with the ``required`` columns as float64 (the text ``nan`` becomes NaN)
    and the ``int_columns`` among them as int64; PlotInputError when a column of ``required`` or
    ``text_columns`` (names, kept as they are) is missing, a required one holds a non-numeric
    value or, for ``int_columns``, a value that is not a whole number, or when there is no row.
    Other columns are kept as they are.

    ``source`` starts every message; ``csv``: ``df`` was just read from the CSV file ``source``,
    so messages say "the header" and give file line numbers (the header is line 1)."""
    df = df.copy()
    df.columns = [str(c).strip() for c in df.columns]
    where = "the header" if csv else "the table"

    def row(pos):
        return f"line {pos + 2}" if csv else f"row {pos}"

    missing = [c for c in tuple(required) + tuple(text_columns) if c not in df.columns]
    if missing:
        noun = "column" if len(missing) == 1 else "columns"
        raise PlotInputError(f"{source}: missing {noun} {', '.join(repr(c) for c in missing)} "
                             f"({where} has: {', '.join(df.columns)})")
    if df.empty:
        raise PlotInputError(f"{source}: no data rows (only a header)" if csv else f"{source}: no rows")
    for col in required:
        raw = df[col]
        num = pd.to_numeric(raw, errors="coerce")
        bad = num.isna() & raw.notna() & ~raw.astype(str).str.strip().str.lower().isin(
            ("nan", "-nan", "+nan", ""))
        if bad.any():
            pos = int(np.flatnonzero(bad.to_numpy())[0])
            raise PlotInputError(f"{source}: column '{col}' has a non-numeric value "
                                 f"{raw.iloc[pos]!r} on {row(pos)}")
        df[col] = num.astype(float)
    for col in int_columns:
        if col not in required:
            continue
        vals = df[col].to_numpy(dtype=float)
        bad = ~np.isfinite(vals) | (vals != np.round(vals))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise PlotInputError(f"{source}: column '{col}' must hold whole numbers; "
                                 f"{row(pos)} has {float(vals[pos])!r}")
        df[col] = vals.astype(np.int64)
    return df


def layer_set(layers, function):
    """``layers`` (an int or an iterable of ints; None: all) as a set, checked."""
    if layers is None:
        return None
    items = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    if not items or any(not isinstance(x, (int, np.integer)) or isinstance(x, bool) or x < 0
                        for x in items):
        raise PlotInputError(f"{function}: layers: expected layer numbers >= 0, got {layers!r}")
    return {int(x) for x in items}


def select_layers(df, layers, source, where="table"):
    """The rows of ``layers`` (None: every row); PlotInputError when none of them is there."""
    if layers is None:
        return df
    out = df[df["layer"].isin(sorted(layers))]
    if out.empty:
        raise PlotInputError(f"{source}: none of the requested layers "
                             f"{format_layer_set(layers)} is in the {where} (it has "
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


def no_pairs_is_nan(df):
    """Plasticity of a row without key pairs (n_pairs 0) is undefined, whatever is written."""
    df = df.copy()
    df.loc[df["n_pairs"] == 0, "plasticity"] = np.nan
    return df


def layer_key(layers):
    """A trajectory's layer column as text keys: "all" on the model-level rows (NA, empty, or
    "all" in tables written before), else the layer's number."""
    import pandas as pd

    return pd.Series(["all" if pd.isna(v) or str(v) in ("", "all") else str(int(float(v))) for v in layers],
                     index=layers.index, dtype=object)
