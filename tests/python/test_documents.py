"""Documents as the sampling unit on the capture side (issue 32 items 1, 3, 7; issue 38 items 3,
4; issue 33 items 5, 8, 10): attention_plasticity.documents (the fingerprint, examples.csv's
text, the choice of examples spread over documents, the effective number of documents),
profile_model / profile_vectors recording each example's document, chunk and fingerprints,
separate example and token seeds, the notebook preset kept whole, profile_model's inputs refused
with a CaptureError naming the item, and help(profile_model) listing every option.

Reference values come from the spec's formulas computed here (hashlib on struct-packed ids, the
chunks sliced from the texts by hand, 1 / sum of squared shares in closed form), not from the code
under test. A tiny rotary GQA decoder with seeded random weights; nothing is downloaded.
Run: .venv/bin/python -m pytest -q tests/python/test_documents.py
"""

import hashlib
import inspect
import io
import os
import re
import struct
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import transformers

import attention_plasticity as ap
from attention_plasticity import documents
from attention_plasticity.capture import CaptureError

VOCAB = 97


def tiny_decoder(positions=512):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      initializer_range=0.3, max_position_embeddings=positions)
    torch.manual_seed(0)
    return transformers.LlamaModel(config).eval()


@pytest.fixture(scope="module")
def decoder():
    return tiny_decoder()


def texts_of(lengths, seed=0):
    """Token id lists (documents) of the given lengths, seeded."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, n).tolist() for n in lengths]


def profile(model, texts, **options):
    options.setdefault("progress", False)
    options.setdefault("warn", False)
    return ap.profile_model(model, None, texts, **options)


def read_examples(result):
    return pd.read_csv(io.StringIO(result.examples_csv), dtype={"fingerprint": str, "document_fingerprint": str})


def spec_hash(ids):
    """The spec's fingerprint, computed here: blake2b, 8-byte digest, of the ids as int64 LE."""
    return hashlib.blake2b(struct.pack(f"<{len(ids)}q", *ids), digest_size=8).hexdigest()


# --- attention_plasticity.documents ---------------------------------------------------------

def test_fingerprint_is_the_specs_hash():
    for ids in ([1, 2, 3], [0], [2**62 + 1, -5, 7], list(range(300))):
        assert documents.fingerprint(ids) == spec_hash(ids)
        assert documents.fingerprint(np.asarray(ids, dtype=np.int64)) == spec_hash(ids)
    assert re.fullmatch(r"[0-9a-f]{16}", documents.fingerprint([5, 6]))
    assert documents.fingerprint([1, 2]) != documents.fingerprint([2, 1])


def test_examples_csv_schema_order_and_refusals():
    big = 2**53 + 1  # beyond a double's integers: kept exact
    text = documents.examples_csv([2, 0, big], [7, 7, -3], [1, 0, 0],
                                  ["0123456789abcdef", None, ""], [None, "fedcba9876543210", None])
    assert text == ("example_id,document_id,chunk,fingerprint,document_fingerprint\n"
                    "0,7,0,,fedcba9876543210\n"
                    "2,7,1,0123456789abcdef,\n"
                    f"{big},-3,0,,\n")
    with pytest.raises(ValueError, match="example_id 1 is given twice"):
        documents.examples_csv([1, 1], [0, 1], [0, 0])
    with pytest.raises(ValueError, match=r"chunk\[1\] -1"):
        documents.examples_csv([0, 1], [0, 0], [0, -1])
    with pytest.raises(ValueError, match=r"fingerprint\[0\] 'ABCDEF0123456789'"):
        documents.examples_csv([0], [0], [0], ["ABCDEF0123456789"])
    with pytest.raises(ValueError, match=r"document_id\[0\] 1.5"):
        documents.examples_csv([0], [1.5], [0])


def test_the_choice_spreads_examples_over_documents():
    counts = [3] * 20 + [5] * 10  # 30 documents of several chunks, 110 examples
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    document = np.repeat(np.arange(30), counts)
    kept = documents.choose_examples(counts, 48, 0)
    assert len(kept) == 48 and len(set(kept)) == 48 and list(kept) == sorted(kept)
    per_document = np.bincount(document[kept], minlength=30)
    assert (per_document >= 1).all() and per_document.max() == 2  # every document, then a second round
    assert list(kept) != list(range(48))  # not the first chunks in text order
    # the chunks are drawn: the first round is not always each document's first chunk
    first_round = [starts[d] for d in range(30)]
    assert not set(first_round) <= set(kept)
    # seeded: the same seed the same choice, another seed another
    assert list(documents.choose_examples(counts, 48, 0)) == list(kept)
    assert list(documents.choose_examples(counts, 48, 1)) != list(kept)
    # fewer examples than documents: that many documents, one chunk each
    few = documents.choose_examples(counts, 12, 3)
    assert len(set(document[few])) == 12
    # None or more than there are: all, in order
    assert list(documents.choose_examples(counts, None, 0)) == list(range(110))
    assert list(documents.choose_examples(counts, 500, 0)) == list(range(110))


def test_effective_documents_closed_form_and_warning():
    assert documents.effective_documents([5, 5, 5, 5]) == pytest.approx(4.0)
    assert documents.effective_documents({"a": 30, "b": 10}) == pytest.approx(1 / (0.75**2 + 0.25**2))
    assert np.isnan(documents.effective_documents([0, 0]))
    with pytest.warns(documents.DocumentsWarning, match=r"3 document\(s\), 1\.6 effective.*more texts"):
        assert documents.warn_effective_documents(1.6, 3, "f")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not documents.warn_effective_documents(12.0, 12, "f")


# --- profile_model: documents recorded, the choice, the seeds ------------------------------

def test_profile_model_records_documents_chunks_and_fingerprints(decoder):
    texts = texts_of([70, 40, 96, 20, 33, 64, 50, 81, 10, 45, 60, 77])
    result = profile(decoder, texts, max_seq_len=32, document_ids=[100 + i for i in range(12)])
    table = read_examples(result)
    want = []  # the chunks sliced here, in text order
    for i, ids in enumerate(texts):
        for c, start in enumerate(range(0, len(ids), 32)):
            want.append((100 + i, c, spec_hash(ids[start:start + 32]), spec_hash(ids)))
    assert list(table.example_id) == list(range(len(want)))
    assert list(zip(table.document_id, table.chunk, table.fingerprint, table.document_fingerprint)) == want
    record = result.capture_record
    assert record["documents"] == 12 and record["examples"] == len(want) and record["texts"] == 12
    assert record["rule"] == "all" and record["example_seed"] == 0 and record["token_seed"] == 0


def test_profile_model_spreads_48_examples_over_30_documents(decoder):
    texts = texts_of([32 * 3] * 20 + [32 * 5] * 10, seed=1)
    result = profile(decoder, texts, max_seq_len=32, max_examples=48, layers=[0])
    table = read_examples(result)
    assert len(table) == 48 and table.document_id.nunique() == 30
    assert table.groupby("document_id").size().max() == 2
    record = result.capture_record
    assert record["rule"] == documents.CHOICE_RULE and record["documents"] == 30 and record["max_examples"] == 48
    assert 25 < record["effective_documents"] <= 30


def test_few_effective_documents_warn(decoder):
    texts = texts_of([32 * 12, 32 * 12, 32])
    with pytest.warns(documents.DocumentsWarning, match=r"3 document\(s\), 2\.\d effective"):
        ap.profile_model(decoder, None, texts, max_seq_len=32, progress=False, layers=[0])


def test_same_example_seed_other_token_seed_same_examples_other_tokens(decoder):
    texts = texts_of([32 * 4] * 16, seed=2)
    common = dict(max_seq_len=32, max_examples=24, sampling_rate=0.5, min_bucket_size=4, layers=[0])
    a = profile(decoder, texts, seed=3, **common)
    b = profile(decoder, texts, seed=3, token_seed=11, **common)
    c = profile(decoder, texts, seed=3, example_seed=8, **common)
    assert a.examples_csv == b.examples_csv  # the same examples, the same fingerprints
    assert b.capture_record["example_seed"] == 3 and b.capture_record["token_seed"] == 11
    assert b.capture.seed == 11 and a.capture.seed == 3
    assert not a.head_metrics.n_q_tokens.equals(b.head_metrics.n_q_tokens) \
        or not a.head_metrics.ap_overall.equals(b.head_metrics.ap_overall)  # other kept tokens
    ta, tc = read_examples(a), read_examples(c)
    assert set(ta.fingerprint) != set(tc.fingerprint)  # other chunks ...
    assert set(ta.document_fingerprint) == set(tc.document_fingerprint)  # ... of the same 16 documents


def test_the_notebook_preset_is_kept_whole(decoder):
    texts = texts_of([256] * 4)
    # sampling_rate alone keeps the preset's buckets (256 / 16 = 16 positions), then, as 0.1 x 16
    # keys per bucket are too few for key pairs, larger ones, before the run, with a warning
    with pytest.warns(ap.NaNColumnWarning, match="min_bucket_size set to 32"):
        result = ap.profile_model(decoder, None, texts, max_seq_len=256, sampling_rate=0.1, progress=False,
                                  layers=[0])
    assert result.capture.min_bucket_size == 32 and result.capture.sampling_rate == 0.1
    result = profile(decoder, texts, max_seq_len=256, sampling_rate=0.5, layers=[0])
    assert result.capture.min_bucket_size == 16  # the preset's, not SnifferOptions' 128
    with pytest.raises(CaptureError, match=r"sampling_rate 0\.1 keeps 1\.6 keys.*min_bucket_size >= 32"):
        profile(decoder, texts, max_seq_len=256, sampling_rate=0.1, min_bucket_size=16)
    with pytest.raises(CaptureError, match=r"sampling_rate 0\.01.*raise sampling_rate"):
        profile(decoder, texts, max_seq_len=256, sampling_rate=0.01)


# --- profile_model's inputs ------------------------------------------------------------------

def meta_decoder():
    with torch.device("meta"):
        return tiny_decoder()


@pytest.mark.parametrize("case, call, message", [
    ("bytes", lambda m: profile(m, b"some text"), r"texts is bytes"),
    ("bytes item", lambda m: profile(m, [[1, 2, 3], b"abc"]), r"texts\[1\] is bytes"),
    ("negative id", lambda m: profile(m, [[1, 2, 3], [4, -3, 5]]), r"texts\[1\] holds the token id -3"),
    ("beyond the vocabulary", lambda m: profile(m, [[1, 2, 3], [4, 97, 5]]),
     r"texts\[1\] holds the token id 97: .*0 to 96"),
    ("a string among ids", lambda m: profile(m, [[1, 2, 3], "text"]), r"texts\[1\] is a str"),
    ("a float among ids", lambda m: profile(m, [[1, 2, 3], [1.5, 2]]), r"texts\[1\] holds 1.5"),
    ("seed None", lambda m: profile(m, [[1, 2, 3]], seed=None, token_seed="abc"), r"token_seed 'abc'"),
    ("seed abc", lambda m: profile(m, [[1, 2, 3]], seed="abc"), r"seed 'abc': give an integer"),
    ("seed float", lambda m: profile(m, [[1, 2, 3]], example_seed=1.0), r"example_seed 1.0"),
    ("negative seed", lambda m: profile(m, [[1, 2, 3]], seed=-1), r"seed -1"),
    ("meta device", lambda m: profile(meta_decoder(), [[1, 2, 3]]), r"meta device"),
    ("no attention", lambda m: profile(torch.nn.Linear(4, 4), [[1, 2, 3]]), r"model is a Linear"),
    ("beyond the positions", lambda m: profile(tiny_decoder(positions=32), [list(range(40))], max_seq_len=40),
     r"max_seq_len 40: the model takes at most 32 positions"),
    ("absurd bucket", lambda m: profile(m, [[1, 2, 3]], min_bucket_size=10**400), r"min_bucket_size 1000"),
    ("bucket text", lambda m: profile(m, [[1, 2, 3]], min_bucket_size="8"), r"min_bucket_size '8'"),
    ("rate text", lambda m: profile(m, [[1, 2, 3]], sampling_rate="0.5"), r"sampling_rate '0.5'"),
    ("document ids", lambda m: profile(m, [[1, 2], [3, 4]], document_ids=[5, 5]), r"document_ids\[1\] 5"),
])
def test_bad_inputs_are_capture_errors_naming_the_item(decoder, case, call, message):
    with pytest.raises(CaptureError, match=message):
        call(decoder)


def test_seed_none_means_the_default():
    # seed=None is the default (0): the same as seed=0
    assert ap.profile.resolve_seeds(None, None, None, "f") == (0, 0, None)
    assert ap.profile.resolve_seeds(4, None, 9, "f") == (4, 9, 4)


def test_string_texts_name_the_right_item(decoder):
    with pytest.raises(CaptureError, match=r"texts\[2\] is a list among strings"):
        profile(decoder, ["a", "b", [1, 2]])


# --- help(profile_model) lists every option ------------------------------------------------

def test_help_lists_every_option():
    from attention_plasticity._core.dump import analyze_options
    from attention_plasticity._core.head import HeadOptions
    from attention_plasticity.qk_sniffer import SnifferOptions

    doc = ap.profile_model.__doc__
    named = [p for p in inspect.signature(ap.profile_model).parameters
             if p not in ("model", "tokenizer", "texts", "options")]
    run = [key for key, *_ in analyze_options() if key not in ap.profile._RUN_ONLY]
    head = [n for n, v in vars(HeadOptions).items() if isinstance(v, property) and n != "sliding_window"]
    missing = [n for n in sorted(set(named) | set(SnifferOptions.names()) | set(run) | set(head))
               if f"``{n}``" not in doc]
    assert missing == []
    assert "``sequence_influences``" in doc and "document" in doc


# --- profile_vectors: document_ids ---------------------------------------------------------

def test_profile_vectors_records_the_documents_given():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((6, 16, 4, 8)).astype(np.float32), rng.standard_normal((6, 16, 2, 8)).astype(np.float32)
    result = ap.profile_vectors({(0, "q"): q, (0, "k"): k}, document_ids=[4, 4, 9, 4, 9, 2], progress=False,
                                warn=False, min_bucket_size=4, sampling_rate=1.0)
    table = read_examples(result)
    assert list(table.document_id) == [4, 4, 9, 4, 9, 2] and list(table.chunk) == [0, 1, 0, 2, 1, 0]
    assert table.fingerprint.isna().all()
    assert result.capture_record["documents"] == 3
    with pytest.raises(CaptureError, match=r"document_ids of batch 0: 'x'"):
        ap.profile_vectors({(0, "q"): q, (0, "k"): k}, document_ids=[1, 2, 3, 4, 5, "x"], progress=False)


# --- the monitor: seeds --------------------------------------------------------------------

def test_the_monitor_separates_its_seeds(tmp_path):
    texts = texts_of([64 * 3] * 12, seed=4)
    common = dict(max_seq_len=64, max_examples=20, plot=False)
    a = ap.PlasticityMonitor(texts, None, tmp_path / "a", seed=2, **common)
    b = ap.PlasticityMonitor(texts, None, tmp_path / "b", seed=2, token_seed=5, **common)
    c = ap.PlasticityMonitor(texts, None, tmp_path / "c", seed=2, example_seed=6, **common)
    assert a.examples == b.examples and a.examples_csv == b.examples_csv and a.examples != c.examples
    assert a._sniff.seed == 2 and b._sniff.seed == 5
    assert b.fingerprint["options"]["token_seed"] == 5 and c.fingerprint["options"]["example_seed"] == 6
    with pytest.raises(ValueError, match="token_seed 'x'"):
        ap.PlasticityMonitor(texts, None, tmp_path / "d", token_seed="x", **common)


# --- the result set (the C++ side of issue 32): examples.csv, n_documents, run.json -----------

def test_the_result_set_holds_the_documents(decoder, tmp_path):
    import glob
    import json

    texts = texts_of([32 * 3] * 20 + [32 * 5] * 10, seed=1)
    result = profile(decoder, texts, max_seq_len=32, max_examples=48, layers=[0])
    assert (result.head_metrics.n_documents == 30).all() and (result.head_metrics.n_sequences == 48).all()
    result.write(tmp_path / "set")
    with open(tmp_path / "set" / "examples.csv") as f:
        assert f.read() == result.examples_csv
    (run_json,) = {os.path.realpath(p) for p in glob.glob(str(tmp_path / "set" / ".ap_results" / "*" / "run.json"))}
    with open(run_json) as f:
        run = json.load(f)
    assert run["units"] == "documents" and run["capture"] == result.capture_record


def test_profile_vectors_fingerprints_the_token_ids_given():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((3, 12, 4, 8)).astype(np.float32), rng.standard_normal((3, 12, 2, 8)).astype(np.float32)
    tokens = rng.integers(0, VOCAB, (3, 12))
    result = ap.profile_vectors({(0, "q"): q, (0, "k"): k}, lengths=[12, 10, 12], document_ids=[1, 1, 2],
                                token_ids=tokens, progress=False, warn=False, min_bucket_size=4, sampling_rate=1.0)
    table = read_examples(result)
    rows = [tokens[0].tolist(), tokens[1, :10].tolist(), tokens[2].tolist()]
    assert list(table.fingerprint) == [spec_hash(r) for r in rows]
    assert list(table.document_fingerprint) == [spec_hash(rows[0] + rows[1])] * 2 + [spec_hash(rows[2])]
    with pytest.raises(CaptureError, match="token_ids of batch 0"):
        ap.profile_vectors({(0, "q"): q, (0, "k"): k}, token_ids=tokens[:, :5], progress=False)
