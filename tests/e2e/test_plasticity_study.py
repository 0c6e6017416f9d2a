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
  - the script exits 0 and writes every set's result set (with head_sequence_influence.csv), the
    comparison's CSVs, study_summary.csv, study_power.csv and the figures (each decodes and is not
    blank: tests/python/png_check.py), and says that it used the paired design;
  - each head's standard errors are sequence-level: sqrt(G/(G-1) sum_e Phi_e^2) of its rows of
    head_sequence_influence.csv (docs/method.md §8.3), for every head-level quantity;
  - compare_trajectory.csv has every checkpoint of study.json, in its order, with every
    quantity, and its means over all heads equal those recomputed here with the standard library
    from each set's head_metrics.csv (the mean of ap_first20, ap_last20, ap_overall, ap_drop and
    bias_strength over the heads) to 1e-12 relative, their standard errors those of the
    per-sequence means of the heads' influences (§8.6) to 1e-9;
  - the comparison is paired (compare_heads.csv's column design), each head's standard error of a
    change that of the per-sequence differences of the two sets' influences (§8.6);
  - power (issue 23): for every pair of study_power.csv, the tests of the head-level quantities
    recomputed here in both designs (differences from head_metrics.csv, paired errors from the
    influence tables, unpaired sqrt(s_A^2 + s_B^2), BH q-values per quantity) give its counts of
    changed heads and its median ratio of the errors; on the pre-training from its first
    checkpoint to its last the paired standard error is the smaller for at least 3/4 of the
    tests, paired finds at least as many changes as unpaired, and it finds the large change of
    that span: ap_last20 (and ap_overall) of at least MIN_CHANGED_HEADS heads; no pair of sets
    finds fewer changes paired than unpaired, and over every pair the paired error is the smaller
    for at least 9/10 of the tests;
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
HEAD_QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop")
COMPARE_CSVS = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")
ALPHA = 0.05
# The large change the paired design must find from the first pre-training checkpoint to the
# last on the fixture's 6 heads (measured: see docs/plasticity_study.md, "Paired against
# unpaired"); MIN_CHANGED_HEADS of them changed in ap_last20 and in ap_overall.
MIN_CHANGED_HEADS = 4


def read_rows(path):
    return u.read_csv(path)[1]


def cluster_se(values):
    """sqrt(G/(G-1) sum_e (x_e - mean)^2): the sequence-level standard error (§8.3, §8.6)."""
    g = len(values)
    if g < 2:
        return float("nan")
    mean = math.fsum(values) / g
    return math.sqrt(g / (g - 1) * math.fsum((x - mean) ** 2 for x in values))


def read_influences(path):
    """{(layer, q_head, quantity, q_bucket): {document_id: influence}} of head_sequence_influence.csv."""
    out = {}
    for r in read_rows(path):
        key = (int(r["layer"]), int(r["q_head"]), r["quantity"], int(r["q_bucket"]))
        out.setdefault(key, {})[int(r["document_id"] if "document_id" in r else r["example_id"])] = u.num(r["influence"])
    return out


def head_means(head_metrics, influences):
    """{quantity: (mean, se)} over the heads of one head_metrics.csv, as §8.6 defines them with
    an influence table: the mean over heads of the value; the standard error of the per-sequence
    means over the heads of their influences (an id a head lacks counts 0 for it)."""
    out = {}
    heads = [u.head_key(r) for r in head_metrics]
    for q in QUANTITIES:
        values = [u.num(r[q]) for r in head_metrics]
        mean = math.fsum(values) / len(values)
        se = float("nan")
        if q in HEAD_QUANTITIES:
            per_head = [influences.get(h + (q, 0), {}) for h in heads]
            ids = sorted(set().union(*per_head))
            se = cluster_se([math.fsum(p.get(e, 0.0) for p in per_head) / len(heads) for e in ids])
        out[q] = (mean, se)
    return out


def bh_qvalues(pvalues):
    """Benjamini-Hochberg q-values, in the order given."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    q = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, min(1.0, m * pvalues[i] / rank))
        q[i] = running
    return q


def units_df(row):
    """The degrees of freedom of a set's errors (docs/method.md §8.6): its documents less one
    (n_documents, or n_sequences in sets written before it), infinite without either."""
    for column in ("n_documents", "n_sequences"):
        if column in row and row[column] not in ("", "nan"):
            g = int(row[column])
            return float(g - 1) if g >= 2 else math.inf
    return math.inf


def head_tests(metrics_a, metrics_b, infl_a, infl_b):
    """The tests of the head-level quantities from set A to set B, recomputed: {quantity:
    [(head, difference, se_paired, se_unpaired, df_paired, df_unpaired)]}, the heads with an
    error in both sets; the degrees of freedom as docs/method.md §8.6 states them (paired: the
    union of the documents less one; unpaired: Welch-Satterthwaite of the two sets' errors)."""
    rows_a = {u.head_key(r): r for r in metrics_a}
    rows_b = {u.head_key(r): r for r in metrics_b}
    out = {}
    for q in HEAD_QUANTITIES:
        tests = []
        for h in sorted(rows_a):
            a, b = rows_a[h], rows_b.get(h)
            if b is None:
                continue
            sa, sb = u.num(a[q + "_se"]), u.num(b[q + "_se"])
            if not (math.isfinite(sa) and math.isfinite(sb)):
                continue
            diff = (u.num(b[q]) - u.num(b[q + "_bias"])) - (u.num(a[q]) - u.num(a[q + "_bias"]))
            pa, pb = infl_a.get(h + (q, 0), {}), infl_b.get(h + (q, 0), {})
            ids = sorted(set(pa) | set(pb))
            paired = cluster_se([pb.get(e, 0.0) - pa.get(e, 0.0) for e in ids])
            da, db = units_df(a), units_df(b)
            denominator = (0.0 if math.isinf(da) else sa ** 4 / da) + (0.0 if math.isinf(db) else sb ** 4 / db)
            welch = (sa ** 2 + sb ** 2) ** 2 / denominator if denominator > 0 else math.inf
            tests.append((h, diff, paired, math.hypot(sa, sb), float(len(ids) - 1), welch))
        out[q] = tests
    return out


def changed(tests, column):
    """How many tests have BH q <= ALPHA with the standard error of `column` (2 paired, 3 unpaired)
    and the p of Student's t law with its degrees of freedom (column + 2; SciPy)."""
    import scipy.stats
    p = [float(2.0 * scipy.stats.t.sf(abs(t[1] / t[column]), t[column + 2])) for t in tests]
    return sum(1 for q in bh_qvalues(p) if q <= ALPHA) if p else 0


def median(values):
    v = sorted(values)
    n = len(v)
    return float("nan") if n == 0 else (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))


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
    c.check("design paired" in stdout, f"the script does not say it used the paired design:\n{stdout}")

    # Every set analyzed, the comparison and the summary written.
    per_set, influences = {}, {}
    for name in names:
        path = os.path.join(out, "results", name, "head_metrics.csv")
        c.check(os.path.isfile(path), f"{path} was not written")
        infl_path = os.path.join(out, "results", name, "head_sequence_influence.csv")
        c.check(os.path.isfile(infl_path), f"{infl_path} was not written (sequence_influences on)")
        if os.path.isfile(path) and os.path.isfile(infl_path):
            per_set[name] = read_rows(path)
            influences[name] = read_influences(infl_path)
            c.check(len(per_set[name]) > 0, f"{path} has no head")
            # Sequence-level errors: each head's error is that of its sequences' influences.
            for r in per_set[name]:
                for q in HEAD_QUANTITIES:
                    phi = influences[name].get(u.head_key(r) + (q, 0), {})
                    se = u.num(r[q + "_se"])
                    c.check(len(phi) >= 10 and u.close(cluster_se(list(phi.values())), se, rel=1e-9),
                            f"{name} head {u.head_key(r)} {q}: {q}_se {se!r}, its {len(phi)} sequences' "
                            f"influences give {cluster_se(list(phi.values()))!r}")
    for name in COMPARE_CSVS:
        c.check(os.path.isfile(os.path.join(out, "compare", name)), f"compare/{name} was not written")

    # The trajectory: every checkpoint, in study.json's order, each quantity, means recomputed.
    trajectory = read_rows(os.path.join(out, "compare", "compare_trajectory.csv"))
    every = [r for r in trajectory if r["layer"] == ""]  # the model-level rows: layer NA
    order = sorted({(int(r["order"]), r["set"]) for r in every})
    c.check([s for _, s in order] == names and [i for i, _ in order] == list(range(len(names))),
            f"compare_trajectory.csv: sets {order}, expected {names} in order")
    for name in names:
        if name not in per_set:
            continue
        want = head_means(per_set[name], influences[name])
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
            if not math.isnan(want[q][1]):  # bias_strength has no error in the trajectory
                c.check(u.close(u.num(r["se"]), want[q][1], rel=1e-9, abs_tol=1e-15),
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

    # The comparison is paired, its errors those of the per-sequence differences; the committed
    # checkpoints have no examples.csv, so the pairing is by id and says it could not be checked
    # from the texts (docs/method.md §8.6).
    heads = read_rows(os.path.join(out, "compare", "compare_heads.csv"))
    designs = sorted({r["design"] for r in heads})
    c.check(designs == ["paired (by id: unchecked)"],
            f"compare_heads.csv: design {designs}, expected paired (by id: unchecked)")
    for a, b in zip(names, names[1:]):
        if a not in per_set or b not in per_set:
            continue
        tests = head_tests(per_set[a], per_set[b], influences[a], influences[b])
        for q, rows in tests.items():
            got = {(int(r["layer"]), int(r["q_head"])): r for r in heads
                   if r["set_a"] == a and r["set_b"] == b and r["quantity"] == q}
            for h, diff, se_p, _se_u, _df_p, _df_u in rows:
                r = got.get(h)
                c.check(r is not None and u.close(u.num(r["se"]), se_p, rel=1e-9)
                        and u.close(u.num(r["difference"]), diff, rel=1e-9, abs_tol=1e-12),
                        f"{a} -> {b} head {h} {q}: compare_heads.csv "
                        f"{(r or {}).get('difference')} +- {(r or {}).get('se')}, recomputed {diff!r} +- {se_p!r}")

    # Power: both designs recomputed for every pair of study_power.csv.
    power_rows = read_rows(os.path.join(out, "study_power.csv"))
    pairs = []
    for r in power_rows:
        if (r["set_a"], r["set_b"]) not in pairs:
            pairs.append((r["set_a"], r["set_b"]))
    first_pre = [s["name"] for s in study["sets"] if s["phase"] == study["sets"][0]["phase"]]
    c.check((first_pre[0], first_pre[-1]) in pairs and (names[0], names[1]) in pairs,
            f"study_power.csv: pairs {pairs}")
    smaller_all = tests_all = 0
    for a, b in pairs:
        if a not in per_set or b not in per_set:
            c.check(False, f"study_power.csv: unknown sets {a}, {b}")
            continue
        tests = head_tests(per_set[a], per_set[b], influences[a], influences[b])
        total_p = total_u = 0
        for q in HEAD_QUANTITIES:
            row = [r for r in power_rows if r["set_a"] == a and r["set_b"] == b and r["quantity"] == q]
            t = tests[q]
            n_p, n_u = changed(t, 2), changed(t, 3)
            ratio = median([x[2] / x[3] for x in t])
            total_p += n_p
            total_u += n_u
            c.check(len(row) == 1 and int(row[0]["n_tests"]) == len(t)
                    and int(row[0]["changed_paired"]) == n_p and int(row[0]["changed_unpaired"]) == n_u
                    and u.close(u.num(row[0]["se_ratio_median"]), ratio, rel=1e-5),
                    f"study_power.csv {a} -> {b} {q}: {row}, recomputed {len(t)} tests, changed "
                    f"{n_p} paired, {n_u} unpaired, median se ratio {ratio!r}")
        c.check(total_p >= total_u, f"{a} -> {b}: {total_p} changes paired, fewer than {total_u} unpaired")
        smaller_all += sum(1 for q in HEAD_QUANTITIES for x in tests[q] if x[2] < x[3])
        tests_all += sum(len(tests[q]) for q in HEAD_QUANTITIES)
        if (a, b) == (first_pre[0], first_pre[-1]):
            every = [x for q in HEAD_QUANTITIES for x in tests[q]]
            smaller = sum(1 for x in every if x[2] < x[3])
            c.check(4 * smaller >= 3 * len(every),
                    f"{a} -> {b}: the paired error is the smaller in {smaller} of {len(every)} tests")
            for q in ("ap_last20", "ap_overall"):
                n_p = changed(tests[q], 2)
                c.check(n_p >= MIN_CHANGED_HEADS,
                        f"{a} -> {b}: {q} changed in {n_p} heads paired, expected at least {MIN_CHANGED_HEADS}")
            print(f"power {a} -> {b}: paired error smaller in {smaller}/{len(every)} tests, changed "
                  f"paired {total_p}, unpaired {total_u} (head-level quantities)")

    c.check(tests_all > 0 and 10 * smaller_all >= 9 * tests_all,
            f"over every pair: the paired error is the smaller in {smaller_all} of {tests_all} tests")
    print(f"power, every pair: paired error smaller in {smaller_all}/{tests_all} head-level tests")

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
