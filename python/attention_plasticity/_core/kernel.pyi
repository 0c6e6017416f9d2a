"""
The kernel of docs/method.md §4 (pair plasticity, its moments), the key-pair sampler (§5), the
random streams (§6) and the normal distribution.
"""

from typing import Annotated

import numpy
import numpy.typing
from numpy.typing import NDArray

import attention_plasticity._core.steps


def normal_cdf(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]:
    """
    Phi(z) = P(Z <= z) of the standard normal distribution, through erfc: the lower tail keeps its
    relative accuracy down to z = -37 (docs/method.md §4.7). A number gives a float, an array
    an array of float64 of the same shape.
    """

def normal_sf(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]:
    """
    1 - Phi(z) = P(Z > z), accurate in the upper tail. Elementwise, as normal_cdf.
    """

def normal_cdf_fast(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]:
    """
    Phi(z) within about 2e-15 absolute: a cubic Hermite spline on [-8.5, 8.5], erfc outside
    (the Phi of the KS statistic, docs/method.md §7.4). Elementwise, as normal_cdf.
    """

def plasticity_from_z(z: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]:
    """
    4 p (1 - p) with p = Phi(z): the plasticity of a pair whose score difference has z = m / sqrt(v)
    (docs/method.md §4.2), from the smaller tail so that it keeps a few ulp of relative accuracy
    up to |z| = 37; +-inf give 0. Dimensionless, in [0, 1]. Elementwise, as normal_cdf.
    """

class Rng:
    """
    xoshiro256** seeded through splitmix64 (docs/method.md §6.1): the generator of every random
    stream of the method; a seed gives the same numbers on every platform. Functions that draw
    from it advance it (and lock it: one thread at a time).
    """

    def __init__(self, seed: int = 0) -> None:
        """rng(seed)."""

    def __call__(self) -> int:
        """The next 64-bit output."""

    def below(self, bound: int) -> int:
        """
        Uniform integer in [0, bound), without modulo bias (Lemire; docs/method.md §6.2).
        """

    def uniform(self) -> float:
        """Uniform float in [0, 1) with 53 random bits (docs/method.md §6.2)."""

class NormalGenerator:
    """
    Standard normal variates from Rng(seed) by Box-Muller, in pairs (cos, then sin).
    """

    def __init__(self, seed: int = 0) -> None:
        """Box-Muller over Rng(seed)."""

    def __call__(self) -> float:
        """The next N(0, 1) variate."""

    def uniform(self) -> float:
        """A uniform float in [0, 1) from the underlying stream."""

    def below(self, bound: int) -> int:
        """A uniform integer in [0, bound) from the underlying stream."""

def sample_without_replacement(n: int, k: int, rng: Rng) -> NDArray[numpy.int64]:
    """
    k of the indices 0..n-1 uniformly without replacement, by a partial Fisher-Yates shuffle
    (docs/method.md §6.2), in draw order; k >= n gives 0..n-1 in order without drawing.
    Returns int64 [min(k, n)].
    """

class KeyPairs:
    """
    Sampled key pairs (docs/method.md §5): pair i is (example[i], first[i], second[i]); first
    and second are positions within the example (sample_key_pairs) or rows of the caller's key
    table (sample_bucket_key_pairs, cell_key_pairs). int64 arrays [N], read-only views.
    """

    def __init__(self, example: numpy.typing.ArrayLike, first: numpy.typing.ArrayLike, second: numpy.typing.ArrayLike) -> None:
        """Pairs from three integer arrays of equal length (copied)."""

    @property
    def example(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """The example of each pair, int64 [N]."""

    @property
    def first(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """k1 of each pair, int64 [N]."""

    @property
    def second(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """k2 of each pair, int64 [N]."""

    def __len__(self) -> int:
        """N, the number of pairs."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def pair_window(length: int, max_rel_dist: float) -> int:
    """
    The sampler's window half-width Delta = max(1, floor(max_rel_dist * length)) (docs/method.md §5.1),
    in keys.
    """

def sample_key_pairs(lengths: numpy.typing.ArrayLike, num_pairs: int, max_rel_dist: float, rng: Rng) -> KeyPairs:
    """
    The key-pair sampler (docs/method.md §5.1) over examples of the given lengths (int, [B]):
    num_pairs pairs (example b with probability L_b / T, a uniform anchor, a neighbour within
    Delta = max(1, floor(max_rel_dist L_b)), a fair coin for the order), drawn from rng in the
    order of §5.1. first/second are positions within the example.
    Raises DomainError when no example has 2 keys, InvalidArgumentError for a negative length
    or max_rel_dist.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def sample_grouped_key_pairs(groups: attention_plasticity._core.steps.ExampleGroups, num_pairs: int, max_rel_dist: float, rng: Rng) -> KeyPairs:
    """
    The sampler (docs/method.md §5) over grouped examples (ExampleGroups, e.g. KeyBucket.examples):
    first/second are the groups' rows, example the example's index in groups. Raises DomainError when
    no example has 2 keys.
    """

def sample_bucket_key_pairs(positions: numpy.typing.ArrayLike, example_ids: numpy.typing.ArrayLike, num_pairs: int, max_rel_dist: float, rng: Rng) -> KeyPairs:
    """
    The per-bucket form of the sampler (docs/method.md §2.12, §5.2): the keys of one bucket, given
    by position and example id (int, [n] each), grouped into examples (increasing id, each by
    position, ties in row order); returns pairs of row indices into these arrays.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

class PairMoments:
    """
    Per-pair projected moments m = w . mu and v = w Sigma w^T (float64 [N] each; docs/method.md
    §4.4). After the rescaling of §4.6 (extreme magnitudes) they are a scaled pair with the
    right ratio m / sqrt(v), not the moments themselves.
    """

    def __init__(self, mean: numpy.typing.ArrayLike, variance: numpy.typing.ArrayLike) -> None:
        """Moments from two float arrays [N] (copied as float64)."""

    @property
    def mean(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """m per pair, float64 [N] (units of w times units of the query mean)."""

    @property
    def variance(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """v per pair, float64 [N] (squared units of m)."""

    def __len__(self) -> int:
        """N, the number of pairs."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def pair_plasticity(differences: numpy.typing.ArrayLike, mean: numpy.typing.ArrayLike, covariance: numpy.typing.ArrayLike, dtype: object = None, result_dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    Pair plasticity PP = 4 p (1 - p) of each key pair (docs/method.md §4.1-4.2, batched form §4.4).

    For the key differences w = k1 - k2 (the rows of `differences`, N x d, in the units of the key
    vectors) and a Gaussian query model q ~ N(mean, covariance) (mean: [d], in query units;
    covariance: d x d, in squared query units), the event 'the query scores k1 above k2' has
    probability p = Phi(m / sqrt(v)) with m = w . mean and v = w covariance w^T (p = 1, 0, 1/2
    when v <= 0 and m >, <, = 0). PP is dimensionless, in [0, 1]: 1 when the choice between the
    two keys is a coin flip over queries (content-driven), 0 when one key always wins. v comes
    from GEMMs over blocks of 256 rows: the N x N matrix is never formed. Exact at any
    magnitude (power-of-two rescaling, §4.6).

    dtype: the working type of the GEMM ('float32' or 'float64'; None: the dtype of
    `differences`); sums accumulate in float64. result_dtype: the dtype of the result (None:
    the working type). Returns an array [N].
    Raises InvalidArgumentError for shapes (mean not [d], covariance not d x d), DomainError for
    a non-finite value or a negative variance on the covariance's diagonal.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def pair_moments_full(differences: numpy.typing.ArrayLike, mean: numpy.typing.ArrayLike, covariance: numpy.typing.ArrayLike, dtype: object | None = None) -> PairMoments:
    """
    The projected moments m = W mean and v = diag(W covariance W^T) of docs/method.md §4.4 for key
    differences W (N x d) and a full Gaussian (mean [d], covariance d x d). A covariance whose
    first component is uncorrelated with the others takes the structured path (§4.5). dtype as
    pair_plasticity. Returns PairMoments.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def structured_pair_moments(differences: numpy.typing.ArrayLike, position_mean: float, position_variance: float, semantic_mean: numpy.typing.ArrayLike, semantic_cov: numpy.typing.ArrayLike, dtype: object | None = None) -> PairMoments:
    """
    The moments of the structured query model of docs/method.md §4.5 (used by the pipeline,
    §2.13): mean [position_mean, semantic_mean] and covariance blockdiag(position_variance,
    semantic_cov), applied to W (N x d) whose column 0 is the positional component:
    m = w0 position_mean + w[1:] . semantic_mean, v = w0^2 position_variance + w[1:] semantic_cov
    w[1:]^T. semantic_mean: [d - 1]; semantic_cov: (d - 1) x (d - 1). No d x d matrix is built.
    dtype as pair_plasticity. Returns PairMoments.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def plasticity_from_moments(moments: PairMoments, result_dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    PP = 4 p (1 - p) per pair with p = Phi(m / sqrt(v)) (the degenerate rule of docs/method.md §4.1
    for v <= 0), from PairMoments. result_dtype: 'float32' or 'float64' (None: float64).
    """

def pair_plasticity_from_moments(m: float | numpy.typing.ArrayLike, v: float | numpy.typing.ArrayLike) -> float | numpy.typing.NDArray[numpy.float64]:
    """
    Plasticity of one pair from m = w . mu and v = w Sigma w^T (docs/method.md §4.1-4.2): 4 p (1 - p)
    with p = Phi(m / sqrt(v)) for v > 0, else 1 when m = 0 and 0 otherwise. Numbers give a float;
    arrays of one shape give an array of float64.
    """

def mean_plasticity(pair_values: numpy.typing.ArrayLike) -> float:
    """
    Mean of pair plasticities (float64 accumulation); NaN when empty (docs/method.md §4.3).

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def head_plasticity(differences: numpy.typing.ArrayLike, mean: numpy.typing.ArrayLike, covariance: numpy.typing.ArrayLike, dtype: object | None = None) -> float:
    """
    AP = the mean of pair_plasticity over all the pairs (docs/method.md §4.3): dimensionless, in
    [0, 1], NaN for no pairs. Arguments and errors as pair_plasticity.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """

def key_differences(keys: numpy.typing.ArrayLike, first: numpy.typing.ArrayLike, second: numpy.typing.ArrayLike, dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    W = keys[first] - keys[second] for index pairs into the rows of keys (n x d): N x d, in the
    units of the keys (docs/method.md §2.12). dtype: of the result (None: the dtype of keys).
    Raises InvalidArgumentError for an index out of range, DomainError for a non-finite key or a
    difference that overflows the result type.

    Arrays are read in place when C-contiguous float32/float64 (NumPy or torch, CPU); other layouts or dtypes are converted once (see the module docstring).
    """
