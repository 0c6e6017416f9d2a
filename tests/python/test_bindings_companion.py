"""The companion measures of docs/method.md §8.5 bound in the Python package (planar_rotation,
pca_roles, and their head_metrics columns through analyze_head), against the independent NumPy
implementation of tests/reference/gen_companion_reference.py, to 1e-10 relative, float32 and
float64 input.

Run: .venv/bin/python -m pytest -q tests/python/test_bindings_companion.py
"""

import os
import sys

import numpy as np
import pytest

import bindings_util as bu
import attention_plasticity as ap

sys.path.insert(0, os.path.join(bu.ROOT, "tests", "reference"))
import gen_companion_reference as ref  # noqa: E402

SCALARS = ("drift_slope_k", "drift_slope_q", "drift_query_mean", "drift_key_mean", "drift_r_q", "drift_r_k",
           "separation", "bias_strength")


def close(got, want, rel=1e-10):
    if np.isnan(want):
        return np.isnan(got)
    return abs(got - want) <= rel * abs(want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_numpy(dtype):
    worst = 0.0
    for name, xq, tq, xk, tk in ref.synthetic_heads():
        q, k = xq.astype(dtype), xk.astype(dtype)
        want = ref.planar_rotation(xq, tq, xk, tk)
        got = ap.planar_rotation(q, tq, k, tk.astype(np.int64))
        for s in SCALARS:
            assert close(getattr(got, s), want[s]), (name, s, getattr(got, s), want[s])
            if not np.isnan(want[s]) and want[s] != 0:
                worst = max(worst, abs(getattr(got, s) - want[s]) / abs(want[s]))
        np.testing.assert_allclose(got.drift_direction, want["a"], rtol=0, atol=1e-10)
        roles = ap.pca_roles(q, tq, k, tk)
        want = ref.pca_roles(xq, tq, xk, tk)
        for s in ("r_q", "r_k", "explained_variance_ratio"):
            assert close(getattr(roles, s), want[s]), (name, s)
        np.testing.assert_allclose(roles.component, want["component"], rtol=0, atol=1e-10)
        assert roles.pca_class == want["pca_class"]
    print("worst relative difference %.3g" % worst)
    assert worst < 1e-10


def test_errors_name_the_function_and_argument():
    q = np.zeros((3, 2))
    with pytest.raises(ap.InvalidArgumentError, match="planar_rotation: queries has 3 rows but query_positions"):
        ap.planar_rotation(q, np.arange(2.0), q, np.arange(3.0))
    with pytest.raises(ap.DomainError, match="pca_roles"):
        ap.pca_roles(np.full((3, 2), np.nan), np.arange(3.0), q, np.arange(3.0))


def test_analyze_head_columns():
    """analyze_head's metrics equal the steps on the kept rows (no subsampling here), with the
    library's defaults (the planar rotation model from its O(n d) moments, no PCA roles) and with
    the PCA roles on (the moments through the SYRK)."""
    name, xq, tq, xk, tk = ref.synthetic_heads()[0]
    m = len(tk)
    queries = ap.Tokens(xq, tq.astype(np.int64), (tq // 100 + 1).astype(np.int64))
    keys = ap.Tokens(xk, tk.astype(np.int64), (tk // 100).astype(np.int64), np.zeros(m, dtype=np.int64))
    want = ref.planar_rotation(xq, tq, xk, tk)
    roles = ref.pca_roles(xq, tq, xk, tk)
    options = ap.HeadOptions()
    assert options.planar_rotation and not options.pca_roles  # the defaults (docs/method.md §8)
    for pca in (False, True):
        options.pca_roles = pca
        r = ap.analyze_head(queries, keys, options=options).metrics
        assert close(r.bias_strength, want["bias_strength"])
        assert close(r.drift_slope_k, want["drift_slope_k"])
        assert close(r.drift_query_mean, want["drift_query_mean"])
        if pca:
            assert close(r.pc0_r_q, roles["r_q"]) and close(r.pc0_r_k, roles["r_k"])
            assert r.pca_class == roles["pca_class"]
        else:
            assert np.isnan(r.pc0_r_q) and np.isnan(r.pc0_r_k) and r.pca_class == "nan"
    options.planar_rotation = False
    r = ap.analyze_head(queries, keys, options=options)
    assert np.isnan(r.metrics.bias_strength) and r.metrics.pca_class == roles["pca_class"]
    table = r.tables()["head_metrics"]
    # The companion columns (§8.5), then n_documents (§8.3, added after them: columns only append).
    assert list(table.columns[-8:]) == ["bias_strength", "bias_strength_se", "drift_slope_k", "drift_query_mean",
                                        "pc0_r_q", "pc0_r_k", "pca_class", "n_documents"]


def test_compare_runs_refuses_a_string_for_a_list(tmp_path):
    # Issue 25: compare_runs(names='xy') compared under the names 'x' and 'y'; a folder given as
    # one string was split into its characters.
    with pytest.raises(ap.UsageError, match="compare_runs: names: 'xy' is one name; give a list, one per set"):
        ap.compare_runs([tmp_path / "a", tmp_path / "b"], names="xy")
    with pytest.raises(ap.UsageError, match="compare_runs: sets: .* is one folder; give a list, one per set"):
        ap.compare_runs(str(tmp_path))


def test_compare_runs_options_come_from_ap_compare_option_table(tmp_path):
    # Issue 26: compare_runs' options are ap_compare's table (run/compare_config.hpp), checked by
    # its setters with its messages, and its help lists them from there, not from a hand copy.
    from attention_plasticity._core.companion import _compare_options

    keys = [option[0] for option in _compare_options()]
    assert keys == ["output_dir", "names", "alpha", "common_heads", "same_dump", "design"]
    for key, _flag, metavar, text in _compare_options():
        if key not in ("output_dir", "names"):
            assert "%s (%s): %s" % (key, metavar, text) in ap.compare_runs.__doc__
    sets = [tmp_path / "a", tmp_path / "b"]  # the options are refused before any set is read
    # alpha is in the open interval (0, 1): 0 and 1 are refused as 2 is.
    for alpha in (2, 0, 1):
        with pytest.raises(ap.UsageError, match=r"^compare_runs: alpha: %s must be in \(0, 1\)$" % float(alpha)):
            ap.compare_runs(sets, alpha=alpha)
    with pytest.raises(ap.UsageError, match="^compare_runs: design: 'both' is not auto, paired or unpaired$"):
        ap.compare_runs(sets, design="both")
