#!/usr/bin/env python3
"""What ap.PlasticityMonitor costs on the decoder of scripts/train_decoder.py (issue 35).

Trains the decoder (train_decoder.py's model, data, optimizer and schedule; its defaults: batch 4,
context 512) for --steps steps three times from the same seed: without a monitor, with a monitor
observing every --every steps in the foreground, and with background=True. The probe is the
plasticity study's (docs/plasticity_study.md): --max-examples examples of CPython's
pydoc_data/topics.py, <|bos|> + at most 511 bytes, tokens kept at --sampling-rate,
buckets of --bucket-size positions, sequence-level errors, every query head. Checks that the three
runs' losses are bit-identical, and writes OUT/overhead.json: the seconds per training step, per
observation (capture, analysis, and the time the training loop spent inside the monitor: the
capture, plus the analysis in the foreground or the wait for the previous one in the background),
and the fraction of training time the monitor takes at --every and at --realistic-every.

Run: .venv/bin/python scripts/monitor_overhead.py OUT [--steps 60 --every 20]
"""

import argparse
import importlib.util
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_train_decoder():
    spec = importlib.util.spec_from_file_location("train_decoder", os.path.join(HERE, "train_decoder.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(td):
    """(texts, tokenizer) of the plasticity study's capture: every topic of pydoc_data/topics.py in
    sorted order through the byte tokenizer; the monitor cuts them as examples/capture_qk.py does
    (<|bos|> + at most 511 bytes) and keeps --max-examples of them (seeded)."""
    return [text for _name, text in td.documents()], td.build_tokenizer()


def train(td, args, monitor=None):
    """train_decoder.py's pre-training (and with --extend its context extension: the model rebuilt
    at the longer context and larger RoPE base, a new optimizer), its draws from one generator;
    monitor.observe after every optimizer step, and forced at the extension's 3 checkpoint steps
    (train_decoder.py --extend-checkpoints 3). Returns (losses, wall seconds, seconds in the
    monitor)."""
    torch.manual_seed(args.seed)
    targs = td.parse_args(["unused", "--steps", str(args.steps), "--extend-steps", str(args.extend_steps)])
    stream, _val = td.byte_streams()
    gen = torch.Generator().manual_seed(args.seed)
    losses = []
    inside = 0.0  # seconds the loop spent inside the monitor (observe, close)
    t0 = time.perf_counter()

    def observe(model, step, force=False):
        nonlocal inside
        if monitor is not None:
            w = time.perf_counter()
            monitor.observe(model, step, force=force)
            inside += time.perf_counter() - w

    def phase(model, steps, batch, seq_len, peak, warmup, first, forced=()):
        opt = torch.optim.AdamW(model.parameters(), lr=peak, betas=(0.9, 0.95), weight_decay=0.05)
        for s in range(1, steps + 1):
            for group in opt.param_groups:
                group["lr"] = td.lr_at(s, steps, peak, warmup)
            starts = torch.randint(0, len(stream) - seq_len, (batch,), generator=gen)
            inputs, labels = td.windows(stream, starts, seq_len)
            logits = model(input_ids=inputs, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, td.VOCAB), labels.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            observe(model, first + s, force=s in forced)

    model = td.make_model(td.make_config(targs, targs.seq_len, targs.rope_theta))
    observe(model, 0)
    phase(model, args.steps, targs.batch, targs.seq_len, targs.lr, targs.warmup, 0)
    if args.extend:
        model = td.make_model(td.make_config(targs, targs.extend_seq_len, targs.extend_rope_theta),
                              model.state_dict())
        phase(model, targs.extend_steps, targs.extend_batch, targs.extend_seq_len, targs.extend_lr,
              targs.extend_warmup, args.steps, forced=set(td.evenly_spaced(3, targs.extend_steps)))
    if monitor is not None:
        w = time.perf_counter()
        monitor.close()  # the last observation's analysis, when in the background
        inside += time.perf_counter() - w
    return losses, time.perf_counter() - t0, inside


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--every", type=int, default=20)
    p.add_argument("--realistic-every", type=int, default=100,
                   help="the every= the fraction is also stated for (default: %(default)s: 10 observations "
                        "of the study's 1,000 steps)")
    p.add_argument("--max-examples", type=int, default=64)
    p.add_argument("--sampling-rate", type=float, default=0.125)
    p.add_argument("--bucket-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads and analysis threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extend", action="store_true",
                   help="then train_decoder.py's context extension (100 steps), observed at its 3 checkpoint steps")
    p.add_argument("--extend-steps", type=int, default=100)
    p.add_argument("--runs", default="plain,foreground,background",
                   help="which runs, comma-separated (default: %(default)s); e.g. --runs foreground "
                        "--steps 1000 --every 100: the study's pre-training observed live")
    args = p.parse_args(argv)
    runs = args.runs.split(",")
    import attention_plasticity as ap

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    td = load_train_decoder()
    texts, tokenizer = probe(td)
    os.makedirs(args.out, exist_ok=True)
    report = {"command": "scripts/monitor_overhead.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "steps": args.steps, "every": args.every, "max_examples": args.max_examples,
              "torch_threads": args.threads}
    base = base_s = None
    if "plain" in runs:
        base, base_s, _ = train(td, args)
        report["plain"] = {"wall_s": round(base_s, 2), "s_per_step": base_s / args.steps}
        print(f"plain: {base_s:.1f} s, {base_s / args.steps:.3f} s/step", flush=True)
    for mode, background in (("foreground", False), ("background", True)):
        if mode not in runs:
            continue
        folder = os.path.join(args.out, mode)
        monitor = ap.PlasticityMonitor(texts, tokenizer, folder, every=args.every, background=background,
                                       max_seq_len=512, max_examples=args.max_examples,
                                       sampling_rate=args.sampling_rate, min_bucket_size=args.bucket_size,
                                       seed=args.seed, threads=args.threads)
        losses, wall, inside = train(td, args, monitor)
        obs = monitor.observations
        report[mode] = {"wall_s": round(wall, 2), "observations": len(obs),
                        "capture_s": [round(o.capture_seconds, 3) for o in obs],
                        "analysis_s": [round(o.analysis_seconds, 3) for o in obs]}
        if base is None:
            print(f"{mode}: {wall:.1f} s, {len(obs)} observations in {folder}", flush=True)
            continue
        if losses != base:
            sys.exit(f"monitor_overhead.py: the {mode} run's losses differ from the plain run's")
        # The loop's time inside the monitor (the capture, and the analysis in the foreground or
        # the wait for the previous one in the background), per observation; training's own
        # time per step is the rest (robust to the machine's load, unlike wall-time differences).
        per_obs = inside / len(obs)
        step_s = (wall - inside) / args.steps
        report[mode].update({
            "loop_s_in_monitor": round(inside, 2), "loop_s_per_observation": round(per_obs, 3),
            "training_s_per_step": round(step_s, 4),
            "fraction_at_every": round(inside / wall, 4),
            "fraction_at_realistic_every": round(per_obs / (per_obs + args.realistic_every * step_s), 4),
            "losses_bit_identical": True})
        print(f"{mode}: {wall:.1f} s, {len(obs)} observations, capture {sum(r.capture_seconds for r in obs) / len(obs):.2f} s, "
              f"analysis {sum(r.analysis_seconds for r in obs) / len(obs):.2f} s; the loop spent {per_obs:.2f} s per "
              f"observation in the monitor ({step_s:.3f} s per training step): {inside / wall:.1%} of the time at "
              f"every={args.every}, {report[mode]['fraction_at_realistic_every']:.1%} at every={args.realistic_every}",
              flush=True)
    with open(os.path.join(args.out, "overhead.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
