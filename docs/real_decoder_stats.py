#!/usr/bin/env python3
"""What each head of the trained decoder does, beside its attention plasticity: the
measurements and the figure of docs/real_data.md's decoder section.

usage: real_decoder_stats.py MODEL_DIR RESULTS [--examples N] [--seed S] [--figure PNG]
                             [--csv OUT.csv]

MODEL_DIR: the decoder that scripts/train_decoder.py writes (OUT_DIR/model); RESULTS:
ap_analyze's output on its fixture (tests/data/real_decoder, after
examples/convert_sniffed_qk.py). Runs the model (eager attention, its own attention
probabilities) over the examples the fixture was captured from (CPython's pydoc topics,
<|bos|> + 511 bytes each, N of them drawn with attention_plasticity.capture.select_examples
and the seed, as examples/capture_qk.py drew them when the fixture was captured, before it spread
--max-examples over the documents) and measures, per head, over every query
at positions >= 16 (so that the sink is not trivially the only key):

  prev      mean attention on the previous token (position t - 1)
  sink      mean attention on position 0 (<|bos|>)
  self      mean attention on the query's own position
  dist      mean attended distance sum_s p(s) (t - s), in tokens
  entropy   mean entropy of the attention distribution, in nats
  TV        how far its attention is from a purely positional head: the total variation
            distance between each query's attention and the head's mean attention at the
            same offsets t - s (averaged over all queries, renormalised over the query's
            keys), averaged over queries: 0 = the attention depends on the offset alone,
            1 = entirely on something else (the content)

and calls a head a *sink* head when sink > 0.5, a *previous-token* head when prev > 0.5, a
positional head when TV < 0.5 (*recency* when dist < 64, else *broad*: close to uniform), else a
*content* head. Printed as
a Markdown table with the layer's type (RoPE/NoPE, sliding/full) and the head's
ap_overall, ap_first20, ap_last20 from RESULTS/head_metrics.csv; --figure draws ap_overall
against the mean attended distance, coloured by layer type. Deterministic (one thread).
"""

import argparse
import os

import numpy as np
import pandas as pd

MIN_POSITION = 16
POSITIONAL_TV = 0.5


def role(prev, sink, tv, dist):
    if sink > 0.5:
        return "sink"
    if prev > 0.5:
        return "previous-token"
    if tv < POSITIONAL_TV:
        return "recency" if dist < 64 else "broad"
    return "content"


def layer_kind(config, layer):
    rope = "RoPE" if config.no_rope_layers[layer] else "NoPE"
    window = config.layer_types[layer] == "sliding_attention"
    return rope + (", sliding %d" % config.sliding_window if window else ", full")


def _attentions(model, examples):
    """(example length, [layer] -> [heads, queries >= MIN_POSITION, keys] float64) per example."""
    import torch
    with torch.no_grad():
        for ids in examples:
            out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
            yield len(ids), [a[0].double().numpy()[:, MIN_POSITION:, :] for a in out.attentions]


def head_stats(model, examples):
    """[layer, head, 6]: prev, sink, self, dist, entropy, positional TV (see the docstring)."""
    cfg = model.config
    n_layers, n_heads = cfg.num_hidden_layers, cfg.num_attention_heads
    sums = np.zeros((n_layers, n_heads, 6))
    width = max(len(ids) for ids in examples)
    by_offset = np.zeros((n_layers, n_heads, width))   # sum of p(t - delta) over queries
    n_offset = np.zeros(width)                           # queries with t >= delta
    count = 0
    for t, atts in _attentions(model, examples):
        q_pos = np.arange(MIN_POSITION, t)
        rows = np.arange(len(q_pos))
        offset = q_pos[:, None] - np.arange(t)[None, :]   # t - s; < 0: masked keys
        causal = offset >= 0
        for layer, p in enumerate(atts):
            ent = -(p * np.log(np.where(p > 0, p, 1.0))).sum(-1)
            for i, v in enumerate((p[:, rows, q_pos - 1], p[:, :, 0], p[:, rows, q_pos],
                                   (p * offset.clip(min=0)[None]).sum(-1), ent)):
                sums[layer, :, i] += v.sum(-1)
            for h in range(n_heads):
                by_offset[layer, h] += np.bincount(offset[causal], p[h][causal], width)
        n_offset += np.bincount(offset[causal], minlength=width)
        count += len(q_pos)
    profile = by_offset / np.maximum(n_offset, 1)        # the head's mean attention at offset
    for t, atts in _attentions(model, examples):
        q_pos = np.arange(MIN_POSITION, t)
        offset = q_pos[:, None] - np.arange(t)[None, :]
        causal = offset >= 0
        for layer, p in enumerate(atts):
            for h in range(n_heads):
                expect = np.where(causal, profile[layer, h][offset.clip(min=0)], 0.0)
                expect /= expect.sum(-1, keepdims=True)
                sums[layer, h, 5] += 0.5 * np.abs(p[h] - expect).sum()
    return sums / count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("results")
    parser.add_argument("--examples", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--figure")
    parser.add_argument("--csv")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from attention_plasticity.capture import make_examples, pydoc_documents, select_examples
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, attn_implementation="eager")
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    examples = make_examples(tokenizer, pydoc_documents(), args.max_seq_len)
    chosen = [examples[i] for i in select_examples(len(examples), args.examples, args.seed)]
    stats = head_stats(model, chosen)

    metrics = pd.read_csv(os.path.join(args.results, "head_metrics.csv"))
    rows = []
    for layer in range(stats.shape[0]):
        for head in range(stats.shape[1]):
            prev, sink, own, dist, ent, tv = stats[layer, head]
            m = metrics[(metrics.layer == layer) & (metrics.q_head == head)]
            ap = m.iloc[0] if len(m) else None
            rows.append({"layer": layer, "q_head": head,
                         "layer_type": layer_kind(model.config, layer),
                         "prev": prev, "sink": sink, "self": own, "dist": dist,
                         "entropy": ent, "tv": tv, "role": role(prev, sink, tv, dist),
                         "ap_overall": np.nan if ap is None else ap.ap_overall,
                         "ap_first20": np.nan if ap is None else ap.ap_first20,
                         "ap_last20": np.nan if ap is None else ap.ap_last20})
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False, float_format="%.4f")
    print("| layer | head | layer type | prev | sink | self | dist | entropy | TV | role | "
          "ap_overall | ap_first20 | ap_last20 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %d | %s | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %s | %.3f | %.3f | %.3f |"
              % (r["layer"], r["q_head"], r["layer_type"], r["prev"], r["sink"], r["self"],
                 r["dist"], r["entropy"], r["tv"], r["role"], r["ap_overall"], r["ap_first20"],
                 r["ap_last20"]))
    print()
    print("| group | heads | ap_overall mean | min | max |")
    print("|---|---|---|---|---|")
    for key in ("role", "layer_type"):
        for name, g in table.groupby(key, sort=True):
            print("| %s | %d | %.3f | %.3f | %.3f |" % (name, len(g), g.ap_overall.mean(),
                                                      g.ap_overall.min(), g.ap_overall.max()))
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        markers = {"sink": "s", "previous-token": "^", "recency": "D", "broad": "v",
                   "content": "o"}
        colors = {}
        for kind, g in table.groupby("layer_type", sort=True):
            colors[kind] = None
            first = True
            for _, r in g.iterrows():
                line = ax.scatter(r.dist, r.ap_overall, marker=markers[r.role], s=46,
                                  color=colors[kind], label=kind if first else None,
                                  edgecolor="black", linewidth=0.4)
                colors[kind] = line.get_facecolor()[0]
                first = False
                ax.annotate("%d.%d" % (r.layer, r.q_head), (r.dist, r.ap_overall),
                            fontsize=6, xytext=(3, 2), textcoords="offset points")
        for name, m in markers.items():
            ax.scatter([], [], marker=m, color="white", edgecolor="black", label=name)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("mean attended distance (tokens, t - s)")
        ax.set_ylabel("ap_overall")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title("Trained decoder: plasticity against how far back each head looks\n"
                     "(label layer.head; colour: layer type; marker: role)", fontsize=9)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=110)


if __name__ == "__main__":
    main()
