#!/usr/bin/python3
"""The empirical AP of docs/method.md §8.2 against the Gaussian AP and the truth, end to end.

usage: test_empirical_agreement.py AP_SYNTH AP_ANALYZE WORK_DIR

1. Exactly Gaussian buckets (ap_synth --query-positions centre: every query of bucket j sits at
   the bucket's centre position, so the queries of a bucket are i.i.d. N(m_j, C_j), the
   pipeline's own model): 2 layers x 16 query heads, d = 16, 8192 tokens, 8 buckets (1024
   queries each). Both estimates then target the same AP. Bound, per head:
       |ap_empirical_overall - (ap_overall - ap_overall_bias)| <= 4.5 ap_empirical_overall_se
   because on the same queries and pairs var(empirical - Gaussian) = var(empirical) -
   var(Gaussian) <= var(empirical) (the Gaussian plug-in is the efficient estimate), and
   ap_empirical_overall_se (query sampling and pair sampling) is at least that SD. Over the 32
   heads the standardized differences have |mean| <= 4 / sqrt(32). The empirical AP is also
   unbiased for ap_true: its 95% interval (+- 1.96 SE) covers ap_true for >= 80% of the heads
   (binomial: 95% expected, SE 4%).
2. The default layout (a query at every position), reported, not checked: there the bucket's
   actual queries are a mixture over the bucket's positions, the positional drift adding
   b0^2 var(t | bucket) along the position direction, which the model (the line at tau_j) does
   not have. It changes the law only along that direction, which matters only for pairs whose
   keys differ along it, and those are never plastic in a drifting head (measured: the same
   standardized differences stay within about +-1). That the comparison detects a query law that
   is not Gaussian is checked in tests/test_empirical.cpp.
"""

import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

SHAPE = ["--num-layers", 2, "--num-q-heads", 16, "--num-k-heads", 4, "--dim", 16, "--tokens", 8192,
         "--examples", 8, "--buckets", 8, "--seed", 8]


def standardized(rows):
    return [(float(r["ap_empirical_overall"]) - (float(r["ap_overall"]) - float(r["ap_overall_bias"])))
            / float(r["ap_empirical_overall_se"]) for r in rows]


def main():
    synth, analyze, work = sys.argv[1:4]
    u.fresh_dir(work)
    c = u.Checker()
    results = {}
    for layout in ("centre", "spread"):
        dump = os.path.join(work, "dump_" + layout)
        out = os.path.join(work, "results_" + layout)
        u.run([synth, "--out", dump, "--query-positions", layout] + SHAPE, expect=0)
        # the synthetic tokens are independent draws and the truth conditional on the keys: token-level errors
        u.run([analyze, "--data-root", dump, "--output-dir", out, "--empirical-ap", "on", "--threads", 2,
               "--sampling-unit", "token"], expect=0)
        _, truth = u.read_csv(os.path.join(dump, "true_ap.csv"))
        _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
        _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
        _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
        results[layout] = (metrics, {u.head_key(r): float(r["ap_true"]) for r in truth})
        c.check(len(metrics) == 32, "%s: %d metric rows" % (layout, len(metrics)))
        c.check(all(r["plasticity_empirical"] != "nan" for r in profile if r["n_pairs"] != "0"),
                "%s: every bucket with pairs has an empirical AP" % layout)
        c.check(all((r["plasticity_empirical"] == "nan") == (r["n_pairs"] == "0") for r in cells),
                "%s: every cell with pairs (and only those) has an empirical plasticity" % layout)
        shutil.rmtree(dump)
    metrics, truth = results["centre"]
    d = standardized(metrics)
    worst = max(abs(x) for x in d)
    mean = sum(d) / len(d)
    covered = sum(abs(float(r["ap_empirical_overall"]) - truth[u.head_key(r)])
                  <= 1.96 * float(r["ap_empirical_overall_se"]) for r in metrics)
    diffs = [abs(float(r["ap_empirical_overall"]) - float(r["ap_overall"])) for r in metrics]
    print("centre (exactly Gaussian buckets): |empirical - Gaussian| up to %.4f; standardized: mean %.3f, "
          "largest |.| %.2f (bound 4.5); empirical 95%% interval covers ap_true for %d of %d heads"
          % (max(diffs), mean, worst, covered, len(metrics)))
    for x, r in zip(d, metrics):
        c.check(abs(x) <= 4.5, "centre: head %s: empirical %s vs Gaussian %s (bias %s), SE %s: |D| = %.2f > 4.5"
                % (u.head_key(r), r["ap_empirical_overall"], r["ap_overall"], r["ap_overall_bias"],
                   r["ap_empirical_overall_se"], abs(x)))
    c.check(abs(mean) <= 4.0 / math.sqrt(len(d)), "centre: mean standardized difference %.3f" % mean)
    c.check(covered >= 0.8 * len(metrics), "centre: empirical intervals cover ap_true for %d of %d heads"
            % (covered, len(metrics)))
    metrics, _ = results["spread"]
    d = standardized(metrics)
    worst_index = max(range(len(d)), key=lambda i: abs(d[i]))
    print("spread (drift within a bucket, not in the model; not checked): largest |D| %.2f (head %s: empirical %s, "
          "Gaussian %s)" % (abs(d[worst_index]), u.head_key(metrics[worst_index]),
                            metrics[worst_index]["ap_empirical_overall"], metrics[worst_index]["ap_overall"]))
    c.close("test_empirical_agreement")


if __name__ == "__main__":
    main()
