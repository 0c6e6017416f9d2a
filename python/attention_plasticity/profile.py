"""A live model's attention plasticity in memory: ``profile_model`` (a transformers model and
texts), ``profile_vectors`` (states another tool captured: ``attention_plasticity.interop``), and
their result ``ModelProfile``. The capture is qk-sniffer's (``qk_sniffer``: options, plans, the
recorder, the memory sink); the heads are analyzed by analyze_dump's run
(``DumpRun.from_memory``), so the tables, the CSV bytes and the result set are analyze_dump's.
"""

import difflib
import sys

import numpy as np

from . import capture as _capture
from ._core.head import HeadOptions as _HeadOptions
from . import results as _results
from .dump import DumpResult as _DumpResult  # profile_model's result is a DumpResult
from .layout import parse_head_folder
from .qk_sniffer import (CaptureError, MemorySink, Sniffer, SnifferOptions, check_example_ids,
                         plan_heads, run_capture)

# The name of an in-memory capture where a dump's folder would be named (messages, errors).
MEMORY_NAME = "<in memory>"
# Capture settings chosen for a notebook run (capture_preset="notebook", the default of
# profile_model and profile_vectors): buckets of about max_seq_len / BUCKETS_PER_CONTEXT
# positions, and at least KEYS_PER_BUCKET keys of one example in a bucket on average, so that
# the early buckets of ap_first20 / ap_drop have key pairs (§2.12 pairs keys of one example).
BUCKETS_PER_CONTEXT = 16
KEYS_PER_BUCKET = 8
CAPTURE_PRESETS = ("notebook", "qk-sniffer")
# The analysis options the capture decides (layout, selection) or that name files.
_RUN_ONLY = ("data_root", "output_dir", "model_config", "num_layers", "num_q_heads", "num_k_heads",
             "shard", "layers", "heads")


# HeadOptions' default of max_tokens_per_head (the option table's, docs/method.md §2), not typed again.
_MAX_TOKENS_PER_HEAD = _HeadOptions().max_tokens_per_head


def notebook_capture(max_seq_len, tokens, max_tokens_per_head=_MAX_TOKENS_PER_HEAD, min_bucket_size=None):
    """The capture settings of capture_preset="notebook" for examples of at most ``max_seq_len``
    tokens, ``tokens`` in all: ``min_bucket_size`` the power of two nearest max_seq_len / 16
    (at least 4; or the one given) and every token kept with ``sampling_rate`` =
    min(1, max(8 / min_bucket_size, max_tokens_per_head / tokens)): about 8 keys of one example in
    each bucket (the early buckets get key pairs, so ap_first20 and ap_drop are defined) and
    about max_tokens_per_head rows per head (what the analysis uses, docs/method.md §2.2)."""
    if min_bucket_size is None:
        target = max(1.0, max_seq_len / BUCKETS_PER_CONTEXT)
        min_bucket_size = max(4, 2 ** int(round(np.log2(target))))
    rate = min(1.0, max(KEYS_PER_BUCKET / min_bucket_size, max_tokens_per_head / max(tokens, 1)))
    return {"sampler": "uniform", "min_bucket_size": int(min_bucket_size), "sampling_rate": rate}


class ModelProfile(_DumpResult):
    """What profile_model and profile_vectors return: a DumpResult of a capture held in memory,
    analyzed by the run of analyze_dump (``tables``, ``head_metrics``, ``csv_text(name)``,
    ``errors``, ``summary``, ``write(dir)`` — a result set ap_compare and compare_runs read —,
    ``results``: the HeadResults), with ``plan`` ({layer: (query heads, key heads)}), ``layers`` ({layer:
    LayerInfo}), ``tokens`` (tokens read) and ``capture`` (the SnifferOptions used)."""

    def __init__(self, run, errors, plan, layers, tokens, capture):
        """Made by profile_model / profile_vectors from their run (a DumpRun that has run)."""
        super().__init__(run, errors, None)
        self.plan, self.layers, self.tokens, self.capture = plan, layers, tokens, capture

    def __repr__(self):
        return (f"ModelProfile({self.analyzed} heads analyzed, {self.failed} failed; tables: "
                f"{', '.join(f'{k} {len(v)} rows' for k, v in self.tables.items())})")


def _memory_reader(sink):
    """reader(folder) -> the arrays of a head folder of ``sink`` (MemorySink), as the run reads a
    Parquet folder's."""
    def read(folder):
        layer, head, kind = parse_head_folder(folder.rsplit("/", 1)[-1])
        data = sink.columns(layer, head, kind)
        if data is None:
            raise ValueError(f"{folder}: no rows were kept")
        window = data.pop("sliding_window")
        data.pop("token_str", None)
        if window:
            data["sliding_window"] = np.full(len(data["position"]), int(window), np.int64)
        return data
    return read


def _early_bucket_shortfall(sink, plan, group):
    """The planned query heads whose capture cannot define ap_first20 (docs/method.md §2.14): no
    query bucket below 0.2 C with >= 2 queries, or no key bucket below 0.2 C where one example
    has >= 2 keys (the key pairs of §2.12). A warning before the analysis, not a rule of it."""
    short = []
    for layer, (q_heads, _k_heads) in sorted(plan.items()):
        for q_head in q_heads:
            q, k = sink.columns(layer, q_head, "q"), sink.columns(layer, q_head // group, "k")
            if q is None or k is None or len(q["position"]) < 2:
                short.append((layer, q_head))
                continue
            limit = 0.2 * (int(q["position"].max()) + 1)

            def early(cols):
                buckets = cols["bucket"]
                out = []
                for b in np.unique(buckets):
                    rows = buckets == b
                    if cols["position"][rows].mean() < limit:
                        out.append(rows)
                return out
            queries = any(rows.sum() >= 2 for rows in early(q))
            pairs = any(np.bincount(np.unique(k["example_id"][rows], return_inverse=True)[1]).max() >= 2
                        for rows in early(k) if rows.any())
            if not (queries and pairs):
                short.append((layer, q_head))
    return short


def analyze_in_memory(sink, plan, infos, head_options=None, options=None, *, progress=None, warn=True,
                      function="profile_model"):
    """The planned heads of a MemorySink analyzed by analyze_dump's run (DumpRun.from_memory:
    threads, the same rows and CSV bytes as analyze_dump on the same capture written as a
    dump). ``options``: analyze_dump's keywords; ``head_options``: a HeadOptions they are set
    on (default: analyze_dump's). Returns (run, errors)."""
    from . import dump as _dump
    from ._core.dump import DumpRun

    info = infos[min(infos)]
    queries = sorted((layer, head) for layer, (q_heads, _k) in plan.items() for head in q_heads)
    keys = sorted((layer, head) for layer, (_q, k_heads) in plan.items() for head in k_heads)
    layout = (max(infos) + 1, info.num_q_heads, info.num_k_heads)
    run = DumpRun.from_memory(MEMORY_NAME, [q for q in queries if sink.columns(*q, "q") is not None],
                              [k for k in keys if sink.columns(*k, "k") is not None], layout,
                              dict(options or {}), head_options, function)
    if warn:
        short = _early_bucket_shortfall(sink, plan, info.num_q_heads // info.num_k_heads)
        if short:
            import warnings
            from .results import NaNColumnWarning
            warnings.warn(f"{function}: {len(short)} of {len(queries)} heads have too few queries or keys in "
                          f"the first 20% of the context for ap_first20 and ap_drop (a query bucket below "
                          f"0.2 C with >= 2 queries, and one with an example of >= 2 keys; docs/method.md "
                          f"§2.12, §2.14), e.g. layer {short[0][0]} q_head {short[0][1]}: they will be NaN. "
                          f"Keep more tokens (sampling_rate), use smaller buckets (min_bucket_size) or more "
                          f"texts", NaNColumnWarning, stacklevel=3)
    try:
        _dump._run(run, progress=progress, warn=warn, reader=_memory_reader(sink))
    finally:
        run.close()
    errors = [_dump.HeadError(*failure[1:6]) for failure in run.failures()]
    return run, errors


def _split_options(options, head_options, function):
    """(capture options for SnifferOptions, analyze_dump's keywords for the run), checked by name
    against both (a misspelt keyword gets the nearest names); ``seed`` goes to both."""
    from ._core.dump import analyze_options

    from ._core.head import HeadOptions

    run_keys = [key for key, *_rest in analyze_options() if key not in _RUN_ONLY]
    capture_keys = SnifferOptions.names()
    head_fields = [n for n, v in vars(HeadOptions).items() if isinstance(v, property) and n != "sliding_window"]
    if head_options is not None:
        head_options = HeadOptions(**{n: getattr(head_options, n) for n in head_fields})  # the caller's stays
    capture_kw, run_kw = {}, {}
    for key, value in options.items():
        if key in capture_keys:
            capture_kw[key] = value
            if key == "seed":
                run_kw[key] = value
        elif key in run_keys:
            run_kw[key] = value
        elif key in head_fields:
            if head_options is None:
                from ._core.dump import analyze_default_options
                head_options = analyze_default_options()
            setattr(head_options, key, value)
        else:
            known = sorted(set(capture_keys) | set(run_keys) | {"max_seq_len", "max_examples", "batch_size",
                                                              "head_options", "capture_preset", "progress", "warn"})
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise CaptureError(f"{function}: unknown keyword '{key}'{hint} (the capture options of "
                               f"SnifferOptions and the analysis options of analyze_dump: see "
                               f"help(attention_plasticity.{function}))")
    return capture_kw, run_kw, head_options


def _capture_options(capture_kw, preset, max_seq_len, tokens, run_kw, head_options, function):
    """SnifferOptions of a profile: the preset's sampling (unless the keywords set it), then the
    keywords."""
    if preset not in CAPTURE_PRESETS:
        raise CaptureError(f"{function}: capture_preset '{preset}': use one of {', '.join(CAPTURE_PRESETS)}")
    capture_kw = dict(capture_kw)
    capture_kw.setdefault("capture_token_strings", False)
    sampling = {"sampler", "base_rate", "sampling_rate"}
    if preset == "notebook" and not sampling & set(capture_kw):
        from ._core.dump import analyze_default_options
        defaults = head_options if head_options is not None else analyze_default_options()
        max_tokens = run_kw.get("max_tokens_per_head", defaults.max_tokens_per_head)
        chosen = notebook_capture(max_seq_len, tokens, int(max_tokens), capture_kw.get("min_bucket_size"))
        capture_kw = {**chosen, **capture_kw}
    try:
        return SnifferOptions(**capture_kw).check()
    except CaptureError as exc:
        raise CaptureError(f"{function}: {exc}") from None


def _token_examples(tokenizer, texts, max_seq_len, function):
    """Token id lists of at most max_seq_len: strings through the tokenizer (make_examples), or
    token ids (a tensor or array [n, seq], or lists of ints) cut into pieces as they are."""
    if isinstance(texts, str):
        texts = [texts]
    if hasattr(texts, "tolist") and not isinstance(texts, (list, tuple)):
        texts = texts.tolist()  # a torch tensor or NumPy array of ids
    texts = list(texts)
    if not texts:
        raise CaptureError(f"{function}: texts is empty")
    if all(isinstance(t, str) for t in texts):
        if tokenizer is None:
            raise CaptureError(f"{function}: texts are strings but tokenizer is None (give a tokenizer, "
                               f"or token ids: a tensor [n, seq] or lists of ints)")
        return _capture.make_examples(tokenizer, [(str(i), t) for i, t in enumerate(texts)], max_seq_len)
    examples = []
    for i, ids in enumerate(texts):
        if isinstance(ids, str) or not all(isinstance(t, (int, np.integer)) for t in ids):
            raise CaptureError(f"{function}: texts[{i}] is neither a string nor a list of token ids")
        ids = [int(t) for t in ids]
        examples.extend(ids[start:start + max_seq_len] for start in range(0, len(ids), max_seq_len))
    return examples


def _progress_bar(total, unit, desc, progress):
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=True,
                disable=(None if progress is None else not progress))


def profile_model(model, tokenizer, texts, *, max_seq_len=512, max_examples=None, batch_size=1,
                  head_options=None, capture_preset="notebook", progress=None, warn=True, **options):
    """The attention plasticity of a live model's heads, in memory (no file is written).

    ``texts``: strings (any iterable; one string is one text), each cut into examples of at most
    ``max_seq_len`` tokens as examples/capture_qk.py cuts documents; or token ids without a
    tokenizer (``tokenizer=None``): a tensor or array [n, seq] or lists of ints, cut into pieces of
    ``max_seq_len``. ``max_examples`` keeps that many examples (seeded). The model runs one forward
    pass per ``batch_size`` examples on its own device; only the kept rows are copied to host
    memory. The heads are then analyzed by analyze_dump's run, on ``threads`` threads (default:
    all cores), with a progress bar over the forward passes and the heads (``progress=False`` to
    silence; None: when stderr is a terminal). Cost: the forward passes, then what analyze_dump
    takes on the same rows: about 0.2 s of CPU per head of 50,000 queries and keys at d = 128
    with the default options, less for smaller heads (benchmarks/README.md, sections 1, 10, 11).

    Options (keywords; a misspelt one is refused with the nearest names):

    - ``capture_preset``: ``"notebook"`` (default) chooses the sampling for this call: buckets of
      about max_seq_len / 16 positions (``min_bucket_size``, a power of two >= 4) and a keep rate
      ``sampling_rate`` = min(1, max(8 / min_bucket_size, max_tokens_per_head / tokens)), so that
      every column is defined on a typical call (notebook_capture); ``"qk-sniffer"`` keeps
      qk-sniffer's production settings (uniform buckets of 128 positions, each token kept with
      probability 1/128: made for captures of millions of tokens; on a few texts, ap_first20 and
      ap_drop are NaN). Any of ``sampler``, ``base_rate``, ``sampling_rate`` given replaces the
      preset's sampling.
    - the capture options of SnifferOptions: ``sampler``, ``min_bucket_size``, ``base_rate``,
      ``sampling_rate``, ``layers``, ``heads``, ``head_sample``, ``per_layer``,
      ``full_attention_only``, ``capture_pre_rope``, ``bf16``, ...;
    - the analysis options of analyze_dump by key (``threads``, ``max_tokens_per_head``,
      ``num_pairs_per_bucket``, ``confidence_intervals``, ``sampling_unit``, ``distance_maps``, ...;
      ``help(attention_plasticity.analyze_dump)``), set on ``head_options`` when given (a
      HeadOptions), else on analyze_dump's defaults (intervals on);
    - ``seed``: fixes every draw of the call: the examples kept, the tokens kept and the
      analysis' random streams (docs/method.md §2.15).

    Warnings: a NaNColumnWarning before the analysis when heads have too few early queries or
    keys for ap_first20 / ap_drop, and one per column that is NaN after it (``warn=False``
    silences both); a HeadFailedWarning per failed head (the others go on).

    Returns a ModelProfile (a DumpResult: ``tables``, ``write(dir)``, ``errors``, ...); its numbers
    are those of capture_qk.py -> analyze_dump on the same capture settings.
    """
    function = "profile_model"
    capture_kw, run_kw, head_options = _split_options(options, head_options, function)
    if max_examples is not None and (isinstance(max_examples, bool)
                                     or not isinstance(max_examples, (int, np.integer))
                                     or max_examples < 1):
        raise CaptureError(f"{function}: max_examples {max_examples!r}: give an integer "
                           f">= 1, or None for all examples")
    for name, value, low in (("max_seq_len", max_seq_len, 2), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise CaptureError(f"{function}: {name} {value!r}: give an integer >= {low}")
    examples = _token_examples(tokenizer, texts, max_seq_len, function)
    if not examples or not any(examples):
        raise CaptureError(f"{function}: the texts have no tokens")
    seed = int(capture_kw.get("seed", 0))
    examples = [examples[i] for i in _capture.select_examples(len(examples), max_examples, seed)]
    examples = [e for e in examples if e]
    sniff = _capture_options(capture_kw, capture_preset, max_seq_len, sum(map(len, examples)), run_kw,
                             head_options, function)
    sink = MemorySink()
    passes = -(-len(examples) // int(batch_size))
    bar = _progress_bar(passes, "pass", "forward passes", progress)
    try:
        plan, layers, tokens = run_capture(
            model, examples, sink, sniff, batch_size=batch_size,
            pad_id=0 if tokenizer is None else _pad_id(tokenizer),
            on_batch=lambda done: bar.update(-(-done // int(batch_size)) - bar.n))
    finally:
        bar.close()
    run, errors = analyze_in_memory(sink, plan, layers, head_options, run_kw, progress=progress, warn=warn,
                                    function=function)
    result = ModelProfile(run, errors, plan, layers, tokens, sniff)
    if warn:
        _results.warn_nan_columns(result.tables, stacklevel=2)
    return result


def _pad_id(tokenizer):
    for name in ("pad_token_id", "eos_token_id", "unk_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return value
    return 0


def profile_vectors(batches, lengths=None, example_ids=None, *, sliding_windows=None,
                    head_options=None, capture_preset="notebook", progress=None, warn=True, **options):
    """The analysis of profile_model on query and key states another tool captured.

    ``batches``: one dict, or a list of them (one per forward pass), {(layer, 'q' | 'k'):
    tensor or array [batch, seq_len, heads, head_dim]}: the states whose dot products
    (times the scaling) are the scores: TransformerLens' ``hook_rot_q`` / ``hook_rot_k``
    where the model is rotary, else ``hook_q`` / ``hook_k`` (``from_activation_cache``), or
    what an nnsight trace saved (``from_nnsight_inputs``); keys with their own (GQA) head count;
    tensors on any device (only the kept rows are copied to host memory). ``lengths``: per
    batch, the real length of each example (padding on the right is left out; default the
    whole seq_len); ``example_ids``: per batch, an id per example, distinct over all batches
    (default 0, 1, ...); ``sliding_windows``: {layer: window} (default none). The options,
    ``capture_preset``, ``progress`` and ``warn`` are profile_model's (max_seq_len: the states'
    seq_len). Returns a ModelProfile.
    """
    import torch

    function = "profile_vectors"
    if isinstance(batches, dict):
        batches, lengths, example_ids = [batches], \
            None if lengths is None else [lengths], None if example_ids is None else [example_ids]
    batches = list(batches)
    if not batches:
        raise CaptureError(f"{function}: batches is empty")
    capture_kw, run_kw, head_options = _split_options(options, head_options, function)
    first = batches[0]
    layers = sorted({layer for layer, _kind in first})
    infos = {}
    for layer in layers:
        if (layer, "q") not in first or (layer, "k") not in first:
            raise CaptureError(f"{function}: layer {layer} needs both 'q' and 'k' states")
        q, k = first[layer, "q"], first[layer, "k"]
        if q.ndim != 4 or k.ndim != 4 or q.shape[-1] != k.shape[-1]:
            raise CaptureError(f"{function}: layer {layer}: states must be [batch, seq, "
                               f"heads, head_dim] with one head_dim (q {tuple(q.shape)}, k "
                               f"{tuple(k.shape)})")
        infos[layer] = _capture.LayerInfo(
            layer=layer, module_name="", num_q_heads=q.shape[2], num_k_heads=k.shape[2],
            head_dim=q.shape[3], rope=False, nope=False,
            sliding_window=(sliding_windows or {}).get(layer))
    for what, given in (("lengths", lengths), ("example_ids", example_ids)):
        if given is not None and len(given) != len(batches):
            raise CaptureError(f"{function}: {what}: {len(given)} lists for {len(batches)} batches")
    shapes, ids = [], []
    for i, batch in enumerate(batches):
        if set(batch) != set(first):
            raise CaptureError(f"{function}: batch {i} holds other (layer, kind) states than batch 0")
        size, seq = batch[layers[0], "q"].shape[:2]
        for (layer, kind), x in batch.items():
            if tuple(x.shape[:2]) != (size, seq) or tuple(x.shape[2:]) != tuple(first[layer, kind].shape[2:]):
                raise CaptureError(f"{function}: batch {i}, layer {layer} '{kind}': shape {tuple(x.shape)}, "
                                   f"expected [{size}, {seq}, {', '.join(map(str, first[layer, kind].shape[2:]))}]")
        lens = [seq] * size if lengths is None else list(lengths[i])
        batch_ids = list(range(len(ids), len(ids) + size)) if example_ids is None else list(example_ids[i])
        for what, values in (("lengths", lens), ("example_ids", batch_ids)):
            if len(values) != size:
                raise CaptureError(f"{function}: {what} of batch {i}: {len(values)} values for its {size} "
                                   f"examples")
        bad = [n for n in lens if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= seq]
        if bad:
            raise CaptureError(f"{function}: lengths of batch {i}: {bad[0]!r} is not a length from 1 to the "
                               f"batch's sequence length {seq}")
        ids.extend(batch_ids)
        shapes.append((size, seq, [int(n) for n in lens]))
    check_example_ids(ids, f"{function}: example_ids")
    max_seq_len = max(s[1] for s in shapes)
    sniff = _capture_options(capture_kw, capture_preset, max_seq_len, sum(sum(s[2]) for s in shapes), run_kw,
                             head_options, function)
    plan = plan_heads(infos, sniff)
    sink = MemorySink()
    sink.start(plan, infos)
    recorder = Sniffer(sniff, plan, sink)
    recorder.set_plan(plan, infos)
    next_id = 0
    for i, batch in enumerate(batches):
        size, _seq, lens = shapes[i]
        recorder.begin_batch(ids[next_id:next_id + size], lens)
        next_id += size
        for layer in layers:
            for kind in "qk":
                x = batch[layer, kind]
                recorder(layer, kind, x if isinstance(x, torch.Tensor) else torch.as_tensor(x))
    run, errors = analyze_in_memory(sink, plan, infos, head_options, run_kw, progress=progress, warn=warn,
                                    function=function)
    result = ModelProfile(run, errors, plan, infos, sum(sum(s[2]) for s in shapes), sniff)
    if warn:
        _results.warn_nan_columns(result.tables, stacklevel=2)
    return result
