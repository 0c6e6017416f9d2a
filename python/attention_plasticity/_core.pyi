"""
attention_plasticity: attention heads choosing keys by content or by position.

The compiled core of the package: every step of the method (docs/method.md §2), the
pair-plasticity kernel (§4), the key-pair sampler (§5), the random streams (§6), the
statistics (§7), the extensions (§8: distance maps, the empirical AP, standard errors and
intervals) and the per-head analysis, bound as thin wrappers over the C++ library (the
numbers are the C++ library's, bit for bit), and the dump analysis of ap_analyze.

Array arguments
---------------
Float arrays: a C-contiguous float32 or float64 array in CPU memory (NumPy, a torch tensor,
anything with __dlpack__ or the buffer protocol) is read in place, never copied. Any other
array is converted once, to C order: float16, bfloat16 and non-contiguous float32 to float32,
every other dtype (integers, non-contiguous float64, ...) to float64. A torch tensor that
requires grad is read through .detach() (no copy); lists and scalars go through numpy.asarray.
Integer columns (positions, buckets, example ids, indices): a C-contiguous int64 array is read
in place; any other integer dtype (int32, ...) is converted once to int64.

Results are NumPy arrays (owning their data, or read-only views into the result object that
holds them) and small result classes with read-only properties; tables are pandas DataFrames
with the columns of the CSVs of docs/method.md §3.

Errors
------
The library's std::invalid_argument (shapes, sizes, options) is InvalidArgumentError and its
std::domain_error (NaN/Inf, values out of domain) DomainError, both subclasses of ValueError,
with the library's message (the function called, the argument, the offending value). The
options of analyze_dump raise UsageError (a subclass of InvalidArgumentError) and an output
folder that cannot be used OutputError (a subclass of OSError). An argument that is not an
array at all is a TypeError.

Threads
-------
Every call that computes releases the GIL. BLAS (Debian's OpenBLAS) runs with the number of
threads set_blas_threads() gives it; analyze_dump runs heads on its own threads with one BLAS
thread each.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, overload

import numpy
import numpy.typing
from numpy.typing import NDArray

from attention_plasticity import (
    DomainError as DomainError,
    InvalidArgumentError as InvalidArgumentError,
    OutputError as OutputError,
    UsageError as UsageError
)


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

def sample_grouped_key_pairs(groups: ExampleGroups, num_pairs: int, max_rel_dist: float, rng: Rng) -> KeyPairs:
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

def orientation_signs(keys: numpy.typing.ArrayLike, key_buckets: numpy.typing.ArrayLike) -> NDArray[numpy.float64]:
    """
    The orientation of a head (docs/method.md §2.1): s_d = -1 when the mean over key buckets of the
    per-bucket mean of key component d is negative, else +1, from all the keys (n x d) and their
    bucket ids (int, [n]). Every query and key is then multiplied by s (X * s). Returns float64 [d].

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def subsample_rows(n: int, max_rows: int, seed: int) -> NDArray[numpy.int64]:
    """
    The rows kept by subsampling (docs/method.md §2.2), increasing: all n when n <= max_rows, otherwise
    max_rows of them drawn uniformly without replacement with Rng(seed) (a partial Fisher-Yates of
    0..n-1). The seeds of a head: seeds_of_head. Returns int64 [min(n, max_rows)].
    """

class LinearFit:
    """
    OLS of each column of X on t, X_d = alpha_d + beta_d t (docs/method.md §2.3).
    """

    @property
    def alpha(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """Intercepts, float64 [d] (vector units)."""

    @property
    def beta(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """Slopes, float64 [d] (vector units per token)."""

    @property
    def r2(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """R2 per column, float64 [d], in [0, 1]; 0 for a constant column."""

    @property
    def r2_mean(self) -> float:
        """The mean of r2 (q_R2_pos); NaN when d = 0."""

    @property
    def beta_norm(self) -> float:
        """||beta|| (q_beta_norm), vector units per token."""

    @property
    def regressor_varies(self) -> bool:
        """Whether t has any variance."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def fit_linear(t: numpy.typing.ArrayLike, X: numpy.typing.ArrayLike) -> LinearFit:
    """
    The position regression of docs/method.md §2.3: OLS of each column of X (n x d) on t (n),
    alpha, beta, per-column R2 = S_tx^2 / (S_tt S_xx) in [0, 1] (0 for a constant column and when t
    has no variance) and their mean. Returns LinearFit.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class ScalarPredictability:
    """
    How well s = X beta / ||beta|| predicts y = log2(t + 1) (docs/method.md §2.4).
    """

    @property
    def r2(self) -> float:
        """R2 of the OLS y ~ a + b s (q_R2_scalar), in [0, 1]."""

    @property
    def mae_baseline(self) -> float:
        """Mean |y - mean y| (q_mae_baseline), log2-position units."""

    @property
    def mae_projection(self) -> float:
        """Mean |y - a - b s| (q_mae_proj), log2-position units."""

    @property
    def mae_ratio(self) -> float:
        """mae_projection / mae_baseline (q_mae_ratio); 1 when the baseline is 0."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def scalar_position_predictability(t: numpy.typing.ArrayLike, X: numpy.typing.ArrayLike, beta: numpy.typing.ArrayLike) -> ScalarPredictability:
    """
    docs/method.md §2.4: y = log2(t + 1), s = X beta / ||beta||, OLS y ~ a + b s; R2 and mean absolute
    errors. beta = 0: R2 0 and both errors the baseline. X: n x d, t: [n], beta: [d]. Returns
    ScalarPredictability.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class PositionComponentFit:
    """
    The positional component of the rotated queries (docs/method.md §2.6): OLS of component 0 on t and
    the variance of its residual.
    """

    def __init__(self, alpha: float, beta: float, residual_variance: float, residual: object | None = None) -> None:
        """
        A fit given by its numbers (e.g. for bucket_query_models); residual is copied.
        """

    @property
    def alpha(self) -> float:
        """alpha_rot_0 (vector units)."""

    @property
    def beta(self) -> float:
        """beta_rot_0 (vector units per token)."""

    @property
    def residual_variance(self) -> float:
        """sigma2 = var(residual, ddof=1) (squared vector units)."""

    @property
    def residual(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """x_rot[:, 0] - (alpha + beta t), float64 [n] (read by §2.7)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def fit_position_component(t: numpy.typing.ArrayLike, X_rot: numpy.typing.ArrayLike) -> PositionComponentFit:
    """
    docs/method.md §2.6: alpha_rot_0 and beta_rot_0 of component 0 of the rotated queries X_rot
    (n x d; only column 0 is read) on their positions t, sigma2 = var(residual, ddof=1) and the
    residual. n >= 2. Returns PositionComponentFit.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def component_weights(r2: numpy.typing.ArrayLike) -> NDArray[numpy.float64]:
    """
    Component weights (docs/method.md §2.9): w_d = max(R2_d, 0) / sum_k max(R2_k, 0), uniform 1/d when
    the sum is 0, from the per-component R2 of the position regression. Returns float64 [d],
    summing to 1.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

householder_tolerance: float = 1e-12

class Householder:
    """
    The reflection H = I - 2 v v^T of docs/method.md §2.5 that maps beta_hat = beta / ||beta|| to e1:
    symmetric, orthogonal, H^2 = I. Made by householder_to_e1, applied by apply (X H in O(nd)).
    """

    @property
    def v(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """The unit vector v, float64 [d]; empty when H is the identity."""

    @property
    def dimension(self) -> int:
        """d."""

    def is_identity(self) -> bool:
        """Whether H = I (||beta|| or ||beta_hat - e1|| < 1e-12)."""

    def matrix(self) -> NDArray[numpy.float64]:
        """
        The explicit d x d matrix, float64 (for inspection; apply never forms it).
        """

    def apply(self, X: numpy.typing.ArrayLike, dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
        """
        X H for an n x d array (rows are vectors), computed as X - 2 (X v) v^T in float64
        (docs/method.md §2.5). Returns a new array of the given dtype (None: the dtype of X).

        Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def householder_to_e1(beta: numpy.typing.ArrayLike) -> Householder:
    """
    H with H beta_hat = e1 (docs/method.md §2.5): v = (beta_hat - e1) / ||beta_hat - e1||, the identity
    when ||beta|| < 1e-12 or ||beta_hat - e1|| < 1e-12. beta: [d]. Returns Householder.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class MomentsResult:
    """Moments of a sample (docs/method.md §7.2-7.3)."""

    @property
    def mean(self) -> float:
        """The sample mean."""

    @property
    def std_ddof1(self) -> float:
        """ddof=1 standard deviation; NaN for n = 1."""

    @property
    def skewness(self) -> float:
        """scipy.stats.skew(x, bias=False); 0 under zero variance."""

    @property
    def excess_kurtosis(self) -> float:
        """
        scipy.stats.kurtosis(x, fisher=True, bias=False); 0 under zero variance.
        """

    @property
    def zero_variance(self) -> bool:
        """SciPy's 'all values equal' rule, m2 <= (1e-15 mean)^2 (§7.3)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def sample_moments(x: numpy.typing.ArrayLike) -> MomentsResult:
    """
    Mean, ddof=1 std, skewness and excess kurtosis of the 1-D sample x, accumulated in float64
    (docs/method.md §7.2). Returns MomentsResult.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def skewness(x: numpy.typing.ArrayLike) -> float:
    """
    scipy.stats.skew(x, bias=False) (G1 of docs/method.md §7.2); 0 where SciPy gives NaN (all values
    equal).

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def excess_kurtosis(x: numpy.typing.ArrayLike) -> float:
    """
    scipy.stats.kurtosis(x, fisher=True, bias=False) (G2 of docs/method.md §7.2); 0 where SciPy gives
    NaN.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def kolmogorov_sf(n: int, d: float) -> float:
    """
    scipy.stats.kstwo.sf(d, n) = P(D_n >= d) of the two-sided one-sample KS statistic (docs/method.md
    §7.4, with its two documented O(1) shortcuts, within 2e-8 of SciPy).
    """

def kolmogorov_cdf(n: int, d: float) -> float:
    """scipy.stats.kstwo.cdf(d, n) = P(D_n <= d) (docs/method.md §7.4)."""

def kolmogorov_sf_exact(n: int, d: float) -> float:
    """
    kolmogorov_sf without its shortcuts: SciPy's algorithm in every branch (O(n) for large n).
    """

def smirnov_sf(n: int, d: float) -> float:
    """
    scipy.special.smirnov(n, d) = P(D_n^+ >= d) of the one-sided statistic.
    """

class KsResult:
    """A one-sample KS test against N(0, 1)."""

    @property
    def statistic(self) -> float:
        """D_n = sup |F_n - Phi|."""

    @property
    def p_value(self) -> float:
        """P(D_n >= statistic) under H0."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def ks_test_normal(x: numpy.typing.ArrayLike) -> KsResult:
    """
    scipy.stats.kstest(x, 'norm') (method 'exact': kstwo.sf(D, n)) for the 1-D sample x
    (docs/method.md §7.4). Returns KsResult.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class ResidualNormality:
    """The first-component summary of docs/method.md §2.7."""

    @property
    def skewness(self) -> float:
        """q_resid0_skew."""

    @property
    def excess_kurtosis(self) -> float:
        """q_resid0_kurt."""

    @property
    def ks_p_value(self) -> float:
        """q_resid0_ks_p."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def standardized_normality(x: numpy.typing.ArrayLike) -> ResidualNormality:
    """
    docs/method.md §2.7 for the 1-D sample x: standardized with its mean and ddof=1 std, then skewness,
    excess kurtosis and the KS p-value against N(0, 1); (0, 0, 1) under zero variance or n < 2.
    Returns ResidualNormality.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class NoiseNormality:
    """The noise-subspace summary of docs/method.md §2.8."""

    @property
    def median_abs_skewness(self) -> float:
        """q_noise_med_abs_skew."""

    @property
    def median_abs_kurtosis(self) -> float:
        """q_noise_med_abs_kurt."""

    @property
    def median_ks_p_value(self) -> float:
        """q_noise_med_ks_p."""

    @property
    def fraction_ks_p_below_alpha(self) -> float:
        """q_noise_frac_ks_p_lt_alpha."""

    @property
    def n_components(self) -> int:
        """m, the columns of X."""

    @property
    def n_ks_tested(self) -> int:
        """K = min(max_ks_dims, m)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def noise_normality(X: numpy.typing.ArrayLike, max_ks_dims: int, p_alpha: float, seed: int) -> NoiseNormality:
    """
    docs/method.md §2.8 on X (n x m, each column a component, e.g. columns 1..d-1 of the rotated
    queries): medians of |skewness| and |excess kurtosis| over the m columns, KS p-values (median,
    fraction below p_alpha) over K = min(max_ks_dims, m) columns (all when K = m, else drawn with
    Rng(seed)). m = 0: NaNs. Returns NoiseNormality.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

default_covariance_epsilon: float = 1e-12

class Gaussian:
    """A Gaussian N(mean, covariance)."""

    def __init__(self, mean: numpy.typing.ArrayLike, covariance: numpy.typing.ArrayLike) -> None:
        """From a mean [d] and a covariance d x d (copied as float64)."""

    @property
    def mean(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """float64 [d]."""

    @property
    def covariance(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """float64 [d, d]."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def fit_gaussian(samples: numpy.typing.ArrayLike, epsilon: float = 1e-12) -> Gaussian:
    """
    The Gaussian of the rows of samples (n x d, n >= 2): their mean and ddof=1 covariance + epsilon I
    (docs/method.md §2.10). Returns Gaussian.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class BucketOptions:
    """Which buckets compute_bucket_statistics keeps."""

    def __init__(self, min_bucket: int = 1, min_count: int = 2, first_component: int = 1, epsilon: float = 1e-12) -> None:
        """The method's choice by default (docs/method.md §2.10)."""

    @property
    def min_bucket(self) -> int:
        """Buckets below it are skipped (the method: j > 0)."""

    @min_bucket.setter
    def min_bucket(self, arg: int, /) -> None: ...

    @property
    def min_count(self) -> int:
        """Fewest rows of a kept bucket (>= 2)."""

    @min_count.setter
    def min_count(self, arg: int, /) -> None: ...

    @property
    def first_component(self) -> int:
        """First component of the statistics."""

    @first_component.setter
    def first_component(self, arg: int, /) -> None: ...

    @property
    def epsilon(self) -> float:
        """Ridge added to the covariance's diagonal."""

    @epsilon.setter
    def epsilon(self, arg: float, /) -> None: ...

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class BucketStatistics:
    """Statistics of one query bucket (docs/method.md §2.10)."""

    @property
    def bucket(self) -> int:
        """Bucket id j."""

    @property
    def count(self) -> int:
        """n_j, rows in the bucket."""

    @property
    def tau(self) -> float:
        """tau_j, the mean position (tokens)."""

    @property
    def semantic(self) -> Gaussian:
        """mu_j and Sigma_j of the components kept."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def compute_bucket_statistics(positions: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike, X: numpy.typing.ArrayLike, options: BucketOptions = ...) -> list[BucketStatistics]:
    """
    Per-bucket tau_j, n_j, mu_j and Sigma_j (ddof=1, + epsilon I) of the components from
    options.first_component on, for the buckets >= options.min_bucket with at least options.min_count
    rows, in increasing id (docs/method.md §2.10). Returns a list of BucketStatistics.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class QueryBucket:
    """A query bucket with a query model (docs/method.md §2.10)."""

    @property
    def bucket(self) -> int:
        """j > 0."""

    @property
    def n_queries(self) -> int:
        """n_j >= 2."""

    @property
    def tau(self) -> float:
        """tau_j, the mean position of its queries (tokens)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def query_buckets(positions: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike) -> list[QueryBucket]:
    """
    The query buckets that get a model (docs/method.md §2.10): ids j > 0 with at least 2 queries, in
    increasing j, with n_j and tau_j. Returns a list of QueryBucket.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class BucketQueryModel:
    """
    The query model of one query bucket (docs/method.md §2.10) in the rotated basis: N(m_j, C_j) with
    m_j = [position_mean, semantic.mean], C_j = blockdiag(position_variance, semantic.covariance).
    """

    def __init__(self, bucket: int, n_queries: int, tau: float, position_mean: float, position_variance: float, semantic: Gaussian) -> None:
        """
        A model given by its parts (semantic: Gaussian of components 1..d-1), e.g. for
        query_bucket_plasticity.
        """

    @property
    def bucket(self) -> int:
        """j."""

    @property
    def n_queries(self) -> int:
        """n_j."""

    @property
    def tau(self) -> float:
        """tau_j (tokens)."""

    @property
    def position_mean(self) -> float:
        """alpha_rot_0 + beta_rot_0 tau_j."""

    @property
    def position_variance(self) -> float:
        """sigma2."""

    @property
    def semantic(self) -> Gaussian:
        """mu_j, Sigma_j of components 1..d-1."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def bucket_query_models(positions: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike, X_rot: numpy.typing.ArrayLike, component0: PositionComponentFit, covariance_epsilon: float = 1e-12) -> list[BucketQueryModel]:
    """
    The query models of a head (docs/method.md §2.10), one per query bucket j > 0 with at least 2
    queries, in increasing j, from the rotated queries X_rot (n x d), their positions and bucket
    ids, and the fit of the positional component (§2.6). Returns a list of BucketQueryModel.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def full_gaussian(model: BucketQueryModel) -> Gaussian:
    """
    The d-dimensional Gaussian of a query model: mean [position_mean, mu_j], covariance
    blockdiag(position_variance, Sigma_j) (docs/method.md §2.10). Returns Gaussian.
    """

class ExampleGroups:
    """
    The keys of one key bucket grouped into examples (docs/method.md §2.12): example b holds
    rows[offsets[b]:offsets[b + 1]], ordered by position (ties in row order).
    """

    @property
    def example_id(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """The example ids, increasing, int64 [B]."""

    @property
    def offsets(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """int64 [B + 1]."""

    @property
    def rows(self) -> Annotated[NDArray[numpy.int64], dict(writable=False)]:
        """Rows of the key columns, int64 [n_c]."""

    def count(self) -> int:
        """B, the number of examples."""

    def length(self, b: int) -> int:
        """L_b, the keys of example b."""

    def can_form_pair(self) -> bool:
        """Whether some example has 2 keys."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class KeyBucket:
    """The keys of one key bucket (docs/method.md §2.11-2.12)."""

    @property
    def bucket(self) -> int:
        """Key bucket id c."""

    @property
    def max_position(self) -> int:
        """The largest position of its keys (tokens)."""

    @property
    def examples(self) -> ExampleGroups:
        """Its keys by example."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class KeyBucketList:
    """The key buckets of a head, in increasing id (group_key_buckets)."""

    @overload
    def __init__(self) -> None:
        """Default constructor"""

    @overload
    def __init__(self, arg: KeyBucketList, /) -> None:
        """Copy constructor"""

    @overload
    def __init__(self, arg: Iterable[KeyBucket], /) -> None:
        """Construct from an iterable object"""

    @overload
    def __len__(self) -> int: ...

    @overload
    def __len__(self) -> int:
        """The number of key buckets."""

    def __bool__(self) -> bool:
        """Check whether the vector is nonempty"""

    def __repr__(self) -> str: ...

    def __iter__(self) -> Iterator[KeyBucket]: ...

    @overload
    def __getitem__(self, arg: int, /) -> KeyBucket: ...

    @overload
    def __getitem__(self, arg: slice, /) -> KeyBucketList: ...

    def clear(self) -> None:
        """Remove all items from list."""

    def append(self, arg: KeyBucket, /) -> None:
        """Append ``arg`` to the end of the list."""

    def insert(self, arg0: int, arg1: KeyBucket, /) -> None:
        """Insert object ``arg1`` before index ``arg0``."""

    def pop(self, index: int = -1) -> KeyBucket:
        """Remove and return item at ``index`` (default last)."""

    def extend(self, arg: KeyBucketList, /) -> None:
        """Extend ``self`` by appending elements from ``arg``."""

    @overload
    def __setitem__(self, arg0: int, arg1: KeyBucket, /) -> None: ...

    @overload
    def __setitem__(self, arg0: slice, arg1: KeyBucketList, /) -> None: ...

    @overload
    def __delitem__(self, arg: int, /) -> None: ...

    @overload
    def __delitem__(self, arg: slice, /) -> None: ...

def group_key_buckets(positions: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike, example_ids: numpy.typing.ArrayLike) -> KeyBucketList:
    """
    The key buckets of a head in increasing id (docs/method.md §2.11-2.12): for each its largest key
    position and its keys grouped into examples (rows of the given columns). Positions >= 0.
    Returns a KeyBucketList.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def eligible_key_buckets(key_buckets: KeyBucketList, q_bucket: int, tau: float, sliding_window: int = 0) -> NDArray[numpy.int64]:
    """
    The key buckets eligible for query bucket j with mean position tau (docs/method.md §2.11), as
    indices into key_buckets: the buckets c < j; with a sliding window of w > 0 tokens only those with
    c = j - 1 or a key position > tau - w. Returns int64 indices, increasing.
    """

class CellPairs:
    """The key pairs of one cell (query bucket j, key bucket c)."""

    def __init__(self, q_bucket: int, k_bucket: int, pairs: KeyPairs) -> None:
        """A cell's pairs given by hand (KeyPairs of rows of the keys)."""

    @property
    def q_bucket(self) -> int:
        """j."""

    @property
    def k_bucket(self) -> int:
        """c."""

    @property
    def pairs(self) -> KeyPairs:
        """KeyPairs; first/second are rows of the key table."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def cell_key_pairs(keys: KeyBucket, q_bucket: int, num_pairs: int, max_rel_dist: float, pair_sampler_seed: int) -> CellPairs:
    """
    The key pairs of cell (q_bucket, keys.bucket) (docs/method.md §2.12): num_pairs pairs of the sampler
    of §5 over the examples of the key bucket, from Rng(cell_pair_seed(pair_sampler_seed, j, c))
    (§2.15); none when no example has 2 keys. Returns CellPairs.
    """

class CellPlasticity:
    """A row of head_bucket_plasticity.csv (docs/method.md §3.3)."""

    @property
    def q_bucket(self) -> int:
        """Query bucket id j."""

    @property
    def k_bucket(self) -> int:
        """Key bucket id c."""

    @property
    def plasticity(self) -> float:
        """P_jc, mean PP of its pairs; NaN without pairs."""

    @property
    def n_pairs(self) -> int:
        """Pairs drawn for the cell: num_pairs_per_bucket or 0."""

    @property
    def plasticity_empirical(self) -> float:
        """
        The empirical P_jc (docs/method.md §8.2) when computed (analyze_head with empirical_ap), else NaN.
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class BucketPlasticityResult:
    """The cells of one query bucket and AP_j (docs/method.md §2.14)."""

    @property
    def cells(self) -> list[CellPlasticity]:
        """list of CellPlasticity, in the order given."""

    @property
    def plasticity(self) -> float:
        """AP_j; NaN without pairs."""

    @property
    def n_pairs(self) -> int:
        """Pairs of all its cells."""

    @property
    def pair_plasticity(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """
        PP of every pair, float64 [n_pairs], cell after cell (the rows of bucket_key_differences).
        """

    @property
    def moments(self) -> PairMoments:
        """
        The pairs' PairMoments (m, v) as the kernel returned them (docs/method.md §4, §4.6); empty for
        query_bucket_empirical_plasticity.
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def query_bucket_plasticity(keys_rot: numpy.typing.ArrayLike, cells: Sequence[CellPairs], model: BucketQueryModel, dtype: object | None = None) -> BucketPlasticityResult:
    """
    Cell and bucket plasticity of one query bucket (docs/method.md §2.13-2.14): for every pair of every
    cell, w = k1 - k2 of the rotated keys keys_rot (n x d), PP under the bucket's query model (the
    structured kernel of §4.5), all pairs in one batched call; a cell's plasticity is the mean PP
    of its pairs, AP_j the mean over all. dtype: the precision of the kernel's products (None: the
    keys'). Returns BucketPlasticityResult (with every pair's PP and moments, for §8).

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class PlasticityAggregates:
    """The aggregates of a head (docs/method.md §2.14); NaN where undefined."""

    @property
    def ap_overall(self) -> float:
        """sum n_j AP_j / sum n_j over the buckets with a defined AP_j."""

    @property
    def ap_first20(self) -> float:
        """The same over the buckets with tau_j < 0.2 C."""

    @property
    def ap_last20(self) -> float:
        """The same over the buckets with tau_j >= 0.8 C."""

    @property
    def ap_drop(self) -> float:
        """ap_first20 - ap_last20."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def plasticity_aggregates(tau: numpy.typing.ArrayLike, n_queries: numpy.typing.ArrayLike, plasticity: numpy.typing.ArrayLike, context_length: float) -> PlasticityAggregates:
    """
    The aggregates of a head (docs/method.md §2.14) from its query buckets' tau_j, n_j and AP_j (NaN
    when undefined) and C = max query position + 1: ap_overall = sum n_j AP_j / sum n_j over the
    defined AP_j; ap_first20 / ap_last20 the same over tau_j < 0.2 C / tau_j >= 0.8 C; ap_drop =
    ap_first20 - ap_last20. Returns PlasticityAggregates.

    Arrays are read in place when C-contiguous float32/float64 (positions: int64 or float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class HeadId:
    """
    Which head (docs/method.md §1.3): layer, query head and the key head of its GQA group;
    layer and q_head seed the pair sampler (§2.15).
    """

    def __init__(self, layer: int = 0, q_head: int = 0, k_head: int = 0) -> None:
        """HeadId(layer, q_head, k_head)."""

    @property
    def layer(self) -> int:
        """Layer index (0-based)."""

    @layer.setter
    def layer(self, arg: int, /) -> None: ...

    @property
    def q_head(self) -> int:
        """Query head index."""

    @q_head.setter
    def q_head(self, arg: int, /) -> None: ...

    @property
    def k_head(self) -> int:
        """Key head index k(h) of the GQA group (docs/method.md §1.3)."""

    @k_head.setter
    def k_head(self, arg: int, /) -> None: ...

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class HeadSeeds:
    """The seeds of one head (docs/method.md §2.15, §6.4)."""

    @property
    def query_subsample(self) -> int:
        """§2.2: mix_seed(seed, 'q')."""

    @property
    def key_subsample(self) -> int:
        """§2.2: mix_seed(seed, 'k')."""

    @property
    def noise_components(self) -> int:
        """§2.8: seed."""

    @property
    def pair_sampler(self) -> int:
        """§2.12: pair_sampler_seed(seed, head)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def pair_sampler_seed(seed: int, head: HeadId) -> int:
    """
    S_h = seed + 10007 layer + 379 q_head (mod 2^64), the pair-sampler seed of a head (docs/method.md
    §2.15).
    """

def cell_pair_seed(pair_sampler_seed: int, q_bucket: int, k_bucket: int) -> int:
    """
    The seed of the pair stream of cell (j, c): mix_seed(S_h, j, c) (docs/method.md §2.15, §6.3).
    """

def seeds_of_head(seed: int, head: HeadId) -> HeadSeeds:
    """
    Every seed of a head under the user's seed (docs/method.md §2.15). Returns HeadSeeds.
    """

max_bins_per_octave: int = 1024

class DistanceBinEdges:
    """One bin of a log-spaced distance axis, [low, high)."""

    @property
    def low(self) -> float:
        """Lower edge (tokens, included; -inf for bin -1)."""

    @property
    def high(self) -> float:
        """Upper edge (tokens, excluded)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def log_distance_bin(distance: float, bins_per_octave: int = 1) -> int:
    """
    The bin of a distance (tokens) on the log-spaced axis of docs/method.md §8.1, b = bins_per_octave
    (1 to max_bins_per_octave): -1 for a negative distance, 0 for [0, 1), k >= 1 for
    [2^((k-1)/b), 2^(k/b)). Raises DomainError for a non-finite distance, InvalidArgumentError for b.
    """

def log_distance_bin_edges(bin: int, bins_per_octave: int = 1) -> DistanceBinEdges:
    """
    The edges [low, high) of bin `bin` of log_distance_bin (docs/method.md §8.1): (-inf, 0) for -1,
    [0, 1) for 0, [2^((bin-1)/b), 2^(bin/b)) above. Returns DistanceBinEdges.
    """

class PairDistances:
    """The two distances of every pair (docs/method.md §8.1)."""

    @property
    def key_distance(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """|pos(k1) - pos(k2)| per pair, float64 [P] (tokens, >= 0)."""

    @property
    def query_distance(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """tau_j - (pos(k1) + pos(k2)) / 2 per pair, float64 [P] (tokens)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def cell_pair_distances(key_positions: numpy.typing.ArrayLike, cells: Sequence[CellPairs], tau: float) -> PairDistances:
    """
    The distances of every pair of the cells of query bucket j (docs/method.md §8.1), cell after cell
    in the order of bucket_key_differences: the inter-key distance |pos(k1) - pos(k2)| and the
    key-to-query distance tau - (pos(k1) + pos(k2)) / 2, in tokens. key_positions: the positions
    of the rows of the key table the pairs index ([n], >= 0); tau: the bucket's mean query
    position. Raises InvalidArgumentError for a row out of range, DomainError for a negative or
    non-finite position or tau. Returns PairDistances.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class DistancePlasticityBin:
    """
    One non-empty bin of a distance map (a row of head_distance_plasticity.csv, docs/method.md §8.1).
    """

    @property
    def key_bin(self) -> int:
        """log_distance_bin of the inter-key distance."""

    @property
    def query_bin(self) -> int:
        """log_distance_bin of the key-to-query distance."""

    @property
    def key_distance(self) -> DistanceBinEdges:
        """Edges of the inter-key distance (DistanceBinEdges, tokens)."""

    @property
    def query_distance(self) -> DistanceBinEdges:
        """Edges of the key-to-query distance (DistanceBinEdges, tokens)."""

    @property
    def plasticity(self) -> float:
        """Mean PP of the pairs in the bin, in [0, 1]."""

    @property
    def n_pairs(self) -> int:
        """Pairs in the bin, >= 1."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def distance_plasticity_map(key_distance: numpy.typing.ArrayLike, query_distance: numpy.typing.ArrayLike, plasticity: numpy.typing.ArrayLike, bins_per_octave: int = 1) -> list[DistancePlasticityBin]:
    """
    The distance map of a set of pairs (docs/method.md §8.1): for their inter-key distances (>= 0),
    key-to-query distances (tokens) and pair plasticities (PP in [0, 1]; [P] each), the mean PP
    and the pair count of every non-empty bin of the log-spaced grid (log_distance_bin on each
    axis, b = bins_per_octave), in increasing (key_bin, query_bin). Raises InvalidArgumentError
    for sizes that differ, DomainError for a non-finite value, a negative inter-key distance or
    a PP outside [0, 1]. Returns a list of DistancePlasticityBin.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def distance_map_cell_pairs(keys: KeyBucket, q_bucket: int, num_pairs: int, max_rel_dist: float, pair_sampler_seed: int) -> CellPairs:
    """
    Extra key pairs of cell (q_bucket, keys.bucket) for the distance map (docs/method.md §8.1): as
    cell_key_pairs, but from Rng(distance_map_pair_seed(pair_sampler_seed, j, c)), a stream of their
    own (§6.4), so the method's pairs do not change. None when no example has 2 keys. Returns CellPairs.
    """

def distance_map_pair_seed(pair_sampler_seed: int, q_bucket: int, k_bucket: int) -> int:
    """
    The seed of the distance map's extra pairs of cell (j, c): mix_seed(S_h, j, c, 1) (docs/method.md
    §8.1, §6.4).
    """

def empirical_query_seed(pair_sampler_seed: int, q_bucket: int) -> int:
    """
    The seed of the subsample of query bucket j's queries for the empirical AP: mix_seed(S_h, j, 0, 2)
    (docs/method.md §8.2, §6.4).
    """

def bucket_key_differences(keys_rot: numpy.typing.ArrayLike, cells: Sequence[CellPairs], dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    The key differences w = k1 - k2 of every pair of the cells (docs/method.md §2.12), cell after
    cell, as the rows of one (total pairs) x d matrix: the W of the kernel (§4.4) for a query
    bucket, whose row order every per-pair result of §8 follows. dtype: of the result (None: the
    dtype of keys_rot). Raises InvalidArgumentError for a row out of range, DomainError for a
    non-finite key.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class EmpiricalPreferences:
    """
    How the queries of a sample choose within each pair (docs/method.md §8.2).
    """

    def __init__(self, preference: numpy.typing.ArrayLike, tie_fraction: numpy.typing.ArrayLike, n_queries: int) -> None:
        """
        Preferences given by their values ([P] each, copied as float64) and the sample size n.
        """

    @property
    def preference(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """
        p_hat per pair: share of queries with q.w > 0, ties counted one half; float64 [P].
        """

    @property
    def tie_fraction(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """t_hat per pair: share of queries with q.w = 0; float64 [P]."""

    @property
    def n_queries(self) -> int:
        """n, the queries of the sample."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def pair_preferences(queries: numpy.typing.ArrayLike, differences: numpy.typing.ArrayLike, dtype: object | None = None) -> EmpiricalPreferences:
    """
    For every key difference w (a row of differences, P x d) and the n queries (n x d, n >= 1), the
    share of queries with q.w > 0, ties q.w = 0 counted one half, and the share of ties
    (docs/method.md §8.2). The products q.w are GEMMs over blocks in the working type dtype (None:
    the differences' dtype; float64 is advised, a tie is an exact 0): no P x n matrix is formed.
    Returns EmpiricalPreferences.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def empirical_plasticity_from_preferences(preferences: EmpiricalPreferences, result_dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    The unbiased estimate of 4 p (1 - p) of every pair from its preferences (docs/method.md §8.2):
    (4 p_hat (1 - p_hat) n - t_hat) / (n - 1); in [0, n / (n - 1)] (an unbiased estimate may exceed 1
    by at most 1 / (n - 1)). result_dtype: 'float32' or 'float64' (None: float64). Raises
    InvalidArgumentError for n < 2 or sizes that differ, DomainError for shares outside [0, 1].
    """

def empirical_pair_plasticity(queries: numpy.typing.ArrayLike, differences: numpy.typing.ArrayLike, dtype: object = None, result_dtype: object = None) -> numpy.typing.NDArray[numpy.floating]:
    """
    The model-free (empirical) plasticity of every pair (docs/method.md §8.2): pair_preferences of the
    actual queries (n x d, n >= 2) followed by empirical_plasticity_from_preferences. dtype as
    pair_preferences; result_dtype: of the result (None: float64). Returns an array [P].

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def query_bucket_empirical_plasticity(keys_rot: numpy.typing.ArrayLike, cells: Sequence[CellPairs], bucket_queries: numpy.typing.ArrayLike, dtype: object | None = None) -> BucketPlasticityResult:
    """
    The empirical cell and bucket plasticity of one query bucket (docs/method.md §8.2): for every
    pair of every cell, w = k1 - k2 of the rotated keys keys_rot (n x d) and its empirical PP over
    the bucket's queries (m x d, m >= 2, same basis); a cell's value is the mean over its pairs
    (NaN without pairs), AP_j the mean over all. dtype: the working type of the GEMMs (None: the
    keys'). Returns BucketPlasticityResult (pair_plasticity: every pair's empirical PP, in the
    order of bucket_key_differences; moments empty).

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def empirical_plasticity_variance(queries: numpy.typing.ArrayLike, differences: numpy.typing.ArrayLike, preferences: EmpiricalPreferences, dtype: object | None = None) -> float:
    """
    The variance, over the sample of n queries (n >= 2), of the mean of the empirical PP of the pairs
    (docs/method.md §8.2-§8.3): the first-order U-statistic variance (16 / n) var_q(f(q)) with
    f(q) = (1/P) sum_p (1 - 2 p_p) s_p(q), s_p(q) = 1, 1/2, 0 as q.w_p >, =, < 0, p_p the
    preferences pair_preferences gave for these queries and differences. The pairs are held fixed.
    dtype as pair_preferences. Returns a float (squared plasticity units).

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class BucketSensitivity:
    """
    How a query bucket's AP_j responds to its query model (docs/method.md §8.3): with z_p =
    m_p / sqrt(v_p), g(z) = 4 Phi(z) Phi(-z), A_p = g'(z_p) / (P sqrt(v_p)), B_p = -g'(z_p) z_p /
    (2 P v_p): dAP_j = a . dmu + G dmu0 + K dsigma2 + tr(M dSigma), and the coefficients of its
    second-order bias.
    """

    @property
    def semantic_mean(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """a = sum_p A_p w_sem, float64 [d - 1]."""

    @property
    def position_mean(self) -> float:
        """G = sum_p A_p w0."""

    @property
    def position_variance(self) -> float:
        """K = sum_p B_p w0^2."""

    @property
    def semantic_covariance(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """M = sum_p B_p w_sem w_sem^T, float64 [d - 1, d - 1]."""

    @property
    def mixed(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """b = sum_p B_p w0 w_sem, float64 [d - 1] (the rotation term)."""

    @property
    def bias_per_position_mean_variance(self) -> float:
        """mean_p g''(z_p) / 2 w0^2 / v_p."""

    @property
    def bias_per_position_variance_variance(self) -> float:
        """mean_p (3 z g' + z^2 g'') / 8 w0^4 / v_p^2."""

    @property
    def bias_per_position_variance_shift(self) -> float:
        """mean_p -z g' w0^2 / (2 v_p)."""

    @property
    def bias_semantic(self) -> float:
        """Bias from mu_hat and Sigma_hat of the bucket's n_j queries."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def bucket_plasticity_sensitivity(differences: numpy.typing.ArrayLike, moments: PairMoments, model: BucketQueryModel) -> BucketSensitivity:
    """
    The sensitivity of AP_j, the mean PP of the pairs whose key differences are the rows of
    differences (P x d, component 0 positional), to the bucket's query model (docs/method.md
    §8.3), from the pairs' moments as query_bucket_plasticity (BucketPlasticityResult.moments) or
    structured_pair_moments computed them. Pairs with v <= 0 contribute nothing; where the kernel
    rescaled (§4.6) every value is NaN. Raises InvalidArgumentError for shapes (d = 0, moments not
    [P], the model's semantic part not d - 1, model.n_queries < 2), DomainError for non-finite
    values. Returns BucketSensitivity.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

def pair_sampling_variance(pair_plasticity: numpy.typing.ArrayLike, cells: Sequence[CellPairs]) -> float:
    """
    The variance of AP_j over the draws of its pairs (docs/method.md §8.3): the pairs of each cell
    are a sample from the cell (pair_plasticity: [P], the pairs of the cells in order), AP_j =
    sum_c sum_p PP / sum_c N_c and its variance, from the within-cell sample variances s_c^2
    (ddof 1), sum_c N_c s_c^2 / (sum_c N_c)^2. NaN when a cell has exactly one pair or there is no
    pair. Raises InvalidArgumentError when the sizes differ, DomainError for non-finite values.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class BucketEstimate:
    """
    What the interval of one query bucket needs (docs/method.md §8.3), one per query model.
    """

    def __init__(self, plasticity: float, sensitivity: BucketSensitivity, pair_variance: float) -> None:
        """
        AP_j (NaN: no pairs), its BucketSensitivity and its pair_sampling_variance.
        """

    @property
    def plasticity(self) -> float:
        """AP_j; NaN when the bucket has no pairs."""

    @property
    def sensitivity(self) -> BucketSensitivity:
        """BucketSensitivity."""

    @property
    def pair_variance(self) -> float:
        """pair_sampling_variance of the bucket."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class PlasticityUncertainty:
    """
    Standard errors and second-order biases of every AP_j and of ap_overall (docs/method.md §8.3).
    """

    @property
    def bucket_standard_error(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """Per query model, float64 [J]; NaN for buckets without pairs."""

    @property
    def bucket_bias(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """E[AP_j] - AP_j per query model, estimated; float64 [J]."""

    @property
    def standard_error(self) -> float:
        """Of ap_overall."""

    @property
    def bias(self) -> float:
        """E[ap_overall] - ap_overall, estimated."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def plasticity_standard_errors(t: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike, x_rot: numpy.typing.ArrayLike, component0: PositionComponentFit, slope_norm: float, models: Sequence[BucketQueryModel], estimates: Sequence[BucketEstimate]) -> PlasticityUncertainty:
    """
    Standard errors and biases of every AP_j and of ap_overall (docs/method.md §8.3), by the delta
    method, conditional on the keys and on the query positions and buckets. Inputs: the head's kept
    queries after the rotation (x_rot, n x d, n >= 3; positions t and bucket ids [n]), the
    component-0 fit (§2.6, with its residual), ||beta|| of the position regression (§2.3), the
    query models (§2.10, increasing bucket) and one BucketEstimate per model. Raises
    InvalidArgumentError for shapes, DomainError for non-finite values. Returns
    PlasticityUncertainty.

    Arrays are read in place when C-contiguous float32/float64 (positions and other reals: float64; integer columns: int64), on the CPU; other layouts or dtypes are converted once (see the module docstring).
    """

class Interval:
    """A two-sided interval [low, high]."""

    @property
    def low(self) -> float:
        """Lower end; NaN when undefined."""

    @property
    def high(self) -> float:
        """Upper end; NaN when undefined."""

    @property
    def centre(self) -> float:
        """estimate - bias, the centre (not clipped); NaN when undefined."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def plasticity_interval(estimate: float, bias: float, standard_error: float, level: float = 0.95) -> Interval:
    """
    The confidence interval of a plasticity (docs/method.md §8.3): estimate - bias -+ z standard_error,
    z = Phi^-1((1 + level) / 2) (1.96 for 0.95), clipped to [0, 1]; NaN ends when any input is NaN.
    Raises InvalidArgumentError for a level outside (0, 1), DomainError for a negative standard
    error. Returns Interval.
    """

class Tokens:
    """
    One kind (queries or keys) of one head (docs/method.md §1): n vectors of dimension d with their
    position, bucket and example id columns, held by reference. vectors: a C-contiguous float32 or
    float64 array [n, d] (NumPy or a CPU torch tensor) is read in place, anything else is converted
    once (float16/bfloat16 to float32, others to float64); the columns: int64 [n] read in place,
    other integer dtypes converted once to int64. example_id may be None for queries. The arrays
    must not be modified while an analysis reads them.
    """

    def __init__(self, vectors: numpy.typing.ArrayLike, position: numpy.typing.ArrayLike, bucket: numpy.typing.ArrayLike, example_id: object | None = None) -> None:
        """
        vectors [n, d] float; position, bucket, example_id [n] integers (see the class docstring).
        """

    @property
    def n(self) -> int:
        """Rows (tokens)."""

    @property
    def d(self) -> int:
        """Vector dimension."""

    @property
    def dtype(self) -> str:
        """The value type the vectors are read in."""

    def converted_columns(self) -> list:
        """
        The columns that had to be converted (copied once) rather than read in place.
        """

    def data_addresses(self) -> dict:
        """
        The address of the data each column is read from (for checking that nothing was copied).
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class HeadOptions:
    """
    The parameters of docs/method.md §2 (defaults as there), the head's sliding window and the
    extensions of §8 (defaults: the library's, where confidence_intervals is off; ap_analyze and
    analyze_dump turn it on: analyze_default_options()). Given by keyword, and checked (also when
    an attribute is set) by the same code and with the same messages as analyze_dump's keywords and
    ap_analyze's flags and --config keys (include/attention_plasticity/run/analyze_config.hpp): UsageError for an unknown
    keyword (with the closest name) or a value outside the option's domain.
    """

    def __init__(self, *, max_tokens_per_head: int = 50000, normality_max_dims: int = 64, p_alpha: float = 0.01, seed: int = 0, num_pairs_per_bucket: int = 256, max_rel_dist: float = 0.05, min_bucket_queries: int = 16, distance_map: bool = True, distance_map_extra_pairs: int = 0, distance_bins_per_octave: int = 1, empirical_ap: bool = False, empirical_max_queries: int = 0, confidence_intervals: bool = False, planar_rotation: bool = True, pca_roles: bool = False, confidence_level: float = 0.95, covariance_epsilon: float = 1e-12, sliding_window: int = 0, threads: int = 1) -> None:
        """
        The options, by keyword (None: the default); defaults as docs/method.md §2 and §8. Each value
        is checked as ap_analyze checks its flag (UsageError naming the keyword).
        """

    @property
    def max_tokens_per_head(self) -> int:
        """Cap on queries and on keys per head (§2.2), >= 2."""

    @max_tokens_per_head.setter
    def max_tokens_per_head(self, arg: object, /) -> None: ...

    @property
    def normality_max_dims(self) -> int:
        """Noise components with a KS test (§2.8), >= 1."""

    @normality_max_dims.setter
    def normality_max_dims(self, arg: object, /) -> None: ...

    @property
    def p_alpha(self) -> float:
        """Significance level (§2.8), in [0, 1]."""

    @p_alpha.setter
    def p_alpha(self, arg: object, /) -> None: ...

    @property
    def seed(self) -> int:
        """Seed of every random choice (§2.15)."""

    @seed.setter
    def seed(self, arg: object, /) -> None: ...

    @property
    def num_pairs_per_bucket(self) -> int:
        """Key pairs per cell (§2.12), >= 1."""

    @num_pairs_per_bucket.setter
    def num_pairs_per_bucket(self, arg: object, /) -> None: ...

    @property
    def max_rel_dist(self) -> float:
        """Pair window as a fraction of the example length (§5), in [0, 1]."""

    @max_rel_dist.setter
    def max_rel_dist(self, arg: object, /) -> None: ...

    @property
    def min_bucket_queries(self) -> int:
        """
        Query buckets with fewer queries keep their profile row, flagged small_bucket, but are left
        out of ap_overall, ap_first20, ap_last20 and have no interval (§2.14, §8.3), >= 2.
        """

    @min_bucket_queries.setter
    def min_bucket_queries(self, arg: object, /) -> None: ...

    @property
    def covariance_epsilon(self) -> float:
        """Ridge on Sigma_j (§2.10), finite, >= 0."""

    @covariance_epsilon.setter
    def covariance_epsilon(self, arg: object, /) -> None: ...

    @property
    def sliding_window(self) -> int:
        """The head's sliding window in tokens (§2.11); <= 0: none."""

    @sliding_window.setter
    def sliding_window(self, arg: object, /) -> None: ...

    @property
    def threads(self) -> int:
        """
        Threads analyze_head may use for this one head, the calling thread included (0 or 1: the
        calling thread only; at most 4096); the results are identical for any number. analyze_dump
        sets it when there are fewer heads than threads.
        """

    @threads.setter
    def threads(self, arg: object, /) -> None: ...

    @property
    def distance_map(self) -> bool:
        """
        The distance map of §8.1 (HeadResult.distance_map, head_distance_plasticity.csv).
        """

    @distance_map.setter
    def distance_map(self, arg: object, /) -> None: ...

    @property
    def distance_map_extra_pairs(self) -> int:
        """
        Extra pairs per cell for the distance map, from their own streams (§8.1).
        """

    @distance_map_extra_pairs.setter
    def distance_map_extra_pairs(self, arg: object, /) -> None: ...

    @property
    def distance_bins_per_octave(self) -> int:
        """
        Bins of the distance map per doubling of distance (§8.1), 1 to max_bins_per_octave.
        """

    @distance_bins_per_octave.setter
    def distance_bins_per_octave(self, arg: object, /) -> None: ...

    @property
    def empirical_ap(self) -> bool:
        """
        The model-free AP from the actual queries (§8.2): pairs x queries GEMMs.
        """

    @empirical_ap.setter
    def empirical_ap(self, arg: object, /) -> None: ...

    @property
    def empirical_max_queries(self) -> int:
        """
        Queries per bucket for the empirical AP, a seeded subsample (§8.2); 0: all.
        """

    @empirical_max_queries.setter
    def empirical_max_queries(self, arg: object, /) -> None: ...

    @property
    def confidence_intervals(self) -> bool:
        """Standard errors, biases and intervals of AP_j and ap_overall (§8.3)."""

    @confidence_intervals.setter
    def confidence_intervals(self, arg: object, /) -> None: ...

    @property
    def planar_rotation(self) -> bool:
        """
        The planar rotation model of §8.5 (bias_strength, drift_slope_k, drift_query_mean); on by
        default.
        """

    @planar_rotation.setter
    def planar_rotation(self, arg: object, /) -> None: ...

    @property
    def pca_roles(self) -> bool:
        """
        The PCA roles of §8.5 (pc0_r_q, pc0_r_k, pca_class): a SYRK of the vectors; off by default.
        """

    @pca_roles.setter
    def pca_roles(self, arg: object, /) -> None: ...

    @property
    def confidence_level(self) -> float:
        """Level of the intervals (§8.3), in (0, 1)."""

    @confidence_level.setter
    def confidence_level(self, arg: object, /) -> None: ...

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class HeadMetrics:
    """
    A row of head_metrics.csv (docs/method.md §3.2; units and ranges there). For every column
    of the CSV, including any added later: HeadResult.to_dict(), or attention_plasticity.tables(results)
    ['head_metrics'] for many heads.
    """

    @property
    def n_q_tokens(self) -> int:
        """Queries analyzed (after subsampling)."""

    @property
    def n_k_tokens(self) -> int:
        """Keys analyzed (after subsampling)."""

    @property
    def d_model(self) -> int:
        """Vector dimension d."""

    @property
    def q_R2_pos(self) -> float:
        """Mean R2 of the position regression (§2.3)."""

    @property
    def q_beta_norm(self) -> float:
        """||beta|| (§2.3), vector units per token."""

    @property
    def q_R2_scalar(self) -> float:
        """R2 of log2(t + 1) on x . beta_hat (§2.4)."""

    @property
    def q_mae_baseline(self) -> float:
        """§2.4, log2-position units."""

    @property
    def q_mae_proj(self) -> float:
        """§2.4, log2-position units."""

    @property
    def q_mae_ratio(self) -> float:
        """q_mae_proj / q_mae_baseline (§2.4)."""

    @property
    def q_resid0_skew(self) -> float:
        """§2.7."""

    @property
    def q_resid0_kurt(self) -> float:
        """§2.7."""

    @property
    def q_resid0_ks_p(self) -> float:
        """§2.7."""

    @property
    def q_noise_med_abs_skew(self) -> float:
        """§2.8."""

    @property
    def q_noise_med_abs_kurt(self) -> float:
        """§2.8."""

    @property
    def q_noise_med_ks_p(self) -> float:
        """§2.8."""

    @property
    def q_noise_frac_ks_p_lt_alpha(self) -> float:
        """§2.8."""

    @property
    def ap_overall(self) -> float:
        """
        Head-level attention plasticity (§2.14), in [0, 1]; NaN when no query bucket of at least
        min_bucket_queries queries has a key pair.
        """

    @property
    def ap_first20(self) -> float:
        """
        The same over the buckets with tau_j < 0.2 C, C = largest query position + 1 (§2.14); NaN when
        there is none (short contexts: the first bucket already starts past 0.2 C).
        """

    @property
    def ap_last20(self) -> float:
        """
        The same over the buckets with tau_j >= 0.8 C (§2.14); NaN when there is none (usual with
        logarithmic buckets).
        """

    @property
    def ap_drop(self) -> float:
        """ap_first20 - ap_last20 (§2.14); NaN when either is."""

    @property
    def ap_empirical_overall(self) -> float:
        """
        §2.14's aggregate of the empirical AP_j (§8.2); NaN when empirical_ap is off.
        """

    @property
    def ap_empirical_overall_se(self) -> float:
        """
        Its standard error over the query sample (§8.2-8.3); NaN unless both extensions are on.
        """

    @property
    def ap_overall_se(self) -> float:
        """Standard error of ap_overall (§8.3); NaN when off."""

    @property
    def ap_overall_bias(self) -> float:
        """Estimated bias of ap_overall (§8.3); NaN when off."""

    @property
    def ap_overall_ci_low(self) -> float:
        """Lower end of the interval of ap_overall at confidence_level (§8.3)."""

    @property
    def ap_overall_ci_high(self) -> float:
        """Upper end of the interval of ap_overall at confidence_level (§8.3)."""

    @property
    def ap_overall_corrected(self) -> float:
        """
        ap_overall - ap_overall_bias: the bias-corrected estimate the interval is centred on (§8.3).
        """

    @property
    def bias_strength(self) -> float:
        """mu_Q^a alpha_K of the planar rotation model (§8.5)."""

    @property
    def drift_slope_k(self) -> float:
        """alpha_K, the keys' slope along the drift direction (§8.5)."""

    @property
    def drift_query_mean(self) -> float:
        """mu_Q^a, the queries' mean on the drift direction (§8.5)."""

    @property
    def pc0_r_q(self) -> float:
        """r_q of the pooled PC0 (§8.5)."""

    @property
    def pc0_r_k(self) -> float:
        """r_k of the pooled PC0 (§8.5)."""

    @property
    def pca_class(self) -> str:
        """
        The PCA class (§8.5): 'position_dominated', 'q_positional', 'content_focused', 'mixed' or 'nan'.
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class BucketProfile:
    """A row of head_profile.csv (docs/method.md §3.4)."""

    @property
    def q_bucket(self) -> int:
        """j > 0."""

    @property
    def tau(self) -> float:
        """tau_j (tokens)."""

    @property
    def n_queries(self) -> int:
        """n_j."""

    @property
    def plasticity(self) -> float:
        """AP_j; NaN without pairs."""

    @property
    def n_pairs(self) -> int:
        """Pairs of all the cells of the bucket."""

    @property
    def plasticity_empirical(self) -> float:
        """The empirical AP_j (§8.2); NaN when off."""

    @property
    def plasticity_empirical_se(self) -> float:
        """Its standard error (§8.2-8.3); NaN unless both extensions are on."""

    @property
    def plasticity_se(self) -> float:
        """Standard error of AP_j (§8.3)."""

    @property
    def plasticity_bias(self) -> float:
        """Estimated bias of AP_j (§8.3)."""

    @property
    def plasticity_ci_low(self) -> float:
        """Lower end of its interval (§8.3)."""

    @property
    def plasticity_ci_high(self) -> float:
        """Upper end of its interval (§8.3)."""

    @property
    def plasticity_corrected(self) -> float:
        """
        plasticity - plasticity_bias: the bias-corrected AP_j its interval is centred on (§8.3).
        """

    @property
    def small_bucket(self) -> bool:
        """
        n_queries < min_bucket_queries: left out of the aggregates, no interval (§2.14).
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class StageTimings:
    """Wall time of each stage of analyze_head, in seconds."""

    @property
    def preparation(self) -> float:
        """Checks, orientation, subsampling, query conversion (s)."""

    @property
    def regression(self) -> float:
        """Position regression, scalar predictability, query rotation (s)."""

    @property
    def rotation(self) -> float:
        """Key conversion and rotation (s)."""

    @property
    def normality(self) -> float:
        """Component-0 fit, first-component and noise summaries (s)."""

    @property
    def bucket_statistics(self) -> float:
        """Component weights, query models (s)."""

    @property
    def sampling(self) -> float:
        """Key buckets, eligible cells, pair sampling (s)."""

    @property
    def kernel(self) -> float:
        """Key differences, moments and plasticity, aggregates (s)."""

    @property
    def extensions(self) -> float:
        """docs/method.md §8: distance map, empirical AP, intervals (s)."""

    @property
    def total(self) -> float:
        """The whole of analyze_head (s)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

class HeadResult:
    """Everything analyze_head computes for one head (docs/method.md §3)."""

    @property
    def id(self) -> HeadId:
        """The head (HeadId)."""

    @property
    def metrics(self) -> HeadMetrics:
        """HeadMetrics."""

    @property
    def cells(self) -> list[CellPlasticity]:
        """
        list of CellPlasticity (head_bucket_plasticity.csv), by q_bucket then k_bucket.
        """

    @property
    def profile(self) -> list[BucketProfile]:
        """list of BucketProfile (head_profile.csv), by q_bucket."""

    @property
    def distance_map(self) -> list[DistancePlasticityBin]:
        """
        list of DistancePlasticityBin (head_distance_plasticity.csv, docs/method.md §8.1); empty when
        distance_map is off.
        """

    @property
    def component_r2(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """R2_d of the position regression (§2.3), float64 [d]."""

    @property
    def component_weight(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """w_d (§2.9), float64 [d]."""

    @property
    def timings(self) -> StageTimings | None:
        """StageTimings when asked for (timings=True), else None."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The head and its metrics: {layer, q_head, k_head and every column of head_metrics.csv}.
        """

    def tables(self) -> dict:
        """
        The head's rows as pandas DataFrames with the columns and dtypes of the CSVs (docs/method.md §3),
        by table name: head_metrics, head_bucket_plasticity, head_profile, head_component_weights,
        head_distance_plasticity (and any table ap_analyze writes); attention_plasticity.tables([self]).
        Made from the numbers, not from CSV text.
        """

    def csv_rows(self) -> dict:
        """
        The head's rows of each CSV of docs/method.md §3, formatted as ap_analyze writes them, with the
        header: {table name: text}.
        """

def analyze_head(queries: Tokens, keys: Tokens, head: HeadId = ..., options: HeadOptions = ..., timings: bool = False) -> HeadResult:
    """
    The attention plasticity of one head: all of docs/method.md §2 (orientation, subsampling, position
    regression, rotation, normality summaries, component weights, bucket query models, eligible cells,
    key pairs, pair plasticity, aggregates) on the head's queries and keys (Tokens, read in place;
    keys need example_id), for head `head` (HeadId: its layer and q_head seed the pair sampler) under
    `options` (HeadOptions, with the head's sliding window and the extensions of §8 it turns on:
    distance map, empirical AP, intervals). The same function as ap_analyze's, so the numbers are
    the same (ap_analyze's defaults differ from HeadOptions() in confidence_intervals, on there). The GIL is released; BLAS runs with set_blas_threads()'s count.
    timings=True also measures each stage (HeadResult.timings).
    Raises InvalidArgumentError for inconsistent shapes or options (fewer than 2 queries, no key,
    different d) and DomainError for a non-finite vector or a negative position (the first, named
    by row, queries before keys). Returns HeadResult.
    """

def result_tables() -> list:
    """
    The CSVs of docs/method.md §3 as ap_analyze writes them: a list of (table name, file name, header).
    """

def analyze_options() -> list:
    """
    The options of ap_analyze (one table for the command line, the --config file and analyze_dump): a list
    of (key, flag, metavar, help, takes_list); the help ends with the default in brackets.
    """

def analyze_default_options() -> HeadOptions:
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
    data.parquet announces, which the shard plan weighs (None: attention_plasticity.dump.parquet_rows).
    """

    @staticmethod
    def from_options(data_root: str, output_dir: object | None = None, config: object | None = None, options: dict = {}, parquet_rows: object | None = None) -> DumpRun:
        """
        A run configured as analyze_dump(data_root, output_dir, config=..., **options) is.
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

class PlanarRotation:
    """
    The planar rotation model of a head (docs/method.md §8.5); NaN where undefined.
    """

    @property
    def drift_direction(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """
        a = Cov(x, t) / ||Cov(x, t)|| over the pooled queries and keys, float64 [d], unit.
        """

    @property
    def separation_direction(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """b: mu_Q - mu_K without its part along a, normalized, float64 [d]."""

    @property
    def drift_slope_k(self) -> float:
        """alpha_K: OLS slope of k.a on position (vector units per token)."""

    @property
    def drift_slope_q(self) -> float:
        """alpha_Q: OLS slope of q.a on position."""

    @property
    def drift_query_mean(self) -> float:
        """mu_Q^a: the mean of q.a (vector units)."""

    @property
    def drift_key_mean(self) -> float:
        """mu_K^a: the mean of k.a."""

    @property
    def drift_r_q(self) -> float:
        """Pearson r of q.a with position."""

    @property
    def drift_r_k(self) -> float:
        """Pearson r of k.a with position."""

    @property
    def separation(self) -> float:
        """(mu_Q - mu_K) . b."""

    @property
    def bias_strength(self) -> float:
        """mu_Q^a alpha_K (head_metrics.csv bias_strength)."""

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def planar_rotation(queries: numpy.typing.ArrayLike, query_positions: numpy.typing.ArrayLike, keys: numpy.typing.ArrayLike, key_positions: numpy.typing.ArrayLike) -> PlanarRotation:
    """
    The planar rotation model of docs/method.md §8.5: the drift direction a, the separation
    direction b, the drift slopes, the query centroid on a and bias_strength = mu_Q^a alpha_K.
    Returns PlanarRotation.

    queries (n_q x d) and keys (n_k x d): float32/float64, read in place when C-contiguous; query_positions (n_q) and key_positions (n_k): any real or integer array (converted to float64).
    """

class PcaRoles:
    """The PCA roles of a head (docs/method.md §8.5)."""

    @property
    def component(self) -> Annotated[NDArray[numpy.float64], dict(writable=False)]:
        """
        PC0 of the pooled queries and keys, float64 [d], unit, sign-canonicalized.
        """

    @property
    def explained_variance_ratio(self) -> float:
        """lambda_0 / trace of the covariance."""

    @property
    def r_q(self) -> float:
        """Pearson r of the queries' projections on PC0 with position (pc0_r_q)."""

    @property
    def r_k(self) -> float:
        """Pearson r of the keys' projections on PC0 with position (pc0_r_k)."""

    @property
    def pca_class(self) -> str:
        """
        'position_dominated', 'q_positional', 'content_focused', 'mixed', or 'nan' (head_metrics.csv pca_class).
        """

    def __repr__(self) -> str: ...

    def to_dict(self) -> dict:
        """
        The fields by name (numbers as numbers, arrays as arrays, nested results as they are).
        """

def pca_roles(queries: numpy.typing.ArrayLike, query_positions: numpy.typing.ArrayLike, keys: numpy.typing.ArrayLike, key_positions: numpy.typing.ArrayLike) -> PcaRoles:
    """
    The PCA roles of docs/method.md §8.5: PC0 of the pooled queries and keys, the correlations
    r_q, r_k of each kind's projections with position (the larger in magnitude positive) and the
    class by the thresholds 0.7 and 0.3. Returns PcaRoles.

    queries (n_q x d) and keys (n_k x d): float32/float64, read in place when C-contiguous; query_positions (n_q) and key_positions (n_k): any real or integer array (converted to float64).
    """

def result_schema() -> dict:
    """
    The columns of each table of docs/method.md §3 as ap_analyze writes them: {table name: [(column,
    'int64', 'float64' or 'str')]}, from the C++ CSV writer's own definition (include/attention_plasticity/io/csv_rows.hpp).
    """

def result_columns(results: Iterable) -> dict:
    """
    The rows of the head results `results` (HeadResult, in the order given) in every table of
    docs/method.md §3, as columns: {table name: {column: NumPy array}} (float64 or int64, the very
    numbers the CSV writer formats). attention_plasticity.tables() makes DataFrames of them.
    """
