"""Interpretability toolkits into the analysis (attention_plasticity.interop):
TransformerLens 4.3.0 (an ActivationCache -> from_activation_cache -> profile_vectors) and
nnsight 0.8.1 (the inputs of each layer's attention call saved in a trace ->
from_nnsight_inputs -> profile_vectors), on tiny models with seeded random weights, and the
README's section "Interop: TransformerLens and nnsight" run as written.

Independent checks: the TransformerLens states reproduce its own attention pattern
(softmax(q k^T / sqrt(d_head) + causal mask) == hook_pattern) and, for a TransformerBridge
around a transformers model, the model's own attention weights (an untouched copy run with
eager attention and output_attentions); the caches whose states cannot be shown to be the
vectors of the scores are refused with what to do (each message checked for it); the nnsight
states are exactly the ones attention_plasticity.capture records (whose correctness
test_capture_families.py checks), and profile_vectors on them equals profile_vectors on the
capture's.
Run: .venv/bin/python -m pytest -q tests/python/test_capture_toolkits.py
"""

import copy
import os
import re
import subprocess
import sys

import pytest
import torch
import transformers

import attention_plasticity as ap

from attention_plasticity import capture_sniffer as sniffer
capture = sniffer._capture
OPTIONS = dict(min_bucket_size=16, sampling_rate=1.0)


def tl_bridge(pe):
    from transformer_lens.model_bridge.sources.native import boot
    return boot(dict(n_layers=2, d_model=32, n_ctx=128, d_head=8, n_heads=4, d_vocab=97,
                     act_fn="gelu", positional_embedding_type=pe, normalization_type="LN",
                     n_key_value_heads=2, seed=0, device="cpu"))


def causal_attention(q, k):
    """softmax(q k^T / sqrt(d_head) + causal mask) of states [batch, seq, heads, d] (keys with
    their own, GQA, head count), in float64: the reference the states must reproduce."""
    q, k = q.double(), k.double()
    k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    seq = q.shape[1]
    s = s.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), -float("inf"))
    return s.softmax(-1)


def test_transformer_lens_cache():
    bridge = tl_bridge("standard")
    ids = torch.randint(0, 97, (3, 96), generator=torch.Generator().manual_seed(0))
    _, cache = bridge.run_with_cache(ids)
    states = sniffer.from_activation_cache(cache)
    assert sorted(states) == [(l, k) for l in range(2) for k in "kq"]
    for layer in range(2):
        want = cache[f"blocks.{layer}.attn.hook_pattern"].double()
        torch.testing.assert_close(causal_attention(states[layer, "q"], states[layer, "k"]), want,
                                   rtol=0, atol=1e-6)
    profile = sniffer.profile_vectors(states, **OPTIONS)
    assert profile.errors == [] and len(profile.head_metrics) == 8


def test_transformer_lens_native_rotary_is_refused_naming_the_path_that_works():
    # TransformerLens' native rotary model: the cache has the pre-rotary hook_q/hook_k and
    # hook_pattern, which they do not reproduce.
    bridge = tl_bridge("rotary")
    _, cache = bridge.run_with_cache(torch.randint(0, 97, (1, 40)))
    with pytest.raises(capture.CaptureError) as error:
        sniffer.from_activation_cache(cache)
    message = str(error.value)
    assert "does not give the cache's attention pattern" in message and "hook_rot_q" in message
    assert "build_bridge_from_module(model, architecture, hf_config=model.config)" in message
    assert "boot_transformers(name, hf_model=model" in message
    assert "attention_plasticity.profile_model" in message and "from_nnsight_inputs" in message


def tiny_llama(model_class=transformers.LlamaForCausalLM):
    """A tiny rotary (Llama) model with seeded random weights."""
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, initializer_range=0.3)
    torch.manual_seed(0)
    return model_class(config).eval()


def bridge_around(model):
    from transformer_lens.model_bridge.sources import build_bridge_from_module
    return build_bridge_from_module(model, "LlamaForCausalLM", hf_config=model.config)


def test_bridge_around_a_transformers_model_gives_the_states_of_its_attention():
    model = tiny_llama()
    reference = copy.deepcopy(model)  # the bridge replaces the model's modules in place
    reference.set_attn_implementation("eager")
    ids = torch.randint(0, 97, (3, 96), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = reference(input_ids=ids, output_attentions=True).attentions
    _, cache = bridge_around(model).run_with_cache(ids)
    states = ap.from_activation_cache(cache)
    assert sorted(states) == [(l, k) for l in range(2) for k in "kq"]
    for layer in range(2):
        assert states[layer, "q"] is cache[f"blocks.{layer}.attn.hook_rot_q"]
        torch.testing.assert_close(causal_attention(states[layer, "q"], states[layer, "k"]),
                                   want[layer].double(), rtol=0, atol=1e-6)
    profile = ap.profile_vectors(states, progress=False, warn=False, **OPTIONS)
    assert profile.errors == [] and len(profile.head_metrics) == 8


def qk_only(name):
    return name.endswith(("attn.hook_q", "attn.hook_k"))


def test_rotary_cache_without_hook_rot_or_pattern_is_refused_saying_what_to_keep():
    # The silent case before: hook_q/hook_k of a rotary model, nothing to check them against.
    model = tiny_llama()
    ids = torch.randint(0, 97, (1, 40), generator=torch.Generator().manual_seed(0))
    _, cache = bridge_around(model).run_with_cache(ids, names_filter=qk_only)
    assert sorted(cache.keys())[:2] == ["blocks.0.attn.hook_k", "blocks.0.attn.hook_q"]
    with pytest.raises(capture.CaptureError) as error:
        ap.from_activation_cache(cache)
    message = str(error.value)
    assert "positional_embedding_type is 'rotary'" in message
    assert "names_filter that keeps hook_rot_q and hook_rot_k (or hook_pattern" in message
    assert "build_bridge_from_module" in message
    # The same states as a plain dict: the rotary hooks named elsewhere in it tell.
    plain = {**dict(cache.items()), "blocks.0.attn.hook_rot_q": cache["blocks.0.attn.hook_q"],
             "blocks.0.attn.hook_rot_k": cache["blocks.0.attn.hook_k"]}
    with pytest.raises(capture.CaptureError, match="layer 1: .*the cache holds rotary hooks"):
        ap.from_activation_cache(plain)
    with pytest.raises(capture.CaptureError, match="keeps hook_rot_q and hook_rot_k"):
        ap.from_activation_cache(dict(cache.items()), rotary=True)


def test_cache_that_cannot_tell_is_refused_unless_told_rotary_false():
    bridge = tl_bridge("standard")
    _, cache = bridge.run_with_cache(torch.randint(0, 97, (2, 40)), names_filter=qk_only)
    # A standard model's cache says so (cfg): hook_q/hook_k are the vectors of the scores.
    assert sorted(ap.from_activation_cache(cache)) == [(l, k) for l in range(2) for k in "kq"]
    plain = dict(cache.items())  # no config, no rotary hooks, no pattern
    with pytest.raises(capture.CaptureError) as error:
        ap.from_activation_cache(plain)
    assert "cannot tell" in str(error.value)
    assert "pass rotary=False if the model has no rotary embedding" in str(error.value)
    with pytest.raises(capture.CaptureError, match="rotary='no': pass True or False"):
        ap.from_activation_cache(plain, rotary="no")
    states = ap.from_activation_cache(plain, rotary=False)
    assert all(states[l, k] is plain[f"blocks.{l}.attn.hook_{k}"] for l, k in states)


def test_cache_without_the_states_is_refused_saying_how_to_keep_them():
    bridge = tl_bridge("standard")
    _, cache = bridge.run_with_cache(torch.randint(0, 97, (1, 20)),
                                     names_filter=lambda name: name.endswith("hook_q"))
    with pytest.raises(capture.CaptureError,
                       match=r"neither blocks.0.attn.hook_rot_k nor blocks.0.attn.hook_k: run "
                             r"run_with_cache with a names_filter that keeps them"):
        ap.from_activation_cache(cache)
    with pytest.raises(capture.CaptureError, match="no blocks.L.attn.* entries: pass the "):
        ap.from_activation_cache({})


def test_nnsight_trace():
    from nnsight import NNsight
    model = tiny_llama(transformers.LlamaModel)
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


def test_nnsight_inputs_of_the_wrong_call_are_refused_saying_what_to_save():
    q = torch.zeros(1, 4, 8, 8)
    what = "save traced.<layers>[L].self_attn.source.attention_interface_1.inputs in the trace"
    with pytest.raises(capture.CaptureError, match=re.escape(f"saved is empty: {what}")):
        ap.from_nnsight_inputs({})
    # e.g. the attention module's output (attn_output, attn_weights) saved instead
    with pytest.raises(capture.CaptureError,
                       match=re.escape(f"layer 0: expected the inputs (module, query, key, ...)")):
        ap.from_nnsight_inputs({0: (torch.zeros(1, 8, 32), q)})
    with pytest.raises(capture.CaptureError, match=re.escape(what)):
        ap.from_nnsight_inputs({0: q})


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_interop_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    section = readme.split("\n## Interop: TransformerLens and nnsight\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_interop_examples_run_as_written_and_agree(tmp_path):
    # Each block is self-contained and runs alone, as a reader pastes it; the two toolkits see
    # the same model (same config and seed) and ids, so they print the same profile.
    blocks = readme_interop_blocks()
    assert len(blocks) == 2
    outputs = []
    for block, toolkit in zip(blocks, ("transformer_lens", "nnsight")):
        assert toolkit in block
        script = tmp_path / f"readme_interop_{toolkit}.py"
        script.write_text(block)
        proc = subprocess.run([sys.executable, "-W", "error::UserWarning", str(script)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{toolkit}: {proc.stderr}"
        lines = proc.stdout.splitlines()
        assert lines[0].split() == ["layer", "q_head", "ap_overall", "ap_overall_se"], toolkit
        assert len(lines) == 9, toolkit  # the header and the 2 x 4 heads, each with numbers
        assert all(re.match(r"\d+\s+\d\s+\d\s+0\.\d+\s+0\.\d+$", line) for line in lines[1:]), lines
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
