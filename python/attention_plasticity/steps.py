"""The steps of the method (docs/method.md §2.1-2.15) and the statistics of §7 they use:
``orientation_signs``, ``subsample_rows``, ``fit_linear``, ``householder_to_e1``,
``query_buckets``, ``cell_key_pairs``, ``plasticity_aggregates``, ``ks_test_normal``, ... The
pieces analyze_head runs, one by one, on NumPy arrays and torch tensors; ``ap.steps.X`` (the
compiled module's part ``attention_plasticity._core.steps``, whose stub documents each).
"""

from ._core.steps import *  # noqa: F401,F403  (every public name of the part, one home: the part)
