"""examples.csv through the Python binding of the run (docs/method.md §1.1, §8.3):
DumpRun.from_memory(..., examples_csv=, capture_json=) analyzes folders held in memory with the
documents of the text it is given, and writes the bytes ap_analyze writes on the same dump on
disk (examples.csv in the set, run.json "units" and "capture"); a bad examples_csv is refused
naming it, the line and the value; an example without a row fails its heads naming examples_csv
and the id; without examples_csv each example is its own document, said once (units_note).

Needs AP_ANALYZE and AP_SYNTH (the C++ programs of this build)."""

import json
import os
import subprocess

import numpy as np
import pytest

from attention_plasticity._core.dump import DumpRun
import attention_plasticity as ap

AP_ANALYZE = os.environ.get("AP_ANALYZE")
AP_SYNTH = os.environ.get("AP_SYNTH")
pytestmark = pytest.mark.skipif(not (AP_ANALYZE and AP_SYNTH), reason="AP_ANALYZE and AP_SYNTH not given")

TABLES = ["head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv",
          "head_distance_plasticity.csv", "head_sequence_influence.csv"]


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("documents")
    data = root / "dump"
    subprocess.run([AP_SYNTH, "--out", data, "--num-layers", "1", "--num-q-heads", "2", "--num-k-heads", "1",
                    "--dim", "8", "--examples", "48", "--tokens", "9600", "--examples-per-document", "4",
                    "--threads", "1"], check=True, capture_output=True)
    out = root / "disk"
    subprocess.run([AP_ANALYZE, "--data-root", data, "--output-dir", out, "--sequence-influences", "on",
                    "--threads", "1"], check=True, capture_output=True)
    return root, data, out


def reader_of(data):
    def read(folder):
        path = data / os.path.basename(folder)
        return {name: np.load(path / (name + ".npy")) for name in ("vector", "position", "bucket", "example_id")}
    return read


def memory_run(data, **kw):
    return DumpRun.from_memory("mem", [(0, 0), (0, 1)], [(0, 0)], (1, 2, 1),
                               {"sequence_influences": "on", "threads": 1}, None, "profile_model", **kw)


def test_from_memory_with_examples_csv_writes_ap_analyzes_bytes(dump):
    root, data, disk = dump
    text = (data / "examples.csv").read_text()
    run = memory_run(data, examples_csv=text, capture_json='{"rule": "spread", "example_seed": 3}')
    assert run.units == "documents" and run.units_note is None
    run.run(reader_of(data))
    assert run.analyzed == 2 and run.failed == 0
    out = root / "memory"
    assert run.write_to(str(out))
    for name in TABLES + ["examples.csv"]:
        assert (out / name).read_bytes() == (disk / name).read_bytes(), name
    assert (out / "examples.csv").read_text() == text
    meta = json.loads((out / ".ap_results" / "current" / "run.json").read_text())
    assert meta["units"] == "documents"
    assert meta["capture"] == {"rule": "spread", "example_seed": 3}
    assert "examples.csv" in meta["files"]
    disk_meta = json.loads((disk / ".ap_results" / "current" / "run.json").read_text())
    assert disk_meta["units"] == "documents" and "capture" not in disk_meta
    header = (out / "head_metrics.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "n_documents" and "n_sequences" in header
    row = (out / "head_metrics.csv").read_text().splitlines()[1].split(",")
    assert row[-1] == "12" and row[header.index("n_sequences")] == "48"


def test_without_examples_csv_each_example_is_its_own_document(dump):
    root, data, _disk = dump
    run = memory_run(data)
    assert run.units == "examples"
    assert run.units_note == "no examples.csv: each example is taken as its own document (docs/method.md §8.3)"
    run.run(reader_of(data))
    out = root / "memory_examples"
    assert run.write_to(str(out))
    assert not (out / "examples.csv").exists()
    meta = json.loads((out / ".ap_results" / "current" / "run.json").read_text())
    assert meta["units"] == "examples"
    lines = (out / "head_metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert lines[1].split(",")[-1] == "48" == lines[1].split(",")[header.index("n_sequences")]


@pytest.mark.parametrize("text, words", [
    ("example_id,document,chunk,fingerprint,document_fingerprint\n", ["line 1", "header"]),
    ("example_id,document_id,chunk,fingerprint,document_fingerprint\n5,0,0,,\n5,1,0,,\n",
     ["line 3", "example_id 5 has two rows"]),
    ("example_id,document_id,chunk,fingerprint,document_fingerprint\n5,0,0,ABCDEF0123456789,\n",
     ["line 2", "'ABCDEF0123456789'"]),
    ("example_id,document_id,chunk,fingerprint,document_fingerprint\n5,0,-1,,\n", ["line 2", "chunk -1"]),
    ("example_id,document_id,chunk,fingerprint,document_fingerprint\n5.0,0,0,,\n", ["line 2", "'5.0'"]),
])
def test_bad_examples_csv_is_refused_naming_it(dump, text, words):
    _root, data, _disk = dump
    with pytest.raises(ap.InvalidArgumentError) as e:
        memory_run(data, examples_csv=text)
    message = str(e.value)
    assert message.startswith("profile_model: examples_csv: ")
    for w in words:
        assert w in message


def test_bad_capture_json_is_refused(dump):
    _root, data, _disk = dump
    with pytest.raises(ap.InvalidArgumentError, match="capture_json"):
        memory_run(data, capture_json="[1, 2]")


def test_an_example_without_a_row_fails_its_heads_naming_examples_csv_and_the_id(dump):
    _root, data, _disk = dump
    lines = (data / "examples.csv").read_text().splitlines(keepends=True)
    text = "".join(line for line in lines if not line.startswith("22,"))
    run = memory_run(data, examples_csv=text)
    run.run(reader_of(data))
    assert run.analyzed == 0 and run.failed == 2
    for failure in run.failures():
        assert failure[4] == "examples_csv"
        assert "example id 22" in failure[5]
