"""A small synthetic set of the driver's four CSVs (docs/method.md §3), for the plot tests.

Values are made up but shaped like real output: log2 position buckets, plasticity in
[0, 1], NaN (written as ``nan``) where a head or cell has no value, and cells missing
for heads with a sliding window. Deterministic for a given seed.
Run as a script to write a set: ``python3 synthetic_results.py OUT_DIR [--big]``.
"""

import math
import os
import random

METRICS_HEADER = ("layer,q_head,k_head,n_q_tokens,n_k_tokens,d_model,q_R2_pos,q_beta_norm,"
                  "q_R2_scalar,q_mae_baseline,q_mae_proj,q_mae_ratio,q_resid0_skew,"
                  "q_resid0_kurt,q_resid0_ks_p,q_noise_med_abs_skew,q_noise_med_abs_kurt,"
                  "q_noise_med_ks_p,q_noise_frac_ks_p_lt_alpha,ap_overall,ap_first20,"
                  "ap_last20,ap_drop,ap_empirical_overall,ap_empirical_overall_se,ap_overall_se,"
                  "ap_overall_bias,ap_overall_ci_low,ap_overall_ci_high,bias_strength,drift_slope_k,"
                  "drift_query_mean,pc0_r_q,pc0_r_k,pca_class").split(",")
BUCKET_HEADER = ["layer", "q_head", "k_head", "q_bucket", "k_bucket", "plasticity", "n_pairs",
                 "plasticity_empirical"]
PROFILE_HEADER = ["layer", "q_head", "k_head", "q_bucket", "tau", "n_queries", "plasticity",
                  "n_pairs", "plasticity_empirical", "plasticity_empirical_se", "plasticity_se",
                  "plasticity_bias", "plasticity_ci_low", "plasticity_ci_high"]
COMPONENT_HEADER = ["layer", "q_head", "k_head", "component", "component_r2", "weight"]
DISTANCE_HEADER = ["layer", "q_head", "k_head", "key_distance_low", "key_distance_high",
                   "query_distance_low", "query_distance_high", "plasticity", "n_pairs"]
INF = float("inf")

NAN = float("nan")


def _fmt(x):
    if isinstance(x, float):
        return format(x, ".17g")  # nan -> 'nan', as the driver writes it
    return str(x)


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(_fmt(v) for v in row) + "\n")


def _clip01(x):
    return min(1.0, max(0.0, x))


def write_synthetic_results(out_dir, num_layers=3, num_q_heads=4, num_k_heads=2,
                            num_buckets=8, d_model=16, seed=0):
    """Write head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv,
    head_component_weights.csv and head_distance_plasticity.csv into ``out_dir``; return a dict
    name -> path. The columns of the extensions (docs/method.md §8) are filled where the driver
    would fill them with its defaults (intervals on, empirical AP off: nan).

    Query buckets are 1..num_buckets-1 (bucket j holds positions [2^(j-1), 2^j)),
    key buckets 0..j-1. Some values are NaN on purpose: layer 0 head 1 has no value in
    query bucket 2; the last head has no plasticity at all; key bucket 0 has no pairs;
    odd q_heads of the last layer have a sliding window (far cells absent).
    """
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    group = num_q_heads // num_k_heads
    context = 2 ** (num_buckets - 1)
    metrics, buckets, profile, components, distances = [], [], [], [], []
    for layer in range(num_layers):
        for q_head in range(num_q_heads):
            k_head = q_head // group
            dead = layer == num_layers - 1 and q_head == num_q_heads - 1
            windowed = layer == num_layers - 1 and q_head % 2 == 1 and not dead
            base = 0.35 + 0.4 * rng.random()
            slope = -0.5 + 0.6 * rng.random() - 0.1 * layer
            ap_rows = []
            for j in range(1, num_buckets):
                lo, hi = 2 ** (j - 1), 2 ** j
                tau = (lo + hi - 1) / 2.0 + rng.uniform(-0.2, 0.2) * (hi - lo) / 2.0
                n_q = (hi - lo) * 40
                cells = []
                for c in range(j):
                    if windowed and c < j - 2:
                        continue  # outside the sliding window: no row at all
                    if c == 0 or dead:
                        cells.append((c, NAN, 0))
                        continue
                    dist = (j - c) / num_buckets
                    p = _clip01(base + slope * math.log2(tau + 1) / num_buckets
                                + 0.3 * dist - 0.15 + rng.gauss(0, 0.04))
                    cells.append((c, p, 256))
                defined = [(p, n) for _, p, n in cells if n > 0]
                n_pairs = sum(n for _, n in defined)
                ap = (sum(p * n for p, n in defined) / n_pairs) if n_pairs else NAN
                if layer == 0 and q_head == 1 and j == 2:
                    ap, n_pairs = NAN, 0
                    cells = [(c, NAN, 0) for c, _, _ in cells]
                for c, p, n in cells:
                    buckets.append((layer, q_head, k_head, j, c, p, n, NAN))
                se = NAN if math.isnan(ap) else 0.01 + 0.02 * rng.random()
                bias = NAN if math.isnan(ap) else -0.001
                profile.append((layer, q_head, k_head, j, tau, n_q, ap, n_pairs, NAN, NAN, se, bias,
                                _clip01(ap - bias - 1.96 * se), _clip01(ap - bias + 1.96 * se)))
                ap_rows.append((tau, n_q, ap))

            def wmean(rows):
                rows = [(n, a) for _, n, a in rows if not math.isnan(a)]
                return sum(n * a for n, a in rows) / sum(n for n, _ in rows) if rows else NAN

            ap_overall = wmean(ap_rows)
            first = wmean([r for r in ap_rows if r[0] < 0.2 * context])
            # Not the driver's 0.8 C: with log2 buckets no tau reaches it, and the
            # plots need ap_drop values.
            last = wmean([r for r in ap_rows if r[0] >= 0.5 * context])
            drop = first - last
            se = NAN if math.isnan(ap_overall) else 0.005 + 0.005 * rng.random()
            bias = NAN if math.isnan(ap_overall) else -0.0005
            metrics.append([layer, q_head, k_head, 5000, 5000, d_model,
                            rng.random(), 1 + rng.random(), rng.random(), 2.0, 1.0, 0.5,
                            rng.gauss(0, 0.1), rng.gauss(0, 0.2), rng.random(),
                            0.1, 0.2, 0.3, 0.05, ap_overall, first, last, drop, NAN, NAN, se, bias,
                            _clip01(ap_overall - bias - 1.96 * se), _clip01(ap_overall - bias + 1.96 * se),
                            # §8.5, without drawing (the other values stay as they were)
                            0.004 * (num_layers - layer), 0.001 * (q_head + 1), 4.0 / (num_layers - layer),
                            0.9 - 0.1 * layer, 0.5 - 0.1 * q_head, "mixed"])
            # Distance map: key distances [0, 1) .. [8, 16), query distances up to the context;
            # a few pairs after the queries' mean position (<0) in odd heads; none for dead heads.
            if not dead:
                for kb in range(5):
                    klo, khi = (0.0, 1.0) if kb == 0 else (2.0 ** (kb - 1), 2.0 ** kb)
                    qbins = [(-INF, 0.0)] if q_head % 2 else []
                    qbins += [(2.0 ** (qb - 1), 2.0 ** qb) for qb in range(2, num_buckets + 1)]
                    for qlo, qhi in qbins:
                        p = _clip01(base - 0.05 * math.log2(max(qhi, 1.0)) + 0.02 * kb + rng.gauss(0, 0.03))
                        distances.append((layer, q_head, k_head, klo, khi, qlo, qhi, p, rng.randint(1, 300)))
            r2 = [rng.uniform(-0.02, 0.05) + 0.6 * math.exp(-d / (d_model / 6.0))
                  * rng.uniform(0.5, 1.0) for d in range(d_model)]
            total = sum(max(x, 0.0) for x in r2)
            for d in range(d_model):
                w = max(r2[d], 0.0) / total
                components.append((layer, q_head, k_head, d, r2[d], w))
    # One NaN weight, as a defensive case (the driver should not write one).
    components[1] = components[1][:5] + (NAN,)
    paths = {
        "metrics": os.path.join(out_dir, "head_metrics.csv"),
        "bucket": os.path.join(out_dir, "head_bucket_plasticity.csv"),
        "profile": os.path.join(out_dir, "head_profile.csv"),
        "component": os.path.join(out_dir, "head_component_weights.csv"),
        "distance": os.path.join(out_dir, "head_distance_plasticity.csv"),
    }
    _write(paths["metrics"], METRICS_HEADER, metrics)
    _write(paths["bucket"], BUCKET_HEADER, buckets)
    _write(paths["profile"], PROFILE_HEADER, profile)
    _write(paths["component"], COMPONENT_HEADER, components)
    _write(paths["distance"], DISTANCE_HEADER, distances)
    return paths


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write a synthetic set of the driver's CSVs.")
    ap.add_argument("out_dir")
    ap.add_argument("--big", action="store_true",
                    help="model-sized: 24 layers x 16 heads, 14 buckets, d=64")
    a = ap.parse_args()
    if a.big:
        print(write_synthetic_results(a.out_dir, 24, 16, 4, 14, 64))
    else:
        print(write_synthetic_results(a.out_dir))
