"""The kernel, the normal distribution function, the random streams and the key-pair sampler of
the Python package, against independent references: SciPy's normal distribution, NumPy
products, and the pure-Python streams and sampler of tests/reference (docs/method.md §4-§6).

Run: .venv/bin/python -m pytest -q tests/python/test_bindings_kernel.py
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

import bindings_util  # noqa: F401  (paths)
import attention_plasticity as ap
from ap_random import Xoshiro256ss, box_muller, mix_seed, sample_without_replacement


# ---------------------------------------------------------------------------
# Normal distribution (docs/method.md §4.7)
# ---------------------------------------------------------------------------

Z = np.concatenate([np.linspace(-37, 37, 2001), [0.0, -1e-300, 1e-300, 8.5, -8.5, 8.49, -8.51]])


def test_normal_cdf_and_sf_match_scipy_in_both_tails():
    np.testing.assert_allclose(ap.kernel.normal_cdf(Z), stats.norm.cdf(Z), rtol=1e-13, atol=0)
    np.testing.assert_allclose(ap.kernel.normal_sf(Z), stats.norm.sf(Z), rtol=1e-13, atol=0)
    np.testing.assert_allclose(ap.kernel.normal_cdf_fast(Z), stats.norm.cdf(Z), rtol=0, atol=3e-15)


def test_plasticity_from_z_is_four_p_one_minus_p():
    tail = stats.norm.sf(np.abs(Z))
    np.testing.assert_allclose(ap.kernel.plasticity_from_z(Z), 4 * tail * (1 - tail), rtol=1e-12, atol=0)
    assert ap.kernel.plasticity_from_z(0.0) == 1.0
    assert ap.kernel.plasticity_from_z(math.inf) == 0.0
    assert math.isnan(ap.kernel.plasticity_from_z(math.nan))


def test_elementwise_shapes_and_types():
    z = np.arange(6.0).reshape(2, 3) - 2.5
    for f in (ap.kernel.normal_cdf, ap.kernel.normal_sf, ap.kernel.normal_cdf_fast, ap.kernel.plasticity_from_z):
        out = f(z)
        assert out.shape == (2, 3) and out.dtype == np.float64
        assert isinstance(f(0.5), float) and isinstance(f(1), float)
        np.testing.assert_array_equal(f(z.astype(np.float32)), f(z.astype(np.float32).astype(np.float64)))
        np.testing.assert_array_equal(f(torch.tensor(z)), out)
    assert ap.kernel.normal_cdf([0.0, 1.0]).shape == (2,)


# ---------------------------------------------------------------------------
# Random streams (docs/method.md §6)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 42, 2**64 - 1])
def test_rng_streams_equal_the_reference(seed):
    mine, ref = ap.kernel.Rng(seed), Xoshiro256ss(seed)
    assert [mine() for _ in range(20)] == [ref.next() for _ in range(20)]
    for bound in (1, 2, 7, 1000, 2**32 + 1, 2**63 + 5, 2**64 - 1):
        assert [mine.below(bound) for _ in range(5)] == [ref.below(bound) for _ in range(5)]
    assert [mine.uniform() for _ in range(10)] == [ref.uniform() for _ in range(10)]


def test_rng_errors():
    with pytest.raises(ap.InvalidArgumentError, match="Rng.below: bound must be >= 1, got 0"):
        ap.kernel.Rng(0).below(0)
    with pytest.raises(TypeError):
        ap.kernel.Rng(-1)


def test_normal_generator_is_box_muller():
    g = ap.kernel.NormalGenerator(7)
    assert [g() for _ in range(11)] == box_muller(7, 11)


@pytest.mark.parametrize("n,k,seed", [(100, 10, 3), (5, 5, 1), (5, 9, 1), (1000, 999, 2**40)])
def test_sample_without_replacement(n, k, seed):
    got = ap.kernel.sample_without_replacement(n, k, ap.kernel.Rng(seed))
    assert got.dtype == np.int64
    assert got.tolist() == sample_without_replacement(n, k, seed)


# ---------------------------------------------------------------------------
# Key-pair sampler (docs/method.md §5), written again from §5.1
# ---------------------------------------------------------------------------

def reference_pairs(lengths, num_pairs, max_rel_dist, g):
    usable = [b for b, L in enumerate(lengths) if L >= 2]
    cumulative = np.cumsum([lengths[b] for b in usable]).tolist()
    out = []
    for _ in range(num_pairs):
        ticket = g.below(cumulative[-1])
        b = usable[next(i for i, c in enumerate(cumulative) if c > ticket)]
        L = lengths[b]
        delta = max(1, min(math.floor(max_rel_dist * L), L))
        anchor = g.below(L)
        left, right = max(0, anchor - delta), min(L - 1, anchor + delta)
        j = left + g.below(right - left)
        j += j >= anchor
        out.append((b, anchor, j) if g.uniform() < 0.5 else (b, j, anchor))
    return out


@pytest.mark.parametrize("lengths,rho", [([400, 600], 0.05), ([1, 2, 0, 50, 3], 0.3), ([10], 0.0)])
def test_sample_key_pairs_equals_the_reference(lengths, rho):
    pairs = ap.kernel.sample_key_pairs(np.array(lengths, dtype=np.int32), 500, rho, ap.kernel.Rng(9))
    got = list(zip(pairs.example.tolist(), pairs.first.tolist(), pairs.second.tolist()))
    assert got == reference_pairs(lengths, 500, rho, Xoshiro256ss(9))
    assert len(pairs) == 500 and pairs.first.dtype == np.int64
    assert not pairs.first.flags.writeable


def test_sample_key_pairs_advances_the_shared_rng():
    rng = ap.kernel.Rng(5)
    a = ap.kernel.sample_key_pairs([30, 40], 10, 0.1, rng)
    b = ap.kernel.sample_key_pairs([30, 40], 10, 0.1, rng)
    ref = Xoshiro256ss(5)
    assert reference_pairs([30, 40], 10, 0.1, ref) == list(zip(a.example, a.first, a.second))
    assert reference_pairs([30, 40], 10, 0.1, ref) == list(zip(b.example, b.first, b.second))


def test_sample_bucket_key_pairs_groups_by_example_then_position():
    rng = np.random.default_rng(0)
    n = 60
    example_ids = rng.integers(0, 4, n) * 10 - 5
    positions = rng.integers(0, 25, n)  # ties inside an example keep row order
    pairs = ap.kernel.sample_bucket_key_pairs(positions, example_ids, 300, 0.2, ap.kernel.Rng(11))
    groups = [sorted(np.flatnonzero(example_ids == e).tolist(), key=lambda r: positions[r])
              for e in sorted(set(example_ids.tolist()))]
    ref = reference_pairs([len(g) for g in groups], 300, 0.2, Xoshiro256ss(11))
    assert [(groups[b][i], groups[b][j]) for b, i, j in ref] == list(zip(pairs.first, pairs.second))


def test_sampler_errors():
    with pytest.raises(ap.DomainError, match="sample_key_pairs: no example has 2 or more keys"):
        ap.kernel.sample_key_pairs([1, 0, 1], 3, 0.05, ap.kernel.Rng(0))
    with pytest.raises(ap.InvalidArgumentError, match=r"sample_key_pairs: lengths\[1\] = -2 is negative"):
        ap.kernel.sample_key_pairs([3, -2], 3, 0.05, ap.kernel.Rng(0))
    with pytest.raises(ap.InvalidArgumentError, match="max_rel_dist must be finite and >= 0, got -1"):
        ap.kernel.sample_key_pairs([3], 3, -1.0, ap.kernel.Rng(0))
    with pytest.raises(ap.InvalidArgumentError, match="sample_key_pairs: lengths must hold integers"):
        ap.kernel.sample_key_pairs([3.5, 2.0], 3, 0.1, ap.kernel.Rng(0))
    assert ap.kernel.pair_window(100, 0.05) == 5 and ap.kernel.pair_window(10, 0.05) == 1


# ---------------------------------------------------------------------------
# The kernel (docs/method.md §4)
# ---------------------------------------------------------------------------

def model(d, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((d, d))
    return rng.standard_normal(d) * 0.3, a @ a.T / d + 0.1 * np.eye(d)


def reference_pp(w, mu, sigma):
    w, mu, sigma = (np.asarray(x, dtype=np.float64) for x in (w, mu, sigma))
    m = w @ mu
    v = np.einsum("ij,jk,ik->i", w, sigma, w)
    tail = stats.norm.sf(np.abs(m / np.sqrt(v)))
    return 4 * tail * (1 - tail), m, v


def test_pair_plasticity_float64_equals_numpy():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((1000, 16))
    mu, sigma = model(16)
    pp = ap.kernel.pair_plasticity(w, mu, sigma)
    assert pp.dtype == np.float64 and pp.shape == (1000,)
    np.testing.assert_allclose(pp, reference_pp(w, mu, sigma)[0], rtol=1e-10, atol=1e-15)
    assert ap.kernel.head_plasticity(w, mu, sigma) == ap.kernel.mean_plasticity(pp)
    np.testing.assert_allclose(ap.kernel.head_plasticity(w, mu, sigma), pp.mean(), rtol=1e-14)


def test_pair_plasticity_precision_options():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((600, 24)).astype(np.float32)
    mu, sigma = model(24, seed=3)
    ref = reference_pp(w, mu, sigma)[0]
    single = ap.kernel.pair_plasticity(w, mu, sigma)
    assert single.dtype == np.float32  # the working type of the GEMM: float32, as W
    np.testing.assert_allclose(single, ref, rtol=2e-4, atol=1e-6)
    wide = ap.kernel.pair_plasticity(w, mu, sigma, result_dtype="float64")
    assert wide.dtype == np.float64
    np.testing.assert_array_equal(wide.astype(np.float32), single)
    double = ap.kernel.pair_plasticity(w, mu, sigma, dtype=np.float64)
    assert double.dtype == np.float64
    np.testing.assert_allclose(double, ref, rtol=1e-10, atol=1e-15)
    np.testing.assert_array_equal(ap.kernel.pair_plasticity(w, mu, sigma, dtype="float64"),
                                  ap.kernel.pair_plasticity(w.astype(np.float64), mu, sigma))
    with pytest.raises(ap.InvalidArgumentError, match="pair_plasticity: dtype must be None"):
        ap.kernel.pair_plasticity(w, mu, sigma, dtype="int8")


def test_torch_tensors_give_the_numpy_results():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((300, 8))
    mu, sigma = model(8, seed=5)
    for dt in (np.float32, np.float64):
        want = ap.kernel.pair_plasticity(w.astype(dt), mu.astype(dt), sigma.astype(dt))
        got = ap.kernel.pair_plasticity(torch.from_numpy(w.astype(dt)), torch.from_numpy(mu.astype(dt)),
                                 torch.from_numpy(sigma.astype(dt)))
        np.testing.assert_array_equal(got, want)
    # non-contiguous: converted once, same numbers
    wt = torch.from_numpy(np.asfortranarray(w))
    np.testing.assert_array_equal(ap.kernel.pair_plasticity(wt, mu, sigma), ap.kernel.pair_plasticity(w, mu, sigma))
    # requires_grad: read through .detach()
    wg = torch.tensor(w, requires_grad=True)
    np.testing.assert_array_equal(ap.kernel.pair_plasticity(wg, mu, sigma), ap.kernel.pair_plasticity(w, mu, sigma))
    # bfloat16 / float16: converted to float32
    wb = torch.from_numpy(w.astype(np.float32)).to(torch.bfloat16)
    np.testing.assert_array_equal(ap.kernel.pair_plasticity(wb, mu, sigma),
                                  ap.kernel.pair_plasticity(wb.float().numpy(), mu, sigma))
    assert ap.kernel.pair_plasticity(w.astype(np.float16), mu, sigma).dtype == np.float32


def test_structured_moments_equal_the_full_ones_and_numpy():
    rng = np.random.default_rng(6)
    d = 12
    w = rng.standard_normal((500, d))
    mu1, s1 = model(d - 1, seed=7)
    pm, pv = 0.4, 0.7
    s = moments = ap.kernel.structured_pair_moments(w, pm, pv, mu1, s1)
    full_mu = np.concatenate([[pm], mu1])
    full_sigma = np.zeros((d, d))
    full_sigma[0, 0] = pv
    full_sigma[1:, 1:] = s1
    _, m, v = reference_pp(w, full_mu, full_sigma)
    np.testing.assert_allclose(moments.mean, m, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(moments.variance, v, rtol=1e-12)
    full = ap.kernel.pair_moments_full(w, full_mu, full_sigma)  # uncoupled: the same structured path
    np.testing.assert_array_equal(full.mean, s.mean)
    np.testing.assert_array_equal(full.variance, s.variance)
    np.testing.assert_array_equal(ap.kernel.plasticity_from_moments(s), ap.kernel.pair_plasticity(w, full_mu, full_sigma))
    pp = ap.kernel.pair_plasticity_from_moments(s.mean, s.variance)
    np.testing.assert_array_equal(pp, ap.kernel.plasticity_from_moments(s))
    assert ap.kernel.plasticity_from_moments(s, result_dtype="float32").dtype == np.float32
    assert len(s) == 500


def test_degenerate_rule_and_moments_object():
    moments = ap.kernel.PairMoments([1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 0.0, -1.0])
    np.testing.assert_array_equal(ap.kernel.plasticity_from_moments(moments), [0.0, 0.0, 1.0, 1.0])
    assert ap.kernel.pair_plasticity_from_moments(2.0, 0.0) == 0.0
    assert ap.kernel.pair_plasticity_from_moments(0.0, 0.0) == 1.0
    # two identical keys: w = 0, m = v = 0, PP = 1 (docs/method.md §2.13)
    assert ap.kernel.pair_plasticity(np.zeros((1, 3)), np.ones(3), np.eye(3))[0] == 1.0


def test_extreme_magnitudes_are_rescaled_exactly():
    rng = np.random.default_rng(8)
    w = rng.standard_normal((200, 6))
    mu, sigma = model(6, seed=9)
    base = ap.kernel.pair_plasticity(w, mu, sigma)
    scales = ((2.0**300, 1, 1), (2.0**-600, 2.0**200, 2.0**400), (1, 2.0**-500, 2.0**-1000))
    for scale_w, scale_mu, scale_sigma in scales:
        np.testing.assert_allclose(ap.kernel.pair_plasticity(w * scale_w, mu * scale_mu, sigma * scale_sigma), base,
                                   rtol=1e-12, atol=0)


def test_key_differences():
    rng = np.random.default_rng(10)
    keys = rng.standard_normal((50, 7)).astype(np.float32)
    first = rng.integers(0, 50, 80)
    second = rng.integers(0, 50, 80).astype(np.int32)
    w = ap.kernel.key_differences(keys, first, second)
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, keys[first] - keys[second])
    w64 = ap.kernel.key_differences(keys, first, second, dtype="float64")
    np.testing.assert_array_equal(w64, keys[first].astype(np.float64) - keys[second])
    with pytest.raises(ap.InvalidArgumentError,
                       match=r"key_differences: first\[1\] = 50 is out of range for 50 keys"):
        ap.kernel.key_differences(keys, [0, 50], [1, 2])
    with pytest.raises(ap.InvalidArgumentError, match=r"second\[0\] = -1 is out of range"):
        ap.kernel.key_differences(keys, [0], [-1])
    keys[3, 2] = np.inf
    with pytest.raises(ap.DomainError,
                       match=r"key_differences: keys has a non-finite value \(inf\) at row 3, column 2"):
        ap.kernel.key_differences(keys, [3], [0])


def test_kernel_errors_name_the_function_and_argument():
    w = np.ones((4, 3))
    with pytest.raises(ap.InvalidArgumentError,
                       match="pair_plasticity: mean has 2 entries but differences has d = 3 columns"):
        ap.kernel.pair_plasticity(w, np.zeros(2), np.eye(3))
    with pytest.raises(ap.InvalidArgumentError,
                       match=r"head_plasticity: covariance must be 3 x 3 \(d = 3\), got 2 x 2"):
        ap.kernel.head_plasticity(w, np.zeros(3), np.eye(2))
    bad = w.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ap.DomainError,
                       match=r"pair_moments_full: differences has a non-finite value \(nan\) at row 2, column 1"):
        ap.kernel.pair_moments_full(bad, np.zeros(3), np.eye(3))
    with pytest.raises(ap.DomainError, match="negative variance"):
        ap.kernel.pair_plasticity(w, np.zeros(3), -np.eye(3))
    with pytest.raises(ap.InvalidArgumentError, match="pair_plasticity: differences must be 2-D, got 1 dimensions"):
        ap.kernel.pair_plasticity(np.ones(3), np.zeros(3), np.eye(3))
    with pytest.raises(ap.InvalidArgumentError, match="structured_pair_moments: semantic_mean has 3 entries"):
        ap.kernel.structured_pair_moments(w, 0.0, 1.0, np.zeros(3), np.eye(2))
    with pytest.raises(ap.DomainError, match="structured_pair_moments: position_variance must be >= 0"):
        ap.kernel.structured_pair_moments(w, 0.0, -1.0, np.zeros(2), np.eye(2))
    with pytest.raises(TypeError, match="pair_plasticity: differences must be an array, got str"):
        ap.kernel.pair_plasticity("abc", np.zeros(3), np.eye(3))
    with pytest.raises(ap.InvalidArgumentError, match="complex"):
        ap.kernel.pair_plasticity(w.astype(complex), np.zeros(3), np.eye(3))
    assert issubclass(ap.InvalidArgumentError, ValueError) and issubclass(ap.DomainError, ValueError)
