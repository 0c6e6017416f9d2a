"""The family sweep of the capture in CI (issue 33 item 1, docs/method.md §1.6): every model
family of the installed transformers built small from its config is captured and verified
against its own attention probabilities, or refused with a message (capture_sweep.py); those
that cannot be built small are counted apart, with the reason. No family may be captured with
probabilities that differ ("wrong"). The counts are printed, and the states must be those of
the committed summary tests/data/capture_sweep.json (made by
    .venv/bin/python tests/python/capture_sweep.py --write tests/data/capture_sweep.json
with the transformers version it names): a family that changes state is a change to review.
About 40 s on one thread. Run: .venv/bin/python -m pytest -q -s tests/python/test_capture_sweep.py
"""

import json
import os
import sys

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = os.path.join(os.path.dirname(HERE), "data", "capture_sweep.json")
sys.path.insert(0, HERE)
import capture_sweep  # noqa: E402


def test_every_family_is_verified_or_refused(capsys):
    results, seconds = capture_sweep.sweep()
    counts = capture_sweep.counts(results)
    with capsys.disabled():
        print(f"\ncapture sweep over transformers {transformers.__version__}: {len(results)} "
              f"families, {counts['captured']} captured and verified, {counts['refused']} "
              f"refused, {counts['not_built_small']} not built small, {counts['wrong']} wrong "
              f"({seconds:.0f} s)")
    wrong = {t: r["detail"] for t, r in results.items() if r["state"] == "wrong"}
    assert not wrong, wrong
    for model_type, r in results.items():
        assert r["detail"], model_type  # a refusal or a skip says why
    with open(SUMMARY) as f:
        summary = json.load(f)
    assert summary["transformers"] == transformers.__version__, \
        "the summary was made with another transformers: make it again (see the docstring)"
    states = {t: r["state"] for t, r in results.items()}
    expected = {t: r["state"] for t, r in summary["families"].items()}
    changed = {t: (expected.get(t), states.get(t)) for t in set(states) | set(expected)
               if expected.get(t) != states.get(t)}
    assert not changed, f"families whose state changed (summary, now): {changed}"
    assert summary["counts"] == counts
    # the defects of issue 33 stay as the summary says
    for model_type in ("yoso", "mra", "nystromformer", "big_bird", "diffllama"):
        assert states[model_type] == "refused", model_type
    for model_type in ("bart", "mbart", "plbart", "convbert", "bert", "llama"):
        assert states[model_type] == "captured", model_type
    assert results["bart"]["detail"].startswith("4 layers")
