"""No output folder lies inside a result folder's state folder (issue 33, item 2): ap_analyze,
ap_merge, ap_compare, analyze_dump, DumpResult.write, ResultSet.write, compare_runs and
examples/capture_qk.py refuse OUT/.ap_results, OUT/.ap_results/current (a link to a set), a set
folder and anything below them, naming the result folder that owns it, before any work, and the
result folder stays usable (include/attention_plasticity/run/output_folder.hpp,
refuse_result_state_folder: the one rule). A folder holding result folders is fine. And
capture_qk.py --force over a head folder that is a symbolic link removes the link, never what
it names (issue 33, Why 10).

Run: AP_ANALYZE=build/examples/ap_analyze AP_SYNTH=build/examples/ap_synth AP_MERGE=... \
     AP_COMPARE=... .venv/bin/python -m pytest -q tests/python/test_output_folders.py
"""

import os
import sys

import pytest

import bindings_util as bu
import attention_plasticity as ap

sys.path.insert(0, os.path.join(bu.ROOT, "examples"))
import capture_qk as cap  # noqa: E402

FLAGS = ["--num-pairs-per-bucket", "16", "--min-bucket-queries", "16", "--threads", "1"]
OPTIONS = {"num_pairs_per_bucket": 16, "min_bucket_queries": 16}


def ap_compare():
    return bu.program("ap_compare", "AP_COMPARE")


def tree(folder):
    """Every path below `folder` (links not followed) with its kind and, for a link, its target."""
    out = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(top, name)
            out[os.path.relpath(path, folder)] = os.readlink(path) if os.path.islink(path) else os.path.isdir(path)
    return out


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A small synthetic dump, two analyses of it (X, Y), its two shards, and a comparison (C)."""
    root = tmp_path_factory.mktemp("nesting")
    dump = str(root / "dump")
    bu.check_run([bu.ap_synth(), "--out", dump, "--num-layers", 1, "--num-q-heads", 2, "--num-k-heads", 1,
                  "--dim", 8, "--tokens", 512, "--examples", 16, "--buckets", 4, "--seed", 5])
    x, y, c = str(root / "X"), str(root / "Y"), str(root / "C")
    bu.check_run([bu.ap_analyze(), "--data-root", dump, "--output-dir", x] + FLAGS)
    bu.check_run([bu.ap_analyze(), "--data-root", dump, "--output-dir", y, "--seed", "7"] + FLAGS)
    shards = [str(root / f"shard-{i}") for i in range(2)]
    for i, shard in enumerate(shards):
        bu.check_run([bu.ap_analyze(), "--data-root", dump, "--output-dir", shard, "--shard", f"{i}/2"] + FLAGS)
    bu.check_run([ap_compare(), "--output-dir", c, x, y])
    return {"root": root, "dump": dump, "X": x, "Y": y, "C": c, "shards": shards}


def state_targets(owner):
    """The folders of `owner`'s state: itself, its current set (through the link and by its
    name), a folder below the set, a new folder below the state folder."""
    state = os.path.join(owner, ".ap_results")
    set_name = os.readlink(os.path.join(state, "current"))
    return [state, os.path.join(state, "current"), os.path.join(state, set_name),
            os.path.join(state, "current", "deeper"), os.path.join(state, "new")]


def check_refused(message, owner, target, before):
    assert "is inside the state folder of the result folder" in message, message
    assert f"'{os.path.realpath(owner)}'" in message, message
    assert "Traceback" not in message
    assert tree(owner) == before, f"{target}: the result folder changed"


def check_owner_usable(sets, owner):
    """A later run into the owner is not refused (it was, after the defect)."""
    if owner == sets["C"]:
        bu.check_run([ap_compare(), "--output-dir", owner, sets["X"], sets["Y"]])
    else:
        bu.check_run([bu.ap_analyze(), "--data-root", sets["dump"], "--output-dir", owner] + FLAGS)


@pytest.mark.parametrize("owner_key", ["X", "C"])
def test_programs_refuse_a_state_folder(sets, owner_key):
    owner = sets[owner_key]
    for target in state_targets(owner):
        before = tree(owner)
        runs = {
            "ap_analyze": [bu.ap_analyze(), "--data-root", sets["dump"], "--output-dir", target] + FLAGS,
            "ap_merge": [bu.ap_merge(), "--output-dir", target] + sets["shards"],
            "ap_compare": [ap_compare(), "--output-dir", target, sets["X"], sets["Y"]],
        }
        for program, args in runs.items():
            proc = bu.run(args)
            assert proc.returncode != 0, f"{program} wrote into {target}"
            check_refused(proc.stderr, owner, f"{program} {target}", before)
        check_owner_usable(sets, owner)


@pytest.mark.parametrize("owner_key", ["X", "C"])
def test_python_writers_refuse_a_state_folder(sets, owner_key):
    owner = sets[owner_key]
    result = ap.analyze_dump(sets["dump"], progress=False, warn=False, **OPTIONS)
    read_back = ap.read_results(sets["X"])
    for target in state_targets(owner):
        before = tree(owner)
        writers = {
            "analyze_dump": lambda t=target: ap.analyze_dump(sets["dump"], t, progress=False, warn=False, **OPTIONS),
            "DumpResult.write": lambda t=target: result.write(t),
            "ResultSet.write": lambda t=target: read_back.write(t),
            "compare_runs": lambda t=target: ap.compare_runs([sets["X"], sets["Y"]], output_dir=t),
        }
        for name, write in writers.items():
            with pytest.raises(Exception) as info:
                write()
            check_refused(str(info.value), owner, f"{name} {target}", before)
        check_owner_usable(sets, owner)


def test_capture_refuses_a_state_folder(sets):
    owner = sets["X"]
    for target in state_targets(owner):
        before = tree(owner)
        with pytest.raises(cap.UsageError) as info:
            cap.prepare_output(target, force=True)
        assert str(info.value).startswith(f"--out '{target}'"), str(info.value)
        check_refused(str(info.value), owner, target, before)


def test_a_folder_holding_result_folders_is_fine(sets):
    """The other direction is allowed: the shards below OUT merged into OUT (examples/slurm), an
    analysis into a folder beside a set's files."""
    out = sets["root"] / "merged"
    os.makedirs(out / "shard-0")
    bu.check_run([bu.ap_merge(), "--output-dir", out] + sets["shards"])
    bu.check_run([bu.ap_analyze(), "--data-root", sets["dump"], "--output-dir", os.path.join(sets["X"], "sub")]
                 + FLAGS)


def test_capture_force_over_a_linked_head_folder(tmp_path):
    """--force replaces a head folder that is a symbolic link: the link goes, what it names stays
    (it is outside --out), no traceback."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    os.makedirs(out)
    os.makedirs(elsewhere / "keep")
    (elsewhere / "data.parquet").write_bytes(b"not ours")
    os.symlink(elsewhere, out / "l00h00q")
    os.symlink(tmp_path / "missing", out / "l00h00k")  # a dangling one too
    with pytest.raises(cap.UsageError):
        cap.prepare_output(str(out), force=False)
    cap.prepare_output(str(out), force=True)
    assert sorted(os.listdir(out)) == []
    assert (elsewhere / "data.parquet").read_bytes() == b"not ours"
    assert (elsewhere / "keep").is_dir()
