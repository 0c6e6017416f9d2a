"""Shared by the tests of the Python package (tests/python/test_bindings_*.py): paths, the C++
programs the results are compared with, and the independent reference code of tests/reference.

The package is the one installed into the running interpreter (the project's .venv; ctest's
fixture python_package_install installs the current sources first). The programs come from
$AP_ANALYZE / $AP_SYNTH / $AP_MERGE (set by ctest), else build/examples/; not finding them is a failure.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REAL_FIXTURE = os.path.join(ROOT, "tests", "data", "real_minilm")
REAL_DECODER_FIXTURE = os.path.join(ROOT, "tests", "data", "real_decoder")
CONVERTER = os.path.join(ROOT, "examples", "convert_sniffed_qk.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, HERE)

CSV_FILES = ("head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv",
             "head_component_weights.csv", "head_distance_plasticity.csv", "head_sequence_influence.csv")


def program(name, env):
    path = os.environ.get(env) or os.path.join(ROOT, "build", "examples", name)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{name} not found at {path}: build it or set {env}")
    return path


def ap_analyze():
    return program("ap_analyze", "AP_ANALYZE")


def ap_synth():
    return program("ap_synth", "AP_SYNTH")


def ap_merge():
    return program("ap_merge", "AP_MERGE")


def run(args, **kwargs):
    return subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=900, **kwargs)


def check_run(args, **kwargs):
    proc = run(args, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def result_files(folder):
    """{file name: bytes} of the result CSVs in ``folder`` (every *.csv of the set)."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".csv"):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def read_table(path, name):
    """A result CSV (table `name`, e.g. "head_metrics") read with pandas in the dtypes of the
    package's DataFrames (attention_plasticity.result_schema(): read_csv alone would take a float
    column of whole numbers for int64). pandas 3 parses the floats exactly."""
    import pandas as pd
    import attention_plasticity as ap
    schema = dict(ap.result_schema()[name])
    # A column of names (pca_class) keeps its text, "nan" included; numbers read "nan" as NaN.
    numbers = {column: ["nan"] for column, dtype in schema.items() if dtype != "str"}
    table = pd.read_csv(path, keep_default_na=False, na_values=numbers)
    return table.astype(schema)
