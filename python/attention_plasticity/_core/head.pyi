"""
The per-head analysis: Tokens, HeadId, HeadOptions, analyze_head and HeadResult.
"""

from typing import Annotated

import numpy
import numpy.typing
from numpy.typing import NDArray

import attention_plasticity._core.extensions
import attention_plasticity._core.steps


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

    def __init__(self, *, max_tokens_per_head: int = 50000, normality_max_dims: int = 64, p_alpha: float = 0.01, seed: int = 0, num_pairs_per_bucket: int = 256, max_rel_dist: float = 0.05, min_bucket_queries: int = 16, distance_map: bool = True, distance_map_extra_pairs: int = 0, distance_bins_per_octave: int = 1, empirical_ap: bool = False, empirical_max_queries: int = 0, confidence_intervals: bool = False, planar_rotation: bool = True, pca_roles: bool = False, confidence_level: float = 0.95, sampling_unit: str = 'sequence', sequence_influences: bool = False, covariance_epsilon: float = 1e-12, sliding_window: int = 0, threads: int = 1) -> None:
        """
        The options, by keyword (None: the default); defaults as docs/method.md §2 and §8. Each value
        is checked as ap_analyze checks its flag (UsageError naming the keyword).
        """

    @property
    def max_tokens_per_head(self) -> int:
        """subsample queries (keys) above this many [50000]"""

    @max_tokens_per_head.setter
    def max_tokens_per_head(self, arg: object, /) -> None: ...

    @property
    def normality_max_dims(self) -> int:
        """noise components with a KS test [64]"""

    @normality_max_dims.setter
    def normality_max_dims(self, arg: object, /) -> None: ...

    @property
    def p_alpha(self) -> float:
        """KS significance level, in [0, 1] [0.01]"""

    @p_alpha.setter
    def p_alpha(self, arg: object, /) -> None: ...

    @property
    def seed(self) -> int:
        """seed of subsampling, KS component choice and pair sampling [0]"""

    @seed.setter
    def seed(self, arg: object, /) -> None: ...

    @property
    def num_pairs_per_bucket(self) -> int:
        """key pairs per (query bucket, key bucket) cell [256]"""

    @num_pairs_per_bucket.setter
    def num_pairs_per_bucket(self, arg: object, /) -> None: ...

    @property
    def max_rel_dist(self) -> float:
        """pair window as a fraction of the example length, in [0, 1] [0.05]"""

    @max_rel_dist.setter
    def max_rel_dist(self, arg: object, /) -> None: ...

    @property
    def min_bucket_queries(self) -> int:
        """
        query buckets with fewer queries are flagged (small_bucket) and left out of the aggregates and intervals (§2.14) [16]
        """

    @min_bucket_queries.setter
    def min_bucket_queries(self, arg: object, /) -> None: ...

    @property
    def distance_map(self) -> bool:
        """head_distance_plasticity.csv, PP by key and query distance (§8.1) [on]"""

    @distance_map.setter
    def distance_map(self, arg: object, /) -> None: ...

    @property
    def distance_map_extra_pairs(self) -> int:
        """extra pairs per cell for the distance map, own streams (§8.1) [0]"""

    @distance_map_extra_pairs.setter
    def distance_map_extra_pairs(self, arg: object, /) -> None: ...

    @property
    def distance_bins_per_octave(self) -> int:
        """bins of the distance map per doubling of distance, 1-1024 (§8.1) [1]"""

    @distance_bins_per_octave.setter
    def distance_bins_per_octave(self, arg: object, /) -> None: ...

    @property
    def empirical_ap(self) -> bool:
        """
        model-free AP from the actual queries, pairs x queries GEMMs (§8.2) [off]
        """

    @empirical_ap.setter
    def empirical_ap(self, arg: object, /) -> None: ...

    @property
    def empirical_max_queries(self) -> int:
        """
        queries per bucket for the empirical AP, seeded subsample; 0 = all (§8.2) [0]
        """

    @empirical_max_queries.setter
    def empirical_max_queries(self, arg: object, /) -> None: ...

    @property
    def confidence_intervals(self) -> bool:
        """standard errors, bias and intervals of AP_j and ap_* (§8.3) [off]"""

    @confidence_intervals.setter
    def confidence_intervals(self, arg: object, /) -> None: ...

    @property
    def planar_rotation(self) -> bool:
        """
        head_metrics.csv bias_strength, drift_slope_k, drift_query_mean (§8.5) [on]
        """

    @planar_rotation.setter
    def planar_rotation(self, arg: object, /) -> None: ...

    @property
    def pca_roles(self) -> bool:
        """
        head_metrics.csv pc0_r_q, pc0_r_k, pca_class: a SYRK of the vectors (§8.5) [off]
        """

    @pca_roles.setter
    def pca_roles(self, arg: object, /) -> None: ...

    @property
    def confidence_level(self) -> float:
        """level of the intervals, in (0, 1) (§8.3) [0.95]"""

    @confidence_level.setter
    def confidence_level(self, arg: object, /) -> None: ...

    @property
    def sampling_unit(self) -> str:
        """
        what the standard errors take as independent draws: the sequences (example_id: their queries, keys and pairs dependent) or the tokens (queries independent given position, keys fixed; for synthetic data) (§8.3) [sequence]
        """

    @sampling_unit.setter
    def sampling_unit(self, arg: object, /) -> None: ...

    @property
    def sequence_influences(self) -> bool:
        """
        head_sequence_influence.csv: each sequence's influence on ap_* and AP_j, for paired comparisons (§8.3, §8.6) [off]
        """

    @sequence_influences.setter
    def sequence_influences(self, arg: object, /) -> None: ...

    @property
    def covariance_epsilon(self) -> float:
        """ridge added to the diagonal of Sigma_j (§2.10), finite, >= 0 [1e-12]"""

    @covariance_epsilon.setter
    def covariance_epsilon(self, arg: object, /) -> None: ...

    @property
    def sliding_window(self) -> int:
        """the head's sliding window in tokens (§2.11); <= 0: none [0]"""

    @sliding_window.setter
    def sliding_window(self, arg: object, /) -> None: ...

    @property
    def threads(self) -> int:
        """
        threads for this one head, the calling thread included; 0 or 1: one; the results are identical for any number (analyze_dump sets it when there are fewer heads than threads) [1]
        """

    @threads.setter
    def threads(self, arg: object, /) -> None: ...

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
    def ap_first20_se(self) -> float:
        """Standard error of ap_first20 (§8.3)."""

    @property
    def ap_first20_bias(self) -> float:
        """Estimated bias of ap_first20 (§8.3)."""

    @property
    def ap_last20_se(self) -> float:
        """Standard error of ap_last20 (§8.3)."""

    @property
    def ap_last20_bias(self) -> float:
        """Estimated bias of ap_last20 (§8.3)."""

    @property
    def ap_drop_se(self) -> float:
        """
        Standard error of ap_drop, with the covariance of its two terms (§8.3).
        """

    @property
    def ap_drop_bias(self) -> float:
        """Estimated bias of ap_drop (§8.3)."""

    @property
    def context_length(self) -> float:
        """
        C of §2.14: the largest kept query position + 1 (ap_first20: tau_j < 0.2 C; ap_last20: >= 0.8 C).
        """

    @property
    def n_sequences(self) -> int:
        """
        The head's sequences (distinct example ids of its kept queries and keys) when the intervals are
        on (§8.3); 0 otherwise.
        """

    @property
    def n_documents(self) -> int:
        """
        The documents of those examples (the sequence unit of §8.3; = n_sequences when each example is
        its own document) when the intervals are on; 0 otherwise.
        """

    @property
    def bias_strength(self) -> float:
        """mu_Q^a alpha_K of the planar rotation model (§8.5)."""

    @property
    def bias_strength_se(self) -> float:
        """
        Sequence-level standard error of bias_strength: the delete-one-sequence jackknife (§8.5, §8.3).
        """

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
    def id(self) -> attention_plasticity._core.steps.HeadId:
        """The head (HeadId)."""

    @property
    def metrics(self) -> HeadMetrics:
        """HeadMetrics."""

    @property
    def cells(self) -> list[attention_plasticity._core.steps.CellPlasticity]:
        """
        list of CellPlasticity (head_bucket_plasticity.csv), by q_bucket then k_bucket.
        """

    @property
    def profile(self) -> list[BucketProfile]:
        """list of BucketProfile (head_profile.csv), by q_bucket."""

    @property
    def distance_map(self) -> list[attention_plasticity._core.extensions.DistancePlasticityBin]:
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

    def csv_rows(self) -> dict:
        """
        The head's rows of each CSV of docs/method.md §3, formatted as ap_analyze writes them, with the
        header: {table name: text}.
        """

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

def analyze_head(queries: Tokens, keys: Tokens, head: attention_plasticity._core.steps.HeadId = ..., options: HeadOptions = ..., timings: bool = False) -> HeadResult:
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
