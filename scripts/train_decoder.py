#!/usr/bin/env python3
"""Trains the project's small real decoder: a SmolLM3-style causal LM (GQA, sliding-window
layers, NoPE layers) on CPython's own documentation, on CPU, deterministically.

usage: train_decoder.py OUT_DIR [--checkpoints N] [--extend] [options]

Writes into OUT_DIR (created; an existing OUT_DIR must be empty unless --force):
  model/                 the pre-trained model, ``save_pretrained`` format, with its tokenizer
                         (``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer`` load it)
  checkpoints/pretrain-stepNNNNN/   with --checkpoints N: N evenly spaced checkpoints of the
                         pre-training (the last one is the step ``model/`` holds)
  extended/              with --extend: the model after the context-extension phase
  checkpoints/extend-stepNNNNN/     with --extend: --extend-checkpoints evenly spaced ones
  loss.csv               the loss curve: one row per logged step (schema below)
  loss.png               the same as a figure (train and held-out loss, both phases)
  schedule.json          the configuration, the schedule, the checkpoints, wall times

The weights are not committed anywhere: this script regenerates them. Nothing is downloaded.

Model (transformers' SmolLM3Config, the family whose ``no_rope_layers`` marks layers without
rotary embedding; ``layer_types`` marks sliding-window layers): 6 layers, hidden 128,
4 query heads and 2 key/value heads (GQA, group 2), head dimension 32, SwiGLU MLP 384, tied
embeddings, RoPE base 10,000; layers 2 and 5 are NoPE (every third layer), layers 0 and 3
attend to a sliding window of 128 tokens; the others are full causal RoPE layers.

Text: the strings of CPython's ``pydoc_data/topics.py`` (the Language Reference topics that
``help()`` shows; Python Software Foundation License), through
``attention_plasticity.capture.pydoc_documents`` when the package is installed. Tokenizer:
byte-level (token id = byte value, GPT-2's byte-to-character map so that the
``tokenizers`` library can hold it), plus ``<|bos|>`` (256), ``<|eos|>`` (257), ``<|pad|>``
(258). Every example starts with ``<|bos|>`` at position 0, then ``seq_len - 1`` bytes of a
training document stream (the topics joined with ``<|eos|>``); the model predicts the bytes.
Held out: every 12th topic (sorted order, index % 12 == 7: augassign, class, exceptions,
import, power, try; 25,266 bytes of text, 5.4%); the held-out loss is the mean over a fixed
set of windows of it (--val-windows in pre-training, half as many in the extension).

Schedule (defaults): pre-training 1,000 steps of 4 x 512 tokens (2.0M tokens, about 4.6
passes over the training bytes; AdamW betas (0.9, 0.95), lr 3e-3, 50 warm-up steps, cosine to
3e-4, weight decay 0.05, gradient clip 1.0); --extend: 100 more steps of 2 x 1024 tokens
(0.2M tokens) with the RoPE base raised to 100,000 (a fresh AdamW, lr 6e-4, 10 warm-up
steps, cosine to 6e-5), max_position_embeddings 1024, the sliding window unchanged.

Determinism: one seed (--seed) fixes the initial weights (torch.manual_seed), the order of
the training windows (a torch.Generator seeded from it) and the held-out windows;
torch.use_deterministic_algorithms(True) and --threads 1 (default) give the same loss.csv
(but its timing columns) and the same weight files on a rerun on the same machine
(tests/python/test_train_decoder.py checks it at a tiny scale).

loss.csv columns: phase (pretrain | extend), step (global, 1-based), tokens (seen so far),
seq_len, rope_theta, lr, train_loss (mean over the steps since the previous row, nats per
byte), val_loss (held-out loss at this step, nats per byte; empty when not evaluated),
elapsed_s (wall time since the start of training, model building excluded), cpu_s (this
process's CPU time over the same span: on a shared machine the honest measure of the cost).
With --extend, the first extend row (step = the last pre-training step, lr 0, no
train_loss) is the held-out loss of the pre-trained model at the longer context and the
larger RoPE base, before any extension step.
"""

import argparse
import csv
import json
import math
import os
import sys
import time

import torch


BOS, EOS, PAD = 256, 257, 258
VOCAB = 259
VAL_EVERY, VAL_OFFSET = 12, 7       # topic i is held out when i % 12 == 7 (25 KB, 5.4%)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="output folder (the weights, checkpoints, loss curve)")
    p.add_argument("--force", action="store_true", help="allow a non-empty OUT_DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--steps", type=int, default=1000, help="pre-training steps")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--sliding-window", type=int, default=128)
    p.add_argument("--checkpoints", type=int, default=0,
                   help="save this many evenly spaced pre-training checkpoints")
    p.add_argument("--extend", action="store_true", help="then run the context extension")
    p.add_argument("--extend-steps", type=int, default=100)
    p.add_argument("--extend-batch", type=int, default=2)
    p.add_argument("--extend-seq-len", type=int, default=1024)
    p.add_argument("--extend-rope-theta", type=float, default=100000.0)
    p.add_argument("--extend-lr", type=float, default=6e-4)
    p.add_argument("--extend-warmup", type=int, default=10)
    p.add_argument("--extend-checkpoints", type=int, default=3)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--val-windows", type=int, default=16, help="held-out windows per evaluation")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "seq_len", "log_every", "eval_every", "val_windows",
                 "threads", "sliding_window"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.checkpoints < 0 or args.checkpoints > args.steps:
        p.error(f"--checkpoints must be in [0, --steps], got {args.checkpoints}")
    if args.extend and not 1 <= args.extend_checkpoints <= args.extend_steps:
        p.error(f"--extend-checkpoints must be in [1, --extend-steps], got "
                f"{args.extend_checkpoints}")
    return args


# ----------------------------------------------------------------------------- the text

def documents():
    """[(topic, text)] of pydoc_data/topics.py in sorted topic order."""
    try:      # the installed package's (the capture cuts the same documents)
        from attention_plasticity.capture import pydoc_documents
        return pydoc_documents()
    except ImportError:       # not installed: the same list, straight from the interpreter
        from pydoc_data.topics import topics
        return [(name, topics[name]) for name in sorted(topics)]


def byte_streams():
    """(train, held-out) uint8-valued int64 tensors: the topics' UTF-8 bytes, each followed
    by <|eos|>, split by topic index."""
    train, val = [], []
    for i, (_name, text) in enumerate(documents()):
        ids = list(text.encode("utf-8")) + [EOS]
        (val if i % VAL_EVERY == VAL_OFFSET else train).extend(ids)
    return torch.tensor(train, dtype=torch.long), torch.tensor(val, dtype=torch.long)


def windows(stream, starts, seq_len):
    """Inputs [<|bos|>, s[a], ..., s[a + seq_len - 2]] and labels s[a .. a + seq_len - 1]
    for each start a: the model predicts every byte, the first one from <|bos|> alone."""
    idx = starts[:, None] + torch.arange(seq_len)[None, :]
    labels = stream[idx]
    inputs = torch.cat([torch.full((len(starts), 1), BOS, dtype=torch.long), labels[:, :-1]], 1)
    return inputs, labels


# ----------------------------------------------------------------------------- tokenizer

def bytes_to_unicode():
    """GPT-2's reversible map from the 256 byte values to printable characters (the alphabet
    of the tokenizers library's ByteLevel pre-tokenizer)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def build_tokenizer():
    """A byte-level PreTrainedTokenizerFast whose token id is the byte value (no merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    byte_char = bytes_to_unicode()
    vocab = {byte_char[b]: b for b in range(256)}
    vocab.update({"<|bos|>": BOS, "<|eos|>": EOS, "<|pad|>": PAD})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>",
                                   eos_token="<|eos|>", pad_token="<|pad|>",
                                   model_max_length=1 << 20)
    probe = "def f(x):\n    return x ** 2  # é ß → ∑\t\x00"
    got = fast(probe, add_special_tokens=False)["input_ids"]
    if got != list(probe.encode("utf-8")):
        raise RuntimeError(f"train_decoder.py: the byte-level tokenizer maps {probe!r} to "
                           f"{got}, not to its UTF-8 bytes")
    return fast


# ----------------------------------------------------------------------------- model

def make_config(args, seq_len, rope_theta):
    from transformers import SmolLM3Config
    layers = 6
    nope = [2, 5]
    sliding = [0, 3]
    return SmolLM3Config(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=384, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        max_position_embeddings=seq_len, rms_norm_eps=1e-6, initializer_range=0.02,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        no_rope_layers=[0 if i in nope else 1 for i in range(layers)],
        use_sliding_window=True, sliding_window=args.sliding_window,
        layer_types=["sliding_attention" if i in sliding else "full_attention"
                     for i in range(layers)],
        tie_word_embeddings=True, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD,
        use_cache=False)


def make_model(config, state=None):
    from transformers import SmolLM3ForCausalLM
    model = SmolLM3ForCausalLM(config)
    model.config._attn_implementation = "sdpa"
    if state is not None:
        model.load_state_dict(state)
    return model


def lr_at(step, steps, peak, warmup):
    """Linear warm-up to peak over `warmup` steps, then cosine to peak / 10 (step 1-based)."""
    if step <= warmup:
        return peak * step / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * frac)))


@torch.no_grad()
def held_out_loss(model, val_inputs, val_labels, batch):
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(val_inputs), batch):
        out = model(input_ids=val_inputs[i:i + batch], use_cache=False)
        logits = out.logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), val_labels[i:i + batch].reshape(-1),
            reduction="sum")
        total += float(loss)
        count += val_labels[i:i + batch].numel()
    model.train()
    return total / count


def evenly_spaced(count, steps):
    """`count` steps in 1..steps, evenly spaced, the last one = steps."""
    return sorted({round(steps * (i + 1) / count) for i in range(count)})


def save(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def run_phase(name, model, tokenizer, opt, args, stream, val, *, steps, batch, seq_len,
              peak, warmup, theta, first_step, tokens, t0, c0, rows, saves, saved, out, gen):
    """One phase of training; returns the tokens seen. Appends to `rows` (loss.csv) and
    `saved` (the checkpoints written, at the steps `saves` of this phase)."""
    val_inputs, val_labels = val
    save_at = set(saves)
    acc, acc_n = 0.0, 0
    for s in range(1, steps + 1):
        lr = lr_at(s, steps, peak, warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(stream) - seq_len, (batch,), generator=gen)
        inputs, labels = windows(stream, starts, seq_len)
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += inputs.numel()
        acc += float(loss.detach())
        acc_n += 1
        step = first_step + s
        last = s == steps
        if s % args.log_every == 0 or s % args.eval_every == 0 or last or s in save_at:
            v = ""
            if s % args.eval_every == 0 or last or s in save_at:
                v = "%.6f" % held_out_loss(model, val_inputs, val_labels, batch)
            rows.append([name, step, tokens, seq_len, "%g" % theta, "%.6g" % lr,
                         "%.6f" % (acc / acc_n), v, "%.1f" % (time.perf_counter() - t0),
                         "%.1f" % (time.process_time() - c0)])
            print("%-8s step %5d  tokens %8d  lr %.2e  train %.4f  held-out %s  %.0f s (cpu %.0f s)"
                  % (name, step, tokens, lr, acc / acc_n, v or "-", time.perf_counter() - t0,
                     time.process_time() - c0),
                  flush=True)
            acc, acc_n = 0.0, 0
        if s in save_at:
            folder = os.path.join(out, "checkpoints", "%s-step%05d" % (name, step))
            save(model, tokenizer, folder)
            saved.append({"phase": name, "step": step, "folder": os.path.relpath(folder, out),
                          "tokens": tokens, "seq_len": seq_len, "rope_theta": theta,
                          "val_loss": float(rows[-1][7]),
                          "elapsed_s": round(time.perf_counter() - t0, 1)})
    return tokens


def held_out_set(val_stream, count, seq_len, seed):
    gen = torch.Generator().manual_seed(seed * 1000003 + seq_len)
    starts = torch.randint(0, len(val_stream) - seq_len, (count,), generator=gen)
    return windows(val_stream, starts, seq_len)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for phase, color in (("pretrain", "tab:blue"), ("extend", "tab:red")):
        r = [row for row in rows if row[0] == phase]
        if not r:
            continue
        t = [x for x in r if x[6]]
        ax.plot([x[1] for x in t], [float(x[6]) for x in t], color=color, lw=1,
                label="%s: train (seq %s, RoPE base %s)" % (phase, r[0][3], r[0][4]))
        v = [x for x in r if x[7]]
        ax.plot([x[1] for x in v], [float(x[7]) for x in v], "o--", color=color, ms=3,
                label="%s: held-out" % phase)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per byte)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("SmolLM3-style byte decoder on CPython's pydoc topics")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out
    if os.path.isdir(out) and os.listdir(out) and not args.force:
        sys.exit(f"train_decoder.py: OUT_DIR '{out}' is not empty (use --force)")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)

    import transformers
    tokenizer = build_tokenizer()
    train, val_stream = byte_streams()
    config = make_config(args, args.seq_len, args.rope_theta)
    model = make_model(config)
    n_params = sum(p.numel() for p in model.parameters())
    print("train_decoder.py: %d parameters; %d training bytes, %d held-out bytes; torch %s, "
          "transformers %s, %d thread(s)" % (n_params, len(train), len(val_stream),
                                             torch.__version__, transformers.__version__,
                                             torch.get_num_threads()), flush=True)
    gen = torch.Generator().manual_seed(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                            weight_decay=0.05)
    rows, saved = [], []
    t0, c0 = time.perf_counter(), time.process_time()
    pre_saves = evenly_spaced(args.checkpoints, args.steps) if args.checkpoints else []
    tokens = run_phase("pretrain", model, tokenizer, opt, args, train,
                       held_out_set(val_stream, args.val_windows, args.seq_len, args.seed),
                       steps=args.steps, batch=args.batch, seq_len=args.seq_len,
                       peak=args.lr, warmup=args.warmup, theta=args.rope_theta,
                       first_step=0, tokens=0, t0=t0, c0=c0, rows=rows, saves=pre_saves, saved=saved, out=out,
                       gen=gen)
    pre_time, pre_cpu = time.perf_counter() - t0, time.process_time() - c0
    save(model, tokenizer, os.path.join(out, "model"))
    schedule = {"command": "scripts/train_decoder.py " + " ".join(sys.argv[1:]),
                "seed": args.seed, "threads": args.threads, "parameters": n_params,
                "torch": torch.__version__, "transformers": transformers.__version__,
                "python": sys.version.split()[0],
                "train_bytes": len(train), "held_out_bytes": len(val_stream),
                "pretrain": {"steps": args.steps, "batch": args.batch, "seq_len": args.seq_len,
                             "rope_theta": args.rope_theta, "lr": args.lr,
                             "warmup": args.warmup, "wall_s": round(pre_time, 1),
                             "cpu_s": round(pre_cpu, 1),
                             "final_val_loss": float(rows[-1][7])}}
    if args.extend:
        ext_config = make_config(args, args.extend_seq_len, args.extend_rope_theta)
        state = model.state_dict()
        model = make_model(ext_config, state)
        opt = torch.optim.AdamW(model.parameters(), lr=args.extend_lr, betas=(0.9, 0.95),
                                weight_decay=0.05)
        # the pre-trained model before any extension step, on the longer held-out windows
        ext_val = held_out_set(val_stream, max(1, args.val_windows // 2),
                               args.extend_seq_len, args.seed)
        v0 = held_out_loss(model, *ext_val, args.extend_batch)
        rows.append(["extend", args.steps, tokens, args.extend_seq_len,
                     "%g" % args.extend_rope_theta, "0", "", "%.6f" % v0,
                     "%.1f" % (time.perf_counter() - t0), "%.1f" % (time.process_time() - c0)])
        print("extend   step %5d  held-out at seq %d with RoPE base %g before training: %.4f"
              % (args.steps, args.extend_seq_len, args.extend_rope_theta, v0), flush=True)
        t1, c1 = time.perf_counter(), time.process_time()
        tokens = run_phase("extend", model, tokenizer, opt, args, train, ext_val,
                           steps=args.extend_steps, batch=args.extend_batch,
                           seq_len=args.extend_seq_len, peak=args.extend_lr,
                           warmup=args.extend_warmup, theta=args.extend_rope_theta,
                           first_step=args.steps, tokens=tokens, t0=t0, c0=c0, rows=rows,
                           saves=evenly_spaced(args.extend_checkpoints, args.extend_steps),
                           saved=saved, out=out, gen=gen)
        save(model, tokenizer, os.path.join(out, "extended"))
        schedule["extend"] = {"steps": args.extend_steps, "batch": args.extend_batch,
                              "seq_len": args.extend_seq_len,
                              "rope_theta": args.extend_rope_theta, "lr": args.extend_lr,
                              "warmup": args.extend_warmup,
                              "held_out_before": round(v0, 6),
                              "wall_s": round(time.perf_counter() - t1, 1),
                              "cpu_s": round(time.process_time() - c1, 1),
                              "final_val_loss": float(rows[-1][7])}
    schedule["checkpoints"] = saved
    schedule["wall_s"] = round(time.perf_counter() - t0, 1)
    schedule["cpu_s"] = round(time.process_time() - c0, 1)
    with open(os.path.join(out, "loss.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["phase", "step", "tokens", "seq_len", "rope_theta", "lr", "train_loss",
                    "val_loss", "elapsed_s", "cpu_s"])
        w.writerows(rows)
    with open(os.path.join(out, "schedule.json"), "w") as f:
        json.dump(schedule, f, indent=1)
        f.write("\n")
    plot(rows, os.path.join(out, "loss.png"))
    print("train_decoder.py: done in %.0f s (cpu %.0f s); held-out loss %.4f nats/byte; wrote %s"
          % (schedule["wall_s"], schedule["cpu_s"], float(rows[-1][7]), out))


if __name__ == "__main__":
    main()
