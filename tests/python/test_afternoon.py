"""A researcher's afternoon (issue 24), played as the README and docs/tutorial.md show it:
profile a model in memory with the defaults (every column defined, or a warning naming the
rule), save, reload, compare in memory, options checked by name from every entry point, token
ids without a tokenizer, progress, heads on threads, the README's first screen and the tutorial
run as written.

Independent checks: a saved set read back equals the object value for value (the CSV bytes and
the DataFrames); a comparison of objects equals the comparison of the folders they wrote; a
perturbation of layer 3's queries can change nothing in layers 0-2 (their inputs are
unchanged), so the paired comparison must flag no head there; the analysis on 2 threads equals
the one on 1; the notebook preset's sampling against its formula.
Run: .venv/bin/python -m pytest -q tests/python/test_afternoon.py
"""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import transformers

import attention_plasticity as ap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def tiny_decoder(seed=0, layers=2):
    """A rotary GQA decoder with seeded random weights (nothing is downloaded)."""
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, initializer_range=0.3,
                                      max_position_embeddings=512)
    torch.manual_seed(seed)
    return transformers.LlamaModel(config).eval()


def token_ids(n=16, length=192, seed=0):
    return torch.randint(0, 97, (n, length), generator=torch.Generator().manual_seed(seed))


def profile(model, ids, max_seq_len=None, **options):
    options.setdefault("progress", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ap.profile_model(model, None, ids, max_seq_len=max_seq_len or ids.shape[1], **options)
    return result, [w for w in caught if issubclass(w.category, UserWarning)]


@pytest.fixture(scope="module")
def decoder():
    return tiny_decoder()


@pytest.fixture(scope="module")
def default_profile(decoder):
    return profile(decoder, token_ids())


# ---- profile_model without traps -----------------------------------------------------------------

def test_the_defaults_define_every_column_without_a_warning(default_profile):
    result, caught = default_profile
    assert caught == [], [str(w.message) for w in caught]
    m = result.head_metrics
    assert len(m) == 8 and result.errors == []
    for column in ("ap_overall", "ap_first20", "ap_last20", "ap_drop", "ap_overall_se", "ap_drop_se",
                   "ap_overall_ci_low", "bias_strength"):
        assert m[column].notna().all(), column
    # The notebook preset against its formula: buckets of 192/16 = 12 -> 16 positions (the
    # nearest power of two), rate max(8/16, 50000/3072) capped at 1.
    assert result.capture.min_bucket_size == 16 and result.capture.sampling_rate == 1.0
    assert ap.notebook_capture(512, 10**7) == {"sampler": "uniform", "min_bucket_size": 32,
                                               "sampling_rate": 0.25}
    assert ap.notebook_capture(512, 100000)["sampling_rate"] == 0.5


def test_qk_sniffer_settings_are_warned_before_and_after_the_analysis(decoder):
    result, caught = profile(decoder, token_ids(), capture_preset="qk-sniffer")
    texts = [str(w.message) for w in caught]
    assert result.capture.min_bucket_size == 128 and result.capture.sampling_rate is None
    before = [t for t in texts if "too few queries or keys in the first 20%" in t]
    assert len(before) == 1 and "sampling_rate" in before[0]
    nan = result.head_metrics[["ap_first20", "ap_drop"]].isna().any()
    for column in ("ap_first20", "ap_drop"):
        assert nan[column]
        assert any(t.startswith(f"head_metrics.{column} is NaN") for t in texts), column
    assert all(issubclass(w.category, ap.NaNColumnWarning) for w in caught)


def test_every_nan_column_is_warned_from_every_entry_point(decoder):
    """profile_model, profile_vectors, tables() of analyze_head results, and a set read back:
    each NaN aggregate column gets its NaNColumnWarning."""
    ids = token_ids(4, 40)  # 4 sequences: sequence-level errors NaN (< 10), short contexts
    states = {}
    with ap.capture.hook_qk(decoder, lambda layer, kind, x: states.setdefault((layer, kind), x.clone())), \
            torch.inference_mode():
        decoder(input_ids=ids)

    def nan_warnings(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call()
        return out, {str(w.message).split(" is NaN")[0] for w in caught
                     if issubclass(w.category, ap.NaNColumnWarning) and " is NaN" in str(w.message)}

    for name, call in [
            ("profile_model", lambda: ap.profile_model(decoder, None, ids, max_seq_len=40, progress=False)),
            ("profile_vectors", lambda: ap.profile_vectors(states, progress=False))]:
        result, warned = nan_warnings(call)
        m = result.head_metrics
        nan_columns = {f"head_metrics.{c}" for c in ("ap_overall_se",) if m[c].isna().any()}
        assert nan_columns and nan_columns <= warned, (name, nan_columns, warned)
    rng = np.random.default_rng(0)
    position = np.tile(np.arange(30), 2)
    x = rng.standard_normal((60, 8))
    heads = [ap.analyze_head(ap.Tokens(x, position, position // 10, position * 0),
                             ap.Tokens(x, position, position // 10, np.repeat([0, 1], 30)),
                             ap.HeadId(0, h, 0), ap.analysis_options()) for h in range(2)]
    _, warned = nan_warnings(lambda: ap.tables(heads))
    assert "head_metrics.ap_overall_se" in warned


def test_misspelt_keywords_get_the_nearest_names_everywhere(decoder, tmp_path):
    ids = token_ids(2, 32)
    for call in (lambda: ap.profile_model(decoder, None, ids, max_seq_len=32, num_pair_per_bucket=8),
                 lambda: ap.profile_vectors({(0, "q"): torch.zeros(1, 4, 4, 8), (0, "k"): torch.zeros(1, 4, 2, 8)},
                                            num_pair_per_bucket=8),
                 lambda: ap.analyze_dump(os.path.join(ROOT, "tests/data/real_minilm"), num_pair_per_bucket=8),
                 lambda: ap.HeadOptions(num_pair_per_bucket=8)):
        with pytest.raises(ValueError, match="did you mean 'num_pairs_per_bucket'"):
            call()
    with pytest.raises(ap.CaptureError, match="did you mean 'sampling_rate'"):
        ap.profile_model(decoder, None, ids, max_seq_len=32, sampling_rte=0.5)
    with pytest.raises(ap.CaptureError, match="capture_preset 'sniffer'"):
        ap.profile_model(decoder, None, ids, max_seq_len=32, capture_preset="sniffer")
    with pytest.raises(ap.CaptureError, match="max_examples -1"):
        ap.profile_model(decoder, None, ids, max_seq_len=32, max_examples=-1)
    with pytest.raises(ap.CaptureError, match="tokenizer is None"):
        ap.profile_model(decoder, None, ["a text"], max_seq_len=32)


def test_seed_fixes_the_capture_and_the_analysis(decoder):
    ids = token_ids(12, 96)
    a, _ = profile(decoder, ids, seed=1)
    b, _ = profile(decoder, ids, seed=1)
    c, _ = profile(decoder, ids, seed=2)
    assert a.capture.seed == 1 and a.capture.sampling_rate == 1.0  # every token kept: the capture is the same
    assert a.csv_text("head_metrics") == b.csv_text("head_metrics")
    # Same rows kept, other pairs drawn: only the analysis' seed can make the difference.
    assert (a.head_metrics.n_q_tokens == c.head_metrics.n_q_tokens).all()
    assert not np.array_equal(a.head_metrics.ap_overall, c.head_metrics.ap_overall)


def test_token_ids_in_any_form_and_any_iterable(decoder, default_profile):
    ids = token_ids()
    as_lists, _ = profile(decoder, [row.tolist() for row in ids], 192)
    as_array, _ = profile(decoder, ids.numpy())
    as_generator, _ = profile(decoder, (row.tolist() for row in ids), 192)
    for other in (as_lists, as_array, as_generator):
        assert other.csv_text("head_metrics") == default_profile[0].csv_text("head_metrics")


def test_heads_run_on_threads_with_the_same_numbers(decoder, default_profile):
    one, _ = profile(decoder, token_ids(), threads=1)
    two, _ = profile(decoder, token_ids(), threads=2)
    assert one._run.threads == 1 and two._run.threads == 2
    for name in one.tables:
        assert one.csv_text(name) == two.csv_text(name) == default_profile[0].csv_text(name), name


def test_progress_over_forward_passes_and_heads(decoder, capfd):
    ap.profile_model(decoder, None, token_ids(4, 64), max_seq_len=64, warn=False, progress=True)
    err = capfd.readouterr().err
    assert "forward passes" in err and "4/4" in err
    assert "attention plasticity" in err and "8/8" in err
    ap.profile_model(decoder, None, token_ids(4, 64), max_seq_len=64, warn=False, progress=False)
    assert capfd.readouterr().err == ""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs where one is present)")
def test_a_model_on_a_gpu_gives_the_numbers_of_the_cpu(decoder, default_profile):
    gpu = tiny_decoder().cuda()
    result, _ = profile(gpu, token_ids())
    cpu = default_profile[0].head_metrics
    np.testing.assert_allclose(result.head_metrics.ap_overall, cpu.ap_overall, atol=1e-3)


# ---- results that save, reload and compare ------------------------------------------------------

def test_save_reload_compare_in_memory(decoder, default_profile, tmp_path):
    before = default_profile[0]
    assert before.write(tmp_path / "before")
    back = ap.read_results(tmp_path / "before")
    for name in before.tables:
        assert back.csv_text(name) == before.csv_text(name), name
        assert back[name].equals(before[name]), name
    assert back.analyzed == before.analyzed == len(before.results)
    # The second checkpoint: layer 1's queries perturbed; layer 0 cannot change.
    after_model = tiny_decoder()
    with torch.no_grad():
        after_model.layers[1].self_attn.q_proj.weight.mul_(1.5)
    after, _ = profile(after_model, token_ids())
    objects = ap.compare_runs([before, after])
    assert after.write(tmp_path / "after")
    folders = ap.compare_runs([tmp_path / "before", tmp_path / "after"], names=["set1", "set2"])
    for table in ("heads", "changed", "summary", "trajectory"):
        assert getattr(objects, table).equals(getattr(folders, table)), table
    mixed = ap.compare_runs([back, tmp_path / "after"], names=["set1", "set2"])
    assert mixed.heads.equals(objects.heads)
    heads = objects.heads[objects.heads.quantity == "ap_overall"]
    unchanged = heads[heads.layer == 0]
    assert (unchanged.difference == 0).all() and (unchanged.significant == 0).all()
    assert (heads[heads.layer == 1].difference != 0).all()
    assert set(objects.changed.layer) <= {1}
    # Plotted from the objects themselves.
    figure = ap.plots.head_map(back)
    assert len(figure.axes) >= 2 and figure.axes[0].images[0].get_array().shape == (2, 4)
    assert ap.plots.changes(objects.heads).axes


def test_result_set_of_head_results_writes_what_ap_analyze_writes(tmp_path):
    dump = ap.analyze_dump(os.path.join(ROOT, "tests/data/real_minilm"), progress=False, warn=False, layers="0")
    made = ap.result_set(dump.results, warn=False)
    assert made.write(tmp_path / "made") and dump.write(tmp_path / "dump")
    a, b = ap.read_results(tmp_path / "made"), ap.read_results(tmp_path / "dump")
    for name in dump.tables:
        assert a.csv_text(name) == b.csv_text(name) == dump.csv_text(name), name


def test_read_results_refuses_what_is_not_a_result_set(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        ap.read_results(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="head_metrics.csv"):
        ap.read_results(tmp_path / "empty")
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "head_metrics.csv")
    with pytest.raises(ValueError, match="not a regular file"):
        ap.read_results(fifo)
    other = tmp_path / "other"
    other.mkdir()
    (other / "head_metrics.csv").write_text("layer,q_head,k_head,ap\n0,0,0,0.5\n")
    with pytest.raises(ValueError, match="header is not the one this version writes"):
        ap.read_results(other)


# ---- the README's first screen and the tutorial, as written --------------------------------------

def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_script(tmp_path, code, name):
    """Runs `code` with cwd a scratch folder whose tests/ is the repository's (relative paths as
    the docs write them; nothing is written into the repository)."""
    os.symlink(os.path.join(ROOT, "tests"), tmp_path / "tests")
    script = tmp_path / name
    script.write_text(code)
    proc = subprocess.run([sys.executable, "-W", "error::UserWarning", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_readme_first_screen_runs_as_written(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    sections = ["Profile a model in 10 lines", "Compare two checkpoints", "What the numbers mean"]
    code = []
    for title in sections:
        section = readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        blocks = python_blocks(section)
        assert len(blocks) == 1, title
        code.append(blocks[0])
    # What the README says of the comparison: layers 0-2 cannot change, and something does.
    code.append("assert len(changes.changed) > 0 and (changes.changed.layer >= 3).all()\n"
                "assert ((changes.heads.layer < 3) <= (changes.heads.difference == 0)).all()\n")
    out = run_script(tmp_path, "\n".join(code), "readme_first_screen.py")
    assert "ap_overall_se" in out and "prefers one key" in out and "nats of score per token" in out
    assert (tmp_path / "minilm_before" / "head_metrics.csv").exists()


def test_the_tutorial_runs_as_written_and_says_what_it_prints(tmp_path):
    with open(os.path.join(ROOT, "docs", "tutorial.md")) as f:
        blocks = python_blocks(f.read())
    assert len(blocks) >= 5
    checks = """
# The tutorial's sentences, checked on what it computed.
assert profile.capture.min_bucket_size == 16 and profile.capture.sampling_rate == 1.0
assert abs(head.ap_overall - 0.97) < 0.01 and abs(p - 0.41) < 0.01
d = decoder.head_metrics.set_index(["layer", "q_head"])
assert d.ap_overall.idxmax() == (0, 2) and round(d.ap_overall.max(), 3) == 0.979
rope = d.loc[[1, 4]]
rising = rope[rope.ap_drop > 0]
assert rising.ap_drop.round(2).between(0.03, 0.11).all()
assert len(rising) == 7 and (rising.ap_drop > 3 * rising.ap_drop_se).sum() == 6
o = overall.set_index("layer")
falls = o[(o.difference < 0) & (o.q_bh <= 0.05)]
assert sorted(falls.index) == [0, 1, 3, 4] and falls.difference.between(-0.13, -0.015).all()
assert o.loc[5, "difference"] > 0.1 and o.loc[5, "q_bh"] <= 0.05 and o.loc[2, "q_bh"] > 0.05
s = changes.summary[changes.summary.layer.isna() & (changes.summary.quantity == "ap_overall")].iloc[0]
assert abs(s.mean_difference + 0.05) < 0.01 and abs(s.se - 0.01) < 0.005
import os
for name in ("decoder_head_map", "decoder_profile", "decoder_trajectory"):
    assert os.path.getsize(f"tutorial/{name}.png") > 10000, name
print("tutorial checks passed")
"""
    out = run_script(tmp_path, "\n".join(blocks) + checks, "tutorial.py")
    assert "tutorial checks passed" in out


def test_one_preset_for_the_intervals():
    """HeadOptions() keeps analyze_head at its bare cost (no intervals); analysis_options() is
    the preset of analyze_dump / profile_model, with overrides checked by name."""
    assert not ap.HeadOptions().confidence_intervals
    preset = ap.analysis_options(seed=3)
    assert preset.confidence_intervals and preset.seed == 3
    default = ap.analysis_options()
    for name in ("max_tokens_per_head", "num_pairs_per_bucket", "sampling_unit", "distance_map"):
        assert getattr(preset, name) == getattr(default, name), name
    with pytest.raises(ValueError, match="did you mean 'seed'"):
        ap.analysis_options(sede=3)


def test_a_result_set_is_not_written_over_another_programs_set(decoder, default_profile, tmp_path):
    """A comparison's folder given as an analysis' output (or the reverse, in ap_compare) would
    lose its links: refused, and the comparison stays as it was."""
    result = default_profile[0]
    assert result.write(tmp_path / "a")
    ap.compare_runs([tmp_path / "a", tmp_path / "a"], output_dir=tmp_path / "cmp", names=["x", "y"])
    before = sorted(os.listdir(tmp_path / "cmp"))
    with pytest.raises(ap.OutputError, match="holds the results of another program"):
        result.write(tmp_path / "cmp")
    with pytest.raises(ap.OutputError, match="holds the results of another program"):
        ap.analyze_dump(os.path.join(ROOT, "tests/data/real_minilm"), tmp_path / "cmp", layers="0",
                        progress=False, warn=False)
    with pytest.raises(ap.OutputError, match="holds the results of another program"):
        ap.read_results(tmp_path / "a").write(tmp_path / "cmp")
    assert sorted(os.listdir(tmp_path / "cmp")) == before
    assert ap.compare_runs([tmp_path / "a", tmp_path / "a"], names=["x", "y"]).heads is not None
