"""Query and key states from interpretability toolkits, for ``profile_vectors``.

- TransformerLens: ``from_activation_cache(cache)`` takes an ActivationCache's
  ``blocks.L.attn.hook_rot_q`` / ``hook_rot_k`` (rotary models) or ``hook_q`` / ``hook_k``,
  and refuses states it cannot show to be the vectors of the scores;
- nnsight: ``from_nnsight_inputs(saved)`` takes the inputs of each layer's call of transformers'
  attention function saved in a trace (the states ``attention_plasticity.capture`` records).

Both return {(layer, 'q' | 'k'): tensor [batch, seq, heads, head_dim]} for
``attention_plasticity.profile_vectors``. README.md, "Interop: TransformerLens and nnsight",
shows both in a few lines.

Documents (docs/method.md §1.1, §8.3): the states carry no text, so give profile_vectors the
token ids the states were computed from (``token_ids=tokens``, the tensor given to
run_with_cache or the trace) and, when rows are chunks of longer texts, the document of each row
(``document_ids=``): the result set then records each example's document, chunk and
fingerprints (examples.csv), the errors count documents, and a comparison can check that two
profiles read the same texts. Without them each row is its own document, with no fingerprint.
"""

from .capture import CaptureError

# What works where a TransformerLens cache cannot give the vectors of the scores: said by every
# refusal of from_activation_cache, so that each names the way out.
_TL_WAY_OUT = (
    "what works: wrap the transformers model in a TransformerBridge (transformer_lens.model_bridge"
    ".sources.build_bridge_from_module(model, architecture, hf_config=model.config), the "
    "architecture being the model's class name such as 'LlamaForCausalLM', or "
    "TransformerBridge.boot_transformers(name, hf_model=model, tokenizer=tokenizer)), whose "
    "cache has hook_rot_q/hook_rot_k; or profile the transformers model itself with "
    "attention_plasticity.profile_model, or an nnsight trace with from_nnsight_inputs")
# Positional schemes whose scores are q.k of hook_q/hook_k (TransformerLens' cfg names): learned
# or sinusoidal absolute positions enter the residual stream (shortformer: the attention's input)
# before the projections, so the projections hold them.
_ABSOLUTE = ("standard", "shortformer")


def _positional_type(cache):
    """cfg.positional_embedding_type of the model that made the cache (ActivationCache.model:
    a TransformerBridge or HookedTransformer), or None where the cache carries no config."""
    cfg = getattr(getattr(cache, "model", None), "cfg", None)
    kind = getattr(cfg, "positional_embedding_type", None)
    return kind if isinstance(kind, str) else None


def from_activation_cache(cache, num_layers=None, *, rotary=None):
    """{(layer, kind): tensor} of a TransformerLens ActivationCache for profile_vectors.

    Takes ``blocks.L.attn.hook_rot_q`` / ``hook_rot_k`` where present (rotary models: the
    states after the rotary embedding), else ``hook_q`` / ``hook_k`` ([batch, pos, heads,
    d_head]). ``num_layers``: the layers 0..num_layers-1 (default all the cache's blocks).
    ``rotary``: whether the model is rotary, for a cache that cannot tell (a plain dict);
    default: the cache's ``model.cfg.positional_embedding_type``, else the presence of rotary
    hooks (``hook_rot_*``, ``hook_cos``) anywhere in the cache; given, it overrides both.

    The states must be the vectors of the scores; CaptureError, saying what to do, where:
    - a layer's cache has neither hook_rot_q nor hook_q (or k): run ``run_with_cache`` with a
      ``names_filter`` that keeps them;
    - the cache holds ``hook_pattern`` and its log-probabilities are not a single factor
      (TransformerLens' 1/attn_scale) times q.k of the states taken plus a constant per query,
      on every entry with weight: e.g. a rotary model whose cache has only the pre-rotary
      hook_q/hook_k, as TransformerLens' native rotary models (``boot_native``) give; the
      message names what works (a TransformerBridge around the transformers model, whose
      cache has hook_rot_q/hook_rot_k, or ``profile_model`` / nnsight on that model);
    - a rotary model (or one whose positions enter the scores otherwise, e.g. ALiBi) whose
      cache has neither hook_rot_q/hook_rot_k nor hook_pattern: its hook_q/hook_k cannot be
      checked and are not the vectors of the scores: keep hook_rot_q/hook_rot_k or
      hook_pattern in ``names_filter``;
    - a cache that cannot tell whether the model is rotary (no config, no rotary hooks) and
      has no hook_pattern: pass ``rotary=False`` if the model has none, or keep hook_pattern.
    """
    function = "from_activation_cache"
    if rotary not in (None, True, False):
        raise CaptureError(f"{function}: rotary={rotary!r}: pass True or False (whether the model "
                           f"has a rotary embedding), or leave it None to read it from the cache")
    keys = set(cache.keys())
    if num_layers is None:
        blocks = [int(k.split(".")[1]) for k in keys
                  if k.startswith("blocks.") and k.split(".")[1].isdigit()]
        if not blocks:
            raise CaptureError(f"{function}: the cache has no blocks.L.attn.* entries: pass the "
                               f"ActivationCache of run_with_cache (model.run_with_cache(tokens))")
        num_layers = 1 + max(blocks)
    if rotary is None:
        kind = _positional_type(cache)
        if kind is not None:
            rotary, origin = kind not in _ABSOLUTE, \
                f"the cache's model.cfg.positional_embedding_type is {kind!r}"
        elif any(".hook_rot_" in k or k.endswith((".hook_cos", ".hook_sin")) for k in keys):
            rotary, origin = True, "the cache holds rotary hooks (hook_rot_*, hook_cos)"
        else:
            origin = "the cache has no model config and no rotary hooks"
    else:
        origin = f"rotary={rotary!r}"
    out = {}
    for layer in range(num_layers):
        attn = f"blocks.{layer}.attn"
        names = {}
        for kind in "qk":
            for name in (f"{attn}.hook_rot_{kind}", f"{attn}.hook_{kind}"):
                if name in keys:
                    out[layer, kind] = cache[name]
                    names[kind] = name
                    break
            else:
                raise CaptureError(
                    f"{function}: the cache has neither {attn}.hook_rot_{kind} nor "
                    f"{attn}.hook_{kind}: run run_with_cache with a names_filter that keeps "
                    f"them, e.g. names_filter=lambda name: name.endswith(('hook_rot_q', "
                    f"'hook_rot_k', 'hook_q', 'hook_k', 'hook_pattern'))")
        pattern_name = f"{attn}.hook_pattern"
        pre_rotary = not names["q"].endswith("hook_rot_q") or not names["k"].endswith("hook_rot_k")
        if pattern_name in keys:
            error = _pattern_misfit(out[layer, "q"], out[layer, "k"], cache[pattern_name])
            if error > 1e-3:
                why = ("a rotary model whose cache has no hook_rot_q/hook_rot_k, as TransformerLens' "
                       "native rotary models give" if pre_rotary else
                       "the scores hold a term q.k has not, e.g. ALiBi or soft-capping")
                raise CaptureError(
                    f"{function}: layer {layer}: {names['q']} . {names['k']} does not give the "
                    f"cache's attention pattern (log-probabilities off by {error:.3g}): these "
                    f"are not the vectors of the scores ({why}); {_TL_WAY_OUT}")
        elif pre_rotary and rotary is None:
            raise CaptureError(
                f"{function}: layer {layer}: cannot tell whether {names['q']} / {names['k']} are "
                f"the vectors of the scores ({origin}, and no {pattern_name} to check them "
                f"against): pass rotary=False if the model has no rotary embedding, or run "
                f"run_with_cache with a names_filter that keeps hook_rot_q/hook_rot_k or "
                f"hook_pattern")
        elif pre_rotary and rotary:
            raise CaptureError(
                f"{function}: layer {layer}: the positions enter the model's scores after the "
                f"projections ({origin}) but the cache has "
                f"neither {attn}.hook_rot_q/hook_rot_k nor {pattern_name}: {names['q']} / "
                f"{names['k']} are taken before the positions enter the scores, not their "
                f"vectors: run run_with_cache with a names_filter that keeps hook_rot_q and "
                f"hook_rot_k (or hook_pattern, to check the states against); {_TL_WAY_OUT}")
    return out


def _pattern_misfit(q, k, pattern):
    """How far log(pattern) is from c * q.k + a constant per query row, for the best single
    factor c (the scaling), over the entries the pattern gives weight (> 1e-6): the largest
    residual, relative to the largest centered log-probability (0: q, k are the vectors of
    the scores whatever the scaling and mask)."""
    import torch

    q, k = q.detach().to(torch.float64), k.detach().to(torch.float64)
    k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
    qk = torch.einsum("bqhd,bkhd->bhqk", q, k)
    logp = pattern.detach().to(torch.float64).clamp_min(1e-300).log()
    ok = pattern.detach() > 1e-6
    count = ok.sum(-1, keepdim=True).clamp_min(1)
    center = lambda x: torch.where(ok, x - (x * ok).sum(-1, keepdim=True) / count, 0.0)  # noqa
    x, y = center(qk)[ok], center(logp)[ok]
    factor = (x @ y) / max(float(x @ x), 1e-300)
    return float((y - factor * x).abs().max()) / max(1.0, float(y.abs().max()))


def from_nnsight_inputs(saved):
    """{(layer, kind): tensor} for profile_vectors from what an nnsight trace saved of each
    layer's attention call.

    ``saved``: {layer: inputs}, each ``inputs`` what
    ``traced.<layers>[L].self_attn.source.attention_interface_1.inputs.save()`` gave inside
    ``with traced.trace(ids):`` (traced = nnsight.NNsight(model) of a transformers model):
    the (args, kwargs) of the call of transformers' attention function, args = (module,
    query [batch, heads, seq, d], key, value, mask), whose query and key are the states after
    the rotary embedding that attention_plasticity.capture records. Only the query and key are
    taken (moved to [batch, seq, heads, d]); the mask is not applied: pass ``lengths`` to
    profile_vectors for padded examples.

    CaptureError where ``saved`` is empty or an entry is not such inputs (e.g. the module's
    ``.output``, or the inputs of the attention module rather than of the call inside it):
    save ``.source.attention_interface_1.inputs`` of each attention module
    (``print(traced.<layers>[0].self_attn.source)`` lists the calls of its forward, and the
    name of the call of the attention function in this model).
    """
    function = "from_nnsight_inputs"
    what = ("save traced.<layers>[L].self_attn.source.attention_interface_1.inputs in the trace "
            "(print(traced.<layers>[0].self_attn.source) names the call of the attention "
            "function in this model)")
    if not saved:
        raise CaptureError(f"{function}: saved is empty: {what}")
    out = {}
    for layer, inputs in saved.items():
        args = inputs[0] if isinstance(inputs, tuple) and len(inputs) == 2 \
            and isinstance(inputs[1], dict) else inputs
        if not isinstance(args, (tuple, list)) or len(args) < 3 \
                or getattr(args[1], "ndim", 0) != 4 or getattr(args[2], "ndim", 0) != 4:
            raise CaptureError(f"{function}: layer {layer}: expected the inputs (module, query, "
                               f"key, ...) of the attention function's call, got "
                               f"{type(inputs).__name__}: {what}")
        out[layer, "q"] = args[1].detach().transpose(1, 2)
        out[layer, "k"] = args[2].detach().transpose(1, 2)
    return out
