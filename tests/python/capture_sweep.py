"""The family sweep of the capture (docs/method.md §1.6, issue 33): every model family of the
installed transformers (AutoModel's mapping, one base model class per model type) built small
from its config (seeded random weights, nothing downloaded), then for each exactly one of:

- ``captured``: attention_plasticity.capture accepts it, and for every captured layer and head
  softmax(scaling * q.k^T + mask) of the captured vectors (float64; the mask causal or full,
  the recorded window, the padding) equals the attention probabilities the model's own
  attention modules return (eager, output_attentions=True) on a right-padded batch;
- ``refused``: the capture raises CaptureError (its message is recorded);
- ``not_built_small``: the family cannot be built small from its config here (its config or
  model cannot be constructed with the sizes below, it has more than MAX_PARAMETERS
  parameters after shrinking, or it took more than SECONDS_PER_MODEL); the reason is recorded.
  These are outside the sweep: what cannot be built small is not a case the sweep can show.

A model the capture accepts whose probabilities cannot be compared, or differ, is a failure of
the sweep (``wrong``), never a fourth category. Run alone:
    .venv/bin/python tests/python/capture_sweep.py [--write tests/data/capture_sweep.json]
"""

import json
import signal
import sys
import time
import warnings

import numpy as np

SEQ = 8
MAX_PARAMETERS = 3_000_000
SECONDS_PER_MODEL = 30
TOLERANCE = 2e-4
SMALL = dict(hidden_size=32, d_model=32, n_embd=32, num_hidden_layers=2, num_layers=2, n_layer=2,
             encoder_layers=2, decoder_layers=2, num_attention_heads=4, n_head=4,
             encoder_attention_heads=4, decoder_attention_heads=4, num_key_value_heads=2,
             intermediate_size=37, encoder_ffn_dim=37, decoder_ffn_dim=37, d_ff=37, n_inner=37,
             ffn_dim=37, vocab_size=99, head_dim=8, d_kv=8, embedding_size=32,
             moe_intermediate_size=16, num_experts=4, num_local_experts=4, n_routed_experts=4,
             num_experts_per_tok=2, first_k_dense_replace=0, kv_lora_rank=16, q_lora_rank=16,
             qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)


class Timeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise Timeout(f"took more than {SECONDS_PER_MODEL} s")


def families():
    """[(model_type, model class name)] of AutoModel's mapping, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    out = []
    for model_type, name in sorted(MODEL_MAPPING_NAMES.items()):
        out.append((model_type, name[0] if isinstance(name, (tuple, list)) else name))
    return out


def small_config(model_type):
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    default = cls()

    def kwargs_for(config):
        out = {}
        for k, v in SMALL.items():
            try:
                now = getattr(config, k)
            except Exception:  # a per-layer attribute, say: left as the config has it
                continue
            if (isinstance(now, int) and not isinstance(now, bool)) or \
                    (now is None and k == "head_dim"):
                out[k] = v
        for k, v in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
            if isinstance(getattr(config, k, None), int) and "vocab_size" in out:
                out[k] = v  # within the small vocabulary
        return out

    sub = {}
    for name in getattr(default, "sub_configs", {}) or {}:
        value = getattr(default, name, None)
        if isinstance(value, transformers.PretrainedConfig):
            sub[name] = {**value.to_dict(), **kwargs_for(value)}
    wanted = kwargs_for(default)
    try:
        config = cls(**wanted, **sub)
    except Exception:  # sizes the config derives or checks otherwise: those it takes, one by one
        kept = {}
        for k, v in wanted.items():
            try:
                cls(**kept, **{k: v})
            except Exception:
                continue
            kept[k] = v
        try:
            config = cls(**kept, **sub)
        except Exception:
            config = cls(**kept)
    return config


def _probabilities(out, n_layers):
    """The model's attention probabilities in layer order from its output (self-attention:
    attentions, or encoder_attentions then decoder_attentions), when there are n_layers."""
    for names in (("attentions",), ("encoder_attentions", "decoder_attentions")):
        got = []
        for name in names:
            value = getattr(out, name, None)
            if value is None:
                got = None
                break
            got.extend(value)
        if got is not None and len(got) == n_layers and all(
                hasattr(p, "ndim") and p.ndim == 4 for p in got):
            return got
    return None


def verify(model, cap, kept, ids, mask, module_probs):
    """'' when every captured layer's softmax(scaling q.k + mask) equals the model's own
    probabilities, else what differs."""
    import torch

    infos = cap.layers
    probs = module_probs
    if any(layer not in probs for layer in infos):
        return f"no attention probabilities of layers {sorted(set(infos) - set(probs))}"
    valid = mask.sum(dim=1).numpy()
    for layer, info in sorted(infos.items()):
        if (layer, "q") not in kept or (layer, "k") not in kept:
            return f"layer {layer}: no vectors recorded"
        q, k = kept[layer, "q"], kept[layer, "k"]
        p = probs[layer].to(torch.float64).numpy()
        hq, hk = q.shape[2], k.shape[2]
        if p.shape[1] != hq:
            return f"layer {layer}: {hq} query heads captured, the model's probabilities have {p.shape[1]}"
        scale = info.scaling if info.scaling is not None else info.head_dim ** -0.5
        worst = np.inf
        for causal in (True, False):
            err = 0.0
            for b in range(q.shape[0]):
                n = int(valid[b])
                i = np.arange(n)[:, None]
                j = np.arange(n)[None, :]
                ok = np.ones((n, n), bool)
                if causal:
                    ok &= j <= i
                if info.sliding_window:
                    ok &= (i - j) < info.sliding_window
                for h in range(hq):
                    s = scale * q[b, :n, h] @ k[b, :n, h // (hq // hk)].T
                    if info.softcap:
                        s = info.softcap * np.tanh(s / info.softcap)
                    s = np.where(ok, s, -np.inf)
                    s = np.exp(s - s.max(axis=1, keepdims=True))
                    s /= s.sum(axis=1, keepdims=True)
                    err = max(err, float(np.abs(s - p[b, h, :n, :n]).max()),
                              float(np.abs(p[b, h, :n, n:]).max()) if p.shape[3] > n else 0.0)
            worst = min(worst, err)
        if not worst < TOLERANCE:
            return f"layer {layer}: softmax(scaling q.k + mask) differs from its probabilities by {worst:.3g}"
    return ""


def run_one(model_type, class_name):
    """(state, detail, seconds)."""
    import torch
    import transformers
    from attention_plasticity import capture

    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS_PER_MODEL)
    try:
        try:
            config = small_config(model_type)
            cls = getattr(transformers, class_name)
            with torch.device("meta"):
                probe = cls(config)
            count = sum(p.numel() for p in probe.parameters())
            del probe
            if count > MAX_PARAMETERS:
                return "not_built_small", f"{count} parameters after shrinking its config", start
            torch.manual_seed(0)
            try:
                config._attn_implementation = "eager"
            except Exception:
                pass
            model = cls(config).eval()
        except Timeout:
            raise
        except Exception as exc:
            return "not_built_small", f"{type(exc).__name__}: {str(exc)[:200]}", start
        vocab = int(getattr(capture._text_config(model), "vocab_size", None) or 99)
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(3, max(4, min(vocab, 90)), (2, SEQ), generator=g)
        mask = torch.ones(2, SEQ, dtype=torch.long)
        mask[1, SEQ - 3:] = 0
        kept = {}

        def on_vectors(layer, kind, x):
            kept[layer, kind] = x.to(torch.float64).numpy().copy()

        try:
            cap = capture.AttentionCapture(model, on_vectors)
        except capture.CaptureError as exc:
            return "refused", str(exc), start
        module_probs = {}
        handles = []
        try:
            calls = {}
            for layer, module in cap._modules:
                if module is None or any(module is m for _l, m in cap._modules[:0]):
                    continue

            def hook(module, _inputs, output):
                k = calls.get(id(module), 0)
                calls[id(module)] = k + 1
                layer = cap._depth.get((id(module), k))
                if layer is not None and isinstance(output, tuple) and len(output) > 1 \
                        and isinstance(output[1], torch.Tensor) and output[1].ndim == 4:
                    module_probs[layer] = output[1].detach().clone()

            for module in {id(m): m for _l, m in cap._modules if m is not None}.values():
                handles.append(module.register_forward_hook(hook))
            with torch.no_grad():
                try:
                    out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
                except capture.CaptureError as exc:
                    return "refused", str(exc), start
            if len(module_probs) < len(cap.layers):
                from_out = _probabilities(out, cap.num_layers)
                if from_out is not None:
                    module_probs = {layer: from_out[layer] for layer in cap.layers}
            wrong = verify(model, cap, kept, ids, mask, module_probs)
        finally:
            for handle in handles:
                handle.remove()
            cap.remove()
        if wrong:
            return "wrong", wrong, start
        return "captured", f"{len(cap.layers)} layers ({cap.path})", start
    except Timeout as exc:
        return "not_built_small", str(exc), start
    except Exception as exc:
        return "wrong", f"{type(exc).__name__}: {str(exc)[:300]}", start
    finally:
        signal.alarm(0)


def sweep(log=None):
    """{model_type: {"class", "state", "detail"}} and the seconds taken."""
    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import logging
    logging.getLogger("transformers").setLevel(logging.ERROR)
    out = {}
    t0 = time.perf_counter()
    for model_type, class_name in families():
        state, detail, start = run_one(model_type, class_name)
        out[model_type] = {"class": class_name, "state": state, "detail": detail,
                           "seconds": round(time.perf_counter() - start, 2)}
        if log:
            log(f"{model_type:28s} {state:16s} {out[model_type]['seconds']:6.2f}s {detail[:150]}")
    return out, time.perf_counter() - t0


def counts(results):
    keys = ("captured", "refused", "not_built_small", "wrong")
    return {k: sum(1 for r in results.values() if r["state"] == k) for k in keys}


if __name__ == "__main__":
    results, seconds = sweep(log=lambda line: print(line, flush=True))
    print(json.dumps(counts(results)), f"{seconds:.0f} s")
    if len(sys.argv) > 2 and sys.argv[1] == "--write":
        import transformers
        lines = [f"  {json.dumps(t)}: {json.dumps({'state': r['state'], 'class': r['class'], 'detail': r['detail'][:160]})}"
                 for t, r in sorted(results.items())]
        with open(sys.argv[2], "w") as f:
            f.write("{\n \"transformers\": " + json.dumps(transformers.__version__) + ",\n")
            f.write(" \"made_by\": \"tests/python/capture_sweep.py --write tests/data/capture_sweep.json\",\n")
            f.write(" \"counts\": " + json.dumps(counts(results), sort_keys=True) + ",\n")
            f.write(" \"families\": {\n" + ",\n".join(lines) + "\n }\n}\n")
