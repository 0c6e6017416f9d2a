#!/usr/bin/python3
"""Calibration of the confidence intervals of docs/method.md §8.3, end to end: ap_synth writes a
dump with a known true AP per head and per query bucket (true_ap.csv, true_profile.csv: the exact
expectation over the key-pair sampler given the generated keys, under the true query model),
ap_analyze writes the 95% intervals (its default), and the share of heads whose interval
[ap_overall_ci_low, ap_overall_ci_high] holds ap_true must lie in [0.88, 0.99]; the same for the
AP_j intervals of head_profile.csv against true_profile.csv, and for 80% intervals in [0.70, 0.90].
Then small buckets (8 queries, below min_bucket_queries): their AP_j intervals, computed with
--min-bucket-queries 2, must cover as well; with the default they are flagged and left out.

usage: test_interval_calibration.py AP_SYNTH AP_ANALYZE WORK_DIR

The dump: 12 layers x 16 query heads (4 key heads) = 192 heads, d = 16, 4096 tokens per head
(4 examples x 1024 positions, 8 uniform buckets: 512 queries per bucket), sliding windows on
layers 3 and 7, drift strengths from 0.3 (AP about 0.99) to 150 (AP about 0.01). The intervals
condition on the keys and the query positions, as the truth does (--sampling-unit token, §8.3: the
synthetic tokens are independent draws and the truth is conditional on the generated keys); the
queries and the pairs are the random part. With 192 heads the binomial standard error of a coverage of 0.95 is 0.016:
[0.88, 0.99] is more than 2.5 standard errors away on either side.
"""

import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

SHAPE = ["--num-layers", 12, "--num-q-heads", 16, "--num-k-heads", 4, "--dim", 16, "--tokens", 4096,
         "--examples", 4, "--buckets", 8, "--sliding-window-layers", "3,7", "--seed", 21]


def coverage(rows, truth, key, low, high, true_column):
    covered = [u.num(r[low]) <= truth[key(r)][true_column] <= u.num(r[high]) for r in rows]
    return sum(covered), len(covered)


def report(c, name, hits, count, lo, hi):
    share = hits / count
    se = math.sqrt(share * (1.0 - share) / count) if 0 < share < 1 else math.sqrt(0.25 / count)
    print("%s: %d of %d covered = %.3f (binomial SE %.3f; required [%.2f, %.2f])" % (name, hits, count, share, se,
                                                                                     lo, hi))
    c.check(lo <= share <= hi, "%s: coverage %.3f outside [%.2f, %.2f]" % (name, share, lo, hi))


def main():
    synth, analyze, work = sys.argv[1:4]
    u.fresh_dir(work)
    dump = os.path.join(work, "dump")
    u.run([synth, "--out", dump] + SHAPE, expect=0)
    _, true_heads = u.read_csv(os.path.join(dump, "true_ap.csv"))
    _, true_buckets = u.read_csv(os.path.join(dump, "true_profile.csv"))
    head_truth = {u.head_key(r): {"ap_true": float(r["ap_true"])} for r in true_heads}
    bucket_truth = {u.head_key(r) + (int(r["q_bucket"]),): {"ap_true": float(r["ap_true"])} for r in true_buckets}
    c = u.Checker()
    for level, lo, hi in ((0.95, 0.88, 0.99), (0.8, 0.70, 0.90)):
        out = os.path.join(work, "results_%g" % level)
        u.run([analyze, "--data-root", dump, "--output-dir", out, "--threads", 2, "--confidence-level", level,
               "--sampling-unit", "token"],
              expect=0)
        _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
        _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
        c.check(len(metrics) == 192, "%d metric rows, expected 192" % len(metrics))
        hits, count = coverage(metrics, head_truth, u.head_key, "ap_overall_ci_low", "ap_overall_ci_high", "ap_true")
        report(c, "level %g, ap_overall of %d heads" % (level, count), hits, count, lo, hi)
        rows = [r for r in profile if r["plasticity_ci_low"] != "nan"]
        hits, count = coverage(rows, bucket_truth, lambda r: u.head_key(r) + (int(r["q_bucket"]),),
                               "plasticity_ci_low", "plasticity_ci_high", "ap_true")
        report(c, "level %g, AP_j of %d (head, bucket) rows" % (level, count), hits, count, lo, hi)
        if level == 0.95:
            # The standardized errors of the bias-corrected estimate: mean near 0, SD near 1.
            z = [(float(r["ap_overall_corrected"]) - head_truth[u.head_key(r)]["ap_true"])
                 / float(r["ap_overall_se"]) for r in metrics]
            mean = sum(z) / len(z)
            sd = math.sqrt(sum((x - mean) ** 2 for x in z) / (len(z) - 1))
            high = [r for r in metrics if head_truth[u.head_key(r)]["ap_true"] > 0.9]
            raw_z = [(float(r["ap_overall"]) - head_truth[u.head_key(r)]["ap_true"]) / float(r["ap_overall_se"])
                     for r in high]
            corrected_z = [(float(r["ap_overall"]) - float(r["ap_overall_bias"]) - head_truth[u.head_key(r)]["ap_true"])
                           / float(r["ap_overall_se"]) for r in high]
            print("(estimate - bias - truth) / SE over the heads: mean %.3f, SD %.3f; on the %d heads with AP > 0.9, "
                  "where the bias matters most, the mean is %.3f, and %.3f without the bias correction"
                  % (mean, sd, len(high), sum(corrected_z) / max(1, len(high)), sum(raw_z) / max(1, len(high))))
            c.check(abs(mean) <= 4.0 / math.sqrt(len(z)), "mean standardized error %.3f" % mean)
            c.check(0.75 <= sd <= 1.25, "SD of the standardized errors %.3f" % sd)
    if not c.failures:
        shutil.rmtree(dump)
    small_buckets(c, synth, analyze, work)
    c.close("test_interval_calibration")


def small_buckets(c, synth, analyze, work):
    """Buckets of 8 queries (docs/method.md §2.14, min_bucket_queries): 32 heads, d = 16, one
    sequence of 512 tokens in 64 buckets. With --min-bucket-queries 2 (the rule of §2.10 alone) the
    AP_j intervals of these small buckets must still cover the truth for [0.88, 0.99] of them; with
    the default (16) every bucket is flagged small_bucket and has no interval, and no head an
    aggregate (nothing rests on them)."""
    dump = os.path.join(work, "small_dump")
    u.run([synth, "--out", dump, "--num-layers", 2, "--num-q-heads", 16, "--num-k-heads", 4, "--dim", 16,
           "--tokens", 512, "--examples", 1, "--buckets", 64, "--seed", 5], expect=0)
    _, true_buckets = u.read_csv(os.path.join(dump, "true_profile.csv"))
    truth = {u.head_key(r) + (int(r["q_bucket"]),): {"ap_true": float(r["ap_true"])} for r in true_buckets}
    out = os.path.join(work, "small_min2")
    u.run([analyze, "--data-root", dump, "--output-dir", out, "--threads", 2, "--min-bucket-queries", 2,
           "--num-pairs-per-bucket", 64, "--sampling-unit", "token"], expect=0)
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    rows = [r for r in profile if r["plasticity_ci_low"] != "nan"]
    c.check(all(int(r["n_queries"]) == 8 and r["small_bucket"] == "0" for r in rows), "buckets of 8 queries")
    hits, count = coverage(rows, truth, lambda r: u.head_key(r) + (int(r["q_bucket"]),),
                           "plasticity_ci_low", "plasticity_ci_high", "ap_true")
    report(c, "level 0.95, AP_j of %d buckets of 8 queries" % count, hits, count, 0.88, 0.99)
    out = os.path.join(work, "small_default")
    u.run([analyze, "--data-root", dump, "--output-dir", out, "--threads", 2, "--num-pairs-per-bucket", 64,
           "--sampling-unit", "token"], expect=0)
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
    c.check(all(r["small_bucket"] == "1" and r["plasticity_ci_low"] == "nan" for r in profile),
            "with the default min_bucket_queries every bucket of 8 queries is flagged, without an interval")
    c.check(all(r["ap_overall"] == "nan" for r in metrics), "no head aggregates its small buckets")
    shutil.rmtree(dump)


if __name__ == "__main__":
    main()
