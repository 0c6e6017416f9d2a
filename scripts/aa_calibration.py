#!/usr/bin/env python3
"""The A/A calibration of issue 23 at full size: tests/e2e/test_aa_real.py's experiments (A/A with
different texts, unpaired; A/A with the same texts and other token draws, paired; the
delete-one jackknife over sequences) with more partitions, draws and sequences, on any capture in
qk-sniffer's Parquet layout, writing a summary for the docs.

usage: scripts/aa_calibration.py --ap-analyze PATH --ap-compare PATH --out DIR
           [--fixture DIR] [--layout L,Q,K] [--partitions R] [--draws R] [--jack-sequences G]
           [--jack-pairs N] [--jack-pair-seeds S] [--seed N] [--threads T] [--skip unpaired,...]

Writes DIR/aa_calibration.md (the tables), DIR/aa_calibration.csv (one row per design and
quantity), DIR/aa_jackknife.csv and DIR/aa_calibration.json (everything, with the configuration);
the work folders go to DIR/work. The exit status is 0 when every bound of the CI test holds, 1
otherwise (the summary is written either way). The bounds and how tests that share sequences
are counted: see tests/e2e/test_aa_real.py.

Default: the committed decoder capture (tests/data/real_decoder, 60 sequences), 200 partitions,
200 draws, the jackknife on 30 of the sequences with 4096 pairs per cell: about 10-15 CPU-minutes
(100 partitions, 100 draws and the jackknife on all 60 sequences at 2048 pairs: 5.3 CPU-minutes,
but the pair sampling is then 27% of the jackknife variance of ap_overall and 73% of ap_drop's:
it grows as G^2 / pairs, so keep G x sqrt(2048 / pairs) near 30).
"""

import argparse
import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import e2e_util as u  # noqa: E402
import test_aa_real as aa  # noqa: E402

COLUMNS = ("design", "quantity", "comparisons", "tests", "rejected", "fraction", "bound_low", "bound_high",
           "n_eff", "deff", "mean_z", "sd_z", "sd_z_sampling_sd", "bh_families", "bh_families_flagged",
           "bh_families_max", "bh_flags")


def fmt(v):
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def write_summary(out, results, failures):
    rows = []
    for design in ("unpaired", "paired"):
        for q in aa.QUANTITIES:
            if design in results and q in results[design]:
                rows.append(results[design][q])
    with open(os.path.join(out, "aa_calibration.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([fmt(r[c]) for c in COLUMNS])
    jack = results.get("jackknife", {})
    with open(os.path.join(out, "aa_jackknife.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("quantity", "n", "median_ratio", "p10", "p90", "inside_0.8_1.25", "pair_share"))
        for q, r in jack.items():
            w.writerow((q, r.get("heads"), fmt(r.get("median", float("nan"))), fmt(r.get("p10", float("nan"))),
                        fmt(r.get("p90", float("nan"))), fmt(r.get("inside", float("nan"))),
                        fmt(r.get("pair_share", float("nan")))))
    cfg = results["config"]
    lines = ["# A/A calibration on a real capture (issue 23)", "",
             "Fixture `%s`, layout %s; %d random partitions of the sequences into halves (unpaired), "
             "%d pairs of token draws at rate %g (paired), seed %d; ap_analyze --sequence-influences: %s, "
             "ap_compare --design: %s. %.0f s wall, %.0f s CPU, %d program runs."
             % (os.path.basename(os.path.normpath(cfg["fixture"])), "x".join(map(str, cfg["layout"])),
                cfg["partitions"], cfg["draws"], cfg["draw_rate"], cfg["seed"], results["programs"]["influences"],
                results["programs"]["design"], results["wall"], results["cpu"], results["program_runs"]), "",
             "| design | quantity | tests | p < 0.05 | 99.9% bound (n_eff) | mean z | SD z (null SD) | "
             "BH families flagged (max) | heads changed per comparison |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        heads = results[r["design"]]["changed_heads"]
        lines.append("| %s | %s | %d | %.3f | [%.3f, %.3f] (%d) | %+.3f | %.3f (%.3f) | %d of %d (%.1f) | %.2f |"
                     % (r["design"], r["quantity"], r["tests"], r["fraction"], r["bound_low"], r["bound_high"],
                        r["n_eff"], r["mean_z"], r["sd_z"], r["sd_z_sampling_sd"], r["bh_families_flagged"],
                        r["bh_families"], r["bh_families_max"], sum(heads) / max(1, len(heads))))
    if jack:
        lines += ["", "Delete-one jackknife over %d sequences (%d pairs per cell; the pair-sampling part of "
                  "the jackknife variance measured under %d other seeds and subtracted): the analysis' "
                  "standard error / the jackknife's." % (cfg["jack_sequences"], cfg["jack_pairs"],
                                                          cfg["jack_pair_seeds"]), "",
                  "| quantity | n | median | 10%-90% | inside [0.8, 1.25] | pair-sampling share |",
                  "|---|---|---|---|---|---|"]
        for q, r in jack.items():
            if "median" in r:
                lines.append("| %s | %d | %.3f | %.3f-%.3f | %.0f%% | %s |"
                             % (q, r["heads"], r["median"], r["p10"], r["p90"], 100 * r["inside"],
                                fmt(r.get("pair_share", float("nan")))))
            else:
                lines.append("| %s | %d | no se column (jackknife SE median %.5f) | | | %s |"
                             % (q, r["heads"], r.get("jack_se_median", float("nan")),
                                fmt(r.get("pair_share", float("nan")))))
    lines += ["", "Bounds failed: %d" % len(failures)] + ["- " + f for f in failures]
    with open(os.path.join(out, "aa_calibration.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "aa_calibration.json"), "w") as f:
        json.dump({"results": results, "failures": failures}, f, indent=1, default=str)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ap-analyze", required=True)
    p.add_argument("--ap-compare", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--fixture", default=os.path.join(ROOT, "tests", "data", "real_decoder"))
    p.add_argument("--layout", default="6,4,2", help="layers,query heads,key heads")
    p.add_argument("--partitions", type=int, default=200)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--draw-rate", type=float, default=0.5)
    p.add_argument("--jack-sequences", type=int, default=30)
    p.add_argument("--jack-pairs", type=int, default=4096)
    p.add_argument("--jack-pair-seeds", type=int, default=6)
    p.add_argument("--seed", type=int, default=aa.CI_CONFIG["seed"] + 1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", default="", help="experiments to leave out: unpaired, paired, jackknife")
    a = p.parse_args()
    config = dict(aa.CI_CONFIG)
    config.update(seed=a.seed, partitions=a.partitions, draws=a.draws, draw_rate=a.draw_rate,
                  jack_sequences=a.jack_sequences, jack_pairs=a.jack_pairs, jack_pair_seeds=a.jack_pair_seeds,
                  threads=a.threads, layout=tuple(int(x) for x in a.layout.split(",")))
    os.makedirs(a.out, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    experiments = [e for e in ("unpaired", "paired", "jackknife") if e not in skip]
    c = u.Checker()
    results = aa.run_all(c, os.path.abspath(a.ap_analyze), os.path.abspath(a.ap_compare), a.fixture,
                         os.path.join(a.out, "work"), config, experiments)
    results["config"]["fixture"] = a.fixture
    write_summary(a.out, results, c.failures)
    print("summary: %s" % os.path.join(a.out, "aa_calibration.md"))
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
