#!/usr/bin/python3
"""Comparing result sets (docs/method.md §8.6), end to end: calibration on synthetic pairs of
dumps with known true differences, the refusals, and (with --python) the same bytes from
attention_plasticity.compare_runs as from ap_compare.

usage: test_compare_runs.py AP_SYNTH AP_ANALYZE AP_COMPARE WORK_DIR [--python]

The sets: ap_synth writes dumps A, B and C with the same seed (the same keys, query model and
truth) and independent query noise (--query-seed); in B the query heads of layers 1 and 9 have
their drift multiplied by 1.1 (small changes, near the detection limit), in C those of layers 4
and 12 by 1.6 (large ones); each dump's true_ap.csv / true_profile.csv gives its truth. Each is
analyzed with its own pair-sampler seed, so queries and pairs are independent between the sets,
and the sets are compared in the order B, A, C (pairs B -> A and A -> C). 16 layers x 16 query
heads = 256 heads (per pair 224 with a true difference of exactly 0), d = 16, 8 buckets of 256
queries. Checked:
  - the false-positive rate at 5% (p < 0.05, two-sided) over the null (pair, head, bucket) AP_j,
    and over those and the null (pair, head) ap_overall together, is in [0.03, 0.07]; over
    ap_overall alone (448 tests) within 3 binomial standard errors of 0.05;
  - the false discovery proportion of the BH selection at q <= 0.05 over ap_overall and AP_j of
    A -> C (the large changes) is at most 0.10 (its expectation, the FDR, is at most 0.05 x the
    share of null tests; one realization scatters), with at least 100 discoveries;
  - the standardized errors (difference - true difference) / SE of ap_overall have mean within
    4/sqrt(n) of 0 and SD in [0.8, 1.2];
  - the power at 5% is reported by the standardized size |true difference| / SE;
  - the trajectory lists the sets in the order given;
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
NAMES = ["B", "A", "C"]
FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")


def truth_of(dump):
    _, heads = u.read_csv(os.path.join(dump, "true_ap.csv"))
    _, buckets = u.read_csv(os.path.join(dump, "true_profile.csv"))
    return ({u.head_key(r): float(r["ap_true"]) for r in heads},
            {u.head_key(r) + (int(r["q_bucket"]),): float(r["ap_true"]) for r in buckets})


def calibration(c, rows, truths, changed_rows):
    """rows: compare_heads.csv of the sets B, A, C in that order; truths: {set name: truth_of}."""

    def true_difference(r):
        key = u.head_key(r)
        (ha, ba), (hb, bb) = truths[r["set_a"]], truths[r["set_b"]]
        if r["quantity"] == "ap_overall":
            return hb[key] - ha[key]
        return bb[key + (int(r["q_bucket"]),)] - ba[key + (int(r["q_bucket"]),)]

    tested = [r for r in rows if r["quantity"] in ("ap_overall", "ap_bucket") and r["p"] != "nan"]
    for quantity, (lo, hi) in (("ap_overall", (None, None)), ("ap_bucket", (0.03, 0.07)), ("both", (0.03, 0.07))):
        null = [r for r in tested if quantity in ("both", r["quantity"]) and true_difference(r) == 0.0]
        fp = sum(float(r["p"]) < 0.05 for r in null)
        share = fp / len(null)
        se = math.sqrt(0.05 * 0.95 / len(null))
        if lo is None:  # a few hundred tests: within 3 binomial standard errors of 0.05
            lo, hi = 0.05 - 3.0 * se, 0.05 + 3.0 * se
        print("false-positive rate at 5%%, %s: %d of %d null tests = %.3f (binomial SE %.3f; required [%.3f, %.3f])"
              % (quantity, fp, len(null), share, se, lo, hi))
        c.check(lo <= share <= hi, "%s: false-positive rate %.3f outside [%.3f, %.3f]" % (quantity, share, lo, hi))
    for pair in (("B", "A"), ("A", "C")):
        mine = [r for r in tested if (r["set_a"], r["set_b"]) == pair]
        selected = [r for r in mine if float(r["q_bh"]) <= 0.05]  # the per-family BH selections
        false = [r for r in selected if true_difference(r) == 0.0]
        fdp = len(false) / max(1, len(selected))
        null_share = sum(true_difference(r) == 0.0 for r in mine) / len(mine)
        print("%s -> %s, BH at q <= 0.05 over ap_overall and AP_j: %d selected, %d of them null: false discovery "
              "proportion %.3f (the FDR bound 0.05 x %.3f null = %.3f)"
              % (pair + (len(selected), len(false), fdp, null_share, 0.05 * null_share)))
        if pair == ("A", "C"):  # the large changes: enough discoveries for one realization to say something
            c.check(len(selected) >= 100 and fdp <= 0.10, "false discovery proportion %.3f (of %d)"
                    % (fdp, len(selected)))
        # "Changed" (docs/method.md §8.6): the hierarchical selection of heads; a changed head is a
        # false discovery when its true AP is unchanged (the dumps change a head's drift: all of it or nothing).
        heads = {(int(r["layer"]), int(r["q_head"])): true_difference(r) != 0.0
                 for r in rows if (r["set_a"], r["set_b"]) == pair and r["quantity"] == "ap_overall"}
        chosen = {(int(r["layer"]), int(r["q_head"])) for r in changed_rows if (r["set_a"], r["set_b"]) == pair}
        false_heads = [h for h in chosen if not heads[h]]
        print("%s -> %s, changed heads (hierarchical selection): %d of %d truly changed found, %d false"
              % (pair + (len(chosen & {h for h, v in heads.items() if v}), sum(heads.values()), len(false_heads))))
        if pair == ("A", "C"):
            c.check(len(chosen) >= 24 and len(false_heads) / max(1, len(chosen)) <= 0.10,
                    "changed heads: %d, %d false" % (len(chosen), len(false_heads)))
        changed = [r for r in mine if r["quantity"] == "ap_overall" and true_difference(r) != 0.0]
        c.check(len(changed) == 32, "%s: %d heads with a true difference, expected 32" % (pair, len(changed)))
    overall = [r for r in tested if r["quantity"] == "ap_overall"]
    z = [(float(r["difference"]) - true_difference(r)) / float(r["se"]) for r in overall]
    mean = sum(z) / len(z)
    sd = math.sqrt(sum((x - mean) ** 2 for x in z) / (len(z) - 1))
    print("(difference - true difference) / SE, ap_overall of %d (pair, head): mean %.3f, SD %.3f"
          % (len(z), mean, sd))
    c.check(abs(mean) <= 4.0 / math.sqrt(len(z)), "mean standardized error %.3f" % mean)
    c.check(0.8 <= sd <= 1.2, "SD of the standardized errors %.3f" % sd)
    # Power by the standardized effect |true difference| / SE (two-sided 5%: about 0.17 at 1,
    # 0.52 at 2, 0.85 at 3 for a calibrated test), over both pairs.
    for quantity in ("ap_overall", "ap_bucket"):
        changed = [r for r in tested if r["quantity"] == quantity and true_difference(r) != 0.0]
        for lo, hi in ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, float("inf"))):
            group = [r for r in changed if lo <= abs(true_difference(r)) / float(r["se"]) < hi]
            if group:
                power = sum(float(r["p"]) < 0.05 for r in group) / len(group)
                mean_d = sum(abs(true_difference(r)) for r in group) / len(group)
                print("power at 5%%, %s, |true difference| / SE in [%g, %g): %d tests, %.3f (mean |true difference| "
                      "%.4f)" % (quantity, lo, hi, len(group), power, mean_d))


def refusals(c, analyze, compare, work, set_a, set_b):
    # Other heads: refused, or the common ones compared when told to.
    few = os.path.join(work, "results_few")
    u.run([analyze, "--data-root", os.path.join(work, "dump_A"), "--output-dir", few, "--threads", 2,
           "--layers", "0-3", "--sampling-unit", "token"], expect=0)
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
    u.run([analyze, "--data-root", os.path.join(work, "dump_B"), "--output-dir", bare, "--threads", 2,
           "--confidence-intervals", "off", "--layers", "0-3"], expect=0)
    _, _, err = u.run([compare, "--output-dir", out, "--common-heads", "on", set_a, bare], expect=2)
    c.check("no standard error" in err and "confidence_intervals" in err, "no SE: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", set_b, set_a, set_b], expect=2)
    c.check("is the result set" in err, "output into a set: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", out, set_a], expect=2)
    c.check("at least 2" in err, "one set: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", out, set_a, os.path.join(work, "absent")], expect=2)
    c.check("absent" in err, "absent set: %s" % err.strip())


def python_same_bytes(c, work, folders, expected):
    import attention_plasticity as ap

    out = os.path.join(work, "python")
    result = ap.compare_runs(folders, output_dir=out, names=NAMES)
    for name in FILES:
        with open(os.path.join(out, name), "rb") as f:
            got = f.read()
        c.check(got == expected[name], "%s: compare_runs wrote other bytes than ap_compare" % name)
    c.check(len(result.heads) == expected["rows"], "compare_runs: %d rows in heads" % len(result.heads))
    # The DataFrames come from the C++ values as columns: the same as pandas reading the files
    # ap_compare wrote (numbers exactly, nan as NaN, names as written), column by column and dtype.
    import io
    import pandas as pd

    for name, frame in zip(FILES, (result.heads, result.changed, result.summary, result.trajectory)):
        nullable = {FILES[0]: ["q_bucket"], FILES[2]: ["layer"], FILES[3]: ["layer"]}.get(name, [])
        read = pd.read_csv(io.BytesIO(expected[name]), keep_default_na=False, na_values=["nan"],
                           dtype={column: str for column in nullable})
        # The integer columns that are empty on head-level / model-level rows: pandas Int64 with NA
        # (issue 38: integers in every table, not names).
        for column in nullable:
            if len(read):
                read[column] = pd.array([int(v) if v != "" else pd.NA for v in read[column]], dtype="Int64")
        c.check(list(frame.columns) == list(read.columns), "%s: columns %s" % (name, list(frame.columns)))
        if len(read) == 0:
            continue  # pandas cannot tell a header-only file's types
        try:
            pd.testing.assert_frame_equal(frame, read, check_exact=True)
        except AssertionError as e:
            c.check(False, "%s: compare_runs' DataFrame differs from the file read by pandas: %s" % (name, e))
        c.check(str(result.heads["q_bucket"].dtype) == "Int64" and str(result.summary["layer"].dtype) == "Int64"
                and str(result.trajectory["layer"].dtype) == "Int64"
                and str(result.changed["layer"].dtype) == "int64",
                "compare_runs: q_bucket and layer are not integer columns: %s, %s"
                % (result.heads["q_bucket"].dtype, result.summary["layer"].dtype))
        c.check(result.summary["layer"].isna().any() and (result.heads["q_bucket"].dropna() >= 0).all(),
                "compare_runs: no model-level row with layer NA, or a negative bucket")
    # A table without rows keeps its columns' types (from the column list; pandas reading a
    # header-only file gave object columns).
    same = ap.compare_runs([folders[0], folders[0]], names=["x", "y"])
    c.check(len(same.changed) == 0 and str(same.changed["layer"].dtype) == "int64"
            and str(same.changed["quantities"].dtype) == "str",
            "compare_runs, no change: changed's dtypes %s" % same.changed.dtypes.to_dict())
    try:
        ap.compare_runs(folders[:1])
        c.check(False, "compare_runs accepted one set")
    except ap.UsageError as e:
        c.check("at least 2" in str(e), "compare_runs, one set: %s" % e)
    print("compare_runs (Python) wrote the same bytes as ap_compare")


def main():
    synth, analyze, compare, work = sys.argv[1:5]
    with_python = "--python" in sys.argv[5:]
    u.fresh_dir(work)
    dumps, sets, truths = {}, {}, {}
    for seed, (name, extra) in enumerate((("A", []), ("B", ["--query-seed", 1005, "--changed-layers", "1,9",
                                                             "--change-factor", 1.1]),
                                          ("C", ["--query-seed", 2005, "--changed-layers", "4,12",
                                                 "--change-factor", 1.6]))):
        dumps[name] = os.path.join(work, "dump_" + name)
        sets[name] = os.path.join(work, "results_" + name)
        u.run([synth, "--out", dumps[name]] + extra + SHAPE, expect=0)
        # Token-level errors (§8.3): the synthetic dumps share their keys and differ by independent query
        # draws, and the truth is conditional on the keys.
        u.run([analyze, "--data-root", dumps[name], "--output-dir", sets[name], "--threads", 2, "--seed", seed,
               "--sampling-unit", "token"], expect=0)
        truths[name] = truth_of(dumps[name])
    folders = [sets[n] for n in NAMES]
    out = os.path.join(work, "compared")
    _, _, err = u.run([compare, "--output-dir", out, "--names", ",".join(NAMES)] + folders, expect=0)
    print(err.strip())
    c = u.Checker()
    _, rows = u.read_csv(os.path.join(out, FILES[0]))
    c.check(len({u.head_key(r) for r in rows}) == 256, "%d heads compared" % len({u.head_key(r) for r in rows}))
    _, changed_rows = u.read_csv(os.path.join(out, FILES[1]))
    calibration(c, rows, truths, changed_rows)
    _, trajectory = u.read_csv(os.path.join(out, FILES[3]))
    c.check([r["set"] for r in trajectory if r["quantity"] == "ap_overall" and r["layer"] == ""] == NAMES,
            "the trajectory's sets are not in order")
    expected = {"rows": len(rows)}
    for name in FILES:
        with open(os.path.join(out, name), "rb") as f:
            expected[name] = f.read()
    refusals(c, analyze, compare, work, sets["A"], sets["B"])
    if with_python:
        python_same_bytes(c, work, folders, expected)
    if not c.failures:
        for d in dumps.values():
            shutil.rmtree(d)
    c.close("test_compare_runs")


if __name__ == "__main__":
    main()
