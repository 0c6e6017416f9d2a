#!/usr/bin/env python3
"""End to end on a real model: the qk-sniffer fixture of all-MiniLM-L6-v2 through the
converter, ap_analyze, the independent reference and the plots.

usage: test_real_minilm.py AP_ANALYZE FIXTURE_DIR REFERENCE_CSV WORK_DIR

FIXTURE_DIR is tests/data/real_minilm (Parquet, 24 of the model's 72 query heads and their
key heads, bf16-rounded; see its README.md), REFERENCE_CSV
tests/reference/real_minilm_reference.csv written from the Parquet files by
tests/reference/gen_pipeline_reference.py (docs/method.md §2.1, §2.3-§2.9, tau_j / n_j).
Run with the project's Python (.venv: numpy, pyarrow, matplotlib, pandas); a missing
package is a failure, never a skip.

Checks:
  - convert_sniffed_qk.py converts every folder (exit 0);
  - ap_analyze on the model's layout (6 layers x 12 query heads, 12 key heads) analyzes
    every captured head, skips the heads that were not captured (a sampled head set,
    docs/method.md §1.3) and exits 0 with no error line;
  - the deterministic numbers agree with the reference at the tolerances of
    test_reference_metrics.py (counts exact, regression 1e-9 relative, moments 1e-9,
    KS p-values 1e-6 absolute), and ap_analyze has no head or bucket the reference lacks;
  - plasticities lie in [0, 1], every captured head has a finite ap_overall and a profile;
  - render_all.py draws the five figures (decoded, non-blank).
"""

import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import e2e_util as u  # noqa: E402
import test_reference_metrics as ref_metrics  # noqa: E402
from png_check import check_png  # noqa: E402

CONVERTER = os.path.join(ROOT, "examples", "convert_sniffed_qk.py")
RENDER_ALL = os.path.join(ROOT, "examples", "plots", "render_all.py")
NUM_LAYERS, NUM_Q_HEADS, NUM_K_HEADS = 6, 12, 12
HEAD_FOLDER_RE = re.compile(r"^l(\d{2,})h(\d{2,})([qk])$")
ERROR_RE = re.compile(r"^error: layer (\d+) q_head (\d+): (.+)$")
# ap_analyze's options beyond the layout (test_real_decoder.py gives python -m
# attention_plasticity the same ones).
ANALYZE_OPTIONS = ["--normality-max-dims", 64, "--max-tokens-per-head", 50000, "--threads", 2,
                   "--pca-roles", "on"]


def captured_query_heads(fixture):
    heads = set()
    for name in os.listdir(fixture):
        m = HEAD_FOLDER_RE.match(name)
        if m and m.group(3) == "q":
            heads.add((int(m.group(1)), int(m.group(2))))
    return heads


def check_errors(c, stderr, captured):
    """No head may be reported as failed: the heads that were not captured are skipped."""
    for line in stderr.splitlines():
        m = ERROR_RE.match(line)
        if m:
            head = (int(m.group(1)), int(m.group(2)))
            c.check(False, "head %s (%s) reported as failed: %s"
                    % (head, "captured" if head in captured else "not captured", m.group(3)))
        c.check(not line.startswith("error"), "unexpected error line: %s" % line)


def check_plasticity_ranges(c, out, captured):
    _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
    analyzed = {u.head_key(r) for r in metrics}
    c.check(analyzed == captured, "heads analyzed %s, captured %s"
            % (sorted(analyzed ^ captured), sorted(captured)))
    for row in metrics:
        ap = u.num(row["ap_overall"])
        c.check(math.isfinite(ap) and 0.0 <= ap <= 1.0,
                "head %s: ap_overall %s" % (u.head_key(row), row["ap_overall"]))
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    c.check({u.head_key(r) for r in profile} == captured, "a captured head has no profile")
    _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
    for row in profile + cells:
        p = u.num(row["plasticity"])
        c.check(math.isnan(p) or 0.0 <= p <= 1.0, "plasticity out of [0, 1]: %s" % row)
    for row in cells:
        c.check(int(row["k_bucket"]) < int(row["q_bucket"]), "cell with c >= j: %s" % row)
        c.check(math.isnan(u.num(row["plasticity"])) == (int(row["n_pairs"]) == 0),
                "NaN plasticity exactly when there are no pairs: %s" % row)
    empty = sum(1 for r in cells if int(r["n_pairs"]) == 0)
    print("%d heads, %d profile rows, %d cells (%d without pairs)"
          % (len(metrics), len(profile), len(cells), empty))


def check_fixture(c, analyze, fixture, reference, work, layout, expected_heads):
    """The checks above on one real fixture (shared with test_real_decoder.py): converter,
    ap_analyze on ``layout`` = (layers, query heads, key heads), the reference, the plots.
    Returns (the NPY folder, the results folder)."""
    u.fresh_dir(work)
    npy, out, figures = (os.path.join(work, d) for d in ("npy", "out", "figures"))
    captured = captured_query_heads(fixture)
    c.check(len(captured) == expected_heads, "the fixture should hold %d query heads, found %d"
            % (expected_heads, len(captured)))

    u.run([sys.executable, CONVERTER, "--quiet", fixture, npy], expect=0)
    num_layers, num_q_heads, num_k_heads = layout
    code, _stdout, stderr = u.run(
        [analyze, "--data-root", npy, "--output-dir", out, "--num-layers", num_layers,
         "--num-q-heads", num_q_heads, "--num-k-heads", num_k_heads,
         *ANALYZE_OPTIONS])
    c.check(code == 0, "ap_analyze exited %d:\n%s" % (code, stderr))
    check_errors(c, stderr, captured)

    check_plasticity_ranges(c, out, captured)
    ref_metrics.compare_with_reference(c, ref_metrics.load_fixture(reference),
                                       ref_metrics.load_results(out))

    code, stdout, stderr = u.run([sys.executable, RENDER_ALL, "--results", out, "--out",
                                  figures, "--dpi", 60])
    c.check(code == 0, "render_all.py exited %d:\n%s" % (code, stderr))
    printed = [line for line in stdout.splitlines() if line.strip()]
    c.check(len(printed) == 5, "render_all.py wrote %s" % printed)
    for path in printed:
        try:
            check_png(path)
        except AssertionError as exc:
            c.check(False, str(exc))
    return npy, out


def main():
    analyze, fixture, reference, work = sys.argv[1:5]
    c = u.Checker()
    check_fixture(c, analyze, fixture, reference, work, (NUM_LAYERS, NUM_Q_HEADS, NUM_K_HEADS), 24)
    c.close("test_real_minilm")


if __name__ == "__main__":
    main()
