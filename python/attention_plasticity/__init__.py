"""attention_plasticity: whether attention heads choose keys by content or by position.

``import attention_plasticity as ap`` gives, at the top level, the entry points and the types
they take and return (``ap.__all__``):

- a dump (NPY or qk-sniffer Parquet) analyzed as ap_analyze does: ``analyze_dump(path, ...)``
  (``python -m attention_plasticity`` is its command line), returning a ``DumpResult``;
- a live model in memory: ``profile_model(model, tokenizer, texts)`` (``notebook_capture``), and
  states other tools captured: ``profile_vectors`` with ``from_activation_cache``
  (TransformerLens) or ``from_nnsight_inputs`` (nnsight); they return a ``ModelProfile``;
- one head: ``analyze_head(Tokens(...), Tokens(...), HeadId(...), HeadOptions(...))`` returning a
  ``HeadResult`` (``HeadMetrics``, ``BucketProfile``, ``CellPlasticity``,
  ``DistancePlasticityBin``, ``StageTimings``); every result type prints its numbers and has
  ``to_dict()``;
- result sets (``ResultSet``: what analyze_dump and profile_model return, ``result_set`` of
  HeadResults, ``read_results(folder)``): ``tables(results)`` as the DataFrames of
  docs/method.md §3 (``result_schema()``: their columns; ``nan_reasons``), ``write(folder)``,
  compared head by head with significance (§8.6) by ``compare_runs`` (as ``ap_compare``,
  a ``CompareResult``); ``analysis_options()`` is the options preset of analyze_dump and
  profile_model;
- during training: ``PlasticityMonitor(texts, tokenizer, output_dir, every=N)`` and
  ``monitor.observe(model, step)`` (paired observations, the trajectory, the changes;
  ``ap.integrations.PlasticityCallback`` for transformers' Trainer);
- an explorable page: ``report(obj, path)`` writes one self-contained HTML file of a result set,
  a comparison or a monitor's folder (``python -m attention_plasticity report INPUT... -o F``);
- the companion measures (docs/method.md §8.5) ``planar_rotation``, ``pca_roles``;
- the BLAS threads (§7.7): ``set_blas_threads``, ``get_blas_threads``, ``blas_report``;
- the errors: ``InvalidArgumentError``, ``DomainError``, ``UsageError``, ``OutputError``,
  ``CaptureError``, and the warnings ``HeadFailedWarning``, ``NaNColumnWarning``.

The pieces of the method, on NumPy arrays and torch tensors (read in place, at C++ speed; see
``help(attention_plasticity._core)`` for how arrays are taken, the errors and threads), are in
submodules: ``ap.steps`` (§2.1-2.15 and the statistics of §7: ``orientation_signs``,
``fit_linear``, ``householder_to_e1``, ``query_buckets``, ``cell_key_pairs``,
``plasticity_aggregates``, ...), ``ap.kernel`` (§4-§6: ``pair_plasticity``,
``key_differences``, ``sample_key_pairs``, ``Rng``, ...), ``ap.extensions`` (§8: distance maps,
empirical AP, intervals). ``ap.plots``: the figures of the tables (matplotlib), loaded on first
use; ``ap.capture``: the attention-registry hook of transformers models; ``ap.qk_sniffer``:
qk-sniffer's capture options, plans and Parquet sinks; ``ap.sniffed``: the Parquet reader.

Every name the top level had before it was curated (``ap.pair_plasticity``, ``ap.DumpRun``,
...) still resolves, to the same object, from its home (``__getattr__`` below), with a
DeprecationWarning naming its path (``attention_plasticity.kernel.pair_plasticity``,
``attention_plasticity._core.dump.DumpRun``); it is not listed in ``dir(ap)`` or ``__all__``.
"""

import os as _os
import sys as _sys

# `python -m attention_plasticity` (sys.argv[0] is "-m" while Python imports the package to run
# it): a run on N threads uses N CPUs, so NumPy's own OpenBLAS (another copy than the module's,
# docs/method.md §7.7) gets no thread pool either, whose threads would spin beside the workers
# after any NumPy BLAS call. Set before NumPy loads; a value of the user's is kept.
if _sys.argv[:1] == ["-m"]:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The compiled library (see the stubs in _core/): its errors, its version (compiled into the
# module from CMakeLists.txt's project(VERSION), the one home of the version; the wheel's metadata
# reads the same line: ap_analyze --version's) and the entry points and result types of its parts;
# the rest of each part is reached through its submodule (ap.steps, ap.kernel, ap.extensions) or,
# for the engine's internals, _core (DumpRun, analyze_options, result_tables, ...).
from ._core import DomainError, InvalidArgumentError, OutputError, UsageError, __version__
from ._core.companion import PcaRoles, PlanarRotation, pca_roles, planar_rotation
from ._core.dump import blas_report, get_blas_threads, set_blas_threads
from ._core.extensions import DistancePlasticityBin
from ._core.head import BucketProfile, HeadMetrics, HeadOptions, HeadResult, StageTimings, Tokens, analyze_head
from ._core.steps import CellPlasticity, HeadId
from ._core.tables import result_schema
from .capture import CaptureError
from .profile import ModelProfile, notebook_capture, profile_model, profile_vectors
from .interop import from_activation_cache, from_nnsight_inputs
from .dump import DumpResult, HeadError, HeadFailedWarning, analyze_dump
from .results import NaNColumnWarning, nan_reasons, tables
from .result_set import ResultSet, analysis_options, read_results, result_set
from .compare import CompareResult, compare_runs
from .monitor import PlasticityMonitor
from .report import report

__all__ = [
    "__version__",
    # entry points
    "analyze_dump", "analyze_head", "profile_model", "profile_vectors", "notebook_capture",
    "from_activation_cache", "from_nnsight_inputs", "compare_runs", "read_results", "result_set", "tables", "PlasticityMonitor",
    "report",
    "result_schema", "nan_reasons", "analysis_options", "planar_rotation", "pca_roles",
    "set_blas_threads", "get_blas_threads", "blas_report",
    # what they take and return
    "Tokens", "HeadId", "HeadOptions", "HeadResult", "HeadMetrics", "BucketProfile", "CellPlasticity",
    "DistancePlasticityBin", "StageTimings", "PlanarRotation", "PcaRoles",
    "ResultSet", "DumpResult", "ModelProfile", "CompareResult", "HeadError",
    # errors and warnings
    "DomainError", "InvalidArgumentError", "OutputError", "UsageError", "CaptureError",
    "HeadFailedWarning", "NaNColumnWarning",
]

# The package's public submodules (in dir(ap), not in __all__: `from attention_plasticity import *`
# must not import matplotlib).
_SUBMODULES = ("steps", "kernel", "extensions", "plots", "capture", "qk_sniffer", "sniffed", "integrations")

# Where the names the top level had before it was curated live now: every public name of these
# parts of the compiled module (the top level star-imported them all), and the path each is to be
# reached by: the public submodules (ap.kernel, ap.steps, ap.extensions) for the method's pieces,
# the compiled module's part (attention_plasticity._core.dump, ...) for the engine's internals.
_FORMER_HOMES = (("kernel", "kernel"), ("steps", "steps"), ("extensions", "extensions"),
                 ("head", "_core.head"), ("dump", "_core.dump"), ("companion", "_core.companion"),
                 ("tables", "_core.tables"))
# name -> (object, its path): the search of a former name is paid once.
_former = {}


def _former_name(name):
    """(object, path) of a former top-level name, or None."""
    if name not in _former:
        for part, path in _FORMER_HOMES:
            home = vars(getattr(_core, part))
            if name in home:
                _former[name] = (home[name], f"{__name__}.{path}.{name}")
                break
        else:
            return None
    return _former[name]


def __getattr__(name):
    # PEP 562: called only for a name the module does not hold. A submodule is imported on first
    # use (ap.plots: `import attention_plasticity` does not import matplotlib). A former top-level
    # name (tests/python/former_top_level_names.txt, not curated) still resolves, to the same
    # object, with a DeprecationWarning naming its path, at every access: it is not cached in the
    # module's namespace (which would silence every access after the first, in any caller), and
    # Python's warning filters decide what is shown (by default: once per place of a caller's
    # __main__ code; every time under pytest's or -W error::DeprecationWarning).
    import importlib
    import importlib.util
    if not name.startswith("_"):
        former = _former_name(name)
        if former is not None:
            value, path = former
            # `from attention_plasticity import NAME` asks twice: importlib's hasattr check of the
            # fromlist, then the import statement itself (whose line the warning names): once.
            if _sys._getframe(1).f_globals.get("__name__") != "importlib._bootstrap":
                import warnings
                warnings.warn(f"{__name__}.{name} is deprecated; use {path}", DeprecationWarning, stacklevel=2)
            return value
        if importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(__all__ + list(_SUBMODULES))
