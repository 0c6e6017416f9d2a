"""ap.PlasticityMonitor and ap.integrations.PlasticityCallback (issue 35) on a tiny decoder
(2 layers, 2 query heads, 1 key head, 32 steps): a plain loop and transformers' Trainer write the
observations, the trajectory, the changes (paired) and the scalars; their losses and weights are
bit-identical to the same training without the monitor; the random states and the modules' modes
are restored (a planted hook that draws from every generator and a training flag proves it);
resume continues the series and refuses other probe texts or options; the background worker gives
the same numbers as the foreground. The trajectory kept incrementally equals compare_runs' over
all the steps' result sets (an independent computation: one comparison of every set).

Run: .venv/bin/python -m pytest -q tests/python/test_monitor.py
"""

import json
import os
import random
import warnings

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import attention_plasticity as ap  # noqa: E402

VOCAB = 64
torch.set_num_threads(1)  # tiny matrices: one thread is fastest, and the CI machine is shared
STEPS = 30
EVERY = 10


def make_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
                         attention_dropout=0.1, use_cache=False)
    model = LlamaForCausalLM(config)
    model.config._attn_implementation = "eager"  # dropout on the attention weights: draws in train mode
    return model


def probe_texts(seed=7, n=12, length=40):
    g = np.random.default_rng(seed)
    return [[int(t) for t in g.integers(1, VOCAB, length)] for _ in range(n)]


def monitor(folder, texts=None, **kw):
    kw.setdefault("every", EVERY)
    kw.setdefault("threads", 1)
    return ap.PlasticityMonitor(probe_texts() if texts is None else texts, None, folder, max_seq_len=40, **kw)


def train_loop(steps=STEPS, mon=None, start=0, model=None):
    """A plain loop; the batches and the dropout draw from the global torch generator, so that
    an observation that moved it, or left the model in eval mode, changes the losses."""
    model = model or make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(1)
    losses = []
    if mon is not None:
        mon.observe(model, start)
    for step in range(start + 1, start + steps + 1):
        batch = torch.randint(1, VOCAB, (4, 24))
        batch[:, 1::2] = batch[:, ::2]  # a pattern attention can learn: copy the previous token
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if mon is not None:
            mon.observe(model, step)
    return model, losses


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def check_folder(folder, steps):
    def not_json(token):  # NaN, Infinity: Python's json writes them unless told not to
        raise AssertionError(f"plasticity_run.json holds {token}, which is not JSON")

    run = json.loads((folder / "plasticity_run.json").read_text(), parse_constant=not_json)
    assert run["steps"] == steps
    assert run["fingerprint"]["probe_examples"] == 12
    for step in steps:
        assert (folder / f"step_{step:06d}" / "head_metrics.csv").is_file()
    trajectory = pd.read_csv(folder / "trajectory.csv", dtype={"layer": str})
    assert sorted(trajectory["step"].unique()) == steps
    overall = trajectory[(trajectory["quantity"] == "ap_overall") & trajectory["layer"].isna()]
    assert len(overall) == len(steps) and np.isfinite(overall["se"]).all() and (overall["se"] > 0).all()
    changes = pd.read_csv(folder / "changes.csv")
    assert (changes["design"] == "paired").all()
    assert changes[changes["against"] == "previous"]["step"].tolist() == steps[1:]
    assert changes[changes["against"] == "first"]["step"].tolist() == steps[2:]
    heads = pd.read_csv(folder / "changes" / f"step_{steps[-1]:06d}_vs_first" / "compare_heads.csv")
    assert set(heads["design"]) == {"paired"}
    assert (set(heads["set_a"]), set(heads["set_b"])) == ({f"step_{steps[0]:06d}"}, {f"step_{steps[-1]:06d}"})
    for entry in run["observations"]:
        assert entry["capture_seconds"] > 0 and entry["analysis_seconds"] > 0
    return run, trajectory, changes


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    _model, reference = train_loop()
    folder = tmp_path_factory.mktemp("plain") / "monitor"
    with monitor(folder) as mon:
        model, losses = train_loop(mon=mon)
    return folder, reference, losses, mon, model


def test_plain_loop_writes_the_series(plain):
    folder, _reference, _losses, mon, _model = plain
    run, _trajectory, _changes = check_folder(folder, [0, 10, 20, 30])
    assert (folder / "trajectory.png").stat().st_size > 5000
    # The changed heads are counted for every observation after the first (docs/method.md §8.6:
    # the hierarchical selection, false discovery rate 0.05 over the list). This 4-head model's
    # 30 steps move no head beyond it (smallest p 0.0026 among 52 tests; the former union of
    # per-quantity BH selections over 4 heads flagged p = 0.006 as a change).
    assert all(isinstance(o["changes"][against]["heads_changed"], int) and o["changes"][against]["heads_changed"] >= 0
               for o in run["observations"][1:] for against in ("previous", "first") if against in o["changes"])
    scalars = mon.scalars()
    for name in ("ap_overall_mean", "ap_overall_se", "ap_drop_mean", "heads_changed", "heads_changed_vs_first",
                 "capture_seconds", "analysis_seconds"):
        assert f"plasticity/{name}" in scalars


def test_plain_loop_losses_bit_identical(plain):
    _folder, reference, losses, _mon, _model = plain
    assert losses == reference


def test_trajectory_equals_one_comparison_of_all_steps(plain):
    folder, *_ = plain
    steps = [0, 10, 20, 30]
    names = [f"step_{s:06d}" for s in steps]
    full = ap.compare_runs([folder / n for n in names], names=names, design="paired")
    kept = pd.read_csv(folder / "trajectory.csv", dtype={"layer": str})
    ref = full.trajectory.sort_values(["order", "quantity", "layer"]).reset_index(drop=True)
    got = kept.sort_values(["order", "quantity", "layer"]).reset_index(drop=True)
    assert got["set"].tolist() == ref["set"].tolist()
    for column in ("mean", "se", "ci_low", "ci_high"):
        np.testing.assert_allclose(got[column].to_numpy(float), ref[column].to_numpy(float), rtol=1e-12,
                                   equal_nan=True)
    # The changes against the previous observation are the full comparison's consecutive pairs.
    changes = pd.read_csv(folder / "changes.csv")
    prev = changes[changes["against"] == "previous"]
    per_pair = full.changed.groupby("set_b").size().reindex(names[1:], fill_value=0).tolist()
    assert prev["heads_changed"].tolist() == per_pair


def test_log_to_writes_the_scalars(plain):
    _folder, _r, _l, mon, _model = plain

    class Writer:
        def __init__(self):
            self.rows = []

        def add_scalar(self, tag, value, step):
            self.rows.append((tag, value, step))

    writer = Writer()
    mon.log_to(writer)
    steps = sorted({s for _t, _v, s in writer.rows})
    assert steps == [0, 10, 20, 30]
    got = {t: v for t, v, s in writer.rows if s == 30}
    assert got == mon.scalars()
    with pytest.raises(TypeError, match="add_scalar"):
        mon.log_to(object())
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return
    with SummaryWriter(os.path.join(mon.output_dir, "tb")) as real:  # pragma: no cover (not installed here)
        mon.log_to(real)


def test_plot_of_the_folder(plain):
    folder, *_ = plain
    fig = ap.plots.trajectory(folder)
    assert len(fig.axes) >= 2
    with pytest.raises(ap.plots.PlotInputError, match="no trajectory.csv"):
        ap.plots.trajectory(folder / "step_000000")


def test_random_states_and_modes_restored(tmp_path):
    """A forward hook that draws from every generator the monitor restores; without the
    restoration, the states after observe differ (and the loop's losses would)."""
    model = make_model()
    model.train()
    model.model.layers[0].mlp.eval()  # a module the user keeps in eval mode stays so

    def draw(_module, _inputs, _output):
        random.random()
        np.random.random()
        torch.rand(3)
        assert not _module.training  # observed in eval mode
        assert not torch.is_grad_enabled()

    handle = model.model.layers[1].register_forward_hook(draw)
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    mon = monitor(tmp_path / "m", plot=False)
    mon.observe(model, 0)
    handle.remove()
    after = (random.getstate(), np.random.get_state()[1], torch.get_rng_state())
    assert after[0] == before[0]
    assert np.array_equal(after[1], before[1])
    assert torch.equal(after[2], before[2])
    assert model.training and model.model.layers[1].training and not model.model.layers[0].mlp.training
    assert all(p.grad is None for p in model.parameters())


def test_resume_continues_and_refuses_other_probes(tmp_path):
    folder = tmp_path / "m"
    model = make_model()
    with monitor(folder, plot=False) as mon:
        mon.observe(model, 0)
        mon.observe(model, 5)   # not due
        mon.observe(model, 10)
    assert mon.steps == [0, 10]
    again = monitor(folder, plot=False)
    assert again.steps == [0, 10]
    with pytest.warns(UserWarning, match="not after the last step observed"):
        assert again.observe(model, 10) is None
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    obs = again.observe(model, 20)
    assert obs.changes["previous"]["step"] == 10 and obs.changes["first"]["step"] == 0
    check_folder(folder, [0, 10, 20])
    with pytest.raises(ValueError, match="other probe texts.*fingerprint"):
        monitor(folder, texts=probe_texts(seed=8))
    with pytest.raises(ValueError, match=r"other options \(max_tokens_per_head: stored '<unset>', given 500\)"):
        monitor(folder, max_tokens_per_head=500)
    with pytest.raises(ValueError, match="every 0"):
        monitor(tmp_path / "x", every=0)


def test_run_file_is_strict_json_and_keeps_a_missing_scalar(tmp_path):
    # A scalar without a value (NaN: e.g. ap_drop_mean when no head has ap_drop) is written null,
    # not as Python's NaN token, which JSON readers (io/json.hpp among them) refuse; resume
    # reads it back as NaN.
    folder = tmp_path / "m"
    with monitor(folder, plot=False) as mon:
        mon.observe(make_model(), 0)
    mon.observations[0].scalars["ap_drop_mean"] = float("nan")
    mon._write_run_file()
    text = (folder / "plasticity_run.json").read_text()
    assert "NaN" not in text
    stored = json.loads(text)
    assert stored["observations"][0]["scalars"]["ap_drop_mean"] is None
    again = monitor(folder, plot=False)
    assert np.isnan(again.observations[0].scalars["ap_drop_mean"])


def test_background_matches_foreground(tmp_path):
    model = make_model()
    a, b = monitor(tmp_path / "fg", plot=False), monitor(tmp_path / "bg", plot=False, background=True)
    with b:
        for step in (0, 10):
            if step:
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(0.02 * torch.randn_like(p))
            a.observe(model, step)
            assert b.observe(model, step) is None
    assert b.steps == [0, 10]
    ta = pd.read_csv(tmp_path / "fg" / "trajectory.csv")
    tb = pd.read_csv(tmp_path / "bg" / "trajectory.csv")
    pd.testing.assert_frame_equal(ta, tb)


def test_bf16_weights_and_autocast(tmp_path):
    """bf16 weights, and float32 weights under bf16 autocast: observed (the kept vectors are
    copied to float32), the autocast state and the weights' dtype left as they were."""
    model = make_model().to(torch.bfloat16)
    mon = monitor(tmp_path / "bf16", plot=False)
    obs = mon.observe(model, 0)
    assert obs.scalars["heads_analyzed"] == 4 and np.isfinite(obs.scalars["ap_overall_mean"])
    assert next(model.parameters()).dtype == torch.bfloat16
    model = make_model()
    mon = monitor(tmp_path / "autocast", plot=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        obs = mon.observe(model, 0)
        assert torch.is_autocast_enabled("cpu")
    assert obs.scalars["heads_analyzed"] == 4


def test_only_rank_zero_observes(tmp_path, monkeypatch):
    """torch.distributed initialized, rank 1: observe returns at once (no collective call, no
    barrier: a barrier would need a process group and raise here), nothing is written."""
    import torch.distributed as dist
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    mon = monitor(tmp_path / "rank1")
    assert not mon.active and not mon.due(0)
    assert mon.observe(make_model(), 0) is None
    mon.close()
    assert not (tmp_path / "rank1").exists()


def test_the_readme_section_runs(tmp_path):
    """README.md's "Watch plasticity during training" block, with its names given."""
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md")) as f:
        section = f.read().split("\n## Watch plasticity during training\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    block = block.replace("...", "optimizer.zero_grad(); model(input_ids=batch, labels=batch).loss.backward(); "
                          "optimizer.step()").replace('"run/plasticity"', "folder").replace("every=100", "every=2")
    model = make_model()
    names = {"ap": ap, "probe_texts": probe_texts(), "tokenizer": None, "model": model, "folder": str(tmp_path / "r"),
             "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
             "loader": [torch.randint(1, VOCAB, (2, 16)) for _ in range(4)]}
    block = block.replace("max_seq_len=256", "max_seq_len=40, threads=1")
    exec(block, names)
    assert names["monitor"].steps == [2, 4]


# ----------------------------------------------------------------------------- Trainer

class TokenDataset(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(5)
        self.rows = torch.randint(1, VOCAB, (160, 24), generator=g)
        self.rows[:, 1::2] = self.rows[:, ::2]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def run_trainer(folder, mon=None):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Losses(TrainerCallback):
        def __init__(self):
            self.logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append(dict(logs))

    args = TrainingArguments(output_dir=str(folder), max_steps=STEPS, per_device_train_batch_size=4,
                             learning_rate=1e-2, logging_steps=5, report_to="none", save_strategy="no",
                             seed=0, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
                             gradient_accumulation_steps=2)
    recorder = Losses()
    trainer = Trainer(model=make_model(), args=args, train_dataset=TokenDataset(), callbacks=[recorder])
    if mon is not None:
        ap.integrations.PlasticityCallback(mon, attach_to=trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return trainer, recorder.logs


def test_trainer_callback(tmp_path):
    _plain_trainer, reference = run_trainer(tmp_path / "plain")
    mon = monitor(tmp_path / "monitor")
    trainer, logs = run_trainer(tmp_path / "with", mon)
    assert mon._executor is None  # closed at on_train_end
    check_folder(tmp_path / "monitor", [0, 10, 20, 30])
    losses = [entry["loss"] for entry in logs if "loss" in entry]
    assert len(losses) == STEPS // 5 and losses == [entry["loss"] for entry in reference if "loss" in entry]
    assert same_weights(weights(trainer.model), weights(_plain_trainer.model))
    logged = [entry for entry in logs if "plasticity/ap_overall_mean" in entry]
    assert [entry["plasticity/step"] for entry in logged] == [0, 10, 20, 30]
    assert all("plasticity/heads_changed" in entry for entry in logged[1:])
    assert any("plasticity/ap_drop_mean" in entry for entry in trainer.state.log_history)


def test_trainer_callback_on_save(tmp_path):
    """on="save": each checkpoint save is observed (every is not used), and step 0 before it."""
    from transformers import Trainer, TrainingArguments
    mon = monitor(tmp_path / "monitor", every=1000, plot=False)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=4,
                             learning_rate=1e-2, report_to="none", save_strategy="steps", save_steps=10,
                             seed=0, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=make_model(), args=args, train_dataset=TokenDataset())
    ap.integrations.PlasticityCallback(mon, on="save", attach_to=trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert mon.steps == [0, 10, 20]
    with pytest.raises(ValueError, match="on 'epoch'"):
        ap.integrations.PlasticityCallback(mon, on="epoch")
