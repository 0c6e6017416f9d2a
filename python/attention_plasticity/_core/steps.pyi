"""
The steps of the method (docs/method.md §2.1-2.15) and the statistics of §7 they use.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, overload

import numpy
import numpy.typing
from numpy.typing import NDArray

import attention_plasticity._core.kernel


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

    def __init__(self, q_bucket: int, k_bucket: int, pairs: attention_plasticity._core.kernel.KeyPairs) -> None:
        """A cell's pairs given by hand (KeyPairs of rows of the keys)."""

    @property
    def q_bucket(self) -> int:
        """j."""

    @property
    def k_bucket(self) -> int:
        """c."""

    @property
    def pairs(self) -> attention_plasticity._core.kernel.KeyPairs:
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
    def moments(self) -> attention_plasticity._core.kernel.PairMoments:
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
        """
        HeadId(layer, q_head, k_head); each an index >= 0 (InvalidArgumentError otherwise).
        """

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
