#!/usr/bin/env python3
"""Prints the per-head interval table of docs/real_data.md (markdown) from two result sets of
one dump: SEQ analyzed with the defaults (sampling_unit sequence, docs/method.md §8.3) and
TOKEN with --sampling-unit token (the former, token-level errors), both with --empirical-ap on.

usage: interval_table.py SEQ TOKEN

Columns: the head; ap_overall with its 95% interval (sequence-level); the half-width of the
token-level interval; the ratio of the standard errors, sequence / token; the empirical AP
with its standard error (§8.2: the same in both sets, token-level); the Gaussian minus the
empirical AP and that in empirical standard errors. Last, one summary line.
"""

import csv
import statistics
import sys


def rows(folder):
    with open(f"{folder}/head_metrics.csv", newline="", encoding="utf-8") as f:
        return {(int(r["layer"]), int(r["q_head"])): r for r in csv.DictReader(f)}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    seq, tok = rows(argv[0]), rows(argv[1])
    print("| layer | q_head | `ap_overall` [95% interval] | token-level ± | SE ratio | "
          "`ap_empirical_overall` ± SE | Gaussian − empirical | in SEs |")
    print("|---|---|---|---|---|---|---|---|")
    ratios, halfw, halfw_tok, zs = [], [], [], []
    for key in sorted(seq):
        s, t = seq[key], tok[key]
        ratio = float(s["ap_overall_se"]) / float(t["ap_overall_se"])
        hw = 0.5 * (float(s["ap_overall_ci_high"]) - float(s["ap_overall_ci_low"]))
        hw_t = 0.5 * (float(t["ap_overall_ci_high"]) - float(t["ap_overall_ci_low"]))
        diff = float(s["ap_overall"]) - float(s["ap_empirical_overall"])
        z = diff / float(s["ap_empirical_overall_se"])
        ratios.append(ratio)
        halfw.append(hw)
        halfw_tok.append(hw_t)
        zs.append(abs(z))
        print(f"| {key[0]} | {key[1]} | {float(s['ap_overall']):.3f} [{float(s['ap_overall_ci_low']):.3f}, "
              f"{float(s['ap_overall_ci_high']):.3f}] | ±{hw_t:.3f} | {ratio:.2f} | "
              f"{float(s['ap_empirical_overall']):.3f} ± {float(s['ap_empirical_overall_se']):.3f} | "
              f"{diff:+.3f} | {z:+.1f} |".replace("+-", "−").replace(" -", " −"))
    print(f"\n{len(ratios)} heads; SE ratio sequence/token: median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}; 95% half-width: sequence {min(halfw):.3f}-{max(halfw):.3f}, "
          f"token {min(halfw_tok):.3f}-{max(halfw_tok):.3f}; |Gaussian - empirical| within 2 empirical SEs: "
          f"{sum(z <= 2 for z in zs)}, beyond 3: {sum(z > 3 for z in zs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
