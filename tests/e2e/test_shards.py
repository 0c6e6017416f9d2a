#!/usr/bin/python3
"""Sharded runs and their merge (docs/method.md §8.4), without Slurm: `ap_analyze --shard I/N`
run directly for every I, then `ap_merge`.

usage: test_shards.py AP_SYNTH AP_ANALYZE AP_MERGE WORK_DIR

The dump: a synthetic model of 3 layers x 4 query heads x 2 key heads whose query folders are
cut to different lengths, so that the heads weigh different token counts. Checked:
  - for N = 1, 2, 3, 5 and 13 (more shards than the 12 heads: shard 12 has none), each shard
    (run with 1 to 3 threads) holds exactly the heads of the rule of docs/method.md §8.4,
    recomputed here from the NPY shapes (greedy longest-processing-time over
    min(n_q, cap) + min(n_k, cap)), and the merge of the N shards is byte-identical to the
    unsharded run (every CSV, and no other file); the merge of copies that hold the files
    themselves (no result-set folder) too; `shard: I/N` in a --config file is --shard I/N;
  - a head that fails in its shard (a truncated vector.npy): the shard exits 1, the merge
    reports it and exits 1, and its CSVs equal the unsharded run's (which leaves it out as
    well), also when the failed head is the only head of its shard (N = 12);
  - a new column added consistently to every shard is merged like the others, rows in
    (layer, q_head) order; a manifest listing a file that is not a table of docs/method.md §3
    (notes.txt: the user's file of that name in the output folder is never replaced) or none
    is refused;
  - refused, exit 2, with a message naming the folder and the problem, and nothing written
    (an earlier merged set stays as it was): a missing shard, a duplicated one, a shard of
    another N, of other options, of another dump (a changed value, a changed bucket.npy, a
    head less), a shard whose run did not finish or is still running, a shard whose lock is
    or links to a FIFO (never waited on), the output of a run without --shard, a folder
    that does not exist, an unknown, missing or differently headed CSV, rows that do not match
    the manifest, a corrupt manifest, the output folder being a shard folder or inside one;
  - bad --shard values and ap_merge usage errors (exit 2).
"""

import fcntl
import heapq
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

LAYERS, Q, K = 3, 4, 2
CUT = {(0, 1): 300, (1, 2): 700, (2, 0): 500, (2, 3): 200}  # query rows kept
OPTIONS = ["--normality-max-dims", 4, "--seed", 11, "--max-tokens-per-head", 900]
CAP = 900


def expected_assignment(dump, n):
    """{(layer, q_head): shard} by the rule of docs/method.md §8.4, from the NPY shapes."""
    import numpy as np
    heads = sorted((layer, h) for layer in range(LAYERS) for h in range(Q)
                   if os.path.isdir(u.folder(dump, layer, h, "q")))

    def rows(layer, head, kind):
        try:
            return np.load(os.path.join(u.folder(dump, layer, head, kind), "vector.npy"), mmap_mode="r").shape[0]
        except ValueError:  # a file the analysis refuses (here: truncated) weighs nothing
            return 0
    weight = {(layer, h): min(rows(layer, h, "q"), CAP) + min(rows(layer, h // (Q // K), "k"), CAP)
              for layer, h in heads}
    order = sorted(range(len(heads)), key=lambda i: (-weight[heads[i]], i))
    loads = [(0, s) for s in range(n)]
    heapq.heapify(loads)
    shard_of = {}
    for i in order:
        load, s = heapq.heappop(loads)
        shard_of[heads[i]] = s
        heapq.heappush(loads, (load + weight[heads[i]], s))
    return shard_of, weight


def cut_folder(folder, n):
    import numpy as np
    for name in ("vector.npy", "position.npy", "bucket.npy", "example_id.npy"):
        path = os.path.join(folder, name)
        np.save(path, np.load(path)[:n])


def manifest(folder):
    with open(os.path.join(folder, "shard.json")) as f:
        return json.load(f)


def set_folder(shard):
    """The result-set folder of a shard folder (where its files are)."""
    state = os.path.join(shard, u.STATE)
    return os.path.join(state, os.readlink(os.path.join(state, "current")))


def files_of(out):
    return sorted(e for e in os.listdir(out) if not e.startswith("."))


def main():
    u.require_numpy()
    synth, analyze, merge, work = sys.argv[1:5]
    u.fresh_dir(work)
    ck = u.Checker()

    dump = os.path.join(work, "dump")
    u.run([synth, "--out", dump, "--num-layers", LAYERS, "--num-q-heads", Q, "--num-k-heads", K, "--dim", 8,
           "--tokens", 1024, "--examples", 4, "--buckets", 8, "--seed", 21], expect=0, quiet=True)
    for (layer, head), n in CUT.items():
        cut_folder(u.folder(dump, layer, head, "q"), n)

    def analyze_run(root, out, extra=(), expect=0):
        return u.run([analyze, "--data-root", root, "--output-dir", out] + OPTIONS + list(extra), expect=expect,
                     quiet=True)

    def run_shards(root, n, label, expect=None, extra=()):
        folders = []
        for i in range(n):
            folder = os.path.join(work, label, "shard-%d" % i)
            code, _, err = analyze_run(root, folder, ["--shard", "%d/%d" % (i, n), "--threads", i % 3 + 1]
                                       + list(extra), expect=None)
            want = 0 if expect is None else expect(i)
            ck.check(code == want, "%s: shard %d/%d exited %d, expected %d:\n%s" % (label, i, n, code, want, err))
            folders.append(folder)
        return folders

    def merged(folders, out, expect, needles=()):
        code, _, err = u.run([merge, "--output-dir", out] + folders, quiet=True, timeout=300)
        ck.check(code == expect, "merge into %s: exit %d, expected %d:\n%s" % (out, code, expect, err))
        for needle in needles:
            ck.check(needle in err, "merge into %s: stderr lacks %r:\n%s" % (out, needle, err))
        return err

    whole = os.path.join(work, "whole")
    analyze_run(dump, whole, ["--threads", 2])
    reference = u.read_set(whole)

    # Every N: the rule, and merge == unsharded.
    shards_of = {}
    for n in (1, 2, 3, 5, 13):
        label = "n%d" % n
        folders = run_shards(dump, n, label)
        shards_of[n] = folders
        want, weight = expected_assignment(dump, n)
        for i, folder in enumerate(folders):
            m = manifest(folder)
            got = [(h["layer"], h["q_head"]) for h in m["heads"]]
            ck.check(got == sorted(h for h, s in want.items() if s == i),
                     "%s: shard %d holds %s, the rule gives %s" % (label, i, got,
                                                                   sorted(h for h, s in want.items() if s == i)))
            ck.check(all(h["tokens"] == weight[(h["layer"], h["q_head"])] for h in m["heads"]),
                     "%s: shard %d: token weights differ from the NPY shapes" % (label, i))
            ck.check((m["shard"], m["num_shards"]) == (i, n), "%s: manifest of shard %d says %s/%s"
                     % (label, i, m["shard"], m["num_shards"]))
        loads = [sum(weight[h] for h, s in want.items() if s == i) for i in range(n)]
        print("N = %2d: tokens per shard %s" % (n, loads))
        out = os.path.join(work, label + "_merged")
        merged(list(reversed(folders)), out, 0, ["%d shard" % n, "12 analyzed, 0 failed"])
        ck.check(u.read_set(out) == reference, "%s: merged CSVs differ from the unsharded run's" % label)
        ck.check(files_of(out) == sorted(u.CSVS), "%s: the merge wrote %s" % (label, files_of(out)))
    empty = manifest(shards_of[13][12])
    ck.check(empty["heads"] == [], "N = 13: shard 12 should hold no head")
    ck.check(u.read_set(shards_of[13][12]) == u.rows_where(reference, lambda layer, head: False),
             "N = 13: shard 12's CSVs should be the headers alone")

    # Copies holding the files themselves (no result-set folder).
    plain = []
    for i, folder in enumerate(shards_of[3]):
        copy = os.path.join(work, "plain", "shard-%d" % i)
        os.makedirs(copy)
        for name in u.CSVS + ("shard.json",):
            shutil.copyfile(os.path.join(folder, name), os.path.join(copy, name))
        plain.append(copy)
    merged(plain, os.path.join(work, "plain_merged"), 0)
    ck.check(u.read_set(os.path.join(work, "plain_merged")) == reference, "plain copies: merged CSVs differ")

    # shard: I/N in a --config file.
    config = os.path.join(work, "shard.yaml")
    with open(config, "w") as f:
        f.write("shard: 1/3\nthreads: 2\n")
    analyze_run(dump, os.path.join(work, "config_shard"), ["--config", config])
    ck.check(manifest(os.path.join(work, "config_shard")) ["heads"] == manifest(shards_of[3][1])["heads"],
             "shard: 1/3 in a config file holds other heads than --shard 1/3")

    # A failed head stays a failed head.
    broken = os.path.join(work, "broken")
    u.copy_tree(dump, broken)
    bad = os.path.join(u.folder(broken, 1, 2, "q"), "vector.npy")
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) - 8)
    broken_whole = os.path.join(work, "broken_whole")
    analyze_run(broken, broken_whole, expect=1)
    broken_ref = u.read_set(broken_whole)
    ck.check(broken_ref == u.rows_where(reference, lambda layer, head: (layer, head) != (1, 2)),
             "the unsharded run of the broken dump should leave out layer 1 q_head 2 only")
    for n in (3, 12):
        want, _ = expected_assignment(broken, n)
        folders = run_shards(broken, n, "broken_n%d" % n, expect=lambda i: 1 if want[(1, 2)] == i else 0)
        out = os.path.join(work, "broken_n%d_merged" % n)
        merged(folders, out, 1, ["error: layer 1 q_head 2: " + bad + ": truncated", "11 analyzed, 1 failed"])
        ck.check(u.read_set(out) == broken_ref, "broken dump, N = %d: merged CSVs differ from the unsharded run's" % n)

    # A column the merge does not know by name, added consistently to every shard: merged
    # with its rows (the merge moves rows as bytes).
    extended = []
    for i, folder in enumerate(shards_of[3]):
        copy = os.path.join(work, "extended", "shard-%d" % i)
        u.copy_tree(folder, copy)
        where = set_folder(copy)
        path = os.path.join(where, "head_metrics.csv")
        lines = open(path).read().splitlines()
        with open(path, "w") as f:
            f.write("".join(line + (",new_column\n" if j == 0 else ",%d\n" % j) for j, line in enumerate(lines)))
        extended.append(copy)
    out = os.path.join(work, "extended_merged")
    code, _, err = u.run([merge, "--output-dir", out] + extended, quiet=True, timeout=300)
    ck.check(code == 0, "extended shards: exit %d:\n%s" % (code, err))
    if code == 0:
        got = open(os.path.join(out, "head_metrics.csv")).read().splitlines()
        ref = reference["head_metrics.csv"].decode().splitlines()
        ck.check(len(got) == len(ref) and got[0] == ref[0] + ",new_column"
                 and all(g.startswith(r + ",") for g, r in zip(got[1:], ref[1:])),
                 "the new column is not merged with its rows")
        for name in u.CSVS[1:]:
            ck.check(open(os.path.join(out, name), "rb").read() == reference[name],
                     "extended shards: %s differs" % name)

    # Refusals: exit 2, the folder and the problem named, nothing written.
    s0, s1, s2 = shards_of[3]
    keep = os.path.join(work, "keep")
    merged([s0, s1, s2], keep, 0)
    before = u.read_set(keep)

    def refused(label, folders, needles):
        err = merged(folders, keep, 2, needles)
        ck.check(u.read_set(keep) == before, "%s: the earlier merged set changed" % label)
        fresh = os.path.join(work, "refused_" + label)
        merged(folders, fresh, 2)
        ck.check(not os.path.exists(fresh) or files_of(fresh) == [], "%s: a refused merge wrote %s" % (label, fresh))
        print("%-18s %s" % (label, err.strip().splitlines()[0]))

    def variant(label, source=s1):
        copy = os.path.join(work, "variants", label)
        u.copy_tree(source, copy)
        return copy, set_folder(copy)

    refused("missing", [s0, s2], ["shard 1 of 3 (0-2) is missing"])
    refused("missing_two", [s2], ["shards 0,1 of 3 (0-2) are missing", "sbatch --array=0,1"])
    duplicate, _ = variant("duplicate")
    refused("duplicate", [s0, s1, duplicate, s2], ["shard 1 of 3 is given twice: '%s' and '%s'" % (s1, duplicate)])
    refused("other_n", [s0, s1, s2, shards_of[2][1]],
            ["'%s' is shard 1/2 but '%s' is shard 0/3" % (shards_of[2][1], s0)])
    seed = run_shards(dump, 3, "seed12", extra=["--seed", 12])[1]
    refused("other_options", [s0, seed, s2], ["'%s' was run with other options than '%s': seed is 12 there but 11 here"
                                              % (seed, s0)])
    cap = run_shards(dump, 3, "cap", extra=["--normality-max-dims", 5])[1]
    refused("other_options2", [s0, cap, s2], ["normality_max_dims is 5 there but 4 here"])
    changed = os.path.join(work, "changed_dump")
    u.copy_tree(dump, changed)
    import numpy as np
    path = os.path.join(u.folder(changed, 0, 0, "q"), "vector.npy")
    values = np.load(path)
    values[0, 0] += 1e-3
    np.save(path, values)
    other = run_shards(changed, 3, "changed")[1]
    refused("other_dump", [s0, other, s2], ["'%s' analyzed another dump than '%s'" % (other, s0)])
    fewer = os.path.join(work, "fewer_dump")
    u.copy_tree(dump, fewer)
    shutil.rmtree(u.folder(fewer, 2, 1, "q"))
    other = run_shards(fewer, 3, "fewer", extra=["--num-q-heads", Q, "--num-k-heads", K])[1]
    refused("fewer_heads", [s0, other, s2], ["analyzed another dump than", "11 and 12 heads"])

    dead = os.path.join(work, "variants", "dead")
    os.makedirs(os.path.join(dead, u.STATE, "tmp-999999-1-abcd1234-otherhost"))
    open(os.path.join(dead, u.STATE, "lock"), "w").close()
    refused("unfinished", [s0, dead, s2], ["shard folder '%s': holds no complete result set: its run did not finish"
                                           % dead])
    running, _ = variant("running")
    with open(os.path.join(running, u.STATE, "lock"), "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("pid 4242 on node07\n")
        lock.flush()
        # The lock's owner line names no process that holds it: the holder is named instead.
        refused("running", [s0, running, s2], ["shard folder '%s': a run is writing into it (pid %d ("
                                               % (running, os.getpid()), "holds its lock"])
    # A lock that is, or links to, a FIFO: refused at once, never waited on (issue 19).
    for label, make in (("lock_fifo", lambda lock: os.mkfifo(lock)),
                        ("lock_link_fifo", lambda lock: (os.mkfifo(lock + ".fifo"), os.symlink("lock.fifo", lock)))):
        variant_folder, _ = variant(label)
        lock = os.path.join(variant_folder, u.STATE, "lock")
        os.remove(lock)
        make(lock)
        refused(label, [s0, variant_folder, s2], ["shard folder '%s': %s: is a" % (variant_folder, lock)])
    # Another dump that differs only in a file other than vector.npy, past its first bytes.
    bucket_dump = os.path.join(work, "bucket_dump")
    u.copy_tree(dump, bucket_dump)
    path = os.path.join(u.folder(bucket_dump, 2, 3, "q"), "bucket.npy")
    values = np.load(path)
    values[-1] = values[-2]
    np.save(path, values)
    other = run_shards(bucket_dump, 3, "bucket_changed")[1]
    refused("other_bucket", [s0, other, s2], ["'%s' analyzed another dump than '%s'" % (other, s0)])
    # A manifest listing a file the merge does not know (it would replace the user's file of
    # that name in the output folder) or none (the output's result links would dangle).
    notes_out = os.path.join(work, "notes_out")
    os.makedirs(notes_out)
    with open(os.path.join(notes_out, "notes.txt"), "w") as f:
        f.write("my notes\n")
    for label, files in (("unknown_file", ["notes.txt"]), ("no_files", None)):
        folders = []
        for i, folder in enumerate((s0, s1, s2)):
            copy = os.path.join(work, "variants", "%s-%d" % (label, i))
            u.copy_tree(folder, copy)
            where = set_folder(copy)
            m = manifest(where)
            if files is None:
                for name in m["files"]:
                    os.remove(os.path.join(where, name))
                m["files"] = []
                for h in m["heads"]:
                    h["rows"] = [] if h["analyzed"] else h["rows"]
            else:
                for name in files:
                    with open(os.path.join(where, name), "w") as f:
                        f.write("replaced\n")
                m["files"] += files
                for h in m["heads"]:
                    if h["analyzed"]:
                        h["rows"] += [0] * len(files)
            json.dump(m, open(os.path.join(where, "shard.json"), "w"))
            folders.append(copy)
        refused(label, folders, ["shard.json lists the files", "but a shard's set holds exactly"])
        merged(folders, notes_out, 2)
        ck.check(open(os.path.join(notes_out, "notes.txt")).read() == "my notes\n",
                 "%s: the user's notes.txt in the output folder was changed" % label)
    refused("unsharded", [s0, whole, s2], ["shard folder '%s': shard.json: file not found (its results come from a "
                                           "run without --shard" % whole])
    refused("not_found", [s0, os.path.join(work, "nowhere"), s2], ["shard folder '%s': folder not found"
                                                                   % os.path.join(work, "nowhere")])
    extra, where = variant("unknown_csv")
    open(os.path.join(where, "head_extra.csv"), "w").write("layer,q_head,k_head\n")
    refused("unknown_csv", [s0, extra, s2], ["shard folder '%s': holds head_extra.csv, which its manifest does not list"
                                             % extra])
    less, where = variant("missing_csv")
    os.remove(os.path.join(where, "head_profile.csv"))
    refused("missing_csv", [s0, less, s2], ["shard folder '%s': head_profile.csv, listed in its manifest: file not found"
                                            % less])
    header, where = variant("header")
    path = os.path.join(where, "head_metrics.csv")
    first, rest = open(path).read().split("\n", 1)
    open(path, "w").write(first + ",new_column\n" + rest)
    refused("header", [s0, header, s2], ["'%s': head_metrics.csv has another header line than in '%s': column %d is "
                                         "'new_column' there but absent here"
                                         % (header, s0, len(first.split(",")) + 1)])
    short, where = variant("short")
    path = os.path.join(where, "head_bucket_plasticity.csv")
    lines = open(path).read().splitlines(True)
    open(path, "w").write("".join(lines[:-1]))
    refused("short_rows", [s0, short, s2], ["'%s': head_bucket_plasticity.csv ends at line %d, before the rows"
                                            % (short, len(lines) - 1)])
    long, where = variant("long")
    path = os.path.join(where, "head_profile.csv")
    open(path, "a").write(open(path).read().splitlines(True)[-1])
    refused("long_rows", [s0, long, s2], ["'%s': head_profile.csv holds more than the rows its manifest announces"
                                          % long])
    swapped, where = variant("swapped")
    path = os.path.join(where, "head_metrics.csv")
    lines = open(path).read().splitlines(True)
    open(path, "w").write("".join([lines[0], lines[2], lines[1]] + lines[3:]))
    refused("swapped_rows", [s0, swapped, s2], ["head_metrics.csv: line 2 is not a row of layer"])
    corrupt, where = variant("corrupt")
    open(os.path.join(where, "shard.json"), "w").write("{\"ap_shard_manifest\": 1, \"program\": [")
    refused("corrupt", [s0, corrupt, s2], ["%s: not a valid shard manifest" % os.path.join(corrupt, "shard.json")])
    edited, where = variant("edited")
    m = manifest(where)
    m["options"]["seed"] = "12"
    json.dump(m, open(os.path.join(where, "shard.json"), "w"))
    refused("edited", [s0, edited, s2], ["'options_fingerprint' does not match 'options'"])
    merged([s0, s1, s2], s1, 2, ["--output-dir '%s' is the shard folder '%s'" % (s1, s1)])
    ck.check(manifest(s1)["shard"] == 1, "a merge refused into a shard folder changed it")
    inner = os.path.join(s0, u.STATE, "current")
    merged([s0, s1, s2], inner, 2, ["--output-dir '%s' is inside the state folder of the result folder '%s'" % (inner, os.path.realpath(s0))])
    # Issue 25: a link to a shard is refused as well; a folder holding the shards (the Slurm layout,
    # OUT/shard-I merged into OUT) is merged into, the shards left as they were.
    holder = os.path.dirname(s0)
    before = manifest(s0)
    merged([s0, s1, s2], holder, 0)
    ck.check(manifest(s0) == before, "a merge into the folder holding the shards changed shard 0")
    alias = os.path.join(work, "variants", "alias_of_s2")
    os.symlink(s2, alias)
    merged([s0, s1, s2], alias, 2, ["--output-dir '%s' is the shard folder '%s'" % (alias, s2)])
    # A folder holding another program's set (here one file, notes.csv): its links would strand.
    foreign = os.path.join(work, "variants", "foreign")
    os.makedirs(os.path.join(foreign, u.STATE, "set-1-2-abcd1234-otherhost"))
    open(os.path.join(foreign, u.STATE, "set-1-2-abcd1234-otherhost", "notes.csv"), "w").close()
    os.symlink("set-1-2-abcd1234-otherhost", os.path.join(foreign, u.STATE, "current"))
    merged([s0, s1, s2], foreign, 2, ["--output-dir '%s' holds the results of another program (notes.csv)" % foreign])
    merged([s0, s1, s2], keep, 0)  # shard 0 is still mergeable

    # Bad values and usage.
    for value, needle in (("3/3", "--shard: shard 3 of 3 does not exist (shards are numbered 0-2)"),
                          ("1", "--shard: '1' is not I/N"), ("0/0", "--shard (N): 0 must be >= 1"),
                          ("-1/3", "--shard (I): '-1' is not a non-negative integer"),
                          ("1/100001", "--shard (N): 100001 must be >= 1 and <= 100000")):
        code, _, err = analyze_run(dump, os.path.join(work, "bad_shard"), ["--shard", value], expect=None)
        ck.check(code == 2 and needle in err, "--shard %s: exit %d, stderr lacks %r:\n%s" % (value, code, needle, err))
    for args, needle in (([s0], "--output-dir DIR is required"), (["--output-dir", keep], "no shard folder given"),
                         (["--output-dir", keep, "--bogus", s0], "unknown option '--bogus'")):
        code, _, err = u.run([merge] + args, quiet=True)
        ck.check(code == 2 and needle in err, "ap_merge %s: exit %d, stderr lacks %r:\n%s" % (args, code, needle, err))
    code, out, _ = u.run([merge, "--help"], quiet=True)
    ck.check(code == 0 and "usage: ap_merge --output-dir DIR SHARD_DIR..." in out, "ap_merge --help")
    ck.close("test_shards")


if __name__ == "__main__":
    main()
