#!/usr/bin/env python3
"""End to end: the plasticity study in miniature (scripts/plasticity_study.py, docs/
plasticity_study.md) on the committed dumps of its checkpoints, the CI-sized version of the
study: analysis -> comparison in order -> trajectory figures.

usage: test_plasticity_study.py FIXTURE_DIR WORK_DIR

FIXTURE_DIR is tests/data/plasticity_study (one qk-sniffer Parquet dump per checkpoint of the
decoder scripts/train_decoder.py trains here, and study.json naming them in order; see its
README.md). Run with the project's Python (.venv: numpy, pyarrow, pandas, matplotlib and the
installed attention_plasticity package); a missing package is a failure, never a skip.

Checks:
  - the script exits 0 and writes every set's result set, the comparison's CSVs,
    study_summary.csv and the figures (each decodes and is not blank: tests/python/png_check.py);
  - compare_trajectory.csv has every checkpoint of study.json, in its order, with every
    quantity, and its means over all heads equal those recomputed here with the standard library
    from each set's head_metrics.csv (the mean of ap_first20, ap_last20, ap_overall, ap_drop and
    bias_strength over the heads; ap_overall's standard error sqrt(sum se^2) / n of
    docs/method.md §8.6 from the heads' ap_overall_se), to 1e-12 relative;
  - study_summary.csv repeats those rows, in order, with each checkpoint's phase and step;
  - a study.json naming a missing dump is refused (exit status 2, the set's name in the message)
    with nothing analyzed.
"""

import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

import e2e_util as u  # noqa: E402
from png_check import check_png  # noqa: E402

SCRIPT = os.path.join(REPO, "scripts", "plasticity_study.py")
QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop", "bias_strength")
COMPARE_CSVS = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")


def read_rows(path):
    return u.read_csv(path)[1]


def head_means(head_metrics):
    """{quantity: (mean, se)} over the heads of one head_metrics.csv, as §8.6 defines them:
    the mean over heads of the value, the standard error sqrt(sum se_i^2) / n."""
    out = {}
    for q in QUANTITIES:
        values = [u.num(r[q]) for r in head_metrics]
        mean = math.fsum(values) / len(values)
        se = float("nan")
        if q + "_se" in head_metrics[0]:
            se = math.sqrt(math.fsum(u.num(r[q + "_se"]) ** 2 for r in head_metrics)) / len(values)
        out[q] = (mean, se)
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    fixture, work = sys.argv[1], sys.argv[2]
    u.fresh_dir(work)
    c = u.Checker()
    with open(os.path.join(fixture, "study.json"), encoding="utf-8") as f:
        study = json.load(f)
    names = [s["name"] for s in study["sets"]]
    c.check(len(names) >= 5, f"study.json lists {len(names)} sets, expected the run's checkpoints")

    out = os.path.join(work, "study")
    t0 = time.monotonic()
    code, stdout, stderr = u.run([sys.executable, SCRIPT, out, "--from-dumps", fixture, "--threads", 2])
    elapsed = time.monotonic() - t0
    print(f"plasticity_study.py --from-dumps: {elapsed:.1f} s")
    c.check(code == 0, f"plasticity_study.py exited {code}:\n{stdout}\n{stderr}")
    if code != 0:
        c.close("test_plasticity_study")

    # Every set analyzed, the comparison and the summary written.
    per_set = {}
    for name in names:
        path = os.path.join(out, "results", name, "head_metrics.csv")
        c.check(os.path.isfile(path), f"{path} was not written")
        if os.path.isfile(path):
            per_set[name] = read_rows(path)
            c.check(len(per_set[name]) > 0, f"{path} has no head")
    for name in COMPARE_CSVS:
        c.check(os.path.isfile(os.path.join(out, "compare", name)), f"compare/{name} was not written")

    # The trajectory: every checkpoint, in study.json's order, each quantity, means recomputed.
    trajectory = read_rows(os.path.join(out, "compare", "compare_trajectory.csv"))
    every = [r for r in trajectory if r["layer"] == "all"]
    order = sorted({(int(r["order"]), r["set"]) for r in every})
    c.check([s for _, s in order] == names and [i for i, _ in order] == list(range(len(names))),
            f"compare_trajectory.csv: sets {order}, expected {names} in order")
    for name in names:
        if name not in per_set:
            continue
        want = head_means(per_set[name])
        for q in QUANTITIES:
            rows = [r for r in every if r["set"] == name and r["quantity"] == q]
            c.check(len(rows) == 1, f"compare_trajectory.csv: {len(rows)} rows of {name} {q} (layer all)")
            if len(rows) != 1:
                continue
            r = rows[0]
            c.check(int(r["n_heads"]) == len(per_set[name]),
                    f"{name} {q}: n_heads {r['n_heads']}, head_metrics.csv has {len(per_set[name])}")
            c.check(u.close(u.num(r["mean"]), want[q][0], rel=1e-12, abs_tol=1e-15),
                    f"{name} {q}: mean {r['mean']}, recomputed {want[q][0]!r}")
            if not math.isnan(want[q][1]):  # head_metrics.csv has ap_overall_se only
                c.check(u.close(u.num(r["se"]), want[q][1], rel=1e-12, abs_tol=1e-15),
                        f"{name} {q}: se {r['se']}, recomputed {want[q][1]!r}")
            c.check(0.0 <= u.num(r["mean"]) <= 1.0 or q in ("ap_drop", "bias_strength"),
                    f"{name} {q}: mean {r['mean']} outside [0, 1]")

    summary = read_rows(os.path.join(out, "study_summary.csv"))
    c.check([r["set"] for r in summary] == names, f"study_summary.csv: sets {[r['set'] for r in summary]}")
    for r, s in zip(summary, study["sets"]):
        c.check(r["phase"] == s["phase"] and int(r["step"]) == s["step"],
                f"study_summary.csv {r['set']}: phase/step {r['phase']}/{r['step']}, study.json "
                f"{s['phase']}/{s['step']}")
        row = [t for t in every if t["set"] == r["set"] and t["quantity"] == "ap_last20"]
        c.check(bool(row) and r["ap_last20"] == row[0]["mean"],
                f"study_summary.csv {r['set']}: ap_last20 {r['ap_last20']} is not the trajectory's")

    # The figures render.
    figures = os.path.join(out, "figures")
    expected = ["trajectory.png", "trajectory_changes.png"] + [
        f"trajectory_layers_{key}.png" for key in study.get("layer_groups", {})]
    for name in expected:
        try:
            check_png(os.path.join(figures, name))
            c.check(True, name)
        except AssertionError as exc:
            c.check(False, str(exc))

    # A study.json naming a dump that is not there: refused before any analysis.
    broken = os.path.join(work, "broken")
    os.makedirs(broken)
    shutil.copytree(os.path.join(fixture, names[0]), os.path.join(broken, names[0]))
    with open(os.path.join(broken, "study.json"), "w", encoding="utf-8") as f:
        json.dump(dict(study, sets=study["sets"][:1] + [dict(study["sets"][1], name="missing-set")]), f)
    bad_out = os.path.join(work, "broken_out")
    code, _stdout, stderr = u.run([sys.executable, SCRIPT, bad_out, "--from-dumps", broken])
    c.check(code == 2 and "missing-set" in stderr, f"missing dump: exit {code}, stderr {stderr!r}")
    c.check(not os.path.exists(os.path.join(bad_out, "results")), "missing dump: results were written")
    c.close("test_plasticity_study")


if __name__ == "__main__":
    sys.exit(main())
