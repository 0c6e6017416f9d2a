"""Comparing result sets head by head (docs/method.md §8.6): ``compare_runs``.

The comparison is the C++ run behind ``ap_compare`` (include/attention_plasticity/run/compare_run.hpp), with its
options (run/compare_config.hpp: their checks, messages and help), so the CSVs written here and by
ap_compare are the same bytes; the DataFrames are built from the values those CSVs are written
from, as columns (not by parsing their text).
"""

import os
from typing import NamedTuple

from ._core import UsageError
from ._core.companion import _compare_options, _compare_result_sets
from .results import frames


class CompareResult(NamedTuple):
    """The tables of a comparison (docs/method.md §8.6): ``heads`` (compare_heads.csv, one row per
    pair of consecutive sets, head and quantity, with the ``design`` used), ``changed``
    (compare_changed.csv, the heads selected as changed: the head-level verdict ``head_q``, the
    head-level quantities that carried it in ``quantities`` and the query buckets apart in
    ``buckets``), ``summary`` (compare_summary.csv,
    the mean over heads, all layers and by layer), ``trajectory`` (compare_trajectory.csv, each
    set's means over heads, in order); ``notes`` (the design used, heads left out, how the
    model-level errors were made, what the intervals mean for one dump), the number of heads
    compared and of head changes."""

    heads: "pandas.DataFrame"
    changed: "pandas.DataFrame"
    summary: "pandas.DataFrame"
    trajectory: "pandas.DataFrame"
    notes: list
    compared_heads: int
    changed_heads: int


def _is_result(obj):
    """A result object (DumpResult, ModelProfile, a set read back by read_results): it has the
    tables and writes them as a result set."""
    return hasattr(obj, "tables") and callable(getattr(obj, "write", None))


# The tables of a result object the comparison reads (head_sequence_influence when it has it).
_COMPARED_TABLES = ("head_metrics", "head_profile", "head_sequence_influence")


def _columns(frame):
    """A DataFrame's columns as the C++ comparison takes them: float64 and int64 arrays, names as
    lists of str."""
    import numpy as np

    out = {}
    for name in frame.columns:
        column = frame[name]
        kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else "O"
        if kind == "f":
            out[str(name)] = np.ascontiguousarray(column.to_numpy(), dtype=np.float64)
        elif kind in "iub":
            out[str(name)] = np.ascontiguousarray(column.to_numpy(), dtype=np.int64)
        else:
            out[str(name)] = [str(v) for v in column.tolist()]
    return out


def compare_runs(sets, output_dir=None, names=None, alpha=0.05, common_heads=False, same_dump=False,
                 design="auto"):
    """Compares result sets, given in order (checkpoints, variants), each with the next, head by
    head. A set is a folder (the output of ap_analyze, ap_merge, ``analyze_dump`` or a result's
    ``write``) or a result object (``analyze_dump``'s DumpResult, ``profile_model``'s
    ModelProfile, ``read_results``'): an object is compared in memory, its tables as it holds
    them (rows a user filtered out are not compared), read and checked as a folder's files are, so
    that both give the same numbers. Compared: for ap_overall, ap_first20,
    ap_last20, ap_drop and each query bucket's AP_j, the bias-corrected difference, its standard
    error, z, the two-sided p-value, the Benjamini-Hochberg q-value and Holm's adjusted p-value
    across heads, and the model-level mean with its interval. Every estimate, bias and standard
    error is read from the sets (head_metrics.csv, head_profile.csv): sets written before
    head_metrics.csv had the errors of ap_first20, ap_last20 and ap_drop are refused.

    What the errors cover: the analyses' own, by default sequence-level (§8.3: the texts and the
    tokens drawn are samples, the tokens of one text dependent). A head **changed** by the
    hierarchical selection of docs/method.md §8.6 (Benjamini and Bogomolov): each head's tests
    (ap_overall, ap_first20, ap_last20, ap_drop, each bucket's AP_j) combined by Simes' test
    (``head_p``), the heads selected by Benjamini-Hochberg at ``alpha`` (``head_q`` <= alpha),
    then within each selected head its tests by BH at alpha R / m (R heads selected of m). The
    false discovery rate over the list of changed heads is at most ``alpha``: when nothing
    changed, some head is reported in at most a share ``alpha`` of comparisons. A difference
    below the computation's rounding bound (``resolution``) is not tested; ``reason`` says why a
    row has no p (``identical``, ``equal within rounding``, ``no estimate``, ``no standard
    error``, ``zero standard error``), and a note counts them. Each p is of Student's t law with
    the error's degrees of freedom (``df``: G - 1 over the G documents, paired; Welch's of the
    two sets' G - 1, unpaired; ``inf``, the normal law, for errors not over documents), since an
    error estimated from G documents gives z heavier tails than the normal law.

    ``design``: ``"auto"`` (default), ``"paired"`` or ``"unpaired"`` (docs/method.md §8.6). Documents
    are the same when their ``document_fingerprint`` (examples.csv: a hash of the document's token ids)
    is equal, whatever their ids. ``"auto"`` is paired when every set has a fingerprint for each
    document, consecutive sets hold the same documents (same texts with other token draws count as
    the same) and each set has its influences; else unpaired. ``"paired"`` takes the standard error
    of the per-document differences of the two sets' influences (head_sequence_influence.csv; each
    set analyzed with ``sequence_influences="on"``, else UsageError); it is refused, naming the first
    unmatched documents, when the fingerprints show other documents; sets without fingerprints (older
    sets, no examples.csv) are paired only when stated, by document id, with the note "pairing could
    not be checked from the texts". ``"unpaired"``: independent samples of texts, the standard error
    sqrt(s_A^2 + s_B^2). The design used and why are in ``notes``; ``heads.design`` is the design,
    with how auto chose it (e.g. ``paired (auto: same documents)``, ``unpaired (auto: other
    documents)``, ``unpaired (auto: no fingerprints)``, ``paired (by id: unchecked)``). When the sets
    have influence tables, the model-level means over heads (``summary``, ``trajectory``) have errors
    that account for the heads sharing documents; otherwise the heads are taken as independent (a
    note says so).

    Returns CompareResult: ``heads`` holds one row per (pair of sets, head, quantity); its
    ``significant`` is 1 when the row is selected by the hierarchical selection; ``q_bh`` and
    ``p_holm`` stay the per-family adjustments (one quantity or bucket across heads) for those who
    want them. ``q_bucket`` (``heads``) and ``layer`` (``summary``, ``trajectory``) are pandas Int64,
    NA on head-level rows and on the model-level rows (all layers). ``compared_heads`` is the
    number of heads compared (each pair of consecutive sets compares the same heads);
    ``changed_heads`` counts (pair of sets, head) selected as changed, summed
    over the pairs (so with three sets a head can count twice), the rows of ``changed``.

    ``names``: the sets' names in the tables, a list (default: the folders' names; ``set1``,
    ``set2``, ... for result objects). Sets with other heads
    are refused (UsageError) unless ``common_heads``; ``same_dump``: the sets analyzed the same
    dump under different options (unpaired tests are then conservative). With ``output_dir``, the
    CSVs are written there as one result set, as ap_compare writes them."""
    # One string is one name or one folder, never a list of its characters ('xy' -> 'x', 'y').
    for label, value in (("sets", sets), ("names", names)):
        if isinstance(value, (str, bytes, os.PathLike)) or (label == "sets" and _is_result(value)):
            one = "name" if label == "names" else "result" if _is_result(value) else "folder"
            raise UsageError("compare_runs: %s: %r is one %s; give a list, one per set" % (label, value, one))
    sets = list(sets)
    folders, held = [], []
    for i, s in enumerate(sets):
        if _is_result(s):
            # A result object: its tables as columns; "set<i+1>" labels it and is its default name.
            tables = s.tables
            if len(tables["head_metrics"]) == 0:
                raise ValueError(f"compare_runs: sets[{i}] has no analyzed head to compare")
            folders.append(f"set{i + 1}")
            entry = {name: _columns(tables[name]) for name in _COMPARED_TABLES if name in tables}
            # Its examples.csv (the documents and their fingerprints: pairing checked, §8.6).
            examples = getattr(s, "examples_csv", None)
            if examples is not None:
                entry["examples_csv"] = str(examples)
            held.append(entry)
        else:
            folders.append(os.fspath(s))
            held.append(None)
    # The options are checked by ap_compare's option table (_compare_options()), with its messages.
    options = {"alpha": float(alpha), "common_heads": bool(common_heads), "same_dump": bool(same_dump),
               "design": str(design)}
    tables, notes, compared, changed = _compare_result_sets(
        folders, list(names) if names is not None else [], options,
        os.fspath(output_dir) if output_dir is not None else None, held)
    # The tables come as columns (the C++ values the CSVs are written from): int64 and float64
    # arrays, names as str; q_bucket and the summary's and trajectory's layer (integers, empty on
    # head-level and model-level rows) become pandas Int64 with NA there (_integer_columns).
    frame = frames(tables)
    _integer_columns(frame)
    return CompareResult(heads=frame["compare_heads"], changed=frame["compare_changed"],
                         summary=frame["compare_summary"], trajectory=frame["compare_trajectory"],
                         notes=list(notes),
                         compared_heads=compared, changed_heads=changed)


# The integer columns of the comparison's tables that are NA on some rows (empty in the CSVs):
# compare_heads' q_bucket (head-level rows), the summary's and trajectory's layer (model-level rows).
_NULLABLE_INTEGERS = {"compare_heads": ("q_bucket",), "compare_summary": ("layer",),
                      "compare_trajectory": ("layer",)}


def _integer_columns(frame):
    """The nullable integer columns (text from C++, digits or empty) as pandas Int64, NA where empty."""
    import pandas as pd

    for table, names in _NULLABLE_INTEGERS.items():
        for name in names:
            values = frame[table][name]
            frame[table][name] = pd.array([int(v) if v != "" else pd.NA for v in values], dtype="Int64")


def _options_doc():
    """The options' part of compare_runs' help, from ap_compare's option table (one text each)."""
    lines = ["", "", "Options (ap_compare's, as keywords; output_dir and names above):"]
    for key, _flag, metavar, text in _compare_options():
        if key not in ("output_dir", "names"):
            lines.append("    %s (%s): %s" % (key, metavar, text))
    return "\n".join(lines)


compare_runs.__doc__ += _options_doc()
