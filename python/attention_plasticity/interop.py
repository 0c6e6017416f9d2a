"""Query and key states from interpretability toolkits, for ``profile_vectors``.

- TransformerLens: ``from_activation_cache(cache)`` takes an ActivationCache's
  ``blocks.L.attn.hook_rot_q`` / ``hook_rot_k`` (rotary models) or ``hook_q`` / ``hook_k``;
- nnsight: ``from_nnsight_inputs(saved)`` takes the inputs of each layer's call of transformers'
  attention function saved in a trace (the states ``attention_plasticity.capture`` records).

Both return {(layer, 'q' | 'k'): tensor [batch, seq, heads, head_dim]} for
``attention_plasticity.profile_vectors``.
"""

from .capture import CaptureError


def from_activation_cache(cache, num_layers=None):
    """{(layer, kind): tensor} of a TransformerLens ActivationCache for profile_vectors:
    ``blocks.L.attn.hook_rot_q`` / ``hook_rot_k`` where present (rotary models), else
    ``hook_q`` / ``hook_k`` ([batch, pos, heads, d_head]). Where the cache also holds
    ``hook_pattern``, its log-probabilities must be a single factor (TransformerLens'
    1/attn_scale) times q.k of the states taken plus a constant per query, on every entry
    with weight, else CaptureError: e.g. a rotary model whose cache has only the pre-rotary
    hook_q/hook_k (TransformerLens 4's native rotary bridge)."""

    keys = set(cache.keys())
    if num_layers is None:
        num_layers = 1 + max(int(k.split(".")[1]) for k in keys if k.startswith("blocks."))
    out = {}
    for layer in range(num_layers):
        names = {}
        for kind in "qk":
            for name in (f"blocks.{layer}.attn.hook_rot_{kind}", f"blocks.{layer}.attn.hook_{kind}"):
                if name in keys:
                    out[layer, kind] = cache[name]
                    names[kind] = name
                    break
            else:
                raise CaptureError(f"from_activation_cache: the cache has neither "
                                   f"blocks.{layer}.attn.hook_rot_{kind} nor hook_{kind} (run "
                                   f"the model with run_with_cache and no names_filter that "
                                   f"drops them)")
        pattern_name = f"blocks.{layer}.attn.hook_pattern"
        if pattern_name in keys:
            error = _pattern_misfit(out[layer, "q"], out[layer, "k"], cache[pattern_name])
            if error > 1e-3:
                raise CaptureError(
                    f"from_activation_cache: layer {layer}: {names['q']} . {names['k']} does not "
                    f"give the cache's attention pattern (log-probabilities off by "
                    f"{error:.3g}): these are not the vectors of the scores (a rotary model "
                    f"whose cache has no hook_rot_q/hook_rot_k?)")
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
    layer's attention call: ``{layer: module.self_attn.source.attention_interface_1.inputs
    .save()}`` ((args, kwargs) of the call of transformers' attention function, args =
    (module, query [batch, heads, seq, d], key, value, mask): the states after the rotary
    embedding that attention_plasticity.capture records)."""
    out = {}
    for layer, inputs in saved.items():
        args = inputs[0] if isinstance(inputs, tuple) and len(inputs) == 2 \
            and isinstance(inputs[1], dict) else inputs
        if len(args) < 3 or getattr(args[1], "ndim", 0) != 4 or getattr(args[2], "ndim", 0) != 4:
            raise CaptureError(f"from_nnsight_inputs: layer {layer}: expected the inputs "
                               f"(module, query, key, ...) of the attention function's call")
        out[layer, "q"] = args[1].detach().transpose(1, 2)
        out[layer, "k"] = args[2].detach().transpose(1, 2)
    return out
