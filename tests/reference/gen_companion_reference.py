#!/usr/bin/python3
"""The companion measures of docs/method.md §8.5 in NumPy (the planar rotation model and the PCA
roles of the pooled queries and keys), and the generator of tests/reference/companion_reference.hpp,
the reference values of tests/test_planar_rotation.cpp and tests/test_pca_roles.cpp:

    /usr/bin/python3 tests/reference/gen_companion_reference.py

Written from docs/method.md §8.5 (and the thesis it follows) alone, as a NumPy user would write
it: np.cov over the stacked cloud, np.linalg.eigh, np.corrcoef, np.polyfit; nothing is derived
from the C++ code. gen_pipeline_reference.py imports planar_rotation and pca_roles for the
head_metrics.csv columns of the end-to-end tests. The synthetic heads' inputs are rounded to
float32 so that one reference serves the float and the double instantiations.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HIGH, LOW = 0.7, 0.3
NAN = float("nan")


def _slope(t, y):
    """OLS slope of y on t; 0 when t has no variance (docs/method.md §2.3)."""
    if np.ptp(t) == 0:
        return 0.0
    return float(np.polyfit(t, y, 1)[0])


def _pearson(t, y):
    if np.ptp(t) == 0 or np.ptp(y) == 0:
        return NAN
    return float(np.corrcoef(t, y)[0, 1])


def planar_rotation(xq, tq, xk, tk):
    """a, b and the scalars of the planar rotation model (dict)."""
    x = np.vstack([xq, xk]).astype(np.float64)
    t = np.concatenate([tq, tk]).astype(np.float64)
    # Cov(x_d, t) for every component: the last row of the covariance of [x, t].
    cov = np.cov(np.column_stack([x, t]), rowvar=False)[:-1, -1]
    norm = np.linalg.norm(cov)
    out = {k: NAN for k in ("drift_slope_k", "drift_slope_q", "drift_query_mean", "drift_key_mean",
                            "drift_r_q", "drift_r_k", "separation", "bias_strength")}
    d = x.shape[1]
    out["a"] = np.full(d, NAN)
    out["b"] = np.full(d, NAN)
    if norm == 0.0:
        return out
    a = cov / norm
    delta = xq.mean(axis=0) - xk.mean(axis=0)
    b = delta - (delta @ a) * a
    if np.linalg.norm(b) > 0:
        b = b / np.linalg.norm(b)
        out["separation"] = float(delta @ b)
    else:
        b = np.full(d, NAN)
    qa, ka = xq @ a, xk @ a
    out.update(a=a, b=b, drift_slope_k=_slope(tk, ka), drift_slope_q=_slope(tq, qa),
               drift_query_mean=float(qa.mean()), drift_key_mean=float(ka.mean()),
               drift_r_q=_pearson(tq, qa), drift_r_k=_pearson(tk, ka))
    out["bias_strength"] = out["drift_query_mean"] * out["drift_slope_k"]
    return out


def pca_class(r_q, r_k):
    if np.isnan(r_q) or np.isnan(r_k):
        return "nan"
    if abs(r_q) > HIGH:
        return "position_dominated" if abs(r_k) > HIGH else "q_positional"
    if abs(r_q) < LOW and abs(r_k) < LOW:
        return "content_focused"
    return "mixed"


def pca_roles(xq, tq, xk, tk):
    """PC0 of the pooled cloud, its (sign-canonicalized) r_q, r_k and the class (dict)."""
    x = np.vstack([xq, xk]).astype(np.float64)
    c = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1])
    values, vectors = np.linalg.eigh(c)
    v = vectors[:, -1]
    r_q, r_k = _pearson(tq, xq @ v), _pearson(tk, xk @ v)
    dominant = r_q if (np.isnan(r_k) or abs(r_q) >= abs(r_k)) else r_k
    if dominant < 0:
        v, r_q, r_k = -v, -r_q, -r_k
    return {"component": v, "explained_variance_ratio": float(values[-1] / values.sum()),
            "r_q": r_q, "r_k": r_k, "pca_class": pca_class(r_q, r_k)}


def synthetic_heads():
    """(name, xq, tq, xk, tk): a positional head, a content head, a head whose keys share one
    position, a head with Q far from K, a strongly drifting head, a head whose queries drift; float32-exact values."""
    rng = np.random.default_rng(20261126)
    heads = []

    def f32(x):
        return x.astype(np.float32).astype(np.float64)

    d = 6
    tq = rng.integers(0, 400, 48).astype(np.float64)
    tk = rng.integers(0, 400, 40).astype(np.float64)
    drift = rng.normal(size=d)
    heads.append(("positional", f32(1.5 + np.outer(tq, 0.01 * drift) + rng.normal(size=(48, d))), tq,
                  f32(-0.5 + np.outer(tk, 0.013 * drift) + 0.8 * rng.normal(size=(40, d))), tk))
    heads.append(("content", f32(rng.normal(size=(48, d)) * np.arange(1, d + 1)), tq,
                  f32(rng.normal(size=(40, d)) * np.arange(1, d + 1)[::-1]), tk))
    tk_same = np.full(40, 17.0)
    heads.append(("keys_one_position", f32(np.outer(tq, 0.02 * drift) + rng.normal(size=(48, d))), tq,
                  f32(rng.normal(size=(40, d))), tk_same))
    offset = np.zeros(d)
    offset[2] = 8.0
    heads.append(("separated", f32(offset + np.outer(tq, 0.004 * drift) + 0.5 * rng.normal(size=(48, d))), tq,
                  f32(-offset + np.outer(tk, 0.006 * drift) + 0.5 * rng.normal(size=(40, d))), tk))
    heads.append(("strong_drift", f32(np.outer(tq, 0.05 * drift) + 0.3 * rng.normal(size=(48, d))), tq,
                  f32(np.outer(tk, 0.05 * drift) + 0.3 * rng.normal(size=(40, d))), tk))
    heads.append(("query_drift", f32(np.outer(tq, 0.08 * drift) + 0.3 * rng.normal(size=(48, d))), tq,
                  f32(0.3 * rng.normal(size=(40, d))), tk))
    return heads


def main():
    import cpp_literals as cpp

    out = ["// Generated by tests/reference/gen_companion_reference.py (docs/method.md §8.5); do not edit.",
           "// Regenerate: /usr/bin/python3 tests/reference/gen_companion_reference.py",
           "#ifndef AP_TEST_COMPANION_REFERENCE_HPP", "#define AP_TEST_COMPANION_REFERENCE_HPP", "",
           "#include <cstddef>", "#include <limits>", "", "namespace companion_reference", "{",
           "inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();", ""]
    heads = synthetic_heads()
    out.append("inline constexpr std::size_t num_heads = %d;" % len(heads))
    for h, (name, xq, tq, xk, tk) in enumerate(heads):
        p = planar_rotation(xq, tq, xk, tk)
        r = pca_roles(xq, tq, xk, tk)
        out.append("// head %d: %s" % (h, name))
        out.append("inline constexpr std::size_t h%d_nq = %d, h%d_nk = %d, h%d_d = %d;"
                   % (h, xq.shape[0], h, xk.shape[0], h, xq.shape[1]))
        out.append(cpp.array("h%d_q" % h, xq))
        out.append(cpp.array("h%d_tq" % h, tq))
        out.append(cpp.array("h%d_k" % h, xk))
        out.append(cpp.array("h%d_tk" % h, tk))
        out.append(cpp.array("h%d_a" % h, p["a"], nan_name="nan"))
        out.append(cpp.array("h%d_b" % h, p["b"], nan_name="nan"))
        out.append(cpp.array("h%d_plane" % h, [p[k] for k in (
            "drift_slope_k", "drift_slope_q", "drift_query_mean", "drift_key_mean", "drift_r_q", "drift_r_k",
            "separation", "bias_strength")], nan_name="nan"))
        out.append(cpp.array("h%d_pc0" % h, r["component"]))
        out.append(cpp.array("h%d_pca" % h, [r["explained_variance_ratio"], r["r_q"], r["r_k"]], nan_name="nan"))
        out.append('inline constexpr const char* h%d_class = "%s";' % (h, r["pca_class"]))
        out.append("")
    out.append("struct head\n{\n    const char* name;\n    std::size_t nq, nk, d;\n"
               "    const double *q, *tq, *k, *tk, *a, *b, *plane, *pc0, *pca;\n    const char* pca_class;\n};")
    out.append("// plane: drift_slope_k, drift_slope_q, drift_query_mean, drift_key_mean, drift_r_q, drift_r_k,")
    out.append("// separation, bias_strength; pca: explained_variance_ratio, r_q, r_k.")
    out.append("inline constexpr head heads[] = {")
    for h, (name, *_rest) in enumerate(heads):
        out.append('    {"%s", h%d_nq, h%d_nk, h%d_d, h%d_q, h%d_tq, h%d_k, h%d_tk, h%d_a, h%d_b, h%d_plane, h%d_pc0, '
                   'h%d_pca, h%d_class},' % ((name,) + (h,) * 13))
    out.append("};")
    out += ["}  // namespace companion_reference", "", "#endif", ""]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "companion_reference.hpp")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print("wrote", path)


if __name__ == "__main__":
    main()
