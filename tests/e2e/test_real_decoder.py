#!/usr/bin/env python3
"""End to end on a real decoder: the qk-sniffer fixture of the SmolLM3-style byte decoder that
scripts/train_decoder.py trains here (GQA, sliding-window and NoPE layers), through the
converter, ap_analyze, the independent reference, the Python front end and the plots.

usage: test_real_decoder.py AP_ANALYZE FIXTURE_DIR REFERENCE_CSV WORK_DIR

FIXTURE_DIR is tests/data/real_decoder (Parquet, every query head of the 6 x 4 layout and the
12 key heads, bf16-rounded; see its README.md), REFERENCE_CSV
tests/reference/real_decoder_reference.csv written from the Parquet files by
tests/reference/gen_pipeline_reference.py (docs/method.md §2.1, §2.3-§2.9, tau_j / n_j).
Run with the project's Python (.venv: numpy, pyarrow, matplotlib, pandas and the installed
attention_plasticity package); a missing package is a failure, never a skip.

Checks:
  - the checks of test_real_minilm.py on the decoder's layout (6 layers x 4 query heads on
    2 key heads: GQA group 2): converter, ap_analyze on every head with no error line,
    agreement with the reference, plasticities in [0, 1], the five figures;
  - the layers' sliding windows as the model has them (docs/method.md §1.4): 128 tokens in
    the query folders of layers 0 and 3, none (null) in the others;
  - causal: no query is analyzed against a key bucket after it (cells have c < j), and
    python -m attention_plasticity on the Parquet folder writes CSVs byte-identical to
    ap_analyze's on the converted NPY folder.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import e2e_util as u  # noqa: E402
import test_real_minilm as real  # noqa: E402

LAYOUT = (6, 4, 2)            # layers, query heads, key heads (GQA group 2)
SLIDING = {0: 128, 3: 128}    # layer: window; the other layers attend to the full context


def check_windows(c, fixture):
    import pyarrow.parquet as pq
    for name in sorted(os.listdir(fixture)):
        m = real.HEAD_FOLDER_RE.match(name)
        if not m or m.group(3) != "q":
            continue
        column = pq.read_table(os.path.join(fixture, name, "data.parquet"),
                               columns=["sliding_window"]).column(0).to_pylist()
        want = SLIDING.get(int(m.group(1)))
        c.check(set(column) == {want}, "%s: sliding_window %s, the model's layer has %s"
                % (name, sorted(set(column), key=str), want))


def check_python_front_end(c, fixture, out, work):
    """python -m attention_plasticity on the Parquet dump = ap_analyze on the NPY one."""
    py_out = os.path.join(work, "py")
    code, _stdout, stderr = u.run(
        [sys.executable, "-m", "attention_plasticity", "--data-root", fixture, "--output-dir",
         py_out, "--num-layers", LAYOUT[0], "--num-q-heads", LAYOUT[1], "--num-k-heads",
         LAYOUT[2], *real.ANALYZE_OPTIONS])
    c.check(code == 0, "python -m attention_plasticity exited %d:\n%s" % (code, stderr))
    if code != 0:
        return
    want = sorted(n for n in os.listdir(out) if n.endswith(".csv"))
    got = sorted(n for n in os.listdir(py_out) if n.endswith(".csv"))
    c.check(want == got and len(want) == 6, "CSV sets differ: %s vs %s" % (want, got))
    for name in want:
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(py_out, name), "rb") as b:
            c.check(a.read() == b.read(), "%s: python -m attention_plasticity's bytes differ "
                    "from ap_analyze's" % name)


def main():
    analyze, fixture, reference, work = sys.argv[1:5]
    c = u.Checker()
    check_windows(c, fixture)
    _npy, out = real.check_fixture(c, analyze, fixture, reference, work, LAYOUT,
                                   LAYOUT[0] * LAYOUT[1])
    check_python_front_end(c, fixture, out, work)
    c.close("test_real_decoder")


if __name__ == "__main__":
    main()
