"""Results as a researcher reads them: the §3 tables of many heads in one call, and a readable
``repr`` / ``to_dict()`` for every result type of the compiled module.

``tables(results)`` turns a list of ``HeadResult`` (or one, or a ``DumpResult``) into the
DataFrames of docs/method.md §3, one per CSV ap_analyze writes. They are built from arrays of
the very numbers the CSV writer formats (``_core.tables.result_columns``: the C++ definition of
every column in include/attention_plasticity/io/csv_rows.hpp, its name and its type, int64 or float64), never from
CSV text, and no column is listed here: a column added to the CSVs appears in the DataFrames.

The other result types (the structs of the steps, kernel and extensions, e.g. ``BucketQueryModel``,
``CellPlasticity``, ``StageTimings``) get from the module a ``repr`` listing their fields
(``_repr``: numbers with 6 significant digits, arrays by dtype and shape, lists by length) and
``to_dict()`` (``_to_dict``: the fields as they are, arrays stay arrays), unless they have their
own; ``HeadResult`` prints its key numbers (``_head_result_repr``) and has ``tables()``. They are
attached here, when the package is imported (``_install_result_methods``), not by the compiled
module, which imports nothing of the package.
"""

import inspect
import warnings

import numpy as np

from . import _core
from ._core.head import HeadResult
from ._core.tables import result_columns


def frames(columns):
    """{table name: {column: array}} -> {table name: pandas.DataFrame} (columns in order)."""
    import pandas as pd

    def column(values):
        # A column of names comes as a list: the "str" dtype, also when the table has no row.
        return pd.array(values, dtype="str") if isinstance(values, list) else values

    return {name: pd.DataFrame({k: column(v) for k, v in cols.items()}, copy=False) for name, cols in columns.items()}


def tables(results, *, warn=True):
    """The DataFrames of docs/method.md §3 of ``results``, by table name.

    ``results``: a ``HeadResult``, a list (any iterable) of them, or a result set (``DumpResult``,
    ``ModelProfile``, ``read_results``').
    Returns {"head_metrics": DataFrame, "head_bucket_plasticity": ..., "head_profile": ...,
    "head_component_weights": ..., "head_distance_plasticity": ..., and any table ap_analyze
    writes}: the rows of the heads in the order given, the columns and dtypes of the CSVs
    (integers int64, every other column float64 holding the library's doubles exactly; a
    CSV's ``nan`` is NaN). ``warn``: warn once (a NaNColumnWarning) for each aggregate column
    that is NaN by the rules of docs/method.md §2.14 / §8.3 for some head, with the rule
    (see ``nan_reasons``).
    """
    if isinstance(getattr(results, "tables", None), dict):  # a result set (ResultSet and its kinds)
        if warn:
            warn_nan_columns(results.tables, stacklevel=3)
        return results.tables
    if isinstance(results, HeadResult):
        results = [results]
    out = frames(result_columns(results))
    if warn:
        warn_nan_columns(out, stacklevel=3)
    return out


class NaNColumnWarning(UserWarning):
    """An aggregate column is NaN for some heads, by definition (the message says which rule)."""


# Why a column of the tables is NaN, by the rules of docs/method.md (the rule's home; the
# docstrings of HeadMetrics and tables() point here). Only columns that a default run can leave
# NaN are listed: the columns of an extension that is off are NaN by the option's own
# documentation (§8) and not warned about.
_NAN_RULES = {
    "head_metrics": [
        ("ap_overall", "no query bucket has a key pair (no bucket with >= 2 queries and an eligible key "
                       "bucket holding an example of >= 2 keys; docs/method.md §2.10-2.14)"),
        ("ap_first20", "no query bucket with a defined AP_j has tau_j < 0.2 C, C = the largest query "
                       "position + 1 (docs/method.md §2.14): contexts too short for the buckets"),
        ("ap_last20", "no query bucket with a defined AP_j has tau_j >= 0.8 C (docs/method.md §2.14; "
                      "usual with logarithmic buckets, whose last mean position is about 0.75 C)"),
        ("ap_drop", "ap_first20 or ap_last20 is NaN (docs/method.md §2.14)"),
        ("ap_overall_se", "sequence-level standard errors (sampling_unit 'sequence', the default) need at least "
                          "10 sequences (n_sequences: distinct example ids of the head's queries and keys) and "
                          "queries with example ids (docs/method.md §8.3); sampling_unit='token' gives the errors "
                          "conditional on the keys, meant for synthetic data whose tokens are independent"),
        ("ap_overall_ci_low", "the intervals are NaN when a bucket has no pair, a cell has exactly one "
                              "pair, or the kernel had to rescale (docs/method.md §8.3)"),
    ],
    "head_profile": [
        ("plasticity", "the bucket has no key pair: no eligible key bucket, or none holding an example "
                       "of >= 2 keys (docs/method.md §2.11-2.12)"),
    ],
}


def nan_reasons(tables_):
    """[(table, column, heads with a NaN, heads, rule)] for the columns of ``tables_`` (a dict of
    DataFrames, as tables() returns) that are NaN by definition for some head (docs/method.md
    §2.14, §8.3). Interval columns count only when the intervals were computed (their
    standard error column is not all NaN)."""
    out = []
    for table, rules in _NAN_RULES.items():
        frame = tables_.get(table)
        if frame is None or len(frame) == 0:
            continue
        heads = frame[["layer", "q_head"]].drop_duplicates()
        for column, rule in rules:
            if column not in frame:
                continue
            if column.startswith("ap_overall_ci") and frame["ap_overall_se"].isna().all() \
                    and frame["ap_overall_bias"].isna().all():
                continue  # intervals off
            if column == "ap_overall_se" and frame["ap_overall_bias"].isna().all():
                continue  # intervals off
            bad = frame[column].isna()
            if bad.any():
                n_bad = len(frame.loc[bad, ["layer", "q_head"]].drop_duplicates())
                out.append((table, column, n_bad, len(heads), rule))
    return out


def warn_nan_columns(tables_, stacklevel=2):
    """Warns once per column (NaNColumnWarning) for what nan_reasons() finds."""
    for table, column, n_bad, n_heads, rule in nan_reasons(tables_):
        warnings.warn(f"{table}.{column} is NaN for {n_bad} of {n_heads} heads: {rule}",
                      NaNColumnWarning, stacklevel=stacklevel + 1)


def _format_value(value):
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray):
        return f"array({value.dtype}, shape={value.shape})"
    if isinstance(value, (list, tuple)):
        if len(value) <= 4 and all(isinstance(v, (int, float, np.number, bool)) for v in value):
            return "[" + ", ".join(_format_value(v) for v in value) + "]"
        kinds = {type(v).__name__ for v in value}
        return f"[{len(value)} {kinds.pop() if len(kinds) == 1 else 'items'}]"
    return repr(value)


def _fields(cls):
    """The public read-only fields of a bound class, in the order they were bound."""
    names = []
    for klass in reversed(cls.__mro__):
        for name, attr in vars(klass).items():
            if not name.startswith("_") and isinstance(attr, property) and name not in names:
                names.append(name)
    return names


def _to_dict(self):
    """The fields by name (numbers as numbers, arrays as arrays, nested results as they are)."""
    return {name: getattr(self, name) for name in _fields(type(self))}


def _repr(self):
    items = [f"{name}={_format_value(value)}" for name, value in _to_dict(self).items()]
    text = f"{type(self).__name__}(" + ", ".join(items) + ")"
    if len(text) <= 100:
        return text
    return f"{type(self).__name__}(\n" + "".join(f"    {item},\n" for item in items) + ")"


def _head_result_repr(self):
    m = self.metrics
    h = self.id
    interval = ""
    if not np.isnan(m.ap_overall_ci_low):
        interval = (f", interval [{m.ap_overall_ci_low:.4g}, {m.ap_overall_ci_high:.4g}] around "
                    f"ap_overall_corrected={m.ap_overall_corrected:.4g}")
    small = sum(1 for row in self.profile if row.small_bucket)
    return (f"HeadResult(layer={h.layer}, q_head={h.q_head}, k_head={h.k_head}: "
            f"ap_overall={m.ap_overall:.4g}{interval}, ap_first20={m.ap_first20:.4g}, "
            f"ap_last20={m.ap_last20:.4g}, ap_drop={m.ap_drop:.4g}; {m.n_q_tokens} queries, "
            f"{m.n_k_tokens} keys, d={m.d_model}; profile: {len(self.profile)} buckets"
            + (f" ({small} small)" if small else "") + ", "
            f"cells: {len(self.cells)}, distance_map: {len(self.distance_map)} bins"
            + ("" if self.timings is None else f"; {self.timings.total:.3g} s") + ")")


def _head_result_to_dict(self):
    """The head and its metrics: {layer, q_head, k_head and every column of head_metrics.csv}."""
    # The one row of head_metrics, straight from the columns (no DataFrame of every table).
    columns = result_columns([self])["head_metrics"]
    return {name: (column[0].item() if hasattr(column[0], "item") else column[0])
            for name, column in columns.items()}


def _head_result_tables(self):
    """The head's rows as pandas DataFrames with the columns and dtypes of the CSVs (docs/method.md §3),
    by table name: head_metrics, head_bucket_plasticity, head_profile, head_component_weights,
    head_distance_plasticity (and any table ap_analyze writes); attention_plasticity.tables([self]).
    Made from the numbers, not from CSV text."""
    return tables((self,), warn=False)


# The docstring as help() and the stubs show a method's (Python 3.11 keeps the indentation).
_head_result_tables.__doc__ = inspect.cleandoc(_head_result_tables.__doc__)


# The submodules of the compiled module whose types get a repr and to_dict() (module.cpp's parts).
_CORE_PARTS = ("kernel", "steps", "extensions", "head", "dump", "companion", "tables")


def _install_result_methods():
    """Attaches HeadResult's repr, to_dict() and tables(), then to every other bound class with
    fields (properties) and no repr or to_dict of its own, ``_repr`` and ``_to_dict``: a struct
    bound later is readable without more code. Run once, at import."""
    HeadResult.__repr__ = _head_result_repr
    HeadResult.to_dict = _head_result_to_dict
    HeadResult.tables = _head_result_tables
    for part in _CORE_PARTS:
        for value in vars(getattr(_core, part)).values():
            if not isinstance(value, type) or not any(isinstance(a, property) for a in vars(value).values()):
                continue
            if "__repr__" not in vars(value):
                value.__repr__ = _repr
            if "to_dict" not in vars(value):
                value.to_dict = _to_dict


_install_result_methods()

__all__ = ["tables", "frames", "nan_reasons", "warn_nan_columns", "NaNColumnWarning"]
