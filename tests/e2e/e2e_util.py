"""Helpers shared by the end-to-end tests of ap_analyze / ap_synth (stdlib + NumPy)."""

import csv
import math
import os
import shutil
import subprocess
import sys

SKIP = 77  # ctest SKIP_RETURN_CODE


def require_numpy():
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: NumPy is not importable by %s" % sys.executable)
        sys.exit(SKIP)


def fresh_dir(path):
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def run(args, expect=None, quiet=False, timeout=None):
    """Runs a command; returns (returncode, stdout, stderr). expect: required exit status.
    timeout: seconds, after which the command is killed and (-9, "", "timed out ...") returned."""
    try:
        proc = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -9, "", "timed out after %s s (it waits for something): %s" % (timeout, " ".join(str(a) for a in args))
    if not quiet:
        print("$ " + " ".join(str(a) for a in args) + "  -> %d" % proc.returncode)
    if expect is not None and proc.returncode != expect:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise AssertionError("%s exited %d, expected %d" % (args[0], proc.returncode, expect))
    return proc.returncode, proc.stdout, proc.stderr


def read_csv(path):
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, row)) for row in reader]


def num(text):
    return float("nan") if text == "nan" else float(text)


def head_key(row):
    return int(row["layer"]), int(row["q_head"])


def write_folder(folder, vectors, position, bucket, example_id, sliding_window=None,
                 vec_dtype="float64", int_dtype="int64"):
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "vector.npy"), np.ascontiguousarray(np.asarray(vectors, dtype=vec_dtype)))
    np.save(os.path.join(folder, "position.npy"), np.asarray(position, dtype=int_dtype))
    np.save(os.path.join(folder, "bucket.npy"), np.asarray(bucket, dtype=int_dtype))
    np.save(os.path.join(folder, "example_id.npy"), np.asarray(example_id, dtype=int_dtype))
    if sliding_window is not None:
        np.save(os.path.join(folder, "sliding_window.npy"), np.asarray(sliding_window, dtype=int_dtype))


def folder(root, layer, head, kind):
    return os.path.join(root, "l%02dh%02d%s" % (layer, head, kind))


class Checker:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def check(self, ok, message):
        self.count += 1
        if not ok:
            self.failures.append(message)
            print("FAIL: " + message)

    def close(self, name):
        if self.failures:
            print("%s: %d of %d checks failed" % (name, len(self.failures), self.count))
            sys.exit(1)
        print("%s: all %d checks passed" % (name, self.count))
        sys.exit(0)


def close(a, b, rel=0.0, abs_tol=0.0):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


# ---- result sets (include/attention_plasticity/run/result_set.hpp): OUT/<csv> -> .ap_results/current/<csv>

CSVS = ("head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv",
        "head_distance_plasticity.csv", "head_sequence_influence.csv")
STATE = ".ap_results"


def read_set(out):
    """{csv name: bytes or None when absent}, read through the output folder's names."""
    result = {}
    for name in CSVS:
        try:
            with open(os.path.join(out, name), "rb") as f:
                result[name] = f.read()
        except OSError:
            result[name] = None
    return result


def leftovers(out):
    """Entries of OUT/.ap_results other than the lock, `current`, `previous` and the sets
    they name (the set before the current one is kept for readers until the next run)."""
    state = os.path.join(out, STATE)
    if not os.path.isdir(state):
        return []
    named = [os.readlink(os.path.join(state, n)) for n in ("current", "previous")
             if os.path.islink(os.path.join(state, n))]
    return sorted(e for e in os.listdir(state) if e not in ["lock", "current", "previous"] + named)


def rows_where(files, keep):
    """The CSV bytes with only the rows whose (layer, q_head) satisfies keep (header kept)."""
    result = {}
    for name, data in files.items():
        lines = data.decode().splitlines(True)
        result[name] = ("".join([lines[0]] + [ln for ln in lines[1:]
                                              if keep(int(ln.split(",")[0]), int(ln.split(",")[1]))])).encode()
    return result


def copy_tree(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)


def without_dac_override():
    """A command prefix that runs a program without the power to ignore file permissions:
    [] for a normal user, setpriv dropping CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH from the
    bounding set for root (root keeps its uid, loses the override); None if impossible."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    probe = subprocess.run(prefix + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return prefix if probe.returncode == 0 else None
