"""The registry capture of attention_plasticity.capture on many transformers families.

For each family a tiny model is built from its config class with seeded random weights
(nothing downloaded). The check is independent of the capture: softmax(scaling * q k^T +
mask), computed in float64 from the captured vectors with a mask built here from the rule
the model states (causal, the layer's recorded sliding window, the padding; Gemma 2's
recorded logit softcap), must equal the
attention probabilities the model itself returns (eager, output_attentions=True) to 1e-5, for
every layer and head, on a right-padded batch; and the model's outputs with the capture on
must equal those with it off (sdpa and eager). The recorded sliding window of each layer
must be the model's (None for full attention), NoPE layers must be recorded as such.
Shared attention modules (ALBERT's one module for 4 depths, Zamba2's shared blocks) are one
layer per depth, checked against what each call of the module returns; models whose scores
carry more than q.k (T5's relative position bias, ALiBi in Bloom, MPT, Falcon) are refused
with a message naming the layer or the bias, and so are masks built here that are not
causal/full with window and padding.
Run: .venv/bin/python -m pytest -q tests/python/test_capture_families.py
"""

import numpy as np
import pytest
import torch
import transformers

from attention_plasticity import capture

SEQ = 12
WINDOW = 4  # a window shorter than the sequence, so that it shows in the probabilities
COMMON = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              initializer_range=0.4, pad_token_id=0)

# family -> (config class name, options beyond COMMON, expected windows, expected NoPE layers)
FAMILIES = {
    "llama": ("LlamaConfig", {}, [None] * 4, []),
    "qwen2": ("Qwen2Config", dict(use_sliding_window=True, sliding_window=WINDOW,
                                  max_window_layers=2), [None, None, WINDOW, WINDOW], []),
    "qwen3": ("Qwen3Config", dict(head_dim=8), [None] * 4, []),
    "mistral": ("MistralConfig", dict(sliding_window=WINDOW), [WINDOW] * 4, []),
    "gemma3": ("Gemma3TextConfig", dict(head_dim=8, sliding_window=WINDOW,
                                        layer_types=["sliding_attention", "full_attention",
                                                     "sliding_attention", "full_attention"]),
               [WINDOW, None, WINDOW, None], []),
    "gemma2": ("Gemma2Config", dict(head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=8,
                                    attn_logit_softcapping=5.0,
                                    layer_types=["sliding_attention", "full_attention"] * 2),
               [WINDOW, None, WINDOW, None], []),
    "smollm3": ("SmolLM3Config", dict(no_rope_layer_interval=2), [None] * 4, [1, 3]),
    "phi3": ("Phi3Config", {}, [None] * 4, []),
    "olmo2": ("Olmo2Config", {}, [None] * 4, []),
    "granite": ("GraniteConfig", {}, [None] * 4, []),
    "starcoder2": ("Starcoder2Config", dict(sliding_window=None), [None] * 4, []),
    "glm": ("GlmConfig", dict(head_dim=8), [None] * 4, []),
    "gemma": ("GemmaConfig", dict(head_dim=8), [None] * 4, []),
    "cohere": ("CohereConfig", {}, [None] * 4, []),
}


def build(family, attn):
    name, extra, _, _ = FAMILIES[family]
    config = getattr(transformers, name)(**{**COMMON, **extra})
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config, attn_implementation=attn).eval()


def batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 90, (2, SEQ), generator=g)
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0  # right padding
    return ids, mask


def allowed(seq, valid, window, causal=True):
    i = np.arange(seq)[:, None]
    j = np.arange(seq)[None, :]
    ok = (j < valid) & (i >= 0)
    if causal:
        ok &= j <= i
    if window is not None:
        ok &= (i - j) < window  # transformers' sliding window: the last `window` keys
    return ok


def attention_calls(model, class_name):
    """The attention probabilities each call of the model's ``class_name`` modules returns,
    in call order, from forward hooks on those modules (not through the capture): one per
    depth, whether the module is shared or not."""
    got, handles = [], []
    for module in model.modules():
        if type(module).__name__ == class_name:
            handles.append(module.register_forward_hook(
                lambda _m, _i, out: got.append(out[1].detach().clone())))
    return got, handles


def check_probabilities(model, causal=True, windows=None, nope=(), attention_class=None):
    ids, mask = batch()
    kept = {}

    def on_vectors(layer, kind, x):
        assert (layer, kind) not in kept, f"layer {layer} {kind} recorded twice in one pass"
        kept[layer, kind] = x.to(torch.float64).numpy().copy()

    with capture.hook_qk(model, on_vectors) as cap, torch.no_grad():
        calls, handles = attention_calls(model, attention_class) if attention_class \
            else ([], [])
        try:
            out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        finally:
            for handle in handles:
                handle.remove()
    attentions = calls if attention_class else out.attentions
    infos = cap.layers
    assert sorted(infos) == list(range(len(attentions)))
    if windows is not None:
        assert [infos[layer].sliding_window for layer in sorted(infos)] == windows
    assert [layer for layer in sorted(infos) if infos[layer].nope] == list(nope)
    for layer, info in infos.items():
        q, k = kept[layer, "q"], kept[layer, "k"]
        group = q.shape[2] // k.shape[2]
        want = attentions[layer].to(torch.float64).numpy()
        for b in range(2):
            valid = int(mask[b].sum())
            ok = allowed(SEQ, valid, info.sliding_window, causal)
            for h in range(q.shape[2]):
                scores = info.scaling * q[b, :, h] @ k[b, :, h // group].T
                if info.softcap:  # Gemma 2: the scores are capped (recorded by the capture)
                    scores = info.softcap * np.tanh(scores / info.softcap)
                scores = np.where(ok, scores, -np.inf)
                probs = np.exp(scores - scores.max(axis=1, keepdims=True))
                probs /= probs.sum(axis=1, keepdims=True)
                np.testing.assert_allclose(probs[:valid], want[b, h, :valid], rtol=0, atol=1e-5,
                                           err_msg=f"layer {layer} head {h} batch row {b}")
    return infos


def check_unchanged(model):
    ids, mask = batch()
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).last_hidden_state
        with capture.hook_qk(model, lambda *a: None):
            during = model(input_ids=ids, attention_mask=mask).last_hidden_state
        after = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(before, during) and torch.equal(before, after)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family(family):
    _, _, windows, nope = FAMILIES[family]
    eager = build(family, "eager")
    infos = check_probabilities(eager, windows=windows, nope=nope)
    assert all(info.rope != info.nope for info in infos.values())
    assert infos[0].hook_name("q") == "blocks.0.attn.hook_rot_q"
    check_unchanged(eager)
    if type(eager)._supports_sdpa:  # not Gemma 2 (softcapping)
        sdpa = build(family, "sdpa")
        assert sdpa.config._attn_implementation == "sdpa"
        check_unchanged(sdpa)
        assert sdpa.config._attn_implementation == "sdpa"  # restored


def test_gqa_key_heads_once():
    model = build("llama", "sdpa")
    shapes = {}
    with capture.hook_qk(model, lambda l, kind, x: shapes.setdefault(kind, tuple(x.shape))), \
            torch.no_grad():
        model(input_ids=batch()[0])
    assert shapes == {"q": (2, SEQ, 4, 8), "k": (2, SEQ, 2, 8)}


def test_one_capture_at_a_time():
    model = build("llama", "sdpa")
    with capture.hook_qk(model, lambda *a: None):
        with pytest.raises(capture.CaptureError, match="already being captured"):
            capture.hook_qk(model, lambda *a: None)
        assert model.config._attn_implementation.startswith(capture.KEY_PREFIX)
    assert model.config._attn_implementation == "sdpa"
    with capture.hook_qk(model, lambda *a: None):  # free again
        pass


def test_bert_through_the_registry():
    config = transformers.BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=48,
                                     initializer_range=0.4, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    with capture.hook_qk(model, lambda *a: None) as cap:
        assert cap.path == "registry"
    infos = check_probabilities(model, causal=False, windows=[None, None])
    assert infos[0].hook_name("k") == "blocks.0.attn.hook_k"
    check_unchanged(model)


def test_roformer_is_refused():
    config = transformers.RoFormerConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=48,
                                         embedding_size=32)
    model = transformers.RoFormerModel(config).eval()
    with pytest.raises(capture.CaptureError, match="roformer.*registry"):
        capture.hook_qk(model, lambda *a: None)


def test_pre_rope_of_qwen3_is_the_q_norm_output():
    model = build("qwen3", "eager")
    ids = batch()[0]
    pre, post = {}, {}
    with capture.AttentionCapture(model, lambda l, k, x: pre.setdefault((l, k), x.clone()),
                                  pre_rope=True), torch.no_grad():
        model(input_ids=ids)
    with capture.hook_qk(model, lambda l, k, x: post.setdefault((l, k), x.clone())), \
            torch.no_grad():
        model(input_ids=ids)
    # position 0: the rotary embedding is the identity there; elsewhere it is not
    for key in post:
        torch.testing.assert_close(pre[key][:, 0], post[key][:, 0], rtol=0, atol=1e-6)
        assert not torch.allclose(pre[key][:, 1:], post[key][:, 1:], atol=1e-3)
        torch.testing.assert_close(pre[key].norm(dim=-1), post[key].norm(dim=-1),
                                   rtol=1e-5, atol=1e-5)  # a rotation keeps the norm
    assert capture.LayerInfo(0, "", 1, 1, 1, True, False).hook_name("q", pre_rope=True) == \
        "blocks.0.attn.hook_q"


# --- Shared attention modules: one layer per depth (issue 25, 1) ---------------------------

def test_albert_shared_module_is_one_layer_per_depth():
    # ALBERT's one attention module serves its 4 depths: 4 layers, each with its own states,
    # checked against what each call of the module returns.
    config = transformers.AlbertConfig(vocab_size=97, embedding_size=16, hidden_size=32,
                                       num_hidden_layers=4, num_attention_heads=4,
                                       intermediate_size=48, initializer_range=0.4,
                                       pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.AlbertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    assert len({id(m) for m in model.modules() if type(m).__name__ == "AlbertAttention"}) == 1
    infos = check_probabilities(model, causal=False, windows=[None] * 4,
                                attention_class="AlbertAttention")
    assert sorted(infos) == [0, 1, 2, 3]
    assert len({info.module_name.split("#")[0] for info in infos.values()}) == 1
    check_unchanged(model)
    got = []
    with capture.hook_qk(model, lambda l, k, x: got.append((l, k)), layers=[2]), \
            torch.no_grad():
        model(input_ids=batch()[0])
        model(input_ids=batch()[0])  # the count of calls restarts with each forward pass
    assert got == [(2, "q"), (2, "k")] * 2


def test_albert_depths_are_not_pooled_into_one_head():
    # profile_model / capture_qk.py read run_capture: each depth its own head, with one row per
    # token (not 4 depths' rows pooled under layer 0).
    from attention_plasticity import capture_sniffer as sniffer
    config = transformers.AlbertConfig(vocab_size=97, embedding_size=16, hidden_size=32,
                                       num_hidden_layers=4, num_attention_heads=4,
                                       intermediate_size=48, initializer_range=0.4)
    torch.manual_seed(0)
    model = transformers.AlbertModel(config, add_pooling_layer=False).eval()
    examples = [list(range(3, 3 + SEQ)), list(range(20, 20 + SEQ - 3))]
    sink = sniffer.MemorySink()
    options = sniffer.SnifferOptions(sampling_rate=1.0, capture_token_strings=False)
    plan, layers, tokens = sniffer.run_capture(model, examples, sink, options)
    assert sorted(plan) == sorted(layers) == [0, 1, 2, 3] and tokens == 2 * SEQ - 3
    direct = {}
    with capture.hook_qk(model, lambda l, k, x: direct.setdefault((l, k), x[0].clone())), \
            torch.no_grad():
        model(input_ids=torch.tensor([examples[0]]))
    for layer in range(4):
        q = sink.columns(layer, 1, "q")
        assert len(q["position"]) == tokens  # one row per token and depth
        np.testing.assert_allclose(q["vector"][:SEQ], direct[layer, "q"][:, 1].numpy(),
                                   rtol=0, atol=1e-5)


def zamba2():
    config = transformers.Zamba2Config(
        vocab_size=97, hidden_size=32, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=4, n_mamba_heads=8, mamba_d_state=8, chunk_size=16,
        num_mem_blocks=2, use_shared_attention_adapter=True, adapter_rank=4,
        layers_block_type=["mamba", "hybrid"] * 3, intermediate_size=48,
        initializer_range=0.4, pad_token_id=0, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.Zamba2Model(config).eval()


def test_zamba2_shared_blocks_are_one_layer_per_depth():
    # Zamba2's shared transformer blocks (layer_idx -1 in every one, per-depth adapters on
    # q/k): a layer per hybrid depth, in call order, checked against each call's attention.
    model = zamba2()
    model.set_attn_implementation("eager")
    infos = check_probabilities(model, windows=[None] * 3, attention_class="Zamba2Attention")
    assert [info.module_name for info in infos.values()] == \
        [f"layers.{i}.shared_transformer.self_attn" for i in (1, 3, 5)]
    check_unchanged(model)


# --- Position bias inside the attention: refused (issue 25, 2) -----------------------------

def test_t5_encoder_relative_position_bias_is_refused():
    config = transformers.T5Config(vocab_size=97, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                                   num_heads=4, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.T5EncoderModel(config).eval()
    model.set_attn_implementation("eager")
    # the reason: a relative position bias is added to q.k inside the attention function
    assert model.encoder.block[0].layer[0].SelfAttention.has_relative_attention_bias
    with pytest.raises(capture.CaptureError,
                       match=r"layer 0 \('encoder\.block\.0\.layer\.0\.SelfAttention'\) of "
                             r"model type 't5'.*'position_bias'.*refused"):
        capture.hook_qk(model, lambda *a: None)
    assert model.config._attn_implementation == "eager"  # restored after the refusal
    for implementation in ("sdpa",):
        model.set_attn_implementation(implementation)
        with pytest.raises(capture.CaptureError, match="position_bias|0 and -inf"):
            capture.hook_qk(model, lambda *a: None)


@pytest.mark.parametrize("family", ["bloom", "mpt", "falcon"])
def test_alibi_models_are_refused(family):
    torch.manual_seed(0)
    if family == "bloom":
        model = transformers.BloomModel(transformers.BloomConfig(
            vocab_size=97, hidden_size=32, n_layer=2, n_head=4))
    elif family == "mpt":
        model = transformers.MptModel(transformers.MptConfig(
            vocab_size=97, d_model=32, n_layers=2, n_heads=4, max_seq_len=64))
    else:
        model = transformers.FalconModel(transformers.FalconConfig(
            vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            alibi=True))
    with pytest.raises(capture.CaptureError,
                       match=rf"model type '{family}'.*ALiBi bias.*Refused.*capture a model"):
        capture.hook_qk(model.eval(), lambda *a: None)


def causal_mask(valid, seq, window=None, dtype=torch.float32):
    ok = torch.from_numpy(allowed(seq, valid, window))
    return torch.where(ok, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


def test_scores_check_of_each_attention_call():
    # What an attention function receives, built here: a causal + padding + window mask is
    # accepted, as bool or additive float; an ALiBi bias folded into the float mask, a
    # prefix (bidirectional prefix) mask and a tensor argument beside q/k are refused.
    q = torch.zeros(1, 4, 8, 8)
    ok = causal_mask(6, 8, window=3)
    capture._check_scores(None, "layer 0", q, q, ok, 3, {"scaling": 0.5}, [])
    capture._check_scores(None, "layer 0", q, q, ok == 0, 3, {}, [])
    capture._check_scores(None, "layer 0", q, q, causal_mask(8, 8)[..., :8] * 0, None, {}, [])
    left = torch.from_numpy(allowed(8, 8, None))  # left padding by 2, as sdpa's bool mask:
    left[:, :2] = False                              # the padding keys removed, and the
    left[:2] = True                                  # padding queries' rows unmasked
    capture._check_scores(None, "layer 0", q, q, left[None, None], None, {}, [])
    distance = (torch.arange(8)[None, :] - torch.arange(8)[:, None]).float()
    alibi = causal_mask(8, 8) + torch.where(causal_mask(8, 8) == 0, 0.25 * distance, 0.0)
    with pytest.raises(capture.CaptureError, match="values other than 0 and -inf.*ALiBi"):
        capture._check_scores(None, "layer 1", q, q, alibi, None, {}, [])
    prefix = causal_mask(8, 8) == 0
    prefix[..., :3, :3] = True
    with pytest.raises(capture.CaptureError, match="layer 2.*neither causal nor full"):
        capture._check_scores(None, "layer 2", q, q, prefix, None, {}, [])
    with pytest.raises(capture.CaptureError, match="layer 3.*'s_aux'"):
        capture._check_scores(None, "layer 3", q, q, None, None, {"s_aux": torch.zeros(4)}, [])
    with pytest.raises(capture.CaptureError, match="window 2"):
        capture._check_scores(None, "layer 4", q, q, ok, 2, {}, [])
