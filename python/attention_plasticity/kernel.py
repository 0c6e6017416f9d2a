"""The kernel (docs/method.md §4), the key-pair sampler (§5) and the random streams (§6):
``pair_plasticity``, ``head_plasticity``, ``key_differences``, ``structured_pair_moments``,
``sample_key_pairs``, ``Rng``, ... The pieces analyze_head runs, one by one, on NumPy arrays and
torch tensors; ``ap.kernel.X`` (the compiled module's part ``attention_plasticity._core.kernel``,
whose stub documents each).
"""

from ._core.kernel import *  # noqa: F401,F403  (every public name of the part, one home: the part)
