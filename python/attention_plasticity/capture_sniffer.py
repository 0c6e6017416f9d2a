"""qk-sniffer's capture options on attention_plasticity.capture: samplers, head plans, the
recorder that keeps the sampled rows as they are produced, the Parquet writer of the
qk-sniffer schema, and ``profile_model`` (the same analysis in memory).

Options (``SnifferOptions``), named as qk-sniffer's ``capture:`` section (docs/method.md §1.2;
examples/capture_qk.py reads that section of its YAML configs as is):

- buckets and samplers: ``sampler`` ``uniform`` (bucket = position // min_bucket_size, each
  token kept with probability min(1, base_rate / min_bucket_size)), ``log_uniform`` (bucket =
  max(floor(log2(position + 1)), ceil(log2(min_bucket_size))), kept with probability
  min(1, base_rate / 2**bucket)), ``all`` (uniform buckets, every token kept);
  ``sampling_rate`` (ours) replaces the probability by one constant;
- the heads: ``layers``, ``heads`` (query heads), ``head_sample`` query heads drawn uniformly
  without replacement (seeded by ``head_sample_seed``) from the selected ones (``per_layer``:
  that many in each layer), ``full_attention_only`` (sliding-window layers are not
  candidates); each captured query head brings the key head of its GQA group (§1.3);
- ``capture_queries`` / ``capture_keys``, ``capture_pre_rope`` (hook_q/hook_k instead of
  hook_rot_q/hook_rot_k), ``capture_token_strings`` (else token_str is null), ``bf16``
  (round to bfloat16, stored as float32).

Which tokens are kept: per example and kind one draw u ~ U(0, 1) per token from
np.random.default_rng([seed, STREAM_TOKENS, example_id]) (queries first, then keys), the
token kept when u < its probability: the same tokens in every layer and head, and
independent for queries and keys. (qk-sniffer draws per layer; the rates are the same.)
Padding tokens are never seen: a batch is padded on the right and only the first
``length`` rows of each example are read. Memory holds what is kept: the rows are selected,
converted and handed to the sink inside the attention call that produced them.
"""

import difflib
import operator
import os
import re
import sys
from dataclasses import dataclass, fields

import numpy as np

from . import capture as _capture
from . import results as _results
from .dump import DumpResult as _DumpResult  # profile_model's result is a DumpResult

CaptureError = _capture.CaptureError
SAMPLERS = ("uniform", "log_uniform", "all")
STREAM_HEADS = 2   # np.random.default_rng([seed, STREAM_HEADS]): which heads head_sample keeps
STREAM_TOKENS = 3  # np.random.default_rng([seed, STREAM_TOKENS, example_id]): kept tokens
PARQUET_NAME = "data.parquet"


@dataclass
class SnifferOptions:
    """What a capture keeps (see the module docstring); ``check()`` validates."""
    sampler: str = "uniform"
    base_rate: float = 1.0
    min_bucket_size: int = 128
    sampling_rate: object = None
    layers: object = None
    heads: object = None
    head_sample: object = None
    head_sample_seed: object = None
    per_layer: bool = False
    full_attention_only: bool = False
    capture_queries: bool = True
    capture_keys: bool = True
    capture_pre_rope: bool = False
    capture_token_strings: bool = True
    bf16: bool = False
    seed: int = 0

    @classmethod
    def names(cls):
        return [f.name for f in fields(cls)]

    def check(self):
        if self.sampler not in SAMPLERS:
            raise CaptureError(f"sampler '{self.sampler}': use one of {', '.join(SAMPLERS)}")
        if int(self.min_bucket_size) < 1:
            raise CaptureError(f"min_bucket_size {self.min_bucket_size}: must be at least 1")
        if not self.base_rate > 0:
            raise CaptureError(f"base_rate {self.base_rate}: must be > 0")
        if self.sampling_rate is not None and not 0.0 < self.sampling_rate <= 1.0:
            raise CaptureError(f"sampling_rate {self.sampling_rate}: must be in (0, 1]")
        if self.head_sample is not None and int(self.head_sample) < 1:
            raise CaptureError(f"head_sample {self.head_sample}: must be at least 1")
        if self.per_layer and self.head_sample is None:
            raise CaptureError("per_layer needs head_sample")
        if not (self.capture_queries or self.capture_keys):
            raise CaptureError("capture_queries and capture_keys are both off: nothing to capture")
        if int(self.seed) < 0:
            raise CaptureError(f"seed {self.seed}: must be >= 0")
        return self

    def buckets(self, position):
        """The bucket of each position (int32)."""
        position = np.asarray(position, dtype=np.int64)
        if self.sampler == "log_uniform":
            floor = int(np.ceil(np.log2(int(self.min_bucket_size)))) if self.min_bucket_size > 1 \
                else 0
            raw = np.floor(np.log2(position + 1.0)).astype(np.int64)
            return np.maximum(raw, floor).astype(np.int32)
        return (position // int(self.min_bucket_size)).astype(np.int32)

    def keep_probability(self, bucket):
        """The probability that a token of each bucket is kept (float64 [n])."""
        bucket = np.asarray(bucket)
        if self.sampling_rate is not None:
            return np.full(bucket.shape, float(self.sampling_rate))
        if self.sampler == "all":
            return np.ones(bucket.shape)
        if self.sampler == "uniform":
            return np.full(bucket.shape, min(1.0, self.base_rate / int(self.min_bucket_size)))
        return np.minimum(1.0, self.base_rate / np.exp2(bucket.astype(np.float64)))


def token_masks(seed, example_id, length, rate):
    """(query mask, key mask) of one example: u < rate for independent uniform draws u
    (``rate`` a number or an array [length])."""
    rng = np.random.default_rng([seed, STREAM_TOKENS, example_id])
    keep_q = rng.random(length) < rate
    keep_k = rng.random(length) < rate
    return keep_q, keep_k


def select_heads(layers, heads, head_sample, num_q_heads, num_k_heads, seed, per_layer=False,
                 clip=False):
    """{layer: (query heads, key heads)}: the query heads of ``layers`` x ``heads`` (or
    ``head_sample`` of them, uniformly without replacement; with ``per_layer``,
    ``head_sample`` in each layer; ``clip``: at most all of them, as qk-sniffer), and for
    each layer the key heads their GQA groups read."""
    if num_q_heads % num_k_heads:
        raise CaptureError(f"the model has {num_q_heads} query heads and {num_k_heads} key "
                           f"heads: not a multiple")
    groups = [[(layer, head) for head in heads] for layer in layers] if per_layer \
        else [[(layer, head) for layer in layers for head in heads]]
    pairs = []
    rng = np.random.default_rng([seed, STREAM_HEADS])
    for group_pairs in groups:
        if head_sample is not None:
            count = min(head_sample, len(group_pairs)) if clip else head_sample
            if not 1 <= count <= len(group_pairs):
                raise CaptureError(f"--head-sample {head_sample}: choose between 1 and "
                                   f"{len(group_pairs)} (the selected "
                                   f"{'heads of a layer' if per_layer else 'layers x heads'})")
            keep = np.sort(rng.choice(len(group_pairs), size=count, replace=False))
            group_pairs = [group_pairs[i] for i in keep]
        pairs.extend(group_pairs)
    group = num_q_heads // num_k_heads
    out = {}
    for layer, head in pairs:
        out.setdefault(layer, ([], []))[0].append(head)
    return {layer: (q, sorted({h // group for h in q})) for layer, (q, _) in sorted(out.items())}


def plan_heads(infos, options):
    """The head plan of ``options`` on a model whose layers are ``infos`` ({layer: LayerInfo},
    AttentionCapture.layers): {layer: (query heads, key heads)}."""
    all_layers = sorted(infos)
    layers = all_layers if options.layers is None else sorted(set(options.layers))
    for layer in layers:
        if layer not in infos:
            raise CaptureError(f"layers: {layer} is out of range (the model has layers "
                               f"{all_layers[0]}..{all_layers[-1]})")
    if options.full_attention_only:
        layers = [layer for layer in layers if infos[layer].sliding_window is None]
        if not layers:
            raise CaptureError("full_attention_only: every selected layer has a sliding window")
    num_q, num_k = infos[all_layers[0]].num_q_heads, infos[all_layers[0]].num_k_heads
    heads = list(range(num_q)) if options.heads is None else sorted(set(options.heads))
    bad = [h for h in heads if not 0 <= h < num_q]
    if bad:
        raise CaptureError(f"heads: {bad[0]} is out of range (the model has {num_q} query heads)")
    seed = options.seed if options.head_sample_seed is None else options.head_sample_seed
    return select_heads(layers, heads, options.head_sample, num_q, num_k, seed,
                        options.per_layer, clip=options.head_sample_seed is not None)


# ---------------------------------------------------------------------------
# The recorder
# ---------------------------------------------------------------------------

class Sniffer:
    """The on_vectors of an AttentionCapture that keeps the planned heads' sampled rows and
    hands them to ``sink.add(layer, head, kind, example_id, position, bucket, vectors [m, d]
    float32, tokens or None, sliding_window)``; ``begin_batch`` before each forward pass."""

    def __init__(self, options, plan, sink):
        import torch
        self.torch = torch
        self.options = options
        self.sink = sink
        self.batch = []
        self.set_plan(plan, None)

    def set_plan(self, plan, infos):
        """The heads to keep, and the layers' LayerInfo (AttentionCapture.layers, kept up to
        date by the capture: the window each layer's attention receives)."""
        self.plan = plan
        self.infos = infos
        self.heads = {(layer, kind): self.torch.tensor(heads[0 if kind == "q" else 1])
                      for layer, heads in plan.items() for kind in "qk"}

    def begin_batch(self, example_ids, lengths, tokens=None):
        """The examples of the next forward pass: ids, lengths (the first ``length`` rows of
        each are read), and their token strings (or None)."""
        self.batch = []
        for i, (example_id, length) in enumerate(zip(example_ids, lengths)):
            position = np.arange(length, dtype=np.int32)
            bucket = self.options.buckets(position)
            keep_q, keep_k = token_masks(self.options.seed, example_id, length,
                                         self.options.keep_probability(bucket))
            rows = {"q": np.flatnonzero(keep_q), "k": np.flatnonzero(keep_k)}
            self.batch.append({"example_id": int(example_id), "position": position,
                               "bucket": bucket, "rows": rows,
                               "rows_t": {k: self.torch.from_numpy(v) for k, v in rows.items()},
                               "tokens": None if tokens is None
                               else np.array(tokens[i], dtype=object)})

    def __call__(self, layer, kind, x):
        if layer not in self.plan:
            return
        if (kind == "q" and not self.options.capture_queries) or \
                (kind == "k" and not self.options.capture_keys):
            return
        torch = self.torch
        heads = self.plan[layer][0 if kind == "q" else 1]
        window = self.infos[layer].sliding_window if self.infos else None
        for b, example in enumerate(self.batch):
            rows = example["rows"][kind]
            if not len(rows):
                continue
            # The kept rows are selected where the states are (a GPU, say): only they are copied.
            kept = x[b][example["rows_t"][kind].to(x.device)]  # [m, H, d]
            kept = kept[:, self.heads[layer, kind].to(x.device)] if len(heads) != x.shape[2] else kept
            if self.options.bf16:
                kept = kept.to(torch.bfloat16)
            kept = kept.to(device="cpu", dtype=torch.float32).numpy()
            tokens = None if example["tokens"] is None else example["tokens"][rows]
            for i, head in enumerate(heads):
                self.sink.add(layer, head, kind, example["example_id"],
                              example["position"][rows], example["bucket"][rows],
                              kept[:, i, :], tokens, window)


def check_example_ids(example_ids, where):
    """CaptureError unless every id is an int32 and no id repeats: the analysis pairs keys
    within an example (docs/method.md §2.12), so two sequences under one id would pair keys
    of different texts."""
    seen = set()
    for example_id in example_ids:
        try:
            if isinstance(example_id, bool):
                raise TypeError
            example_id = operator.index(example_id)
        except TypeError:
            raise CaptureError(f"{where}: example id {example_id!r} is not an integer") from None
        if not -2**31 <= int(example_id) < 2**31:
            raise CaptureError(f"{where}: example id {example_id} does not fit the int32 "
                               f"example_id column")
        if int(example_id) in seen:
            raise CaptureError(f"{where}: example id {example_id} is given to two sequences "
                               f"(keys are paired within an example, so each sequence needs "
                               f"its own id)")
        seen.add(int(example_id))


def run_capture(model, examples, sink, options, *, example_ids=None, batch_size=1,
                pad_id=0, token_strings=None, on_batch=None):
    """Run ``model`` over ``examples`` (token id lists) in batches of ``batch_size`` (padded
    on the right with ``pad_id``), keeping what ``options`` says in ``sink`` (``start(plan,
    infos)`` first, then ``add`` for each kept block; finishing is the caller's).
    ``example_ids``: one int per example (default 0, 1, ...); ``token_strings(ids)`` gives
    the token texts (needed when options.capture_token_strings). Returns (plan, infos,
    tokens seen)."""
    import torch

    options.check()
    if example_ids is None:
        example_ids = list(range(len(examples)))
    if len(example_ids) != len(examples):
        raise CaptureError(f"example_ids: {len(example_ids)} ids for {len(examples)} examples")
    check_example_ids(example_ids, "run_capture: example_ids")
    if batch_size < 1:
        raise CaptureError(f"batch_size {batch_size}: must be at least 1")
    sniffer = Sniffer(options, {}, sink)
    tokens_seen = 0
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with _capture.AttentionCapture(model, sniffer, pre_rope=options.capture_pre_rope) as cap:
        plan = plan_heads(cap.layers, options)
        sniffer.set_plan(plan, cap.layers)
        sink.start(plan, cap.layers)
        with torch.inference_mode():
            for start in range(0, len(examples), batch_size):
                chunk = examples[start:start + batch_size]
                lengths = [len(ids) for ids in chunk]
                width = max(lengths)
                input_ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for i, ids in enumerate(chunk):
                    input_ids[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
                    mask[i, :len(ids)] = 1
                tokens = [token_strings(ids) for ids in chunk] \
                    if options.capture_token_strings and token_strings else None
                sniffer.begin_batch(example_ids[start:start + batch_size], lengths, tokens)
                model(input_ids=input_ids.to(device), attention_mask=mask.to(device))
                tokens_seen += sum(lengths)
                if on_batch is not None:
                    on_batch(start + len(chunk))
    return plan, cap.layers, tokens_seen


# ---------------------------------------------------------------------------
# Sinks: the qk-sniffer Parquet folders, or memory
# ---------------------------------------------------------------------------

def sniffed_schema():
    """The qk-sniffer Parquet schema (docs/method.md §1.2)."""
    import pyarrow as pa
    return pa.schema([("bucket", pa.int32()), ("example_id", pa.int32()),
                      ("position", pa.int32()), ("vector", pa.list_(pa.float32())),
                      ("sliding_window", pa.int32()), ("token_str", pa.string())])


class FolderWriter:
    """One head folder's data.parquet in qk-sniffer's schema, written in row groups of
    ``row_group_size`` rows to a temporary file that ``close`` renames."""

    COLUMNS = ("bucket", "example_id", "position", "vector", "sliding_window", "token_str")

    def __init__(self, folder, row_group_size, compression):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.row_group_size = row_group_size
        self.schema = sniffed_schema()
        os.makedirs(folder, exist_ok=True)
        self.final = os.path.join(folder, PARQUET_NAME)
        self.tmp = os.path.join(folder, f".{PARQUET_NAME}.tmp{os.getpid()}")
        self.writer = pq.ParquetWriter(self.tmp, self.schema, compression=compression)
        self.pending = []  # blocks: dicts of per-row arrays, by column
        self.pending_rows = 0
        self.rows = 0

    def add(self, example_id, positions, buckets, vectors, tokens, sliding_window):
        """Rows of one example: positions, buckets [m], vectors [m, d] float32, tokens [m]
        (object array of str, or None: null); sliding_window an int or None (null)."""
        m = len(positions)
        self.pending.append({
            "bucket": buckets.astype(np.int32), "example_id": np.full(m, example_id, np.int32),
            "position": positions.astype(np.int32), "vector": vectors,
            "sliding_window": np.full(m, -1 if sliding_window is None else sliding_window,
                                      np.int32),
            "token_str": np.full(m, None, dtype=object) if tokens is None else tokens})
        self.pending_rows += m
        while self.pending_rows >= self.row_group_size:
            self._flush(self.row_group_size)

    def _flush(self, rows):
        pa = self.pa
        block = {c: np.concatenate([b[c] for b in self.pending]) for c in self.COLUMNS}
        now = {c: v[:rows] for c, v in block.items()}
        d = now["vector"].shape[1]
        offsets = np.arange(0, rows * d + 1, d, dtype=np.int32)
        window = now["sliding_window"]
        table = pa.Table.from_arrays([
            pa.array(now["bucket"], type=pa.int32()),
            pa.array(now["example_id"], type=pa.int32()),
            pa.array(now["position"], type=pa.int32()),
            pa.ListArray.from_arrays(pa.array(offsets),
                                     pa.array(np.ascontiguousarray(now["vector"]).ravel(),
                                              type=pa.float32())),
            pa.array(window, type=pa.int32(), mask=window < 0),
            pa.array(now["token_str"].tolist(), type=pa.string()),
        ], schema=self.schema)
        self.writer.write_table(table, row_group_size=rows)
        self.rows += rows
        self.pending_rows -= rows
        self.pending = [{c: v[rows:] for c, v in block.items()}] if self.pending_rows else []

    def close(self):
        if self.pending_rows:
            self._flush(self.pending_rows)
        self.writer.close()
        os.replace(self.tmp, self.final)

    def abort(self):
        """Drop the temporary file (and the folder, when that leaves it empty)."""
        try:
            self.writer.close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)
            folder = os.path.dirname(self.tmp)
            if os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)


def head_folder(layer, head, kind):
    return "l%02dh%02d%s" % (layer, head, kind)


class ParquetSink:
    """The kept rows as a qk-sniffer dump under ``out``: one FolderWriter per planned
    (layer, head, kind); ``finish()`` renames the files into place, ``abort()`` drops them."""

    def __init__(self, out, row_group_size=1024, compression="zstd", kinds="qk"):
        self.out, self.row_group_size, self.compression = out, row_group_size, compression
        self.kinds = kinds
        self.writers = {}

    def start(self, plan, _infos):
        for layer, (q_heads, k_heads) in plan.items():
            for kind, kind_heads in (("q", q_heads), ("k", k_heads)):
                if kind not in self.kinds:
                    continue
                for head in kind_heads:
                    self.writers[layer, head, kind] = FolderWriter(
                        os.path.join(self.out, head_folder(layer, head, kind)),
                        self.row_group_size, self.compression)

    def add(self, layer, head, kind, example_id, position, bucket, vectors, tokens, window):
        self.writers[layer, head, kind].add(example_id, position, bucket, vectors, tokens,
                                            window)

    def finish(self):
        for writer in self.writers.values():
            writer.close()

    def abort(self):
        for writer in self.writers.values():
            if os.path.exists(writer.tmp):
                writer.abort()

    def rows(self):
        return {key: w.rows for key, w in self.writers.items()}


class MemorySink:
    """The kept rows in memory: ``columns(layer, head, kind)`` -> dict of NumPy arrays in the
    order a dump would hold them (vector float32 [n, d], position/bucket/example_id int64,
    sliding_window, token_str)."""

    def __init__(self):
        self.blocks = {}
        self.windows = {}

    def start(self, plan, _infos):
        self.plan = plan

    def add(self, layer, head, kind, example_id, position, bucket, vectors, tokens, window):
        self.blocks.setdefault((layer, head, kind), []).append(
            (np.ascontiguousarray(vectors), position.astype(np.int64), bucket.astype(np.int64),
             np.full(len(position), example_id, np.int64), tokens))
        self.windows[layer, head, kind] = window

    def columns(self, layer, head, kind):
        blocks = self.blocks.get((layer, head, kind))
        if not blocks:
            return None
        out = {name: np.concatenate([b[i] for b in blocks])
               for i, name in enumerate(("vector", "position", "bucket", "example_id"))}
        out["sliding_window"] = self.windows[layer, head, kind]
        out["token_str"] = None if blocks[0][4] is None else np.concatenate([b[4] for b in blocks])
        return out


# ---------------------------------------------------------------------------
# In memory: profile_model
# ---------------------------------------------------------------------------

# The name of an in-memory capture where a dump's folder would be named (messages, errors).
MEMORY_NAME = "<in memory>"
_FOLDER = re.compile(r"l(\d+)h(\d+)([qk])$")
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


def notebook_capture(max_seq_len, tokens, max_tokens_per_head=50000, min_bucket_size=None):
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
        layer, head, kind = _FOLDER.search(folder).groups()
        data = sink.columns(int(layer), int(head), kind)
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
        max_tokens = run_kw.get("max_tokens_per_head",
                                getattr(head_options, "max_tokens_per_head", 50000))
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


# The toolkit adapters live in attention_plasticity.interop; their old home keeps the names.
from .interop import _pattern_misfit, from_activation_cache, from_nnsight_inputs  # noqa: E402,F401
