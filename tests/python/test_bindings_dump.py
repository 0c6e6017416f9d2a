"""analyze_dump and `python -m attention_plasticity` against ap_analyze: the same CSV bytes on an
NPY dump from ap_synth, on the same dump as qk-sniffer Parquet (written here in the exact schema,
and through examples/convert_sniffed_qk.py), and on the real-model fixtures (the MiniLM encoder
and the decoder trained here); the same head selection, layout rules, messages and exit
statuses; failed heads collected and warned while the others' rows stay byte-identical; any
number of threads gives the same bytes.

Run: AP_ANALYZE=build/examples/ap_analyze AP_SYNTH=build/examples/ap_synth \
     .venv/bin/python -m pytest -q tests/python/test_bindings_dump.py
"""

import os
import shutil
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import bindings_util as bu
import attention_plasticity as ap
from sniffed_fixtures import sniffed_table, write_table

LAYOUT = ["--num-q-heads", 4, "--num-k-heads", 2]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """A synthetic NPY dump (2 layers x 4 query heads on 2 key heads, a sliding window on layer
    1, int32 columns), the same dump as Parquet, and ap_analyze's CSVs on it."""
    root = tmp_path_factory.mktemp("dumps")
    npy, parquet = root / "npy", root / "parquet"
    bu.check_run([bu.ap_synth(), "--out", npy, "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2,
                  "--dim", 16, "--tokens", 1536, "--examples", 12, "--buckets", 8, "--sliding-window-layers", 1,
                  "--int-dtype", "int32", "--seed", 3])
    for name in sorted(os.listdir(npy)):
        if not name.startswith("l"):
            continue
        arrays = {stem: np.load(npy / name / (stem + ".npy"))
                  for stem in ("vector", "position", "bucket", "example_id")}
        window_file = npy / name / "sliding_window.npy"
        window = np.load(window_file) if window_file.exists() else None
        write_table(parquet / name, sniffed_table(**arrays, sliding_window=window), row_group_size=200)
    out = root / "ap_analyze"
    bu.check_run([bu.ap_analyze(), "--data-root", npy, "--output-dir", out, "--threads", 2] + LAYOUT)
    return {"npy": npy, "parquet": parquet, "csv": bu.result_files(out), "root": root}


def assert_same_csvs(result, output_dir, want):
    assert bu.result_files(output_dir) == want
    for name, frame in result.tables.items():
        assert result.csv_text(name).encode() == want[name + ".csv"]
        pd.testing.assert_frame_equal(frame, bu.read_table(output_dir / (name + ".csv"), name), check_exact=True)


@pytest.mark.parametrize("layout", ["npy", "parquet"])
def test_analyze_dump_writes_ap_analyzes_bytes(dumps, tmp_path, layout):
    result = ap.analyze_dump(dumps[layout], tmp_path / "out", num_q_heads=4, num_k_heads=2, threads=2,
                             progress=False)
    assert result.errors == [] and result.output_dir == str(tmp_path / "out")
    assert_same_csvs(result, tmp_path / "out", dumps["csv"])
    assert result.summary == "8 of the 8 query heads of the layout present: 8 analyzed, 0 failed"
    assert len(result.head_metrics) == 8 and result["head_profile"] is result.tables["head_profile"]
    assert list(result.tables) == ["head_metrics", "head_bucket_plasticity", "head_profile",
                                   "head_component_weights", "head_distance_plasticity", "head_sequence_influence"]
    assert sorted(dumps["csv"]) == sorted(bu.CSV_FILES)
    # ap_analyze's defaults for the extensions (docs/method.md §8): the distance map and the
    # intervals on, the empirical AP off
    assert len(result.head_distance_plasticity) > 0
    assert result.head_metrics["ap_overall_se"].notna().all()
    assert result.head_metrics["ap_empirical_overall"].isna().all()


EXTENSION_OPTIONS = [
    ({"empirical_ap": True, "empirical_max_queries": 30, "distance_map_extra_pairs": 20,
      "distance_bins_per_octave": 3, "confidence_level": 0.8},
     ["--empirical-ap", "on", "--empirical-max-queries", 30, "--distance-map-extra-pairs", 20,
      "--distance-bins-per-octave", 3, "--confidence-level", 0.8]),
    ({"distance_map": False, "confidence_intervals": "off", "empirical_ap": "on"},
     ["--distance-map", "off", "--confidence-intervals", "off", "--empirical-ap", "on"]),
]


@pytest.mark.parametrize("options,flags", EXTENSION_OPTIONS)
@pytest.mark.parametrize("layout", ["npy", "parquet"])
def test_extension_options_write_ap_analyzes_bytes(dumps, tmp_path, options, flags, layout):
    """The options of the extensions (docs/method.md §8), as keywords (bools or on/off) and as
    ap_analyze's flags: the same files and bytes, the empirical columns filled or the map empty
    as asked."""
    bu.check_run([bu.ap_analyze(), "--data-root", dumps["npy"], "--output-dir", tmp_path / "cpp", "--threads", 2]
                 + LAYOUT + flags)
    want = bu.result_files(tmp_path / "cpp")
    assert sorted(want) == sorted(bu.CSV_FILES)
    result = ap.analyze_dump(dumps[layout], tmp_path / "py", num_q_heads=4, num_k_heads=2, threads=3,
                             progress=False, **options)
    assert_same_csvs(result, tmp_path / "py", want)
    assert result.head_metrics["ap_empirical_overall"].notna().all()
    assert result.head_profile["plasticity_ci_low"].notna().any() == (options.get("confidence_intervals") != "off")
    assert (len(result.head_distance_plasticity) > 0) == (options.get("distance_map") is not False)
    assert want != dumps["csv"]


def test_extension_option_errors_are_ap_analyzes(dumps):
    with pytest.raises(ap.UsageError, match="distance_map: 'maybe' is not on or off"):
        ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, distance_map="maybe", progress=False)
    with pytest.raises(ap.UsageError, match="confidence_level: 1 is not strictly between 0 and 1"):
        ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, confidence_level=1, progress=False)
    with pytest.raises(ap.UsageError, match="seed: expected a number, got a bool"):
        ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, seed=True, progress=False)


def test_parquet_through_the_converter(dumps, tmp_path):
    bu.check_run([sys.executable, bu.CONVERTER, "--quiet", dumps["parquet"], tmp_path / "converted"])
    bu.check_run([bu.ap_analyze(), "--data-root", tmp_path / "converted", "--output-dir", tmp_path / "out"] + LAYOUT)
    assert bu.result_files(tmp_path / "out") == dumps["csv"]


@pytest.mark.parametrize("fixture, num_q, num_k, summary", [
    (bu.REAL_FIXTURE, 12, 12, "24 of the 72 query heads of the layout present: 24 analyzed, 0 failed"),
    (bu.REAL_DECODER_FIXTURE, 4, 2, "24 of the 24 query heads of the layout present: 24 analyzed, 0 failed")],
    ids=["minilm", "decoder"])
def test_real_fixture_equals_ap_analyze(tmp_path, fixture, num_q, num_k, summary):
    bu.check_run([sys.executable, bu.CONVERTER, "--quiet", fixture, tmp_path / "npy"])
    bu.check_run([bu.ap_analyze(), "--data-root", tmp_path / "npy", "--output-dir", tmp_path / "cpp",
                  "--num-q-heads", num_q, "--num-k-heads", num_k])
    result = ap.analyze_dump(fixture, tmp_path / "py", num_q_heads=num_q, num_k_heads=num_k, progress=False)
    assert result.summary == summary
    assert_same_csvs(result, tmp_path / "py", bu.result_files(tmp_path / "cpp"))


def test_thread_count_does_not_change_the_bytes(dumps):
    texts = [ap.analyze_dump(dumps["parquet"], num_q_heads=4, num_k_heads=2, threads=t, progress=False)._texts
             for t in (1, 3, 8)]
    assert texts[0] == texts[1] == texts[2]
    assert texts[0]["head_metrics"].encode() == dumps["csv"]["head_metrics.csv"]


def test_selection_metadata_and_config_file(dumps, tmp_path):
    full = ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, progress=False).head_metrics
    some = ap.analyze_dump(dumps["npy"], num_q_heads=np.int64(4), num_k_heads=2, layers="1", heads=[0, "2-3"],
                           max_rel_dist=Fraction(1, 20), progress=False)
    assert some.summary == "8 of the 8 query heads of the layout present, 3 of them selected: 3 analyzed, 0 failed"
    want = full[(full.layer == 1) & full.q_head.isin([0, 2, 3])].reset_index(drop=True)
    pd.testing.assert_frame_equal(some.head_metrics, want)
    # a sampled head set: the layout from metadata.json, as ap_analyze
    partial = tmp_path / "partial"
    shutil.copytree(dumps["parquet"], partial)
    for name in ("l00h01q", "l01h03q", "l01h02q"):
        shutil.rmtree(partial / name)
    with pytest.raises(ap.UsageError, match="num_q_heads and num_k_heads are not known"):
        ap.analyze_dump(partial, progress=False)
    # the model's own config.json (model_config=): the same heads, the same rows
    model = tmp_path / "config.json"
    model.write_text('{"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}')
    from_model = ap.analyze_dump(partial, model_config=model, progress=False)
    assert from_model.layout["origin"] == "layout from " + str(model)
    (partial / "metadata.json").write_text('{"num_layers": 2, "num_q_heads": 4, "num_k_heads": 2}')
    sampled = ap.analyze_dump(partial, progress=False)
    assert sampled.layout == {"num_layers": 2, "num_q_heads": 4, "num_k_heads": 2,
                              "origin": "layout from metadata.json"}
    kept = full[~full.apply(lambda r: (r.layer, r.q_head) in {(0, 1), (1, 3), (1, 2)}, axis=1)]
    pd.testing.assert_frame_equal(sampled.head_metrics, kept.reset_index(drop=True))
    pd.testing.assert_frame_equal(from_model.head_metrics, kept.reset_index(drop=True))
    # options from a YAML file, keywords over it
    config = tmp_path / "run.yaml"
    config.write_text("num_q_heads: 4\nnum_k_heads: 2\nseed: 9\nlayers: [0]\n"
                      "output_dir: %s\n" % (tmp_path / "yaml_out"))
    from_file = ap.analyze_dump(dumps["npy"], config=config, seed=0, progress=False)
    assert from_file.output_dir == str(tmp_path / "yaml_out")
    pd.testing.assert_frame_equal(from_file.head_metrics, full[full.layer == 0].reset_index(drop=True))


def test_failed_heads_are_reported_and_the_others_unchanged(dumps, tmp_path):
    lines = {}
    for layout in ("npy", "parquet"):
        broken = tmp_path / layout
        shutil.copytree(dumps[layout], broken)
        if layout == "npy":
            with open(broken / "l00h02q" / "vector.npy", "r+b") as f:
                f.truncate(200)
            bad_file, reason = str(broken / "l00h02q" / "vector.npy"), "truncated"
        else:
            import pyarrow.parquet as pq
            table = pq.read_table(broken / "l00h02q" / "data.parquet").drop_columns(["position"])
            pq.write_table(table, broken / "l00h02q" / "data.parquet")
            bad_file, reason = str(broken / "l00h02q" / "data.parquet"), "missing column 'position'"
        with pytest.warns(ap.HeadFailedWarning, match="error: layer 0 q_head 2: "):
            result = ap.analyze_dump(broken, tmp_path / ("out_" + layout), num_q_heads=4, num_k_heads=2,
                                     progress=False)
        assert [(e.layer, e.q_head, e.k_head, e.file) for e in result.errors] == [(0, 2, 1, bad_file)]
        assert reason in result.errors[0].reason
        assert result.failed == 1 and result.analyzed == 7
        clean = dumps["csv"]["head_metrics.csv"].decode().split("\n")
        written = (tmp_path / ("out_" + layout) / "head_metrics.csv").read_text().split("\n")
        assert written == [line for line in clean if not line.startswith("0,2,1,")]
        lines[layout] = str(result.errors[0])
    # the very line ap_analyze reports for the NPY dump
    proc = bu.run([bu.ap_analyze(), "--data-root", tmp_path / "npy", "--output-dir", tmp_path / "cpp_out"] + LAYOUT)
    assert proc.returncode == 1
    assert lines["npy"] in proc.stderr.splitlines()


def test_usage_and_output_errors_are_ap_analyzes(dumps, tmp_path):
    with pytest.raises(ap.UsageError, match="analyze_dump: unknown keyword 'num_pairs'"):
        ap.analyze_dump(dumps["npy"], num_pairs=5)
    proc = bu.run([bu.ap_analyze(), "--data-root", dumps["npy"], "--num-pairs-per-bucket", "0"] + LAYOUT)
    assert proc.returncode == 2
    with pytest.raises(ap.UsageError) as info:
        ap.analyze_dump(dumps["npy"], num_pairs_per_bucket=0, num_q_heads=4, num_k_heads=2)
    assert str(info.value).replace("analyze_dump: num_pairs_per_bucket", "--num-pairs-per-bucket") in proc.stderr
    with pytest.raises(ap.UsageError, match="num_q_heads .4, given. must be a multiple of num_k_heads .3, given."):
        ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=3)
    with pytest.raises(ap.UsageError, match="p_alpha"):
        ap.analyze_dump(dumps["npy"], p_alpha=1.5)
    with pytest.raises(ap.UsageError, match="--layers|layers: layer 5 is outside the layout"):
        ap.analyze_dump(dumps["npy"], layers=[5], num_q_heads=4, num_k_heads=2)
    with pytest.raises(ap.UsageError, match="expected a number, got a bool"):
        ap.analyze_dump(dumps["npy"], seed=True)
    with pytest.raises(ap.UsageError, match="no such|not found"):
        ap.analyze_dump(tmp_path / "nowhere")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(ap.OutputError, match="a_file"):
        ap.analyze_dump(dumps["npy"], blocker, num_q_heads=4, num_k_heads=2, progress=False)
    assert issubclass(ap.OutputError, OSError) and issubclass(ap.UsageError, ValueError)


def test_stopping_a_run_writes_nothing(dumps, tmp_path):
    run = ap._core.dump.DumpRun.from_options(str(dumps["npy"]), str(tmp_path / "out"), None,
                                  {"num_q_heads": 4, "num_k_heads": 2, "threads": 1})

    class Stop(Exception):
        pass

    def on_progress(done, failures):
        if done >= 1:
            raise Stop

    with pytest.raises(Stop):
        run.run(ap.dump.read_parquet_folder, on_progress)
    assert 1 <= run.analyzed < 8
    run.close()
    assert not any(name.endswith(".csv") for name in os.listdir(tmp_path / "out"))


def test_progress_bar_and_write_afterwards(dumps, tmp_path, capfd):
    result = ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, progress=True)
    assert "8/8" in capfd.readouterr().err
    ap.analyze_dump(dumps["npy"], num_q_heads=4, num_k_heads=2, progress=False)
    assert capfd.readouterr().err == ""
    assert result.output_dir is None and not os.path.exists("head_metrics.csv")
    assert result.write(tmp_path / "later")
    assert bu.result_files(tmp_path / "later") == dumps["csv"]


def test_command_line_is_ap_analyzes(dumps, tmp_path):
    cli = [sys.executable, "-m", "attention_plasticity"]
    proc = bu.check_run(cli + ["--data-root", dumps["parquet"], "--output-dir", tmp_path / "out", "--threads", 3]
                        + LAYOUT)
    assert bu.result_files(tmp_path / "out") == dumps["csv"]
    assert "8 of the 8 query heads of the layout present: 8 analyzed, 0 failed" in proc.stderr
    helps = [bu.check_run(cli + ["--help"]).stdout, bu.check_run([bu.ap_analyze(), "--help"]).stdout]
    # the same text, but for the paragraph on the layouts read (the module reads Parquet too)
    paragraphs = [h.split("\n\n") for h in helps]
    assert [p for p in paragraphs[0] if "data.parquet" not in p] == \
        [p.replace("ap_analyze", "python -m attention_plasticity", 1) for p in paragraphs[1] if "NPY files" not in p]
    assert "data.parquet" in helps[0] and "data.parquet" not in helps[1]
    bad = bu.run(cli + ["--data-root", dumps["npy"], "--seed", "x"])
    want = bu.run([bu.ap_analyze(), "--data-root", dumps["npy"], "--seed", "x"])
    assert (bad.returncode, want.returncode) == (2, 2)
    assert bad.stderr.replace("python -m attention_plasticity", "ap_analyze") == want.stderr
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    assert bu.run(cli + ["--data-root", dumps["npy"], "--output-dir", blocked] + LAYOUT).returncode == 2
    broken = tmp_path / "broken"
    shutil.copytree(dumps["npy"], broken)
    (broken / "l01h00q" / "position.npy").write_bytes(b"not npy")
    failed = bu.run(cli + ["--data-root", broken, "--output-dir", tmp_path / "out2"] + LAYOUT)
    assert failed.returncode == 1
    assert "error: layer 1 q_head 0: " in failed.stderr and "position.npy" in failed.stderr


def test_hostile_paths_and_files(dumps, tmp_path):
    """Issue 19: a NUL inside a path is refused (no stray folder), a dangling data.parquet link
    is named as such, and a FIFO in place of data.parquet makes no shard plan wait."""
    with pytest.raises(ap.UsageError, match=r"output_dir: .*holds a NUL character"):
        ap.analyze_dump(dumps["npy"], str(tmp_path / "out\0stray"), progress=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ap.UsageError, match=r"data_root: .*holds a NUL character"):
        ap.analyze_dump(str(dumps["npy"]) + "\0x", progress=False)
    root = tmp_path / "dump"
    shutil.copytree(dumps["parquet"], root)
    (root / "metadata.json").write_text('{"num_layers": 2, "num_q_heads": 4, "num_k_heads": 2}')
    os.remove(root / "l00h01q" / "data.parquet")
    os.symlink(tmp_path / "gone.parquet", root / "l00h01q" / "data.parquet")
    os.remove(root / "l01h02q" / "data.parquet")
    os.mkfifo(root / "l01h02q" / "data.parquet")
    # In a child process with a timeout: a wait would hang the test run otherwise.
    code = ("import warnings, attention_plasticity as ap\n"
            "warnings.simplefilter('ignore')\n"
            "r = ap.analyze_dump(%r, shard='0/1', progress=False)\n"
            "print('\\n'.join(str(e) for e in r.errors))\n" % str(root))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2, proc.stdout
    assert "dangling symbolic link (to '%s', which does not exist)" % (tmp_path / "gone.parquet") in lines[0]
    assert "l01h02q/data.parquet: not a regular file" in lines[1]


def test_help_says_parquet_is_read(capsys):
    from attention_plasticity.__main__ import main
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "data.parquet" in text and "--model-config" in text
    assert "*.npy" not in text


def test_runs_of_one_process_into_one_folder(dumps, tmp_path):
    """Several analyze_dump calls of one process into one folder: each makes its own set (they
    shared one name, and the second failed with "Directory not empty"); the set before stays
    readable as `previous` (the consistent read of examples/README.md)."""
    out = tmp_path / "out"
    state = out / ".ap_results"
    seen = []
    for seed in (1, 2, 3):
        resolved = state / os.readlink(state / "current") if seen else None
        before = (resolved / "head_metrics.csv").read_bytes() if resolved else None
        result = ap.analyze_dump(dumps["npy"], out, seed=seed, num_q_heads=4, num_k_heads=2, progress=False)
        assert result.output_dir == str(out)
        assert (out / "head_metrics.csv").read_text() == result.csv_text("head_metrics")
        if resolved:
            assert os.readlink(state / "previous") == resolved.name
            assert (resolved / "head_metrics.csv").read_bytes() == before
        seen.append(os.readlink(state / "current"))
    assert len(set(seen)) == 3
    assert sorted(e for e in os.listdir(state) if e.startswith("set-")) == sorted(seen[1:])
