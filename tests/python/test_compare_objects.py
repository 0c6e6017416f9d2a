"""compare_runs on result objects (docs/method.md §8.6): compared in memory, through the C++ of
ap_compare (run/compare_result_sets.hpp, the statistics of comparison.hpp), with no temporary folder; the
same tables (values and dtypes) and the same bytes as ap_compare on the objects' saved folders, in
both designs; a result object whose tables a user filtered compares what it holds.

Needs AP_SYNTH and AP_COMPARE (tests/python/bindings.cmake sets them)."""

import copy
import io
import os
import re
import subprocess
import tempfile

import pandas as pd
import pytest

import attention_plasticity as ap

SYNTH = os.environ.get("AP_SYNTH")
COMPARE = os.environ.get("AP_COMPARE")
FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")
TABLES = ("heads", "changed", "summary", "trajectory")
COMPARED = ("head_metrics.csv", "head_profile.csv", "head_sequence_influence.csv")
SHAPE = ["--num-layers", "2", "--num-q-heads", "4", "--num-k-heads", "2", "--dim", "16", "--tokens", "2048",
         "--examples", "16", "--buckets", "8", "--seed", "3", "--threads", "1"]

pytestmark = pytest.mark.skipif(not (SYNTH and COMPARE), reason="needs AP_SYNTH and AP_COMPARE")


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """Two analyses (in memory, with their per-sequence influences) of dumps sharing their keys,
    B's layer 1 changed, and their saved folders."""
    work = tmp_path_factory.mktemp("compare_objects")
    results, folders = [], []
    for name, extra in (("A", []), ("B", ["--query-seed", "11", "--changed-layers", "1", "--change-factor", "2"])):
        dump = work / ("dump_" + name)
        subprocess.run([SYNTH, "--out", str(dump)] + SHAPE + extra, check=True, capture_output=True)
        result = ap.analyze_dump(dump, sequence_influences="on", threads=1, progress=False, warn=False)
        assert result.write(work / name)
        results.append(result)
        folders.append(str(work / name))
    return work, results, folders


def ap_compare(folders, out, *args):
    """ap_compare's files (bytes) and its stderr."""
    done = subprocess.run([COMPARE, "--output-dir", str(out), "--names", "set1,set2", *args, *folders],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    files = {}
    for name in FILES:
        with open(os.path.join(out, name), "rb") as f:
            files[name] = f.read()
    return files, done.stderr


@pytest.fixture
def no_temporary_folder(monkeypatch):
    """Any temporary file or folder of the tempfile module fails the test."""
    def refused(*args, **kwargs):
        raise AssertionError("compare_runs made a temporary file or folder")

    for name in ("TemporaryDirectory", "mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryFile"):
        monkeypatch.setattr(tempfile, name, refused)


@pytest.mark.parametrize("design", ["unpaired", "paired"])
def test_objects_compare_in_memory_as_ap_compare_compares_their_folders(analyzed, design, tmp_path,
                                                                        no_temporary_folder):
    work, results, folders = analyzed
    expected, err = ap_compare(folders, tmp_path / "cli", "--design", design)
    objects = ap.compare_runs(results, design=design)
    on_disk = ap.compare_runs(folders, names=["set1", "set2"], design=design)
    for table, name in zip(TABLES, FILES):
        got, want = getattr(objects, table), getattr(on_disk, table)
        assert len(got) > 0, table
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert got.dtypes.to_dict() == want.dtypes.to_dict(), table
        # And the values of ap_compare's file, as pandas reads them.
        read = pd.read_csv(io.BytesIO(expected[name]), keep_default_na=False, na_values=["nan"],
                           dtype={"q_bucket": str} if table == "heads" else {"layer": str} if table in
                           ("summary", "trajectory") else None)
        # q_bucket and the model-level layer: integers, empty (NA) where a row has none (Int64).
        for column in {"heads": ["q_bucket"], "summary": ["layer"], "trajectory": ["layer"]}.get(table, []):
            read[column] = pd.array([int(v) if v != "" else pd.NA for v in read[column]], dtype="Int64")
            assert str(got[column].dtype) == "Int64", (table, column)
        assert list(got.columns) == list(read.columns)
        for column in got.columns:
            if got[column].dtype.kind in "fi":
                pd.testing.assert_series_equal(got[column], read[column], check_exact=True, check_dtype=False)
    assert objects.notes == on_disk.notes
    assert all(note in err for note in objects.notes)
    assert (objects.compared_heads, objects.changed_heads) == (on_disk.compared_heads, on_disk.changed_heads)
    assert objects.changed_heads > 0
    # Written: the same bytes as ap_compare's.
    ap.compare_runs(results, output_dir=tmp_path / "py", design=design)
    for name in FILES:
        with open(tmp_path / "py" / name, "rb") as f:
            assert f.read() == expected[name], name
    # One object and one folder: the same.
    mixed = ap.compare_runs([results[0], folders[1]], names=["set1", "set2"], design=design)
    assert mixed.heads.equals(objects.heads)


def _keep_layer(text, layer):
    """A CSV's header and the rows of one layer (the first column)."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[:1] + [line for line in lines[1:] if line.split(",", 1)[0] == str(layer)])


def test_filtered_objects_compare_what_they_hold(analyzed, tmp_path, no_temporary_folder):
    work, results, folders = analyzed
    filtered = []
    for result in results:
        held = copy.copy(result)
        held.tables = {name: frame[frame["layer"] == 1] for name, frame in result.tables.items()}
        filtered.append(held)
    compared = ap.compare_runs(filtered, design="paired")
    assert set(compared.heads["layer"]) == {1}
    assert compared.compared_heads == 4
    # As ap_compare compares the same rows written by hand.
    cut = []
    for folder in folders:
        target = tmp_path / ("layer1_" + os.path.basename(folder))
        target.mkdir()
        for name in COMPARED:
            with open(os.path.join(folder, name)) as f:
                (target / name).write_text(_keep_layer(f.read(), 1))
        cut.append(str(target))
    expected, _ = ap_compare(cut, tmp_path / "cli", "--design", "paired")
    ap.compare_runs(filtered, output_dir=tmp_path / "py", design="paired")
    for name in FILES:
        with open(tmp_path / "py" / name, "rb") as f:
            assert f.read() == expected[name], name


def test_objects_are_refused_as_folders_are(analyzed):
    work, results, folders = analyzed
    without = copy.copy(results[1])
    without.tables = {k: v for k, v in results[1].tables.items() if k != "head_sequence_influence"}
    with pytest.raises(ap.UsageError, match="result set 'set2' has no per-sequence influences .*"
                                            "--sequence-influences on"):
        ap.compare_runs([results[0], without], design="paired")
    broken = copy.copy(results[1])
    metrics = results[1].tables["head_metrics"].copy()
    metrics.loc[metrics.index[0], "ap_overall"] = 7.5
    broken.tables = dict(results[1].tables, head_metrics=metrics)
    with pytest.raises(ap.UsageError, match=r"set2: head_metrics: row 0: column ap_overall: 7.5 is not a plasticity"):
        ap.compare_runs([results[0], broken])
    empty = copy.copy(results[1])
    empty.tables = {k: v.iloc[:0] for k, v in results[1].tables.items()}
    with pytest.raises(ValueError, match=r"compare_runs: sets\[1\] has no analyzed head to compare"):
        ap.compare_runs([results[0], empty])


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """Analyses (in memory) of the same documents (examples.csv: 2 examples each) with other token
    draws (--query-seed), and of other documents (--seed 4), with their saved folders."""
    work = tmp_path_factory.mktemp("compare_documents")
    shape = list(SHAPE)
    for flag in ("--seed", "--examples"):  # given below
        at = shape.index(flag)
        del shape[at:at + 2]
    results, folders = {}, {}
    for name, extra in (("A", ["--seed", "3"]), ("A2", ["--seed", "3", "--query-seed", "9"]), ("B", ["--seed", "4"])):
        dump = work / ("dump_" + name)
        subprocess.run([SYNTH, "--out", str(dump), *shape, *extra, "--examples", "32", "--examples-per-document", "2"],
                       check=True, capture_output=True)
        result = ap.analyze_dump(dump, sequence_influences="on", threads=1, progress=False, warn=False)
        assert result.write(work / name)
        results[name], folders[name] = result, str(work / name)
    return results, folders


def test_objects_carry_their_documents_to_the_design(documents, no_temporary_folder):
    """design auto (docs/method.md §8.6) on result objects: their examples.csv goes with their tables."""
    results, folders = documents
    assert results["A"].examples_csv is not None and results["A"].examples_csv == results["A2"].examples_csv
    same = ap.compare_runs([results["A"], results["A2"]])
    assert set(same.heads["design"]) == {"paired (auto: same documents)"}
    on_disk = ap.compare_runs([folders["A"], folders["A2"]], names=["set1", "set2"])
    pd.testing.assert_frame_equal(same.heads, on_disk.heads, check_exact=True)
    read_back = ap.compare_runs([ap.read_results(folders["A"]), ap.read_results(folders["A2"])])
    pd.testing.assert_frame_equal(same.heads, read_back.heads, check_exact=True)
    other = ap.compare_runs([results["A"], results["B"]])
    assert set(other.heads["design"]) == {"unpaired (auto: other documents)"}
    with pytest.raises(ap.UsageError, match="do not hold the same documents.*document_id 0 "):
        ap.compare_runs([results["A"], results["B"]], design="paired")
    bare = copy.copy(results["A2"])
    bare.examples_csv = None
    assert set(ap.compare_runs([results["A"], bare]).heads["design"]) == {"unpaired (auto: no fingerprints)"}
    unchecked = ap.compare_runs([results["A"], bare], design="paired")
    assert any("pairing could not be checked from the texts" in note for note in unchecked.notes)


def test_filtered_influences_are_refused_not_read_from_the_folder(documents):
    """A result object whose influence table the user cut compares what it holds: refused (the
    table no longer gives the heads' errors), though the folder behind it is whole."""
    results, folders = documents
    cut = copy.copy(results["A2"])
    frame = results["A2"].tables["head_sequence_influence"]
    cut.tables = dict(results["A2"].tables, head_sequence_influence=frame[frame["document_id"] != 3])
    # Every head loses a document: the rows left no longer give the heads' errors.
    with pytest.raises(ap.UsageError, match=r"set2: head_sequence_influence: head layer 0 q_head 0, ap_overall: "
                                            r"the influences do not give the head's standard error"):
        ap.compare_runs([results["A"], cut])
    # One row cut: a missing (head, document, quantity) row.
    one = copy.copy(results["A2"])
    one.tables = dict(results["A2"].tables, head_sequence_influence=frame.drop(index=frame.index[1]))
    with pytest.raises(ap.UsageError, match=r"set2: head_sequence_influence: head layer 0 q_head 0, ap_overall: "
                                            r"document_id \d+ has no row"):
        ap.compare_runs([results["A"], one])
    scaled = copy.copy(results["A2"])
    frame = frame.copy()
    frame["influence"] = frame["influence"] * 1.01
    scaled.tables = dict(results["A2"].tables, head_sequence_influence=frame)
    with pytest.raises(ap.UsageError, match=r"set2: head_sequence_influence: head layer 0 q_head 0, .*"
                                            r"do not give the head's standard error"):
        ap.compare_runs([results["A"], scaled])
    # The folders behind them compare (paired by fingerprint).
    assert set(ap.compare_runs([folders["A"], folders["A2"]]).heads["design"]) == {"paired (auto: same documents)"}


def test_read_results_reads_the_influence_table_bounded(documents, tmp_path):
    """read_results reads the influence table line by line, bounded by the set's heads and
    documents (docs/method.md §8.6; issue 33 item 3): a valid table value for value and byte for
    byte; rows beyond a head's documents (extra ids, the table twice), a bucket the head does not
    have, a sparse file: refused by their content at the first such row (the line named), before
    memory grows with the file."""
    results, folders = documents
    back = ap.read_results(folders["A"])
    for name in results["A"].tables:
        pd.testing.assert_frame_equal(back.tables[name], results["A"].tables[name], check_exact=True)
        assert back.csv_text(name) == results["A"].csv_text(name), name
    text = back.csv_text("head_sequence_influence")
    header, rows = text.split("\n", 1)
    rows = rows.splitlines()
    documents_of_head = int(back.head_metrics["n_documents"].iloc[0])
    assert documents_of_head == 16

    def tampered(name, body):
        folder = tmp_path / name
        folder.mkdir()
        for file in os.listdir(folders["A"]):
            if file.endswith(".csv") and file != "head_sequence_influence.csv":
                with open(os.path.join(folders["A"], file), "rb") as f:
                    (folder / file).write_bytes(f.read())
        body(folder / "head_sequence_influence.csv")
        with pytest.raises(ValueError) as refused:
            ap.read_results(folder)
        return str(refused.value)

    first = rows[0].split(",")
    extra = "".join(",".join(first[:3] + [str(10 ** 6 + k)] + first[4:]) + "\n" for k in range(200000))
    for name, body in (("oversized", header + "\n" + "\n".join(rows) + "\n" + extra),
                       ("repeated", header + "\n" + ("\n".join(rows) + "\n") * 2)):
        message = tampered(name, lambda path, body=body: path.write_text(body))
        assert "more rows than the head's 16 documents (n_documents in head_metrics.csv)" in message, message
        line = int(re.search(r": line (\d+): head layer 0 q_head 0", message).group(1))
        assert line <= len(rows) + 2, message  # the first row beyond, not the end of the file
    bucket = next(r for r in rows if ",ap_bucket," in r).split(",")
    bucket[5] = "77"
    message = tampered("other_bucket", lambda path: path.write_text(
        header + "\n" + ",".join(bucket) + "\n" + "\n".join(rows) + "\n"))
    assert "line 2: column q_bucket: head layer" in message and "has no bucket 77 in head_profile.csv" in message

    def sparse(path):
        with open(path, "wb") as f:
            f.truncate(1 << 28)
    assert "a line longer than 65536 bytes" in tampered("sparse", sparse)
