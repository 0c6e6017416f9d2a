"""attention_plasticity: whether attention heads choose keys by content or by position.

``import attention_plasticity as ap`` gives the C++ library on NumPy arrays and torch tensors
(read in place, at C++ speed; see ``help(attention_plasticity._core)`` for how arrays are
taken, the errors and threads) and the dump analysis of ap_analyze:

- every step of the method (docs/method.md §2.1-2.15): ``orientation_signs``,
  ``subsample_rows``, ``fit_linear``, ``scalar_position_predictability``,
  ``householder_to_e1`` / ``Householder.apply``, ``fit_position_component``,
  ``standardized_normality``, ``noise_normality``, ``component_weights``, ``query_buckets``,
  ``bucket_query_models``, ``full_gaussian``, ``group_key_buckets``,
  ``eligible_key_buckets``, ``cell_key_pairs``, ``cell_pair_seed`` / ``pair_sampler_seed`` /
  ``seeds_of_head``, ``query_bucket_plasticity``, ``plasticity_aggregates``;
- the extensions (docs/method.md §8): distance maps ``cell_pair_distances``,
  ``distance_plasticity_map``, ``distance_map_cell_pairs``, ``log_distance_bin``; the empirical
  AP ``pair_preferences``, ``empirical_pair_plasticity``, ``query_bucket_empirical_plasticity``,
  ``empirical_plasticity_variance``; the intervals ``bucket_plasticity_sensitivity``,
  ``pair_sampling_variance``, ``plasticity_standard_errors``, ``plasticity_interval``;
- the per-head analysis ``analyze_head(Tokens(...), Tokens(...), HeadId(...), HeadOptions(...))``;
- the kernel (§4): ``pair_plasticity``, ``head_plasticity``, ``pair_moments_full``,
  ``structured_pair_moments``, ``plasticity_from_moments``, ``key_differences``; the sampler
  (§5): ``sample_key_pairs``, ``sample_bucket_key_pairs``; the streams (§6): ``Rng``;
  the statistics (§7): ``sample_moments``, ``ks_test_normal``, ``kolmogorov_sf``, ...;
- ``tables(results)``: a list of HeadResult (or a DumpResult) as the DataFrames of
  docs/method.md §3, one call; every result type prints its numbers and has ``to_dict()``;
- ``analyze_dump(path, ...)``: a dump (NPY or qk-sniffer Parquet) analyzed as ap_analyze
  does, the tables returned as DataFrames and optionally written as the same CSVs;
  ``python -m attention_plasticity`` is its command line;
- the companion measures (docs/method.md §8.5) ``planar_rotation``, ``pca_roles``; result sets
  compared head by head with significance (§8.6): ``compare_runs`` (as ``ap_compare``);
- ``attention_plasticity.capture``: torch forward hooks that capture a transformers model's
  per-head queries and keys in memory; ``attention_plasticity.sniffed``: the Parquet reader;
- ``ap.plots``: the figures of the tables (matplotlib), loaded on first use;
- a live model in memory: ``profile_model(model, tokenizer, texts)``, and states other tools
  captured: ``profile_vectors`` with ``from_activation_cache`` (TransformerLens) or
  ``from_nnsight_inputs`` (nnsight); they return a ``ModelProfile``;
- result sets (``ResultSet``: what analyze_dump and profile_model return, ``result_set`` of
  HeadResults, ``read_results(folder)``): tables, ``write(folder)``, compared by ``compare_runs``;
  ``analysis_options()`` is the options preset of analyze_dump and profile_model.
"""

import os as _os
import sys as _sys

# `python -m attention_plasticity` (sys.argv[0] is "-m" while Python imports the package to run
# it): a run on N threads uses N CPUs, so NumPy's own OpenBLAS (another copy than the module's,
# docs/method.md §7.7) gets no thread pool either, whose threads would spin beside the workers
# after any NumPy BLAS call. Set before NumPy loads; a value of the user's is kept.
if _sys.argv[:1] == ["-m"]:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The compiled library (see the stubs in _core/): its errors, and the public names of each of its
# parts, one submodule per topic (attention_plasticity._core.kernel, ...).
from ._core import (DomainError, InvalidArgumentError, OutputError,  # noqa: F401
                    UsageError)
# The project's version, compiled into the module from CMakeLists.txt's project(VERSION) (the one
# home of the version; the wheel's metadata reads the same line): ap_analyze --version's.
from ._core import __version__  # noqa: F401
from ._core.kernel import *  # noqa: F401,F403  (§4-§6: the kernel, the sampler, the streams)
from ._core.steps import *  # noqa: F401,F403  (§2 and §7: the steps and their statistics)
from ._core.extensions import *  # noqa: F401,F403  (§8: distance maps, empirical AP, intervals)
from ._core.head import *  # noqa: F401,F403  (Tokens, HeadOptions, analyze_head, HeadResult)
from ._core.dump import *  # noqa: F401,F403  (DumpRun, the options of ap_analyze, BLAS threads)
from ._core.companion import *  # noqa: F401,F403  (§8.5-8.6: planar rotation, PCA roles)
from ._core.tables import *  # noqa: F401,F403  (§3: the tables' files, schema and columns)
from .capture import CaptureError  # noqa: F401
from .profile import ModelProfile, notebook_capture, profile_model, profile_vectors  # noqa: F401
from .interop import from_activation_cache, from_nnsight_inputs  # noqa: F401
from .dump import (DumpResult, HeadError, HeadFailedWarning,  # noqa: F401
                   analyze_dump)
from .results import NaNColumnWarning, nan_reasons, tables  # noqa: F401
from .result_set import ResultSet, analysis_options, read_results, result_set  # noqa: F401
from .compare import CompareResult, compare_runs  # noqa: F401


def __getattr__(name):
    # ap.plots on first use (PEP 562), so that `import attention_plasticity` does not import matplotlib.
    if name == "plots":
        import importlib
        return importlib.import_module(".plots", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
