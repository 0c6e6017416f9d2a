"""A dump analyzed from Python: ``analyze_dump(path, ...)``, ap_analyze's analysis as a function.

The options, the head selection, the run over the heads, the rows of the CSVs and the
result-set writer are the C++ program's own (through the compiled module), so the tables and
the files are the same, byte for byte; with ``shard="I/N"`` the same heads of the same shard
and the same shard.json, so that ap_merge merges shards of either. Added here: qk-sniffer's
Parquet folders
(``l{LL}h{HH}{q|k}/data.parquet``, read by ``attention_plasticity.sniffed``), a tqdm progress
bar, and the failed heads as warnings and as data.
"""

import os
import sys
import warnings
from typing import NamedTuple

from . import results as _results
from ._core.dump import DumpRun, analyze_options
from .result_set import ResultSet


class HeadFailedWarning(RuntimeWarning):
    """A head of analyze_dump failed (bad input); the others went on."""


class HeadError(NamedTuple):
    """A head that failed: which one, the file and the reason (as ap_analyze reports it)."""

    layer: int
    q_head: int
    k_head: int
    file: str
    reason: str

    def __str__(self):
        return f"error: layer {self.layer} q_head {self.q_head}: {self.file}: {self.reason}"


class DumpResult(ResultSet):
    """What analyze_dump returns (and, as ModelProfile, profile_model): a ResultSet made by a run.

    Attributes
    ----------
    tables : dict of str to pandas.DataFrame
        The CSVs of docs/method.md §3 by table name (``head_metrics``,
        ``head_bucket_plasticity``, ``head_profile``, ``head_component_weights``,
        ``head_distance_plasticity`` of §8.1, and any table ap_analyze writes), rows of the
        analyzed heads in (layer, q_head) order, made from the numbers the CSVs are written
        from (the same values, float64 exact; ``attention_plasticity.tables``). Also reachable
        as ``result["head_metrics"]``, ``result.head_metrics`` and ``ap.tables(result)``.
    errors : list of HeadError
        The heads that failed, in (layer, q_head) order.
    heads : list of (layer, q_head, k_head)
        The heads that were to be analyzed.
    layout : dict
        num_layers, num_q_heads, num_k_heads and where they come from (``origin``).
    summary : str
        ap_analyze's count line: "P of the L query heads of the layout present: A analyzed,
        F failed".
    shard : str or None
        "I/N" when the run was shard I of N (``shard`` option, docs/method.md §8.4): ``heads``,
        ``tables`` and ``errors`` are then that shard's, and the result set written holds
        shard.json for ap_merge.
    output_dir : str or None
        Where the CSVs were written (None: not written).
    notes : list of str
        Notes of the output folder's writer (e.g. leftovers of other runs left alone).
    """

    def __init__(self, run, errors, output_dir):
        """Made by analyze_dump from its run (a DumpRun that has run)."""
        super().__init__(_results.frames(run.columns()), run.tables_text(), run.counts_text(), errors)
        self._run = run
        self.heads = run.heads
        self.layout = run.layout
        self.shard = run.shard
        self.output_dir = output_dir
        self.notes = run.notes()
        # The text of the run's examples.csv (None without one): compare_runs checks pairing by it.
        self.examples_csv = run.examples_csv

    @property
    def analyzed(self):
        """The number of heads analyzed."""
        return self._run.analyzed

    @property
    def failed(self):
        """The number of heads that failed."""
        return self._run.failed

    @property
    def results(self):
        """The HeadResult of every analyzed head, in (layer, q_head) order (every number of the
        analysis, beyond the tables: e.g. ``results[0].cells``)."""
        if "_head_results" not in self.__dict__:
            self._head_results = self._run.head_results()
        return self._head_results

    def write(self, output_dir):
        """Write the CSVs into ``output_dir`` as one result set, exactly as ap_analyze does
        (examples/README.md, "The result set"); raises OutputError when the folder cannot be
        used. With a shard, the set holds its shard.json. Returns False (and writes nothing)
        when no head was analyzed in a run without a shard. ``read_results(output_dir)`` reads
        it back; ap_compare and compare_runs compare it."""
        return self._run.write_to(os.fspath(output_dir))


def read_parquet_folder(folder):
    """The arrays of one qk-sniffer Parquet folder (attention_plasticity.sniffed): the reader
    analyze_dump gives the C++ run. Errors are "FILE: reason" ValueErrors."""
    from . import sniffed
    return sniffed.read_sniffed_folder(folder)


def _option_doc():
    lines = []
    for key, _flag, metavar, help_text, _takes_list in analyze_options():
        if key in ("data_root", "output_dir"):
            continue
        lines.append(f"        {key} : {metavar}\n            {help_text}")
    return "\n".join(lines)


def analyze_dump(data_root, output_dir=None, *, config=None, progress=True, warn=True,
                 **options) -> DumpResult:
    """Analyze the heads of a dump as ap_analyze does, and return the tables.

    The dump (docs/method.md §1) holds one folder per captured (layer, head, kind),
    ``l{LL}h{HH}q`` / ``l{LL}h{HH}k``, each in the NPY layout (``vector.npy``, ``position.npy``,
    ...) or in qk-sniffer's Parquet layout (``data.parquet``; a folder holding data.parquet is
    read as Parquet, any other as NPY). The heads analyzed, the layout (from the options, the
    model's own config.json given as ``model_config``, or the dump's ``metadata.json``; the head
    counts are never guessed from the folder names) and the selection (``layers``, ``heads``)
    are ap_analyze's (examples/README.md, "Which heads"). Heads run in parallel on ``threads``
    threads with the GIL released, one BLAS thread each; a head that fails is reported (a
    HeadFailedWarning, and in ``errors``) while the others go on.

    Parameters
    ----------
    data_root : str or os.PathLike
        The dump's folder.
    output_dir : str or os.PathLike, optional
        When given (or set in the config file), the CSVs are written there as one result
        set, byte-identical to ap_analyze's (with ``shard``, also its shard.json, so that
        ap_merge joins the shards' folders); the folder is checked and locked before any work
        (OutputError). None: nothing is written.
    config : str or os.PathLike, optional
        A YAML file with any of the options below (as ap_analyze's --config); keyword options
        override it.
    progress : bool
        Show a tqdm progress bar on stderr.
    warn : bool
        Emit a HeadFailedWarning for each head that fails (they are in ``errors`` anyway), and
        a NaNColumnWarning once for each aggregate column that is NaN for some head by a rule
        of docs/method.md (e.g. ``ap_first20`` and ``ap_drop`` when no query bucket lies below
        0.2 C, §2.14: contexts short for the buckets; ``attention_plasticity.nan_reasons``).
    **options
        The options of ap_analyze, by key, with its defaults and its checks (a value is read
        as ap_analyze reads the text of a flag: numbers, paths, and for ``layers`` / ``heads``
        "0-3,7" or a list such as [0, 1, "4-6"], for the on|off options of the extensions of
        docs/method.md §8 also True / False; None leaves the default):

{options}

    Returns
    -------
    DumpResult
        ``tables`` (DataFrames with the CSVs' columns), ``errors``, ``summary``, ...

    Raises
    ------
    UsageError
        An option, the configuration file, the dump's layout or the head selection cannot be
        used (ap_analyze's exit status 2); nothing was analyzed.
    OutputError
        ``output_dir`` cannot be used, or the result set could not be written (then the
        earlier set, if any, is still the current one).
    KeyboardInterrupt
        Ctrl-C: the run stops (heads in progress finish), nothing is written.
    """
    run = DumpRun.from_options(os.fspath(data_root),
                                     None if output_dir is None else os.fspath(output_dir),
                                     None if config is None else os.fspath(config), options)
    target = run.output_dir
    try:
        _run(run, progress=progress, warn=warn)
        errors = [HeadError(*failure[1:6]) for failure in run.failures()]
        written = target is not None and run.commit()
        if target is not None and not written:
            warnings.warn(f"{run.counts_text()}; no head was analyzed, so {run.unchanged_text(True)}",
                          HeadFailedWarning, stacklevel=2)
    finally:
        run.close()
    result = DumpResult(run, errors, target if written else None)
    if warn:
        _results.warn_nan_columns(result.tables, stacklevel=2)
    return result


analyze_dump.__doc__ = analyze_dump.__doc__.replace("{options}", _option_doc())


def _run(run, progress, warn, report=False, reader=None):
    """Runs ``run`` with a tqdm bar (progress: True, False, or None for "when stderr is a
    terminal"); each failure is warned (``warn``) and/or printed on stderr as ap_analyze
    prints it (``report``). The failures themselves stay in ``run.failures()``. ``reader``:
    how the run reads a folder it reads through Python (default: Parquet folders)."""
    from tqdm import tqdm

    bar = tqdm(total=len(run.heads), unit="head", desc="attention plasticity", file=sys.stderr,
               disable=(None if progress is None else not progress), dynamic_ncols=True)

    def on_progress(done, failures):
        for *_failure, line in failures:
            if report:
                bar.write(line, file=sys.stderr)
            if warn:
                warnings.warn(line, HeadFailedWarning, stacklevel=4)
        if bar.n != done:
            bar.update(done - bar.n)

    try:
        run.run(read_parquet_folder if reader is None else reader, on_progress)
    finally:
        bar.close()


__all__ = ["analyze_dump", "DumpResult", "HeadError", "HeadFailedWarning", "read_parquet_folder"]
