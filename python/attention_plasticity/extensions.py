"""The extensions of docs/method.md §8: distance maps (``distance_plasticity_map``,
``cell_pair_distances``, ...), the empirical AP (``pair_preferences``,
``empirical_pair_plasticity``, ...) and the intervals (``plasticity_standard_errors``,
``plasticity_interval``, ...). The pieces analyze_head runs, one by one, on NumPy arrays and torch
tensors; ``ap.extensions.X`` (the compiled module's part ``attention_plasticity._core.extensions``,
whose stub documents each).
"""

from ._core.extensions import *  # noqa: F401,F403  (every public name of the part, one home: the part)
