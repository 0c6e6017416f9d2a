#!/usr/bin/env python3
"""The measurements behind docs/real_data.md, printed as Markdown.

usage: real_data_stats.py FIXTURE RESULTS

FIXTURE: a qk-sniffer dump (tests/data/real_minilm); RESULTS: ap_analyze's output on it
(after examples/convert_sniffed_qk.py). Reads the dump with attention_plasticity.sniffed and
recomputes the Gaussian query model with the independent NumPy implementation of
tests/reference/gen_pipeline_reference.py (docs/method.md §2.1, §2.3-§2.10) to compare its
plasticity with the plasticity the real queries show (the fraction of a bucket's queries
that prefer k1, on the same key pairs). Deterministic: no random draws.
"""

import argparse
import os
import sys

import numpy as np
import pandas as pd
from scipy.special import ndtr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import gen_pipeline_reference as ref  # noqa: E402
from sniffed_fixtures import load_sniffed_module  # noqa: E402  (the repository's sniffed.py)

read_sniffed_folder = load_sniffed_module().read_sniffed_folder

SIGMA_EPS = 1e-12  # docs/method.md §2.10


def heads(fixture):
    for name in sorted(os.listdir(fixture)):
        if name.endswith("q") and os.path.isdir(os.path.join(fixture, name)):
            q = read_sniffed_folder(os.path.join(fixture, name), token_str=True)
            k = read_sniffed_folder(os.path.join(fixture, name[:-1] + "k"), token_str=True)
            yield int(name[1:3]), int(name[4:6]), q, k


def adjacent_pairs(k):
    """Consecutive keys (by position) of each (example, bucket): the pairs the sampler draws
    when a group has fewer than 40 keys (Delta = 1, docs/method.md §2.12)."""
    order = np.lexsort((k["position"], k["bucket"], k["example_id"]))
    ex, bucket = k["example_id"][order], k["bucket"][order]
    same = (ex[1:] == ex[:-1]) & (bucket[1:] == bucket[:-1])
    return order[:-1][same], order[1:][same], bucket[:-1][same]


def gaussian_vs_empirical(q, k):
    """Head AP under the bucket Gaussian model and from the real queries, same pairs, weights
    n_j as in docs/method.md §2.14 (no sliding window: every c < j)."""
    xq = q["vector"].astype(np.float64)
    xk = k["vector"].astype(np.float64)
    s = ref.orientation(xk, k["bucket"])
    xq, xk = xq * s, xk * s
    t = q["position"].astype(np.float64)
    _, beta, _ = ref.ols(q["position"], xq)
    h = ref.householder(beta)
    xr, kr = xq @ h, xk @ h
    alpha_rot, beta_rot, _ = ref.ols(q["position"], xr)
    sigma2 = (xr[:, 0] - alpha_rot[0] - beta_rot[0] * t).var(ddof=1)
    i1, i2, pair_bucket = adjacent_pairs(k)
    w_all = kr[i1] - kr[i2]
    d = xr.shape[1]
    totals = np.zeros(3)
    for j in np.unique(q["bucket"]):
        rows = q["bucket"] == j
        if j == 0 or rows.sum() < 2:
            continue
        w = w_all[pair_bucket < j]
        if len(w) == 0:
            continue
        mean = np.r_[alpha_rot[0] + beta_rot[0] * t[rows].mean(), xr[rows, 1:].mean(axis=0)]
        cov = np.zeros((d, d))
        cov[0, 0] = sigma2
        cov[1:, 1:] = np.cov(xr[rows, 1:].T) + SIGMA_EPS * np.eye(d - 1)
        p = ndtr((w @ mean) / np.sqrt(np.einsum("ij,jk,ik->i", w, cov, w)))
        p_real = np.mean(xr[rows] @ w.T > 0, axis=0)
        n = rows.sum()
        totals += n * np.array([np.mean(4 * p * (1 - p)), np.mean(4 * p_real * (1 - p_real)), 1.0])
    return totals[:2] / totals[2]


def describe_head(layer, q_head, q, k):
    row = {"layer": layer, "q_head": q_head}
    cols = []
    for kind, data in (("q", q), ("k", k)):
        x = data["vector"]
        cols.append(np.mean([len(np.unique(x[:, c])) / len(x) for c in range(x.shape[1])]))
        rms = np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=0))
        row["outlier_" + kind] = rms.max() / np.median(rms)
        _, inverse, counts = np.unique(x, axis=0, return_inverse=True, return_counts=True)
        row["duplicate_rows_" + kind] = np.mean(counts[inverse.ravel()] > 1)
    row["distinct_per_column"] = np.mean(cols)
    # The [CLS] token at position 0: its scores against the queries of its own example,
    # against the other keys' scores, in units of the score spread.
    xq, xk = q["vector"].astype(np.float64), k["vector"].astype(np.float64)
    sink, other, spread = [], [], []
    for ex in np.unique(k["example_id"]):
        qq = xq[q["example_id"] == ex]
        kk = xk[k["example_id"] == ex]
        at0 = k["position"][k["example_id"] == ex] == 0
        if len(qq) == 0:
            continue
        scores = qq @ kk.T / np.sqrt(xq.shape[1])
        spread.append(scores.std())
        other.append(scores[:, ~at0].mean())
        if at0.any():
            sink.append(scores[:, at0].mean())
    row["sink_z"] = (np.mean(sink) - np.mean(other)) / np.mean(spread)
    counts = pd.Series(list(zip(k["example_id"], k["bucket"]))).value_counts()
    row["single_key_groups"] = np.mean(counts.values == 1)
    row["groups"] = len(counts)
    row["ap_gauss_adjacent"], row["ap_real_adjacent"] = gaussian_vs_empirical(q, k)
    return row


def markdown(df):
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                       for v in row) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixture")
    parser.add_argument("results")
    args = parser.parse_args()

    per_head, first = [], None
    for layer, q_head, q, k in heads(args.fixture):
        per_head.append(describe_head(layer, q_head, q, k))
        if first is None:
            first = (q, k)
    stats = pd.DataFrame(per_head)
    metrics = pd.read_csv(os.path.join(args.results, "head_metrics.csv"))
    cells = pd.read_csv(os.path.join(args.results, "head_bucket_plasticity.csv"))
    table = metrics.merge(stats, on=["layer", "q_head"])

    q, k = first
    lengths = np.bincount(q["example_id"])  # kept queries per example
    positions = pd.Series(q["position"]).groupby(q["example_id"]).max() + 1
    print("## Fixture")
    print(f"- {len(metrics)} query heads, {len(q['position'])} query / {len(k['position'])} key "
          f"rows per folder, {len(lengths)} examples; example lengths (last kept query + 1): "
          f"min {positions.min()}, median {int(positions.median())}, "
          f"{int(np.sum(positions >= 500))} of {len(positions)} at 500-512")
    print(f"- queries per bucket (first head): {np.bincount(q['bucket']).tolist()}")
    print(f"- keys per bucket (first head): {np.bincount(k['bucket']).tolist()}")
    print(f"- distinct values per column: {stats.distinct_per_column.mean():.3f} of the rows "
          f"(range {stats.distinct_per_column.min():.3f}-{stats.distinct_per_column.max():.3f})")
    for name, part in (("layer 0", stats[stats.layer == 0]), ("layers 1-5", stats[stats.layer > 0])):
        print(f"- rows whose whole vector occurs more than once, {name}: queries "
              f"{part.duplicate_rows_q.min():.3f}-{part.duplicate_rows_q.max():.3f}, keys "
              f"{part.duplicate_rows_k.min():.3f}-{part.duplicate_rows_k.max():.3f}")
    print(f"- outlier dimensions, max/median RMS over components: queries "
          f"{stats.outlier_q.min():.2f}-{stats.outlier_q.max():.2f}, keys "
          f"{stats.outlier_k.min():.2f}-{stats.outlier_k.max():.2f}")
    print(f"- single-key (example, bucket) groups: {stats.single_key_groups.mean():.3f} of "
          f"{stats.groups.iloc[0]} groups; cells without pairs: "
          f"{int((cells.n_pairs == 0).sum())} of {len(cells)}")
    print()
    print("## Per layer (medians over the heads of the layer)")
    by_layer = table.groupby("layer").agg(
        heads=("q_head", "size"), ap_overall=("ap_overall", "median"),
        ap_drop=("ap_drop", "median"), sink_z=("sink_z", "median"),
        q_R2_pos=("q_R2_pos", "median"), q_R2_scalar=("q_R2_scalar", "median"),
        resid0_kurt=("q_resid0_kurt", "median"), resid0_ks_p=("q_resid0_ks_p", "median"),
        noise_abs_skew=("q_noise_med_abs_skew", "median"),
        noise_abs_kurt=("q_noise_med_abs_kurt", "median"),
        noise_frac_p_lt_001=("q_noise_frac_ks_p_lt_alpha", "median"))
    print(markdown(by_layer.round(3).reset_index()))
    print()
    print("## ap_overall over the heads")
    bins = np.arange(0.2, 0.95, 0.1)
    hist, _ = np.histogram(table.ap_overall, bins=bins)
    for lo, count in zip(bins[:-1], hist):
        print(f"| {lo:.1f}-{lo + 0.1:.1f} | {count} | {'#' * count} |")
    print(f"mean {table.ap_overall.mean():.3f}, median {table.ap_overall.median():.3f}, "
          f"min {table.ap_overall.min():.3f}, max {table.ap_overall.max():.3f}; ap_drop from "
          f"{table.ap_drop.min():.3f} to {table.ap_drop.max():.3f}")
    print(f"- first-component residual: KS p < 0.01 in {int((table.q_resid0_ks_p < 0.01).sum())}"
          f" of {len(table)} heads; excess kurtosis from {table.q_resid0_kurt.min():.2f} to "
          f"{table.q_resid0_kurt.max():.2f}")
    print()
    print("## Gaussian model against the real queries (adjacent key pairs, weights n_j)")
    diff = table.ap_gauss_adjacent - table.ap_real_adjacent
    print(f"- model minus real: mean {diff.mean():.4f}, from {diff.min():.4f} to "
          f"{diff.max():.4f}; |diff| <= 0.02 in {int((diff.abs() <= 0.02).sum())} of "
          f"{len(diff)} heads; model vs ap_overall (sampled pairs): max |diff| "
          f"{(table.ap_gauss_adjacent - table.ap_overall).abs().max():.4f}")
    cols = ["layer", "q_head", "ap_overall", "ap_gauss_adjacent", "ap_real_adjacent",
            "q_noise_med_abs_kurt", "q_noise_frac_ks_p_lt_alpha"]
    print(markdown(table[cols].round(3)))


if __name__ == "__main__":
    main()
