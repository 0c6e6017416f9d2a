"""One result-set type for every result of the package (``ResultSet``): what ``analyze_dump``,
``profile_model`` and ``profile_vectors`` return, a list of ``HeadResult`` made into one
(``result_set``), and a result folder read back (``read_results``).

A result set is the tables of docs/method.md §3 (``tables``: {name: DataFrame}; also
``result["head_metrics"]`` and ``result.head_metrics``), the bytes of their CSVs (``csv_text``),
a one-line ``summary``, the heads that failed (``errors``) and ``write(dir)``: the CSVs as one
result set, with ap_analyze's writer (examples/README.md, "The result set"), which ap_compare
and ``compare_runs`` read; ``read_results(dir)`` gives the same tables back, value for value.
"""

import os

from . import results as _results


class ResultSet:
    """The tables of docs/method.md §3 of some heads, and the CSVs they are written as.

    Attributes
    ----------
    tables : dict of str to pandas.DataFrame
        The CSVs by table name (``head_metrics``, ``head_bucket_plasticity``, ``head_profile``,
        ``head_component_weights``, ``head_distance_plasticity``, ``head_sequence_influence``),
        with the CSVs' columns and dtypes (integers int64, reals float64, ``pca_class`` str).
    errors : list
        The heads that failed (HeadError), when known.
    summary : str
        One line: what the set holds.
    source : str or None
        The folder a set read back came from.
    """

    # The text of the set's examples.csv (docs/method.md §1.1), None without one: compare_runs
    # checks pairing from its document fingerprints (§8.6).
    examples_csv = None

    def __init__(self, tables, texts, summary, errors=(), source=None):
        """A set of ``tables`` ({name: DataFrame}) and their CSV ``texts`` ({name: str}); made by
        result_set, read_results and the runs, not usually by hand."""
        self.tables = tables
        self._texts = texts
        self.summary = summary
        self.errors = list(errors)
        self.source = source

    def __getitem__(self, name):
        return self.tables[name]

    def __getattr__(self, name):
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or table '{name}'")

    @property
    def analyzed(self):
        """The number of heads in the set (rows of head_metrics)."""
        return len(self.tables["head_metrics"])

    @property
    def failed(self):
        """The number of heads that failed (when known)."""
        return len(self.errors)

    def csv_text(self, name):
        """The bytes of one CSV (``name``: a table name) as ap_analyze writes it, decoded."""
        return self._texts[name]

    def write(self, output_dir):
        """Writes the CSVs into ``output_dir`` as one result set, exactly as ap_analyze does (the
        folder checked and locked, all files or none; an earlier set stays current when writing
        fails: OutputError). Returns False (and writes nothing) when the set has no head."""
        from ._core.dump import _write_result_set
        from ._core.tables import result_tables

        if self.analyzed == 0:
            return False
        _write_result_set(os.fspath(output_dir), [(file, self._texts[name]) for name, file, _h in result_tables()
                                                  if name in self._texts])
        return True

    def __repr__(self):
        return (f"{type(self).__name__}({self.summary}; tables: "
                f"{', '.join(f'{k} {len(v)} rows' for k, v in self.tables.items())})")


def result_set(results, *, warn=True):
    """A ResultSet of HeadResults (``analyze_head``'s; one or an iterable), in the order given:
    the tables of ``attention_plasticity.tables`` and the CSV bytes ap_analyze would write for
    them. ``warn``: a NaNColumnWarning per column that is NaN for some head."""
    from ._core.head import HeadResult
    from ._core.tables import _tables_text

    results = [results] if isinstance(results, HeadResult) else list(results)
    tables = _results.tables(results, warn=warn)
    return ResultSet(tables, _tables_text(results), f"{len(results)} heads analyzed")


def analysis_options(**overrides):
    """The HeadOptions of ap_analyze, analyze_dump and profile_model (a named preset): the
    library's defaults (``HeadOptions()``, whose confidence intervals are off, to keep
    ``analyze_head`` at its bare cost) with the intervals of docs/method.md §8.3 on, then
    ``overrides`` by name (checked as HeadOptions checks them: a misspelt name gets the nearest
    ones). Use it for ``analyze_head`` results you will compare (compare_runs needs the errors)."""
    from ._core.dump import analyze_default_options
    from ._core.head import HeadOptions

    given = HeadOptions(**overrides)  # checks the names and the values
    options = analyze_default_options()
    for name in overrides:
        setattr(options, name, getattr(given, name))
    return options


def _frame(text, schema, path):
    """A CSV's text as a DataFrame with the schema's columns and dtypes (numbers exact)."""
    import io

    import pandas as pd

    names = [name for name, _t in schema]
    header = text.split("\n", 1)[0]
    if header != ",".join(names):
        raise ValueError(f"read_results: {path}: the header is not the one this version writes "
                         f"(expected '{','.join(names)[:80]}...', got '{header[:80]}...')")
    dtypes = {name: ("str" if kind == "str" else kind) for name, kind in schema}
    try:
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values={
            name: ["nan"] for name, kind in schema if kind == "float64"}, dtype=dtypes)
    except (ValueError, TypeError) as e:
        raise ValueError(f"read_results: {path}: {e}") from None
    return frame


def read_results(folder):
    """The result set in ``folder`` (written by ap_analyze, ap_merge, ``analyze_dump`` or a
    result's ``write``) as a ResultSet: the same tables, value for value (the CSVs hold every
    double exactly, docs/method.md §3.1), and the same bytes (``csv_text``). It is read by the
    reader of ap_merge and ap_compare (run/result_set_reader.hpp): under the folder's lock,
    shared, the current set resolved once (a run finishing meanwhile does not mix two sets), each
    file bounded, a FIFO, device or folder refused; the influence table line by line, bounded by
    the set's heads and documents (docs/method.md §8.6: rows beyond a head's documents refused as
    they are read). Raises ValueError naming the file for a missing or unreadable table or a
    header of another version."""
    from ._core.dump import _read_result_set
    from ._core.tables import result_schema, result_tables

    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"read_results: {folder}: not a folder")
    files = {file: name for name, file, _header in result_tables()}
    # One reading of the set (its lock held, the current set resolved once): the tables, its
    # examples.csv, and the influence table as columns, read line by line and bounded by the
    # set's heads and documents (docs/method.md §8.6: a repeated or oversized table is refused by
    # its content, before memory grows with the file).
    texts, columns, examples = {}, {}, None
    for entry in _read_result_set(folder, list(files) + ["examples.csv"], influence_columns=True):
        if entry[0] == "examples.csv":
            examples = entry[1]
        elif len(entry) == 4:
            file, text, arrays, quantities = entry
            texts[files[file]] = text
            columns[files[file]] = _influence_frame(arrays, quantities)
        else:
            texts[files[entry[0]]] = entry[1]
    if "head_metrics" not in texts:
        raise ValueError(f"read_results: {os.path.join(folder, 'head_metrics.csv')}: not found (not a result "
                         f"set of ap_analyze, ap_merge or analyze_dump)")
    schema = result_schema()
    tables = {name: columns[name] if name in columns else _frame(text, schema[name], os.path.join(folder, file))
              for file, name in files.items() for text in [texts.get(name)] if text is not None}
    result = ResultSet(tables, texts, f"{len(tables['head_metrics'])} heads read from {folder}", source=folder)
    if examples is not None:
        result.examples_csv = examples
    return result


def _influence_frame(arrays, quantities):
    """The influence table's DataFrame from its columns (read by C++, run/influence_table.hpp):
    the dtypes of _frame's (int64, str, float64), without parsing the text again."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame({name: np.asarray(arrays[name]) for name in ("layer", "q_head", "k_head", "document_id")},
                         copy=False)
    frame["quantity"] = pd.array(np.asarray(quantities, dtype=object)[np.asarray(arrays["quantity"])], dtype="str")
    frame["q_bucket"] = np.asarray(arrays["q_bucket"])
    frame["influence"] = np.asarray(arrays["influence"])
    return frame


__all__ = ["ResultSet", "result_set", "read_results", "analysis_options"]
