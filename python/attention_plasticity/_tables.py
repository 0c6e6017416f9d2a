"""The CSV tables of docs/method.md §3 as pandas DataFrames.

The text comes from the C++ programs' own row formatting (examples/csv_rows.hpp, through the
module): a table's columns are whatever ap_analyze writes, never a list kept here. Numbers
are written with 17 significant digits and parsed back exactly (pandas 3 parses floats
exactly by default; older pandas is asked for float_precision "round_trip"), so a DataFrame
holds the very doubles the library computed; ``nan`` is NaN.
"""

import io

import pandas as pd

_EXACT = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


def frame(text):
    """One CSV's text (header and rows) as a DataFrame."""
    return pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=["nan"], **_EXACT)


def frames(texts):
    """{table name: CSV text} -> {table name: DataFrame}."""
    return {name: frame(text) for name, text in texts.items()}
