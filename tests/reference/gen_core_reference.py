#!/usr/bin/python3
"""Regenerates tests/reference/core_reference.hpp, the reference values of the unit tests of
the header-only core (plasticity kernel, sampler, regression, rotation, query model).

Run from anywhere with the system interpreter that has NumPy, SciPy and mpmath:

    /usr/bin/python3 tests/reference/gen_core_reference.py

The values are computed independently of the C++ code: straightforward NumPy/SciPy
evaluations of docs/method.md (§2.3-2.5, §2.10, §4, §5), cross-checked here against mpmath at
50 digits; OLS, means and covariances in exact rational arithmetic (fractions), cross-checked
against numpy.polyfit / numpy.cov. The script aborts if any cross-check disagrees beyond the
stated bound. The random inputs are rounded to float32 so that the same inputs, and therefore
the same references, serve the float and the double instantiations of the tests. The last bit of a few kernel values
(NumPy matrix products) depends on the OpenBLAS kernels of the machine; the tests compare them
far above that.
"""

import fractions
import os
import sys

import mpmath
import numpy as np
import scipy
import scipy.special
import scipy.stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpp_literals as cpp  # noqa: E402

mpmath.mp.dps = 50

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "core_reference.hpp")
COMMAND = "/usr/bin/python3 tests/reference/gen_core_reference.py"

rng = np.random.default_rng(20240917)


def f32(a):
    """Round to float32 and back: exactly representable in both value types."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def rel(a, b):
    a = float(a)
    b = float(b)
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


# ----------------------------------------------------------------------------- kernel
def pp_scipy(m, v):
    """docs/method.md §4 for one pair, evaluated straightforwardly with SciPy."""
    if v > 0:
        z = m / np.sqrt(v)
        tail = scipy.special.ndtr(-abs(z))
        return 4.0 * tail * (1.0 - tail), z
    if m > 0 or m < 0:
        return 0.0, np.copysign(np.inf, m)
    return 1.0, 0.0


def pp_mpmath(w, mu, sigma):
    w = [mpmath.mpf(float(x)) for x in w]
    mu = [mpmath.mpf(float(x)) for x in mu]
    d = len(w)
    m = mpmath.fsum(w[i] * mu[i] for i in range(d))
    v = mpmath.fsum(w[i] * mpmath.mpf(float(sigma[i, j])) * w[j] for i in range(d) for j in range(d))
    if v > 0:
        z = m / mpmath.sqrt(v)
        p = mpmath.ncdf(z)
        return 4 * p * (1 - p)
    return mpmath.mpf(1) if m == 0 else mpmath.mpf(0)


KN, KD = 50, 6
kernel_w = f32(rng.standard_normal((KN, KD)))
kernel_w[0, :] = 0.0                      # w = 0: m = 0, v = 0 -> PP 1
kernel_w[7, :] = -kernel_w[3, :]          # the reversed pair of row 3: same PP
a = rng.standard_normal((KD, KD))
kernel_sigma = f32(a @ a.T / KD + 0.3 * np.eye(KD))          # symmetric stays symmetric
kernel_mu = f32(3.5 * rng.standard_normal(KD))
kernel_sigma_block = kernel_sigma.copy()                     # blockdiag(sigma00, rest)
kernel_sigma_block[0, 1:] = 0.0
kernel_sigma_block[1:, 0] = 0.0
assert np.all(np.linalg.eigvalsh(kernel_sigma) > 0) and np.all(np.linalg.eigvalsh(kernel_sigma_block) > 0)


def kernel_reference(sigma):
    m = kernel_w @ kernel_mu
    v = np.einsum("ij,jk,ik->i", kernel_w, sigma, kernel_w)
    pp = np.empty(KN)
    z = np.empty(KN)
    worst = 0.0
    for i in range(KN):
        pp[i], z[i] = pp_scipy(m[i], v[i])
        worst = max(worst, rel(pp[i], pp_mpmath(kernel_w[i], kernel_mu, sigma)))
    assert worst < 1e-13, worst
    return m, v, pp, z, worst


kernel_m, kernel_v, kernel_pp, kernel_z, kernel_worst = kernel_reference(kernel_sigma)
kernel_m_block, kernel_v_block, kernel_pp_block, kernel_z_block, kernel_worst_block = kernel_reference(
    kernel_sigma_block)

# ------------------------------------------------------------------------------ tails
tail_z = sorted(set(
    [0.0, 1e-300, -1e-300, 1e-8, -1e-8, 0.1, -0.1, 0.5, -0.5, 1.0, -1.0, 8.3, -8.3, 26.5, -26.5,
     36.99, -36.99, 37.0, -37.0, 5e-5, -5e-5]
    + [float(x) for x in np.arange(-37.0, 37.0001, 0.37)]))
tail_cdf = [float(scipy.special.ndtr(z)) for z in tail_z]
tail_sf = [float(scipy.special.ndtr(-z)) for z in tail_z]
tail_pp = [float(4.0 * scipy.special.ndtr(-abs(z)) * scipy.special.ndtr(abs(z))) for z in tail_z]
# The same three at 50 digits (mpmath), correctly rounded to double: SciPy's ndtr rounds
# z / sqrt(2) first, which costs up to ~z^2 * 1.1e-16 relative in the far tails.
tail_cdf_mp, tail_sf_mp, tail_pp_mp = [], [], []
tail_worst = 0.0
for z, c, s, p in zip(tail_z, tail_cdf, tail_sf, tail_pp):
    zc = mpmath.ncdf(mpmath.mpf(z))
    zs = mpmath.ncdf(-mpmath.mpf(z))
    tail_cdf_mp.append(float(zc))
    tail_sf_mp.append(float(zs))
    tail_pp_mp.append(float(4 * zc * zs))
    tail_worst = max(tail_worst, rel(c, zc), rel(s, zs), rel(p, 4 * zc * zs))
assert tail_worst < 5e-13, tail_worst

# ----------------------------------------------------------------------- regression
RN, RD = 50, 6
reg_t = rng.choice(3000, RN, replace=False).astype(np.float64)      # token positions, unsorted
true_alpha = np.array([0.5, -1.0, 2.0, 0.0, 3.0, -0.25])
true_beta = np.array([0.01, -0.002, 0.0, 0.0005, 0.03, -0.0001])
noise = np.array([1.0, 5.0, 2.0, 0.5, 0.001, 3.0])
reg_x = f32(true_alpha + np.outer(reg_t, true_beta) + rng.standard_normal((RN, RD)) * noise)
F = fractions.Fraction


def exact_ols(t, x):
    """Closed-form OLS of x on t in exact rational arithmetic (inputs are doubles, so exact)."""
    n = len(t)
    tf = [F(float(v)) for v in t]
    xf = [F(float(v)) for v in x]
    tm = sum(tf) / n
    xm = sum(xf) / n
    stt = sum((a - tm) ** 2 for a in tf)
    stx = sum((a - tm) * (b - xm) for a, b in zip(tf, xf))
    beta = stx / stt
    alpha = xm - beta * tm
    ss_res = sum((b - alpha - beta * a) ** 2 for a, b in zip(tf, xf))
    ss_tot = sum((b - xm) ** 2 for b in xf)
    # docs/method.md §2.3: R2 = 1 - SSres/SStot capped to [0, 1]; 0 for a constant column.
    r2 = F(0) if ss_tot == 0 else min(F(1), max(F(0), 1 - ss_res / ss_tot))
    return alpha, beta, r2


reg_alpha = np.empty(RD)
reg_beta = np.empty(RD)
reg_r2 = np.empty(RD)
reg_r2_exact = []
reg_beta_exact = []
for j in range(RD):
    alpha, beta, r2 = exact_ols(reg_t, reg_x[:, j])
    reg_alpha[j], reg_beta[j], reg_r2[j] = float(alpha), float(beta), float(r2)
    reg_r2_exact.append(r2)
    reg_beta_exact.append(beta)
    # numpy.polyfit agrees (it is the brief's reference; the exact values are stored)
    b, a0 = np.polyfit(reg_t, reg_x[:, j], 1)
    assert rel(b, reg_beta[j]) < 1e-11 and abs(a0 - reg_alpha[j]) < 1e-11 * max(1.0, abs(reg_alpha[j])), (j, b, a0)
reg_r2_mean = float(sum(reg_r2_exact) / RD)
reg_beta_norm = float(mpmath.sqrt(sum(mpmath.mpf(b.numerator) / b.denominator * mpmath.mpf(b.numerator) / b.denominator
                                      for b in reg_beta_exact)))
assert rel(reg_beta_norm, np.linalg.norm(reg_beta)) < 1e-14


# A column whose R2 is about 1e-12: OLS with intercept, where 1 - SSres/SStot in double loses
# about 1e-4 of it to cancellation. Element k (largest |t - mean t|) is adjusted until S_tx
# is close to the target; the exact R2 of the stored values is what the tests compare with.
tiny_rng = np.random.default_rng(20261126)  # own stream: the other fixtures stay as they were


def tiny_r2_column(t, target_r2, to_float32):
    n = len(t)
    x = tiny_rng.standard_normal(n)
    x = f32(x) if to_float32 else x
    tf = [F(float(v)) for v in t]
    tm = sum(tf) / n
    stt = sum((a - tm) ** 2 for a in tf)
    k = int(np.argmax(np.abs(t - float(tm))))
    for _ in range(4):
        xf = [F(float(v)) for v in x]
        xm = sum(xf) / n
        stx = sum((a - tm) * (b - xm) for a, b in zip(tf, xf))
        sxx = sum((b - xm) ** 2 for b in xf)
        want = np.sqrt(target_r2 * float(stt) * float(sxx))
        x[k] = x[k] - (float(stx) - want) / float(tf[k] - tm)
        x = f32(x) if to_float32 else x
    _, _, r2 = exact_ols(t, x)
    assert 0.5e-12 < float(r2) < 2e-12, float(r2)
    return x, r2


tiny_x64, tiny_r2_64 = tiny_r2_column(reg_t, 1e-12, False)
tiny_x32, tiny_r2_32 = tiny_r2_column(reg_t, 1e-12, True)
# The old formula in double, for the record: its relative error at this R2.
_tc = reg_t - reg_t.mean()
_xc = tiny_x64 - tiny_x64.mean()
_b = np.dot(_tc, _xc) / np.dot(_tc, _tc)
tiny_old_rel = rel(1.0 - np.sum((_xc - _b * _tc) ** 2) / np.sum(_xc ** 2), tiny_r2_64)


def scalar_reference_numpy(t, x, beta):
    """docs/method.md §2.4 in NumPy (cross-check)."""
    y = np.log2(t + 1.0)
    base = float(np.mean(np.abs(y - y.mean())))
    s = x @ beta / np.linalg.norm(beta)
    b, a0 = np.polyfit(s, y, 1)
    yhat = a0 + b * s
    r2 = 0.0 if np.ptp(y) == 0 else min(1.0, max(0.0, 1.0 - np.sum((y - yhat) ** 2) / np.sum((y - y.mean()) ** 2)))
    proj = float(np.mean(np.abs(y - yhat)))
    return r2, base, proj, proj / base if base > 0 else 1.0


def scalar_reference(t, x, beta):
    """docs/method.md §2.4 at 50 digits: y = log2(t + 1), s = X beta / ||beta||, OLS y ~ a + b s."""
    mp = mpmath.mpf
    n = len(t)
    y = [mpmath.log(mp(float(v)) + 1, 2) for v in t]
    bet = [mp(float(v)) for v in beta]
    nb = mpmath.sqrt(mpmath.fsum(v * v for v in bet))
    s = [mpmath.fsum(mp(float(x[i, j])) * bet[j] for j in range(len(bet))) / nb for i in range(n)]
    ym = mpmath.fsum(y) / n
    sm = mpmath.fsum(s) / n
    b = mpmath.fsum((a - sm) * (c - ym) for a, c in zip(s, y)) / mpmath.fsum((a - sm) ** 2 for a in s)
    a0 = ym - b * sm
    res = [c - a0 - b * a for a, c in zip(s, y)]
    ss_res = mpmath.fsum(r * r for r in res)
    ss_tot = mpmath.fsum((c - ym) ** 2 for c in y)
    r2 = mp(0) if ss_tot == 0 else min(mp(1), max(mp(0), 1 - ss_res / ss_tot))
    base = mpmath.fsum(abs(c - ym) for c in y) / n
    proj = mpmath.fsum(abs(r) for r in res) / n
    out = (float(r2), float(base), float(proj), float(proj / base))
    check = scalar_reference_numpy(t, x, beta)
    assert all(rel(a, b) < 1e-10 for a, b in zip(check, out)), (check, out)
    return out


sp_beta_random = f32(rng.standard_normal(RD))
sp_fitted = scalar_reference(reg_t, reg_x, reg_beta)
sp_random = scalar_reference(reg_t, reg_x, sp_beta_random)

# ------------------------------------------------------------------------- rotation
rot_beta = f32(rng.standard_normal(RD))
bh = rot_beta / np.linalg.norm(rot_beta)
u = bh - np.eye(RD)[0]
vv = u / np.linalg.norm(u)
rot_h = np.eye(RD) - 2.0 * np.outer(vv, vv)
assert np.allclose(rot_h @ bh, np.eye(RD)[0], atol=1e-14)

# ---------------------------------------------------------------------- query model
QN, QD = 50, 6
lq = rng.standard_normal((QD, QD))
qm_x = f32(rng.standard_normal((QN, QD)) @ lq + rng.standard_normal(QD) * 3.0)


def exact_gaussian(rows):
    """Mean and ddof=1 covariance + 1e-12 I in exact rational arithmetic (rows: float arrays)."""
    n = len(rows)
    m = len(rows[0])
    xf = [[F(float(v)) for v in r] for r in rows]
    mean = [sum(r[j] for r in xf) / n for j in range(m)]
    cov = [[sum((r[i] - mean[i]) * (r[j] - mean[j]) for r in xf) / (n - 1) + (F(1e-12) if i == j else 0)
            for j in range(m)] for i in range(m)]
    mean_f = np.array([float(v) for v in mean])
    cov_f = np.array([[float(v) for v in r] for r in cov])
    # numpy.cov(ddof=1) + 1e-12 I agrees (the brief's reference; the exact values are stored)
    np_cov = np.atleast_2d(np.cov(np.asarray(rows), rowvar=False, ddof=1)) + 1e-12 * np.eye(m)
    scale = np.sqrt(np.outer(np.diag(cov_f), np.diag(cov_f)))
    assert np.all(np.abs(np_cov - cov_f) <= 1e-13 * scale), np.max(np.abs(np_cov - cov_f) / scale)
    assert np.allclose(np.asarray(rows).mean(axis=0), mean_f, rtol=1e-14, atol=1e-14)
    return mean_f, cov_f


qm_mean, qm_cov = exact_gaussian(qm_x)
qm_pos = rng.integers(0, 1000, QN).astype(np.float64)
# unsorted bucket ids: 0 and -1 are skipped (j > 0), bucket 9 has a single row (skipped),
# bucket 4 has exactly two rows (the smallest kept bucket)
ids = np.array([9] + [4] * 2 + [0] * 6 + [-1] * 3 + [1] * 10 + [2] * 12 + [3] * 9 + [7] * 7)
assert ids.size == QN
qm_bucket = rng.permutation(ids)
qm_b_ids, qm_b_count, qm_b_tau, qm_b_mu, qm_b_sigma = [], [], [], [], []
for b in sorted(set(qm_bucket.tolist())):
    rows = np.nonzero(qm_bucket == b)[0]
    if b < 1 or rows.size < 2:
        continue
    qm_b_ids.append(b)
    qm_b_count.append(rows.size)
    qm_b_tau.append(float(sum(F(float(v)) for v in qm_pos[rows]) / rows.size))
    mean_b, cov_b = exact_gaussian(qm_x[rows, 1:])
    qm_b_mu.extend(mean_b.tolist())
    qm_b_sigma.extend(cov_b.ravel().tolist())

# --------------------------------------------------------------------- chi-square table
CHI2_MAX_DF = 1000
chi2_999 = scipy.stats.chi2.ppf(0.999, np.arange(1, CHI2_MAX_DF + 1))


# --------------------------------------------------------------------------- output
array = cpp.array
scalar = cpp.scalar


parts = [
    "// Generated by `{}` (run from the repository root); do not edit.\n".format(COMMAND),
    "// NumPy {}, SciPy {}, mpmath {}. Worst SciPy-vs-mpmath relative disagreement: kernel {:.2e},\n"
    "// tails {:.2e}.\n".format(np.__version__, scipy.__version__, mpmath.__version__,
                                max(kernel_worst, kernel_worst_block), tail_worst),
    "#ifndef AP_TESTS_CORE_REFERENCE_HPP\n#define AP_TESTS_CORE_REFERENCE_HPP\n\n#include <cstddef>\n"
    "#include <cstdint>\n\nnamespace core_ref\n{\n",
    "// ---- kernel (docs/method.md §4): W (N x d), mu, Sigma (SPD) and Sigma_block = blockdiag(Sigma00, Sigma[1:,1:]);\n"
    "// float32-exact inputs; m = W mu, v = diag(W Sigma W^T), z = m / sqrt v, PP = 4 p (1 - p) per pair.\n",
    scalar("kernel_n", KN, "std::size_t"), scalar("kernel_d", KD, "std::size_t"),
    array("kernel_w", kernel_w), array("kernel_mu", kernel_mu), array("kernel_sigma", kernel_sigma),
    array("kernel_sigma_block", kernel_sigma_block),
    array("kernel_m", kernel_m), array("kernel_v", kernel_v), array("kernel_z", kernel_z), array("kernel_pp", kernel_pp),
    array("kernel_m_block", kernel_m_block), array("kernel_v_block", kernel_v_block),
    array("kernel_z_block", kernel_z_block), array("kernel_pp_block", kernel_pp_block),
    "\n// ---- normal tails: Phi(z), 1 - Phi(z) and 4 Phi(-|z|) Phi(|z|) from scipy.special.ndtr.\n",
    scalar("tail_count", len(tail_z), "std::size_t"),
    array("tail_z", tail_z), array("tail_cdf", tail_cdf), array("tail_sf", tail_sf), array("tail_pp", tail_pp),
    "// The same at 50 digits (mpmath.ncdf), correctly rounded.\n",
    array("tail_cdf_mp", tail_cdf_mp), array("tail_sf_mp", tail_sf_mp), array("tail_pp_mp", tail_pp_mp),
    "\n// ---- regression (docs/method.md §2.3): t (positions, unsorted), X float32-exact; OLS per column in exact\n"
    "// rational arithmetic (agrees with numpy.polyfit to 1e-11), correctly rounded.\n",
    scalar("reg_n", RN, "std::size_t"), scalar("reg_d", RD, "std::size_t"),
    array("reg_t", reg_t), array("reg_x", reg_x), array("reg_alpha", reg_alpha), array("reg_beta", reg_beta),
    array("reg_r2", reg_r2), scalar("reg_r2_mean", reg_r2_mean), scalar("reg_beta_norm", reg_beta_norm),
    "// Columns with R2 ~ 1e-12 over reg_t (double values; float32-exact values), and their exact R2;\n"
    "// 1 - SSres/SStot evaluated in double misses the double one by {:.1e} relative.\n".format(tiny_old_rel),
    array("tiny_x64", tiny_x64), scalar("tiny_r2_64", tiny_r2_64),
    array("tiny_x32", tiny_x32), scalar("tiny_r2_32", tiny_r2_32),
    "// scalar predictability (docs/method.md §2.4): {r2, mae_baseline, mae_projection, mae_ratio} for beta = reg_beta\n"
    "// (fitted) and beta = sp_beta_random, at 50 digits with mpmath (agrees with NumPy to 1e-10).\n",
    array("sp_beta_random", sp_beta_random), array("sp_fitted", sp_fitted), array("sp_random", sp_random),
    "\n// ---- rotation (docs/method.md §2.5): beta and H = I - 2 v v^T, v = (beta_hat - e1) / ||beta_hat - e1||.\n",
    array("rot_beta", rot_beta), array("rot_h", rot_h),
    "\n// ---- query model (docs/method.md §2.10): X float32-exact; mean and ddof=1 covariance + 1e-12 I in exact rational\n"
    "// arithmetic (agrees with numpy.cov to 1e-13 of sqrt(C_ii C_jj)); per bucket j > 0\n"
    "// with >= 2 rows, increasing id: count, tau = mean position, mu/Sigma of components 1..d-1.\n",
    scalar("qm_n", QN, "std::size_t"), scalar("qm_d", QD, "std::size_t"),
    array("qm_x", qm_x), array("qm_mean", qm_mean), array("qm_cov", qm_cov), array("qm_pos", qm_pos),
    array("qm_bucket", qm_bucket, "std::int64_t", 10),
    scalar("qm_num_buckets", len(qm_b_ids), "std::size_t"),
    array("qm_b_ids", qm_b_ids, "std::int64_t", 10), array("qm_b_count", qm_b_count, "std::size_t", 10),
    array("qm_b_tau", qm_b_tau), array("qm_b_mu", qm_b_mu), array("qm_b_sigma", qm_b_sigma),
    "\n// ---- scipy.stats.chi2.ppf(0.999, df) for df = 1 .. chi2_max_df (chi2_999[df - 1]).\n",
    scalar("chi2_max_df", CHI2_MAX_DF, "std::size_t"), array("chi2_999", chi2_999),
    "}  // namespace core_ref\n\n#endif\n",
]

with open(OUT, "w") as f:
    f.write("".join(parts))
print("wrote {} ({} bytes); |z| max {:.2f}".format(OUT, os.path.getsize(OUT), float(np.max(np.abs(kernel_z)))),
      file=sys.stderr)
