"""
The extensions of docs/method.md §8: distance maps, the empirical AP, standard errors and intervals.
"""

from collections.abc import Sequence
from typing import Annotated

import numpy
import numpy.typing
from numpy.typing import NDArray

import attention_plasticity._core.kernel
import attention_plasticity._core.steps


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

def cell_pair_distances(key_positions: numpy.typing.ArrayLike, cells: Sequence[attention_plasticity._core.steps.CellPairs], tau: float) -> PairDistances:
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

def distance_map_cell_pairs(keys: attention_plasticity._core.steps.KeyBucket, q_bucket: int, num_pairs: int, max_rel_dist: float, pair_sampler_seed: int) -> attention_plasticity._core.steps.CellPairs:
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

def query_bucket_empirical_plasticity(keys_rot: numpy.typing.ArrayLike, cells: Sequence[attention_plasticity._core.steps.CellPairs], bucket_queries: numpy.typing.ArrayLike, dtype: object | None = None) -> attention_plasticity._core.steps.BucketPlasticityResult:
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

def bucket_plasticity_sensitivity(differences: numpy.typing.ArrayLike, moments: attention_plasticity._core.kernel.PairMoments, model: attention_plasticity._core.steps.BucketQueryModel) -> BucketSensitivity:
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

def pair_sampling_variance(pair_plasticity: numpy.typing.ArrayLike, cells: Sequence[attention_plasticity._core.steps.CellPairs]) -> float:
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

def plasticity_standard_errors(t: numpy.typing.ArrayLike, buckets: numpy.typing.ArrayLike, x_rot: numpy.typing.ArrayLike, component0: attention_plasticity._core.steps.PositionComponentFit, slope_norm: float, models: Sequence[attention_plasticity._core.steps.BucketQueryModel], estimates: Sequence[BucketEstimate]) -> PlasticityUncertainty:
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
