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
    LayerInfo}), ``tokens`` (tokens read), ``capture`` (the SnifferOptions used),
    ``examples_csv`` (the examples' documents, chunks and fingerprints: the text of examples.csv,
    docs/method.md §1.1; None when not recorded) and ``capture_record`` (how the examples were
    chosen: run.json "capture"; None when not recorded)."""

    def __init__(self, run, errors, plan, layers, tokens, capture, examples_csv=None, capture_record=None):
        """Made by profile_model / profile_vectors from their run (a DumpRun that has run)."""
        super().__init__(run, errors, None)
        self.plan, self.layers, self.tokens, self.capture = plan, layers, tokens, capture
        self.examples_csv, self.capture_record = examples_csv, capture_record

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


def _from_memory_documents(examples_csv, capture_json):
    """The keywords of DumpRun.from_memory that carry the examples' documents (examples.csv's
    text) and the capture's record (JSON text)."""
    import json

    out = {}
    if examples_csv is not None:
        out["examples_csv"] = examples_csv
    if capture_json is not None:
        out["capture_json"] = capture_json if isinstance(capture_json, str) else \
            json.dumps(capture_json, sort_keys=False, allow_nan=False)
    return out


def analyze_in_memory(sink, plan, infos, head_options=None, options=None, *, progress=None, warn=True,
                      function="profile_model", examples_csv=None, capture_json=None):
    """The planned heads of a MemorySink analyzed by analyze_dump's run (DumpRun.from_memory:
    threads, the same rows and CSV bytes as analyze_dump on the same capture written as a
    dump). ``options``: analyze_dump's keywords; ``head_options``: a HeadOptions they are set
    on (default: analyze_dump's); ``examples_csv``: the examples' documents (the text of
    examples.csv, documents.examples_csv); ``capture_json``: the capture's record (a dict or JSON
    text; run.json "capture"). Returns (run, errors)."""
    from . import dump as _dump
    from ._core.dump import DumpRun

    info = infos[min(infos)]
    queries = sorted((layer, head) for layer, (q_heads, _k) in plan.items() for head in q_heads)
    keys = sorted((layer, head) for layer, (_q, k_heads) in plan.items() for head in k_heads)
    layout = (max(infos) + 1, info.num_q_heads, info.num_k_heads)
    run = DumpRun.from_memory(MEMORY_NAME, [q for q in queries if sink.columns(*q, "q") is not None],
                              [k for k in keys if sink.columns(*k, "k") is not None], layout,
                              dict(options or {}), head_options, function,
                              **_from_memory_documents(examples_csv, capture_json))
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
                                                              "head_options", "capture_preset", "progress", "warn",
                                                              "seed", "example_seed", "token_seed",
                                                              "document_ids"})
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise CaptureError(f"{function}: unknown keyword '{key}'{hint} (the capture options of "
                               f"SnifferOptions and the analysis options of analyze_dump: see "
                               f"help(attention_plasticity.{function}))")
    return capture_kw, run_kw, head_options


def _check_capture_numbers(capture_kw, function):
    """CaptureError naming the option and the value for a bucket size, rate or head count that is
    not a number of its range (before SnifferOptions, whose checks compare them as numbers)."""
    size = capture_kw.get("min_bucket_size")
    if size is not None and (isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer))
                             or not 1 <= size <= MAX_BUCKET_SIZE):
        raise CaptureError(f"{function}: min_bucket_size {size!r}: give an integer from 1 to 2**31-1 "
                           f"(positions per bucket)")
    for name in ("sampling_rate", "base_rate"):
        value = capture_kw.get(name)
        if value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = float("nan")
        if isinstance(value, (bool, np.bool_, str)) or not np.isfinite(number) or not number > 0 \
                or (name == "sampling_rate" and number > 1):
            raise CaptureError(f"{function}: {name} {value!r}: give a number "
                               f"{'in (0, 1]' if name == 'sampling_rate' else '> 0'}")
    sample = capture_kw.get("head_sample")
    if sample is not None and (isinstance(sample, (bool, np.bool_)) or not isinstance(sample, (int, np.integer))
                               or sample < 1):
        raise CaptureError(f"{function}: head_sample {sample!r}: give an integer >= 1")


def _capture_options(capture_kw, preset, max_seq_len, tokens, run_kw, head_options, function, warn=True):
    """SnifferOptions of a profile: the preset's settings, then the keywords over them. The notebook
    preset is kept whole: a sampling option given replaces only what it names (``sampling_rate``
    alone keeps the preset's buckets; ``sampler`` or ``base_rate`` without ``sampling_rate`` drop
    the preset's rate, whose constant would replace theirs). Before the run, a uniform sampling that
    keeps fewer than 2 keys of one example per bucket on average (sampling_rate x min_bucket_size
    < 2: the early buckets would have no key pairs, ap_first20 / ap_drop NaN, docs/method.md §2.12)
    gets larger buckets when min_bucket_size was not given (a NaNColumnWarning says so), and is
    refused when it was, or when no bucket below 0.4 max_seq_len would do."""
    if preset not in CAPTURE_PRESETS:
        raise CaptureError(f"{function}: capture_preset '{preset}': use one of {', '.join(CAPTURE_PRESETS)}")
    _check_capture_numbers(capture_kw, function)
    capture_kw = dict(capture_kw)
    capture_kw.setdefault("capture_token_strings", False)
    if preset == "notebook":
        from ._core.dump import analyze_default_options
        defaults = head_options if head_options is not None else analyze_default_options()
        max_tokens = run_kw.get("max_tokens_per_head", defaults.max_tokens_per_head)
        chosen = notebook_capture(max_seq_len, tokens, int(max_tokens), capture_kw.get("min_bucket_size"))
        if "sampling_rate" not in capture_kw and ({"sampler", "base_rate"} & set(capture_kw)):
            del chosen["sampling_rate"]
        given_size = "min_bucket_size" in capture_kw
        capture_kw = {**chosen, **capture_kw}
        if capture_kw.get("sampler", "uniform") == "uniform":
            size = int(capture_kw["min_bucket_size"])
            rate = capture_kw.get("sampling_rate")
            rate = min(1.0, float(capture_kw.get("base_rate", 1.0)) / size) if rate is None else float(rate)
            if rate * size < 2:
                limit = 0.4 * max_seq_len  # bucket 0's mean position below 0.2 C
                want = 2 ** int(np.ceil(np.log2(2.0 / rate)))
                said = (f"sampling_rate {rate:.4g} keeps {rate * size:.2g} keys of one example per bucket of "
                        f"{size} positions on average: the early buckets would have no key pairs (ap_first20, "
                        f"ap_drop NaN; docs/method.md §2.12)")
                if given_size or want > limit:
                    raise CaptureError(
                        f"{function}: {said}; give min_bucket_size >= {want}"
                        f"{'' if want <= limit else ' (beyond 0.4 max_seq_len: raise sampling_rate instead)'} "
                        f"or sampling_rate >= {2.0 / size:.4g} (or capture_preset='qk-sniffer' to keep "
                        f"production settings, NaN columns and all)")
                capture_kw["min_bucket_size"] = want
                if warn:
                    import warnings
                    from .results import NaNColumnWarning
                    warnings.warn(f"{function}: {said}; min_bucket_size set to {want} (the notebook preset's "
                                  f"buckets adjusted, before the run; give min_bucket_size to choose)",
                                  NaNColumnWarning, stacklevel=3)
    try:
        return SnifferOptions(**capture_kw).check()
    except CaptureError as exc:
        raise CaptureError(f"{function}: {exc}") from None


# Seeds: integers from 0 to MAX_SEED (the analysis' seed is a uint64; the capture's draws take any).
MAX_SEED = 2**63 - 1
# The largest bucket size (positions are int32 in a dump).
MAX_BUCKET_SIZE = 2**31 - 1


def check_seed(value, name, function):
    """int(value) for a seed: an integer (Python or NumPy, not bool) from 0 to MAX_SEED; else
    CaptureError naming ``name`` and the value."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or not 0 <= int(value) <= MAX_SEED:
        raise CaptureError(f"{function}: {name} {value!r}: give an integer from 0 to 2**63-1")
    return int(value)


def resolve_seeds(seed, example_seed, token_seed, function):
    """(example_seed, token_seed, analysis seed or None): ``seed`` sets the three (default 0 for
    the first two; the analysis keeps its own default when ``seed`` is not given), example_seed
    (which texts and chunks are kept) and token_seed (which tokens the capture keeps) override
    their part."""
    given = seed is not None
    seed = 0 if seed is None else check_seed(seed, "seed", function)
    example_seed = seed if example_seed is None else check_seed(example_seed, "example_seed", function)
    token_seed = seed if token_seed is None else check_seed(token_seed, "token_seed", function)
    return example_seed, token_seed, (seed if given else None)


def _check_model(model, function):
    """CaptureError unless ``model`` is a transformers model with weights (not a module without
    a config such as nn.Linear, not a model on the meta device)."""
    import torch

    if not isinstance(model, torch.nn.Module) or getattr(model, "config", None) is None:
        raise CaptureError(f"{function}: model is a {type(model).__name__}, not a transformers model with "
                           f"attention layers (a PreTrainedModel, e.g. AutoModel.from_pretrained(folder)); "
                           f"for query and key states another tool captured, use profile_vectors")
    meta = next((name for name, p in model.named_parameters() if p.device.type == "meta"), None)
    if meta is not None:
        raise CaptureError(f"{function}: model has its weights on the meta device (parameter '{meta}'): it has "
                           f"no values to run; load the weights (from_pretrained without device_map='meta', or "
                           f"model.to_empty(device='cpu') then load_state_dict)")


def _model_limits(model):
    """(vocabulary size or None, positions or None) of a transformers model: the input
    embedding's rows (else config.vocab_size) and config.max_position_embeddings less the
    position offset of models that count positions from padding_idx + 1 (RoBERTa's)."""
    vocab = None
    try:
        embeddings = model.get_input_embeddings()
        vocab = int(embeddings.num_embeddings)
    except (AttributeError, NotImplementedError, TypeError):
        vocab = getattr(_capture._text_config(model), "vocab_size", None)
    config = _capture._text_config(model)
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, (int, np.integer)) and positions > 0:
        base = getattr(model, "base_model", model)
        padding_idx = getattr(getattr(base, "embeddings", None), "padding_idx", None)
        if isinstance(padding_idx, int) and padding_idx >= 0 \
                and getattr(getattr(base, "embeddings", None), "position_embeddings", None) is not None:
            positions -= padding_idx + 1
    else:
        positions = None
    return (vocab if isinstance(vocab, (int, np.integer)) and vocab > 0 else None), positions


def _check_document_ids(document_ids, count, function):
    """The callers' document keys: one integer per text, distinct, int64."""
    if document_ids is None:
        return list(range(count))
    if hasattr(document_ids, "tolist") and not isinstance(document_ids, (list, tuple)):
        document_ids = document_ids.tolist()
    document_ids = list(document_ids)
    if len(document_ids) != count:
        raise CaptureError(f"{function}: document_ids: {len(document_ids)} ids for {count} texts")
    seen = set()
    for i, key in enumerate(document_ids):
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)) \
                or not -2**63 <= int(key) < 2**63:
            raise CaptureError(f"{function}: document_ids[{i}] {key!r}: give an integer (int64) per text")
        if int(key) in seen:
            raise CaptureError(f"{function}: document_ids[{i}] {int(key)} is given to two texts")
        seen.add(int(key))
    return [int(k) for k in document_ids]


def _token_examples(tokenizer, texts, max_seq_len, function, document_ids=None, vocab=None):
    """The examples of ``texts`` (documents.Examples: token ids, document, chunk, fingerprints),
    each of at most max_seq_len tokens: strings through the tokenizer (documents.cut_documents,
    as capture_qk.py cuts documents), or token ids (a tensor or array [n, seq], or lists of ints)
    cut into pieces as they are. Every text is checked first; a bad one is a CaptureError naming
    it (texts[i]) and the value: bytes, a mix of strings and ids, ids that are not integers,
    negative or (``vocab``) beyond the vocabulary."""
    from . import documents as _documents

    if isinstance(texts, (bytes, bytearray, memoryview)):
        raise CaptureError(f"{function}: texts is {type(texts).__name__}, not text or token ids: decode it "
                           f"(texts.decode('utf-8')) or give the ids as a list of ints")
    if isinstance(texts, str):
        texts = [texts]
    if hasattr(texts, "tolist") and not isinstance(texts, (list, tuple)):
        texts = texts.tolist()  # a torch tensor or NumPy array of ids
    texts = list(texts)
    if not texts:
        raise CaptureError(f"{function}: texts is empty")
    document_ids = _check_document_ids(document_ids, len(texts), function)
    strings = [isinstance(t, str) for t in texts]
    if any(strings):
        if not all(strings):
            i = strings.index(False) if strings[0] else strings.index(True)
            raise CaptureError(f"{function}: texts[{i}] is a {type(texts[i]).__name__} among "
                               f"{'strings' if strings[0] else 'token id lists'} (texts[0] is a "
                               f"{type(texts[0]).__name__}): give all texts as strings, or all as token ids")
        if tokenizer is None:
            raise CaptureError(f"{function}: texts are strings but tokenizer is None (give a tokenizer, "
                               f"or token ids: a tensor [n, seq] or lists of ints)")
        examples = _documents.cut_documents(tokenizer, texts, max_seq_len, document_ids, where="max_seq_len",
                                                error=CaptureError)
    else:
        documents = []
        for i, ids in enumerate(texts):
            if isinstance(ids, (bytes, bytearray, memoryview)):
                raise CaptureError(f"{function}: texts[{i}] is {type(ids).__name__}, not text or token ids: "
                                   f"decode it (.decode('utf-8')) or give the ids as a list of ints")
            if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):
                ids = ids.tolist()
            if isinstance(ids, (int, np.integer)) or not hasattr(ids, "__iter__"):
                raise CaptureError(f"{function}: texts[{i}] is {ids!r}, neither a string nor a list of token ids")
            ids = list(ids)
            bad = next((t for t in ids if isinstance(t, (bool, np.bool_))
                        or not isinstance(t, (int, np.integer))), None)
            if bad is not None:
                raise CaptureError(f"{function}: texts[{i}] holds {bad!r}, not a token id: give a string or a "
                                   f"list of integer token ids")
            documents.append([int(t) for t in ids])
        examples = _documents.cut_documents(None, documents, max_seq_len, document_ids, where="max_seq_len",
                                                error=CaptureError)
    index = {d: i for i, d in enumerate(document_ids)}
    for ids, doc in zip(examples.tokens, examples.document_id):
        low, high = min(ids), max(ids)
        if low < 0 or (vocab is not None and high >= vocab):
            value = low if low < 0 else high
            raise CaptureError(f"{function}: texts[{index[doc]}] holds the token id {value}: the model's token "
                               f"ids are 0 to {'its vocabulary size - 1' if vocab is None else vocab - 1}"
                               f"{'' if vocab is None else ' (its input embedding has ' + str(vocab) + ' rows)'}")
    examples.texts = len(texts)
    return examples


def _progress_bar(total, unit, desc, progress):
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=True,
                disable=(None if progress is None else not progress))


def _kept_tokens_by_example(sink, plan, count):
    """The rows kept per example id 0..count-1 (queries and keys of the first planned query head
    that holds rows; every head keeps the same tokens, §2.15); None when no head kept any."""
    for layer, (q_heads, _k_heads) in sorted(plan.items()):
        for q_head in q_heads:
            group = max(1, len(q_heads) // max(1, len(_k_heads)))
            columns = [sink.columns(layer, q_head, "q"), sink.columns(layer, q_head // group, "k")]
            ids = [np.asarray(c["example_id"], np.int64) for c in columns if c is not None]
            if ids and sum(len(i) for i in ids):
                return sum(np.bincount(i, minlength=count)[:count] for i in ids)
    return None


def capture_record(examples, *, example_seed, token_seed, max_examples, texts, function, warn=True,
                   kept_tokens=None, stacklevel=3):
    """The capture's choice as the result set records it (metadata.json / run.json "capture":
    docs/method.md §1.1): example_seed, token_seed, max_examples, rule, the texts given, the
    examples and documents kept and the effective number of documents of the kept tokens (warned
    about when small: documents.warn_effective_documents)."""
    from . import documents as _documents

    by_document = examples.tokens_by_document(kept_tokens)
    effective = _documents.effective_documents(by_document)
    if warn:
        _documents.warn_effective_documents(effective, len(by_document), function, stacklevel=stacklevel)
    return {"example_seed": int(example_seed), "token_seed": int(token_seed),
            "max_examples": None if max_examples is None else int(max_examples),
            "rule": _documents.CHOICE_RULE if max_examples is not None and max_examples < texts[1]
            else _documents.ALL_RULE,
            "texts": int(texts[0]), "examples": len(examples), "documents": len(by_document),
            "effective_documents": None if not np.isfinite(effective) else round(float(effective), 6)}


def profile_model(model, tokenizer, texts, *, max_seq_len=512, max_examples=None, batch_size=1, seed=None,
                  example_seed=None, token_seed=None, document_ids=None, head_options=None,
                  capture_preset="notebook", progress=None, warn=True, **options):
    """The attention plasticity of a live model's heads, in memory (no file is written).

    ``texts``: strings (any iterable; one string is one text), each cut into examples of at most
    ``max_seq_len`` tokens as examples/capture_qk.py cuts documents; or token ids without a
    tokenizer (``tokenizer=None``): a tensor or array [n, seq] or lists of ints, cut into pieces of
    ``max_seq_len``. The model runs one forward pass per ``batch_size`` examples on its own device;
    only the kept rows are copied to host memory. The heads are then analyzed by analyze_dump's
    run, on ``threads`` threads (default: all cores), with a progress bar over the forward passes
    and the heads (``progress=False`` to silence; None: when stderr is a terminal). Cost: the
    forward passes, then what analyze_dump takes on the same rows: about 0.2 s of CPU per head of
    50,000 queries and keys at d = 128 with the default options, less for smaller heads
    (benchmarks/README.md, sections 1, 10, 11).

    The unit is the document (docs/method.md §8.3): each text is a document (``document_ids``: an
    integer key per text, default its index), and every example records its document, its chunk
    (place in the document) and fingerprints of its token ids and of the document's
    (``attention_plasticity.documents``; the result set's examples.csv). The sequence-level errors
    count documents: examples cut from one text are not independent. ``max_examples`` keeps that
    many examples spread over the documents: the documents in an order drawn with
    ``example_seed``, one chunk of each first (drawn), then a further chunk of each, and so on
    (never the first chunks in text order); None keeps every chunk. A DocumentsWarning names the
    effective number of documents (1 / sum of the squared shares of the kept tokens by document)
    when it is below 10. The choice is recorded (``capture_record``; run.json "capture"). A paired
    comparison (compare_runs, docs/method.md §8.6) requires the same documents in both profiles,
    which their fingerprints show: the same texts, tokenizer, max_seq_len, max_examples and
    example_seed (token_seed may differ).

    Options (keywords; a misspelt one is refused with the nearest names):

    - ``max_seq_len`` (512): tokens per example, special tokens included; at most the model's
      positions. ``max_examples`` (None: all): examples kept, as above. ``batch_size`` (1):
      examples per forward pass. ``document_ids``: one integer per text (default 0, 1, ...).
    - ``seed`` (0): sets ``example_seed`` (which texts and chunks are kept), ``token_seed`` (which
      tokens the capture keeps, seeded per example id, docs/method.md §2.15) and the analysis'
      random streams; ``example_seed`` / ``token_seed`` override their part: the same texts with
      other token draws is ``token_seed=...`` alone.
    - ``capture_preset``: ``"notebook"`` (default) chooses the sampling for this call: buckets of
      about max_seq_len / 16 positions (``min_bucket_size``, a power of two >= 4) and a keep rate
      ``sampling_rate`` = min(1, max(8 / min_bucket_size, max_tokens_per_head / tokens)), so that
      every column is defined on a typical call (notebook_capture); ``"qk-sniffer"`` keeps
      qk-sniffer's production settings (uniform buckets of 128 positions, each token kept with
      probability 1/128: made for captures of millions of tokens; on a few texts, ap_first20 and
      ap_drop are NaN). A sampling option given replaces only what it names: ``sampling_rate``
      alone keeps the preset's buckets; a rate that leaves fewer than 2 keys of an example per
      bucket gets larger buckets before the run (a warning says so), or is refused when
      ``min_bucket_size`` was given too.
    - the capture options of SnifferOptions: ``sampler``, ``min_bucket_size``, ``base_rate``,
      ``sampling_rate``, ``layers``, ``heads``, ``head_sample``, ``head_sample_seed``,
      ``per_layer``, ``full_attention_only``, ``capture_queries``, ``capture_keys``,
      ``capture_pre_rope``, ``capture_token_strings``, ``bf16``;
    - the analysis options of analyze_dump by key (each in
      ``help(attention_plasticity.analyze_dump)``): ``threads``, ``max_tokens_per_head``,
      ``num_pairs_per_bucket``, ``min_bucket_queries``, ``max_rel_dist``, ``normality_max_dims``,
      ``p_alpha``, ``confidence_intervals``, ``confidence_level``, ``sampling_unit`` (the unit of
      the sequence-level errors: the document, docs/method.md §8.3), ``sequence_influences``
      (the per-document influences a paired comparison needs), ``distance_map``,
      ``distance_map_extra_pairs``, ``distance_bins_per_octave``, ``empirical_ap``,
      ``empirical_max_queries``, ``planar_rotation``, ``pca_roles``; and HeadOptions'
      ``covariance_epsilon``. They are set on ``head_options`` when given (a HeadOptions), else
      on analyze_dump's defaults (intervals on);
    - ``progress`` (None), ``warn`` (True): the progress bar and the warnings.

    Inputs are checked before the model runs; a CaptureError names the item and the value: a
    text that is bytes or neither a string nor token ids, token ids negative or beyond the
    model's vocabulary, a seed that is not an integer from 0 to 2**63-1, a model with no config
    (no attention, e.g. nn.Linear) or with weights on the meta device, a max_seq_len that gives
    examples longer than the model's positions, a min_bucket_size beyond 2**31-1.

    Warnings: a DocumentsWarning when the effective number of documents is below 10; a
    NaNColumnWarning before the analysis when heads have too few early queries or keys for
    ap_first20 / ap_drop, and one per column that is NaN after it (``warn=False`` silences
    them); a HeadFailedWarning per failed head (the others go on).

    Returns a ModelProfile (a DumpResult: ``tables``, ``write(dir)``, ``errors``, ...,
    ``examples_csv``, ``capture_record``); its numbers are those of capture_qk.py -> analyze_dump
    on the same capture settings.
    """
    from . import documents as _documents

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
    example_seed, token_seed, analysis_seed = resolve_seeds(seed, example_seed, token_seed, function)
    _check_capture_numbers(capture_kw, function)
    _check_model(model, function)
    vocab, positions = _model_limits(model)
    examples = _token_examples(tokenizer, texts, max_seq_len, function, document_ids, vocab)
    if not len(examples):
        raise CaptureError(f"{function}: the texts have no tokens")
    longest = max(map(len, examples.tokens))
    if positions is not None and longest > positions:
        raise CaptureError(f"{function}: max_seq_len {max_seq_len}: the model takes at most {positions} positions "
                           f"(its config's max_position_embeddings) and the texts give examples of {longest} "
                           f"tokens: give max_seq_len <= {positions}")
    total, n_texts = len(examples), examples.texts
    examples = examples.take(_documents.choose_examples(examples.chunks_per_document, max_examples, example_seed))
    capture_kw["seed"] = token_seed
    if analysis_seed is not None:
        run_kw["seed"] = analysis_seed
    sniff = _capture_options(capture_kw, capture_preset, max_seq_len, sum(map(len, examples.tokens)), run_kw,
                             head_options, function, warn=warn)
    sink = MemorySink()
    passes = -(-len(examples) // int(batch_size))
    bar = _progress_bar(passes, "pass", "forward passes", progress)
    try:
        plan, layers, tokens = run_capture(
            model, examples.tokens, sink, sniff, batch_size=batch_size,
            pad_id=0 if tokenizer is None else _pad_id(tokenizer),
            on_batch=lambda done: bar.update(-(-done // int(batch_size)) - bar.n))
    finally:
        bar.close()
    record = capture_record(examples, example_seed=example_seed, token_seed=token_seed, max_examples=max_examples,
                            texts=(n_texts, total),
                            function=function, warn=warn,
                            kept_tokens=_kept_tokens_by_example(sink, plan, len(examples)))
    csv = examples.csv()
    run, errors = analyze_in_memory(sink, plan, layers, head_options, run_kw, progress=progress, warn=warn,
                                    function=function, examples_csv=csv, capture_json=record)
    result = ModelProfile(run, errors, plan, layers, tokens, sniff, examples_csv=csv, capture_record=record)
    if warn:
        _results.warn_nan_columns(result.tables, stacklevel=2)
    return result


def _pad_id(tokenizer):
    for name in ("pad_token_id", "eos_token_id", "unk_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return value
    return 0


def profile_vectors(batches, lengths=None, example_ids=None, *, document_ids=None, token_ids=None, sliding_windows=None,
                    seed=None, token_seed=None, head_options=None, capture_preset="notebook", progress=None,
                    warn=True, **options):
    """The analysis of profile_model on query and key states another tool captured.

    ``batches``: one dict, or a list of them (one per forward pass), {(layer, 'q' | 'k'):
    tensor or array [batch, seq_len, heads, head_dim]}: the states whose dot products
    (times the scaling) are the scores: TransformerLens' ``hook_rot_q`` / ``hook_rot_k``
    where the model is rotary, else ``hook_q`` / ``hook_k`` (``from_activation_cache``), or
    what an nnsight trace saved (``from_nnsight_inputs``); keys with their own (GQA) head count;
    tensors on any device (only the kept rows are copied to host memory). ``lengths``: per
    batch, the real length of each example (padding on the right is left out; default the
    whole seq_len); ``example_ids``: per batch, an id per example, distinct over all batches
    (default 0, 1, ...); ``document_ids``: per batch, the document (an integer) each example was
    cut from (default: each example its own document): the sampling unit of the sequence-level
    errors (docs/method.md §8.3); an example's chunk is its place among its document's examples in
    the order given. ``token_ids``: per batch, the token ids the states were computed from
    ([batch, seq_len], e.g. the tokens given to run_with_cache or the trace): each example's
    fingerprint is that of its first ``lengths`` ids, and its document's that of the ids of the
    document's examples joined in order, so a comparison can check that two profiles read the same
    texts; without them no fingerprint is known and a comparison pairs these documents only when
    told (design="paired"). ``document_ids`` or ``token_ids`` given, the result set holds
    examples.csv (docs/method.md §1.1). ``sliding_windows``: {layer: window}
    (default none). ``seed`` / ``token_seed`` (the kept tokens), the options, ``capture_preset``,
    ``progress`` and ``warn`` are profile_model's (max_seq_len: the states' seq_len). Returns a
    ModelProfile.
    """
    import torch

    function = "profile_vectors"
    if isinstance(batches, dict):
        batches, lengths, example_ids, document_ids, token_ids = [batches], \
            None if lengths is None else [lengths], None if example_ids is None else [example_ids], \
            None if document_ids is None else [document_ids], None if token_ids is None else [token_ids]
    batches = list(batches)
    if not batches:
        raise CaptureError(f"{function}: batches is empty")
    capture_kw, run_kw, head_options = _split_options(options, head_options, function)
    _example_seed, token_seed, analysis_seed = resolve_seeds(seed, None, token_seed, function)
    capture_kw["seed"] = token_seed
    if analysis_seed is not None:
        run_kw["seed"] = analysis_seed
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
    for what, given in (("lengths", lengths), ("example_ids", example_ids), ("document_ids", document_ids),
                        ("token_ids", token_ids)):
        if given is not None and len(given) != len(batches):
            raise CaptureError(f"{function}: {what}: {len(given)} lists for {len(batches)} batches")
    shapes, ids, documents, token_rows = [], [], [], []
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
        batch_documents = None if document_ids is None else list(document_ids[i])
        for what, values in (("lengths", lens), ("example_ids", batch_ids), ("document_ids", batch_documents)):
            if values is not None and len(values) != size:
                raise CaptureError(f"{function}: {what} of batch {i}: {len(values)} values for its {size} "
                                   f"examples")
        bad = [n for n in lens if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= seq]
        if bad:
            raise CaptureError(f"{function}: lengths of batch {i}: {bad[0]!r} is not a length from 1 to the "
                               f"batch's sequence length {seq}")
        for j, key in enumerate(batch_documents or ()):
            if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)) \
                    or not -2**63 <= int(key) < 2**63:
                raise CaptureError(f"{function}: document_ids of batch {i}: {key!r} (example {j}) is not an "
                                   f"integer (int64)")
        if token_ids is not None:
            given = token_ids[i].tolist() if hasattr(token_ids[i], "tolist") else [list(r) for r in token_ids[i]]
            if len(given) != size or any(len(row) < n for row, n in zip(given, lens)):
                raise CaptureError(f"{function}: token_ids of batch {i}: give [{size}, {seq}] ids (one row of at "
                                   f"least its length per example)")
            for j, (row, n) in enumerate(zip(given, lens)):
                if any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) for t in row[:n]):
                    raise CaptureError(f"{function}: token_ids of batch {i}, example {j}: not integer ids")
                token_rows.append([int(t) for t in row[:n]])
        ids.extend(batch_ids)
        documents.extend(batch_ids if batch_documents is None else [int(d) for d in batch_documents])
        shapes.append((size, seq, [int(n) for n in lens]))
    check_example_ids(ids, f"{function}: example_ids")
    csv = None
    if document_ids is not None or token_ids is not None:
        from . import documents as _documents
        seen, chunks = {}, []
        for d in documents:
            chunks.append(seen.get(d, 0))
            seen[d] = chunks[-1] + 1
        prints = whole = None
        if token_ids is not None:
            joined = {}
            for d, row in zip(documents, token_rows):
                joined.setdefault(d, []).extend(row)
            prints = [_documents.fingerprint(row) for row in token_rows]
            whole = [_documents.fingerprint(joined[d]) for d in documents]
        csv = _documents.examples_csv(ids, documents, chunks, prints, whole)
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
    record = None
    if csv is not None:
        from . import documents as _documents
        by_document = {}  # the tokens read (lengths) of each document
        for d, n in zip(documents, [n for s in shapes for n in s[2]]):
            by_document[d] = by_document.get(d, 0) + n
        effective = _documents.effective_documents(by_document)
        if warn:
            _documents.warn_effective_documents(effective, len(by_document), function)
        record = {"token_seed": int(token_seed), "rule": "given", "examples": len(ids),
                  "documents": len(by_document),
                  "effective_documents": None if not np.isfinite(effective) else round(float(effective), 6)}
    run, errors = analyze_in_memory(sink, plan, infos, head_options, run_kw, progress=progress, warn=warn,
                                    function=function, examples_csv=csv, capture_json=record)
    result = ModelProfile(run, errors, plan, infos, sum(sum(s[2]) for s in shapes), sniff,
                          examples_csv=csv, capture_record=record)
    if warn:
        _results.warn_nan_columns(result.tables, stacklevel=2)
    return result
