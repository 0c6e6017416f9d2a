#!/usr/bin/python3
"""Sampled head sets (as qk-sniffer captures them): ap_analyze analyzes the heads that are
present, each with the key head of its GQA group, and says how many of the layout were
present; the layout is never guessed from a partial set.

usage: test_sampled_heads.py AP_SYNTH AP_ANALYZE WORK_DIR

A synthetic model of 4 layers x 8 query heads x 2 key heads (GQA groups of 4) is analyzed
whole. A sampled dump then holds (as symbolic links to the whole dump's folders) a seeded
random 40% of the query heads of layers 0, 2 and 3 (layer 1 not captured, like a sliding-
window layer a capture skips) and the key folders of those layers. Checked:
  - without the layout, ap_analyze refuses to guess it (exit 2, asks for --num-q-heads);
  - with the layout from metadata.json, from flags, or from a --config file: exit 0, the
    summary "P of the 32 query heads of the layout present: P analyzed, 0 failed", and the
    rows of every present head are byte-identical to the whole run's (so each query head
    was paired with the right key head: k_head = q_head // 4);
  - --layers / --heads select among the present heads;
  - metadata.json whose counts contradict the flags is an error.
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

LAYERS, Q, K = 4, 8, 2


def main():
    u.require_numpy()
    synth, analyze, work = sys.argv[1:4]
    u.fresh_dir(work)
    ck = u.Checker()
    full = os.path.join(work, "full")
    u.run([synth, "--out", full, "--num-layers", LAYERS, "--num-q-heads", Q, "--num-k-heads", K, "--dim", 8,
           "--tokens", 1024, "--examples", 4, "--buckets", 8, "--seed", 9], expect=0, quiet=True)
    full_out = os.path.join(work, "full_out")
    u.run([analyze, "--data-root", full, "--output-dir", full_out], expect=0, quiet=True)
    whole = u.read_set(full_out)

    rng = random.Random(10)
    present = sorted((layer, head) for layer in (0, 2, 3) for head in range(Q) if rng.random() < 0.4)
    if not any(h == Q - 1 for _, h in present):
        present.append((3, Q - 1))
        present.sort()
    print("present query heads: %s" % present)
    sampled = os.path.join(work, "sampled")
    u.fresh_dir(sampled)
    for layer, head in present:
        os.symlink(u.folder(full, layer, head, "q"), u.folder(sampled, layer, head, "q"))
    for layer in (0, 2, 3):
        for head in range(K):
            os.symlink(u.folder(full, layer, head, "k"), u.folder(sampled, layer, head, "k"))

    def run(label, args, code, keep=None, needles=()):
        out = os.path.join(work, label)
        got_code, _, err = u.run([analyze, "--data-root", sampled, "--output-dir", out] + args, quiet=True)
        ck.check(got_code == code, "%s: exit %d, expected %d:\n%s" % (label, got_code, code, err))
        for needle in needles:
            ck.check(needle in err, "%s: stderr lacks %r:\n%s" % (label, needle, err))
        if code == 0 and got_code == 0:
            want = u.rows_where(whole, lambda layer, head: (layer, head) in present and keep(layer, head))
            got = u.read_set(out)
            for name in u.CSVS:
                ck.check(got[name] == want[name], "%s: %s differs from the whole run's rows of those heads" % (label, name))
        print("%-24s exit %d" % (label, got_code))

    everything = lambda layer, head: True  # noqa: E731
    summary = "%d of the %d query heads of the layout present: %d analyzed, 0 failed" % (
        len(present), LAYERS * Q, len(present))
    run("no_layout", [], 2, needles=["num_q_heads and num_k_heads are not known", "--num-q-heads"])
    run("flags", ["--num-layers", LAYERS, "--num-q-heads", Q, "--num-k-heads", K], 0, everything, [summary])
    cfg = os.path.join(work, "layout.yaml")
    with open(cfg, "w") as f:
        f.write("num_q_heads: %d\nnum_k_heads: %d\nnum_layers: %d\nthreads: 3\n" % (Q, K, LAYERS))
    run("config", ["--config", cfg], 0, everything, [summary])
    with open(os.path.join(sampled, "metadata.json"), "w") as f:
        f.write('{"model": "synthetic", "num_layers": %d, "num_q_heads": %d, "num_k_heads": %d}' % (LAYERS, Q, K))
    run("metadata", [], 0, everything, [summary, "layout from metadata.json"])
    selected = [h for h in present if h[0] == 3 and h[1] in (1, 2, 3, 7)]
    run("select", ["--layers", "2-3", "--heads", "1-3,7", "--layers", "3"], 0,
        lambda layer, head: layer == 3 and head in (1, 2, 3, 7),
        ["%d of the %d query heads of the layout present, %d of them selected" % (len(present), LAYERS * Q,
                                                                                 len(selected))])
    run("contradiction", ["--num-k-heads", 4], 2, needles=["num_k_heads: --num-k-heads (or the --config file) says 4",
                                                           "metadata.json says 2"])
    run("layer_not_captured", ["--layers", 1], 2, needles=["matches no query head present"])
    ck.close("test_sampled_heads")


if __name__ == "__main__":
    main()
