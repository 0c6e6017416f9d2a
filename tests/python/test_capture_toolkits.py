"""Interpretability toolkits into the analysis (attention_plasticity.capture_sniffer):
TransformerLens 4.3.0 (an ActivationCache -> from_activation_cache -> profile_vectors) and
nnsight 0.8.1 (the inputs of each layer's attention call saved in a trace ->
from_nnsight_inputs -> profile_vectors), on tiny models with seeded random weights.

Independent checks: the TransformerLens states reproduce its own attention pattern
(softmax(q k^T / sqrt(d_head) + causal mask) == hook_pattern), and a rotary bridge whose
cache holds only the pre-rotary hook_q/hook_k is refused; the nnsight states are exactly the
ones attention_plasticity.capture records (whose correctness test_capture_families.py checks),
and profile_vectors on them equals profile_vectors on the capture's.
Run: .venv/bin/python -m pytest -q tests/python/test_capture_toolkits.py
"""

import pytest
import torch
import transformers

from attention_plasticity import capture_sniffer as sniffer
capture = sniffer._capture
OPTIONS = dict(min_bucket_size=16, sampling_rate=1.0)


def tl_bridge(pe):
    from transformer_lens.model_bridge.sources.native import boot
    return boot(dict(n_layers=2, d_model=32, n_ctx=128, d_head=8, n_heads=4, d_vocab=97,
                     act_fn="gelu", positional_embedding_type=pe, normalization_type="LN",
                     n_key_value_heads=2, seed=0, device="cpu"))


def test_transformer_lens_cache():
    bridge = tl_bridge("standard")
    ids = torch.randint(0, 97, (3, 96), generator=torch.Generator().manual_seed(0))
    _, cache = bridge.run_with_cache(ids)
    states = sniffer.from_activation_cache(cache)
    assert sorted(states) == [(l, k) for l in range(2) for k in "kq"]
    for layer in range(2):
        q, k = states[layer, "q"].double(), states[layer, "k"].double()
        k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / 8 ** 0.5
        s = s.masked_fill(torch.triu(torch.ones(96, 96, dtype=torch.bool), 1), -float("inf"))
        want = cache[f"blocks.{layer}.attn.hook_pattern"].double()
        torch.testing.assert_close(s.softmax(-1), want, rtol=0, atol=1e-6)
    profile = sniffer.profile_vectors(states, **OPTIONS)
    assert profile.errors == [] and len(profile.head_metrics) == 8


def test_transformer_lens_rotary_without_hook_rot_is_refused():
    bridge = tl_bridge("rotary")
    _, cache = bridge.run_with_cache(torch.randint(0, 97, (1, 40)))
    with pytest.raises(capture.CaptureError, match="hook_rot_q"):
        sniffer.from_activation_cache(cache)


def test_nnsight_trace():
    from nnsight import NNsight
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, initializer_range=0.3)
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    ids = torch.randint(0, 97, (3, 96), generator=torch.Generator().manual_seed(0))
    traced = NNsight(model)
    saved = {}
    with traced.trace(ids):
        for layer in range(2):
            saved[layer] = traced.layers[layer].self_attn.source.attention_interface_1.inputs.save()
    states = sniffer.from_nnsight_inputs(saved)
    recorded = {}
    with capture.hook_qk(model, lambda l, k, x: recorded.setdefault((l, k), x.clone())), \
            torch.no_grad():
        model(input_ids=ids)
    assert sorted(states) == sorted(recorded)
    for key in states:
        assert torch.equal(states[key], recorded[key]), key
    a = sniffer.profile_vectors(states, **OPTIONS)
    b = sniffer.profile_vectors(recorded, **OPTIONS)
    assert a.errors == [] and len(a.head_metrics) == 8
    for name in a.tables:
        assert a.csv_text(name) == b.csv_text(name)
