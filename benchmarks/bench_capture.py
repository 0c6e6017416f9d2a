#!/usr/bin/env python3
"""The cost of attention_plasticity's capture on a decoder's forward pass, and its memory.

A Qwen3-shaped decoder (from its config class, seeded random weights; nothing downloaded:
the weights do not change the cost) reads one sequence per forward pass, on one torch
thread, in these modes:

    off        the model alone
    capture    + the capture at production settings (qk-sniffer's: uniform buckets of 128
               positions, each token kept with probability 1/8, a quarter of the query heads
               drawn with their GQA key heads), rows kept in memory (MemorySink)
    parquet    the same, written as a qk-sniffer dump (ParquetSink, zstd; the files are
               closed after the timed passes)

Times: one process runs ``off``, ``capture`` and ``parquet`` passes in turn, round after
round (so that a load change on a shared machine hits every mode alike), and reports the
median time per pass and the median over rounds of each round's ratio to ``off`` (the
issue's bound: 1.3x). Memory: the peak resident memory of each mode alone, each in a fresh
process (``--mode``), beside the bytes the capture kept. Run with
MALLOC_MMAP_THRESHOLD_=65536 to see live memory: glibc otherwise keeps freed heap pages, and
the peak then depends on the allocation pattern more than on what is alive.

    .venv/bin/python benchmarks/bench_capture.py            # ~2 min
    .venv/bin/python benchmarks/bench_capture.py --seq-len 4096 --rounds 5
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def build_model(args):
    import torch
    import transformers

    config = transformers.Qwen3Config(
        vocab_size=32000, hidden_size=args.hidden, intermediate_size=3 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.heads // 4, head_dim=args.hidden // args.heads,
        max_position_embeddings=max(4096, args.seq_len))
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config, attn_implementation="sdpa").eval()


def production_options(sniffer, model):
    num_q = model.config.num_attention_heads
    return sniffer.SnifferOptions(sampler="uniform", min_bucket_size=128, base_rate=16.0,
                                  head_sample=model.config.num_hidden_layers * num_q // 4,
                                  head_sample_seed=0, capture_token_strings=False, seed=0)


def attach(sniffer, model, options, sink):
    """An AttentionCapture keeping the production plan's rows in ``sink``: (capture, run)."""
    run = sniffer.Sniffer(options, {}, sink)
    hooks = sniffer._capture.AttentionCapture(model, run)
    plan = sniffer.plan_heads(hooks.layers, options)
    run.set_plan(plan, hooks.layers)
    sink.start(plan, hooks.layers)
    return hooks, run


def setup(args):
    import torch
    from attention_plasticity import capture_sniffer as sniffer

    torch.set_num_threads(1)
    model = build_model(args)
    ids = torch.randint(0, 32000, (1, args.seq_len), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        model(input_ids=ids[:, :256])  # warm-up
    return sniffer, model, ids, production_options(sniffer, model)


def kept_bytes(mode, sink, folder):
    if mode == "capture":
        return sum(b[0].nbytes + 3 * b[1].nbytes for blocks in sink.blocks.values()
                   for b in blocks)
    if mode == "parquet":
        sink.finish()
        return sum(os.path.getsize(os.path.join(folder, d, "data.parquet"))
                   for d in os.listdir(folder))
    return 0


def run_mode(args, mode):
    """One process, one mode: {'seconds': [per pass], 'peak_rss_mib', 'kept_mib'}."""
    import torch

    sniffer, model, ids, options = setup(args)
    folder = tempfile.mkdtemp(prefix="ap_bench_capture_")
    sink = sniffer.MemorySink() if mode == "capture" else \
        sniffer.ParquetSink(folder) if mode == "parquet" else None
    hooks = attach(sniffer, model, options, sink)[0] if sink is not None else None
    seconds = []
    with torch.inference_mode():
        for example in range(args.rounds):
            if hooks is not None:
                hooks.on_vectors.begin_batch([example], [args.seq_len])
            start = time.perf_counter()
            model(input_ids=ids)
            seconds.append(time.perf_counter() - start)
    if hooks is not None:
        hooks.remove()
    kept = kept_bytes(mode, sink, folder)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"seconds": seconds, "peak_rss_mib": peak, "kept_mib": kept / 2**20}


def run_interleaved(args):
    """One process, every mode in turn each round: {mode: [seconds per pass]}."""
    import torch

    sniffer, model, ids, options = setup(args)
    sinks = {"capture": sniffer.MemorySink(),
             "parquet": sniffer.ParquetSink(tempfile.mkdtemp(prefix="ap_bench_capture_"))}
    runs = {}
    for mode, sink in sinks.items():  # the plans, once; then a capture per pass
        hooks, runs[mode] = attach(sniffer, model, options, sink)
        hooks.remove()
    seconds = {"off": [], "capture": [], "parquet": []}
    with torch.inference_mode():
        for example in range(args.rounds):
            for mode in seconds:
                hooks = None
                if mode in runs:
                    hooks = sniffer._capture.AttentionCapture(model, runs[mode])
                    runs[mode].begin_batch([example], [args.seq_len])
                start = time.perf_counter()
                model(input_ids=ids)
                seconds[mode].append(time.perf_counter() - start)
                if hooks is not None:
                    hooks.remove()
    sinks["parquet"].finish()
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mode", choices=("off", "capture", "parquet", "interleaved"),
                        help="(internal) run one mode in this process, print JSON")
    args = parser.parse_args(argv)
    if args.mode:
        result = run_interleaved(args) if args.mode == "interleaved" else run_mode(args, args.mode)
        print(json.dumps(result))
        return 0
    common = ["--seq-len", args.seq_len, "--hidden", args.hidden, "--layers", args.layers,
              "--heads", args.heads, "--rounds", args.rounds]
    results = {}
    for mode in ("interleaved", "off", "capture", "parquet"):
        proc = subprocess.run([sys.executable, __file__, "--mode", mode] + [str(c) for c in common],
                              stdout=subprocess.PIPE, text=True, check=True, timeout=3600)
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    import statistics
    times = results.pop("interleaved")
    print(f"Qwen3-shaped decoder: {args.layers} layers, hidden {args.hidden}, {args.heads} query "
          f"heads / {args.heads // 4} key heads, head dim {args.hidden // args.heads}; one "
          f"sequence of {args.seq_len} tokens per pass, 1 torch thread, {args.rounds} rounds")
    print(f"{'mode':8s} {'ms/pass':>9s} {'ratio':>6s} {'ratio range':>13s} {'peak RSS MiB':>13s} "
          f"{'kept MiB':>9s}")
    for mode, r in results.items():
        ratios = [t / o for t, o in zip(times[mode], times["off"])]
        print(f"{mode:8s} {1000 * statistics.median(times[mode]):9.1f} "
              f"{statistics.median(ratios):6.3f} {min(ratios):6.3f}-{max(ratios):6.3f} "
              f"{r['peak_rss_mib']:13.1f} {r['kept_mib']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
