"""
The companion measures of docs/method.md §8.5 (planar rotation, PCA roles) and the comparison
of result sets (§8.6).
"""

from typing import Annotated

import numpy
import numpy.typing
from numpy.typing import NDArray


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
