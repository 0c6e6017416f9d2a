#!/usr/bin/python3
"""kill -9 (and failing system calls) at every point of a run: the output folder always
shows the whole earlier result set or the whole new one, and the next run cleans up and
writes the whole new set.

usage: test_kill_runs.py random AP_ANALYZE AP_SYNTH WORK_DIR
       test_kill_runs.py every-step AP_ANALYZE SMALL_DUMP WORK_DIR

random: a run long enough to be killed while it analyzes (a synthetic dump of 16 heads) is
  killed with SIGKILL at random times (seeded) over its whole duration, from an output
  folder holding an earlier set of this version, one of an earlier version (plain files),
  and none. After each kill the set seen through the folder's names is the earlier one or
  the new one; a rerun then exits 0 with exactly the new set and no leftover.
every-step: strace stops the run (SIGKILL) on entering each call of each system call that
  changes the output folder (mkdir, rename, symlink, unlink, link, fsync, flock, rmdir, writev),
  and in a second pass makes that call fail (EIO; ENOSPC for mkdir and writev); the same checks
  follow, and a failed call must give exit status 1 or 2 with a message naming the folder.
  Exits 77 (skipped) when strace is not installed.
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

STEP_CALLS = ("mkdir", "rename", "symlink", "unlink", "unlinkat", "fsync", "flock", "rmdir", "link", "writev")


def earlier_states(work, analyze, root, old_seed, extra):
    """Three starting points for the output folder: a set of this version, plain files of an
    earlier version (the same bytes), and no folder."""
    states = {}
    current = os.path.join(work, "state_current")
    u.run([analyze, "--data-root", root, "--output-dir", current, "--seed", old_seed] + extra, expect=0, quiet=True)
    states["current"] = current
    legacy = os.path.join(work, "state_legacy")
    u.fresh_dir(legacy)
    for name, data in u.read_set(current).items():
        with open(os.path.join(legacy, name), "wb") as f:
            f.write(data)
    with open(os.path.join(legacy, "my_notes.txt"), "w") as f:
        f.write("kept\n")
    states["legacy"] = legacy
    states["none"] = None
    return states


def reset(out, state):
    if os.path.lexists(out):
        shutil.rmtree(out)
    if state is not None:
        u.copy_tree(state, out)


def check_view(ck, label, out, old, new):
    view = u.read_set(out) if os.path.isdir(out) else {n: None for n in u.CSVS}
    ck.check(view == old or view == new, "%s: the folder shows a mix of sets: %s" % (
        label, {n: ("old" if view[n] == old[n] else "new" if view[n] == new[n] else "other") for n in u.CSVS}))
    return "old" if view == old else "new"


def check_recovery(ck, label, analyze, root, out, new, args, notes_expected):
    code, _, err = u.run([analyze, "--data-root", root, "--output-dir", out] + args, quiet=True)
    ck.check(code == 0, "%s: rerun exit %d:\n%s" % (label, code, err))
    ck.check(u.read_set(out) == new, "%s: rerun did not leave the whole new set" % label)
    ck.check(not u.leftovers(out), "%s: leftovers after the rerun: %s" % (label, u.leftovers(out)))
    if notes_expected:
        ck.check(open(os.path.join(out, "my_notes.txt")).read() == "kept\n", "%s: the user's file changed" % label)


def random_kills(analyze, synth, work):
    u.fresh_dir(work)
    ck = u.Checker()
    root = os.path.join(work, "dump")
    u.run([synth, "--out", root, "--num-layers", 2, "--num-q-heads", 8, "--num-k-heads", 2, "--dim", 32,
           "--tokens", 16384, "--examples", 8, "--buckets", 16, "--seed", 4], expect=0, quiet=True)
    extra = ["--threads", 2]
    states = earlier_states(work, analyze, root, 1, extra)
    new_out = os.path.join(work, "new")
    start = time.time()
    u.run([analyze, "--data-root", root, "--output-dir", new_out, "--seed", 2] + extra, expect=0, quiet=True)
    duration = time.time() - start
    old = u.read_set(states["current"])
    new = u.read_set(new_out)
    ck.check(old != new, "the two seeds must give different sets")
    rng = random.Random(20261126)
    out = os.path.join(work, "out")
    outcomes = {"old": 0, "new": 0}
    kills = 0
    for label, state in states.items():
        for i in range(4):
            reset(out, state)
            before = {n: None for n in u.CSVS} if state is None else old
            delay = rng.uniform(0.0, duration * 1.05)
            proc = subprocess.Popen([analyze, "--data-root", root, "--output-dir", out, "--seed", "2"] + [str(a) for a in extra],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            name = "%s kill %d at %.3f s of %.3f s" % (label, i, delay, duration)
            outcomes[check_view(ck, name, out, before, new)] += 1
            check_recovery(ck, name, analyze, root, out, new, ["--seed", 2] + extra, label == "legacy")
    print("%d kills over a %.2f s run: the folder showed the earlier set %d times, the new one %d times"
          % (kills, duration, outcomes["old"], outcomes["new"]))
    ck.close("test_kill_runs random")


def every_step(analyze, root, work):
    strace = shutil.which("strace")
    if strace is None:
        print("SKIP: strace is not installed (it stops the run at each system call)")
        sys.exit(u.SKIP)
    u.fresh_dir(work)
    ck = u.Checker()
    states = earlier_states(work, analyze, root, 1, [])
    new_out = os.path.join(work, "new")
    u.run([analyze, "--data-root", root, "--output-dir", new_out, "--seed", 2], expect=0, quiet=True)
    old = u.read_set(states["current"])
    new = u.read_set(new_out)
    out = os.path.join(work, "out")
    args = ["--seed", 2, "--threads", 1]
    points = 0
    for label, state in states.items():
        # Count the calls of the main thread (the one that writes the set).
        reset(out, state)
        log = os.path.join(work, "count.log")
        subprocess.run([strace, "-f", "-qq", "-o", log, "-e", "trace=" + ",".join(STEP_CALLS), analyze,
                        "--data-root", root, "--output-dir", out] + [str(a) for a in args],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        calls = {}
        for line in open(log):
            m = re.match(r"(\d+) +(\w+)\(", line)
            if m and m.group(2) in STEP_CALLS:
                calls.setdefault(int(m.group(1)), {}).setdefault(m.group(2), 0)
                calls[int(m.group(1))][m.group(2)] += 1
        main_pid = min(calls)
        counts = calls[main_pid]
        before = {n: None for n in u.CSVS} if state is None else old
        for call, count in sorted(counts.items()):
            for n in range(1, count + 1):
                for mode in ("kill", "fail"):
                    if mode == "kill":
                        inject = "inject=%s:signal=KILL:when=%d" % (call, n)
                    else:
                        err = "ENOSPC" if call in ("mkdir", "writev") else "EIO"
                        inject = "inject=%s:error=%s:when=%d" % (call, err, n)
                    reset(out, state)
                    proc = subprocess.run([strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=" + call, "-e", inject,
                                           analyze, "--data-root", root, "--output-dir", out] + [str(a) for a in args],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                    name = "%s: %s %s #%d" % (label, mode, call, n)
                    points += 1
                    seen = check_view(ck, name, out, before, new)
                    if mode == "fail" and proc.returncode != 0:
                        ck.check(proc.returncode in (1, 2) and out in proc.stderr,
                                 "%s: exit %d, the message should name %s:\n%s" % (name, proc.returncode, out, proc.stderr))
                        ck.check(seen == "old", "%s: a failed run changed the set" % name)
                    check_recovery(ck, name, analyze, root, out, new, args, label == "legacy")
    print("%d stops and failures checked" % points)
    ck.close("test_kill_runs every-step")


def main():
    u.require_numpy()
    mode = sys.argv[1]
    if mode == "random":
        random_kills(*sys.argv[2:5])
    else:
        every_step(*sys.argv[2:5])


if __name__ == "__main__":
    main()
