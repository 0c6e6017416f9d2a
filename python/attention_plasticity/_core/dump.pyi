"""
The dump analysis of ap_analyze (DumpRun, the option table behind analyze_dump) and the BLAS
threads and kernels (docs/method.md §7.7).
"""

from collections.abc import Sequence

import attention_plasticity._core.head


def analyze_options() -> list:
    """
    The options of ap_analyze (one table for the command line, the --config file and analyze_dump): a list
    of (key, flag, metavar, help, takes_list); the help ends with the default in brackets.
    """

def analyze_default_options() -> attention_plasticity._core.head.HeadOptions:
    """
    The HeadOptions of ap_analyze and analyze_dump when no option is given: the library's defaults
    (HeadOptions()) with the confidence intervals of docs/method.md §8.3 on. Returns a new HeadOptions.
    """

def analyze_help(program: str) -> str:
    """The --help text of ap_analyze, for `program`."""

class DumpRun:
    """
    One run of the dump analysis (the engine of analyze_dump and of python -m attention_plasticity):
    ap_analyze's own (include/attention_plasticity/run/analysis_run.hpp). Made from options, it has checked them, read the
    layout and planned the heads, those of its shard with `shard` (UsageError otherwise) and, when it
    writes, checked and locked the output folder (OutputError). parquet_rows(file) -> int: the rows a
    data.parquet announces, which the shard plan weighs (None: the footer's count, read with pyarrow).
    """

    @staticmethod
    def from_options(data_root: str, output_dir: object | None = None, config: object | None = None, options: dict = {}, parquet_rows: object | None = None) -> DumpRun:
        """
        A run configured as analyze_dump(data_root, output_dir, config=..., **options) is.
        """

    @staticmethod
    def from_memory(name: str, query_folders: Sequence[tuple[int, int]], key_folders: Sequence[tuple[int, int]], layout: tuple[int, int, int], options: dict = {}, head_options: attention_plasticity._core.head.HeadOptions | None = None, function: str = 'profile_model', examples_csv: str | None = None, capture_json: str | None = None) -> DumpRun:
        """
        A run over head folders held in memory (profile_model, profile_vectors): query_folders and
        key_folders list the (layer, head) folders present, layout is (num_layers, num_q_heads,
        num_k_heads); options are analyze_dump's keywords (set on head_options when given, else on
        ap_analyze's defaults); `name` stands for the dump in messages (the folders are
        NAME/l{LL}h{HH}q|k). run(reader, on_progress) reads every folder with reader(folder) -> dict of
        arrays, as a Parquet folder's; write_to(dir) writes the result set. examples_csv: the text of the
        dump's examples.csv (docs/method.md §1.1: the document of each example, the sampling unit of
        §8.3; None: each example is its own document); capture_json: the text of a JSON object recorded
        in run.json's "capture" (how the examples were chosen). A bad examples_csv or capture_json:
        InvalidArgumentError naming it, the line and the value.
        """

    @staticmethod
    def from_command_line(argv: Sequence[str], parquet_rows: object | None = None) -> DumpRun:
        """
        A run configured by ap_analyze's command line (argv[0] is the program); None for --help.
        """

    @property
    def data_root(self) -> str:
        """The dump's folder."""

    @property
    def output_dir(self) -> str | None:
        """Where the run writes its result set; None when it does not write."""

    @property
    def threads(self) -> int:
        """Worker threads of the run."""

    @property
    def layout(self) -> dict:
        """num_layers, num_q_heads, num_k_heads and where they come from."""

    @property
    def heads(self) -> list:
        """
        The heads to analyze (the shard's, with `shard`), (layer, q_head, k_head) in order.
        """

    @property
    def present_heads(self) -> int:
        """Query heads of the layout present in the dump (any selection)."""

    @property
    def layout_heads(self) -> int:
        """num_layers x num_q_heads."""

    @property
    def shard(self) -> str | None:
        """'I/N' when the run is shard I of N (docs/method.md §8.4), else None."""

    @property
    def plan_line(self) -> str:
        """The first line ap_analyze prints for this run."""

    @property
    def shard_line(self) -> str | None:
        """The line ap_analyze prints about the run's shard (None without one)."""

    def notes(self) -> list[str]:
        """Notes of the output folder's writer (leftovers of other runs, ...)."""

    @property
    def units(self) -> str:
        """
        The sampling unit's source (run.json "units"): 'documents' when the dump has examples.csv
        (or examples_csv was given), else 'examples' (each example its own document, §8.3).
        """

    @property
    def units_note(self) -> str | None:
        """
        The note of a run without examples.csv (docs/method.md §8.3), None with one.
        """

    @property
    def examples_csv(self) -> str | None:
        """
        The text of the run's examples.csv (docs/method.md §1.1), None without one: a comparison
        checks pairing from its document fingerprints (§8.6).
        """

    def run(self, parquet_reader: object, on_progress: object | None = None) -> None:
        """
        Analyzes the heads on the run's threads with the GIL released. parquet_reader(folder) -> dict of
        arrays (attention_plasticity.sniffed.read_sniffed_folder) reads Parquet folders;
        on_progress(done, failures) is called from this thread.
        """

    @property
    def analyzed(self) -> int:
        """Heads analyzed."""

    @property
    def failed(self) -> int:
        """Heads that failed."""

    @property
    def has_results(self) -> bool:
        """
        Whether there is a result set to write: some head analyzed, or a shard (whose set, with
        its shard.json, is written even without rows, so that ap_merge sees it finished).
        """

    def failures(self) -> list:
        """
        The failed heads: (index, layer, q_head, k_head, file, reason, line), in (layer, q_head) order.
        """

    def columns(self) -> dict:
        """
        {table name: {column: NumPy array}} of the analyzed heads (a run made by from_options), the
        numbers the CSVs are written from, in their columns' order and types.
        """

    def tables_text(self) -> dict:
        """
        {table name: the bytes of its CSV (header and rows)}, as ap_analyze writes them.
        """

    def commit(self) -> bool:
        """
        Writes the result set (as ap_analyze, with shard.json for a shard); False when there is none
        (has_results).
        """

    def finish(self) -> tuple[list[str], int]:
        """
        Writes the result set (commit) and returns the closing report every front end prints, as
        (lines, exit_status): each line goes after 'PROGRAM: ' on stderr (the counts, and why nothing
        was written when so); exit_status is ap_analyze's (0, or 1: a head failed, no set written).
        """

    def write_to(self, output_dir: str) -> bool:
        """
        Writes the result set into output_dir (a writer of its own); False when there is none.
        """

    def has_earlier_set(self) -> bool:
        """Whether the output folder held a result set before."""

    def unchanged_text(self, nothing_to_write: bool) -> str:
        """
        The output folder after a run that wrote no new set, as ap_analyze ends its message: with
        nothing_to_write (no head analyzed) 'the earlier results in DIR are left as they were' or 'nothing
        was written to DIR'; else (the set could not be written) 'the earlier results in DIR are
        unchanged' or 'no results were written to DIR'.
        """

    def close(self) -> None:
        """Releases the output folder (its lock and an unwritten temporary set)."""

    def head_results(self) -> list[attention_plasticity._core.head.HeadResult]:
        """
        The HeadResult of every analyzed head, in (layer, q_head) order (copies).
        """

    def counts_text(self) -> str:
        """'P of the L query heads of the layout present: ...'."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def set_blas_threads(n: int) -> None:
    """
    Sets the number of threads of OpenBLAS (Debian's, which the module links) for the calls made from
    Python. The module starts with one (docs/method.md §7.7), as every front end runs: more threads
    change the last bits of a GEMM's results. analyze_dump always runs one BLAS thread per worker.
    """

def get_blas_threads() -> int:
    """The number of threads of OpenBLAS."""

def blas_report(program: str = 'attention_plasticity') -> str:
    """
    The line every front end prints before its work (docs/method.md §7.7): 'PROGRAM: BLAS: <OpenBLAS's
    configuration>; kernels <core> (<who chose them>; CPU: ...), <n> OpenBLAS thread(s)', and with
    generic kernels on an AVX2 CPU a second line with the exact fix.
    """

def blas_kernels() -> dict:
    """
    The BLAS kernels of this process, as the module's kernel policy left them at import (docs/method.md
    §7.7): {'openblas', 'core' (in use), 'loaded_core' (OpenBLAS's own choice at load), 'config',
    'selected' (the policy selected 'core'), 'from_environment' (OPENBLAS_CORETYPE was set),
    'policy_off' (AP_OPENBLAS_POLICY=off), 'threads', 'generic' (kernels without AVX2 on an AVX2 CPU)}.
    """
