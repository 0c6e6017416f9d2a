"""analyze_head from Python: the arrays read in place (numpy and torch; the addresses the module
reads are the arrays' own), the conversions it documents, the same rows as ap_analyze on the same
head written as an NPY dump (byte for byte), the tables as DataFrames, the results independent of
Python threads, and the errors with the library's messages.

Run: AP_ANALYZE=build/examples/ap_analyze .venv/bin/python -m pytest -q tests/python/test_bindings_head.py
"""

import inspect
import os
import re
import threading

import numpy as np
import pandas as pd
import pytest
import torch

import bindings_util as bu
import attention_plasticity as ap


def make_head(seed=0, n=3000, d=16, dtype=np.float32, examples=4, buckets=6):
    rng = np.random.default_rng(seed)
    length = n // examples
    position = np.tile(np.arange(length), examples).astype(np.int64)
    bucket = (position * buckets // length).astype(np.int64)
    example_id = np.repeat(np.arange(examples), length).astype(np.int64)
    direction = rng.standard_normal(d)
    q = (rng.standard_normal((n, d)) + 0.004 * np.outer(position, direction)).astype(dtype)
    k = (rng.standard_normal((n, d)) * 1.5 + 0.001 * np.outer(position, direction)).astype(dtype)
    return q, k, position, bucket, example_id


def address(a):
    return a.data_ptr() if isinstance(a, torch.Tensor) else a.__array_interface__["data"][0]


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tokens_are_read_in_place(framework, dtype):
    q, _, position, bucket, example_id = make_head(dtype=dtype)
    arrays = [q, position, bucket, example_id]
    if framework == "torch":
        arrays = [torch.from_numpy(a) for a in arrays]
    tokens = ap.Tokens(*arrays)
    assert tokens.converted_columns() == []
    assert tokens.data_addresses() == dict(zip(["vectors", "position", "bucket", "example_id"], map(address, arrays)))
    assert (tokens.n, tokens.d, tokens.dtype) == (3000, 16, np.dtype(dtype).name)


def test_tokens_conversions_are_documented_and_exact():
    q, _, position, bucket, example_id = make_head(dtype=np.float64)
    t = ap.Tokens(q[:, ::2], position.astype(np.int32), bucket, None)  # non-contiguous, int32
    assert t.converted_columns() == ["vectors", "position"] and t.dtype == "float64"
    t = ap.Tokens(torch.from_numpy(q).to(torch.bfloat16), position, bucket)
    assert t.converted_columns() == ["vectors"] and t.dtype == "float32"
    t = ap.Tokens(q.astype(np.float16), position, bucket)
    assert t.dtype == "float32"
    t = ap.Tokens(torch.tensor(q, requires_grad=True), torch.from_numpy(position), torch.from_numpy(bucket))
    assert t.converted_columns() == []
    with pytest.raises(ap.InvalidArgumentError, match="Tokens: position must hold integers, got dtype float64"):
        ap.Tokens(q, position.astype(np.float64), bucket)
    with pytest.raises(ap.InvalidArgumentError, match="Tokens: vectors must be 2-D, got 1 dimensions"):
        ap.Tokens(q[:, 0], position, bucket)
    with pytest.raises(ap.InvalidArgumentError, match=r"bucket\[0\] = 18446744073709551615 does not fit in int64"):
        ap.Tokens(q, position, np.full(len(position), 2**64 - 1, dtype=np.uint64))


def write_npy_head(root, layer, q_head, k_head, q, k, position, bucket, example_id, window=None):
    for name, x in (("l%02dh%02dq" % (layer, q_head), q), ("l%02dh%02dk" % (layer, k_head), k)):
        folder = os.path.join(root, name)
        os.makedirs(folder, exist_ok=True)
        for stem, values in (("vector", x), ("position", position), ("bucket", bucket), ("example_id", example_id)):
            np.save(os.path.join(folder, stem + ".npy"), values)
        if window is not None and name.endswith("q"):
            np.save(os.path.join(folder, "sliding_window.npy"), np.full(len(position), window, np.int64))


@pytest.mark.parametrize("dtype,window", [(np.float32, None), (np.float64, 200)])
def test_analyze_head_writes_the_rows_of_ap_analyze(tmp_path, dtype, window):
    q, k, position, bucket, example_id = make_head(seed=3, dtype=dtype)
    write_npy_head(tmp_path / "dump", 1, 2, 1, q, k, position, bucket, example_id, window)
    # ap_analyze's defaults: the library's, with the intervals of docs/method.md §8.3 on
    options = ap.HeadOptions(seed=5, num_pairs_per_bucket=100, max_tokens_per_head=2500,
                             sliding_window=window or 0, confidence_intervals=True)
    bu.check_run([bu.ap_analyze(), "--data-root", tmp_path / "dump", "--output-dir", tmp_path / "out",
                  "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2, "--seed", 5,
                  "--num-pairs-per-bucket", 100, "--max-tokens-per-head", 2500])
    # The queries with their example ids, as the dump has them (the sequences of §8.3's errors).
    result = ap.analyze_head(ap.Tokens(q, position, bucket, example_id), ap.Tokens(k, position, bucket, example_id),
                             ap.HeadId(1, 2, 1), options)
    written = bu.result_files(tmp_path / "out")
    rows = result.csv_rows()
    assert sorted(name + ".csv" for name in rows) == sorted(written)
    for name, text in rows.items():
        assert text.encode() == written[name + ".csv"], name
    tables = result.tables()
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(frame, bu.read_table(tmp_path / "out" / (name + ".csv"), name), check_exact=True)
    assert list(tables["head_metrics"].columns) == written["head_metrics.csv"].decode().split("\n")[0].split(",")
    m = result.metrics
    assert tables["head_metrics"]["ap_overall"][0] == m.ap_overall
    assert [p.q_bucket for p in result.profile] == tables["head_profile"]["q_bucket"].tolist()
    np.testing.assert_array_equal(result.component_weight, tables["head_component_weights"]["weight"])
    assert m.n_q_tokens == 2500 and m.d_model == 16


def test_torch_and_numpy_give_the_same_result():
    q, k, position, bucket, example_id = make_head(seed=4)
    want = ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id)).csv_rows()
    t = [torch.from_numpy(a) for a in (q, k, position, bucket, example_id)]
    got = ap.analyze_head(ap.Tokens(t[0], t[2], t[3]), ap.Tokens(t[1], t[2], t[3], t[4])).csv_rows()
    assert got == want
    # a strided torch view and int32 columns: converted once, same numbers
    wide = torch.from_numpy(np.repeat(q, 2, axis=1))[:, ::2]
    assert not wide.is_contiguous()
    got = ap.analyze_head(ap.Tokens(wide, t[2].to(torch.int32), t[3]), ap.Tokens(t[1], t[2], t[3], t[4])).csv_rows()
    assert got == want


def test_python_threads_do_not_change_results():
    heads = [make_head(seed=s, n=2000) for s in range(6)]

    def analyze(h, i):
        q, k, position, bucket, example_id = h
        return ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id),
                               ap.HeadId(0, i, 0)).csv_rows()

    serial = [analyze(h, i) for i, h in enumerate(heads)]
    parallel = [None] * len(heads)

    def work(i):
        parallel[i] = analyze(heads[i], i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(heads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert parallel == serial


def test_threads_inside_one_head_do_not_change_results():
    # HeadOptions.threads shares one head's steps among threads (docs/method.md §7.1): every
    # value, the extensions' included, must be the same for any count.
    q, k, position, bucket, example_id = make_head(seed=5, n=6000, d=24, buckets=8)
    rows = []
    for threads in (1, 2, 3, 0):
        options = ap.HeadOptions(seed=7, threads=threads, confidence_intervals=True, empirical_ap=True)
        rows.append(ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id),
                                    ap.HeadId(0, 0, 0), options).csv_rows())
    assert all(r == rows[0] for r in rows[1:])


def test_timings():
    q, k, position, bucket, example_id = make_head(seed=6, n=1000)
    r = ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id), timings=True)
    assert r.timings.total > 0 and r.timings.kernel >= 0
    assert ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket, example_id)).timings is None


def test_analyze_head_errors():
    q, k, position, bucket, example_id = make_head(seed=7, n=400, d=4)
    keys = ap.Tokens(k, position, bucket, example_id)
    with pytest.raises(ap.InvalidArgumentError, match="analyze_head: needs at least 2 queries, got 1"):
        ap.analyze_head(ap.Tokens(q[:1], position[:1], bucket[:1]), keys)
    with pytest.raises(ap.InvalidArgumentError,
                       match=r"analyze_head: queries columns disagree: vectors is \[400, 4\] \(expected \[n, d\], "
                             r"one row per token\) but there are 399 positions and 400 buckets$"):
        ap.analyze_head(ap.Tokens(q, position[:-1], bucket), keys)
    with pytest.raises(ap.InvalidArgumentError, match="queries.vectors has d = 3 columns but keys.vectors has d = 4"):
        ap.analyze_head(ap.Tokens(np.ascontiguousarray(q[:, :3]), position, bucket), keys)
    bad = q.copy()
    bad[17, 2] = np.nan
    with pytest.raises(ap.DomainError,
                       match=r"analyze_head: queries.vectors has a non-finite value \(nan\) at row 17, column 2"):
        ap.analyze_head(ap.Tokens(bad, position, bucket), keys)
    negative = position.copy()
    negative[5] = -1
    with pytest.raises(ap.DomainError, match=r"analyze_head: keys.position\[5\] = -1 is negative"):
        ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, negative, bucket, example_id))
    with pytest.raises(ap.InvalidArgumentError, match=r"HeadOptions: p_alpha: 2.0 must be in \[0, 1\]"):
        ap.analyze_head(ap.Tokens(q, position, bucket), keys, options=ap.HeadOptions(p_alpha=2.0))
    with pytest.raises(ap.InvalidArgumentError, match="analyze_head: keys need an example_id column"):
        ap.analyze_head(ap.Tokens(q, position, bucket), ap.Tokens(k, position, bucket))  # keys need example_id
    with pytest.raises(ap.InvalidArgumentError, match=r"vectors is \[4, 400\].*look transposed: pass them as \[n, d\]"):
        ap.analyze_head(ap.Tokens(np.ascontiguousarray(q.T), position, bucket), keys)
    with pytest.raises(TypeError, match=r"vectors must be an array of numbers, got ndarray of dtype <U1"):
        ap.Tokens(np.array([["a", "b"], ["c", "d"]]), position[:2], bucket[:2])
    with pytest.raises(TypeError):
        ap.analyze_head(q, keys)


def _other_value(value):
    """A value other than `value` (an option's default), inside every option's domain."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 0.25 if value == 0.5 else 0.5
    return "token" if value == "sequence" else "sequence"


def _head_option_names():
    """HeadOptions' properties, in the order of its class."""
    return [name for name, value in vars(ap.HeadOptions).items() if isinstance(value, property)]


def test_head_options_are_the_option_table():
    """Each property of HeadOptions is an entry of the option table (analyze_config.hpp's
    head_option_table): set from Python, it is read back by the C++ getter of that entry only (no
    two share a field), the keyword gives the same, its docstring is ap_analyze's help of the option,
    and the properties are the options ap_analyze has plus the library's own of docs/method.md §2."""
    names = _head_option_names()
    defaults = ap.HeadOptions()
    for name in names:
        value = _other_value(getattr(defaults, name))
        options = ap.HeadOptions()
        setattr(options, name, value)
        assert getattr(options, name) == value, name
        assert getattr(ap.HeadOptions(**{name: value}), name) == value, name
        for other in names:
            if other != name:
                assert getattr(options, other) == getattr(defaults, other), (name, other)
    helps = {key: help_text for key, _flag, _metavar, help_text, _takes_list in ap._core.dump.analyze_options()}
    # ap_analyze's options of the run (threads: its workers, not HeadOptions.threads) and layout.
    run_keys = {"data_root", "num_layers", "num_q_heads", "num_k_heads", "model_config", "layers", "heads",
                "output_dir", "threads", "shard"}
    for name in names:
        if name in helps and name not in run_keys:  # the same text, but the default each states
            assert _without_default(vars(ap.HeadOptions)[name].__doc__) == _without_default(helps[name]), name
    method = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "method.md"), encoding="utf-8").read()
    sentence = method[method.index("Options of the library only (`HeadOptions`), not of the driver:"):]
    library = sentence[:sentence.index(". With")].split("driver:")[1].split("`")[1::2]
    assert set(names) - set(library) == set(helps) - run_keys
    assert all(vars(ap.HeadOptions)[name].__doc__ for name in library)


def _stated_default(help_text):
    """The default a help text or docstring states: the text in the brackets ending it."""
    match = re.search(r" \[([^\]]*)\]$", help_text)
    assert match, help_text
    return match.group(1)


def _without_default(help_text):
    return help_text[:-len(_stated_default(help_text)) - 3]


def _is_stated(value, text):
    """Whether `text` (as the option table writes a value: on|off, a decimal, a name) is `value`."""
    if isinstance(value, bool):
        return text == ("on" if value else "off")
    if isinstance(value, float):
        return float(text) == value
    if isinstance(value, int):
        return int(text) == value
    return text == value


def test_every_stated_default_is_the_real_one():
    """The defaults the help texts, docstrings and signatures state are the objects' own (issue 34
    item 4): HeadOptions' property docstrings and constructor signature state HeadOptions()'s
    values (confidence_intervals off: the library's), ap_analyze's help (analyze_dump's keywords)
    states analyze_default_options()'s (confidence_intervals on), and the Python functions whose
    keywords repeat an option default the option's."""
    defaults = ap.HeadOptions()
    signature = vars(ap.HeadOptions)["__init__"].__nb_signature__[0][0]
    keywords = dict(re.findall(r"(\w+): \w+ = ([^,)]+)", signature))
    names = _head_option_names()
    assert sorted(keywords) == sorted(names)
    for name in names:
        value = getattr(defaults, name)
        assert _is_stated(value, _stated_default(vars(ap.HeadOptions)[name].__doc__)), name
        assert eval(keywords[name]) == value and type(eval(keywords[name])) is type(value), name
    # the one option whose default differs between HeadOptions() and ap_analyze
    assert vars(ap.HeadOptions)["confidence_intervals"].__doc__.endswith("(§8.3) [off]")
    assert not defaults.confidence_intervals
    analysis = ap._core.dump.analyze_default_options()
    helps = {key: help_text for key, _flag, _metavar, help_text, _takes_list in ap._core.dump.analyze_options()}
    assert helps["confidence_intervals"].endswith("(§8.3) [on]") and analysis.confidence_intervals
    for name in set(names) & set(helps) - {"threads"}:  # threads: ap_analyze's workers
        assert _is_stated(getattr(analysis, name), _stated_default(helps[name])), name
    assert _stated_default(helps["threads"]) == "0"  # 0: hardware concurrency
    # Python keywords that default to an option's default
    parameters = inspect.signature(ap.notebook_capture).parameters
    assert parameters["max_tokens_per_head"].default == defaults.max_tokens_per_head
    # a planted wrong statement is seen
    assert not _is_stated(True, "off") and not _is_stated(0.05, "0.5") and not _is_stated(1, "0")
