#!/usr/bin/python3
"""Every default a program's --help states is the one it uses (issue 34 item 4): each option whose
help ends with a value in brackets ("[0.05]", "[on]", "[float32]") is given that value explicitly,
all at once, and the program writes the same bytes as without them. A bracket that describes
rather than states a value ("[all]", "[none]", "[--seed]") is listed here, per program, and must
be refused as a value or be one of those listed.

usage: test_help_defaults.py AP_SYNTH AP_ANALYZE SMALL_DUMP WORK_DIR
"""

import filecmp
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

# Options whose bracket describes the default (not a value the option takes).
DESCRIBED = {
    "ap_synth": {"sliding_window_layers", "sliding_window", "query_seed", "changed_layers", "examples_per_document"},
    "ap_analyze": {"num_layers", "num_q_heads", "num_k_heads", "layers", "heads", "shard"},
}


def stated_defaults(program):
    """{key: (flag, stated default)} of the options of `program --help` that state one."""
    _, out, _ = u.run([program, "--help"], expect=0)
    stated = {}
    for line in out.splitlines():
        m = re.match(r"^  (--[\w-]+) .*\[([^\]]+)\]   \(key: (\w+)\)$", line)
        if m:
            stated[m.group(3)] = (m.group(1), m.group(2))
    return stated


def files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def same_files(a, b, names):
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def explicit_defaults(c, name, program):
    """The flags giving every stated value default of `program`, checked against DESCRIBED."""
    stated = stated_defaults(program)
    c.check(len(stated) >= 10, f"{name}: --help states {len(stated)} defaults")
    flags = []
    for key, (flag, value) in stated.items():
        if key in DESCRIBED[name]:
            continue
        flags += [flag, value]
    c.check(DESCRIBED[name] <= set(stated), f"{name}: described defaults not in --help: "
            f"{sorted(DESCRIBED[name] - set(stated))}")
    return flags, len(stated) - len(DESCRIBED[name])


def main():
    synth, analyze, small_dump, work = (os.path.abspath(a) for a in sys.argv[1:5])
    u.fresh_dir(work)
    c = u.Checker()

    # ap_synth: its defaults (4 layers x 8 heads of 4096 tokens, d 64) in cwd/synth_dump.
    flags, count = explicit_defaults(c, "ap_synth", synth)
    c.check(count == 19, f"ap_synth: {count} value defaults")
    runs = {}
    for run, args in (("plain", []), ("explicit", flags)):
        cwd = os.path.join(work, "synth_" + run)
        os.makedirs(cwd)
        here = os.getcwd()
        os.chdir(cwd)
        try:
            u.run([synth] + args, expect=0)
        finally:
            os.chdir(here)
        runs[run] = os.path.join(cwd, "synth_dump")
    names = files(runs["plain"])
    c.check(names and names == files(runs["explicit"]) and same_files(runs["plain"], runs["explicit"], names),
            "ap_synth: the stated defaults given explicitly change its dump")

    # ap_analyze on the small dump: the CSVs in the current directory (output_dir's default '.').
    flags, count = explicit_defaults(c, "ap_analyze", analyze)
    c.check(count == 20, f"ap_analyze: {count} value defaults")
    runs = {}
    for run, args in (("plain", []), ("explicit", flags)):
        cwd = os.path.join(work, "analyze_" + run)
        os.makedirs(cwd)
        here = os.getcwd()
        os.chdir(cwd)
        try:
            u.run([analyze, "--data-root", small_dump] + args, expect=0)
        finally:
            os.chdir(here)
        runs[run] = cwd
    names = sorted(n for n in os.listdir(runs["plain"]) if n.endswith(".csv"))  # the current set's
    c.check(len(names) >= 5 and names == sorted(n for n in os.listdir(runs["explicit"]) if n.endswith(".csv"))
            and same_files(runs["plain"], runs["explicit"], names),
            "ap_analyze: the stated defaults given explicitly change its CSVs")
    # a planted wrong default is seen: one value changed changes the bytes
    cwd = os.path.join(work, "analyze_planted")
    os.makedirs(cwd)
    u.run([analyze, "--data-root", small_dump, "--output-dir", cwd, "--seed", "1"], expect=0)
    c.check(not same_files(runs["plain"], cwd, names), "ap_analyze: --seed 1 writes the same CSVs as 0")
    c.close("test_help_defaults")


if __name__ == "__main__":
    main()
