#!/usr/bin/env python3
"""The tables of docs/plasticity_study.md that set the errors side by side: one study's dumps
run three times by scripts/plasticity_study.py --from-dumps,

  PAIRED    the defaults (sequence-level errors, paired design),
  UNPAIRED  --design unpaired (sequence-level errors, the sets taken as independent),
  TOKEN     --sampling-unit token --design unpaired (the errors of the earlier version),

usage: plasticity_study_stats.py PAIRED UNPAIRED TOKEN

Prints (markdown) for each pair of consecutive sets and each of ap_overall, ap_first20,
ap_last20, ap_drop: the mean over heads of the bias-corrected change (compare_summary.csv, layer
all; the same in the three runs but for TOKEN's bias, which is the same too), and per run the
standard error of that mean, its z and the heads changed at BH q <= 0.05; then the totals of
changed (pair, head, quantity) per run; then PAIRED's study_power.csv (every pair, both designs)
summed over the pairs.
"""

import csv
import os
import statistics
import sys

QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop")


def summary(out):
    with open(os.path.join(out, "compare", "compare_summary.csv"), newline="", encoding="utf-8") as f:
        return {(r["set_a"], r["set_b"], r["quantity"]): r for r in csv.DictReader(f) if r["layer"] == "all"}


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    runs = [summary(o) for o in argv]
    labels = ("paired", "unpaired", "token")
    print("| pair | quantity | mean change | " + " | ".join(f"{l}: se, z, changed" for l in labels) + " |")
    print("|---|---|---|" + "---|" * len(labels))
    totals = [0, 0, 0]
    for key in runs[0]:
        if key[2] not in QUANTITIES:
            continue
        cells = []
        for i, run in enumerate(runs):
            r = run[key]
            totals[i] += int(r["n_significant"])
            cells.append(f"{float(r['se']):.4f}, {float(r['z']):+.1f}, {r['n_significant']}")
        n = runs[0][key]["n_heads"]
        print(f"| {key[0]} → {key[1]} | {key[2]} | {float(runs[0][key]['mean_difference']):+.4f} | "
              + " | ".join(cells) + f" |  <!-- {n} heads -->")
    print("\nchanged (pair, head, quantity), consecutive pairs, head-level quantities: "
          + ", ".join(f"{l} {t}" for l, t in zip(labels, totals)))
    with open(os.path.join(argv[0], "study_power.csv"), newline="", encoding="utf-8") as f:
        power = list(csv.DictReader(f))
    print("\nstudy_power.csv (PAIRED), per pair: changed paired / unpaired over the head-level "
          "quantities | AP_j; median se ratio paired/unpaired of ap_overall")
    pairs = []
    for r in power:
        if (r["set_a"], r["set_b"]) not in pairs:
            pairs.append((r["set_a"], r["set_b"]))
    for a, b in pairs:
        rows = [r for r in power if (r["set_a"], r["set_b"]) == (a, b)]
        head = [r for r in rows if r["quantity"] in QUANTITIES]
        bucket = [r for r in rows if r["quantity"] == "ap_bucket"][0]
        overall = [r for r in rows if r["quantity"] == "ap_overall"][0]
        print(f"  {a} -> {b}: {sum(int(r['changed_paired']) for r in head)} / "
              f"{sum(int(r['changed_unpaired']) for r in head)} of {sum(int(r['n_tests']) for r in head)} | "
              f"{bucket['changed_paired']} / {bucket['changed_unpaired']} of {bucket['n_tests']}; "
              f"se ratio {float(overall['se_ratio_median']):.2f} (AP_j {float(bucket['se_ratio_median']):.2f})")
    ratios = [float(r["se_ratio_median"]) for r in power if r["quantity"] in QUANTITIES]
    print(f"  median over pairs and head-level quantities of the median se ratio: {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
