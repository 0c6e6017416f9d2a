"""Sharded runs from Python (docs/method.md §8.4) against ap_analyze --shard and ap_merge:
``analyze_dump(path, shard="I/N", output_dir=...)`` and ``python -m attention_plasticity --shard
I/N`` analyze the heads of ap_analyze's shard I and write the same files, byte for byte (the
CSVs, and shard.json up to its "seconds"); their shards merged by ap_merge, alone or mixed with
ap_analyze's, give the CSVs of the unsharded ap_analyze run; a qk-sniffer Parquet dump is split
like the NPY dump it holds (its heads weighed by the rows of the Parquet footers); a failed
head, a shard without heads and a bad shard are handled as ap_analyze handles them.

Run: AP_ANALYZE=build/examples/ap_analyze AP_SYNTH=build/examples/ap_synth \
     AP_MERGE=build/examples/ap_merge .venv/bin/python -m pytest -q tests/python/test_bindings_shards.py
"""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest

import bindings_util as bu
import attention_plasticity as ap
from sniffed_fixtures import sniffed_table, write_table

LAYERS, Q, K = 3, 4, 2
CUT = {(0, 1): 300, (1, 2): 700, (2, 0): 500, (2, 3): 200}  # query rows kept: heads of different weights
CAP = 900
OPTIONS = {"num_q_heads": Q, "num_k_heads": K, "seed": 11, "normality_max_dims": 4, "max_tokens_per_head": CAP}
FLAGS = ["--num-q-heads", Q, "--num-k-heads", K, "--seed", 11, "--normality-max-dims", 4,
         "--max-tokens-per-head", CAP]
SECONDS = re.compile(r'^  "seconds": [0-9.]+,$', re.M)


def folder(root, layer, head, kind):
    return os.path.join(root, "l%02dh%02d%s" % (layer, head, kind))


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """A synthetic NPY dump (3 layers x 4 query heads on 2 key heads, query folders cut to
    different lengths), the same dump as Parquet, and the unsharded ap_analyze run's CSVs."""
    root = tmp_path_factory.mktemp("shards")
    npy, parquet = str(root / "npy"), str(root / "parquet")
    bu.check_run([bu.ap_synth(), "--out", npy, "--num-layers", LAYERS, "--num-q-heads", Q, "--num-k-heads", K,
                  "--dim", 8, "--tokens", 1024, "--examples", 4, "--buckets", 8, "--seed", 21])
    for (layer, head), n in CUT.items():
        for stem in ("vector", "position", "bucket", "example_id"):
            path = os.path.join(folder(npy, layer, head, "q"), stem + ".npy")
            np.save(path, np.load(path)[:n])
    for name in sorted(os.listdir(npy)):
        if name.startswith("l"):
            arrays = {stem: np.load(os.path.join(npy, name, stem + ".npy"))
                      for stem in ("vector", "position", "bucket", "example_id")}
            write_table(os.path.join(parquet, name), sniffed_table(**arrays), row_group_size=300)
    whole = root / "whole"
    bu.check_run([bu.ap_analyze(), "--data-root", npy, "--output-dir", whole] + FLAGS)
    return {"npy": npy, "parquet": parquet, "csv": bu.result_files(whole), "root": root}


def ap_analyze_shard(dump, out, spec, extra=(), expect=0):
    proc = bu.run([bu.ap_analyze(), "--data-root", dump, "--output-dir", out, "--shard", spec] + FLAGS + list(extra))
    assert expect is None or proc.returncode == expect, proc.stderr
    return proc


def python_shard(dump, out, spec, front_end, threads=2, expect=0):
    """Shard `spec` of the dump written into `out` by analyze_dump or by python -m."""
    if front_end == "function":
        result = ap.analyze_dump(dump, out, shard=spec, threads=threads, progress=False, warn=False, **OPTIONS)
        assert result.output_dir == str(out) and result.shard == spec
        return result
    proc = bu.run([sys.executable, "-m", "attention_plasticity", "--data-root", dump, "--output-dir", out,
                   "--shard", spec, "--threads", threads] + FLAGS)
    assert proc.returncode == expect, proc.stderr
    return proc


def merge(folders, out, expect=0):
    proc = bu.run([bu.ap_merge(), "--output-dir", out] + [str(f) for f in folders])
    assert proc.returncode == expect, proc.stderr
    return proc


def manifest_text(out):
    with open(os.path.join(out, "shard.json")) as f:
        return f.read()


def set_files(out):
    return sorted(name for name in os.listdir(out) if not name.startswith("."))


def same_shard(mine, theirs):
    """The files of two shard folders are the same: the CSVs byte for byte, shard.json but for
    the run's wall time ("seconds", the one field that differs between two runs of a shard)."""
    assert set_files(mine) == set_files(theirs) == sorted(bu.CSV_FILES + ("shard.json",))
    assert bu.result_files(mine) == bu.result_files(theirs)
    a, b = manifest_text(mine), manifest_text(theirs)
    assert len(SECONDS.findall(a)) == 1 and SECONDS.sub("", a) == SECONDS.sub("", b)
    fields = {k: v for k, v in json.loads(a).items() if k != "seconds"}
    assert fields == {k: v for k, v in json.loads(b).items() if k != "seconds"}
    return json.loads(a)


@pytest.mark.parametrize("front_end", ["function", "command line"])
def test_python_shards_are_ap_analyzes_and_merge_to_the_unsharded_run(dumps, tmp_path, front_end):
    n = 3
    heads = []
    for i in range(n):
        spec = "%d/%d" % (i, n)
        ap_analyze_shard(dumps["npy"], tmp_path / ("cpp%d" % i), spec)
        python_shard(dumps["npy"], tmp_path / ("py%d" % i), spec, front_end, threads=i + 1)
        m = same_shard(tmp_path / ("py%d" % i), tmp_path / ("cpp%d" % i))
        assert (m["shard"], m["num_shards"], m["program"]) == (i, n, "ap_analyze 0.1.0")
        heads += [(h["layer"], h["q_head"]) for h in m["heads"]]
    assert sorted(heads) == [(layer, h) for layer in range(LAYERS) for h in range(Q)]
    merge([tmp_path / ("py%d" % i) for i in range(n)], tmp_path / "merged")
    assert bu.result_files(tmp_path / "merged") == dumps["csv"]
    # shards of either front end merge together
    merge([tmp_path / "cpp0", tmp_path / "py1", tmp_path / "cpp2"], tmp_path / "mixed")
    assert bu.result_files(tmp_path / "mixed") == dumps["csv"]


@pytest.mark.parametrize("n", [1, 2, 5, 13])
def test_analyze_dump_shards_of_any_count(dumps, tmp_path, n):
    folders = []
    for i in range(n):
        out = tmp_path / ("py%d" % i)
        result = python_shard(dumps["npy"], out, "%d/%d" % (i, n), "function", threads=i % 3 + 1)
        ap_analyze_shard(dumps["npy"], tmp_path / ("cpp%d" % i), "%d/%d" % (i, n))
        m = same_shard(out, tmp_path / ("cpp%d" % i))
        # the result holds the shard's heads and tables only
        assert result.heads == [(h["layer"], h["q_head"], h["k_head"]) for h in m["heads"]]
        assert [tuple(r) for r in result.head_metrics[["layer", "q_head"]].itertuples(index=False)] \
            == [(h["layer"], h["q_head"]) for h in m["heads"]]
        assert result.summary == "12 of the 12 query heads of the layout present%s: %d analyzed, 0 failed" % (
            "; shard %d/%d: %d head%s" % (i, n, len(m["heads"]), "" if len(m["heads"]) == 1 else "s"),
            len(m["heads"]))
        folders.append(out)
    if n == 13:  # more shards than heads: shard 12 has none and still writes its set
        assert json.loads(manifest_text(folders[12]))["heads"] == []
        assert all(text.count(b"\n") == 1 for text in bu.result_files(folders[12]).values())
    merge(folders[::-1], tmp_path / "merged")
    assert bu.result_files(tmp_path / "merged") == dumps["csv"]


def test_parquet_dump_is_split_like_the_npy_dump(dumps, tmp_path):
    import pyarrow.parquet as pq
    n = 3
    for i in range(n):
        python_shard(dumps["parquet"], tmp_path / ("pq%d" % i), "%d/%d" % (i, n), "function")
        python_shard(dumps["npy"], tmp_path / ("npy%d" % i), "%d/%d" % (i, n), "function")
        pq_manifest = json.loads(manifest_text(tmp_path / ("pq%d" % i)))
        npy_manifest = json.loads(manifest_text(tmp_path / ("npy%d" % i)))
        # the weights are the footers' row counts, capped: the NPY headers' numbers
        for h in pq_manifest["heads"]:
            rows = [pq.read_metadata(os.path.join(folder(dumps["parquet"], h["layer"], head, kind),
                                                  "data.parquet")).num_rows
                    for head, kind in ((h["q_head"], "q"), (h["k_head"], "k"))]
            assert h["tokens"] == sum(min(r, CAP) for r in rows) > 0
        assert pq_manifest["heads"] == npy_manifest["heads"]
        assert pq_manifest["dump_fingerprint"] != npy_manifest["dump_fingerprint"]
        assert bu.result_files(tmp_path / ("pq%d" % i)) == bu.result_files(tmp_path / ("npy%d" % i))
    merge([tmp_path / ("pq%d" % i) for i in range(n)], tmp_path / "merged")
    assert bu.result_files(tmp_path / "merged") == dumps["csv"]
    # a Parquet shard does not merge with the NPY dump's: another dump
    proc = merge([tmp_path / "pq0", tmp_path / "npy1", tmp_path / "pq2"], tmp_path / "refused", expect=2)
    assert "analyzed another dump" in proc.stderr


def test_a_failed_head_in_a_shard(dumps, tmp_path):
    broken = str(tmp_path / "broken")
    shutil.copytree(dumps["npy"], broken)
    bad = os.path.join(folder(broken, 1, 2, "q"), "vector.npy")
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) - 8)
    # N = 12: the broken head is alone in its shard, which writes its set all the same
    n = 12
    shard_of = {}
    for i in range(n):
        ap_analyze_shard(broken, tmp_path / ("cpp%d" % i), "%d/%d" % (i, n), expect=None)
        heads = [(h["layer"], h["q_head"]) for h in json.loads(manifest_text(tmp_path / ("cpp%d" % i)))["heads"]]
        shard_of.update({h: i for h in heads})
    i = shard_of[(1, 2)]
    spec = "%d/%d" % (i, n)
    proc = python_shard(broken, tmp_path / "cli", spec, "command line", expect=1)
    assert "error: layer 1 q_head 2: " + bad + ": truncated" in proc.stderr
    m = same_shard(tmp_path / "cli", tmp_path / ("cpp%d" % i))
    assert [h["analyzed"] for h in m["heads"]] == [False] and m["heads"][0]["error"].startswith(bad + ": truncated")
    with pytest.warns(ap.HeadFailedWarning, match="error: layer 1 q_head 2: "):
        result = ap.analyze_dump(broken, tmp_path / "function", shard=spec, progress=False, **OPTIONS)
    assert result.output_dir == str(tmp_path / "function") and result.analyzed == 0 and result.failed == 1
    same_shard(tmp_path / "function", tmp_path / ("cpp%d" % i))
    proc = merge([tmp_path / ("cpp%d" % j) if j != i else tmp_path / "function" for j in range(n)],
                 tmp_path / "merged", expect=1)
    assert "11 analyzed, 1 failed" in proc.stderr
    whole = tmp_path / "whole"
    assert bu.run([bu.ap_analyze(), "--data-root", broken, "--output-dir", whole] + FLAGS).returncode == 1
    assert bu.result_files(tmp_path / "merged") == bu.result_files(whole)


def test_bad_shards_are_ap_analyzes_usage_errors(dumps, tmp_path):
    for value in ("3/3", "1", "0/0", "-1/3"):
        proc = bu.run([bu.ap_analyze(), "--data-root", dumps["npy"], "--output-dir", tmp_path / "x", "--shard", value])
        assert proc.returncode == 2
        with pytest.raises(ap.UsageError) as info:
            ap.analyze_dump(dumps["npy"], tmp_path / "y", shard=value, progress=False, **OPTIONS)
        # The same message, naming the option as each front end does; the example after "e.g."
        # is shown as each takes it (a flag with a Slurm array, or a keyword's value).
        spoken = str(info.value).replace("analyze_dump: shard", "--shard", 1)
        assert spoken.split("; e.g. ")[0] in proc.stderr
        assert ("; e.g. '3/8')" in spoken) == ("; e.g. --shard 3/8," in proc.stderr)
    with pytest.raises(ap.UsageError, match="expected a single value"):
        ap.analyze_dump(dumps["npy"], shard=(1, 3), **OPTIONS)
    assert not os.path.exists(tmp_path / "y") or set_files(tmp_path / "y") == []


def test_a_shard_without_output_dir_and_written_later(dumps, tmp_path):
    result = ap.analyze_dump(dumps["npy"], shard="2/3", progress=False, **OPTIONS)
    assert result.output_dir is None and result.write(tmp_path / "later")
    ap_analyze_shard(dumps["npy"], tmp_path / "cpp", "2/3")
    same_shard(tmp_path / "later", tmp_path / "cpp")


def test_shards_with_the_extensions_merge_across_front_ends(dumps, tmp_path):
    """The extensions of docs/method.md §8 in shards: a Python shard and an ap_analyze shard with
    the same extension options merge to the unsharded ap_analyze run with them; a shard whose
    extension options differ is refused by the merge (its manifest names them)."""
    flags = ["--empirical-ap", "on", "--distance-bins-per-octave", 2, "--confidence-level", 0.9]
    bu.check_run([bu.ap_analyze(), "--data-root", dumps["npy"], "--output-dir", tmp_path / "whole"] + FLAGS + flags)
    ap_analyze_shard(dumps["npy"], tmp_path / "cpp0", "0/2", flags)
    ap.analyze_dump(dumps["npy"], tmp_path / "py1", shard="1/2", progress=False, empirical_ap=True,
                    distance_bins_per_octave=2, confidence_level=0.9, **OPTIONS)
    merge([tmp_path / "cpp0", tmp_path / "py1"], tmp_path / "merged")
    assert bu.result_files(tmp_path / "merged") == bu.result_files(tmp_path / "whole")
    assert json.loads(manifest_text(tmp_path / "py1"))["options"]["empirical_ap"] == "on"
    ap.analyze_dump(dumps["npy"], tmp_path / "py1_default", shard="1/2", progress=False, **OPTIONS)
    proc = merge([tmp_path / "cpp0", tmp_path / "py1_default"], tmp_path / "refused", expect=2)
    assert "was run with other options than" in proc.stderr and "distance_bins_per_octave" in proc.stderr
