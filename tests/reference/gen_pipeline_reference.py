#!/usr/bin/python3
"""Independent NumPy/SciPy implementation of docs/method.md §2.1 and §2.3-§2.9 (plus the
per-bucket tau_j and n_j of §2.10, and the companion measures of §8.5 from
gen_companion_reference.py), for the end-to-end check of ap_analyze.

Written from the method's statement alone; nothing here is derived from the C++ code or
its output, nor from the project's Parquet reader. No subsampling is done (the dump must be
below max_tokens_per_head) and every noise component gets a KS test (normality_max_dims >=
d - 1), so nothing here is random.

Input: a dump in the NPY layout or in qk-sniffer's Parquet layout (l{LL}h{HH}{q|k}/
data.parquet, read here with plain pyarrow calls), docs/method.md §1. Only the query heads
present are analyzed. The GQA group comes from --num-q-heads / --num-k-heads; without them
it is inferred only when every head of the layout is present (a partial head set cannot
tell the group size).

Output: a long-format CSV, one quantity per row:
    layer,q_head,k_head,quantity,index,value
quantity is a head_metrics.csv column (index empty; pca_class is a name), component_r2 / weight (index =
component), or tau / n_queries (index = query bucket j > 0 with >= 2 queries).

Regenerate the committed fixtures with:
    OPENBLAS_CORETYPE=Prescott /usr/bin/python3 tests/reference/gen_pipeline_reference.py \
        tests/data/small_dump tests/reference/pipeline_reference.csv
    .venv/bin/python tests/reference/gen_pipeline_reference.py tests/data/real_minilm \
        tests/reference/real_minilm_reference.csv --num-q-heads 12 --num-k-heads 12
(the last bits of the BLAS products depend on OpenBLAS's kernels; the committed values of
pipeline_reference.csv come from its generic Prescott kernels, and other kernels move them by
~1e-15 relative, far inside the tolerances of tests/e2e/test_reference_metrics.py).
"""

import argparse
import os
import re
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_companion_reference import pca_roles, planar_rotation  # noqa: E402

HOUSEHOLDER_TOL = 1e-12


def load_folder(folder):
    """(vectors float64 [n, d], positions int64 [n], buckets int64 [n]) of one head folder."""
    parquet = os.path.join(folder, "data.parquet")
    if os.path.exists(parquet):
        import pyarrow.parquet as pq

        table = pq.read_table(parquet, columns=["vector", "position", "bucket"])
        columns = {name: table.column(name).to_pylist() for name in table.column_names}
        if any(v is None for values in columns.values() for v in values):
            raise SystemExit("%s: null values; this reference takes complete data only" % parquet)
        return (np.array(columns["vector"], dtype=np.float64),
                np.array(columns["position"], dtype=np.int64),
                np.array(columns["bucket"], dtype=np.int64))
    x = np.load(os.path.join(folder, "vector.npy")).astype(np.float64)
    pos = np.load(os.path.join(folder, "position.npy")).astype(np.int64)
    bucket = np.load(os.path.join(folder, "bucket.npy")).astype(np.int64)
    return x, pos, bucket


def orientation(keys, key_buckets):
    """§2.1: sign of the mean over key buckets of the per-bucket key mean; 0 -> +1."""
    means = np.array([keys[key_buckets == b].mean(axis=0) for b in np.unique(key_buckets)])
    s = np.sign(means.mean(axis=0))
    s[s == 0] = 1.0
    return s


def ols(t, x):
    """Per-column OLS x = alpha + beta t; R2 = 1 - SSres / SStot capped to [0, 1], and 0 for a
    constant column (all values equal, np.ptp == 0)."""
    t = t.astype(np.float64)
    tc = t - t.mean()
    stt = np.dot(tc, tc)
    xm = x.mean(axis=0)
    if stt == 0.0:
        return xm, np.zeros(x.shape[1]), np.zeros(x.shape[1])
    beta = tc @ (x - xm) / stt
    alpha = xm - beta * t.mean()
    resid = x - alpha - np.outer(t, beta)
    ss_res = (resid ** 2).sum(axis=0)
    ss_tot = ((x - xm) ** 2).sum(axis=0)
    constant = np.ptp(x, axis=0) == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.clip(1.0 - ss_res / ss_tot, 0.0, 1.0)
    r2[constant] = 0.0
    return alpha, beta, r2


def scalar_predictability(t, x, beta):
    """§2.4."""
    y = np.log2(t.astype(np.float64) + 1.0)
    baseline = np.mean(np.abs(y - y.mean()))
    norm = np.linalg.norm(beta)
    if norm == 0.0:
        return 0.0, baseline, baseline, 1.0
    s = x @ (beta / norm)
    _, b, r2 = ols(s, y[:, None])
    a = y.mean() - b[0] * s.mean()
    proj = np.mean(np.abs(y - (a + b[0] * s)))
    ratio = proj / baseline if baseline != 0.0 else 1.0
    return r2[0], baseline, proj, ratio


def householder(beta):
    """§2.5: H with H beta_hat = e1; identity in the degenerate cases."""
    d = beta.size
    norm = np.linalg.norm(beta)
    if norm < HOUSEHOLDER_TOL:
        return np.eye(d)
    e1 = np.zeros(d)
    e1[0] = 1.0
    u = beta / norm - e1
    un = np.linalg.norm(u)
    if un < HOUSEHOLDER_TOL:
        return np.eye(d)
    v = u / un
    return np.eye(d) - 2.0 * np.outer(v, v)


def standardized(z):
    std = z.std(ddof=1)
    return (z - z.mean()) / (std if std != 0.0 else 1.0), std


def first_component(t, x_rot):
    """§2.7."""
    alpha, beta, _ = ols(t, x_rot[:, :1])
    resid = x_rot[:, 0] - (alpha[0] + beta[0] * t)
    z, std = standardized(resid)
    if std == 0.0:
        return 0.0, 0.0, 1.0
    return (stats.skew(z, bias=False), stats.kurtosis(z, fisher=True, bias=False),
            stats.kstest(z, "norm", method="exact").pvalue)


def noise(x_rot, p_alpha):
    """§2.8 with every component tested (normality_max_dims >= d - 1)."""
    skews, kurts, ps = [], [], []
    for c in range(1, x_rot.shape[1]):
        z, _ = standardized(x_rot[:, c])
        skews.append(abs(stats.skew(z, bias=False)))
        kurts.append(abs(stats.kurtosis(z, fisher=True, bias=False)))
        ps.append(stats.kstest(z, "norm", method="exact").pvalue)
    ps = np.array(ps)
    return np.median(skews), np.median(kurts), np.median(ps), float(np.mean(ps < p_alpha))


def analyze(q_folder, k_folder, p_alpha):
    xq, tq, bq = load_folder(q_folder)
    xk, tk, bk = load_folder(k_folder)
    s = orientation(xk, bk)
    xq = xq * s
    alpha, beta, r2 = ols(tq, xq)
    out = {
        "n_q_tokens": xq.shape[0], "n_k_tokens": xk.shape[0], "d_model": xq.shape[1],
        "q_R2_pos": np.nanmean(r2), "q_beta_norm": np.linalg.norm(beta),
    }
    (out["q_R2_scalar"], out["q_mae_baseline"], out["q_mae_proj"],
     out["q_mae_ratio"]) = scalar_predictability(tq, xq, beta)
    x_rot = xq @ householder(beta)
    out["q_resid0_skew"], out["q_resid0_kurt"], out["q_resid0_ks_p"] = first_component(tq, x_rot)
    (out["q_noise_med_abs_skew"], out["q_noise_med_abs_kurt"], out["q_noise_med_ks_p"],
     out["q_noise_frac_ks_p_lt_alpha"]) = noise(x_rot, p_alpha)
    # §8.5 (invariant under the orientation; no subsampling here)
    plane = planar_rotation(xq, tq, xk * s, tk)
    roles = pca_roles(xq, tq, xk * s, tk)
    out.update(bias_strength=plane["bias_strength"], drift_slope_k=plane["drift_slope_k"],
               drift_query_mean=plane["drift_query_mean"], pc0_r_q=roles["r_q"], pc0_r_k=roles["r_k"],
               pca_class=roles["pca_class"])
    positive = np.maximum(r2, 0.0)
    total = positive.sum()
    weight = positive / total if total > 0 else np.full(r2.size, 1.0 / r2.size)
    buckets = {}
    for j in np.unique(bq):
        mask = bq == j
        if j > 0 and mask.sum() >= 2:
            buckets[int(j)] = (tq[mask].astype(np.float64).mean(), int(mask.sum()))
    return out, r2, weight, buckets


def fmt(x):
    if isinstance(x, str):
        return x
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return format(float(x), ".17g")


def find_heads(data_root):
    """{layer: set of query heads}, {layer: set of key heads} of the folders present."""
    q_heads, k_heads = {}, {}
    for name in os.listdir(data_root):
        m = re.fullmatch(r"l(\d{2,})h(\d{2,})([qk])", name)
        if m:
            layer, head = int(m.group(1)), int(m.group(2))
            (q_heads if m.group(3) == "q" else k_heads).setdefault(layer, set()).add(head)
    return q_heads, k_heads


def group_size(q_heads, k_heads, num_q, num_k):
    """Query heads per key head: from the counts given, or from a complete layout only."""
    if num_q is None or num_k is None:
        max_q = max(max(h) for h in q_heads.values()) + 1
        max_k = max(max(h) for h in k_heads.values()) + 1
        complete = all(q_heads.get(layer) == set(range(max_q)) and
                       k_heads.get(layer) == set(range(max_k)) for layer in q_heads)
        if not complete:
            raise SystemExit("only some heads are present: give --num-q-heads and "
                             "--num-k-heads (the group size cannot be inferred)")
        num_q, num_k = max_q, max_k
    if num_q % num_k:
        raise SystemExit("--num-q-heads %d is not a multiple of --num-k-heads %d" % (num_q, num_k))
    return num_q // num_k


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_root")
    parser.add_argument("out_csv")
    parser.add_argument("--p-alpha", type=float, default=0.01)
    parser.add_argument("--num-q-heads", type=int)
    parser.add_argument("--num-k-heads", type=int)
    args = parser.parse_args()

    q_heads, k_heads = find_heads(args.data_root)
    group = group_size(q_heads, k_heads, args.num_q_heads, args.num_k_heads)
    rows = ["# Independent reference of docs/method.md §2.1, §2.3-§2.9, §8.5 for %s." % os.path.basename(
                os.path.normpath(args.data_root)),
            "# Regenerate: %s%s tests/reference/gen_pipeline_reference.py %s" % (
                "OPENBLAS_CORETYPE=%s " % os.environ["OPENBLAS_CORETYPE"] if "OPENBLAS_CORETYPE" in os.environ else "",
                "/usr/bin/python3" if sys.executable == "/usr/bin/python3" else ".venv/bin/python",
                " ".join(sys.argv[1:])),
            "layer,q_head,k_head,quantity,index,value"]
    for layer in sorted(q_heads):
        for q_head in sorted(q_heads[layer]):
            k_head = q_head // group
            q_folder = os.path.join(args.data_root, "l%02dh%02dq" % (layer, q_head))
            k_folder = os.path.join(args.data_root, "l%02dh%02dk" % (layer, k_head))
            out, r2, weight, buckets = analyze(q_folder, k_folder, args.p_alpha)
            head = "%d,%d,%d" % (layer, q_head, k_head)
            for key, value in out.items():
                rows.append("%s,%s,,%s" % (head, key, fmt(value)))
            for c in range(r2.size):
                rows.append("%s,component_r2,%d,%s" % (head, c, fmt(r2[c])))
                rows.append("%s,weight,%d,%s" % (head, c, fmt(weight[c])))
            for j, (tau, n) in sorted(buckets.items()):
                rows.append("%s,tau,%d,%s" % (head, j, fmt(tau)))
                rows.append("%s,n_queries,%d,%d" % (head, j, n))
    with open(args.out_csv, "w") as f:
        f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
