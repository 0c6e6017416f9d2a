#!/usr/bin/python3
"""Regenerates tests/reference/steps_reference.hpp, the reference values of the unit tests of
the pipeline's public steps (tests/test_seeds.cpp, test_preparation.cpp, test_regression.cpp,
test_query_model.cpp, test_cells.cpp):

    /usr/bin/python3 tests/reference/gen_steps_reference.py

Every value is computed here from the method's statement (docs/method.md §2.1-2.15, §5, §6),
never from the C++ code: the seeds and the seeded draws (subsampling, a cell's key pairs) with
the random streams written out in Python (ap_random.py); the orientation signs, eligibility and
key grouping in plain Python/NumPy; the component-0 fit and the bucket statistics in exact
rational arithmetic (fractions); the pair plasticities with scipy.special.ndtr. Inputs are
rounded to float32 so that one reference serves the float and the double instantiations.
"""

import fractions
import math
import os
import sys

import numpy as np
import scipy
import scipy.special

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpp_literals as cpp  # noqa: E402
from ap_random import MASK64, Xoshiro256ss, mix_seed, sample_without_replacement  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "steps_reference.hpp")
COMMAND = "/usr/bin/python3 tests/reference/gen_steps_reference.py"
F = fractions.Fraction

rng = np.random.default_rng(20261127)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


# ------------------------------------------------------------------- §2.15 seeds
def pair_sampler_seed(seed, layer, q_head):
    return (seed + 10007 * layer + 379 * q_head) & MASK64


seed_cases = [(0, 0, 0), (7, 3, 5), (MASK64, 1, 1), (123456789, 31, 63)]
seed_rows = []
for seed, layer, q_head in seed_cases:
    seed_rows.append((seed, layer, q_head, mix_seed(seed, ord("q")), mix_seed(seed, ord("k")), seed,
                      pair_sampler_seed(seed, layer, q_head)))
cell_seed_cases = [(0, 1, 0), (pair_sampler_seed(7, 3, 5), 4, 3), (12345, 12, 11), (99, 2, -1)]
cell_seed_rows = [(s, j, c, mix_seed(s, j, c)) for s, j, c in cell_seed_cases]


# -------------------------------------------------------------- §2.2 subsampling
def subsample(n, max_rows, seed):
    return sorted(sample_without_replacement(n, max_rows, seed))


subsample_cases = [(10, 20, 3), (10, 10, 3), (1000, 50, 12345), (37, 36, 0), (5, 0, 1), (200, 7, mix_seed(4, 113))]
subsample_rows = [subsample(*c) for c in subsample_cases]

# -------------------------------------------------------------- §2.1 orientation
ON, OD = 60, 5
or_bucket = rng.permutation(np.array([3] * 30 + [7] * 6 + [0] * 20 + [-1] * 4))
or_keys = f32(rng.standard_normal((ON, OD)) + np.array([0.8, -0.6, 0.0, 0.0, 0.0]))
or_keys[:, 2] = f32(rng.standard_normal(ON) * 0.01 + 0.2 * np.sign(rng.standard_normal(ON)))
# Column 3: per-bucket constants whose overall mean is negative but whose mean of bucket means
# is positive (the bucket weighting matters); column 4: 0 everywhere (sign +1).
per_bucket = {3: -1.0, 7: 3.0, 0: -0.5, -1: 0.25}
or_keys[:, 3] = [per_bucket[b] for b in or_bucket]
or_keys[:, 4] = 0.0
bucket_means = np.array([or_keys[or_bucket == b].mean(axis=0) for b in np.unique(or_bucket)])
or_signs = np.sign(bucket_means.mean(axis=0))
or_signs[or_signs == 0] = 1.0
assert or_keys[:, 3].mean() < 0 < bucket_means[:, 3].mean()
assert np.all(np.abs(bucket_means.mean(axis=0)[:3]) > 1e-3)

# ------------------------------------------------------ §2.6 component-0 fit
CN, CD = 40, 4
c0_t = rng.choice(500, CN, replace=False).astype(np.float64)
c0_x = f32(rng.standard_normal((CN, CD)) * 2.0)
c0_x[:, 0] = f32(1.5 - 0.01 * c0_t + rng.standard_normal(CN) * 0.7)


def exact_component0(t, x0):
    n = len(t)
    tf = [F(float(v)) for v in t]
    xf = [F(float(v)) for v in x0]
    tm = sum(tf) / n
    xm = sum(xf) / n
    beta = sum((a - tm) * (b - xm) for a, b in zip(tf, xf)) / sum((a - tm) ** 2 for a in tf)
    alpha = xm - beta * tm
    res = [b - alpha - beta * a for a, b in zip(tf, xf)]
    rm = sum(res) / n
    assert rm == 0  # the residuals of OLS with an intercept have mean 0 exactly
    sigma2 = sum((r - rm) ** 2 for r in res) / (n - 1)
    return float(alpha), float(beta), float(sigma2), [float(r) for r in res]


c0_alpha, c0_beta, c0_sigma2, c0_residual = exact_component0(c0_t, c0_x[:, 0])

# ---------------------------------------------------------- §2.10 query models
QN, QD = 60, 4
qm_pos = rng.integers(0, 1000, QN).astype(np.float64)
qm_ids = np.array([5] * 14 + [2] * 16 + [9] * 2 + [11] * 1 + [0] * 15 + [-3] * 12)
assert qm_ids.size == QN
qm_bucket = rng.permutation(qm_ids)
qm_x = f32(rng.standard_normal((QN, QD)) @ rng.standard_normal((QD, QD)) + 0.5)
qm_alpha, qm_beta, qm_sigma2 = 0.75, -0.002, 1.25


def exact_gaussian(rows):
    n = len(rows)
    m = len(rows[0])
    xf = [[F(float(v)) for v in r] for r in rows]
    mean = [sum(r[j] for r in xf) / n for j in range(m)]
    cov = [[sum((r[i] - mean[i]) * (r[j] - mean[j]) for r in xf) / (n - 1) + (F(1e-12) if i == j else 0)
            for j in range(m)] for i in range(m)]
    return [float(v) for v in mean], [float(v) for row in cov for v in row]


qm_models = []  # (bucket, n, tau, position_mean, mean, cov)
for b in sorted(set(qm_bucket.tolist())):
    rows = np.nonzero(qm_bucket == b)[0]
    if b < 1 or rows.size < 2:
        continue
    tau = sum(F(float(v)) for v in qm_pos[rows]) / rows.size
    mean, cov = exact_gaussian(qm_x[rows, 1:])
    qm_models.append((b, rows.size, float(tau), float(F(qm_alpha) + F(qm_beta) * tau), mean, cov))

# ------------------------------------------- §2.11-2.13 key buckets and cells
KD = 4
key_rows = []  # (position, bucket, example_id)
for example, length in ((9, 50), (2, 35), (4, 1), (13, 2)):
    for pos in range(length):
        key_rows.append((pos, pos // 10, example))
for example in (1, 3, 5):  # bucket 5: single-key examples only
    key_rows.append((60 + example, 5, example))
order = rng.permutation(len(key_rows))
key_rows = [key_rows[i] for i in order]
KN = len(key_rows)
ck_pos = np.array([r[0] for r in key_rows])
ck_bucket = np.array([r[1] for r in key_rows])
ck_example = np.array([r[2] for r in key_rows])
ck_keys = f32(rng.standard_normal((KN, KD)) * np.array([1.5, 1.0, 0.7, 1.2]) + np.array([0.3, 0.0, -0.4, 0.1]))


def group_key_buckets():
    out = []
    for b in sorted(set(ck_bucket.tolist())):
        rows = [i for i in range(KN) if ck_bucket[i] == b]
        rows.sort(key=lambda i: (ck_example[i], ck_pos[i], i))
        examples = []
        for i in rows:
            if not examples or examples[-1][0] != ck_example[i]:
                examples.append((ck_example[i], []))
            examples[-1][1].append(i)
        out.append((b, max(ck_pos[i] for i in rows), examples))
    return out


key_buckets = group_key_buckets()


def eligible(j, tau, window):
    out = []
    for index, (c, max_pos, _) in enumerate(key_buckets):
        if c >= j:
            break
        if window > 0 and c != j - 1 and not (max_pos > tau - window):
            continue
        out.append(index)
    return out


eligibility_cases = [(4, 44.5, 0), (4, 44.5, 20), (4, 44.5, 5), (3, 31.0, 12), (1, 12.0, 0), (0, 3.0, 0),
                     (6, 65.0, 30), (9, 95.0, 1)]
eligibility_rows = [eligible(*c) for c in eligibility_cases]


def pair_window(length, max_rel_dist):
    return max(1, int(min(math.floor(max_rel_dist * length), length)))


def sample_cell(examples, num_pairs, max_rel_dist, seed):
    """docs/method.md §2.12 / §5: the per-bucket sampler over the examples of one key bucket."""
    lengths = [len(rows) for _, rows in examples]
    usable, cumulative, total = [], [], 0
    for b, length in enumerate(lengths):
        if length >= 2:
            total += length
            usable.append(b)
            cumulative.append(total)
    if not usable or num_pairs == 0:
        return [], []
    g = Xoshiro256ss(seed)
    first, second = [], []
    for _ in range(num_pairs):
        ticket = g.below(total)
        slot = next(k for k, c in enumerate(cumulative) if c > ticket)  # upper_bound
        b = usable[slot]
        length = lengths[b]
        delta = pair_window(length, max_rel_dist)
        anchor = g.below(length)
        left = max(0, anchor - delta)
        right = min(length - 1, anchor + delta)
        neighbour = left + g.below(right - left)
        if neighbour >= anchor:
            neighbour += 1
        rows = examples[b][1]
        if g.uniform() < 0.5:
            first.append(rows[anchor])
            second.append(rows[neighbour])
        else:
            first.append(rows[neighbour])
            second.append(rows[anchor])
    return first, second


CELL_J, CELL_PAIRS, CELL_MAX_REL = 6, 37, 0.2
cell_sampler_seed = pair_sampler_seed(11, 2, 3)
cells = []  # (k_bucket, first, second)
for index in eligible(CELL_J, 65.0, 0):
    c, _, examples = key_buckets[index]
    first, second = sample_cell(examples, CELL_PAIRS, CELL_MAX_REL, mix_seed(cell_sampler_seed, CELL_J, c))
    cells.append((c, first, second))
assert [c for c, _, _ in cells] == [0, 1, 2, 3, 4, 5] and len(cells[5][1]) == 0

# The query model of the bucket: position part and an SPD semantic covariance, float32-exact.
cell_position_mean = float(f32(0.35))
cell_position_variance = float(f32(0.8))
cell_mu = f32(rng.standard_normal(KD - 1) * 0.5)
a = rng.standard_normal((KD - 1, KD - 1))
cell_sigma = f32(a @ a.T / (KD - 1) + 0.2 * np.eye(KD - 1))
cell_sigma = (cell_sigma + cell_sigma.T) / 2.0
assert np.all(np.linalg.eigvalsh(cell_sigma) > 0)


def pair_pp(k1, k2):
    w = ck_keys[k1] - ck_keys[k2]
    m = w[0] * cell_position_mean + float(np.dot(w[1:], cell_mu))
    v = w[0] * w[0] * cell_position_variance + float(w[1:] @ cell_sigma @ w[1:])
    if v > 0:
        tail = scipy.special.ndtr(-abs(m / math.sqrt(v)))
        return 4.0 * tail * (1.0 - tail)
    return 1.0 if m == 0 else 0.0


cell_pp_mean = []
all_pp = []
for c, first, second in cells:
    pps = [pair_pp(a, b) for a, b in zip(first, second)]
    all_pp.extend(pps)
    cell_pp_mean.append(float(np.mean(pps)) if pps else float("nan"))
cell_ap = float(np.mean(all_pp))


# --------------------------------------------------------------------- output
NAN = "nan_value"


def array(name, values, ctype="double", per_line=4):
    return cpp.array(name, values, ctype, per_line, NAN)


def scalar(name, value, ctype="double"):
    return cpp.scalar(name, value, ctype, NAN)


parts = [
    "// Generated by `{}` (run from the repository root); do not edit.\n".format(COMMAND),
    "// NumPy {}, SciPy {}.\n".format(np.__version__, scipy.__version__),
    "#ifndef AP_TESTS_STEPS_REFERENCE_HPP\n#define AP_TESTS_STEPS_REFERENCE_HPP\n\n#include <cstddef>\n"
    "#include <cstdint>\n#include <limits>\n\nnamespace steps_ref\n{\n"
    "inline constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();\n\n",
    "// ---- seeds (docs/method.md §2.15): per case seed, layer, q_head, then query_subsample,\n"
    "// key_subsample, noise_components, pair_sampler; cell seeds: pair_sampler_seed, j, c, seed.\n",
    scalar("seed_case_count", len(seed_rows), "std::size_t"),
    array("seed_cases", [v for row in seed_rows for v in row], "std::uint64_t", 7),
    scalar("cell_seed_case_count", len(cell_seed_rows), "std::size_t"),
    array("cell_seed_sampler", [r[0] for r in cell_seed_rows], "std::uint64_t", 4),
    array("cell_seed_q", [r[1] for r in cell_seed_rows], "std::int64_t", 4),
    array("cell_seed_k", [r[2] for r in cell_seed_rows], "std::int64_t", 4),
    array("cell_seed_value", [r[3] for r in cell_seed_rows], "std::uint64_t", 4),
    "\n// ---- subsampling (§2.2): cases (n, max_rows, seed) and the rows kept.\n",
    scalar("subsample_case_count", len(subsample_cases), "std::size_t"),
    array("subsample_n", [c[0] for c in subsample_cases], "std::size_t", 10),
    array("subsample_max", [c[1] for c in subsample_cases], "std::size_t", 10),
    array("subsample_seed", [c[2] for c in subsample_cases], "std::uint64_t", 4),
    cpp.flat_with_offsets("subsample_rows", subsample_rows),
    "\n// ---- orientation (§2.1): keys (n x d, float32-exact), bucket ids, signs.\n",
    scalar("or_n", ON, "std::size_t"), scalar("or_d", OD, "std::size_t"),
    array("or_keys", or_keys.ravel()), array("or_bucket", or_bucket, "std::int64_t", 10),
    array("or_signs", or_signs),
    "\n// ---- component-0 fit (§2.6): t, X_rot (n x d, float32-exact); alpha, beta, sigma2 and the\n"
    "// residual in exact rational arithmetic, correctly rounded.\n",
    scalar("c0_n", CN, "std::size_t"), scalar("c0_d", CD, "std::size_t"),
    array("c0_t", c0_t), array("c0_x", c0_x.ravel()),
    scalar("c0_alpha", c0_alpha), scalar("c0_beta", c0_beta), scalar("c0_sigma2", c0_sigma2),
    array("c0_residual", c0_residual),
    "\n// ---- query models (§2.10): positions, bucket ids, X_rot (n x d, float32-exact), the\n"
    "// component-0 fit (alpha, beta, sigma2); per model: bucket, n_j, tau_j, alpha + beta tau_j,\n"
    "// mu_j and Sigma_j + 1e-12 I of components 1..d-1 (exact rational, correctly rounded).\n",
    scalar("qm_n", QN, "std::size_t"), scalar("qm_d", QD, "std::size_t"),
    array("qm_pos", qm_pos), array("qm_bucket", qm_bucket, "std::int64_t", 10), array("qm_x", qm_x.ravel()),
    scalar("qm_alpha", qm_alpha), scalar("qm_beta", qm_beta), scalar("qm_sigma2", qm_sigma2),
    scalar("qm_model_count", len(qm_models), "std::size_t"),
    array("qm_model_bucket", [m[0] for m in qm_models], "std::int64_t", 10),
    array("qm_model_n", [m[1] for m in qm_models], "std::size_t", 10),
    array("qm_model_tau", [m[2] for m in qm_models]),
    array("qm_model_position_mean", [m[3] for m in qm_models]),
    array("qm_model_mu", [v for m in qm_models for v in m[4]]),
    array("qm_model_sigma", [v for m in qm_models for v in m[5]]),
    "\n// ---- key buckets and cells (§2.11-2.13): the key table (positions, buckets, example ids,\n"
    "// rotated keys n x d float32-exact); per key bucket: id, max position, examples (id, rows in\n"
    "// order). Eligibility cases (j, tau_j, window) -> indices of key buckets.\n",
    scalar("ck_n", KN, "std::size_t"), scalar("ck_d", KD, "std::size_t"),
    array("ck_pos", ck_pos, "std::int64_t", 10), array("ck_bucket", ck_bucket, "std::int64_t", 10),
    array("ck_example", ck_example, "std::int64_t", 10), array("ck_keys", ck_keys.ravel()),
    scalar("kb_count", len(key_buckets), "std::size_t"),
    array("kb_bucket", [kb[0] for kb in key_buckets], "std::int64_t", 10),
    array("kb_max_position", [kb[1] for kb in key_buckets], "std::int64_t", 10),
    cpp.flat_with_offsets("kb_example_id", [[e for e, _ in kb[2]] for kb in key_buckets], "std::int64_t"),
    cpp.flat_with_offsets("kb_example_rows", [rows for kb in key_buckets for _, rows in kb[2]]),
    scalar("eligibility_case_count", len(eligibility_cases), "std::size_t"),
    array("eligibility_j", [c[0] for c in eligibility_cases], "std::int64_t", 10),
    array("eligibility_tau", [c[1] for c in eligibility_cases]),
    array("eligibility_window", [c[2] for c in eligibility_cases], "std::int64_t", 10),
    cpp.flat_with_offsets("eligibility_index", eligibility_rows),
    "// The pairs of every cell (j = cell_j, c) for num_pairs, max_rel_dist, the head's pair sampler\n"
    "// seed (that of seed 11, layer 2, q_head 3); the query model of bucket j (float32-exact) and\n"
    "// the mean PP per cell (NaN without pairs) and over all pairs (AP_j), from scipy.special.ndtr.\n",
    scalar("cell_j", CELL_J, "std::int64_t"), scalar("cell_num_pairs", CELL_PAIRS, "std::size_t"),
    scalar("cell_max_rel_dist", CELL_MAX_REL), scalar("cell_sampler_seed", cell_sampler_seed, "std::uint64_t"),
    scalar("cell_count", len(cells), "std::size_t"),
    array("cell_k_bucket", [c for c, _, _ in cells], "std::int64_t", 10),
    cpp.flat_with_offsets("cell_first", [first for _, first, _ in cells]),
    array("cell_second", [v for _, _, second in cells for v in second], "std::size_t", 10),
    scalar("cell_position_mean", cell_position_mean), scalar("cell_position_variance", cell_position_variance),
    array("cell_mu", cell_mu), array("cell_sigma", cell_sigma.ravel()),
    array("cell_pp_mean", cell_pp_mean), scalar("cell_ap", cell_ap),
    "}  // namespace steps_ref\n\n#endif\n",
]
with open(OUT, "w") as f:
    f.write("".join(parts))
print("wrote {} ({} bytes)".format(OUT, os.path.getsize(OUT)), file=sys.stderr)
