#!/usr/bin/python3
"""Regenerates tests/reference/normality_reference.hpp, the reference values of
tests/test_normality.cpp (include/attention_plasticity/normality.hpp).

Run from anywhere with the system interpreter that has NumPy, SciPy and mpmath:

    /usr/bin/python3 tests/reference/gen_normality.py

Every value comes from SciPy 1.10 (scipy.stats.skew / kurtosis with bias=False,
scipy.stats.kstest(x, 'norm'), scipy.stats.kstwo.sf / cdf, scipy.special.smirnov,
scipy.stats.norm.cdf / logcdf / sf), never from the C++ code. Skewness, kurtosis and the normal
tails are cross-checked against mpmath at 50 digits; the script aborts on disagreement. Random
inputs use a fixed NumPy seed and are rounded to float32, so the same inputs and references
serve the float and the double instantiations of the tests.

The noise-subspace references follow docs/method.md §2.8 written directly in NumPy/SciPy; one case
subsamples the KS columns and re-implements the library's documented selection
(xoshiro256** seeded by SplitMix64, Lemire's bounded integers, partial Fisher-Yates) here in
pure Python.
"""

import os
import sys
import time

import mpmath
import numpy as np
import scipy
import scipy.special
import scipy.stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ap_random  # noqa: E402

mpmath.mp.dps = 50

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "normality_reference.hpp")
COMMAND = "/usr/bin/python3 tests/reference/gen_normality.py"

rng = np.random.default_rng(20240521)


def f32(a):
    """Round to float32 and back: exactly representable in both value types."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def lit(x):
    """C++ literal of a double that round-trips (repr is the shortest round-trip form)."""
    x = float(x)
    if np.isnan(x):
        return "std::numeric_limits<double>::quiet_NaN()"
    if np.isinf(x):
        return ("-" if x < 0 else "") + "std::numeric_limits<double>::infinity()"
    r = repr(x)
    if "e" not in r and "." not in r:
        r += ".0"
    return r


def arr(name, values, per_line=4):
    values = list(values)
    lines = []
    for i in range(0, len(values), per_line):
        lines.append("    " + ", ".join(lit(v) for v in values[i:i + per_line]) + ",")
    if not values:
        lines.append("    0.0,  // placeholder: empty")
    return f"inline constexpr double {name}[] = {{\n" + "\n".join(lines) + "\n};"


# ------------------------------------------------------------------ skewness / kurtosis
def mp_skew_kurt(x):
    """Bias-corrected skewness and excess kurtosis at 50 digits (SciPy's formulas)."""
    xs = [mpmath.mpf(float(v)) for v in x]
    n = len(xs)
    mean = mpmath.fsum(xs) / n
    m2 = mpmath.fsum((v - mean) ** 2 for v in xs) / n
    m3 = mpmath.fsum((v - mean) ** 3 for v in xs) / n
    m4 = mpmath.fsum((v - mean) ** 4 for v in xs) / n
    g1 = m3 / m2 ** mpmath.mpf(1.5)
    skew = mpmath.sqrt((n - 1) * n) / (n - 2) * g1 if n > 2 else g1
    if n > 3:
        kurt = 1 / mpmath.mpf((n - 2) * (n - 3)) * ((n * n - 1) * m4 / m2 ** 2 - 3 * (n - 1) ** 2)
    else:
        kurt = m4 / m2 ** 2 - 3
    return float(skew), float(kurt), float(mean), float(mpmath.sqrt(m2 * n / (n - 1)))


moment_cases = []  # (name, data, skew, kurt, mean, std)


def add_moment_case(name, data):
    data = f32(data)
    s = scipy.stats.skew(data, bias=False)
    k = scipy.stats.kurtosis(data, fisher=True, bias=False)
    ms, mk, mean, sd = mp_skew_kurt(data)
    for a, b in ((s, ms), (k, mk)):
        if abs(a - b) > 1e-12 * max(1.0, abs(b)):
            sys.exit(f"{name}: SciPy {a!r} vs mpmath {b!r}")
    z = (data - data.mean()) / data.std(ddof=1)
    std_p = float(scipy.stats.kstest(z, "norm").pvalue)
    moment_cases.append((name, data, s, k, mean, sd, std_p))


add_moment_case("n3", [0.5, -1.25, 2.0])
add_moment_case("n4", [1.0, 2.0, 4.0, 8.0])
add_moment_case("n5", [2.0, 8.0, 0.0, 4.0, 1.0])
add_moment_case("n10_exponential", rng.exponential(1.0, 10))
add_moment_case("n100_normal", rng.standard_normal(100))
add_moment_case("n100_t3_offset", 1000.0 + rng.standard_t(3, 100))
add_moment_case("n1000_lognormal", rng.lognormal(0.0, 0.7, 1000))
add_moment_case("n1000_uniform", rng.uniform(-2.0, 3.0, 1000))

# Large samples with near-zero skewness and excess kurtosis: their relative accuracy needs
# accurate sums. The data are Box-Muller normals of ap_random.py (tests/test_util.hpp's
# box_muller draws the same doubles in C++) plus a shift, too many to write out; the reference
# is mpmath at 30 digits, SciPy is checked against it.
mpmath.mp.dps = 30


def mp_large_moments(x):
    xs = [mpmath.mpf(v) for v in x]
    n = len(xs)
    mean = mpmath.fsum(xs) / n
    d = [v - mean for v in xs]
    d2 = [v * v for v in d]
    m2 = mpmath.fsum(d2) / n
    m3 = mpmath.fsum(a * b for a, b in zip(d2, d)) / n
    m4 = mpmath.fsum(a * a for a in d2) / n
    skew = mpmath.sqrt((n - 1) * n) / (n - 2) * m3 / m2 ** mpmath.mpf(1.5)
    kurt = 1 / mpmath.mpf((n - 2) * (n - 3)) * ((n * n - 1) * m4 / m2 ** 2 - 3 * (n - 1) ** 2)
    return float(skew), float(kurt)


large_moment_cases = []  # (name, seed, n, shift, skew, kurt, scipy skew, scipy kurt)
for name, seed, n, shift in (("n1e6_normal", 31, 10 ** 6, 0.0), ("n1e6_normal_shift1000", 32, 10 ** 6, 1000.0)):
    x = np.array(ap_random.box_muller(seed, n)) + shift
    ms, mk = mp_large_moments(x)
    s = float(scipy.stats.skew(x, bias=False))
    k = float(scipy.stats.kurtosis(x, fisher=True, bias=False))
    for a, b in ((s, ms), (k, mk)):
        if abs(a - b) > 1e-9 * abs(b):
            sys.exit(f"{name}: SciPy {a!r} vs mpmath {b!r}")
    large_moment_cases.append((name, seed, n, shift, ms, mk, s, k))
mpmath.mp.dps = 50

# ------------------------------------------------------------------ KS test on data
ks_data_cases = []  # (name, data, D, p)


def add_ks_case(name, data):
    data = f32(data)
    res = scipy.stats.kstest(data, "norm")
    ks_data_cases.append((name, data, float(res.statistic), float(res.pvalue)))


add_ks_case("n1", [0.3])
add_ks_case("n2", [-0.4, 1.1])
add_ks_case("n3", [0.1, -2.0, 0.7])
add_ks_case("n5_shifted", rng.standard_normal(5) + 1.5)
add_ks_case("n10_normal", rng.standard_normal(10))
add_ks_case("n50_uniform", rng.uniform(-1.0, 1.0, 50))
add_ks_case("n100_normal", rng.standard_normal(100))
add_ks_case("n150_scaled", 1.3 * rng.standard_normal(150))
add_ks_case("n1000_normal", rng.standard_normal(1000))
add_ks_case("n2000_shifted", rng.standard_normal(2000) + 0.08)
add_ks_case("n3000_t5", rng.standard_t(5, 3000))

# ------------------------------------------------------------------ kstwo.sf / cdf grid
KS_NS = [1, 2, 3, 5, 10, 50, 100, 139, 140, 141, 1000, 1001, 10**4, 10**5, 10**6]


def d_grid(n):
    ds = {0.0, -0.1, 1e-300, 1e-12, 0.5 / n, 0.5 / n * (1 + 1e-12), 0.75 / n, 1.0 / n,
          1.0 / n * (1 + 1e-12), 1.5 / n, 0.49, 0.5, 0.5 * (1 - 1e-12), 0.75, 1.0, 1.2}
    if n >= 2:
        ds |= {(n - 1) / n, (n - 1) / n * (1 - 1e-12), (n - 1) / n * (1 + 1e-12)}
    for c in (0.754693, 4.0, 2.2, 18.0, 370.0):  # n d^2 boundaries
        for f in (1 - 1e-9, 1.0, 1 + 1e-9):
            ds.add(float(np.sqrt(c * f / n)))
    for f in (1 - 1e-9, 1 + 1e-9):  # n d^1.5 = 1.4
        ds.add(float((1.4 / n) ** (2 / 3) * f))
    for z in (0.05, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0, 1.2, 1.36, 1.63, 2.0, 2.5, 3.0, 4.0):
        ds.add(z / np.sqrt(n))
    heavy = n >= 10**5  # SciPy's exact smirnov is O(n): keep few points in that band
    if not heavy:
        for u in rng.uniform(0.0, 1.0, 6) ** 2:
            ds.add(float(u))
    return sorted(d for d in ds if d <= 1.2)


kstwo_rows = []  # (n, d, sf, cdf)
t0 = time.time()
for n in KS_NS:
    for d in d_grid(n):
        nd2 = n * d * d
        if n >= 10**5 and 2.2 <= nd2 < 370 and d < 0.5:
            # 2*smirnov band: ~0.15 s (1e5) / 1.3 s (1e6) per SciPy call; keep a few points.
            if not any(abs(nd2 - c) < 1e-6 * c for c in (2.2, 18.0, 370.0)) and \
                    abs(np.sqrt(nd2) - 2.0) > 1e-9 and abs(np.sqrt(nd2) - 3.0) > 1e-9:
                continue
        sf = float(scipy.stats.kstwo.sf(d, n))
        cdf = float(scipy.stats.kstwo.cdf(d, n))
        kstwo_rows.append((n, d, sf, cdf))
# A dense band of the 2*smirnov branch for n just above the exact-summation limit.
for n in (1001, 2000, 5000):
    for a2 in np.concatenate([np.linspace(2.2, 6.0, 25), np.geomspace(6.0, 369.0, 10)]):
        d = float(np.sqrt(a2 / n))
        kstwo_rows.append((n, d, float(scipy.stats.kstwo.sf(d, n)), float(scipy.stats.kstwo.cdf(d, n))))
# Random (n, d) pairs over the whole small-n range (DMTW, Pomeranz, smirnov branches).
for _ in range(400):
    n = int(rng.integers(2, 200))
    d = float(rng.uniform(0.3, 3.0) / np.sqrt(n))
    if d > 1.0:
        continue
    kstwo_rows.append((n, d, float(scipy.stats.kstwo.sf(d, n)), float(scipy.stats.kstwo.cdf(d, n))))
print(f"kstwo grid: {len(kstwo_rows)} rows in {time.time() - t0:.1f} s", file=sys.stderr)

# scipy.special.smirnov (one-sided), including n where the C++ fast path is not used.
smirnov_rows = []
for n in (1, 2, 3, 7, 10, 11, 100, 1000, 1013, 5000):
    for d in (0.0, 0.5 / n, 1.0 / n, 0.3 / np.sqrt(n), 1.0 / np.sqrt(n), 2.0 / np.sqrt(n), 0.5, 0.9, 1.0):
        if d <= 1.0:
            smirnov_rows.append((n, float(d), float(scipy.special.smirnov(n, d))))

# kstwo.sf where the C++ default takes its shortcut but kolmogorov_sf_exact must not.
exact_rows = []
for n, a in ((2000, 1.6), (10**4, 1.5), (10**4, 2.5), (10**5, 1.7)):
    d = a / np.sqrt(n)
    exact_rows.append((n, float(d), float(scipy.stats.kstwo.sf(d, n))))

# ------------------------------------------------------------------ normal tails
normal_rows = []
for z in np.concatenate([np.linspace(-37.0, 8.0, 181), [-38.4, -1e-300, 0.0, 1e-10, 0.5, 8.3]]):
    z = float(z)
    cdf = float(scipy.stats.norm.cdf(z))
    logcdf = float(scipy.stats.norm.logcdf(z))
    sf = float(scipy.stats.norm.sf(z))
    mp_cdf = mpmath.ncdf(mpmath.mpf(z))
    if cdf > 0 and abs(cdf - float(mp_cdf)) > 1e-12 * float(mp_cdf):
        sys.exit(f"norm.cdf({z}) = {cdf!r} vs mpmath {mp_cdf}")
    normal_rows.append((z, cdf, logcdf, sf, float(mp_cdf)))

# ------------------------------------------------------------------ noise normality (method §2.8)
RESOLUTION = np.finfo(np.float64).resolution  # SciPy's "all values equal" threshold


def spec_noise(X, ks_columns, p_alpha):
    """docs/method.md §2.8 on the columns of X, KS over the given column indices."""
    n, m = X.shape
    skews, kurts, pvals = [], [], []
    for j in range(m):
        x = X[:, j]
        mean = x.mean()
        m2 = np.mean((x - mean) ** 2)
        zero = m2 <= (RESOLUTION * mean) ** 2
        sd = 1.0 if zero else x.std(ddof=1)
        z = (x - mean) / sd
        if zero:
            skews.append(0.0)
            kurts.append(0.0)
        else:
            skews.append(abs(scipy.stats.skew(z, bias=False)))
            kurts.append(abs(scipy.stats.kurtosis(z, fisher=True, bias=False)))
        if j in ks_columns:
            pvals.append(scipy.stats.kstest(z, "norm").pvalue)
    pvals = np.array(pvals)
    return (float(np.median(skews)), float(np.median(kurts)), float(np.median(pvals)),
            float(np.mean(pvals < p_alpha)), m, len(pvals))


def selected_columns(m, k, seed):
    """The KS columns of docs/method.md §2.8: a partial Fisher-Yates draw (ap_random.py)."""
    return set(ap_random.sample_without_replacement(m, k, seed))


# Row-major n x (1 + m): column 0 is the "signal" component the pipeline leaves out.
NOISE_N = 240
cols = [
    rng.standard_normal(NOISE_N) * 50.0,          # column 0, excluded
    rng.standard_normal(NOISE_N),
    2.0 + 3.0 * rng.standard_normal(NOISE_N),
    rng.exponential(1.0, NOISE_N),
    rng.uniform(-1.0, 1.0, NOISE_N),
    rng.standard_t(4, NOISE_N),
    np.full(NOISE_N, 0.3),                        # constant: zero variance
    rng.lognormal(0.0, 0.5, NOISE_N) - 1.0,
    0.2 * rng.standard_normal(NOISE_N) + rng.choice([-1.0, 1.0], NOISE_N),
]
noise_matrix = f32(np.stack(cols, axis=1))
noise_full = noise_matrix[:, 1:]
noise_cases = []  # (name, first_col, m, max_ks_dims, p_alpha, seed, result)
noise_cases.append(("all8_alpha001", 1, 8, 8, 0.01, 0, spec_noise(noise_full, set(range(8)), 0.01)))
noise_cases.append(("all8_alpha05_cap100", 1, 8, 100, 0.5, 7, spec_noise(noise_full, set(range(8)), 0.5)))
noise_cases.append(("odd7_alpha001", 2, 7, 7, 0.01, 0,
                    spec_noise(noise_matrix[:, 2:], set(range(7)), 0.01)))
for seed, k in ((12345, 3), (2024, 5)):
    sel = selected_columns(8, k, seed)
    noise_cases.append((f"sub{k}_seed{seed}", 1, 8, k, 0.5, seed, spec_noise(noise_full, sel, 0.5)))

# ------------------------------------------------------------------ write the header
out = []
out.append(f"// Generated by `{COMMAND}` (run from the repository root); do not edit.")
out.append(f"// NumPy {np.__version__}, SciPy {scipy.__version__}, mpmath {mpmath.__version__}.")
out.append("#ifndef AP_TESTS_NORMALITY_REFERENCE_HPP")
out.append("#define AP_TESTS_NORMALITY_REFERENCE_HPP")
out.append("")
out.append("#include <cstddef>")
out.append("#include <cstdint>")
out.append("#include <limits>")
out.append("")
out.append("namespace normality_ref")
out.append("{")
out.append("struct sample_case")
out.append("{")
out.append("    const char* name;")
out.append("    const double* data;")
out.append("    std::size_t n;")
out.append("    double a;  // skewness (moment cases) or D (KS cases)")
out.append("    double b;  // excess kurtosis (moment cases) or p-value (KS cases)")
out.append("    double mean;")
out.append("    double std_ddof1;")
out.append("    double std_ks_p;  // kstest((x - mean) / std(ddof=1), 'norm').pvalue (moment cases)")
out.append("};")
out.append("")
out.append("// ---- scipy.stats.skew / kurtosis (bias=False) of float32-exact data (cross-checked with mpmath);")
out.append("// mean and ddof=1 std from mpmath.")
for i, (name, data, s, k, mean, sd, std_p) in enumerate(moment_cases):
    out.append(arr(f"moment_data_{i}", data))
out.append("inline constexpr sample_case moment_cases[] = {")
for i, (name, data, s, k, mean, sd, std_p) in enumerate(moment_cases):
    out.append(f"    {{\"{name}\", moment_data_{i}, {len(data)}, {lit(s)}, {lit(k)}, {lit(mean)}, {lit(sd)}, "
               f"{lit(std_p)}}},")
out.append("};")
out.append("")
out.append("// ---- large samples: ap_test::box_muller(seed) draws n values, plus shift; skewness and excess")
out.append("// kurtosis (bias=False) from mpmath at 30 digits, and what SciPy gives (for comparison).")
out.append("struct large_moment_case")
out.append("{")
out.append("    const char* name;")
out.append("    std::uint64_t seed;")
out.append("    std::size_t n;")
out.append("    double shift;")
out.append("    double skewness;")
out.append("    double excess_kurtosis;")
out.append("    double scipy_skewness;")
out.append("    double scipy_excess_kurtosis;")
out.append("};")
out.append("inline constexpr large_moment_case large_moment_cases[] = {")
for name, seed, n, shift, ms, mk, s, k in large_moment_cases:
    out.append(f"    {{\"{name}\", {seed}u, {n}, {lit(shift)}, {lit(ms)}, {lit(mk)}, {lit(s)}, {lit(k)}}},")
out.append("};")
out.append("")
out.append("// ---- scipy.stats.kstest(x, 'norm'): statistic and p-value of float32-exact data.")
for i, (name, data, D, p) in enumerate(ks_data_cases):
    out.append(arr(f"ks_data_{i}", data))
out.append("inline constexpr sample_case ks_cases[] = {")
for i, (name, data, D, p) in enumerate(ks_data_cases):
    out.append(f"    {{\"{name}\", ks_data_{i}, {len(data)}, {lit(D)}, {lit(p)}, 0.0, 0.0, 0.0}},")
out.append("};")
out.append("")
out.append("// ---- scipy.stats.kstwo.sf(d, n) and .cdf(d, n), every branch of _kolmogn and its boundaries.")
out.append("struct kstwo_row")
out.append("{")
out.append("    std::size_t n;")
out.append("    double d;")
out.append("    double sf;")
out.append("    double cdf;")
out.append("};")
out.append("inline constexpr kstwo_row kstwo_rows[] = {")
for n, d, sf, cdf in kstwo_rows:
    out.append(f"    {{{n}, {lit(d)}, {lit(sf)}, {lit(cdf)}}},")
out.append("};")
out.append("")
out.append("// ---- scipy.special.smirnov(n, d)")
out.append("struct smirnov_row")
out.append("{")
out.append("    std::size_t n;")
out.append("    double d;")
out.append("    double sf;")
out.append("};")
out.append("inline constexpr smirnov_row smirnov_rows[] = {")
for n, d, sf in smirnov_rows:
    out.append(f"    {{{n}, {lit(d)}, {lit(sf)}}},")
out.append("};")
out.append("// kstwo.sf in the 2*smirnov band for n above the C++ exact-summation limit.")
out.append("inline constexpr smirnov_row kstwo_exact_rows[] = {")
for n, d, sf in exact_rows:
    out.append(f"    {{{n}, {lit(d)}, {lit(sf)}}},")
out.append("};")
out.append("")
out.append("// ---- scipy.stats.norm.cdf / logcdf / sf (SciPy's ndtr is itself ~1e-13 relative off at z = -37)")
out.append("struct normal_row")
out.append("{")
out.append("    double z;")
out.append("    double cdf;")
out.append("    double logcdf;")
out.append("    double sf;")
out.append("    double cdf_mpmath;  // 50-digit value rounded to double")
out.append("};")
out.append("inline constexpr normal_row normal_rows[] = {")
for z, c, lc, s, mc in normal_rows:
    out.append(f"    {{{lit(z)}, {lit(c)}, {lit(lc)}, {lit(s)}, {lit(mc)}}},")
out.append("};")
out.append("")
out.append(f"// ---- docs/method.md §2.8 in NumPy/SciPy. Row-major {NOISE_N} x {noise_matrix.shape[1]} matrix; a case")
out.append("// uses columns [first_col, first_col + m). Column 6 is constant (zero variance).")
out.append(f"inline constexpr std::size_t noise_rows = {NOISE_N};")
out.append(f"inline constexpr std::size_t noise_cols = {noise_matrix.shape[1]};")
out.append(arr("noise_matrix", noise_matrix.reshape(-1), per_line=noise_matrix.shape[1]))
out.append("struct noise_case")
out.append("{")
out.append("    const char* name;")
out.append("    std::size_t first_col;")
out.append("    std::size_t m;")
out.append("    std::size_t max_ks_dims;")
out.append("    double p_alpha;")
out.append("    std::uint64_t seed;")
out.append("    double median_abs_skewness;")
out.append("    double median_abs_kurtosis;")
out.append("    double median_ks_p_value;")
out.append("    double fraction_ks_p_below_alpha;")
out.append("    std::size_t n_components;")
out.append("    std::size_t n_ks_tested;")
out.append("};")
out.append("inline constexpr noise_case noise_cases[] = {")
for name, first, m, k, alpha, seed, r in noise_cases:
    out.append(f"    {{\"{name}\", {first}, {m}, {k}, {lit(alpha)}, {seed}u, {lit(r[0])}, {lit(r[1])}, "
               f"{lit(r[2])}, {lit(r[3])}, {r[4]}, {r[5]}}},")
out.append("};")
out.append("}  // namespace normality_ref")
out.append("")
out.append("#endif")

with open(OUT, "w") as f:
    f.write("\n".join(out) + "\n")
print(f"wrote {OUT}", file=sys.stderr)
