#!/usr/bin/env python3
"""Per-head table of estimated vs true attention plasticity (standard library only).

usage: demo_table.py HEAD_METRICS_CSV TRUE_AP_CSV

Joins ap_analyze's head_metrics.csv with ap_synth's true_ap.csv on (layer, q_head) and
prints layer, q_head, k_head, AP estimated, AP true and their difference, then a summary.
Exits 1 when a head of true_ap.csv has no estimate.
"""

import csv
import math
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    metrics = {(int(r["layer"]), int(r["q_head"])): r for r in read(argv[1])}
    truth = read(argv[2])
    print("%5s %6s %6s %10s %10s %10s" % ("layer", "q_head", "k_head", "AP est", "AP true", "est-true"))
    diffs = []
    missing = []
    for t in sorted(truth, key=lambda r: (int(r["layer"]), int(r["q_head"]))):
        key = (int(t["layer"]), int(t["q_head"]))
        true_ap = float(t["ap_true"])
        m = metrics.get(key)
        if m is None:
            missing.append(key)
            print("%5d %6d %6s %10s %10.4f %10s" % (key[0], key[1], t["k_head"], "(failed)", true_ap, ""))
            continue
        est = float(m["ap_overall"])
        diff = est - true_ap
        if not math.isnan(diff):
            diffs.append(diff)
        print("%5d %6d %6s %10.4f %10.4f %+10.4f" % (key[0], key[1], t["k_head"], est, true_ap, diff))
    if diffs:
        worst = max(diffs, key=abs)
        mean_abs = sum(abs(d) for d in diffs) / len(diffs)
        print("%d heads: max |est - true| = %.4f, mean |est - true| = %.4f" % (len(diffs), abs(worst), mean_abs))
    if missing:
        print("no estimate for %d head(s): %s" % (len(missing), missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
