#!/usr/bin/env python3
"""The plasticity study in miniature (issue 18, item 4): the ordered checkpoints of the decoder
that scripts/train_decoder.py trains here (pre-training at context 512, RoPE base 10,000, then
the context extension to 1024 with the base raised to 100,000) captured, analyzed, compared in
order and plotted, as the reference study traces SmolLM3-3B over its checkpoints.

usage:
  plasticity_study.py OUT [--run RUN]            capture every checkpoint of RUN, then analyze,
                                                 compare and plot
  plasticity_study.py OUT --from-dumps DUMPS     analyze, compare and plot dumps captured before
                                                 (DUMPS/study.json names them in order; the CI
                                                 fixture tests/data/plasticity_study is one)

Steps (each one the project's own tool, nothing re-implemented here):
  1. capture (examples/capture_qk.py, attention_plasticity.capture_sniffer): each checkpoint
     folder of RUN/schedule.json, in its order, with the same texts and the same sampling
     (--max-examples, --max-seq-len, --sampling-rate, --bucket-size, --heads, --seed, bf16):
     the sampling draws depend on the seed and the example only, so every checkpoint keeps the
     same tokens; into OUT/dumps/<set>/, with OUT/dumps/study.json (the sets, in order, with
     their phase, step, context, RoPE base and held-out loss, and the capture's command);
  2. analyze (attention_plasticity.analyze_dump, ap_analyze's CSVs) each dump into
     OUT/results/<set>/, with ap_analyze's defaults (sequence-level standard errors,
     docs/method.md §8.3; --sampling-unit token gives the former, token-level ones) and
     sequence_influences on (head_sequence_influence.csv, the per-sequence influences a
     paired comparison needs);
  3. compare (attention_plasticity.compare_runs, ap_compare's CSVs, docs/method.md §8.6) the
     result sets in order into OUT/compare/ (compare_trajectory.csv: each set's means over
     heads with their intervals, all layers and by layer), with the design of --design:
     paired (default; every checkpoint is captured on the same texts with the same tokens
     kept, which the script checks from the dumps' example ids and positions) or unpaired;
     the design used is printed, and is in compare_heads.csv's column `design`;
  3b. with the paired design, the power of the pairing (OUT/study_power.csv): each pair of
     consecutive sets, the first pre-training checkpoint against the last and the last
     pre-training checkpoint against the last set, compared in both designs (in memory):
     for each quantity the heads changed at q <= 0.05 in each design and the ratio of the
     standard errors of a change, paired / unpaired (median, and the share of tests where
     the paired one is smaller);
  4. plot (examples/plots/plot_trajectory.py): OUT/figures/trajectory.png (AP_first20 and
     AP_last20 with the gap shaded, bias_strength below), trajectory_layers_<group>.png for
     the layer groups of the decoder (RoPE full attention, NoPE, sliding window) and the
     per-head change of AP_last20 at the extension's onset (trajectory_changes.png).
OUT/study_summary.csv gathers, per set in order, the means over all heads of ap_first20,
ap_last20, ap_drop and bias_strength (read from compare_trajectory.csv) and the held-out loss.

study_power.csv columns: set_a, set_b, quantity (ap_overall, ap_first20, ap_last20, ap_drop,
ap_bucket: the AP_j of every query bucket), n_tests (heads, or head-buckets, tested in both
designs), changed_paired, changed_unpaired (tests with BH q <= 0.05 in each design),
se_ratio_median (the median over the tests of se_paired / se_unpaired), paired_se_smaller
(the share of tests whose paired standard error is the smaller), mean_difference (of the
tests' bias-corrected differences: the same in both designs).

Every step is deterministic (seeded capture on one torch thread, analyze_dump's results are
independent of threads). Exit status: 0 done; 1 a step failed (its message says which);
2 bad arguments.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPTURE_QK = os.path.join(REPO, "examples", "capture_qk.py")
PLOT_TRAJECTORY = os.path.join(REPO, "examples", "plots", "plot_trajectory.py")
DEFAULT_RUN = os.path.join("..", "decoder_run")  # train_decoder.py's RUN folder, beside the repository
STUDY_JSON = "study.json"
DESIGNS = ("paired", "unpaired")
POWER_QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop", "ap_bucket")
# The quantities of the summary, as compare_trajectory.csv names them (docs/method.md §8.6).
SUMMARY_QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop", "bias_strength")


class StudyError(Exception):
    """A step failed; the message names it."""


class UsageError(StudyError):
    """Bad arguments (exit status 2)."""


def set_name(checkpoint):
    """'pre-200', 'ext-1033': short names for the figures' axis, in schedule order."""
    prefix = {"pretrain": "pre", "extend": "ext"}.get(checkpoint["phase"], checkpoint["phase"])
    return f"{prefix}-{int(checkpoint['step'])}"


def read_schedule(run):
    path = os.path.join(run, "schedule.json")
    try:
        with open(path, encoding="utf-8") as f:
            schedule = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--run {run}: cannot read schedule.json ({exc}); train with "
                         "scripts/train_decoder.py RUN --checkpoints N --extend") from None
    checkpoints = schedule.get("checkpoints") or []
    if len(checkpoints) < 2:
        raise UsageError(f"--run {run}: schedule.json lists {len(checkpoints)} checkpoint(s); the "
                         "study needs at least 2 (train_decoder.py --checkpoints N --extend)")
    sets = []
    for cp in checkpoints:
        folder = os.path.join(run, cp["folder"])
        if not os.path.isfile(os.path.join(folder, "config.json")):
            raise UsageError(f"--run {run}: checkpoint folder {cp['folder']} has no config.json")
        sets.append({"name": set_name(cp), "phase": cp["phase"], "step": int(cp["step"]),
                     "seq_len": int(cp["seq_len"]), "rope_theta": float(cp["rope_theta"]),
                     "val_loss": cp.get("val_loss"), "folder": cp["folder"]})
    names = [s["name"] for s in sets]
    if len(set(names)) != len(names):
        raise UsageError(f"--run {run}: checkpoint names repeat: {names}")
    return schedule, sets


def model_layout(model_folder):
    with open(os.path.join(model_folder, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    layout = {"num_layers": int(cfg["num_hidden_layers"]), "num_q_heads": int(cfg["num_attention_heads"]),
              "num_k_heads": int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])}
    # The layer groups of the figures: positions (RoPE / NoPE) and attention (sliding / full).
    nope = [i for i, r in enumerate(cfg.get("no_rope_layers") or []) if int(r) == 0]
    sliding = [i for i, t in enumerate(cfg.get("layer_types") or []) if t == "sliding_attention"]
    groups = {}
    rope_full = [i for i in range(layout["num_layers"]) if i not in nope and i not in sliding]
    for key, layers in (("rope_full", rope_full), ("nope", nope), ("sliding", sliding)):
        if layers:
            groups[key] = layers
    return layout, groups


def run_step(what, cmd, log):
    """Runs one tool; its output goes to the log; a failure raises StudyError naming the step."""
    t0 = time.monotonic()
    with open(log, "a", encoding="utf-8") as f:
        f.write("$ " + " ".join(str(c) for c in cmd) + "\n")
        f.flush()
        proc = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    if proc.returncode != 0:
        raise StudyError(f"{what}: exit status {proc.returncode} (see {log})")
    return time.monotonic() - t0


def capture(args, out, log):
    schedule, sets = read_schedule(args.run)
    dumps = os.path.join(out, "dumps")
    os.makedirs(dumps, exist_ok=True)
    layout, groups = model_layout(os.path.join(args.run, sets[0]["folder"]))
    options = ["--max-examples", args.max_examples, "--max-seq-len", args.max_seq_len,
               "--sampling-rate", args.sampling_rate, "--bucket-size", args.bucket_size,
               "--seed", args.seed, "--bf16", "--no-token-strings", "--threads", 1]
    if args.heads:
        options += ["--heads", args.heads]
    for s in sets:
        dt = run_step(f"capture of {s['name']} ({s['folder']})",
                      [sys.executable, CAPTURE_QK, "--model", os.path.join(args.run, s["folder"]),
                       "--out", os.path.join(dumps, s["name"]), "--force"] + options, log)
        print(f"plasticity_study: captured {s['name']} in {dt:.1f} s", flush=True)
    study = {"sets": sets, "layout": layout, "layer_groups": groups,
             "capture": "examples/capture_qk.py --model RUN/<folder> --out DUMPS/<name> --force "
                        + " ".join(str(o) for o in options),
             "run": {"command": schedule.get("command"), "seed": schedule.get("seed"),
                     "pretrain": schedule.get("pretrain"), "extend": schedule.get("extend")}}
    with open(os.path.join(dumps, STUDY_JSON), "w", encoding="utf-8") as f:
        json.dump(study, f, indent=1)
        f.write("\n")
    return dumps


def read_study(dumps):
    path = os.path.join(dumps, STUDY_JSON)
    try:
        with open(path, encoding="utf-8") as f:
            study = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--from-dumps {dumps}: cannot read {STUDY_JSON} ({exc})") from None
    for s in study.get("sets", []):
        if not os.path.isdir(os.path.join(dumps, s["name"])):
            raise UsageError(f"--from-dumps {dumps}: {STUDY_JSON} names set '{s['name']}' but the "
                             "folder is missing")
    if len(study.get("sets", [])) < 2:
        raise UsageError(f"--from-dumps {dumps}: {STUDY_JSON} lists fewer than 2 sets")
    return study


def analyze(study, dumps, out, threads, sampling_unit="sequence"):
    import attention_plasticity as ap

    results = os.path.join(out, "results")
    os.makedirs(results, exist_ok=True)
    folders = []
    for s in study["sets"]:
        target = os.path.join(results, s["name"])
        if os.path.isdir(target):
            shutil.rmtree(target)  # a rerun replaces the set (analyze_dump wants a new folder)
        t0 = time.monotonic()
        # warn=False: a failed head is counted here (and listed in the set); no warnings.
        # sequence_influences: head_sequence_influence.csv, which the paired design needs (and
        # with which the means over heads account for the heads sharing sequences, §8.6).
        res = ap.analyze_dump(os.path.join(dumps, s["name"]), target, progress=False, warn=False,
                              threads=threads, sequence_influences="on", sampling_unit=sampling_unit,
                              **study["layout"])
        failed = len(res.errors)
        print(f"plasticity_study: analyzed {s['name']} in {time.monotonic() - t0:.1f} s"
              + (f" ({failed} head(s) failed, see {target})" if failed else ""), flush=True)
        folders.append(target)
    return folders


def query_tokens(dump):
    """{query folder: sorted (example_id, position) of its rows}: which tokens a dump kept."""
    import pyarrow.parquet as pq

    tokens = {}
    for name in sorted(os.listdir(dump)):
        path = os.path.join(dump, name, "data.parquet")
        if name.endswith("q") and os.path.isfile(path):
            t = pq.read_table(path, columns=["example_id", "position"])
            tokens[name] = sorted(zip(t.column("example_id").to_pylist(), t.column("position").to_pylist()))
    return tokens


def check_same_tokens(study, dumps):
    """The paired design states that the same example_id is the same text in every set. The
    capture makes it so (one command, one seed, the same examples; the draws depend on the seed
    and the example only); what the dumps can show is checked here: every set kept the same
    (example_id, position) for every query head. (The texts themselves are not in the dumps:
    --no-token-strings.)"""
    first = study["sets"][0]["name"]
    want = query_tokens(os.path.join(dumps, first))
    for s in study["sets"][1:]:
        got = query_tokens(os.path.join(dumps, s["name"]))
        if got != want:
            heads = sorted(set(got) ^ set(want)) or [h for h in want if got.get(h) != want[h]]
            raise UsageError(f"--design paired: set {s['name']} did not keep the same tokens as {first} "
                             f"(query heads {', '.join(heads[:4])}): its dumps are not of the same texts "
                             "and token draws; use --design unpaired")


def compare(study, folders, out, design):
    import attention_plasticity as ap

    target = os.path.join(out, "compare")
    if os.path.isdir(target):
        shutil.rmtree(target)
    names = [s["name"] for s in study["sets"]]
    try:
        result = ap.compare_runs(folders, target, names=names, design=design)
    except ap.UsageError as exc:
        raise StudyError(f"compare_runs (design {design}): {exc}") from None
    # The design column says the design, then how it was chosen ("paired (by id: unchecked)" for
    # sets without document fingerprints, as the committed checkpoints: docs/method.md §8.6).
    used = sorted({str(d).split(" ")[0] for d in result.heads["design"]})
    if used != [design]:
        raise StudyError(f"compare_runs: design {used} in compare_heads.csv, asked for {design}")
    why = ("the same texts and tokens in every set" if design == "paired"
           else "the sets taken as independent samples of text")
    print(f"plasticity_study: compared {len(names)} sets, {result.compared_heads} heads, "
          f"{result.changed_heads} significant head changes (design {design}: {why})", flush=True)
    return target, result


def power_pairs(study):
    """The pairs of study_power.csv, in order and without repeats: consecutive sets, the first
    pre-training checkpoint against the last, the last pre-training checkpoint against the last
    set (the whole extension)."""
    sets = study["sets"]
    idx = [(i, i + 1) for i in range(len(sets) - 1)]
    phase0 = [i for i, s in enumerate(sets) if s["phase"] == sets[0]["phase"]]
    idx.append((phase0[0], phase0[-1]))
    if phase0[-1] != len(sets) - 1:
        idx.append((phase0[-1], len(sets) - 1))
    pairs = []
    for a, b in idx:
        if b - a >= 1 and (a, b) not in pairs:
            pairs.append((a, b))
    return pairs


def power(study, folders, out, alpha=0.05):
    """OUT/study_power.csv: for the pairs of power_pairs, both designs' tests of each quantity
    (compare_runs in memory, the same sets): how many changes each finds, the ratio of the
    standard errors. Returns its rows."""
    import attention_plasticity as ap

    sets = study["sets"]
    rows = []
    for a, b in power_pairs(study):
        pair = [folders[a], folders[b]]
        names = [sets[a]["name"], sets[b]["name"]]
        heads = {d: ap.compare_runs(pair, names=names, alpha=alpha, design=d).heads for d in DESIGNS}
        key = ["layer", "q_head", "quantity", "q_bucket"]
        both = heads["paired"].merge(heads["unpaired"], on=key, suffixes=("_p", "_u"))
        both = both[both["se_p"].notna() & both["se_u"].notna() & (both["se_u"] > 0)]
        for q in POWER_QUANTITIES:
            t = both[both["quantity"] == q]
            n = len(t)
            ratio = (t["se_p"] / t["se_u"]) if n else None
            rows.append({"set_a": names[0], "set_b": names[1], "quantity": q, "n_tests": n,
                         "changed_paired": int((t["q_bh_p"] <= alpha).sum()),
                         "changed_unpaired": int((t["q_bh_u"] <= alpha).sum()),
                         "se_ratio_median": float(ratio.median()) if n else float("nan"),
                         "paired_se_smaller": float((ratio < 1).mean()) if n else float("nan"),
                         "mean_difference": float(t["difference_p"].mean()) if n else float("nan")})
    path = os.path.join(out, "study_power.csv")
    tmp = path + ".tmp"
    columns = ["set_a", "set_b", "quantity", "n_tests", "changed_paired", "changed_unpaired",
               "se_ratio_median", "paired_se_smaller", "mean_difference"]
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([f"{r[c]:.6g}" if isinstance(r[c], float) else r[c] for c in columns])
    os.replace(tmp, path)
    every = [r for r in rows if r["quantity"] != "ap_bucket"]
    print(f"plasticity_study: power ({len(rows) // len(POWER_QUANTITIES)} pairs, head-level quantities): "
          f"{sum(r['changed_paired'] for r in every)} changes paired, "
          f"{sum(r['changed_unpaired'] for r in every)} unpaired; {path}", flush=True)
    return rows


def plot_step(what, argv):
    """examples/plots/plot_trajectory.py's main in this process (one matplotlib import for every
    figure); its errors raise StudyError naming the step."""
    sys.path.insert(0, os.path.dirname(PLOT_TRAJECTORY))
    try:
        import plot_trajectory
    finally:
        sys.path.pop(0)
    try:
        code = plot_trajectory.main([str(a) for a in argv])
    except Exception as exc:  # the plot script's InputError / UsageError and matplotlib's own
        raise StudyError(f"{what}: {type(exc).__name__}: {exc}") from None
    if code:
        raise StudyError(f"{what}: exit status {code}")


def plot(study, compare_dir, out):
    figures = os.path.join(out, "figures")
    os.makedirs(figures, exist_ok=True)
    csv_path = os.path.join(compare_dir, "compare_trajectory.csv")
    sets = study["sets"]
    onset = next((i for i, s in enumerate(sets) if s["phase"] != sets[0]["phase"]), None)
    argv = [csv_path, "-o", os.path.join(figures, "trajectory.png"),
            "--title", "Decoder checkpoints, mean over heads: "
                       "pre-training (pre-*), then context extension (ext-*)"]
    if onset is not None:
        # The per-head change at the extension's onset: the last pre-training checkpoint to the
        # first extension checkpoint.
        argv += ["--changes", "--quantity", "ap_last20", "--pair",
                 f"{sets[onset - 1]['name']},{sets[onset]['name']}"]
    plot_step("plot_trajectory.py", argv)
    labels = {"rope_full": "RoPE full-attention layers", "nope": "NoPE layers",
              "sliding": "sliding-window RoPE layers"}
    for key, layers in study.get("layer_groups", {}).items():
        plot_step(f"plot_trajectory.py --layers ({key})",
                  [csv_path, "-o", os.path.join(figures, f"trajectory_layers_{key}.png"),
                   "--layers", ",".join(str(i) for i in layers),
                   "--title", f"{labels.get(key, key)} ({', '.join(str(i) for i in layers)}), one line per layer"])
    return figures


def summary(study, compare_dir, out):
    """OUT/study_summary.csv: per set in order, the means over all heads (compare_trajectory.csv's
    model-level rows, layer empty) and the checkpoint's held-out loss."""
    rows = {}
    with open(os.path.join(compare_dir, "compare_trajectory.csv"), newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["layer"] in ("", "all") and r["quantity"] in SUMMARY_QUANTITIES:
                rows[(r["set"], r["quantity"])] = r
    path = os.path.join(out, "study_summary.csv")
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["order", "set", "phase", "step", "seq_len", "rope_theta", "val_loss", "n_heads"]
                   + [f"{q}{suffix}" for q in SUMMARY_QUANTITIES for suffix in ("", "_se")])
        for i, s in enumerate(study["sets"]):
            missing = [q for q in SUMMARY_QUANTITIES if (s["name"], q) not in rows]
            if missing:
                raise StudyError(f"compare_trajectory.csv: no row of {', '.join(missing)} for set {s['name']}")
            n = rows[(s["name"], "ap_overall")]["n_heads"]
            w.writerow([i, s["name"], s["phase"], s["step"], s["seq_len"], s["rope_theta"], s.get("val_loss"), n]
                       + [rows[(s["name"], q)][c] for q in SUMMARY_QUANTITIES for c in ("mean", "se")])
    os.replace(tmp, path)
    return path


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="the study's folder (created; a rerun replaces its files)")
    p.add_argument("--run", default=DEFAULT_RUN,
                   help="train_decoder.py's run folder with schedule.json and checkpoints/ (default: %(default)s)")
    p.add_argument("--from-dumps", metavar="DUMPS",
                   help="skip the capture: the dumps of DUMPS/study.json (e.g. tests/data/plasticity_study)")
    p.add_argument("--max-examples", type=int, default=64, help="examples captured (default: %(default)s)")
    p.add_argument("--max-seq-len", type=int, default=512,
                   help="tokens per example (default: %(default)s, the pre-training context: capture_qk.py refuses more than a checkpoint's max_position_embeddings)")
    p.add_argument("--sampling-rate", type=float, default=0.125,
                   help="probability of keeping a token (default: %(default)s)")
    p.add_argument("--bucket-size", type=int, default=32, help="positions per bucket (default: %(default)s)")
    p.add_argument("--heads", help="query heads per layer to capture, e.g. 0 or 0-1 (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the capture's draws (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="analysis threads (default: %(default)s)")
    p.add_argument("--design", choices=DESIGNS, default="paired",
                   help="the comparison's design (docs/method.md §8.6): paired (default: every "
                        "checkpoint captured on the same texts, checked from the dumps' tokens) or unpaired")
    p.add_argument("--sampling-unit", choices=("sequence", "token"), default="sequence",
                   help="the analysis' standard errors (docs/method.md §8.3): sequence (default: the "
                        "texts and the tokens of a text as samples) or token (the former errors, "
                        "conditional on the keys, far too small on real text; unpaired design only)")
    p.add_argument("--capture-only", action="store_true",
                   help="stop after the capture (then --from-dumps OUT/dumps goes on)")
    p.add_argument("--no-plots", action="store_true", help="stop after the comparison")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "study.log")
    open(log, "w").close()
    t0 = time.monotonic()
    try:
        if args.from_dumps:
            if args.capture_only:
                raise UsageError("--capture-only and --from-dumps exclude each other")
            dumps = os.path.abspath(args.from_dumps)
        else:
            dumps = capture(args, out, log)
        study = read_study(dumps)
        if args.capture_only:
            print(f"plasticity_study: dumps in {dumps}")
            return 0
        if args.design == "paired":
            if args.sampling_unit != "sequence":
                raise UsageError("--design paired needs --sampling-unit sequence (the per-sequence "
                                 "influences); token-level errors: --design unpaired")
            check_same_tokens(study, dumps)
        folders = analyze(study, dumps, out, args.threads, args.sampling_unit)
        compare_dir, _ = compare(study, folders, out, args.design)
        path = summary(study, compare_dir, out)
        if args.design == "paired":
            power(study, folders, out)
        if not args.no_plots:
            plot(study, compare_dir, out)
    except UsageError as exc:
        print(f"plasticity_study.py: {exc}", file=sys.stderr)
        return 2
    except StudyError as exc:
        print(f"plasticity_study.py: {exc}", file=sys.stderr)
        return 1
    with open(path, encoding="utf-8") as f:
        sys.stdout.write(f.read())
    print(f"plasticity_study: done in {time.monotonic() - t0:.1f} s; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
