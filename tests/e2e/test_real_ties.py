#!/usr/bin/env python3
"""Ties, as bf16 captures have them, in the KS tests and in the orientation of ap_analyze.

usage: test_real_ties.py AP_ANALYZE FIXTURE_DIR WORK_DIR

FIXTURE_DIR is tests/data/real_minilm: real query and key vectors rounded to bfloat16, so
that a column of ~3400 values holds only ~1000 distinct ones. Run with the project's Python
(.venv: numpy, scipy, pyarrow); a missing package is a failure, never a skip.

1. KS with ties (docs/method.md §2.7, §2.8, §7). The pipeline rotates the queries, which
   breaks ties, unless the position slope is zero. Here every query of a head gets the same
   position, so beta = 0, the rotation is the identity and the KS tests see the tied columns
   themselves (oriented, standardized). ap_analyze's q_resid0_ks_p / skew / kurt and the
   noise medians must equal scipy.stats.kstest(method="exact") / skew / kurtosis on those
   columns, computed here (1e-6 absolute for p-values, 1e-9 for moments). Twice: on the
   bf16 columns, and on their first 100 rows rounded further to 2 mantissa bits (about 22
   distinct values per column of 100; n <= 1000 takes the exact KS distribution, n = 3410
   the large-n path).
2. Orientation with a tie (docs/method.md §2.1). Keys are the fixture's keys plus a copy with
   component 0 negated: every key bucket's component-0 mean is exactly 0 (bf16 sums are
   exact in float64), so the sign must be +1. Only component 0's sign changes the outputs
   (through the rotation: the noise-component statistics), so ap_analyze must agree with
   the independent reference (tests/reference/gen_pipeline_reference.py) and must differ
   from the reference run on the queries with component 0 negated (the sign -1), which the
   test checks is a different answer.
"""

import os
import sys

import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import e2e_util as u  # noqa: E402
import gen_pipeline_reference as reference  # noqa: E402
import test_reference_metrics as ref_metrics  # noqa: E402
from attention_plasticity.sniffed import read_sniffed_folder  # noqa: E402

P_ALPHA = 0.01
NOISE = ("q_noise_med_abs_skew", "q_noise_med_abs_kurt", "q_noise_med_ks_p",
         "q_noise_frac_ks_p_lt_alpha")


def fixture_heads(fixture):
    """[(name, queries, keys)] for every captured query head, in folder order."""
    heads = []
    for name in sorted(os.listdir(fixture)):
        if name.endswith("q") and os.path.isdir(os.path.join(fixture, name)):
            layer, q_head = int(name[1:3]), int(name[4:6])
            q = read_sniffed_folder(os.path.join(fixture, name))
            k = read_sniffed_folder(os.path.join(fixture, "l%02dh%02dk" % (layer, q_head)))
            heads.append((name, q, k))
    return heads


def write_head(root, index, q, k, q_vectors=None, q_position=None, k_vectors=None, k_rows=None):
    """Head ``index`` of layer 0 in a dense layout (query head i reads key head i)."""
    n_q = len(q["position"])
    position = q["position"] if q_position is None else np.full(n_q, q_position, np.int32)
    u.write_folder(u.folder(root, 0, index, "q"),
                   q["vector"] if q_vectors is None else q_vectors, position,
                   position // 32, q["example_id"], vec_dtype="float32", int_dtype="int32")
    rows = np.arange(len(k["position"])) if k_rows is None else k_rows
    u.write_folder(u.folder(root, 0, index, "k"),
                   k["vector"][rows] if k_vectors is None else k_vectors, k["position"][rows],
                   k["bucket"][rows], k["example_id"][rows], vec_dtype="float32",
                   int_dtype="int32")


def run_analyze(analyze, root, out, heads):
    u.run([analyze, "--data-root", root, "--output-dir", out, "--num-layers", 1,
           "--num-q-heads", heads, "--num-k-heads", heads, "--normality-max-dims", 64,
           "--max-tokens-per-head", 50000, "--threads", 2, "--pca-roles", "on"], expect=0)
    _, rows = u.read_csv(os.path.join(out, "head_metrics.csv"))
    return {int(r["q_head"]): r for r in rows}


def orientation(keys, buckets):
    """docs/method.md §2.1, written here again: sign of the mean over key buckets of the
    per-bucket key mean, 0 -> +1."""
    means = np.array([keys[buckets == b].mean(axis=0) for b in np.unique(buckets)])
    s = np.sign(means.mean(axis=0))
    s[s == 0] = 1.0
    return s


def expected_untilted(queries, keys, key_buckets):
    """The normality outputs when beta = 0: KS / moments of the oriented, standardized
    columns themselves."""
    x = queries.astype(np.float64) * orientation(keys.astype(np.float64), key_buckets)
    z = (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
    p = np.array([stats.kstest(z[:, c], "norm", method="exact").pvalue for c in range(z.shape[1])])
    skew = stats.skew(z, axis=0, bias=False)
    kurt = stats.kurtosis(z, axis=0, fisher=True, bias=False)
    return {"q_resid0_ks_p": p[0], "q_resid0_skew": skew[0], "q_resid0_kurt": kurt[0],
            "q_noise_med_ks_p": np.median(p[1:]),
            "q_noise_frac_ks_p_lt_alpha": np.mean(p[1:] < P_ALPHA),
            "q_noise_med_abs_skew": np.median(np.abs(skew[1:])),
            "q_noise_med_abs_kurt": np.median(np.abs(kurt[1:]))}


def round_significant_bits(x, bits):
    mantissa, exponent = np.frexp(x)
    return np.ldexp(np.round(mantissa * 2.0 ** bits) / 2.0 ** bits, exponent).astype(np.float32)


def check_close(c, what, have, want, quantity):
    rel, abs_tol = ref_metrics.tolerance(quantity)
    c.check(u.close(float(have), float(want), rel=rel, abs_tol=abs_tol),
            "%s %s: ap_analyze %r, expected %r (diff %.3g)"
            % (what, quantity, have, want, float(have) - float(want)))
    return abs(float(have) - float(want))


def ks_with_ties(c, analyze, heads, work):
    root, out = os.path.join(work, "ks_dump"), os.path.join(work, "ks_out")
    cases = []  # (label, queries, keys, key buckets)
    for name, q, k in heads:
        cases.append((name + " bf16", q["vector"], k))
    for name, q, k in heads:
        cases.append((name + " 2 bits", round_significant_bits(q["vector"][:100], 2), k))
    distinct = []
    for index, (_label, vectors, k) in enumerate(cases):
        n = vectors.shape[0]
        qd = {"position": np.zeros(n, np.int32), "example_id": np.zeros(n, np.int32)}
        # Position 100 (bucket 3) for every query: no slope, and buckets 0-2 still give AP.
        write_head(root, index, qd, k, q_vectors=vectors, q_position=100)
        distinct.append(np.mean([len(np.unique(vectors[:, col])) / n
                                 for col in range(vectors.shape[1])]))
    got = run_analyze(analyze, root, out, len(cases))
    worst = {"ks": 0.0, "moments": 0.0}
    p_values = []
    for index, (label, vectors, k) in enumerate(cases):
        c.check(float(got[index]["q_beta_norm"]) == 0.0,
                "%s: beta must be 0 with one position (got %s)" % (label, got[index]["q_beta_norm"]))
        want = expected_untilted(vectors, k["vector"], k["bucket"])
        p_values.append(want["q_resid0_ks_p"])
        for quantity, value in want.items():
            diff = check_close(c, label, got[index][quantity], value, quantity)
            group = "ks" if quantity in ref_metrics.KS else "moments"
            worst[group] = max(worst[group], diff)
    half = len(heads)
    print("KS with ties: %d heads; distinct values per column: bf16 %.2f, 2 bits %.2f of the "
          "rows; q_resid0_ks_p from %.2g to %.2g; worst |diff| KS %.3g, moments %.3g"
          % (len(cases), np.mean(distinct[:half]), np.mean(distinct[half:]), min(p_values),
             max(p_values), worst["ks"], worst["moments"]))
    c.check(np.mean(distinct[:half]) < 0.5, "the bf16 columns should be heavily tied")
    c.check(sum(1e-4 < p < 0.999 for p in p_values) >= len(p_values) // 2,
            "most p-values should be informative (neither ~0 nor ~1): %s" % p_values)


def orientation_tie(c, analyze, heads, work):
    root, out = os.path.join(work, "tie_dump"), os.path.join(work, "tie_out")
    flipped_root = os.path.join(work, "tie_dump_minus")
    flip0 = np.ones(heads[0][1]["vector"].shape[1], np.float32)
    flip0[0] = -1.0
    for index, (_name, q, k) in enumerate(heads):
        keys = np.concatenate([k["vector"], k["vector"] * flip0])
        rows = np.concatenate([np.arange(len(k["position"]))] * 2)
        sums = [keys[k["bucket"][rows] == b, 0].astype(np.float64).sum()
                for b in np.unique(k["bucket"])]
        c.check(all(s == 0.0 for s in sums), "component-0 key sums must be exactly 0: %s" % sums)
        write_head(root, index, q, k, k_vectors=keys, k_rows=rows)
        write_head(flipped_root, index, q, k, q_vectors=q["vector"] * flip0, k_vectors=keys,
                   k_rows=rows)
    got = run_analyze(analyze, root, out, len(heads))
    worst = 0.0
    for index, (name, _q, _k) in enumerate(heads):
        want, _, _, _ = reference.analyze(u.folder(root, 0, index, "q"),
                                          u.folder(root, 0, index, "k"), P_ALPHA)
        minus, _, _, _ = reference.analyze(u.folder(flipped_root, 0, index, "q"),
                                           u.folder(flipped_root, 0, index, "k"), P_ALPHA)
        for quantity, value in want.items():
            if quantity in ref_metrics.EXACT:
                c.check(int(got[index][quantity]) == int(value), "%s %s" % (name, quantity))
                continue
            if quantity in ref_metrics.NAMES:
                c.check(got[index][quantity] == value, "%s %s: %s, expected %s"
                        % (name, quantity, got[index][quantity], value))
                continue
            diff = check_close(c, name + " (tied orientation)", got[index][quantity], value,
                               quantity)
            if quantity in ref_metrics.KS or quantity in ref_metrics.MOMENTS:
                worst = max(worst, diff)
        separation = max(abs(want[qn] - minus[qn]) for qn in NOISE)
        c.check(separation > 1e-4, "%s: the signs +1 and -1 give the same noise statistics; "
                "the test cannot tell them apart" % name)
    print("orientation tie: %d heads agree with the reference (worst |diff| KS/moments %.3g)"
          % (len(heads), worst))


def main():
    analyze, fixture, work = sys.argv[1:4]
    u.fresh_dir(work)
    c = u.Checker()
    heads = fixture_heads(fixture)
    c.check(len(heads) == 24, "the fixture should hold 24 query heads, found %d" % len(heads))
    ks_with_ties(c, analyze, heads, work)
    orientation_tie(c, analyze, heads, work)
    c.close("test_real_ties")


if __name__ == "__main__":
    main()
