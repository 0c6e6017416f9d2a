#!/usr/bin/python3
"""The statistics of the comparison of docs/method.md §8.6 in NumPy/SciPy, and the generator of
tests/reference/comparison_reference.hpp, the reference values of tests/test_comparison.cpp:

    /usr/bin/python3 tests/reference/gen_comparison_reference.py

Written from docs/method.md §8.3 and §8.6 alone, as a NumPy user would write them (nothing is
derived from the C++ code): the influences of each head as a dense matrix over the union of the
example ids (an id a list lacks is 0), the sequence-level standard error as
sqrt(G * var(x, ddof=1)) (G/(G-1) times the sum of squared deviations) with G - 1 degrees of
freedom (an analysis' error: its G example ids; paired: the union of the ids; unpaired: Welch-
Satterthwaite, (s_A^2 + s_B^2)^2 / (s_A^4 / df_A + s_B^4 / df_B); a mean over heads taken as
independent: Satterthwaite over the heads), the two-sided p-value as 2 * scipy.stats.t.sf(|z|,
df), the Benjamini-Hochberg and Holm adjustments as R's p.adjust defines them (written out with
numpy.minimum.accumulate / numpy.maximum.accumulate), the interval's quantile
the t quantile by bisection in mpmath (gen_student_t_reference.py; SciPy's isf is a few 1e-9 off).

The case: 6 heads in 2 layers, two analyses A and B; the influences of 12 example ids, with ids
present in one analysis only; head 5 has no standard error in B (it is not tested).

The hierarchical selection of "changed" (§8.6, Benjamini and Bogomolov 2014, as their paper
states it): 10 heads of 6 tests each (p-values drawn: 3 heads with small p-values, 7 uniform; a
few NaN: not tested; head 9 untested), each head's Simes p min_i m p_(i)/i, BH over the heads at
alpha, then BH within each selected head at alpha R / m.
"""

import os
import sys

import numpy as np
import scipy.stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpp_literals as cpp  # noqa: E402
import gen_student_t_reference as student_t  # noqa: E402

NAN = float("nan")
ALPHA = 0.05


def make_case():
    rng = np.random.default_rng(20260341)
    heads = 6
    layers = np.array([0, 0, 0, 1, 1, 1])
    ids_a = np.arange(0, 11)           # ids 0..10 in A
    ids_b = np.arange(1, 13)           # ids 1..12 in B: 0 in A only, 11 and 12 in B only
    case = {"layers": layers, "heads": heads, "ids_a": ids_a, "ids_b": ids_b}
    case["phi_a"] = np.round(rng.normal(0.0, 0.02, (heads, ids_a.size)), 6)
    # B's influences are A's (on the common ids) plus noise: a positively correlated pair.
    phi_b = np.round(rng.normal(0.0, 0.01, (heads, ids_b.size)), 6)
    common = np.isin(ids_b, ids_a)
    phi_b[:, common] += case["phi_a"][:, np.isin(ids_a, ids_b)]
    case["phi_b"] = np.round(phi_b, 6)
    case["value_a"] = np.round(rng.uniform(0.3, 0.7, heads), 6)
    case["bias_a"] = np.round(rng.normal(0.0, 0.002, heads), 6)
    case["value_b"] = np.round(case["value_a"] + np.array([0.3, -0.005, 0.02, -0.28, 0.005, 0.03]), 6)
    case["bias_b"] = np.round(rng.normal(0.0, 0.002, heads), 6)
    # Each analysis' own error: the sequence-level error of its influences (§8.3).
    case["se_a"] = np.array([seq_se(row) for row in case["phi_a"]])
    case["se_b"] = np.array([seq_se(row) for row in case["phi_b"]])
    case["se_b"][5] = NAN
    return case


def seq_se(x):
    """sqrt(G/(G-1) sum (x - mean)^2) over the G units: sqrt(G) times the sample standard deviation."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return NAN
    return float(np.sqrt(x.size * np.var(x, ddof=1)))


def dense(ids, phi, union):
    """The influences as a matrix over the ids `union` (an id absent from `ids` is 0)."""
    out = np.zeros((phi.shape[0], union.size))
    out[:, np.searchsorted(union, ids)] = phi
    return out


def two_sided(z, df):
    return float(2.0 * scipy.stats.t.sf(abs(z), df)) if np.isfinite(z) and np.isfinite(df) else NAN


def t_level(df):
    # SciPy's t.isf is a few 1e-9 off at some df: the quantile by bisection in mpmath
    # (gen_student_t_reference.py), to the last bit.
    return float(student_t.quantile(ALPHA, df)) if np.isfinite(df) else NAN


def welch(sa, dfa, sb, dfb):
    return (sa ** 2 + sb ** 2) ** 2 / (sa ** 4 / dfa + sb ** 4 / dfb)


def satterthwaite(se, df):
    se, df = np.asarray(se, dtype=float), np.asarray(df, dtype=float)
    return float(np.sum(se ** 2) ** 2 / np.sum(se ** 4 / df))


def bh_holm(p):
    """R's p.adjust(p, "BH") and p.adjust(p, "holm") over the p that are not NaN."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.size, NAN)
    h = np.full(p.size, NAN)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    order = tested[np.argsort(p[tested], kind="stable")]
    ps = p[order]
    rank = np.arange(1, m + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate((ps * m / rank)[::-1])[::-1])
    h[order] = np.maximum.accumulate(np.minimum(1.0, ps * (m - rank + 1)))
    return q, h


def hierarchical_case():
    rng = np.random.default_rng(20261128)
    heads, tests = 10, 6
    p = rng.uniform(0.0, 1.0, (heads, tests))
    p[0] = rng.uniform(0.0, 0.004, tests)             # a head changed in every test
    p[1, :3] = [0.0004, 0.003, 0.02]                  # two small p-values, one selected only at alpha
    p[2, 0] = 0.006                                   # one
    p[3, [1, 4]] = NAN                                # not tested
    p[9] = NAN                                        # a head without a test
    return np.round(p, 6)


def simes(p):
    t = np.sort(p[~np.isnan(p)])
    if t.size == 0:
        return NAN
    return float(np.min(t.size * t / np.arange(1, t.size + 1)))


def hierarchical(p, alpha=ALPHA):
    head_p = np.array([simes(row) for row in p])
    head_q, _ = bh_holm(head_p)
    changed = head_q <= alpha
    m = int(np.sum(~np.isnan(head_p)))
    level = alpha * int(changed.sum()) / m
    q_within = np.array([bh_holm(row)[0] for row in p])
    selected = changed[:, None] & (q_within <= level)
    return head_p, head_q, changed, level, q_within, selected


def main():
    c = make_case()
    union = np.union1d(c["ids_a"], c["ids_b"])
    A = dense(c["ids_a"], c["phi_a"], union)
    B = dense(c["ids_b"], c["phi_b"], union)
    diff = (c["value_b"] - c["bias_b"]) - (c["value_a"] - c["bias_a"])
    out = {}
    # Each analysis' errors are over its own example ids: G - 1 degrees of freedom.
    df_a, df_b = float(c["ids_a"].size - 1), float(c["ids_b"].size - 1)
    for design in ("unpaired", "paired"):
        if design == "unpaired":
            se = np.sqrt(c["se_a"] ** 2 + c["se_b"] ** 2)
            df = np.array([welch(c["se_a"][h], df_a, c["se_b"][h], df_b) for h in range(c["heads"])])
        else:
            se = np.array([seq_se(B[h] - A[h]) if np.isfinite(c["se_a"][h]) and np.isfinite(c["se_b"][h]) else NAN
                           for h in range(c["heads"])])
            df = np.full(c["heads"], float(union.size - 1))
        z = np.where(np.isfinite(se) & (se > 0), diff / se, NAN)
        p = np.array([two_sided(v, d) for v, d in zip(z, df)])
        q, holm = bh_holm(p)
        out[design] = {"se": se, "df": df, "z": z, "p": p, "q_bh": q, "p_holm": holm}
        # The model-level means over the tested heads: all layers, then layer 0 and 1.
        rows = []
        for members in (np.flatnonzero(np.isfinite(se)),
                        *(np.flatnonzero(np.isfinite(se) & (c["layers"] == layer)) for layer in (0, 1))):
            n = members.size
            mean_d = float(np.mean(diff[members]))
            if design == "unpaired":
                # Independent samples: each set's error over its own sequences (its own ids).
                sa = seq_se(c["phi_a"][members].mean(axis=0))
                sb = seq_se(c["phi_b"][members].mean(axis=0))
                seq, seq_df = float(np.hypot(sa, sb)), welch(sa, df_a, sb, df_b)
            else:
                seq, seq_df = seq_se((B[members] - A[members]).mean(axis=0)), float(union.size - 1)
            independent = float(np.sqrt(np.sum(se[members] ** 2)) / n)
            independent_df = satterthwaite(se[members], df[members])
            for s, d in ((seq, seq_df), (independent, independent_df)):
                rows.append([n, float(np.mean(c["value_a"][members])), float(np.mean(c["value_b"][members])), mean_d,
                             s, d, mean_d - t_level(d) * s, mean_d + t_level(d) * s, mean_d / s, two_sided(mean_d / s, d),
                             float(np.std(diff[members], ddof=1)), int(np.sum(q[members] <= ALPHA))])
        out[design]["summary"] = np.array(rows, dtype=float)
    # The trajectory: set B's mean over heads (head 5 counts as without influences: no error).
    traj = []
    for members in (np.arange(c["heads"]), np.array([0, 1, 2])):
        values = c["value_b"][members]
        n = members.size
        mean = float(np.mean(values))
        seq = seq_se(c["phi_b"][members].mean(axis=0)) if np.all(np.isfinite(c["se_b"][members])) else NAN
        seq_df = df_b if np.isfinite(seq) else NAN
        independent = float(np.sqrt(np.sum(c["se_b"][members] ** 2)) / n)
        independent_df = satterthwaite(c["se_b"][members], np.full(n, df_b))
        for s, d in ((seq, seq_df), (independent, independent_df)):
            traj.append([n, mean, s, d, mean - t_level(d) * s, mean + t_level(d) * s])
    text = [
        "// Generated by tests/reference/gen_comparison_reference.py (docs/method.md §8.6); do not edit.\n",
        "// Regenerate: /usr/bin/python3 tests/reference/gen_comparison_reference.py\n",
        "#ifndef AP_TEST_COMPARISON_REFERENCE_HPP\n#define AP_TEST_COMPARISON_REFERENCE_HPP\n\n",
        "#include <cstddef>\n#include <cstdint>\n#include <limits>\n\n",
        "namespace comparison_reference\n{\n",
        "inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();\n",
        cpp.scalar("alpha", ALPHA),
        cpp.scalar("num_heads", c["heads"], "std::size_t"),
        cpp.array("layers", c["layers"], "std::int64_t"),
        cpp.array("ids_a", c["ids_a"], "std::int64_t", 10),
        cpp.array("ids_b", c["ids_b"], "std::int64_t", 10),
        "// phi_a[h * ids_a.size + i]: head h's influence of example ids_a[i] in A (likewise B).\n",
        cpp.array("phi_a", c["phi_a"]),
        cpp.array("phi_b", c["phi_b"]),
    ]
    for name in ("value_a", "bias_a", "se_a", "value_b", "bias_b", "se_b"):
        text.append(cpp.array(name, c[name], nan_name="nan"))
    text.append("// The degrees of freedom of A's and B's errors: their example ids less one.\n")
    text.append(cpp.scalar("df_a", df_a))
    text.append(cpp.scalar("df_b", df_b))
    text.append(cpp.array("difference", diff))
    for design in ("unpaired", "paired"):
        for name in ("se", "df", "z", "p", "q_bh", "p_holm"):
            text.append(cpp.array(f"{design}_{name}", out[design][name], nan_name="nan"))
        text.append("// Rows: all layers, layer 0, layer 1; each sequence-level, then independent heads. Columns:\n"
                    "// n, mean_a, mean_b, mean_difference, se, df, ci_low, ci_high, z, p, sd_difference,\n"
                    "// n_significant.\n")
        text.append(cpp.array(f"{design}_summary", out[design]["summary"].ravel(), per_line=12, nan_name="nan"))
    text.append("// B's mean over heads: all 6, then heads 0-2; each sequence-level, then independent heads.\n"
                "// Columns: n, mean, se, df, ci_low, ci_high.\n")
    text.append(cpp.array("trajectory", np.array(traj, dtype=float).ravel(), per_line=6, nan_name="nan"))
    hp = hierarchical_case()
    head_p, head_q, changed, level, q_within, selected = hierarchical(hp)
    text.append("// The hierarchical selection: hier_p[h * hier_tests + i] the p of test i of head h; per head its\n"
                "// Simes p, BH q across heads, changed; per test the BH q within its head and selected; alpha R / m.\n")
    text.append(cpp.scalar("hier_heads", hp.shape[0], "std::size_t"))
    text.append(cpp.scalar("hier_tests", hp.shape[1], "std::size_t"))
    text.append(cpp.array("hier_p", hp.ravel(), per_line=6, nan_name="nan"))
    text.append(cpp.array("hier_head_p", head_p, nan_name="nan"))
    text.append(cpp.array("hier_head_q", head_q, nan_name="nan"))
    text.append(cpp.array("hier_changed", changed.astype(int), "int"))
    text.append(cpp.scalar("hier_within_level", level))
    text.append(cpp.array("hier_q_within", q_within.ravel(), per_line=6, nan_name="nan"))
    text.append(cpp.array("hier_selected", selected.astype(int).ravel(), "int", 6))
    text.append("}  // namespace comparison_reference\n\n#endif\n")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "comparison_reference.hpp")
    with open(path, "w") as f:
        f.write("".join(text))


if __name__ == "__main__":
    main()
