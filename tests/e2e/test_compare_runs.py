#!/usr/bin/python3
"""Comparing result sets (docs/method.md §8.6), end to end: calibration on synthetic pairs of
dumps with known true differences, the refusals, and (with --python) the same bytes from
attention_plasticity.compare_runs as from ap_compare.

usage: test_compare_runs.py AP_SYNTH AP_ANALYZE AP_COMPARE WORK_DIR [--python]

The pair: ap_synth writes dump A and dump B with the same seed (the same keys, query model and
truth) and independent query noise (--query-seed), B with the drift of the query heads of
layers 1 and 9 multiplied by 1.6 (their true AP changes; true_ap.csv of each dump gives it).
A is analyzed with the pair-sampler seed 0, B with seed 1, so queries and pairs are
independent between the sets. 16 layers x 16 query heads = 256 heads (224 with a true
difference of exactly 0), d = 16, 8 buckets of 256 queries. Checked:
  - the false-positive rate at 5% (p < 0.05, two-sided) over the null (head, bucket) AP_j, and
    over those and the null heads' ap_overall together, is in [0.03, 0.07]; over ap_overall
    alone (224 tests) within 3 binomial standard errors of 0.05;
  - the false discovery proportion of the BH selection at q <= 0.05 over ap_overall and AP_j is
    at most 0.10 (its expectation, the FDR, is at most 0.05 x the share of null tests; one
    realization scatters);
  - the standardized errors (difference - true difference) / SE of ap_overall over all heads
    have mean within 4/sqrt(n) of 0 and SD in [0.8, 1.2];
  - the power at 5% on the changed heads is reported, by size of the true difference;
  - ap_compare refuses sets with other heads (and compares the common ones when told to), sets
    without standard errors, and a single set; the files are written as one set.
"""

import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

SHAPE = ["--num-layers", 16, "--num-q-heads", 16, "--num-k-heads", 4, "--dim", 16, "--tokens", 2048,
         "--examples", 2, "--buckets", 8, "--seed", 5]
CHANGED_LAYERS = "1,9"
FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")


def truth_of(dump):
    _, heads = u.read_csv(os.path.join(dump, "true_ap.csv"))
    _, buckets = u.read_csv(os.path.join(dump, "true_profile.csv"))
    return ({u.head_key(r): float(r["ap_true"]) for r in heads},
            {u.head_key(r) + (int(r["q_bucket"]),): float(r["ap_true"]) for r in buckets})


def calibration(c, rows, truth_a, truth_b):
    head_a, bucket_a = truth_a
    head_b, bucket_b = truth_b

    def true_difference(r):
        key = u.head_key(r)
        if r["quantity"] == "ap_overall":
            return head_b[key] - head_a[key]
        return bucket_b[key + (int(r["q_bucket"]),)] - bucket_a[key + (int(r["q_bucket"]),)]

    tested = [r for r in rows if r["quantity"] in ("ap_overall", "ap_bucket") and r["p"] != "nan"]
    for quantity, (lo, hi) in (("ap_overall", None), ("ap_bucket", (0.03, 0.07)), ("both", (0.03, 0.07))):
        null = [r for r in tested if quantity in ("both", r["quantity"]) and true_difference(r) == 0.0]
        fp = sum(float(r["p"]) < 0.05 for r in null)
        share = fp / len(null)
        se = math.sqrt(0.05 * 0.95 / len(null))
        if lo is None:  # a few hundred tests: within 3 binomial standard errors of 0.05
            lo, hi = 0.05 - 3.0 * se, 0.05 + 3.0 * se
        print("false-positive rate at 5%%, %s: %d of %d null tests = %.3f (binomial SE %.3f; required [%.3f, %.3f])"
              % (quantity, fp, len(null), share, se, lo, hi))
        c.check(lo <= share <= hi, "%s: false-positive rate %.3f outside [%.3f, %.3f]" % (quantity, share, lo, hi))
    selected = [r for r in tested if r["significant"] == "1"]
    false = [r for r in selected if true_difference(r) == 0.0]
    fdp = len(false) / max(1, len(selected))
    print("BH at q <= 0.05 over ap_overall and AP_j: %d selected, %d of them null: false discovery proportion %.3f"
          % (len(selected), len(false), fdp))
    c.check(len(selected) > 0 and fdp <= 0.10, "false discovery proportion %.3f (of %d)" % (fdp, len(selected)))
    overall = [r for r in tested if r["quantity"] == "ap_overall"]
    z = [(float(r["difference"]) - true_difference(r)) / float(r["se"]) for r in overall]
    mean = sum(z) / len(z)
    sd = math.sqrt(sum((x - mean) ** 2 for x in z) / (len(z) - 1))
    print("(difference - true difference) / SE, ap_overall of %d heads: mean %.3f, SD %.3f" % (len(z), mean, sd))
    c.check(abs(mean) <= 4.0 / math.sqrt(len(z)), "mean standardized error %.3f" % mean)
    c.check(0.8 <= sd <= 1.2, "SD of the standardized errors %.3f" % sd)
    changed = [r for r in overall if true_difference(r) != 0.0]
    c.check(len(changed) == 32, "%d heads with a true difference, expected 32" % len(changed))
    for lo, hi in ((0.0, 0.01), (0.01, 0.03), (0.03, 1.0)):
        group = [r for r in changed if lo <= abs(true_difference(r)) < hi]
        if group:
            power = sum(float(r["p"]) < 0.05 for r in group) / len(group)
            mean_se = sum(float(r["se"]) for r in group) / len(group)
            print("power at 5%%, ap_overall, |true difference| in [%.2f, %.2f): %d heads, %.3f (mean SE %.4f)"
                  % (lo, hi, len(group), power, mean_se))


def refusals(c, analyze, compare, work, set_a, set_b):
    # Other heads: refused, or the common ones compared when told to.
    few = os.path.join(work, "results_few")
    u.run([analyze, "--data-root", os.path.join(work, "dump_a"), "--output-dir", few, "--threads", 2,
           "--layers", "0-3"], expect=0)
    out = os.path.join(work, "refused")
    _, _, err = u.run([compare, "--output-dir", out, set_a, few], expect=2)
    c.check("different heads" in err and "--common-heads" in err, "other heads: %s" % err.strip())
    c.check(not os.path.exists(os.path.join(out, FILES[0])), "a refused comparison wrote files")
    _, _, err = u.run([compare, "--output-dir", out, "--common-heads", "on", set_a, few], expect=0)
    c.check("heads common to every set" in err, "common heads: %s" % err.strip())
    _, rows = u.read_csv(os.path.join(out, FILES[0]))
    c.check({u.head_key(r)[0] for r in rows} == {0, 1, 2, 3}, "common heads: layers %s" % {u.head_key(r)[0] for r in rows})
    # No standard errors (confidence_intervals off).
    bare = os.path.join(work, "results_bare")
    u.run([analyze, "--data-root", os.path.join(work, "dump_b"), "--output-dir", bare, "--threads", 2,
           "--confidence-intervals", "off", "--layers", "0-3"], expect=0)
    _, _, err = u.run([compare, "--output-dir", out, "--common-heads", "on", set_a, bare], expect=2)
    c.check("no standard error" in err and "confidence_intervals" in err, "no SE: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", out, set_a], expect=2)
    c.check("at least 2" in err, "one set: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", out, set_a, os.path.join(work, "absent")], expect=2)
    c.check("absent" in err, "absent set: %s" % err.strip())


def python_same_bytes(c, work, set_a, set_b, expected):
    import attention_plasticity as ap

    out = os.path.join(work, "python")
    result = ap.compare_runs([set_a, set_b], output_dir=out, names=["A", "B"])
    for name in FILES:
        with open(os.path.join(out, name), "rb") as f:
            got = f.read()
        c.check(got == expected[name], "%s: compare_runs wrote other bytes than ap_compare" % name)
    c.check(len(result.heads) == expected["rows"], "compare_runs: %d rows in heads" % len(result.heads))
    try:
        ap.compare_runs([set_a])
        c.check(False, "compare_runs accepted one set")
    except ap.UsageError as e:
        c.check("at least 2" in str(e), "compare_runs, one set: %s" % e)
    print("compare_runs (Python) wrote the same bytes as ap_compare")


def main():
    synth, analyze, compare, work = sys.argv[1:5]
    with_python = "--python" in sys.argv[5:]
    u.fresh_dir(work)
    dump_a, dump_b = os.path.join(work, "dump_a"), os.path.join(work, "dump_b")
    u.run([synth, "--out", dump_a] + SHAPE, expect=0)
    u.run([synth, "--out", dump_b, "--query-seed", 1005, "--changed-layers", CHANGED_LAYERS, "--change-factor", 1.6]
          + SHAPE, expect=0)
    set_a, set_b = os.path.join(work, "results_a"), os.path.join(work, "results_b")
    u.run([analyze, "--data-root", dump_a, "--output-dir", set_a, "--threads", 2, "--seed", 0], expect=0)
    u.run([analyze, "--data-root", dump_b, "--output-dir", set_b, "--threads", 2, "--seed", 1], expect=0)
    out = os.path.join(work, "compared")
    _, _, err = u.run([compare, "--output-dir", out, "--names", "A,B", set_a, set_b], expect=0)
    print(err.strip())
    c = u.Checker()
    _, rows = u.read_csv(os.path.join(out, FILES[0]))
    c.check(len({u.head_key(r) for r in rows}) == 256, "%d heads compared" % len({u.head_key(r) for r in rows}))
    calibration(c, rows, truth_of(dump_a), truth_of(dump_b))
    expected = {"rows": len(rows)}
    for name in FILES:
        with open(os.path.join(out, name), "rb") as f:
            expected[name] = f.read()
    refusals(c, analyze, compare, work, set_a, set_b)
    if with_python:
        python_same_bytes(c, work, set_a, set_b, expected)
    if not c.failures:
        for d in (dump_a, dump_b):
            shutil.rmtree(d)
    c.close("test_compare_runs")


if __name__ == "__main__":
    main()
