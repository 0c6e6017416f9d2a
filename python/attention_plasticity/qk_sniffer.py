"""qk-sniffer's capture options on attention_plasticity.capture: samplers, head plans, the
recorder that keeps the sampled rows as they are produced, and the sinks: the Parquet writer of
the qk-sniffer schema, or memory (``attention_plasticity.profile`` analyzes what it holds).

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

import operator
import os
from dataclasses import dataclass, fields

import numpy as np

from . import capture as _capture
from .layout import PARQUET_NAME, head_folder  # noqa: F401  (the dump layout's names)

CaptureError = _capture.CaptureError
SAMPLERS = ("uniform", "log_uniform", "all")
STREAM_HEADS = 2   # np.random.default_rng([seed, STREAM_HEADS]): which heads head_sample keeps
STREAM_TOKENS = 3  # np.random.default_rng([seed, STREAM_TOKENS, example_id]): kept tokens


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
    first = layers[0] if layers else all_layers[0]
    num_q, num_k = infos[first].num_q_heads, infos[first].num_k_heads
    # The head counts are those each layer's attention calls receive (AttentionCapture): one
    # dump has one num_q_heads / num_k_heads (metadata.json), so layers that differ are refused.
    other = [layer for layer in layers
             if (infos[layer].num_q_heads, infos[layer].num_k_heads) != (num_q, num_k)]
    if other:
        layer = other[0]
        raise CaptureError(f"layers: layer {layer} receives {infos[layer].num_q_heads} query "
                           f"and {infos[layer].num_k_heads} key heads, layer {first} "
                           f"{num_q} and {num_k}: a capture holds layers of one head count; "
                           f"choose the layers with layers=[...] (--layers)")
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
