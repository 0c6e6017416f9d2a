#!/usr/bin/python3
"""Deterministic metrics of ap_analyze against the independent NumPy/SciPy reference.

usage: test_reference_metrics.py AP_ANALYZE SMALL_DUMP FIXTURE_CSV WORK_DIR

SMALL_DUMP is tests/data/small_dump (float32 and float64 vectors, int32 and int64 columns),
FIXTURE_CSV tests/reference/pipeline_reference.csv written by
tests/reference/gen_pipeline_reference.py (docs/method.md §2.1, §2.3-§2.9 and tau_j / n_j).
ap_analyze runs with no subsampling and normality_max_dims >= d - 1 (and the PCA roles of §8.5
on), so nothing compared here is random. Tolerances:
  counts (n_*_tokens, d_model, n_queries)       exact
  regression, R2, MAE, weights, beta norm, tau   1e-9 relative (absolute floor 1e-12: an R2
                                                 is 1 - SSres/SStot, known to ~1e-16 absolute)
  skewness, kurtosis (and their medians)         1e-9 relative, absolute floor 1e-9
  KS p-values (and their median), KS fraction    1e-6 absolute
  companion measures of §8.5                     1e-10 relative; pca_class exact
"""

import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

EXACT = {"n_q_tokens", "n_k_tokens", "d_model", "n_queries"}
KS = {"q_resid0_ks_p", "q_noise_med_ks_p", "q_noise_frac_ks_p_lt_alpha"}
MOMENTS = {"q_resid0_skew", "q_resid0_kurt", "q_noise_med_abs_skew", "q_noise_med_abs_kurt"}
COMPANION = {"bias_strength", "drift_slope_k", "drift_query_mean", "pc0_r_q", "pc0_r_k"}
NAMES = {"pca_class"}


def tolerance(quantity):
    if quantity in KS:
        return 0.0, 1e-6
    if quantity in MOMENTS:
        return 1e-9, 1e-9
    if quantity in COMPANION:
        return 1e-10, 1e-300
    return 1e-9, 1e-12


def load_fixture(path):
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    ref = {}
    for row in csv.DictReader(lines):
        key = (int(row["layer"]), int(row["q_head"]), row["quantity"], row["index"])
        ref[key] = row["value"]
    return ref


def load_results(out):
    got = {}
    _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
    for row in metrics:
        for col, value in row.items():
            if col not in ("layer", "q_head", "k_head"):
                got[(int(row["layer"]), int(row["q_head"]), col, "")] = value
    _, comps = u.read_csv(os.path.join(out, "head_component_weights.csv"))
    for row in comps:
        for col in ("component_r2", "weight"):
            got[(int(row["layer"]), int(row["q_head"]), col, row["component"])] = row[col]
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    for row in profile:
        for col in ("tau", "n_queries"):
            got[(int(row["layer"]), int(row["q_head"]), col, row["q_bucket"])] = row[col]
    return got


def compare_with_reference(c, ref, got):
    """Checks every reference value against ap_analyze's (``got``, from load_results) at the
    tolerances above, and that ap_analyze has no head or profile row the reference lacks;
    prints the worst differences (absolute for KS p-values and moments, else relative)."""
    worst = {}
    for key, want in sorted(ref.items()):
        quantity = key[2]
        if key not in got:
            c.check(False, "missing in ap_analyze output: %s" % (key,))
            continue
        have = got[key]
        if quantity in EXACT:
            c.check(int(have) == int(want), "%s: %s, reference %s" % (key, have, want))
            continue
        if quantity in NAMES:
            c.check(have == want, "%s: %s, reference %s" % (key, have, want))
            continue
        rel, abs_tol = tolerance(quantity)
        a, b = u.num(have), u.num(want)
        if a != a and b != b:  # NaN in both (a companion measure that is not defined)
            continue
        c.check(u.close(a, b, rel=rel, abs_tol=abs_tol), "%s: %s, reference %s (diff %.3g)" % (key, have, want, a - b))
        group = quantity if quantity in KS or quantity in MOMENTS or quantity in COMPANION else "other"
        relative = group == "other" or group in COMPANION
        worst[group] = max(worst.get(group, 0.0), abs(a - b) / max(abs(b), 1e-300) if relative else abs(a - b))
    extra_heads = sorted({k[:2] for k in got} - {k[:2] for k in ref})
    c.check(not extra_heads, "heads in ap_analyze output but not in the reference: %s" % extra_heads)
    # Every profile row of the driver is in the reference (no extra buckets).
    extra = [k for k in got if k[2] in ("tau", "n_queries") and k not in ref]
    c.check(not extra, "profile rows the reference does not have: %s" % extra[:5])
    print("worst differences: " + ", ".join("%s %.3g" % kv for kv in sorted(worst.items())))


def main():
    analyze, dump, fixture, work = sys.argv[1:5]
    u.fresh_dir(work)
    out = os.path.join(work, "out")
    u.run([analyze, "--data-root", dump, "--output-dir", out, "--normality-max-dims", 64,
           "--max-tokens-per-head", 50000, "--threads", 2, "--pca-roles", "on"], expect=0)
    c = u.Checker()
    compare_with_reference(c, load_fixture(fixture), load_results(out))
    c.close("test_reference_metrics")


if __name__ == "__main__":
    main()
