"""scripts/train_decoder.py at a tiny scale (the real run takes minutes and is not run here):
the folders it writes load with transformers' Auto classes as the decoder the docs describe
(SmolLM3: GQA, NoPE layers 2 and 5, sliding windows on layers 0 and 3; the extension's longer
context and larger RoPE base), the byte-level tokenizer maps text to its UTF-8 bytes, the saved
weights are the trained ones (the held-out loss the script logged is recomputed from the loaded
model), a second run writes the same losses and the same weight bytes, and a used output
folder is refused.

Run: .venv/bin/python -m pytest -q tests/python/test_train_decoder.py
"""

import csv
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "train_decoder.py")
TINY = ["--steps", 4, "--batch", 2, "--seq-len", 96, "--warmup", 2, "--sliding-window", 32,
        "--checkpoints", 2, "--extend", "--extend-steps", 2, "--extend-batch", 1,
        "--extend-seq-len", 160, "--extend-warmup", 1, "--extend-checkpoints", 1,
        "--log-every", 2, "--eval-every", 2, "--val-windows", 2]


def train(out, *extra):
    return subprocess.run([sys.executable, SCRIPT, str(out)] + [str(a) for a in TINY + list(extra)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)


def load_script():
    spec = importlib.util.spec_from_file_location("train_decoder", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_decoder")
    out = []
    for name in ("a", "b"):
        proc = train(root / name)
        assert proc.returncode == 0, proc.stderr
        out.append(root / name)
    return out


def loss_rows(folder):
    with open(folder / "loss.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_folders_and_schedule(runs):
    out = runs[0]
    for name in ("model", "extended", "checkpoints/pretrain-step00002", "checkpoints/pretrain-step00004",
                 "checkpoints/extend-step00006"):
        for file in ("config.json", "model.safetensors", "tokenizer.json"):
            assert (out / name / file).is_file(), f"{name}/{file}"
    assert (out / "loss.png").stat().st_size > 1000
    schedule = json.loads((out / "schedule.json").read_text())
    assert [(c["phase"], c["step"]) for c in schedule["checkpoints"]] == \
        [("pretrain", 2), ("pretrain", 4), ("extend", 6)]
    assert schedule["pretrain"]["seq_len"] == 96 and schedule["extend"]["seq_len"] == 160
    rows = loss_rows(out)
    assert [r["phase"] for r in rows] == ["pretrain"] * 2 + ["extend"] * 2
    assert [int(r["step"]) for r in rows] == [2, 4, 4, 6]


def test_loads_as_the_documented_decoder(runs):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(runs[0] / "model")
    cfg = model.config
    assert cfg.model_type == "smollm3" and type(model).__name__ == "SmolLM3ForCausalLM"
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (6, 4, 2, 32)
    assert list(cfg.no_rope_layers) == [1, 1, 0, 1, 1, 0]
    assert [t == "sliding_attention" for t in cfg.layer_types] == [True, False, False, True, False, False]
    assert cfg.use_sliding_window and cfg.sliding_window == 32
    assert [m.self_attn.sliding_window for m in model.model.layers] == [32, None, None, 32, None, None]
    assert cfg.rope_parameters["rope_theta"] == 10000 and cfg.max_position_embeddings == 96
    ext = AutoModelForCausalLM.from_pretrained(runs[0] / "extended").config
    assert ext.rope_parameters["rope_theta"] == 100000 and ext.max_position_embeddings == 160

    tok = AutoTokenizer.from_pretrained(runs[0] / "model")
    text = "class C:\n    pass  # é → ∑"
    assert tok(text, add_special_tokens=False)["input_ids"] == list(text.encode("utf-8"))
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (256, 257, 258)
    assert tok.decode(list(text.encode("utf-8"))) == text


def test_saved_weights_are_the_trained_ones(runs):
    """The held-out loss logged at the last pre-training step, recomputed from model/."""
    import torch
    from transformers import AutoModelForCausalLM
    td = load_script()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(runs[0] / "model")
    _, val = td.byte_streams()
    inputs, labels = td.held_out_set(val, 2, 96, 0)
    got = td.held_out_loss(model, inputs, labels, 2)
    logged = float(loss_rows(runs[0])[1]["val_loss"])
    assert abs(got - logged) < 1e-5, (got, logged)
    assert got < 5.6      # below the uniform guess over 259 tokens (ln 259 = 5.56): it learned


def test_second_run_is_identical(runs):
    a, b = (loss_rows(r) for r in runs)
    timing = ("elapsed_s", "cpu_s")
    assert [{k: v for k, v in r.items() if k not in timing} for r in a] == \
        [{k: v for k, v in r.items() if k not in timing} for r in b]
    for name in ("model", "extended", "checkpoints/pretrain-step00002"):
        assert (runs[0] / name / "model.safetensors").read_bytes() == \
            (runs[1] / name / "model.safetensors").read_bytes(), name


def test_used_output_folder_refused(runs):
    proc = train(runs[0])
    assert proc.returncode != 0
    assert f"OUT_DIR '{runs[0]}' is not empty (use --force)" in proc.stderr
