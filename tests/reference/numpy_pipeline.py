"""The whole per-head pipeline of docs/method.md §2 in NumPy/SciPy, as a NumPy user would write
it: vectorized over tokens and components, full covariances, SciPy's exact KS distribution
(scipy.stats.kstwo), and NumPy's own random generator for every random choice (subsampling,
the KS-tested components, the key pairs), so its random draws follow the method's laws (§2.2,
§2.8, §5) but not the library's streams (§6).

Written from docs/method.md alone, as the independent implementation that the benchmarks time
against the C++ library (benchmarks/run_numpy_comparison.py). The deterministic steps (§2.1,
§2.3-§2.7, §2.9, the moments of §2.8, tau_j and n_j) come from gen_pipeline_reference.py, the
tested reference of the end-to-end test; with no subsampling their results agree with the
library to the tolerances of tests/e2e/test_reference_metrics.py, and the plasticities agree
up to the Monte Carlo error of the pairs.

    result = analyze_head(queries, keys, layer=3, q_head=5, options=Options())

queries / keys: dicts with "vector" [n, d] (any float dtype), "position", "bucket" and (keys)
"example_id" [n] integer arrays. The result holds the head_metrics.csv values, the cells
(q_bucket, k_bucket, plasticity, n_pairs) and the profile (q_bucket, tau, n_queries,
plasticity, n_pairs), as in docs/method.md §3.
"""

import dataclasses
import os
import sys

import numpy as np
from scipy import special, stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_companion_reference import pca_roles, planar_rotation  # noqa: E402
from gen_pipeline_reference import householder, ols, orientation, scalar_predictability  # noqa: E402


@dataclasses.dataclass
class Options:
    """docs/method.md §2 parameters (defaults as there)."""
    max_tokens_per_head: int = 50000
    normality_max_dims: int = 64
    p_alpha: float = 0.01
    seed: int = 0
    num_pairs_per_bucket: int = 256
    max_rel_dist: float = 0.05
    covariance_epsilon: float = 1e-12
    sliding_window: int = 0
    min_bucket_queries: int = 16


def subsample(n, max_rows, rng):
    """§2.2: max_rows of n rows uniformly without replacement, in file order."""
    if n <= max_rows:
        return np.arange(n)
    return np.sort(rng.choice(n, size=max_rows, replace=False))


def moments_columns(x):
    """§7.2-§7.3 per column: (|G1|, |G2|, zero variance) as scipy.stats.skew / kurtosis
    (bias=False), 0 under zero variance."""
    n = x.shape[0]
    mean = x.mean(axis=0)
    dev = x - mean
    m2 = (dev ** 2).mean(axis=0)
    zero = (m2 <= (1e-15 * mean) ** 2) | (m2 <= 0) | (n < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(zero, 0.0, stats.skew(x, axis=0, bias=False))
        kurt = np.where(zero, 0.0, stats.kurtosis(x, axis=0, fisher=True, bias=False))
    return skew, kurt, zero


def ks_p_values(z):
    """§7.4 for every column of z (standardized): D_n from the sorted columns, p = kstwo.sf."""
    n = z.shape[0]
    u = special.ndtr(np.sort(z, axis=0))
    i = np.arange(1, n + 1)[:, None]
    d = np.maximum((i / n - u).max(axis=0), (u - (i - 1) / n).max(axis=0))
    return stats.kstwo.sf(d, n)


def standardize(x, zero):
    """Each column by its mean and ddof=1 standard deviation (divisor 1 under zero variance)."""
    sd = x.std(axis=0, ddof=1)
    return (x - x.mean(axis=0)) / np.where(zero, 1.0, sd)


def group_examples(position, example_id):
    """§2.12: the keys of one key bucket by example (increasing id), each by position, ties in
    file order: (order of the rows, start of each example, lengths)."""
    order = np.lexsort((np.arange(position.size), position, example_id))
    ids = example_id[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    lengths = np.diff(np.r_[starts, ids.size])
    return order, starts, lengths


def sample_pairs(lengths, num_pairs, max_rel_dist, rng):
    """§5.1, vectorized over the pairs: (example, k1, k2) positions within the examples."""
    usable = np.flatnonzero(lengths >= 2)
    cumulative = np.cumsum(lengths[usable])
    example = usable[np.searchsorted(cumulative, rng.integers(cumulative[-1], size=num_pairs), side="right")]
    length = lengths[example]
    delta = np.maximum(1, np.minimum(np.floor(max_rel_dist * length), length)).astype(np.int64)
    anchor = rng.integers(length)
    left = np.maximum(0, anchor - delta)
    right = np.minimum(length - 1, anchor + delta)
    neighbour = left + rng.integers(right - left)
    neighbour += neighbour >= anchor
    swap = rng.random(num_pairs) >= 0.5
    return example, np.where(swap, neighbour, anchor), np.where(swap, anchor, neighbour)


def pair_plasticity(w, mean0, var0, mu, sigma):
    """§2.13 / §4.5 for the rows of w: PP = 4 a (1 - a), a the smaller tail of m / sqrt(v)."""
    m = w[:, 0] * mean0 + w[:, 1:] @ mu
    v = w[:, 0] ** 2 * var0 + np.einsum("ij,ij->i", w[:, 1:] @ sigma, w[:, 1:])
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = special.ndtr(-np.abs(m / np.sqrt(v)))
    pp = 4.0 * tail * (1.0 - tail)
    return np.where(v > 0, pp, np.where(m == 0, 1.0, 0.0))


def weighted(tau, n, ap, keep):
    sel = keep & ~np.isnan(ap)
    return float((n[sel] * ap[sel]).sum() / n[sel].sum()) if sel.any() else float("nan")


def analyze_head(queries, keys, layer=0, q_head=0, options=None):
    """docs/method.md §2 on one head; see the module docstring."""
    o = options or Options()
    rng = np.random.default_rng(o.seed)
    xk_all = np.asarray(keys["vector"], dtype=np.float64)
    # §2.1-2.2
    s = orientation(xk_all, np.asarray(keys["bucket"]))
    qr = subsample(len(queries["position"]), o.max_tokens_per_head, rng)
    kr = subsample(len(keys["position"]), o.max_tokens_per_head, rng)
    xq = np.asarray(queries["vector"], dtype=np.float64)[qr] * s
    xk = xk_all[kr] * s
    tq = np.asarray(queries["position"])[qr].astype(np.float64)
    bq = np.asarray(queries["bucket"])[qr]
    pk = np.asarray(keys["position"])[kr]
    bk = np.asarray(keys["bucket"])[kr]
    ek = np.asarray(keys["example_id"])[kr]
    n, d = xq.shape
    # §2.3-2.5
    _alpha, beta, r2 = ols(tq, xq)
    out = {"n_q_tokens": n, "n_k_tokens": xk.shape[0], "d_model": d,
           "q_R2_pos": float(np.nanmean(r2)), "q_beta_norm": float(np.linalg.norm(beta))}
    (out["q_R2_scalar"], out["q_mae_baseline"], out["q_mae_proj"],
     out["q_mae_ratio"]) = scalar_predictability(tq, xq, beta)
    h = householder(beta)
    xq_rot = xq @ h
    xk_rot = xk @ h
    # §2.6-2.7
    alpha0, beta0, _ = ols(tq, xq_rot[:, :1])
    resid = xq_rot[:, 0] - (alpha0[0] + beta0[0] * tq)
    sigma2 = resid.var(ddof=1)
    skew, kurt, zero = moments_columns(resid[:, None])
    if zero[0]:
        out["q_resid0_skew"], out["q_resid0_kurt"], out["q_resid0_ks_p"] = 0.0, 0.0, 1.0
    else:
        out["q_resid0_skew"], out["q_resid0_kurt"] = float(skew[0]), float(kurt[0])
        out["q_resid0_ks_p"] = float(ks_p_values(standardize(resid[:, None], zero))[0])
    # §2.8
    noise = xq_rot[:, 1:]
    m = d - 1
    if m == 0:
        for key in ("q_noise_med_abs_skew", "q_noise_med_abs_kurt", "q_noise_med_ks_p", "q_noise_frac_ks_p_lt_alpha"):
            out[key] = float("nan")
    else:
        skew, kurt, zero = moments_columns(noise)
        out["q_noise_med_abs_skew"] = float(np.median(np.abs(skew)))
        out["q_noise_med_abs_kurt"] = float(np.median(np.abs(kurt)))
        k = min(o.normality_max_dims, m)
        tested = np.arange(m) if k == m else np.sort(rng.choice(m, size=k, replace=False))
        if k == 0:
            out["q_noise_med_ks_p"] = out["q_noise_frac_ks_p_lt_alpha"] = float("nan")
        else:
            p = ks_p_values(standardize(noise[:, tested], zero[tested]))
            out["q_noise_med_ks_p"] = float(np.median(p))
            out["q_noise_frac_ks_p_lt_alpha"] = float(np.mean(p < o.p_alpha))
    # §2.9
    positive = np.maximum(r2, 0.0)
    weight = positive / positive.sum() if positive.sum() > 0 else np.full(d, 1.0 / d)
    # §2.10-2.13
    key_buckets = {}
    for c in np.unique(bk):
        rows = np.flatnonzero(bk == c)
        order, starts, lengths = group_examples(pk[rows], ek[rows])
        key_buckets[int(c)] = (rows[order], starts, lengths, int(pk[rows].max()))
    pair_seed = (o.seed + 10007 * layer + 379 * q_head) % 2 ** 64
    cells, profile = [], []
    for j in np.unique(bq):
        rows = np.flatnonzero(bq == j)
        if j <= 0 or rows.size < 2:
            continue
        tau = tq[rows].mean()
        sem = xq_rot[rows, 1:]
        mu = sem.mean(axis=0)
        sigma = np.cov(sem, rowvar=False).reshape(m, m) + o.covariance_epsilon * np.eye(m)
        mean0 = alpha0[0] + beta0[0] * tau
        pp_sum, pp_count = 0.0, 0
        for c, (krows, starts, lengths, max_pos) in key_buckets.items():
            if c >= j:
                continue
            if o.sliding_window > 0 and c != j - 1 and not max_pos > tau - o.sliding_window:
                continue
            if o.num_pairs_per_bucket == 0 or not (lengths >= 2).any():
                cells.append((int(j), c, float("nan"), 0))
                continue
            cell_rng = np.random.default_rng([pair_seed, int(j) % 2 ** 64, c % 2 ** 64])
            example, k1, k2 = sample_pairs(lengths, o.num_pairs_per_bucket, o.max_rel_dist, cell_rng)
            w = xk_rot[krows[starts[example] + k1]] - xk_rot[krows[starts[example] + k2]]
            pp = pair_plasticity(w, mean0, sigma2, mu, sigma)
            cells.append((int(j), c, float(pp.mean()), pp.size))
            pp_sum += pp.sum()
            pp_count += pp.size
        profile.append((int(j), float(tau), int(rows.size), pp_sum / pp_count if pp_count else float("nan"), pp_count))
    # §2.14: D holds the buckets with a defined AP_j and at least min_bucket_queries queries
    tau = np.array([p[1] for p in profile])
    nj = np.array([p[2] for p in profile], dtype=np.float64)
    ap = np.array([p[3] if p[2] >= o.min_bucket_queries else float("nan") for p in profile])
    context = tq.max() + 1.0
    out["ap_overall"] = weighted(tau, nj, ap, np.ones(tau.size, dtype=bool))
    out["ap_first20"] = weighted(tau, nj, ap, tau < 0.2 * context)
    out["ap_last20"] = weighted(tau, nj, ap, tau >= 0.8 * context)
    out["ap_drop"] = out["ap_first20"] - out["ap_last20"]
    # §8.5 on the kept rows
    plane = planar_rotation(xq, tq, xk, pk.astype(np.float64))
    roles = pca_roles(xq, tq, xk, pk.astype(np.float64))
    out.update(bias_strength=plane["bias_strength"], drift_slope_k=plane["drift_slope_k"],
               drift_query_mean=plane["drift_query_mean"], pc0_r_q=roles["r_q"], pc0_r_k=roles["r_k"],
               pca_class=roles["pca_class"])
    return {"metrics": out, "cells": cells, "profile": profile, "component_r2": r2, "component_weight": weight}
