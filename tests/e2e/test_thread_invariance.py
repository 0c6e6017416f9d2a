#!/usr/bin/python3
"""ap_analyze writes byte-identical CSVs for any number of threads (docs/method.md §2.15), and
ap_synth writes byte-identical dumps for any number of threads.

usage: test_thread_invariance.py AP_SYNTH AP_ANALYZE SMALL_DUMP WORK_DIR
"""

import filecmp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def main():
    synth, analyze, small_dump, work = sys.argv[1:5]
    u.fresh_dir(work)
    c = u.Checker()
    dumps = {}
    for threads in (1, 3):
        out = os.path.join(work, "synth_t%d" % threads)
        u.run([synth, "--out", out, "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2, "--dim", 16,
               "--tokens", 2048, "--examples", 16, "--buckets", 8, "--sliding-window-layers", 0,
               "--threads", threads, "--seed", 3], expect=0)
        dumps[threads] = out
    c.check(same_tree(dumps[1], dumps[3]), "ap_synth: dumps with 1 and 3 threads differ")

    for name, root in (("synth", dumps[1]), ("small_dump", small_dump)):
        outs = {}
        for threads in (1, 4):
            out = os.path.join(work, "%s_t%d" % (name, threads))
            u.run([analyze, "--data-root", root, "--output-dir", out, "--threads", threads,
                   "--normality-max-dims", 4, "--sequence-influences", "on"], expect=0)
            outs[threads] = out
        for f in u.CSVS:  # every CSV of the set, the distance map of §8.1 and the influences of §8.3 included
            a = open(os.path.join(outs[1], f), "rb").read()
            b = open(os.path.join(outs[4], f), "rb").read()
            c.check(a == b, "%s: %s differs between 1 and 4 threads" % (name, f))
            # small_dump's heads have fewer than 10 sequences: no sequence-level errors, no influences
            if not (name == "small_dump" and f == "head_sequence_influence.csv"):
                c.check(a.count(b"\n") > 1, "%s: %s has no rows" % (name, f))
    c.close("test_thread_invariance")


if __name__ == "__main__":
    main()
