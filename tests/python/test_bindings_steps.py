"""Every step of docs/method.md §2 bound in the Python package, against NumPy/SciPy written from
the method's statement (and tests/reference/ap_random.py for the streams), then the steps
composed in Python, which must reproduce analyze_head bit for bit (each formula has one home).

Run: .venv/bin/python -m pytest -q tests/python/test_bindings_steps.py
"""

import math

import numpy as np
import pytest
from scipy import stats

import bindings_util  # noqa: F401  (paths)
import attention_plasticity as ap
from ap_random import Xoshiro256ss, mix_seed, sample_without_replacement


def head(seed=0, n_q=900, n_k=800, d=10, examples=3, bucket_size=40, dtype=np.float64):
    """A small synthetic head: queries drifting with position, keys in a few examples."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(d)

    def tokens(n):
        length = n // examples
        n = length * examples
        position = np.tile(np.arange(length), examples)
        example_id = np.repeat(np.arange(examples), length)
        x = rng.standard_normal((n, d)) * rng.uniform(0.5, 2, d) + 0.01 * np.outer(position, direction)
        return x.astype(dtype), position.astype(np.int64), (position // bucket_size).astype(np.int64), \
            example_id.astype(np.int64)

    return tokens(n_q), tokens(n_k)


# ---------------------------------------------------------------------------
# §2.1-2.2
# ---------------------------------------------------------------------------

def test_orientation_signs():
    (_, _, _, _), (k, _, kb, _) = head(1)
    k[:, 3] -= 5.0
    signs = ap.steps.orientation_signs(k, kb)
    means = np.array([k[kb == c].mean(axis=0) for c in np.unique(kb)]).mean(axis=0)
    np.testing.assert_array_equal(signs, np.where(means < 0, -1.0, 1.0))
    assert signs[3] == -1.0
    assert ap.steps.orientation_signs(np.zeros((3, 2)), [0, 1, 1]).tolist() == [1.0, 1.0]
    with pytest.raises(ap.InvalidArgumentError,
                       match="orientation_signs: key_buckets has 2 entries but keys has 3 rows"):
        ap.steps.orientation_signs(np.zeros((3, 2)), [0, 1])


@pytest.mark.parametrize("n,max_rows,seed", [(10, 20, 0), (100, 30, 5), (7, 7, 1)])
def test_subsample_rows(n, max_rows, seed):
    got = ap.steps.subsample_rows(n, max_rows, seed)
    want = sorted(sample_without_replacement(n, max_rows, seed)) if n > max_rows else list(range(n))
    assert got.tolist() == want


def test_seeds():
    h = ap.HeadId(layer=3, q_head=5, k_head=1)
    s = ap.steps.seeds_of_head(2**64 - 3, h)
    assert s.pair_sampler == ap.steps.pair_sampler_seed(2**64 - 3, h) == (2**64 - 3 + 10007 * 3 + 379 * 5) % 2**64
    assert s.query_subsample == mix_seed(2**64 - 3, ord("q"))
    assert s.key_subsample == mix_seed(2**64 - 3, ord("k"))
    assert s.noise_components == 2**64 - 3
    assert ap.steps.cell_pair_seed(123, 4, -2) == mix_seed(123, 4, (-2) % 2**64)


@pytest.mark.parametrize("field", ["layer", "q_head", "k_head"])
def test_head_id_refuses_a_negative_index(field):
    # Issue 25: HeadId(-1, 0, 0) was accepted (and seeded the pair sampler of no head).
    with pytest.raises(ap.InvalidArgumentError, match="HeadId: %s must be >= 0, got -1" % field):
        ap.HeadId(**{field: -1})
    h = ap.HeadId(1, 2, 0)
    with pytest.raises(ap.InvalidArgumentError, match="HeadId: %s must be >= 0, got -3" % field):
        setattr(h, field, -3)
    assert (h.layer, h.q_head, h.k_head) == (1, 2, 0)
    setattr(h, field, 4)
    assert getattr(h, field) == 4


# ---------------------------------------------------------------------------
# §2.3-2.9
# ---------------------------------------------------------------------------

def reference_fit(t, x):
    t = np.asarray(t, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    tc, xc = t - t.mean(), x - x.mean(axis=0)
    beta = tc @ xc / (tc @ tc)
    alpha = x.mean(axis=0) - beta * t.mean()
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant column: 0 / 0
        r2 = np.minimum(1, (tc @ xc) ** 2 / ((tc @ tc) * (xc * xc).sum(axis=0)))
    return alpha, beta, r2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fit_linear(dtype):
    (q, t, _, _), _ = head(2, dtype=dtype)
    q = q.copy()
    q[:, 4] = 2.5  # a constant column: R2 = 0 (docs/method.md §2.3)
    fit = ap.steps.fit_linear(t, q)
    alpha, beta, r2 = reference_fit(t, q)
    r2[4], beta[4], alpha[4] = 0.0, 0.0, 2.5
    np.testing.assert_allclose(fit.alpha, alpha, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(fit.r2, r2, rtol=1e-10, atol=1e-15)
    assert fit.r2_mean == pytest.approx(r2.mean(), rel=1e-12)
    assert fit.beta_norm == pytest.approx(np.linalg.norm(beta), rel=1e-12)
    assert fit.regressor_varies
    flat = ap.steps.fit_linear(np.full(len(t), 3), q)
    assert not flat.regressor_varies and flat.beta_norm == 0.0
    np.testing.assert_array_equal(ap.steps.fit_linear(t.astype(np.float64), q).r2, fit.r2)


def test_scalar_position_predictability():
    (q, t, _, _), _ = head(3)
    beta = ap.steps.fit_linear(t, q).beta
    sp = ap.steps.scalar_position_predictability(t, q, beta)
    y = np.log2(t + 1.0)
    s = q @ (beta / np.linalg.norm(beta))
    b, a = np.polyfit(s, y, 1)
    assert sp.r2 == pytest.approx(stats.pearsonr(s, y)[0] ** 2, rel=1e-9)
    assert sp.mae_baseline == pytest.approx(np.abs(y - y.mean()).mean(), rel=1e-12)
    assert sp.mae_projection == pytest.approx(np.abs(y - a - b * s).mean(), rel=1e-9)
    assert sp.mae_ratio == pytest.approx(sp.mae_projection / sp.mae_baseline, rel=1e-14)
    zero = ap.steps.scalar_position_predictability(t, q, np.zeros(q.shape[1]))
    assert zero.r2 == 0 and zero.mae_ratio == 1 and zero.mae_projection == zero.mae_baseline


def test_householder():
    rng = np.random.default_rng(4)
    beta = rng.standard_normal(9)
    h = ap.steps.householder_to_e1(beta)
    H = h.matrix()
    np.testing.assert_allclose(H @ (beta / np.linalg.norm(beta)), np.eye(9)[0], atol=1e-15)
    np.testing.assert_allclose(H @ H, np.eye(9), atol=1e-15)
    np.testing.assert_allclose(H, H.T, atol=0)
    x = rng.standard_normal((40, 9))
    np.testing.assert_allclose(h.apply(x), x @ H, atol=1e-14)
    assert h.apply(x.astype(np.float32)).dtype == np.float32
    assert h.apply(x.astype(np.float32), dtype="float64").dtype == np.float64
    u = beta / np.linalg.norm(beta) - np.eye(9)[0]
    np.testing.assert_allclose(h.v, u / np.linalg.norm(u), rtol=0, atol=4e-16)
    ident = ap.steps.householder_to_e1(np.r_[1e-13, np.zeros(8)])
    assert ident.is_identity() and ident.v.size == 0
    np.testing.assert_array_equal(ident.apply(x), x)
    with pytest.raises(ap.InvalidArgumentError, match="householder::apply: X must be n x 9"):
        h.apply(np.ones((2, 3)))


def test_fit_position_component_and_normality():
    (q, t, _, _), _ = head(5)
    c = ap.steps.fit_position_component(t, q)
    alpha, beta, _ = reference_fit(t, q[:, :1])
    resid = q[:, 0] - (alpha[0] + beta[0] * t)
    assert c.alpha == pytest.approx(alpha[0], rel=1e-12) and c.beta == pytest.approx(beta[0], rel=1e-12)
    np.testing.assert_allclose(c.residual, resid, atol=1e-12)
    assert c.residual_variance == pytest.approx(np.var(resid, ddof=1), rel=1e-12)
    first = ap.steps.standardized_normality(c.residual)
    z = (resid - resid.mean()) / resid.std(ddof=1)
    assert first.skewness == pytest.approx(stats.skew(resid, bias=False), rel=1e-9)
    assert first.excess_kurtosis == pytest.approx(stats.kurtosis(resid, bias=False), rel=1e-9)
    assert first.ks_p_value == pytest.approx(stats.kstest(z, "norm").pvalue, abs=1e-6)
    const = ap.steps.standardized_normality(np.full(10, 0.1))
    assert (const.skewness, const.excess_kurtosis, const.ks_p_value) == (0.0, 0.0, 1.0)

    noise = ap.steps.noise_normality(q[:, 1:], 64, 0.01, 0)
    cols = q[:, 1:]
    assert noise.n_components == 9 and noise.n_ks_tested == 9
    assert noise.median_abs_skewness == pytest.approx(np.median(np.abs(stats.skew(cols, bias=False))), rel=1e-9)
    assert noise.median_abs_kurtosis == pytest.approx(np.median(np.abs(stats.kurtosis(cols, bias=False))), rel=1e-9)
    p = [stats.kstest((c - c.mean()) / c.std(ddof=1), "norm").pvalue for c in cols.T]
    assert noise.median_ks_p_value == pytest.approx(np.median(p), abs=1e-6)
    assert noise.fraction_ks_p_below_alpha == np.mean(np.array(p) < 0.01)
    some = ap.steps.noise_normality(q[:, 1:], 4, 0.5, 7)
    tested = sample_without_replacement(9, 4, 7)
    assert some.median_ks_p_value == pytest.approx(np.median([p[i] for i in tested]), abs=1e-6)
    assert all(math.isnan(v) for v in (lambda r: (r.median_abs_skewness, r.median_ks_p_value))(
        ap.steps.noise_normality(np.zeros((5, 0)), 64, 0.01, 0)))


def test_moments_and_ks():
    rng = np.random.default_rng(6)
    x = rng.gamma(2.0, size=500)
    m = ap.steps.sample_moments(x)
    assert m.mean == pytest.approx(x.mean(), rel=1e-14)
    assert m.std_ddof1 == pytest.approx(x.std(ddof=1), rel=1e-13)
    assert m.skewness == pytest.approx(stats.skew(x, bias=False), rel=1e-11) == ap.steps.skewness(x)
    assert m.excess_kurtosis == pytest.approx(stats.kurtosis(x, bias=False), rel=1e-11) == ap.steps.excess_kurtosis(x)
    assert not m.zero_variance and ap.steps.sample_moments(np.full(4, 1.0 / 3)).zero_variance
    ks = ap.steps.ks_test_normal(x - 2)
    ref = stats.kstest(x - 2, "norm")
    assert ks.statistic == pytest.approx(ref.statistic, abs=1e-14)
    assert ks.p_value == pytest.approx(ref.pvalue, abs=1e-6)
    for n, d in ((10, 0.2), (200, 0.05), (5000, 0.03), (100, 0.9)):
        assert ap.steps.kolmogorov_sf(n, d) == pytest.approx(stats.kstwo.sf(d, n), abs=2e-8)
        assert ap.steps.kolmogorov_cdf(n, d) == pytest.approx(stats.kstwo.cdf(d, n), abs=2e-8)
        assert ap.steps.kolmogorov_sf_exact(n, d) == pytest.approx(stats.kstwo.sf(d, n), abs=1e-10)
        assert ap.steps.smirnov_sf(n, d) == pytest.approx(stats.ksone.sf(d, n), rel=1e-9, abs=1e-300)
    with pytest.raises(ap.InvalidArgumentError, match="kolmogorov_sf"):
        ap.steps.kolmogorov_sf(0, 0.5)
    with pytest.raises(ap.DomainError, match=r"sample_moments: x has a non-finite value \(nan\) at index 1"):
        ap.steps.sample_moments([1.0, math.nan])


def test_component_weights():
    r2 = np.array([0.0, 0.3, 0.1, 0.6])
    np.testing.assert_allclose(ap.steps.component_weights(r2), r2 / r2.sum(), rtol=1e-15)
    np.testing.assert_array_equal(ap.steps.component_weights(np.zeros(4)), np.full(4, 0.25))
    np.testing.assert_array_equal(ap.steps.component_weights(np.array([0, 1], dtype=np.int32)), [0.0, 1.0])


# ---------------------------------------------------------------------------
# §2.10-2.14
# ---------------------------------------------------------------------------

def test_query_buckets_and_models():
    (q, t, b, _), _ = head(7, bucket_size=100)
    b = b.copy()
    b[:3] = -1      # a negative bucket: no model
    b[3] = 99       # a single-query bucket: no model
    qb = ap.steps.query_buckets(t, b)
    want = [j for j in sorted(set(b.tolist())) if j > 0 and (b == j).sum() >= 2]
    assert [x.bucket for x in qb] == want
    assert [x.n_queries for x in qb] == [(b == j).sum() for j in want]
    np.testing.assert_allclose([x.tau for x in qb], [t[b == j].mean() for j in want], rtol=1e-15)
    comp = ap.steps.PositionComponentFit(0.5, 0.01, 2.0)
    models = ap.steps.bucket_query_models(t, b, q, comp)
    for model, j in zip(models, want):
        rows = q[b == j]
        assert model.position_mean == pytest.approx(0.5 + 0.01 * model.tau, rel=1e-15)
        assert model.position_variance == 2.0
        np.testing.assert_allclose(model.semantic.mean, rows[:, 1:].mean(axis=0), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(model.semantic.covariance, np.cov(rows[:, 1:].T) + 1e-12 * np.eye(9),
                                   rtol=1e-11, atol=1e-13)
        g = ap.steps.full_gaussian(model)
        assert g.mean[0] == model.position_mean and g.covariance[0, 0] == 2.0
        assert not g.covariance[0, 1:].any()
    stats_ = ap.steps.compute_bucket_statistics(t, b, q, ap.steps.BucketOptions(min_bucket=-5, first_component=0))
    assert [s.bucket for s in stats_] == [j for j in sorted(set(b.tolist())) if (b == j).sum() >= 2]
    assert [s.semantic.mean.size for s in stats_] == [10] * len(stats_)
    g = ap.steps.fit_gaussian(q, epsilon=0.0)
    np.testing.assert_allclose(g.covariance, np.cov(q.T), rtol=1e-11, atol=1e-13)


def test_key_buckets_eligibility_and_cell_pairs():
    _, (k, t, b, e) = head(8, n_k=600, bucket_size=25)
    kb = ap.steps.group_key_buckets(t, b, e)
    assert [x.bucket for x in kb] == sorted(set(b.tolist()))
    for x in kb:
        assert x.max_position == t[b == x.bucket].max()
        groups = x.examples
        rows = np.flatnonzero(b == x.bucket)
        assert sorted(groups.rows.tolist()) == rows.tolist()
        assert groups.example_id.tolist() == sorted(set(e[rows].tolist()))
        for i in range(groups.count()):
            members = groups.rows[groups.offsets[i]:groups.offsets[i + 1]]
            assert (e[members] == groups.example_id[i]).all() and (np.diff(t[members]) >= 0).all()
    # docs/method.md §2.11
    assert ap.steps.eligible_key_buckets(kb, 4, 110.0, 0).tolist() == [0, 1, 2, 3]
    window = ap.steps.eligible_key_buckets(kb, 5, 130.0, 40)
    want = [i for i, x in enumerate(kb) if x.bucket < 5 and (x.bucket == 4 or x.max_position > 130.0 - 40)]
    assert window.tolist() == want and 3 in want and 0 not in want
    # §2.12: the per-bucket sampler from the cell's own stream
    seed = ap.steps.pair_sampler_seed(3, ap.HeadId(1, 2, 0))
    cell = ap.steps.cell_key_pairs(kb[2], 5, 64, 0.1, seed)
    rows = np.flatnonzero(b == kb[2].bucket)
    local = ap.kernel.sample_bucket_key_pairs(t[rows], e[rows], 64, 0.1, ap.kernel.Rng(ap.steps.cell_pair_seed(seed, 5, kb[2].bucket)))
    np.testing.assert_array_equal(cell.pairs.first, rows[local.first])
    np.testing.assert_array_equal(cell.pairs.second, rows[local.second])
    grouped = ap.kernel.sample_grouped_key_pairs(kb[2].examples, 64, 0.1, ap.kernel.Rng(ap.steps.cell_pair_seed(seed, 5, kb[2].bucket)))
    np.testing.assert_array_equal(grouped.first, cell.pairs.first)
    np.testing.assert_array_equal(grouped.second, cell.pairs.second)
    assert (cell.q_bucket, cell.k_bucket) == (5, kb[2].bucket)
    # §2.13-2.14: one bucket's cells against NumPy
    mu1 = np.linspace(-0.2, 0.3, 9)
    a = np.random.default_rng(9).standard_normal((9, 9))
    model = ap.steps.BucketQueryModel(5, 30, 130.0, 0.3, 0.9, ap.steps.Gaussian(mu1, a @ a.T / 9 + 0.1 * np.eye(9)))
    cells = [ap.steps.cell_key_pairs(kb[c], 5, 50, 0.1, seed) for c in range(5)]
    result = ap.steps.query_bucket_plasticity(k, cells, model)
    full = ap.steps.full_gaussian(model)
    pps = []
    for c, out in zip(cells, result.cells):
        w = k[c.pairs.first] - k[c.pairs.second]
        m, v = w @ full.mean, np.einsum("ij,jk,ik->i", w, full.covariance, w)
        tail = stats.norm.sf(np.abs(m / np.sqrt(v)))
        pp = 4 * tail * (1 - tail)
        pps.append(pp)
        assert out.n_pairs == 50 and out.plasticity == pytest.approx(pp.mean(), rel=1e-10)
    assert result.plasticity == pytest.approx(np.concatenate(pps).mean(), rel=1e-10)
    assert result.n_pairs == 250


def test_plasticity_aggregates():
    tau = np.array([10.0, 50.0, 150.0, 190.0, 199.0])
    n = np.array([4, 5, 6, 7, 8])
    ap_j = np.array([0.9, math.nan, 0.5, 0.4, 0.3])
    agg = ap.steps.plasticity_aggregates(tau, n, ap_j, 200.0)
    ok = ~np.isnan(ap_j)
    assert agg.ap_overall == pytest.approx((n * ap_j)[ok].sum() / n[ok].sum(), rel=1e-15)
    assert agg.ap_first20 == 0.9
    late = ok & (tau >= 160)
    assert agg.ap_last20 == pytest.approx((n * ap_j)[late].sum() / n[late].sum(), rel=1e-15)
    assert agg.ap_drop == agg.ap_first20 - agg.ap_last20
    empty = ap.steps.plasticity_aggregates([], [], [], 10.0)
    assert math.isnan(empty.ap_overall)
    with pytest.raises(ap.DomainError, match=r"plasticity_aggregates: n_queries\[0\] = -1 must be finite and >= 0"):
        ap.steps.plasticity_aggregates([1.0], [-1.0], [0.5], 10.0)


# ---------------------------------------------------------------------------
# The steps composed in Python = analyze_head, bit for bit
# ---------------------------------------------------------------------------

def compose(queries, keys, head_id, options):
    (qx, qt, qb, _), (kx, kt, kb, ke) = queries, keys
    seeds = ap.steps.seeds_of_head(options.seed, head_id)
    signs = ap.steps.orientation_signs(kx, kb)                                          # §2.1
    q_rows = ap.steps.subsample_rows(len(qt), options.max_tokens_per_head, seeds.query_subsample)  # §2.2
    k_rows = ap.steps.subsample_rows(len(kt), options.max_tokens_per_head, seeds.key_subsample)
    xq = qx[q_rows].astype(np.float64) * signs
    t, b = qt[q_rows], qb[q_rows]
    fit = ap.steps.fit_linear(t, xq)                                                    # §2.3
    scalar = ap.steps.scalar_position_predictability(t, xq, fit.beta)                   # §2.4
    h = ap.steps.householder_to_e1(fit.beta)                                            # §2.5
    xq_rot = h.apply(xq)
    xk_rot = h.apply(kx[k_rows].astype(np.float64) * signs)
    c0 = ap.steps.fit_position_component(t, xq_rot)                                     # §2.6
    first = ap.steps.standardized_normality(c0.residual)                                # §2.7
    noise = ap.steps.noise_normality(xq_rot[:, 1:], options.normality_max_dims, options.p_alpha,
                               seeds.noise_components)                            # §2.8
    weights = ap.steps.component_weights(fit.r2)                                        # §2.9
    models = ap.steps.bucket_query_models(t, b, xq_rot, c0, options.covariance_epsilon)  # §2.10
    key_buckets = ap.steps.group_key_buckets(kt[k_rows], kb[k_rows], ke[k_rows])
    profile, cells = [], []
    for model in models:
        eligible = ap.steps.eligible_key_buckets(key_buckets, model.bucket, model.tau, options.sliding_window)  # §2.11
        pairs = [ap.steps.cell_key_pairs(key_buckets[c], model.bucket, options.num_pairs_per_bucket,
                                   options.max_rel_dist, seeds.pair_sampler) for c in eligible]  # §2.12
        bucket = ap.steps.query_bucket_plasticity(xk_rot, pairs, model)                # §2.13
        cells += [(c.q_bucket, c.k_bucket, c.plasticity, c.n_pairs) for c in bucket.cells]
        profile.append((model.bucket, model.tau, model.n_queries, bucket.plasticity, bucket.n_pairs))
    agg = ap.steps.plasticity_aggregates([p[1] for p in profile], [p[2] for p in profile],
                                   [p[3] for p in profile], t.max() + 1.0)        # §2.14
    metrics = (len(t), len(k_rows), xq.shape[1], fit.r2_mean, fit.beta_norm, scalar.r2, scalar.mae_baseline,
               scalar.mae_projection, scalar.mae_ratio, first.skewness, first.excess_kurtosis, first.ks_p_value,
               noise.median_abs_skewness, noise.median_abs_kurtosis, noise.median_ks_p_value,
               noise.fraction_ks_p_below_alpha, agg.ap_overall, agg.ap_first20, agg.ap_last20, agg.ap_drop)
    return metrics, cells, profile, fit.r2, weights


@pytest.mark.parametrize("window,max_tokens,dtype", [(0, 50000, np.float64), (60, 500, np.float32)])
def test_steps_composed_in_python_equal_analyze_head(window, max_tokens, dtype):
    queries, keys = head(11, n_q=1200, n_k=1000, d=12, dtype=dtype)
    head_id = ap.HeadId(2, 7, 3)
    options = ap.HeadOptions(max_tokens_per_head=max_tokens, normality_max_dims=5, seed=17,
                             num_pairs_per_bucket=40, max_rel_dist=0.1, sliding_window=window)
    metrics, cells, profile, r2, weights = compose(queries, keys, head_id, options)
    result = ap.analyze_head(ap.Tokens(*queries[:3]), ap.Tokens(*keys), head_id, options)
    m = result.metrics
    got = (m.n_q_tokens, m.n_k_tokens, m.d_model, m.q_R2_pos, m.q_beta_norm, m.q_R2_scalar, m.q_mae_baseline,
           m.q_mae_proj, m.q_mae_ratio, m.q_resid0_skew, m.q_resid0_kurt, m.q_resid0_ks_p, m.q_noise_med_abs_skew,
           m.q_noise_med_abs_kurt, m.q_noise_med_ks_p, m.q_noise_frac_ks_p_lt_alpha, m.ap_overall, m.ap_first20,
           m.ap_last20, m.ap_drop)
    np.testing.assert_array_equal(np.array(got, dtype=np.float64), np.array(metrics, dtype=np.float64))
    np.testing.assert_array_equal(np.array([(c.q_bucket, c.k_bucket, c.plasticity, c.n_pairs)
                                            for c in result.cells]), np.array(cells))
    np.testing.assert_array_equal(np.array([(p.q_bucket, p.tau, p.n_queries, p.plasticity, p.n_pairs)
                                            for p in result.profile]), np.array(profile))
    np.testing.assert_array_equal(result.component_r2, r2)
    np.testing.assert_array_equal(result.component_weight, weights)
    assert len(cells) > 10 and (window == 0 or len(cells) < len(profile) * (len(profile) + 1) / 2)
