"""The extensions of docs/method.md §8 bound in the Python package: the distance maps (§8.1), the
empirical AP (§8.2), the sensitivity of AP_j, the pair-sampling variance and the intervals (§8.3),
each against NumPy/SciPy written from the method's statement (tests/reference/ap_random.py for
the streams; finite differences for the sensitivities), with errors that name the function and
the argument; then the extension steps composed in Python, which must reproduce analyze_head's
extension results bit for bit (each formula has one home; the C++ standard errors themselves are
checked against an independent NumPy computation by tests/test_intervals.cpp).

Run: .venv/bin/python -m pytest -q tests/python/test_bindings_extensions.py
"""

import math

import numpy as np
import pytest
from scipy import special, stats

import bindings_util  # noqa: F401  (paths)
import attention_plasticity as ap
from ap_random import MASK64, Xoshiro256ss, mix_seed
from test_bindings_steps import head


def g(z):
    """PP as a function of z = m / sqrt(v): 4 Phi(z) Phi(-z) (docs/method.md §4.1)."""
    return 4.0 * special.ndtr(z) * special.ndtr(-z)


def pp_of(w, mean, cov):
    """PP of the rows of w under N(mean, cov), with the degenerate rule of §4.1."""
    m = w @ mean
    v = np.einsum("pi,ij,pj->p", w, cov, w)
    out = np.where(m == 0, 1.0, 0.0)
    positive = v > 0
    out[positive] = g(m[positive] / np.sqrt(v[positive]))
    return out


# ---------------------------------------------------------------------------
# §8.1 distance maps
# ---------------------------------------------------------------------------

def reference_bin(x, b):
    """-1 below 0, 0 in [0, 1), else the k >= 1 with 2^((k-1)/b) <= x < 2^(k/b): counted by
    comparisons with the edges (no logarithm)."""
    edges = 2.0 ** (np.arange(0, 64 * b + 1) / b)  # 2^(k/b), k = 0..64b
    return -1 if x < 0 else int(np.searchsorted(edges, x, side="right"))


@pytest.mark.parametrize("b", [1, 3, 1024])
def test_log_distance_bins(b):
    # powers of 2 lie on edges of every b (exact); the others away from every edge
    for x in [-5.0, -1e-300, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 1000.0, 2.0 ** 40, 1.0001 * 2.0 ** (7 / 3)]:
        k = ap.extensions.log_distance_bin(x, b)
        assert k == reference_bin(x, b), (x, b)
        edges = ap.extensions.log_distance_bin_edges(k, b)
        assert edges.low <= x < edges.high
        if k >= 1:
            assert edges.low == pytest.approx(2.0 ** ((k - 1) / b), rel=1e-15)
            assert edges.high == pytest.approx(2.0 ** (k / b), rel=1e-15)
    assert (ap.extensions.log_distance_bin_edges(-1).low, ap.extensions.log_distance_bin_edges(-1).high) == (-math.inf, 0.0)
    assert ap.extensions.max_bins_per_octave == 1024
    with pytest.raises(ap.DomainError, match="log_distance_bin: distance must be finite, got nan"):
        ap.extensions.log_distance_bin(math.nan)
    with pytest.raises(ap.InvalidArgumentError, match="log_distance_bin_edges: bin must be >= -1, got -2"):
        ap.extensions.log_distance_bin_edges(-2)
    with pytest.raises(ap.InvalidArgumentError, match="log_distance_bin: bins_per_octave"):
        ap.extensions.log_distance_bin(1.0, 0)


def key_setup(seed=0, n=600):
    rng = np.random.default_rng(seed)
    positions = np.tile(np.arange(n // 3), 3).astype(np.int64)
    examples = np.repeat(np.arange(3), n // 3).astype(np.int64)
    buckets = (positions // 50).astype(np.int64)
    keys = rng.standard_normal((n, 6))
    return keys, positions, buckets, examples, ap.steps.group_key_buckets(positions, buckets, examples)


def test_cell_pair_distances_and_the_map():
    keys, positions, buckets, examples, key_buckets = key_setup()
    cells = [ap.steps.cell_key_pairs(key_buckets[c], 3, 40, 0.2, 77) for c in range(3)]
    tau = 170.25
    d = ap.extensions.cell_pair_distances(positions, cells, tau)
    first = np.concatenate([c.pairs.first for c in cells])
    second = np.concatenate([c.pairs.second for c in cells])
    np.testing.assert_array_equal(d.key_distance, np.abs(positions[first] - positions[second]).astype(float))
    np.testing.assert_array_equal(d.query_distance, tau - (positions[first] + positions[second]) / 2.0)
    # the map: mean PP and count of every non-empty bin, in increasing (key_bin, query_bin)
    pp = np.random.default_rng(1).uniform(0, 1, len(first))
    for b in (1, 2):
        bins = ap.extensions.distance_plasticity_map(d.key_distance, d.query_distance, pp, bins_per_octave=b)
        kb = np.array([reference_bin(x, b) for x in d.key_distance])
        qb = np.array([reference_bin(x, b) for x in d.query_distance])
        want = sorted({(k, q) for k, q in zip(kb, qb)})
        assert [(x.key_bin, x.query_bin) for x in bins] == want
        for x in bins:
            inside = (kb == x.key_bin) & (qb == x.query_bin)
            assert x.n_pairs == inside.sum()
            assert x.plasticity == pytest.approx(pp[inside].mean(), rel=1e-15, abs=0)
            edges = ap.extensions.log_distance_bin_edges(x.key_bin, b)
            assert (x.key_distance.low, x.key_distance.high) == (edges.low, edges.high)
    # integer distances are read as float64; errors name the argument and the entry
    assert len(ap.extensions.distance_plasticity_map([0, 3], [5, -2], [0.5, 1])) == 2
    with pytest.raises(ap.DomainError, match=r"distance_plasticity_map: key_distance\[1\] = -1 is negative"):
        ap.extensions.distance_plasticity_map([0.0, -1.0], [1.0, 1.0], [0.5, 0.5])
    with pytest.raises(ap.DomainError, match=r"distance_plasticity_map: plasticity\[0\] = 1.5 is outside \[0, 1\]"):
        ap.extensions.distance_plasticity_map([0.0], [1.0], [1.5])
    with pytest.raises(ap.InvalidArgumentError, match="distance_plasticity_map: key_distance, query_distance and "
                                                      "plasticity must have one entry per pair, got 2, 1 and 2"):
        ap.extensions.distance_plasticity_map([0.0, 1.0], [1.0], [0.5, 0.5])
    with pytest.raises(ap.InvalidArgumentError, match=r"cell_pair_distances: cells\[0\] pair 0 uses key row"):
        ap.extensions.cell_pair_distances(positions[:1], cells, tau)
    with pytest.raises(ap.DomainError, match="cell_pair_distances: tau must be finite"):
        ap.extensions.cell_pair_distances(positions, cells, math.inf)


def test_extension_streams_and_extra_pairs():
    for s, j, c in [(0, 1, 0), (12345, 4, 3), (MASK64, 7, -1)]:
        assert ap.extensions.distance_map_pair_seed(s, j, c) == mix_seed(s, j & MASK64, c & MASK64, 1)
        assert ap.extensions.empirical_query_seed(s, j) == mix_seed(s, j & MASK64, 0, 2)
    _, _, _, _, key_buckets = key_setup()
    kb = key_buckets[2]
    extra = ap.extensions.distance_map_cell_pairs(kb, 5, 30, 0.2, 99)
    # the sampler of §5 over the bucket's examples, from the extra pairs' own stream
    want = ap.kernel.sample_grouped_key_pairs(kb.examples, 30, 0.2, ap.kernel.Rng(ap.extensions.distance_map_pair_seed(99, 5, kb.bucket)))
    np.testing.assert_array_equal(extra.pairs.first, want.first)
    np.testing.assert_array_equal(extra.pairs.second, want.second)
    method = ap.steps.cell_key_pairs(kb, 5, 30, 0.2, 99)
    assert not np.array_equal(extra.pairs.first, method.pairs.first)
    assert (extra.q_bucket, extra.k_bucket) == (5, kb.bucket)
    with pytest.raises(ap.InvalidArgumentError, match="distance_map_cell_pairs: max_rel_dist"):
        ap.extensions.distance_map_cell_pairs(kb, 5, 30, -1.0, 99)


def test_bucket_key_differences():
    keys, _, _, _, key_buckets = key_setup()
    cells = [ap.steps.cell_key_pairs(key_buckets[c], 4, 25, 0.2, 5) for c in range(3)]
    first = np.concatenate([c.pairs.first for c in cells])
    second = np.concatenate([c.pairs.second for c in cells])
    np.testing.assert_array_equal(ap.extensions.bucket_key_differences(keys, cells), keys[first] - keys[second])
    w32 = ap.extensions.bucket_key_differences(keys, cells, dtype="float32")
    assert w32.dtype == np.float32
    np.testing.assert_array_equal(w32, (keys[first] - keys[second]).astype(np.float32))
    with pytest.raises(ap.InvalidArgumentError, match=r"bucket_key_differences: cells\[0\] pair 0 uses key row"):
        ap.extensions.bucket_key_differences(keys[:2], cells)


# ---------------------------------------------------------------------------
# §8.2 empirical AP
# ---------------------------------------------------------------------------

def empirical_case(seed=3, n=60, p=40, d=5):
    """Small integers: every score q.w is exact, so ties are exact zeros in any precision."""
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, (n, d)).astype(float), rng.integers(-2, 3, (p, d)).astype(float)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_preferences_and_empirical_plasticity(dtype):
    q, w = empirical_case()
    scores = q @ w.T
    n = len(q)
    share = ((scores > 0).sum(axis=0) + 0.5 * (scores == 0).sum(axis=0)) / n
    ties = (scores == 0).sum(axis=0) / n
    assert ties.max() > 0  # the case has ties
    prefs = ap.extensions.pair_preferences(q.astype(dtype), w.astype(dtype))
    np.testing.assert_allclose(prefs.preference, share, rtol=1e-15, atol=0)
    np.testing.assert_allclose(prefs.tie_fraction, ties, rtol=1e-15, atol=0)
    assert prefs.n_queries == n
    unbiased = (4 * share * (1 - share) * n - ties) / (n - 1)
    np.testing.assert_allclose(ap.extensions.empirical_plasticity_from_preferences(prefs), unbiased, rtol=1e-14, atol=1e-15)
    got = ap.extensions.empirical_pair_plasticity(q.astype(dtype), w.astype(dtype))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, unbiased, rtol=1e-14, atol=1e-15)
    assert ap.extensions.empirical_pair_plasticity(q, w, result_dtype="float32").dtype == np.float32
    # the variance of the mean over the query sample: (16 / n) var(f, ddof=1)
    s = np.where(scores > 0, 1.0, np.where(scores == 0, 0.5, 0.0))
    f = s @ ((1.0 - 2.0 * share) / len(w))
    want = 16.0 / n * np.var(f, ddof=1)
    assert ap.extensions.empirical_plasticity_variance(q, w, prefs) == pytest.approx(want, rel=1e-12)
    # made by hand: the same numbers
    again = ap.extensions.EmpiricalPreferences(share, ties, n)
    np.testing.assert_array_equal(ap.extensions.empirical_plasticity_from_preferences(again),
                                  ap.extensions.empirical_plasticity_from_preferences(prefs))


def test_empirical_plasticity_is_unbiased_for_4p1mp():
    """Monte Carlo: over many samples of n queries, the mean estimate is 4 p (1 - p) within 4
    standard errors of the mean (p from the exact Gaussian law of q.w)."""
    rng = np.random.default_rng(8)
    w = np.array([[1.0, 0.5, 0.0], [0.2, -1.0, 0.3]])
    mean = np.array([0.3, 0.1, -0.2])
    n, reps = 8, 4000
    estimates = np.array([ap.extensions.empirical_pair_plasticity(rng.standard_normal((n, 3)) + mean, w) for _ in range(reps)])
    truth = g((w @ mean) / np.linalg.norm(w, axis=1))
    se = estimates.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < 4 * se)


def test_query_bucket_empirical_plasticity():
    keys, _, _, _, key_buckets = key_setup(n=300)
    keys = np.round(keys * 2)  # small integers again
    cells = [ap.steps.cell_key_pairs(key_buckets[c], 9, 30, 0.3, 5) for c in range(len(key_buckets))]
    cells.append(ap.steps.CellPairs(9, 99, ap.kernel.KeyPairs([], [], [])))  # a cell without pairs
    q = np.random.default_rng(2).integers(-3, 4, (50, 6)).astype(float)
    r = ap.extensions.query_bucket_empirical_plasticity(keys, cells, q)
    w = ap.extensions.bucket_key_differences(keys, cells)
    pp = ap.extensions.empirical_pair_plasticity(q, w)
    np.testing.assert_array_equal(r.pair_plasticity, pp)
    at = 0
    for cell, c in zip(r.cells, cells):
        count = len(c.pairs)
        assert cell.n_pairs == count
        if count:
            assert cell.plasticity == pytest.approx(pp[at:at + count].mean(), rel=1e-14)
        else:
            assert math.isnan(cell.plasticity)
        at += count
    assert r.plasticity == pytest.approx(pp.mean(), rel=1e-14) and r.n_pairs == len(pp)
    assert len(r.moments) == 0
    with pytest.raises(ap.InvalidArgumentError,
                       match="query_bucket_empirical_plasticity: bucket_queries have d = 5 columns but keys_rot has "
                             "d = 6"):
        ap.extensions.query_bucket_empirical_plasticity(keys, cells, q[:, :5])


def test_empirical_errors_name_the_argument():
    q, w = empirical_case()
    with pytest.raises(ap.InvalidArgumentError,
                       match="pair_preferences: queries have d = 4 columns but differences have d = 5"):
        ap.extensions.pair_preferences(q[:, :4], w)
    with pytest.raises(ap.InvalidArgumentError, match="empirical_pair_plasticity: needs at least 2 queries, got 1"):
        ap.extensions.empirical_pair_plasticity(q[:1], w)
    bad = q.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ap.DomainError, match="pair_preferences: queries"):
        ap.extensions.pair_preferences(bad, w)
    with pytest.raises(ap.InvalidArgumentError, match="empirical_plasticity_from_preferences: needs n_queries >= 2"):
        ap.extensions.empirical_plasticity_from_preferences(ap.extensions.EmpiricalPreferences([0.5], [0.0], 1))
    with pytest.raises(ap.DomainError, match="empirical_plasticity_from_preferences: pair 0: preference 1.5"):
        ap.extensions.empirical_plasticity_from_preferences(ap.extensions.EmpiricalPreferences([1.5], [0.0], 5))
    with pytest.raises(ap.InvalidArgumentError, match="empirical_plasticity_variance: preferences are of 40 pairs"):
        ap.extensions.empirical_plasticity_variance(q[:10], w, ap.extensions.pair_preferences(q, w))
    with pytest.raises(ap.InvalidArgumentError, match="pair_preferences: dtype must be None"):
        ap.extensions.pair_preferences(q, w, dtype="int8")


# ---------------------------------------------------------------------------
# §8.3 sensitivity, pair-sampling variance, intervals
# ---------------------------------------------------------------------------

def model_case(seed=4, d=5, p=120):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((d - 1, d - 1))
    sigma = a @ a.T / d + 0.2 * np.eye(d - 1)
    model = ap.steps.BucketQueryModel(3, 40, 100.0, 0.4, 0.8, ap.steps.Gaussian(rng.standard_normal(d - 1) * 0.3, sigma))
    w = rng.standard_normal((p, d))
    return w, model


def ap_of(w, mu0, sigma2, mu, sigma):
    mean = np.concatenate([[mu0], mu])
    cov = np.zeros((len(mean), len(mean)))
    cov[0, 0] = sigma2
    cov[1:, 1:] = sigma
    return pp_of(w, mean, cov).mean()


def test_bucket_plasticity_sensitivity_is_the_derivative_of_ap_j():
    w, model = model_case()
    mu, sigma = model.semantic.mean.copy(), model.semantic.covariance.copy()
    moments = ap.kernel.structured_pair_moments(w, model.position_mean, model.position_variance, mu, sigma)
    s = ap.extensions.bucket_plasticity_sensitivity(w, moments, model)
    h = 1e-6

    def central(f):
        return (f(h) - f(-h)) / (2 * h)

    base = (model.position_mean, model.position_variance, mu, sigma)
    assert s.position_mean == pytest.approx(central(lambda e: ap_of(w, base[0] + e, base[1], mu, sigma)), rel=1e-6)
    assert s.position_variance == pytest.approx(
        central(lambda e: ap_of(w, base[0], base[1] + e, mu, sigma)), rel=1e-6)
    for i in range(len(mu)):
        e_i = np.eye(len(mu))[i]
        assert s.semantic_mean[i] == pytest.approx(
            central(lambda e: ap_of(w, base[0], base[1], mu + e * e_i, sigma)), rel=1e-6, abs=1e-9)
        for k in range(len(mu)):
            bump = np.outer(e_i, np.eye(len(mu))[k])
            bump = (bump + bump.T) / 2  # symmetric: d/de tr(M bump) = M_ik
            assert s.semantic_covariance[i, k] == pytest.approx(
                central(lambda e: ap_of(w, base[0], base[1], mu, sigma + e * bump)), rel=1e-5, abs=1e-9)
    # b = sum_p B_p w0 w_sem and the bias coefficients, from g' and g'' written out here
    m, v = w[:, 0] * base[0] + w[:, 1:] @ mu, w[:, 0] ** 2 * base[1] + np.einsum("pi,ij,pj->p", w[:, 1:], sigma,
                                                                                    w[:, 1:])
    z = m / np.sqrt(v)
    phi, big, small = stats.norm.pdf(z), special.ndtr(z), special.ndtr(-z)
    g1 = 4 * phi * (small - big)
    g2 = 4 * (-z * phi * (small - big) - 2 * phi ** 2)
    big_b = -g1 * z / (2 * len(w) * v)
    np.testing.assert_allclose(s.mixed, (big_b * w[:, 0]) @ w[:, 1:], rtol=1e-10, atol=1e-15)
    assert s.bias_per_position_mean_variance == pytest.approx(np.mean(g2 / 2 * w[:, 0] ** 2 / v), rel=1e-10)
    assert s.bias_per_position_variance_shift == pytest.approx(np.mean(-z * g1 * w[:, 0] ** 2 / (2 * v)), rel=1e-10)
    assert s.bias_per_position_variance_variance == pytest.approx(
        np.mean((3 * z * g1 + z ** 2 * g2) / 8 * w[:, 0] ** 4 / v ** 2), rel=1e-10)
    with pytest.raises(ap.InvalidArgumentError, match="bucket_plasticity_sensitivity: moments have 119 means"):
        ap.extensions.bucket_plasticity_sensitivity(w, ap.kernel.PairMoments(moments.mean[1:], moments.variance[1:]), model)
    with pytest.raises(ap.InvalidArgumentError, match="bucket_plasticity_sensitivity: differences has d = 4 columns"):
        ap.extensions.bucket_plasticity_sensitivity(w[:, :4], moments, model)


def test_pair_sampling_variance():
    _, _, _, _, key_buckets = key_setup()
    cells = [ap.steps.cell_key_pairs(key_buckets[c], 4, n, 0.2, 5) for c, n in zip(range(3), (30, 0, 45))]
    sizes = [len(c.pairs) for c in cells]
    pp = np.random.default_rng(0).uniform(0, 1, sum(sizes))
    parts = np.split(pp, np.cumsum(sizes)[:-1])
    want = sum(len(x) * np.var(x, ddof=1) for x in parts if len(x)) / sum(sizes) ** 2
    assert ap.extensions.pair_sampling_variance(pp, cells) == pytest.approx(want, rel=1e-13)
    one = [ap.steps.cell_key_pairs(key_buckets[0], 4, 1, 0.2, 5)]
    assert math.isnan(ap.extensions.pair_sampling_variance([0.5], one))
    assert math.isnan(ap.extensions.pair_sampling_variance([], []))
    with pytest.raises(ap.InvalidArgumentError,
                       match="pair_sampling_variance: pair_plasticity has 3 entries but the cells hold 75 pairs"):
        ap.extensions.pair_sampling_variance(pp[:3], cells)


def test_plasticity_interval():
    for est, bias, se, level in [(0.5, 0.01, 0.05, 0.95), (0.02, -0.001, 0.03, 0.9), (0.99, 0.0, 0.2, 0.5)]:
        z = stats.norm.ppf(0.5 + 0.5 * level)
        got = ap.extensions.plasticity_interval(est, bias, se, level)
        assert got.low == pytest.approx(min(1, max(0, est - bias - z * se)), rel=1e-14, abs=1e-16)
        assert got.high == pytest.approx(min(1, max(0, est - bias + z * se)), rel=1e-14, abs=1e-16)
    assert math.isnan(ap.extensions.plasticity_interval(math.nan, 0.0, 0.1).low)
    with pytest.raises(ap.InvalidArgumentError, match=r"plasticity_interval: level must be in \(0, 1\), got 1"):
        ap.extensions.plasticity_interval(0.5, 0.0, 0.1, 1.0)
    with pytest.raises(ap.DomainError, match="plasticity_interval: standard_error must be >= 0, got -0.1"):
        ap.extensions.plasticity_interval(0.5, 0.0, -0.1)


# ---------------------------------------------------------------------------
# The options and results of analyze_head
# ---------------------------------------------------------------------------

def test_head_options_of_the_extensions():
    o = ap.HeadOptions()
    assert (o.distance_map, o.distance_map_extra_pairs, o.distance_bins_per_octave, o.empirical_ap,
            o.empirical_max_queries, o.confidence_intervals, o.confidence_level) == (True, 0, 1, False, 0, False, 0.95)
    o = ap.HeadOptions(distance_map=False, distance_map_extra_pairs=7, distance_bins_per_octave=3, empirical_ap=True,
                       empirical_max_queries=50, confidence_intervals=True, confidence_level=0.9, seed=4)
    assert (o.distance_map, o.distance_map_extra_pairs, o.distance_bins_per_octave, o.empirical_ap,
            o.empirical_max_queries, o.confidence_intervals, o.confidence_level, o.seed) == (
        False, 7, 3, True, 50, True, 0.9, 4)
    assert "empirical_ap=True" in repr(o) and "confidence_level=0.9" in repr(o)
    # ap_analyze's and analyze_dump's: the library's with the intervals on
    d = ap._core.dump.analyze_default_options()
    assert d.confidence_intervals and repr(d) == repr(ap.HeadOptions(confidence_intervals=True))
    (qx, qt, qb, _), keys = head(1)
    # refused by HeadOptions itself, as by analyze_dump and ap_analyze (the same check)
    with pytest.raises(ap.InvalidArgumentError,
                       match=r"^HeadOptions: distance_bins_per_octave: 0 must be >= 1 and <= 1024$"):
        ap.analyze_head(ap.Tokens(qx, qt, qb), ap.Tokens(*keys), options=ap.HeadOptions(distance_bins_per_octave=0))
    with pytest.raises(ap.InvalidArgumentError,
                       match=r"^HeadOptions: confidence_level: 1.5 is not strictly between 0 and 1$"):
        ap.analyze_head(ap.Tokens(qx, qt, qb), ap.Tokens(*keys), options=ap.HeadOptions(confidence_level=1.5))


def compose_extensions(queries, keys, head_id, options):
    """analyze_head's extensions (docs/method.md §8) from the bound steps: the distance map, the
    empirical AP_j and its standard error, the intervals of every AP_j and of ap_overall."""
    (qx, qt, qb, _), (kx, kt, kb, ke) = queries, keys
    seeds = ap.steps.seeds_of_head(options.seed, head_id)
    signs = ap.steps.orientation_signs(kx, kb)
    q_rows = ap.steps.subsample_rows(len(qt), options.max_tokens_per_head, seeds.query_subsample)
    k_rows = ap.steps.subsample_rows(len(kt), options.max_tokens_per_head, seeds.key_subsample)
    xq = qx[q_rows].astype(np.float64) * signs
    t, b = qt[q_rows], qb[q_rows]
    fit = ap.steps.fit_linear(t, xq)
    h = ap.steps.householder_to_e1(fit.beta)
    xq_rot, xk_rot = h.apply(xq), h.apply(kx[k_rows].astype(np.float64) * signs)
    c0 = ap.steps.fit_position_component(t, xq_rot)
    models = ap.steps.bucket_query_models(t, b, xq_rot, c0, options.covariance_epsilon)
    key_buckets = ap.steps.group_key_buckets(kt[k_rows], kb[k_rows], ke[k_rows])
    distances, pps, estimates, empirical, empirical_variance, cells_empirical = [], [], [], [], [], []
    for model in models:
        eligible = ap.steps.eligible_key_buckets(key_buckets, model.bucket, model.tau, options.sliding_window)
        cells = [ap.steps.cell_key_pairs(key_buckets[c], model.bucket, options.num_pairs_per_bucket, options.max_rel_dist,
                                   seeds.pair_sampler) for c in eligible]
        bucket = ap.steps.query_bucket_plasticity(xk_rot, cells, model)
        w = ap.extensions.bucket_key_differences(xk_rot, cells)
        distances.append(ap.extensions.cell_pair_distances(kt[k_rows], cells, model.tau))
        pps.append(bucket.pair_plasticity)
        extra = [ap.extensions.distance_map_cell_pairs(key_buckets[c], model.bucket, options.distance_map_extra_pairs,
                                            options.max_rel_dist, seeds.pair_sampler) for c in eligible]
        distances.append(ap.extensions.cell_pair_distances(kt[k_rows], extra, model.tau))
        pps.append(ap.steps.query_bucket_plasticity(xk_rot, extra, model).pair_plasticity)
        rows = np.flatnonzero(b == model.bucket)
        picked = ap.steps.subsample_rows(len(rows), options.empirical_max_queries or len(rows),
                                   ap.extensions.empirical_query_seed(seeds.pair_sampler, model.bucket))
        if bucket.n_pairs:
            queries_j = xq_rot[rows[picked]]
            e = ap.extensions.query_bucket_empirical_plasticity(xk_rot, cells, queries_j)
            cells_empirical += [c.plasticity for c in e.cells]
            empirical.append(e.plasticity)
            empirical_variance.append(
                ap.extensions.empirical_plasticity_variance(queries_j, w, ap.extensions.pair_preferences(queries_j, w))
                + ap.extensions.pair_sampling_variance(e.pair_plasticity, cells))
            pair_variance = ap.extensions.pair_sampling_variance(bucket.pair_plasticity, cells)
        else:
            cells_empirical += [math.nan] * len(cells)
            empirical.append(math.nan)
            empirical_variance.append(math.nan)
            pair_variance = math.nan
        estimates.append(ap.extensions.BucketEstimate(bucket.plasticity,
                                           ap.extensions.bucket_plasticity_sensitivity(w, bucket.moments, model), pair_variance))
    u = ap.extensions.plasticity_standard_errors(t, b, xq_rot, c0, fit.beta_norm, list(models), estimates)
    distance_map = ap.extensions.distance_plasticity_map(np.concatenate([d.key_distance for d in distances]),
                                              np.concatenate([d.query_distance for d in distances]),
                                              np.concatenate(pps), options.distance_bins_per_octave)
    n = np.array([m.n_queries for m in models], dtype=float)
    defined = ~np.isnan(empirical)
    empirical_overall = ap.steps.plasticity_aggregates([m.tau for m in models], n, empirical, t.max() + 1.0).ap_overall
    empirical_se = math.sqrt(np.sum(n[defined] ** 2 * np.array(empirical_variance)[defined])) / n[defined].sum()
    return distance_map, u, empirical, empirical_variance, cells_empirical, empirical_overall, empirical_se


@pytest.mark.parametrize("window,max_tokens,dtype", [(0, 50000, np.float64), (60, 500, np.float32)])
def test_extensions_composed_in_python_equal_analyze_head(window, max_tokens, dtype):
    queries, keys = head(11, n_q=1200, n_k=1000, d=12, dtype=dtype)
    head_id = ap.HeadId(2, 7, 3)
    options = ap.HeadOptions(max_tokens_per_head=max_tokens, normality_max_dims=5, seed=17, num_pairs_per_bucket=40,
                             max_rel_dist=0.1, sliding_window=window, distance_map_extra_pairs=15,
                             distance_bins_per_octave=2, empirical_ap=True, empirical_max_queries=20,
                             confidence_intervals=True, confidence_level=0.9,
                             sampling_unit="token")  # the token-level errors, which the Python steps compose
    result = ap.analyze_head(ap.Tokens(*queries[:3]), ap.Tokens(*keys), head_id, options)
    distance_map, u, empirical, empirical_variance, cells_empirical, empirical_overall, empirical_se = \
        compose_extensions(queries, keys, head_id, options)
    got = [(x.key_bin, x.query_bin, x.key_distance.low, x.key_distance.high, x.query_distance.low,
            x.query_distance.high, x.plasticity, x.n_pairs) for x in result.distance_map]
    want = [(x.key_bin, x.query_bin, x.key_distance.low, x.key_distance.high, x.query_distance.low,
             x.query_distance.high, x.plasticity, x.n_pairs) for x in distance_map]
    assert got == want and len(got) > 5
    profile = result.profile
    np.testing.assert_array_equal([p.plasticity_se for p in profile], u.bucket_standard_error)
    np.testing.assert_array_equal([p.plasticity_bias for p in profile], u.bucket_bias)
    for p in profile:
        ci = ap.extensions.plasticity_interval(p.plasticity, p.plasticity_bias, p.plasticity_se, 0.9)
        np.testing.assert_array_equal([p.plasticity_ci_low, p.plasticity_ci_high], [ci.low, ci.high])
    np.testing.assert_array_equal([p.plasticity_empirical for p in profile], empirical)
    np.testing.assert_array_equal([p.plasticity_empirical_se for p in profile], np.sqrt(empirical_variance))
    np.testing.assert_array_equal([c.plasticity_empirical for c in result.cells], cells_empirical)
    m = result.metrics
    ci = ap.extensions.plasticity_interval(m.ap_overall, u.bias, u.standard_error, 0.9)
    np.testing.assert_array_equal([m.ap_overall_se, m.ap_overall_bias, m.ap_overall_ci_low, m.ap_overall_ci_high],
                                  [u.standard_error, u.bias, ci.low, ci.high])
    assert m.ap_empirical_overall == empirical_overall
    assert m.ap_empirical_overall_se == pytest.approx(empirical_se, rel=1e-14)
    assert 0 < m.ap_overall_se < 0.2 and m.ap_overall_ci_low <= m.ap_overall <= m.ap_overall_ci_high + abs(u.bias)
    # the metrics row and the new columns of the CSVs carry the same doubles
    tables = result.tables()
    for column in ("ap_empirical_overall", "ap_empirical_overall_se", "ap_overall_se", "ap_overall_bias",
                   "ap_overall_ci_low", "ap_overall_ci_high"):
        assert tables["head_metrics"][column][0] == getattr(m, column)
    np.testing.assert_array_equal(tables["head_profile"]["plasticity_se"], u.bucket_standard_error)
    np.testing.assert_array_equal(tables["head_distance_plasticity"]["plasticity"], [x[6] for x in want])
    np.testing.assert_array_equal(tables["head_bucket_plasticity"]["plasticity_empirical"], cells_empirical)
    assert result.timings is None


def test_extensions_off_leave_the_method_alone_and_nan():
    queries, keys = head(5, n_q=900, n_k=800)
    q, k = ap.Tokens(*queries[:3]), ap.Tokens(*keys)
    off = ap.analyze_head(q, k, options=ap.HeadOptions(distance_map=False))
    on = ap.analyze_head(q, k, options=ap.HeadOptions(empirical_ap=True, confidence_intervals=True,
                                                      distance_map_extra_pairs=10))
    assert off.distance_map == [] and len(on.distance_map) > 0
    assert math.isnan(off.metrics.ap_overall_se) and math.isnan(off.metrics.ap_empirical_overall)
    assert all(math.isnan(p.plasticity_ci_low) for p in off.profile)
    for name in ("ap_overall", "ap_first20", "ap_last20", "q_R2_pos"):
        assert getattr(on.metrics, name) == getattr(off.metrics, name)
    assert [c.plasticity for c in on.cells] == [c.plasticity for c in off.cells]
    timed = ap.analyze_head(q, k, options=ap.HeadOptions(empirical_ap=True), timings=True)
    assert timed.timings.extensions > 0
