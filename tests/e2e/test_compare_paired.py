#!/usr/bin/python3
"""The comparison's standard errors (docs/method.md §8.6) against an independent NumPy computation,
on result sets written by hand: the estimates read from head_metrics.csv's columns, the paired and
unpaired designs, the model-level summary and trajectory with and without per-sequence influences,
the refusals, and (with --python) the same bytes from attention_plasticity.compare_runs.

usage: test_compare_paired.py AP_COMPARE WORK_DIR [--python]

The sets (plain folders of CSVs, as a user copies them): 2 layers x 2 query heads, 3 query buckets,
written with the columns of issue 23 (ap_first20_se, ..., context_length, n_sequences) and, for A and
B, head_sequence_influence.csv with known per-sequence influences Phi_e (centred per head and
quantity; the standard errors in the CSVs are sqrt(G/(G-1) sum Phi_e^2), as the analysis writes them).
  - A: example ids 0..13; B: ids 1..14 (id 0 in A only, 14 in B only: a missing id counts 0) with
    influences correlated with A's (the same texts), so that the paired errors are smaller;
  - one head of each has ap_first20 NaN (no bucket there): no rows, no test;
  - C: like A without an influence table; D: A without the column ap_last20_se; E: A whose
    influence table lacks a head's ap_drop rows; F: A whose influence table has its header only
    (analyzed without the influences: taken as no table).
Checked, each against NumPy (relative 1e-12): the difference (bias-corrected), the paired
s_Delta = sqrt(G/(G-1) sum_e (D_e - mean D)^2) over the union of ids, the unpaired sqrt(s_A^2 +
s_B^2), z, p, the BH q-values of ap_overall; the summary's se (paired: the per-sequence mean over
heads of D_e; unpaired: the two sets' per-sequence means of Phi_e, variances added; without
influence tables: sqrt(sum s^2)/n with a note); the trajectory's se; the design column, the notes
and the printed report; the refusals: design paired with a set without influences (naming
--sequence-influences on), a missing column (naming the file and the column), an unknown design,
an influence table without a quantity that has a standard error.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

METRICS_HEADER = (
    "layer,q_head,k_head,n_q_tokens,n_k_tokens,d_model,q_R2_pos,q_beta_norm,q_R2_scalar,q_mae_baseline,"
    "q_mae_proj,q_mae_ratio,q_resid0_skew,q_resid0_kurt,q_resid0_ks_p,q_noise_med_abs_skew,"
    "q_noise_med_abs_kurt,q_noise_med_ks_p,q_noise_frac_ks_p_lt_alpha,ap_overall,ap_first20,ap_last20,ap_drop,"
    "ap_empirical_overall,ap_empirical_overall_se,ap_overall_se,ap_overall_bias,ap_overall_ci_low,"
    "ap_overall_ci_high,ap_overall_corrected,ap_first20_se,ap_first20_bias,ap_last20_se,ap_last20_bias,"
    "ap_drop_se,ap_drop_bias,context_length,n_sequences,bias_strength,drift_slope_k,drift_query_mean,pc0_r_q,"
    "pc0_r_k,pca_class").split(",")
PROFILE_HEADER = (
    "layer,q_head,k_head,q_bucket,tau,n_queries,plasticity,n_pairs,plasticity_empirical,plasticity_empirical_se,"
    "plasticity_se,plasticity_bias,plasticity_ci_low,plasticity_ci_high,plasticity_corrected,small_bucket").split(",")
INFLUENCE_CSV = "head_sequence_influence.csv"
INFLUENCE_HEADER = "layer,q_head,k_head,example_id,quantity,q_bucket,influence"
HEADS = [(0, 0), (0, 1), (1, 0), (1, 1)]
BUCKETS = (0, 1, 2)
QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop")
NO_FIRST20 = (1, 1)  # this head has no ap_first20 (NaN, no influence rows) in every set
FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")
REL = 1e-12


def text(x):
    return "nan" if isinstance(x, float) and math.isnan(x) else repr(float(x)) if isinstance(x, float) else str(x)


def make_truth(np, rng, ids, base=None, noise=0.0):
    """{(head, quantity key): (value, bias, {id: Phi})}: quantity key (name, bucket or None). With
    `base`, the values move a little and the influences of the ids of both follow base's (+ noise)."""
    out = {}
    for h in HEADS:
        keys = [(q, None) for q in QUANTITIES] + [("ap_bucket", j) for j in BUCKETS]
        for key in keys:
            if key[0] == "ap_first20" and h == NO_FIRST20:
                out[(h, key)] = (float("nan"), float("nan"), {})
                continue
            scale = 0.004 if key[0] != "ap_bucket" else 0.01
            if base is None:
                phi = rng.normal(0.0, scale, len(ids))
                value = float(rng.uniform(0.3, 0.8))
            else:
                value0, _, phi0 = base[(h, key)]
                phi = np.array([phi0.get(e, 0.0) for e in ids]) + rng.normal(0.0, noise * scale, len(ids))
                value = value0 + float(rng.normal(0.0, 0.003))
            phi = phi - phi.mean()
            out[(h, key)] = (value, float(rng.normal(-0.002, 0.001)), dict(zip(ids, (float(x) for x in phi))))
    return out


def se_of(phi):
    g = len(phi)
    x = [phi[e] for e in sorted(phi)]
    return math.sqrt(g / (g - 1) * sum(v * v for v in x)) if g >= 2 else float("nan")


def write_set(folder, truth, context_length, influences=True, drop_column=None, drop_rows=None):
    os.makedirs(folder, exist_ok=True)
    header = [c for c in METRICS_HEADER if c != drop_column]
    lines = [",".join(header)]
    for h in HEADS:
        row = {c: "0.5" for c in header}
        row.update(layer=h[0], q_head=h[1], k_head=0, d_model=8, n_q_tokens=600, n_k_tokens=600, pca_class="mixed",
                   context_length=context_length, n_sequences=len(truth[(h, ("ap_overall", None))][2]))
        for q in QUANTITIES:
            value, bias, phi = truth[(h, (q, None))]
            row[q] = text(value)
            row[q + "_bias"] = text(bias)
            row[q + "_se"] = text(se_of(phi))
        lines.append(",".join(text(row[c]) for c in header))
    with open(os.path.join(folder, "head_metrics.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    lines = [",".join(PROFILE_HEADER)]
    for h in HEADS:
        for j in BUCKETS:
            value, bias, phi = truth[(h, ("ap_bucket", j))]
            row = {c: "0.5" for c in PROFILE_HEADER}
            row.update(layer=h[0], q_head=h[1], k_head=0, q_bucket=j, tau=100 * j + 50, n_queries=200,
                       small_bucket=0, plasticity=text(value), plasticity_bias=text(bias), plasticity_se=text(se_of(phi)))
            lines.append(",".join(text(row[c]) for c in PROFILE_HEADER))
    with open(os.path.join(folder, "head_profile.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if influences:
        lines = [INFLUENCE_HEADER]
        for h in HEADS:
            for key in [(q, None) for q in QUANTITIES] + [("ap_bucket", j) for j in BUCKETS]:
                if drop_rows == (h, key[0]):
                    continue
                phi = truth[(h, key)][2]
                for e in sorted(phi):
                    lines.append("%d,%d,0,%d,%s,%s,%s" % (h[0], h[1], e, key[0], 0 if key[1] is None else key[1],
                                                          text(phi[e])))
        with open(os.path.join(folder, INFLUENCE_CSV), "w") as f:
            f.write("\n".join(lines) + "\n")


# ---- the reference (NumPy)

def paired_se(np, phi_a, phi_b):
    ids = sorted(set(phi_a) | set(phi_b))
    if not phi_a or not phi_b or len(ids) < 2:
        return float("nan")
    d = np.array([phi_b.get(e, 0.0) - phi_a.get(e, 0.0) for e in ids])
    g = len(ids)
    return float(np.sqrt(g / (g - 1) * np.sum((d - d.mean()) ** 2)))


def sequence_se_of_mean(np, dicts):
    """The se of the mean over heads: per sequence the mean over the dicts (missing ids 0)."""
    ids = sorted(set().union(*dicts))
    m = np.array([sum(d.get(e, 0.0) for d in dicts) / len(dicts) for e in ids])
    g = len(ids)
    return float(np.sqrt(g / (g - 1) * np.sum((m - m.mean()) ** 2)))


def bh(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    q = [0.0] * len(p)
    running = 1.0
    for rank in range(len(p), 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * len(p) / rank)
        q[i] = running
    return q


def key_of(row):
    return ((int(row["layer"]), int(row["q_head"])),
            (row["quantity"], int(row["q_bucket"]) if row["quantity"] == "ap_bucket" else None))


def check_heads(c, np, rows, ta, tb, design, label):
    import scipy.stats
    c.check(len(rows) == len(HEADS) * (len(QUANTITIES) + len(BUCKETS)), "%s: %d rows" % (label, len(rows)))
    for r in rows:
        h, key = key_of(r)
        va, ba, pa = ta[(h, key)]
        vb, bb, pb = tb[(h, key)]
        where = "%s %s %s" % (label, h, key)
        # The design used, then how it was chosen (docs/method.md §8.6): "paired (by id: unchecked)",
        # "unpaired (auto: no fingerprints)": these sets have no examples.csv.
        c.check(r["design"].split(" ")[0] == design, "%s: design %s" % (where, r["design"]))
        d = (vb - bb) - (va - ba)
        c.check(u.close(u.num(r["difference"]), d, REL), "%s: difference %s, expected %r" % (where, r["difference"], d))
        # The degrees of freedom of the error (docs/method.md §8.6): paired, the union of the
        # sequences less one; unpaired, Welch-Satterthwaite of the two errors, each with its set's
        # n_sequences less one (the units of these older-style sets: every set has 14).
        if design == "paired":
            se = paired_se(np, pa, pb)
            df = len(set(pa) | set(pb)) - 1
        else:
            sa, sb = se_of(pa), se_of(pb)
            se = math.sqrt(sa ** 2 + sb ** 2)
            ga = len(ta[(h, ("ap_overall", None))][2]) - 1
            gb = len(tb[(h, ("ap_overall", None))][2]) - 1
            df = (sa ** 2 + sb ** 2) ** 2 / (sa ** 4 / ga + sb ** 4 / gb) if se > 0 else float("nan")
        c.check(u.close(u.num(r["se"]), se, REL), "%s: se %s, expected %r" % (where, r["se"], se))
        if math.isfinite(se):
            c.check(u.close(u.num(r["df"]), df, REL), "%s: df %s, expected %r" % (where, r["df"], df))
        z = d / se if se > 0 else float("nan")
        # Student's t law with those df (SciPy: an implementation other than the C++ one).
        p = float(2.0 * scipy.stats.t.sf(abs(z), df)) if math.isfinite(z) else float("nan")
        c.check(u.close(u.num(r["z"]), z, 1e-10), "%s: z %s, expected %r" % (where, r["z"], z))
        c.check(u.close(u.num(r["p"]), p, 1e-9, 1e-300), "%s: p %s, expected %r" % (where, r["p"], p))
        if h == NO_FIRST20 and key[0] == "ap_first20":
            c.check(r["se"] == "nan" and r["p"] == "nan", "%s: a quantity without estimate was tested" % where)
    overall = [r for r in rows if r["quantity"] == "ap_overall"]
    q = bh([float(r["p"]) for r in overall])
    for r, expected in zip(overall, q):
        c.check(u.close(float(r["q_bh"]), expected, 1e-12), "%s: q_bh %s, expected %r" % (label, r["q_bh"], expected))


def check_summary(c, np, rows, ta, tb, heads_rows, design, influences, label):
    """influences: both sets have influence tables (the summary's se from them)."""
    by_key = {key_of(r): r for r in heads_rows}
    for layer in ("all", "0", "1"):
        for q in QUANTITIES:
            members = [h for h in HEADS if (layer == "all" or h[0] == int(layer))
                       and not (q == "ap_first20" and h == NO_FIRST20)]
            got = [r for r in rows if r["quantity"] == q and r["layer"] == ("" if layer == "all" else layer)]
            where = "%s summary %s layer %s" % (label, q, layer)
            c.check(len(got) == 1 and int(got[0]["n_heads"]) == len(members), "%s: rows %s" % (where, got))
            if len(got) != 1:
                continue
            if not influences:
                se = math.sqrt(sum(float(by_key[(h, (q, None))]["se"]) ** 2 for h in members)) / len(members)
            elif design == "paired":
                ds = []
                for h in members:
                    pa, pb = ta[(h, (q, None))][2], tb[(h, (q, None))][2]
                    ds.append({e: pb.get(e, 0.0) - pa.get(e, 0.0) for e in set(pa) | set(pb)})
                se = sequence_se_of_mean(np, ds)
            else:
                se = math.hypot(sequence_se_of_mean(np, [ta[(h, (q, None))][2] for h in members]),
                                sequence_se_of_mean(np, [tb[(h, (q, None))][2] for h in members]))
            c.check(u.close(float(got[0]["se"]), se, REL), "%s: se %s, expected %r" % (where, got[0]["se"], se))
            mean_d = sum(float(by_key[(h, (q, None))]["difference"]) for h in members) / len(members)
            c.check(u.close(float(got[0]["mean_difference"]), mean_d, REL), "%s: mean difference" % where)


def check_trajectory(c, np, rows, name, truth, influences):
    for q in QUANTITIES:
        members = [h for h in HEADS if not (q == "ap_first20" and h == NO_FIRST20)]
        got = [r for r in rows if r["set"] == name and r["quantity"] == q and r["layer"] == ""]
        if influences:
            se = sequence_se_of_mean(np, [truth[(h, (q, None))][2] for h in members])
        else:
            se = math.sqrt(sum(se_of(truth[(h, (q, None))][2]) ** 2 for h in members)) / len(members)
        c.check(len(got) == 1 and u.close(float(got[0]["se"]), se, REL),
                "trajectory %s %s: %s, expected se %r" % (name, q, got, se))


def main():
    u.require_numpy()
    import numpy as np

    compare, work = sys.argv[1:3]
    with_python = "--python" in sys.argv[3:]
    u.fresh_dir(work)
    rng = np.random.default_rng(23)
    ta = make_truth(np, rng, list(range(0, 14)))
    tb = make_truth(np, rng, list(range(1, 15)), base=ta, noise=0.3)
    tc = make_truth(np, rng, list(range(0, 14)))
    sets = {n: os.path.join(work, "set_" + n) for n in "ABCDEF"}
    write_set(sets["A"], ta, 1000)
    write_set(sets["B"], tb, 1000)
    write_set(sets["C"], tc, 1000, influences=False)
    write_set(sets["D"], ta, 1000, drop_column="ap_last20_se")
    write_set(sets["E"], ta, 1000, drop_rows=((0, 1), "ap_drop"))
    write_set(sets["F"], ta, 1000)
    with open(os.path.join(sets["F"], INFLUENCE_CSV), "w") as f:  # analyzed without the influences
        f.write(INFLUENCE_HEADER + "\n")
    c = u.Checker()

    # Paired A -> B, and the printed report.
    out = os.path.join(work, "paired")
    _, _, err = u.run([compare, "--output-dir", out, "--design", "paired", "--names", "A,B", sets["A"], sets["B"]],
                      expect=0)
    print(err.strip())
    c.check("design paired" in err.splitlines()[-1], "the report does not say the design: %s" % err.strip())
    c.check("2 of their 15 document ids in one set only" in err, "no note of the ids in one set only: %s" % err)
    _, paired_rows = u.read_csv(os.path.join(out, FILES[0]))
    check_heads(c, np, paired_rows, ta, tb, "paired", "paired A->B")
    _, summary = u.read_csv(os.path.join(out, FILES[2]))
    check_summary(c, np, summary, ta, tb, paired_rows, "paired", True, "paired A->B")
    _, trajectory = u.read_csv(os.path.join(out, FILES[3]))
    check_trajectory(c, np, trajectory, "A", ta, True)
    check_trajectory(c, np, trajectory, "B", tb, True)
    paired_bytes = {n: open(os.path.join(out, n), "rb").read() for n in FILES}

    # Unpaired (the default), in the order B, A, C: B -> A, and A -> C with a set without influences.
    out = os.path.join(work, "unpaired")
    _, _, err = u.run([compare, "--output-dir", out, "--names", "B,A,C", sets["B"], sets["A"], sets["C"]], expect=0)
    print(err.strip())
    c.check("design unpaired" in err.splitlines()[-1], "the report does not say the design: %s" % err.strip())
    c.check("take the heads as independent" in err and "'C'" in err, "no note on the model-level errors: %s" % err)
    _, rows = u.read_csv(os.path.join(out, FILES[0]))
    unpaired_ba = [r for r in rows if r["set_b"] == "A"]
    unpaired_ac = [r for r in rows if r["set_b"] == "C"]
    check_heads(c, np, unpaired_ba, tb, ta, "unpaired", "unpaired B->A")
    check_heads(c, np, unpaired_ac, ta, tc, "unpaired", "unpaired A->C")
    _, summary = u.read_csv(os.path.join(out, FILES[2]))
    check_summary(c, np, [r for r in summary if r["set_b"] == "A"], tb, ta, unpaired_ba, "unpaired", True,
                  "unpaired B->A")
    check_summary(c, np, [r for r in summary if r["set_b"] == "C"], ta, tc, unpaired_ac, "unpaired", False,
                  "unpaired A->C")
    _, trajectory = u.read_csv(os.path.join(out, FILES[3]))
    check_trajectory(c, np, trajectory, "C", tc, False)
    check_trajectory(c, np, trajectory, "A", ta, True)
    # The same texts: the paired errors are the smaller (B's influences follow A's).
    smaller = sum(float(p["se"]) < float(q["se"]) for p, q in zip(paired_rows, unpaired_ba) if p["se"] != "nan")
    tested = sum(p["se"] != "nan" for p in paired_rows)
    c.check(smaller == tested, "paired se smaller than unpaired for %d of %d tests" % (smaller, tested))

    # Refusals: nothing written, exit status 2, the option and the value named.
    refused = os.path.join(work, "refused")
    _, _, err = u.run([compare, "--output-dir", refused, "--design", "paired", sets["A"], sets["C"]], expect=2)
    c.check("--sequence-influences on" in err and sets["C"] in err and "--design paired" in err,
            "paired without influences: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", refused, sets["A"], sets["D"]], expect=2)
    c.check("head_metrics.csv" in err and "'ap_last20_se'" in err and sets["D"] in err,
            "missing column: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", refused, "--design", "both", sets["A"], sets["B"]], expect=2)
    c.check("--design" in err and "'both'" in err, "unknown design: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", refused, sets["A"], sets["E"]], expect=2)
    c.check(INFLUENCE_CSV in err and "ap_drop" in err and "layer 0 q_head 1" in err,
            "influence table without a quantity: %s" % err.strip())
    _, _, err = u.run([compare, "--output-dir", refused, "--design", "paired", sets["A"], sets["F"]], expect=2)
    c.check("--sequence-influences on" in err and sets["F"] in err, "paired, header-only table: %s" % err.strip())
    c.check(not os.path.exists(refused), "a refused comparison wrote files")
    # A table of its header only is no table: unpaired, the model-level errors of the old formula.
    out = os.path.join(work, "header_only")
    _, _, err = u.run([compare, "--output-dir", out, "--names", "A,F", sets["A"], sets["F"]], expect=0)
    c.check("take the heads as independent" in err and "'F'" in err, "header-only table: %s" % err.strip())
    _, rows = u.read_csv(os.path.join(out, FILES[0]))
    _, summary = u.read_csv(os.path.join(out, FILES[2]))
    check_summary(c, np, summary, ta, ta, rows, "unpaired", False, "unpaired A->F")

    if with_python:
        import attention_plasticity as ap

        pout = os.path.join(work, "python")
        result = ap.compare_runs([sets["A"], sets["B"]], output_dir=pout, names=["A", "B"], design="paired")
        for name in FILES:
            with open(os.path.join(pout, name), "rb") as f:
                c.check(f.read() == paired_bytes[name], "%s: compare_runs wrote other bytes than ap_compare" % name)
        c.check(set(result.heads["design"]) == {"paired (by id: unchecked)"}, "compare_runs: design %s" % set(result.heads["design"]))
        c.check(any(n.startswith("design paired") for n in result.notes), "compare_runs notes: %s" % result.notes)
        result = ap.compare_runs([sets["A"], sets["B"]], names=["A", "B"])
        c.check(any(n.startswith("design unpaired") for n in result.notes), "compare_runs notes: %s" % result.notes)
        for args, kwargs, needles in (
                ([sets["A"], sets["C"]], {"design": "paired"}, ("--sequence-influences on", sets["C"])),
                ([sets["A"], sets["D"]], {}, ("head_metrics.csv", "'ap_last20_se'")),
                ([sets["A"], sets["B"]], {"design": "both"}, ("compare_runs: design", "'both'"))):
            try:
                ap.compare_runs(args, **kwargs)
                c.check(False, "compare_runs accepted %s %s" % (args, kwargs))
            except ap.UsageError as e:
                c.check(all(n in str(e) for n in needles), "compare_runs %s: %s" % (kwargs, e))
        print("compare_runs (Python) wrote the same bytes as ap_compare and refused the same sets")
    c.close("test_compare_paired")


if __name__ == "__main__":
    main()
