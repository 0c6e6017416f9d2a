#!/usr/bin/python3
"""Regenerates tests/reference/extensions_reference.hpp, the reference values of the unit tests of
the extensions of docs/method.md §8 (tests/test_distance_maps.cpp, test_empirical.cpp,
test_intervals.cpp):

    /usr/bin/python3 tests/reference/gen_extensions_reference.py

Every value is computed here from the statement of docs/method.md §8.1-§8.3 and §6.4, never from
the C++ code: the stream seeds with the random streams written out in Python (ap_random.py); the
distance bins by comparisons with 2 ** (k / b); the empirical preferences and plasticities in
exact integer arithmetic (the inputs are small integers, so every score q.w is exact in float and
double alike); the delta-method standard errors and biases of §8.3 in NumPy, from the rotated
queries, the keys and the cells' pairs (the query models, moments, sensitivities, influences and
bias terms all recomputed here), and the sequence-level errors summed by sequence from the same
influences; Phi^-1 with scipy.stats.norm.ppf. Inputs are rounded to float32
so that one reference serves the float and the double instantiations.
"""

import fractions
import os
import sys

import numpy as np
import scipy
import scipy.special
import scipy.stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpp_literals as cpp  # noqa: E402
from ap_random import MASK64, mix_seed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "extensions_reference.hpp")
COMMAND = "/usr/bin/python3 tests/reference/gen_extensions_reference.py"
F = fractions.Fraction

rng = np.random.default_rng(20261201)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


# ------------------------------------------------------------ §6.4 extension streams
seed_cases = [(0, 1, 0), (12345, 4, 3), (MASK64, 7, -1), (987654321, -2, 5)]
map_seed_rows = [mix_seed(s, j & MASK64, c & MASK64, 1) for s, j, c in seed_cases]
empirical_seed_rows = [mix_seed(s, j & MASK64, 0, 2) for s, j, _ in seed_cases]


# ------------------------------------------------------------------ §8.1 distance bins
def log_bin(x, b):
    if x < 0:
        return -1
    if x < 1:
        return 0
    k = 1
    while not (x < 2.0 ** (k / b)):
        k += 1
    return k


def bin_edges(k, b):
    if k < 0:
        return (-np.inf, 0.0)
    if k == 0:
        return (0.0, 1.0)
    return (2.0 ** ((k - 1) / b), 2.0 ** (k / b))


def away_from_edges(x, b):
    """True when x is not within 1e-9 (relative) of an edge 2^(k/b), k >= 1 (pow and exp2 may
    differ in the last bit there); exact powers of two are edges in both for b = 1."""
    if x < 1:
        return True
    k = b * np.log2(x)
    return abs(k - round(k)) > 1e-6 or (b == 1 and float(x) == 2.0 ** round(k))


bin_cases = []
for b in (1, 2, 3, 7):
    values = [-1e9, -3.5, -1e-300, 0.0, 1e-300, 0.5, 0.999999, 1.0, 1.5, 2.0, 3.0, 4.0, 1023.0, 1024.0, 1025.0,
              1e6, 1e300]
    values += list(rng.uniform(0, 5000, 12)) + list(rng.uniform(0, 3, 6))
    for x in values:
        if away_from_edges(x, b) or b == 1:
            bin_cases.append((b, float(x), log_bin(x, b)))

# A map: pairs with integer inter-key distances (0 included), query distances of both signs.
MP = 600
map_key = rng.integers(0, 300, MP).astype(float)
map_key[:20] = 0.0
map_key[20:40] = 1.0
map_query = np.concatenate([rng.uniform(-50, 4000, MP - 30), np.full(10, 0.0), np.full(10, 0.5),
                            np.full(10, 64.0)])
map_query = f32([q if away_from_edges(abs(q), 3) else q + 0.25 for q in map_query])
assert all(away_from_edges(abs(q), 3) for q in map_query)
map_pp = f32(rng.uniform(0, 1, MP))
map_pp[:5] = 0.0
map_pp[5:10] = 1.0


def distance_map(key, query, pp, b):
    bins = {}
    for k, q, v in zip(key, query, pp):
        idx = (log_bin(k, b), log_bin(q, b))
        s, n = bins.get(idx, (F(0), 0))
        bins[idx] = (s + F(float(v)), n + 1)
    rows = []
    for idx in sorted(bins):
        s, n = bins[idx]
        rows.append((idx[0], idx[1], float(s / n), n))
    return rows


map_rows = {b: distance_map(map_key, map_query, map_pp, b) for b in (1, 3)}

# ------------------------------------------------------------------ §8.2 empirical AP
EN, ED, EP = 700, 5, 300  # queries, d, pairs: more than one block of 512 queries and 256 pairs
emp_q = rng.integers(-3, 4, (EN, ED)).astype(float)
emp_w = rng.integers(-2, 3, (EP, ED)).astype(float)
emp_w[:4] = 0.0  # identical keys: every query ties
emp_w[4] = [1, 0, 0, 0, 0]
scores = (emp_q @ emp_w.T).astype(np.int64)  # exact integers
wins = (scores > 0).sum(axis=0)
ties = (scores == 0).sum(axis=0)
emp_pref = [float(F(int(w)) / EN + F(int(t), 2 * EN)) for w, t in zip(wins, ties)]
emp_tie = [float(F(int(t), EN)) for t in ties]


def unbiased_pp(w, t, n):
    """(4 p (1 - p) n - t_share) / (n - 1) in exact rationals, as the U-statistic
    4 / (n (n - 1)) sum_{i != k} s_i (1 - s_k) with s = 1, 1/2, 0 (checked below)."""
    p = F(2 * w + t, 2 * n)
    return (4 * p * (1 - p) * n - F(t, n)) / (n - 1)


emp_pp = [float(unbiased_pp(int(w), int(t), EN)) for w, t in zip(wins, ties)]
# The U-statistic form on a few pairs, exactly: the same numbers.
for p in range(8):
    s = [F(1) if x > 0 else (F(1, 2) if x == 0 else F(0)) for x in scores[:, p]]
    total = sum(s)
    u = 4 * (total * (EN - total) - sum(si * (1 - si) for si in s)) / (EN * (EN - 1))
    assert u == unbiased_pp(int(wins[p]), int(ties[p]), EN)
# The variance of the mean over the pairs (docs/method.md §8.2): (16 / n) var_i(f_i),
# f_i = (1/P) sum_p (1 - 2 p_hat_p) s_ip, var with divisor n - 1.
s_matrix = np.where(scores > 0, 1.0, np.where(scores == 0, 0.5, 0.0))
f_i = s_matrix @ ((1.0 - 2.0 * np.array(emp_pref)) / EP)
emp_variance = 16.0 / EN * np.var(f_i, ddof=1)
# Cells of a bucket: pair counts, the cells' means and AP_j of the empirical PP.
emp_cell_sizes = [100, 0, 120, 80]
emp_cell_mean = []
at = 0
for size in emp_cell_sizes:
    emp_cell_mean.append(float(np.mean(emp_pp[at:at + size])) if size else float("nan"))
    at += size
emp_ap = float(np.mean(emp_pp))

# ---------------------------------------------------------------- §8.3 intervals
g = lambda z: 4.0 * scipy.special.ndtr(z) * scipy.special.ndtr(-z)  # noqa: E731
g1 = lambda z: 4.0 * scipy.stats.norm.pdf(z) * (scipy.special.ndtr(-z) - scipy.special.ndtr(z))  # noqa: E731
g2 = lambda z: 4.0 * (-z * scipy.stats.norm.pdf(z) * (scipy.special.ndtr(-z) - scipy.special.ndtr(z))  # noqa: E731
                      - 2.0 * scipy.stats.norm.pdf(z) ** 2)

IN, ID = 900, 4
in_t = rng.integers(0, 300, IN).astype(float)
in_bucket = (in_t // 100).astype(np.int64)  # 0, 1, 2 (buckets 1 and 2 get models)
in_bucket[:40] = 3                           # bucket 3: 40 queries at early positions
in_bucket[40] = -1                            # no model
in_x = np.empty((IN, ID))
in_x[:, 0] = 0.8 + 0.01 * in_t + rng.standard_normal(IN)
in_x[:, 1:] = rng.standard_normal((IN, ID - 1)) * np.array([1.0, 0.6, 1.4]) + 0.2 * (in_bucket[:, None] == 2)
in_x = f32(in_x)
# Keys (already rotated) and the cells of each modelled bucket: rows of the key table.
KN = 80
in_keys = f32(rng.standard_normal((KN, ID)) * np.array([0.7, 1.0, 1.0, 1.0]))
in_cells = {1: [(0, 300)], 2: [(0, 250), (1, 350)], 3: [(0, 200), (1, 2), (2, 0)]}  # (k_bucket, pairs)
in_pairs = {}
for j, cells in in_cells.items():
    rows = []
    for c, size in cells:
        first = rng.integers(0, KN, size)
        second = (first + 1 + rng.integers(0, KN - 1, size)) % KN
        rows.append((c, list(first), list(second)))
    in_pairs[j] = rows


def component0_fit(t, x0):
    tb = t.mean()
    stt = ((t - tb) ** 2).sum()
    beta = ((t - tb) * (x0 - x0.mean())).sum() / stt
    alpha = x0.mean() - beta * tb
    r = x0 - alpha - beta * t
    sigma2 = ((r - r.mean()) ** 2).sum() / (len(t) - 1)
    return alpha, beta, r, sigma2


def uncertainty(slope_norm, level):
    n, d = in_x.shape
    m = d - 1
    alpha, beta, r, sigma2 = component0_fit(in_t, in_x[:, 0])
    xs = in_x[:, 1:]
    models = []
    for j in sorted(set(in_bucket.tolist())):
        rows = np.flatnonzero(in_bucket == j)
        if j <= 0 or len(rows) < 2:
            continue
        tau = in_t[rows].mean()
        mu = xs[rows].mean(axis=0)
        sigma = np.cov(xs[rows].T, ddof=1).reshape(m, m) + 1e-12 * np.eye(m)
        models.append(dict(j=j, rows=rows, n=len(rows), tau=tau, mu0=alpha + beta * tau, mu=mu, sigma=sigma))
    tb = in_t.mean()
    stt = ((in_t - tb) ** 2).sum()
    rc = r - r.mean()
    xbar = xs.mean(axis=0)
    rho = (rc @ (xs - xbar)) / (n - 1)
    rot = slope_norm >= 1e-12 and stt > 0
    results = []
    for md in models:
        cells = in_pairs[md["j"]]
        w = np.vstack([in_keys[f] - in_keys[s] for _, f, s in cells if len(f)])
        sizes = [len(f) for _, f, _ in cells]
        P = len(w)
        w0, ws = w[:, 0], w[:, 1:]
        mean = w0 * md["mu0"] + ws @ md["mu"]
        var = w0 ** 2 * sigma2 + np.einsum("ij,jk,ik->i", ws, md["sigma"], ws)
        z = mean / np.sqrt(var)
        pp = g(z)
        ap = pp.mean()
        a_p = g1(z) / (P * np.sqrt(var))
        b_p = -g1(z) * z / (2 * P * var)
        sens = dict(a=a_p @ ws, G=a_p @ w0, K=b_p @ w0 ** 2, M=(ws * b_p[:, None]).T @ ws, b=(b_p * w0) @ ws)
        vsem = np.maximum(var - w0 ** 2 * sigma2, 0.0)
        curv = (3 * z * g1(z) + z * z * g2(z)) / 8
        sens["c_pm"] = np.mean(0.5 * g2(z) * w0 ** 2 / var)
        sens["c_pv"] = np.mean(curv * w0 ** 4 / var ** 2)
        sens["c_ps"] = np.mean(-z * g1(z) * w0 ** 2 / (2 * var))
        sens["c_sem"] = np.mean(0.5 * g2(z) * vsem / (md["n"] * var) + curv * 2 * vsem ** 2 / ((md["n"] - 1) * var ** 2))
        pair_var = 0.0
        at = 0
        for size in sizes:
            if size:
                pair_var += size * np.var(pp[at:at + size], ddof=1)
            at += size
        pair_var /= P ** 2
        results.append(dict(md=md, ap=ap, sens=sens, pair_var=pair_var, pp=pp))
    weights = np.array([x["md"]["n"] for x in results], dtype=float)
    weights /= weights.sum()
    if rot:
        pooled = sum((x["md"]["n"] - 1) * x["md"]["sigma"] for x in results) / sum(x["md"]["n"] - 1 for x in results)
        V = pooled / (stt * slope_norm ** 2)
    else:
        pooled = np.zeros((m, m))
        V = np.zeros((m, m))
    vsig = (((rc ** 2) - sigma2) ** 2).sum() / n ** 2
    shift = -sigma2 / (n - 1)
    phi = np.zeros((n, len(results)))
    for c, x in enumerate(results):
        md, s = x["md"], x["sens"]
        rows = md["rows"]
        vmu0 = sigma2 * (1 / n + (md["tau"] - tb) ** 2 / stt)
        bias = s["c_pm"] * vmu0 + s["c_pv"] * vsig + s["c_ps"] * shift + s["c_sem"]
        msig = s["M"] @ md["sigma"]
        cov_var = 2 * np.trace(msig @ msig) / (md["n"] - 1)
        h = np.zeros(m)
        if rot:
            x0 = in_x[rows, 0]
            r0 = x0.mean() - md["mu0"]
            s00 = np.var(x0, ddof=1)
            cj = ((x0 - x0.mean()) @ (xs[rows] - md["mu"])) / (md["n"] - 1)
            shiftv = md["mu"] - xbar
            h = (-2 * (md["sigma"] - sigma2 * np.eye(m)) @ s["b"] - 2 * s["M"] @ cj + 2 * s["K"] * rho
                 - r0 * s["a"] - s["G"] * shiftv)
            bias += (s["G"] * r0 * np.trace(V) - s["a"] @ V @ shiftv + (s00 + sigma2) * np.trace(s["M"] @ V)
                     - 2 * np.trace(s["M"] @ V @ md["sigma"])
                     + s["K"] * np.trace((md["sigma"] + pooled - 2 * sigma2 * np.eye(m)) @ V))
            phi[:, c] += (in_t - tb) / (stt * slope_norm) * ((xs - xbar) @ h)
        phi[rows, c] += (xs[rows] - md["mu"]) @ s["a"] / md["n"]
        phi[:, c] += s["G"] * rc * (1 / n + (md["tau"] - tb) * (in_t - tb) / stt) + s["K"] * (rc ** 2 - sigma2) / n
        x.update(bias=bias, cov_var=cov_var, h=h)
    overall = phi @ weights
    var_lin = ((phi - phi.mean(axis=0)) ** 2).sum(axis=0)
    var_over = ((overall - overall.mean()) ** 2).sum()
    z = scipy.stats.norm.ppf(0.5 + 0.5 * level)
    out = dict(alpha=alpha, beta=beta, sigma2=sigma2, buckets=[])
    for c, x in enumerate(results):
        se = np.sqrt(var_lin[c] + x["cov_var"] + x["pair_var"])
        centre = x["ap"] - x["bias"]
        out["buckets"].append(dict(j=x["md"]["j"], ap=x["ap"], se=se, bias=x["bias"], pair_var=x["pair_var"],
                                   low=min(1, max(0, centre - z * se)), high=min(1, max(0, centre + z * se)),
                                   sens=x["sens"]))
        var_over += weights[c] ** 2 * (x["cov_var"] + x["pair_var"])
    out["pieces"] = dict(phi=phi, results=results, beta=beta, xs=xs, weights=weights)
    out["ap"] = float(weights @ np.array([x["ap"] for x in results]))
    out["se"] = float(np.sqrt(var_over))
    out["bias"] = float(weights @ np.array([x["bias"] for x in results]))
    centre = out["ap"] - out["bias"]
    out["low"], out["high"] = min(1, max(0, centre - z * out["se"])), min(1, max(0, centre + z * out["se"]))
    return out


IN_SLOPES = [0.0, 0.004]
IN_LEVELS = [0.95, 0.8]
in_results = [uncertainty(s, lv) for s, lv in zip(IN_SLOPES, IN_LEVELS)]

# §8.3, sequence-level: each query and each key row belongs to one of 18 sequences; a pair lies in
# the sequence of its first key. Per sequence e and bucket j, Phi_ej sums the queries' influences
# (those of uncertainty() plus the ones through Sigma_j and tau_j) and the pairs' (PP_p -
# P_cell) / P_j; a weighted aggregate adds sum_j (AP_j - A) n_ej / N_S; SE = sqrt(G / (G - 1) sum_e
# (Phi_e - mean)^2). Two context lengths C: 1000 (ap_first20 = buckets with tau < 200, ap_last20
# empty) and 300 (ap_first20 empty, ap_last20 = tau >= 240).
SEQ_G = 18
in_example = rng.integers(0, SEQ_G, IN)
in_key_example = rng.integers(0, SEQ_G, KN)
SEQ_CONTEXTS = [1000.0, 300.0]


def sequence_uncertainty(case, context_length):
    pieces = in_results[case]["pieces"]
    results, weights, xs = pieces["results"], pieces["weights"], pieces["xs"]
    phi = pieces["phi"].copy()
    n = len(in_t)
    for c, x in enumerate(results):
        md, sens = x["md"], x["sens"]
        rows = md["rows"]
        u = xs[rows] - md["mu"]
        form = np.einsum("ij,jk,ik->i", u, sens["M"], u)
        phi[rows, c] += (form - form.mean()) / (md["n"] - 1)
        phi[rows, c] += sens["G"] * pieces["beta"] * (in_t[rows] - md["tau"]) / md["n"]
    ids = np.unique(np.concatenate([in_example, in_key_example]))
    index = {e: i for i, e in enumerate(ids)}
    g_count = len(ids)
    big = np.zeros((g_count, len(results)))
    counts = np.zeros((g_count, len(results)))
    for i in range(n):
        big[index[in_example[i]]] += phi[i]
    for c, x in enumerate(results):
        counts[:, c] = np.bincount([index[e] for e in in_example[x["md"]["rows"]]], minlength=g_count)
        cells = in_pairs[x["md"]["j"]]
        pp, at = x["pp"], 0
        total = len(pp)
        for _, first, _ in cells:
            size = len(first)
            if size:
                dev = pp[at:at + size] - pp[at:at + size].mean()
                for f, v in zip(first, dev):
                    big[index[in_key_example[f]], c] += v / total
            at += size
    aps = np.array([x["ap"] for x in results])
    sizes = np.array([x["md"]["n"] for x in results], dtype=float)
    taus = np.array([x["md"]["tau"] for x in results])

    def se_of(member):
        if not member.any():
            return float("nan")
        w = np.where(member, sizes, 0.0) / sizes[member].sum()
        value = w @ aps
        kappa = np.where(member, (aps - value) / sizes[member].sum(), 0.0)
        y = big @ w + counts @ kappa
        return float(np.sqrt(g_count / (g_count - 1) * ((y - y.mean()) ** 2).sum()))

    every = np.ones(len(results), dtype=bool)
    out = dict(bucket_se=[float(np.sqrt(g_count / (g_count - 1) * ((big[:, c] - big[:, c].mean()) ** 2).sum()))
                          for c in range(len(results))],
               overall_se=se_of(every), first20_se=se_of(taus < 0.2 * context_length),
               last20_se=se_of(taus >= 0.8 * context_length), sequences=g_count)
    return out


seq_results = [sequence_uncertainty(case, ctx) for case in range(len(in_results)) for ctx in SEQ_CONTEXTS]

quantile_p = [0.5, 0.975, 0.995, 0.9, 0.6, 0.02, 1e-10, 1 - 1e-12, 0.02425, 0.97575]
quantile_z = [float(scipy.stats.norm.ppf(p)) for p in quantile_p]

# --------------------------------------------------------------------------- output
scalar, array = cpp.scalar, cpp.array
b0 = in_results[0]["buckets"]
parts = [
    "// Generated by {} -- do not edit.\n".format(COMMAND),
    "// NumPy {}, SciPy {}.\n".format(np.__version__, scipy.__version__),
    "#ifndef AP_TESTS_EXTENSIONS_REFERENCE_HPP\n#define AP_TESTS_EXTENSIONS_REFERENCE_HPP\n\n",
    "#include <cstddef>\n#include <cstdint>\n#include <limits>\n\nnamespace extensions_ref\n{\n",
    "inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();\n",
    "\n// ---- §6.4: (seed, j, c) -> mix_seed(seed, j, c, 1) and mix_seed(seed, j, 0, 2).\n",
    array("seed_seed", [s for s, _, _ in seed_cases], "std::uint64_t", 4),
    array("seed_j", [j for _, j, _ in seed_cases], "std::int64_t", 10),
    array("seed_c", [c for _, _, c in seed_cases], "std::int64_t", 10),
    array("seed_map", map_seed_rows, "std::uint64_t", 4),
    array("seed_empirical", empirical_seed_rows, "std::uint64_t", 4),
    "\n// ---- §8.1: log bins (bins_per_octave, distance, bin).\n",
    scalar("bin_case_count", len(bin_cases), "std::size_t"),
    array("bin_b", [b for b, _, _ in bin_cases], "std::size_t", 10),
    array("bin_x", [x for _, x, _ in bin_cases]),
    array("bin_index", [k for _, _, k in bin_cases], "int", 10),
    "// A map of MP pairs for bins_per_octave 1 and 3: rows (key_bin, query_bin, mean PP, count).\n",
    scalar("map_n", MP, "std::size_t"),
    array("map_key", map_key), array("map_query", map_query), array("map_pp", map_pp),
]
for b in (1, 3):
    rows = map_rows[b]
    parts += [scalar("map{}_rows".format(b), len(rows), "std::size_t"),
              array("map{}_key_bin".format(b), [r[0] for r in rows], "int", 10),
              array("map{}_query_bin".format(b), [r[1] for r in rows], "int", 10),
              array("map{}_mean".format(b), [r[2] for r in rows]),
              array("map{}_count".format(b), [r[3] for r in rows], "std::size_t", 10),
              array("map{}_key_low".format(b), [bin_edges(r[0], b)[0] for r in rows]),
              array("map{}_key_high".format(b), [bin_edges(r[0], b)[1] for r in rows]),
              array("map{}_query_high".format(b), [bin_edges(r[1], b)[1] for r in rows])]
parts += [
    "\n// ---- §8.2: integer queries (n x d) and differences (P x d); exact preferences, tie shares,\n"
    "// unbiased PP; the variance of their mean; cells of the given sizes with their means and AP_j.\n",
    scalar("emp_n", EN, "std::size_t"), scalar("emp_d", ED, "std::size_t"), scalar("emp_p", EP, "std::size_t"),
    array("emp_q", emp_q.ravel()), array("emp_w", emp_w.ravel()),
    array("emp_preference", emp_pref), array("emp_tie", emp_tie), array("emp_pp", emp_pp),
    scalar("emp_variance", emp_variance),
    array("emp_cell_sizes", emp_cell_sizes, "std::size_t", 10),
    array("emp_cell_mean", emp_cell_mean, nan_name="nan"), scalar("emp_ap", emp_ap),
    "\n// ---- §8.3: a head of n queries (d = 4, rotated, float32-exact): positions, buckets; keys\n"
    "// (rotated) and per modelled bucket its cells (k_bucket, first rows, second rows). For\n"
    "// slope_norm 0 (no rotation term) and 0.05 (levels 0.95 and 0.8): per bucket AP_j, the\n"
    "// sensitivity, the pair variance, SE, bias and interval; the same for ap_overall.\n",
    scalar("in_n", IN, "std::size_t"), scalar("in_d", ID, "std::size_t"),
    array("in_t", in_t), array("in_bucket", in_bucket, "std::int64_t", 10), array("in_x", in_x.ravel()),
    scalar("in_key_n", KN, "std::size_t"), array("in_keys", in_keys.ravel()),
    array("in_model_bucket", [b["j"] for b in b0], "std::int64_t", 10),
    array("in_cell_count", [len(in_pairs[b["j"]]) for b in b0], "std::size_t", 10),
    array("in_cell_k_bucket", [c for b in b0 for c, _, _ in in_pairs[b["j"]]], "std::int64_t", 10),
    cpp.flat_with_offsets("in_cell_first", [f for b in b0 for _, f, _ in in_pairs[b["j"]]]),
    array("in_cell_second", [v for b in b0 for _, _, s in in_pairs[b["j"]] for v in s], "std::size_t", 10),
    scalar("in_case_count", len(in_results), "std::size_t"),
    array("in_slope_norm", IN_SLOPES), array("in_level", IN_LEVELS),
    array("in_ap", [b["ap"] for b in b0]),
    array("in_pair_variance", [b["pair_var"] for b in b0]),
    array("in_sens_a", [v for b in b0 for v in b["sens"]["a"]]),
    array("in_sens_G", [b["sens"]["G"] for b in b0]), array("in_sens_K", [b["sens"]["K"] for b in b0]),
    array("in_sens_M", [v for b in b0 for v in np.asarray(b["sens"]["M"]).ravel()]),
    array("in_sens_b", [v for b in b0 for v in b["sens"]["b"]]),
    array("in_sens_c_pm", [b["sens"]["c_pm"] for b in b0]), array("in_sens_c_pv", [b["sens"]["c_pv"] for b in b0]),
    array("in_sens_c_ps", [b["sens"]["c_ps"] for b in b0]), array("in_sens_c_sem", [b["sens"]["c_sem"] for b in b0]),
    array("in_bucket_se", [b["se"] for r in in_results for b in r["buckets"]]),
    array("in_bucket_bias", [b["bias"] for r in in_results for b in r["buckets"]]),
    array("in_bucket_low", [b["low"] for r in in_results for b in r["buckets"]]),
    array("in_bucket_high", [b["high"] for r in in_results for b in r["buckets"]]),
    array("in_overall_ap", [r["ap"] for r in in_results]),
    array("in_overall_se", [r["se"] for r in in_results]),
    array("in_overall_bias", [r["bias"] for r in in_results]),
    array("in_overall_low", [r["low"] for r in in_results]),
    array("in_overall_high", [r["high"] for r in in_results]),
    "\n// ---- §8.3, sequence-level: example ids of the queries and of the key rows; per case (slope_norm)\n"
    "// and context length C: the SEs of AP_j, ap_overall, ap_first20, ap_last20 (NaN: undefined).\n",
    array("seq_example", in_example, "std::int64_t", 10),
    array("seq_key_example", in_key_example, "std::int64_t", 10),
    array("seq_context", SEQ_CONTEXTS), scalar("seq_sequences", seq_results[0]["sequences"], "std::size_t"),
    array("seq_bucket_se", [v for r in seq_results for v in r["bucket_se"]]),
    array("seq_overall_se", [r["overall_se"] for r in seq_results]),
    array("seq_first20_se", [r["first20_se"] for r in seq_results], nan_name="nan"),
    array("seq_last20_se", [r["last20_se"] for r in seq_results], nan_name="nan"),
    "\n// ---- Phi^-1(p), scipy.stats.norm.ppf.\n",
    array("quantile_p", quantile_p), array("quantile_z", quantile_z),
    "}  // namespace extensions_ref\n\n#endif\n",
]
with open(OUT, "w") as f:
    f.write("".join(parts))
print("wrote {} ({} bytes)".format(OUT, os.path.getsize(OUT)), file=sys.stderr)
