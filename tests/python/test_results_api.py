"""The Python API as a researcher meets it (issue 20): readable results, the §3 tables of many heads
in one call from the numbers (not from CSV text), one validation of the options for every front
end, input messages that say what was expected, no silent NaN, small buckets kept out of the
aggregates, and intervals that say which estimate they are centred on.

The reference of the tables is the C++ CSV writer's text (include/attention_plasticity/io/csv_rows.hpp, through
HeadResult.csv_rows() and DumpResult.csv_text()), parsed here with Python's float(): the
DataFrames must hold the very doubles it formats (%.17g round-trips a float64).
"""

import inspect
import math
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import attention_plasticity as ap

import bindings_util as bu

REAL = os.path.join(bu.ROOT, "tests", "data", "real_minilm")


def synthetic_head(seed=0, n_examples=4, length=600, d=16, bucket_size=50, drift=0.004):
    rng = np.random.default_rng(seed)
    position = np.tile(np.arange(length), n_examples)
    bucket = position // bucket_size
    example_id = np.repeat(np.arange(n_examples), length)
    q = rng.standard_normal((position.size, d))
    q[:, 0] += drift * position
    k = rng.standard_normal((position.size, d))
    return q, k, position, bucket, example_id


def analyze(seed=0, options=None, **head):
    q, k, position, bucket, example_id = synthetic_head(seed=seed, **head)
    return ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id),
                           ap.HeadId(layer=seed % 3, q_head=seed, k_head=seed),
                           # independent synthetic tokens in 4 sequences: token-level errors (§8.3)
                           options or ap.HeadOptions(confidence_intervals=True, empirical_ap=True,
                                                     sampling_unit="token"), timings=True)


def parse_csv_text(text):
    """The CSV text as (header, rows of text fields); assert_frame_is_csv reads the fields as the
    schema says: integers by int(), floats by Python's float() (exact for %.17g; 'nan' is NaN,
    'inf' infinity)."""
    lines = text.rstrip("\n").split("\n")
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    return header, rows


def assert_frame_is_csv(frame, text, schema):
    header, rows = parse_csv_text(text)
    assert list(frame.columns) == header
    assert [name for name, _ in schema] == header
    assert len(frame) == len(rows)
    for j, (name, dtype) in enumerate(schema):
        column = frame[name].to_numpy()
        if dtype == "str":  # a column of names (e.g. pca_class), as written
            assert [str(x) for x in column] == [r[j] for r in rows], name
            continue
        assert column.dtype == np.dtype(dtype), (name, column.dtype)
        if dtype == "int64":
            want = np.array([int(r[j]) for r in rows], dtype=np.int64)
            assert np.array_equal(column, want), name
        else:
            want = np.array([float(r[j]) for r in rows], dtype=np.float64)
            # float64 exact: the same bits (NaN where the CSV says nan)
            assert np.array_equal(column, want, equal_nan=True), name
            assert np.array_equal(np.signbit(column[~np.isnan(column)]), np.signbit(want[~np.isnan(want)])), name


# ---- 1. readable results --------------------------------------------------------------------------

def test_every_result_type_prints_its_numbers():
    r = analyze(seed=1)
    m = r.metrics
    text = repr(r)
    print(text)
    assert "at 0x" not in text
    for number in (f"{m.ap_overall:.4g}", f"{m.ap_overall_ci_low:.4g}", f"{m.ap_overall_ci_high:.4g}",
                   f"{m.ap_overall_corrected:.4g}", f"{m.ap_drop:.4g}", str(m.n_q_tokens), f"d={m.d_model}",
                   f"{len(r.profile)} buckets", f"cells: {len(r.cells)}"):
        assert number in text, (number, text)
    # the structs: every field, numbers with 6 significant digits, arrays by dtype and shape
    objects = [m, r.profile[0], r.cells[0], r.distance_map[0], r.timings, r.id, ap.HeadOptions(seed=3),
               ap.extensions.plasticity_interval(0.5, 0.01, 0.02)]
    for obj in objects:
        text = repr(obj)
        print(text)
        assert "at 0x" not in text and text.startswith(type(obj).__name__ + "(")
        for name, value in obj.to_dict().items():
            assert name in text, (name, text)
            if isinstance(value, float) and not math.isnan(value):
                assert f"{value:.6g}" in text or repr(value) in text, (name, value, text)
    assert f"plasticity={r.profile[0].plasticity:.6g}" in repr(r.profile[0])
    assert f"n_queries={r.profile[0].n_queries}" in repr(r.profile[0])
    assert f"total={r.timings.total:.6g}" in repr(r.timings)
    assert "num_pairs_per_bucket=256" in repr(ap.HeadOptions())
    # the step results: arrays as shapes
    q, k, position, bucket, example_id = synthetic_head(seed=2)
    fit = ap.steps.fit_linear(position, q)
    text = repr(fit)
    print(text)
    assert "at 0x" not in text and "shape=(16,)" in text and f"{fit.r2_mean:.6g}" in text
    # no class of the module with fields is left with the default repr, nor without to_dict
    parts = [m for m in vars(ap._core).values() if inspect.ismodule(m)]
    assert len(parts) >= 7
    for name, cls in ((n, c) for m in parts for n, c in vars(m).items()):
        if isinstance(cls, type) and not issubclass(cls, BaseException) and ap.results._fields(cls):
            assert cls.__repr__ is not object.__repr__, name
            assert hasattr(cls, "to_dict"), name
    # to_dict of the head: every column of head_metrics.csv
    row = r.to_dict()
    assert [c for c, _ in ap.result_schema()["head_metrics"]] == list(row)
    assert row["ap_overall"] == m.ap_overall and row["layer"] == r.id.layer


def test_dump_result_prints_its_tables():
    dump = ap.analyze_dump(REAL, progress=False, layers=[0])
    text = repr(dump)
    print(text)
    assert "4 analyzed" in text and "head_metrics 4 rows" in text


def test_tables_of_many_heads_are_the_csv_writers_numbers():
    results = [analyze(seed=s) for s in range(4)]
    tables = ap.tables(results)
    schema = ap.result_schema()
    assert list(tables) == [name for name, _file, _header in ap._core.tables.result_tables()]
    for name, frame in tables.items():
        text = results[0].csv_rows()[name].split("\n", 1)[0] + "\n" + "".join(
            r.csv_rows()[name].split("\n", 1)[1] for r in results)
        assert_frame_is_csv(frame, text, schema[name])
    # one head: the same as tables([r]); an empty list: the columns and dtypes, no rows
    one = results[2].tables()
    pd.testing.assert_frame_equal(one["head_profile"], ap.tables([results[2]])["head_profile"])
    empty = ap.tables([])
    for name, frame in empty.items():
        assert len(frame) == 0 and list(frame.columns) == [c for c, _ in schema[name]]
        assert all(str(frame[c].dtype) == t for c, t in schema[name] if t != "str")
    with pytest.raises(TypeError, match="tables: item 1 is a str, not a HeadResult"):
        ap.tables([results[0], "x"])


def test_tables_of_the_real_heads_are_faster_than_the_analyses():
    """The 24 heads of tests/data/real_minilm analyzed one by one with analyze_head (keys read from
    the Parquet folders), then ap.tables(results): equal to the CSV writer's text, and faster."""
    from attention_plasticity import sniffed
    dump = ap.analyze_dump(REAL, progress=False)
    folders = {}
    for name in sorted(os.listdir(REAL)):
        if name.startswith("l") and os.path.isdir(os.path.join(REAL, name)):
            folders[name] = sniffed.read_sniffed_folder(os.path.join(REAL, name))

    def tokens(data, keys):  # the queries' example ids too, as the dump's: the sequences of §8.3
        return ap.Tokens(data["vector"], data["position"], data["bucket"], data["example_id"])
    options = ap._core.dump.analyze_default_options()
    start = time.perf_counter()
    results = [ap.analyze_head(tokens(folders[f"l{layer:02d}h{q_head:02d}q"], False),
                               tokens(folders[f"l{layer:02d}h{k_head:02d}k"], True),
                               ap.HeadId(layer=layer, q_head=q_head, k_head=k_head), options)
               for layer, q_head, k_head in dump.heads]
    analyses = time.perf_counter() - start
    start = time.perf_counter()
    tables = ap.tables(results)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    dump_tables = ap.tables(dump)
    print(f"24 real heads: analyses {analyses:.3f} s, ap.tables {seconds:.4f} s "
          f"({len(tables['head_bucket_plasticity'])} cell rows)")
    schema = ap.result_schema()
    for name, frame in tables.items():
        assert_frame_is_csv(frame, dump.csv_text(name), schema[name])
        assert_frame_is_csv(dump_tables[name], dump.csv_text(name), schema[name])
    assert len(results) == 24 and seconds < analyses


def test_the_plots_read_columns_of_the_csv_writers_tables(tmp_path):
    """The plot scripts (examples/plots, run with /usr/bin/python3 too, so without the package) declare
    the columns they read (READS); the tables' columns are defined once, by the C++ writer. Every
    column a plot reads is one of its table's (a column renamed or dropped in csv_rows.hpp fails
    here), and the plots' loader takes the synthetic set of the plot tests with the full headers."""
    sys.path[:0] = [os.path.join(bu.ROOT, "examples", "plots"), os.path.join(bu.ROOT, "tests", "python")]
    import _common
    import plot_bucket_heatmap
    import plot_component_weights
    import plot_distance_map
    import plot_head_map
    import plot_profile
    from synthetic_results import write_synthetic_results
    schema = ap.result_schema()
    tables = {file: (name, header) for name, file, header in ap._core.tables.result_tables()}
    paths = write_synthetic_results(str(tmp_path), schema=schema)
    read = set()
    for plot in (plot_profile, plot_bucket_heatmap, plot_component_weights, plot_head_map, plot_distance_map):
        for file, columns in plot.READS.items():
            assert file in tables, (plot.__name__, file, list(tables))
            name, header = tables[file]
            missing = [c for c in columns if c not in [c for c, _ in schema[name]]]
            assert not missing, f"{plot.__name__} reads {missing}, not columns of {file} ({header})"
            frame = _common.load_csv(os.path.join(tmp_path, file), columns)
            assert len(frame) > 0 and list(frame.columns) == header.split(",")
            read.add(file)
    plotted = set(tables) - {"head_sequence_influence.csv"}  # the influences serve comparisons (§8.6), not plots
    assert read == plotted and sorted(os.path.basename(p) for p in paths.values()) == sorted(plotted)
    # a column the writer does not have is an error of the synthetic set, not a silent extra column
    with pytest.raises(ValueError, match="'ap_drop'.* not in the table's header"):
        write_synthetic_results(str(tmp_path / "renamed"), schema=dict(schema, head_metrics=[
            (c, t) for c, t in schema["head_metrics"] if c != "ap_drop"]))


# ---- 2. one validation for every entry point ----------------------------------------------------

CASES = [  # (keyword, value, message after the argument's name)
    ("num_pairs_per_bucket", 0, "0 must be >= 1 and <= 4294967296"),
    ("max_rel_dist", 2, "2 must be in [0, 1]"),
    ("p_alpha", 1.5, "1.5 must be in [0, 1]"),
    ("confidence_level", 1, "1 is not strictly between 0 and 1"),
    ("min_bucket_queries", 1, "1 must be >= 2 and <= 1099511627776"),
    ("distance_map", "maybe", "'maybe' is not on or off"),
]


def cli_message(args, tmp_path, config=None):
    command = [bu.ap_analyze(), "--data-root", REAL, "--output-dir", tmp_path / "cli_out"] + args
    if config is not None:
        path = tmp_path / "options.yaml"
        path.write_text(config)
        command += ["--config", path]
    proc = bu.run(command)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.strip().split("\n")[-1]


@pytest.mark.parametrize("key,value,problem", CASES)
def test_an_invalid_option_gets_the_same_message_everywhere(key, value, problem, tmp_path):
    with pytest.raises(ap.UsageError) as info:
        ap.HeadOptions(**{key: value})
    assert str(info.value) == f"HeadOptions: {key}: {problem}"
    options = ap.HeadOptions()
    with pytest.raises(ap.UsageError) as info:
        setattr(options, key, value)
    assert str(info.value) == f"HeadOptions: {key}: {problem}"
    with pytest.raises(ap.UsageError) as info:
        ap.analyze_dump(REAL, progress=False, **{key: value})
    assert str(info.value) == f"analyze_dump: {key}: {problem}"
    flag = "--" + key.replace("_", "-")
    assert cli_message([flag, str(value)], tmp_path) == f"ap_analyze: {flag}: {problem}"
    assert cli_message([], tmp_path, f"{key}: {value}\n") == f"ap_analyze: {tmp_path / 'options.yaml'}: {key}: {problem}"
    proc = bu.run([sys.executable, "-m", "attention_plasticity", "--data-root", REAL, "--output-dir",
                   tmp_path / "py_out", flag, str(value)])
    assert proc.returncode == 2 and proc.stderr.strip() == f"python -m attention_plasticity: {flag}: {problem}"


def test_threads_minus_one_is_refused_everywhere(tmp_path):
    problem = "'-1' is not a non-negative integer"
    with pytest.raises(ap.UsageError, match=f"^HeadOptions: threads: {problem}$"):
        ap.HeadOptions(threads=-1)
    with pytest.raises(ap.UsageError, match=f"^analyze_dump: threads: {problem}$"):
        ap.analyze_dump(REAL, threads=-1)
    assert cli_message(["--threads", "-1"], tmp_path) == f"ap_analyze: --threads: {problem}"


def test_a_misspelt_option_gets_the_closest_name(tmp_path):
    with pytest.raises(ap.UsageError, match="^HeadOptions: unknown keyword 'num_pair_per_bucket'; did you mean "
                                            "'num_pairs_per_bucket'\\?$"):
        ap.HeadOptions(num_pair_per_bucket=64)
    with pytest.raises(ap.UsageError, match="^analyze_dump: unknown keyword 'num_q_head'; did you mean 'num_q_heads'\\?"):
        ap.analyze_dump(REAL, num_q_head=12)
    assert "unknown option '--num-pair-per-bucket'; did you mean '--num-pairs-per-bucket'?" in cli_message(
        ["--num-pair-per-bucket", "64"], tmp_path)
    assert "unknown key 'num_pair_per_bucket'; did you mean 'num_pairs_per_bucket'?" in cli_message(
        [], tmp_path, "num_pair_per_bucket: 64\n")
    with pytest.raises(ap.UsageError, match="unknown keyword 'xyzzy'$"):  # nothing close: no suggestion
        ap.HeadOptions(xyzzy=1)


def test_head_options_keywords_and_values():
    o = ap.HeadOptions(num_pairs_per_bucket=64, max_rel_dist=0.1, distance_map=False, sliding_window=-5,
                       p_alpha=np.float32(0.25), seed=np.uint64(2 ** 64 - 1), threads=None)
    assert (o.num_pairs_per_bucket, o.max_rel_dist, o.distance_map, o.sliding_window) == (64, 0.1, False, -5)
    assert o.p_alpha == 0.25 and o.seed == 2 ** 64 - 1 and o.threads == ap.HeadOptions().threads
    o.confidence_intervals = True
    o.empirical_ap = "on"
    assert o.confidence_intervals and o.empirical_ap
    with pytest.raises(ap.UsageError, match="^HeadOptions: seed: expected a number, got a bool$"):
        ap.HeadOptions(seed=True)
    assert "min_bucket_queries: int = 16" in ap.HeadOptions.__init__.__doc__.split("\n")[0]


# ---- 3. input messages that say what was expected -------------------------------------------------

def test_input_messages_say_what_was_expected(tmp_path):
    q, k, position, bucket, example_id = synthetic_head(seed=3, n_examples=1, length=300)
    keys = ap.Tokens(k, position, bucket, example_id)
    with pytest.raises(ap.InvalidArgumentError, match=r"queries columns disagree: vectors is \[16, 300\] \(expected "
                                                      r"\[n, d\].*look transposed: pass them as \[n, d\]"):
        ap.analyze_head(ap.Tokens(np.ascontiguousarray(q.T), position, bucket), keys)
    with pytest.raises(ap.InvalidArgumentError, match=r"keys need an example_id column \(one id per key"):
        ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket))
    with pytest.raises(TypeError, match="Tokens: vectors must be an array of numbers, got ndarray of dtype <U3"):
        ap.Tokens(np.array([["abc"] * 4] * 3), position[:3], bucket[:3])
    # analyze_dump speaks Python: keywords, not flags, and no metadata.json to write into the dump
    partial = tmp_path / "partial"
    os.makedirs(partial)
    for name in ("l00h00q", "l00h00k", "l01h03q", "l01h03k"):
        os.symlink(os.path.join(REAL, name), partial / name)
    with pytest.raises(ap.UsageError) as info:
        ap.analyze_dump(partial, progress=False)
    message = str(info.value)
    print(message)
    assert message.startswith("analyze_dump: ") and "--" not in message and "metadata.json" not in message
    assert "give the keywords num_q_heads and num_k_heads" in message


# ---- 4. no silent NaN ---------------------------------------------------------------------------------

def test_nan_columns_are_announced_with_their_rule():
    # short contexts: buckets of 8 positions over 40 tokens; the first bucket j > 0 starts at 8 = 0.2 C
    options = ap.HeadOptions(confidence_intervals=True, min_bucket_queries=2)
    results = [analyze(seed=s, options=options, n_examples=30, length=40, bucket_size=8) for s in range(3)]
    assert all(math.isnan(r.metrics.ap_drop) for r in results)
    with pytest.warns(ap.NaNColumnWarning) as caught:
        tables = ap.tables(results)
    messages = [str(w.message) for w in caught]
    print("\n".join(messages))
    assert any(m.startswith("head_metrics.ap_first20 is NaN for 3 of 3 heads: no query bucket") and "0.2 C" in m
               for m in messages)
    assert any(m.startswith("head_metrics.ap_drop is NaN for 3 of 3 heads") for m in messages)
    assert len(messages) == len(set(m.split(" is NaN")[0] for m in messages))  # once per column
    assert ap.nan_reasons(tables)
    # a default run of long contexts: no NaN column without a warning, and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ap.NaNColumnWarning)
        good = ap.tables([analyze(seed=5)])
    for column in ("ap_overall", "ap_first20", "ap_last20", "ap_drop", "ap_overall_ci_low", "ap_overall_corrected"):
        assert not good["head_metrics"][column].isna().any(), column
    # num_pairs_per_bucket=0 is refused (not a silent ap_overall = nan)
    with pytest.raises(ap.UsageError):
        ap.HeadOptions(num_pairs_per_bucket=0)


# ---- 5. intervals readable at a glance ----------------------------------------------------------------

def test_intervals_show_their_centre():
    r = analyze(seed=6)
    m = r.metrics
    assert m.ap_overall_corrected == m.ap_overall - m.ap_overall_bias
    z = 1.959963984540054
    centre = (m.ap_overall_ci_low + m.ap_overall_ci_high) / 2
    assert abs(centre - m.ap_overall_corrected) < 1e-12 or m.ap_overall_ci_low == 0 or m.ap_overall_ci_high == 1
    assert abs(m.ap_overall_ci_high - m.ap_overall_corrected - z * m.ap_overall_se) < 1e-12
    for row in r.profile:
        assert row.plasticity_corrected == row.plasticity - row.plasticity_bias
    frame = ap.tables([r], warn=False)["head_profile"]
    assert {"plasticity_corrected", "small_bucket"} <= set(frame.columns)


# ---- 6. small buckets ---------------------------------------------------------------------------------

def test_small_buckets_are_flagged_and_kept_out_of_the_aggregates():
    """Buckets of 3 queries (the issue's example) among buckets of 200: flagged, their AP_j
    kept, no interval, and the aggregates are the n_j-weighted means over the others."""
    q, k, position, bucket, example_id = synthetic_head(seed=8, n_examples=4, length=600, bucket_size=50)
    keep = (bucket % 3 != 0) | (position % 50 < 1)  # buckets 3, 6, 9: 4 queries (one per example)
    queries = ap.Tokens(np.ascontiguousarray(q[keep]), position[keep], bucket[keep])
    keys = ap.Tokens(k, position, bucket, example_id)
    # 4 sequences of independent synthetic tokens: the token-level errors (§8.3)
    default = ap.analyze_head(queries, keys, options=ap.HeadOptions(confidence_intervals=True, sampling_unit="token"))
    method = ap.analyze_head(queries, keys, options=ap.HeadOptions(confidence_intervals=True, min_bucket_queries=2,
                                                                   sampling_unit="token"))
    small = [row for row in default.profile if row.small_bucket]
    assert [row.q_bucket for row in small] == [3, 6, 9] and all(row.n_queries == 4 for row in small)
    assert not any(row.small_bucket for row in method.profile)
    for a, b in zip(default.profile, method.profile):
        assert a.plasticity == b.plasticity and a.n_queries == b.n_queries
        if a.small_bucket:
            assert math.isnan(a.plasticity_se) and math.isnan(a.plasticity_ci_low)
            assert not math.isnan(b.plasticity_ci_low)
    kept = [row for row in default.profile if not row.small_bucket and not math.isnan(row.plasticity)]
    want = sum(row.n_queries * row.plasticity for row in kept) / sum(row.n_queries for row in kept)
    assert abs(default.metrics.ap_overall - want) < 1e-14
    assert default.metrics.ap_overall != method.metrics.ap_overall
    frame = ap.tables([default], warn=False)["head_profile"]
    assert frame["small_bucket"].tolist() == [int(row.small_bucket) for row in default.profile]


def test_the_fixtures_have_no_small_bucket():
    """The default keeps every bucket of the committed real fixture (so its numbers are unchanged)."""
    dump = ap.analyze_dump(REAL, progress=False, layers=[0, 5])
    profile = dump.head_profile
    print("smallest bucket of tests/data/real_minilm:", profile["n_queries"].min())
    assert profile["n_queries"].min() >= ap.HeadOptions().min_bucket_queries
    assert (profile["small_bucket"] == 0).all()


# ---- 7. the README's examples ----------------------------------------------------------------------

def test_the_fixture_call_of_the_readme_needs_no_head_counts():
    dump = ap.analyze_dump(REAL, progress=False)
    assert dump.layout == {"num_layers": 6, "num_q_heads": 12, "num_k_heads": 12,
                           "origin": "layout from metadata.json"}
    assert dump.analyzed == 24
