#!/usr/bin/env python3
"""ap_analyze against the original Python toolkit, whole process, on the same heads (issue 37 item 6).

usage: run_toolkit_comparison.py --build BUILD --toolkit TOOLKIT [--work DIR] [--rounds R]
                                 [--threads T] [--nice N] [--out FILE]

TOOLKIT is a checkout of https://github.com/viktor-shcherb/attention-plasticity (measured at
23e1d60); BUILD a build folder of this project (BUILD/examples/ap_synth, ap_analyze).

1. Writes two Qwen3-8B-shaped heads with ap_synth (d = 128, 12 buckets, float32): "8 long
   sequences" (50,000 tokens in 8 sequences) and "50 sequences" (100,000 tokens in 50 sequences
   of 2,000 positions; both sides keep 50,000 of each kind, their max_tokens_per_head).
2. Writes each head a second time in the toolkit's layout (one data.parquet per
   ROOT/<model_dir>/lXXhYY{q,k} with the columns bucket, position, vector, example_id, which its
   analyze_head reads through datasets.load_dataset("parquet", ...)).
3. Runs, round after round, for each head: `ap_analyze --data-root DUMP --output-dir OUT`
   (the defaults: all cores, the sequence-level errors where there are 10 or more sequences)
   and the toolkit's own CLI (`analyze.py --config CFG --dataset_local_root ROOT`, its defaults:
   one process per head on a pool of all cores, NumPy's BLAS on all cores), both whole processes
   started and waited for; wall time and CPU time (user + system of the child, from wait4).
   The toolkit's analyze_head call alone (its parquet load and its compute, without Python's
   start-up, the imports and the CSV writing) is timed inside its process and reported too.
   The toolkit imports python-dotenv only to read a .env file; when it is not installed, a
   no-op stand-in is given (the analysis is the toolkit's unchanged code).
4. Prints the medians per side and head and the ratios toolkit / ap_analyze (the median of the
   per-round ratios, each round's toolkit run against the ap_analyze run just before it).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HEADS = {
    "8 long sequences": ["--tokens", "50000", "--examples", "8"],
    "50 sequences": ["--tokens", "100000", "--examples", "50"],
}

# Runs the toolkit's analyze.py in this child process: times its analyze_head calls (written
# as JSON lines to the file named by AP_TOOLKIT_TIMES) and stands in for python-dotenv if absent.
TOOLKIT_DRIVER = r"""
import json, os, runpy, sys, time, types
try:
    import dotenv  # noqa: F401
except ImportError:
    stub = types.ModuleType("dotenv")
    stub.load_dotenv = lambda *a, **k: False
    sys.modules["dotenv"] = stub
toolkit = sys.argv[1]
sys.path.insert(0, toolkit)
import attention_plasticity.head_analysis as ha
inner = ha.analyze_head
def timed(*args, **kwargs):
    start = time.perf_counter()
    out = inner(*args, **kwargs)
    with open(os.environ["AP_TOOLKIT_TIMES"], "a") as f:
        f.write(json.dumps({"seconds": time.perf_counter() - start, "ap_overall": out[0]["ap_overall"]}) + "\n")
    return out
ha.analyze_head = timed
sys.argv = [os.path.join(toolkit, "analyze.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(args, env=None, nice=0):
    """Wall and CPU seconds (user + system of the child, from wait4) of one process, its stdout
    and stderr; raises on failure."""
    cmd = (["nice", "-n", str(nice)] if nice else []) + args
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text_out, text_err = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{text_err[-2000:]}")
    return wall, rusage.ru_utime + rusage.ru_stime, text_out, text_err


def write_parquet(dump, root, model_dir):
    """The NPY head of `dump` in the toolkit's layout under root/model_dir."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    for kind in ("q", "k"):
        src = os.path.join(dump, "l00h00" + kind)
        vectors = np.load(os.path.join(src, "vector.npy"))
        n, d = vectors.shape
        table = pa.table({
            "bucket": np.load(os.path.join(src, "bucket.npy")).astype(np.int64),
            "position": np.load(os.path.join(src, "position.npy")).astype(np.float64),
            "vector": pa.ListArray.from_arrays(pa.array(np.arange(0, n * d + 1, d, dtype=np.int32)),
                                               pa.array(vectors.reshape(-1))),
            "example_id": np.load(os.path.join(src, "example_id.npy")).astype(np.int64),
        })
        out = os.path.join(root, model_dir, "l00h00" + kind)
        os.makedirs(out, exist_ok=True)
        pq.write_table(table, os.path.join(out, "data.parquet"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True)
    p.add_argument("--toolkit", required=True)
    p.add_argument("--work", default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="ap_analyze --threads (0: all cores, its default)")
    p.add_argument("--nice", type=int, default=0, help="run both sides under nice -n N")
    p.add_argument("--out", default=None, help="also write the raw measurements as JSON")
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ap_toolkit_cmp_")
    os.makedirs(work, exist_ok=True)
    synth = os.path.join(args.build, "examples", "ap_synth")
    analyze = os.path.abspath(os.path.join(args.build, "examples", "ap_analyze"))
    toolkit = os.path.abspath(args.toolkit)
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # as a user runs both: no kernel forced
    heads = {}
    for i, (name, flags) in enumerate(HEADS.items()):
        dump = os.path.join(work, f"dump{i}")
        if not os.path.exists(os.path.join(dump, "l00h00q", "vector.npy")):
            subprocess.run([synth, "--out", dump, "--num-layers", "1", "--num-q-heads", "1", "--num-k-heads", "1",
                            "--dim", "128", "--buckets", "12", "--seed", "1", "--true-pairs", "1"] + flags,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        root = os.path.join(work, f"parquet{i}")
        if not os.path.exists(os.path.join(root, "synth", "l00h00k", "data.parquet")):
            write_parquet(dump, root, "synth")
        config = os.path.join(work, f"toolkit{i}.yaml")
        with open(config, "w") as f:
            f.write("model_dir: synth\nnum_layers: 1\nnum_q_heads: 1\nnum_k_heads: 1\n"
                    "max_tokens_per_head: 50000\nnormality_max_dims: 64\np_alpha: 0.01\nseed: 0\n"
                    f"output_csv: {work}/toolkit_out{i}/head_metrics.csv\n"
                    f"bucket_csv: {work}/toolkit_out{i}/head_bucket_plasticity.csv\n"
                    f"component_csv: {work}/toolkit_out{i}/head_component_weights.csv\n")
        heads[name] = (dump, root, config, os.path.join(work, f"ap_out{i}"))
    driver = os.path.join(work, "toolkit_driver.py")
    with open(driver, "w") as f:
        f.write(TOOLKIT_DRIVER)
    times = os.path.join(work, "toolkit_times.jsonl")
    records = []
    for r in range(args.rounds):
        for name, (dump, root, config, out) in heads.items():
            shutil.rmtree(out, ignore_errors=True)
            ap_args = [analyze, "--data-root", dump, "--output-dir", out]
            if args.threads:
                ap_args += ["--threads", str(args.threads)]
            ap_wall, ap_cpu, _, ap_err = run(ap_args, env, args.nice)
            if os.path.exists(times):
                os.remove(times)
            tk_env = dict(env, AP_TOOLKIT_TIMES=times)
            tk_wall, tk_cpu, tk_out, _ = run([sys.executable, driver, toolkit, "--config", config,
                                              "--dataset_local_root", root], tk_env, args.nice)
            with open(times) as f:
                inner = [json.loads(line) for line in f]
            with open(os.path.join(out, "head_metrics.csv")) as f:
                header, row = f.readline().strip().split(","), f.readline().strip().split(",")
            rec = {"round": r + 1, "head": name, "ap_wall": ap_wall, "ap_cpu": ap_cpu,
                   "toolkit_wall": tk_wall, "toolkit_cpu": tk_cpu,
                   "toolkit_analyze_head": sum(x["seconds"] for x in inner),
                   "ap_overall": float(row[header.index("ap_overall")]),
                   "toolkit_ap_overall": inner[0]["ap_overall"],
                   "ap_blas": next((line for line in ap_err.splitlines() if "kernels" in line), "")}
            records.append(rec)
            print(f"round {r + 1} {name}: ap_analyze {ap_wall:.3f} s wall {ap_cpu:.3f} s CPU; toolkit "
                  f"{tk_wall:.3f} s wall {tk_cpu:.3f} s CPU (its analyze_head {rec['toolkit_analyze_head']:.3f} s); "
                  f"wall ratio {tk_wall / ap_wall:.1f}x", flush=True)
    print()
    print(f"medians over {args.rounds} rounds (load average {os.getloadavg()[0]:.1f} at the end)")
    summary = {}
    for name in heads:
        rs = [x for x in records if x["head"] == name]
        med = {k: statistics.median(x[k] for x in rs) for k in
               ("ap_wall", "ap_cpu", "toolkit_wall", "toolkit_cpu", "toolkit_analyze_head")}
        ratio_wall = statistics.median(x["toolkit_wall"] / x["ap_wall"] for x in rs)
        ratio_inner = statistics.median(x["toolkit_analyze_head"] / x["ap_wall"] for x in rs)
        ratio_cpu = statistics.median(x["toolkit_cpu"] / x["ap_cpu"] for x in rs)
        summary[name] = dict(med, ratio_wall=ratio_wall, ratio_analyze_head=ratio_inner, ratio_cpu=ratio_cpu)
        print(f"{name}: ap_analyze {med['ap_wall']:.3f} s wall, {med['ap_cpu']:.3f} s CPU; toolkit "
              f"{med['toolkit_wall']:.3f} s wall, {med['toolkit_cpu']:.3f} s CPU, its analyze_head "
              f"{med['toolkit_analyze_head']:.3f} s; toolkit / ap_analyze: whole process {ratio_wall:.1f}x wall, "
              f"{ratio_cpu:.1f}x CPU; its analyze_head alone / ap_analyze's whole process {ratio_inner:.1f}x; "
              f"ap_overall {rs[0]['ap_overall']:.6f} vs {rs[0]['toolkit_ap_overall']:.6f}")
    if records:
        print(records[0]["ap_blas"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"records": records, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
