#!/usr/bin/python3
"""Bad input and bad configuration for ap_analyze.

usage: test_bad_input.py AP_ANALYZE WORK_DIR

Input errors (SPEC section 1): each case breaks one file (or folder) of a valid dump
(2 layers x 4 query heads x 2 key heads); ap_analyze must exit 1, print
"error: layer L q_head H: FILE: REASON" for each failed head (FILE naming the broken file,
REASON saying what is wrong), write no row for the failed heads and all the rows of the
others (the same bytes as a clean run), and leave no temporary file behind.
Valid variants of the NPY format (version 2.0, a long 1.0 header, int32 columns) must give
the same results as the clean run. Configuration errors must exit 2 naming the key.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

LAYERS, Q_HEADS, K_HEADS, N, D = 2, 4, 2, 60, 4
CSVS = ("head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv")


def base_dump(root):
    import numpy as np
    rng = np.random.default_rng(3)
    pos = np.tile(np.arange(N // 2), 2)
    bucket = pos // 5
    ex = np.repeat([4, 8], N // 2)
    for layer in range(LAYERS):
        for head in range(K_HEADS):
            u.write_folder(u.folder(root, layer, head, "k"), rng.standard_normal((N, D)), pos, bucket, ex)
        for head in range(Q_HEADS):
            x = rng.standard_normal((N, D)) + np.outer(pos, rng.standard_normal(D)) * 0.1
            u.write_folder(u.folder(root, layer, head, "q"), x, pos, bucket, ex,
                           vec_dtype="float32" if head == 1 else "float64")


def path(root, layer, head, kind, name=None):
    p = u.folder(root, layer, head, kind)
    return os.path.join(p, name) if name else p


def npy_load(p):
    import numpy as np
    return np.load(p)


def npy_save(p, a):
    import numpy as np
    np.save(p, a)


# ---- corruptions: each returns (failed heads, broken file, reason substring)

def c_missing_folder(root):
    shutil.rmtree(path(root, 1, 3, "q"))
    return [(1, 3)], path(root, 1, 3, "q"), "folder not found"


def c_missing_file(root):
    os.remove(path(root, 0, 1, "q", "bucket.npy"))
    return [(0, 1)], path(root, 0, 1, "q", "bucket.npy"), "file not found"


def c_garbage(root):
    with open(path(root, 0, 2, "q", "vector.npy"), "wb") as f:
        f.write(b"this is not a numpy file at all\n")
    return [(0, 2)], path(root, 0, 2, "q", "vector.npy"), "not an NPY file"


def c_empty(root):
    open(path(root, 1, 0, "q", "position.npy"), "wb").close()
    return [(1, 0)], path(root, 1, 0, "q", "position.npy"), "not an NPY file"


def c_truncated(root):
    p = path(root, 1, 0, "q", "vector.npy")
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - 100)
    return [(1, 0)], p, "truncated"


def c_trailing(root):
    p = path(root, 0, 3, "q", "bucket.npy")
    with open(p, "ab") as f:
        f.write(b"\0" * 8)
    return [(0, 3)], p, "follow the data"


def c_directory(root):
    p = path(root, 0, 0, "q", "example_id.npy")
    os.remove(p)
    os.makedirs(p)
    return [(0, 0)], p, "is a directory"


def c_vector_int(root):
    p = path(root, 0, 1, "q", "vector.npy")
    npy_save(p, (npy_load(p) * 10).astype("int32"))
    return [(0, 1)], p, "wrong dtype int32"


def c_column_float(root):
    p = path(root, 1, 2, "q", "position.npy")
    npy_save(p, npy_load(p).astype("float64"))
    return [(1, 2)], p, "wrong dtype float64"


def c_float16(root):
    p = path(root, 0, 2, "q", "vector.npy")
    npy_save(p, npy_load(p).astype("float16"))
    return [(0, 2)], p, "unsupported dtype '<f2'"


def c_big_endian(root):
    p = path(root, 0, 3, "q", "vector.npy")
    npy_save(p, npy_load(p).astype(">f8"))
    return [(0, 3)], p, "big-endian"


def c_structured(root):
    import numpy as np
    p = path(root, 0, 3, "q", "example_id.npy")
    a = np.zeros(N, dtype=[("a", "<i8"), ("b", "<f8")])
    npy_save(p, a)
    return [(0, 3)], p, "unsupported dtype"


def c_vector_rank(root):
    p = path(root, 1, 1, "q", "vector.npy")
    npy_save(p, npy_load(p).ravel())
    return [(1, 1)], p, "wrong rank"


def c_column_rank(root):
    p = path(root, 1, 1, "q", "bucket.npy")
    npy_save(p, npy_load(p).reshape(-1, 1))
    return [(1, 1)], p, "wrong rank"


def c_length(root):
    p = path(root, 0, 0, "q", "example_id.npy")
    npy_save(p, npy_load(p)[:-1])
    return [(0, 0)], p, "length mismatch: %d entries, but vector.npy has %d rows" % (N - 1, N)


def c_nan(root):
    p = path(root, 1, 3, "q", "vector.npy")
    a = npy_load(p)
    a[5, 2] = float("nan")
    npy_save(p, a)
    return [(1, 3)], p, "non-finite value (nan) at row 5, column 2"


def c_inf(root):
    p = path(root, 0, 1, "q", "vector.npy")
    a = npy_load(p)
    a[0, 0] = float("-inf")
    npy_save(p, a)
    return [(0, 1)], p, "non-finite value (-inf) at row 0, column 0"


def c_d_mismatch(root):
    import numpy as np
    p = path(root, 1, 0, "q", "vector.npy")
    a = npy_load(p)
    npy_save(p, np.hstack([a, a[:, :1]]))
    return [(1, 0)], p, "d mismatch: queries have d = %d but %s has d = %d" % (
        D + 1, path(root, 1, 0, "k", "vector.npy"), D)


def c_two_windows(root):
    import numpy as np
    p = path(root, 0, 2, "q", "sliding_window.npy")
    sw = np.full(N, 32, dtype=np.int64)
    sw[7] = 0
    sw[9] = 64
    npy_save(p, sw)
    return [(0, 2)], p, "two different positive sliding windows: 32 (row 0) and 64 (row 9)"


def c_window_length(root):
    import numpy as np
    p = path(root, 0, 2, "q", "sliding_window.npy")
    npy_save(p, np.full(N + 3, 32, dtype=np.int32))
    return [(0, 2)], p, "length mismatch"


def c_negative_position(root):
    p = path(root, 1, 2, "q", "position.npy")
    a = npy_load(p)
    a[3] = -1
    npy_save(p, a)
    return [(1, 2)], p, "negative position -1 at row 3"


def c_fortran(root):
    import numpy as np
    p = path(root, 0, 0, "q", "vector.npy")
    npy_save(p, np.asfortranarray(npy_load(p)))
    return [(0, 0)], p, "Fortran-order"


def c_key_folder(root):
    p = path(root, 1, 1, "k", "vector.npy")
    a = npy_load(p)
    a[2, 1] = float("nan")
    npy_save(p, a)
    return [(1, 2), (1, 3)], p, "non-finite value (nan) at row 2, column 1"


def c_one_query(root):
    import numpy as np
    f = path(root, 1, 1, "q")
    for name in ("vector.npy", "position.npy", "bucket.npy", "example_id.npy"):
        npy_save(os.path.join(f, name), npy_load(os.path.join(f, name))[:1])
    return [(1, 1)], path(root, 1, 1, "q", "vector.npy"), "needs at least 2 queries"


CASES = [c_missing_folder, c_missing_file, c_garbage, c_empty, c_truncated, c_trailing, c_directory,
         c_vector_int, c_column_float, c_float16, c_big_endian, c_structured, c_vector_rank, c_column_rank,
         c_length, c_nan, c_inf, c_d_mismatch, c_two_windows, c_window_length, c_negative_position, c_fortran,
         c_key_folder, c_one_query]


def read_bytes(out):
    return {name: open(os.path.join(out, name), "rb").read() for name in CSVS}


def expected_without(clean_out, failed):
    """The clean run's files minus the rows of the failed heads."""
    result = {}
    for name in CSVS:
        lines = open(os.path.join(clean_out, name), "rb").read().decode().splitlines(True)
        keep = [lines[0]] + [ln for ln in lines[1:]
                             if (int(ln.split(",")[0]), int(ln.split(",")[1])) not in failed]
        result[name] = "".join(keep).encode()
    return result


def check_input_case(c, analyze, work, clean_root, clean_out, cases, label):
    root = os.path.join(work, label)
    shutil.copytree(clean_root, root)
    expected = []
    for case in cases:
        expected.append(case(root))
    out = os.path.join(work, label + "_out")
    code, _, err = u.run([analyze, "--data-root", root, "--output-dir", out, "--threads", 2])
    c.check(code == 1, "%s: exit status %d, expected 1" % (label, code))
    failed = set()
    for heads, file, reason in expected:
        for layer, q_head in heads:
            failed.add((layer, q_head))
            line = "error: layer %d q_head %d: %s: " % (layer, q_head, file)
            hits = [ln for ln in err.splitlines() if ln.startswith(line)]
            c.check(len(hits) == 1 and reason in hits[0],
                    "%s: expected one line '%s...%s' on stderr, got:\n%s" % (label, line, reason, err))
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    c.check(len(errors) == len(failed), "%s: %d error lines for %d failed heads:\n%s"
            % (label, len(errors), len(failed), err))
    if not os.path.isdir(out):
        c.check(False, "%s: no output folder" % label)
        return
    got = read_bytes(out)
    want = expected_without(clean_out, failed)
    for name in CSVS:
        c.check(got[name] == want[name], "%s: %s differs from the clean run without the failed heads" % (label, name))
    leftovers = [f for f in os.listdir(out) if f not in CSVS]
    c.check(not leftovers, "%s: leftover files in the output folder: %s" % (label, leftovers))


def write_npy_v1_long_header(p, a):
    """A valid NPY 1.0 file whose header length (134 = 0x86) has its low byte >= 0x80."""
    import numpy as np
    a = np.ascontiguousarray(a)
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (a.dtype.str, a.shape)
    header_len = 134
    d = d + " " * (header_len - 1 - len(d)) + "\n"
    assert (10 + header_len) % 16 == 0 and len(d) == header_len
    with open(p, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + bytes([header_len & 0xFF, header_len >> 8]) + d.encode("latin1"))
        f.write(a.tobytes())


def check_valid_variants(c, analyze, work, clean_root, clean_out):
    import numpy as np
    root = os.path.join(work, "variants")
    shutil.copytree(clean_root, root)
    p = path(root, 0, 0, "q", "vector.npy")
    a = npy_load(p)
    with open(p, "wb") as f:
        np.lib.format.write_array(f, a, version=(2, 0))
    write_npy_v1_long_header(path(root, 0, 2, "q", "vector.npy"), npy_load(path(root, 0, 2, "q", "vector.npy")))
    write_npy_v1_long_header(path(root, 1, 0, "k", "position.npy"), npy_load(path(root, 1, 0, "k", "position.npy")))
    for name in ("position.npy", "bucket.npy", "example_id.npy"):
        q = path(root, 1, 3, "q", name)
        npy_save(q, npy_load(q).astype("int32"))
    npy_save(path(root, 1, 2, "q", "sliding_window.npy"), np.zeros(N, dtype=np.int32))  # all <= 0: none
    out = os.path.join(work, "variants_out")
    code, _, err = u.run([analyze, "--data-root", root, "--output-dir", out])
    c.check(code == 0, "valid variants: exit status %d:\n%s" % (code, err))
    if code == 0:
        c.check(read_bytes(out) == read_bytes(clean_out), "valid variants: results differ from the clean run")


def check_config_errors(c, analyze, work, clean_root):
    yaml_dir = u.fresh_dir(os.path.join(work, "yaml"))

    def yaml(name, text):
        p = os.path.join(yaml_dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p
    out = os.path.join(work, "config_out")
    base = ["--data-root", clean_root, "--output-dir", out]
    cases = [
        (base + ["--bogus", "1"], "--bogus"),
        (base + ["--num_layers", "2"], "did you mean --num-layers"),
        (base + ["--num-layers", "abc"], "--num-layers"),
        (base + ["--num-layers", "0"], "--num-layers"),
        (base + ["--p-alpha", "2"], "--p-alpha"),
        (base + ["--seed", "-1"], "--seed"),
        (base + ["--threads", "1.5"], "--threads"),
        (base + ["--max-rel-dist", "nan"], "--max-rel-dist"),
        (base + ["--num-pairs-per-bucket", "0"], "--num-pairs-per-bucket"),
        (base + ["--max-tokens-per-head", "1e5"], "--max-tokens-per-head"),
        (base + ["--normality-max-dims", ""], "--normality-max-dims"),
        (base + ["--num-q-heads", "3", "--num-k-heads", "2"], "num_q_heads"),
        (["--output-dir", out], "data_root"),
        (["--data-root", os.path.join(work, "no_such_dir"), "--output-dir", out], "data_root"),
        (base + ["--config", os.path.join(yaml_dir, "missing.yaml")], "missing.yaml"),
        (base + ["--config", yaml("unknown.yaml", "num_layers: 2\nfoo: 1\n")], "unknown key 'foo'"),
        (base + ["--config", yaml("syntax.yaml", "seed: [1, 2\n")], "not valid YAML"),
        (base + ["--config", yaml("list.yaml", "seed: [1, 2]\n")], "seed"),
        (base + ["--config", yaml("alpha.yaml", "p_alpha: abc\n")], "p_alpha"),
        (base + ["--config", yaml("null.yaml", "threads:\n")], "threads"),
        (base + ["--config", yaml("top.yaml", "- 1\n- 2\n")], "mapping"),
        (base + ["--data-root"], "missing value"),
        (base + ["stray"], "stray"),
    ]
    for args, needle in cases:
        if os.path.exists(out):
            shutil.rmtree(out)
        code, _, err = u.run([analyze] + args, quiet=True)
        c.check(code == 2 and needle in err, "config %s: exit %d (expected 2), stderr %r should name %r"
                % (args[4:] if len(args) > 4 else args, code, err.strip(), needle))
        c.check(not os.path.exists(out), "config %s: output written despite the error" % (args,))

    # The file sets values, flags override it; underscores in file keys, dashes in flags.
    cfg = yaml("good.yaml", "data_root: %s\noutput_dir: %s\nnum_pairs_per_bucket: 8\nthreads: 1\n" % (clean_root, out))
    for extra, pairs in (([], "8"), (["--num-pairs-per-bucket", "16"], "16"), (["--num-pairs-per-bucket=24"], "24")):
        code, _, err = u.run([analyze, "--config", cfg] + extra, quiet=True)
        c.check(code == 0, "good config %s: exit %d: %s" % (extra, code, err))
        if code == 0:
            _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
            c.check({r["n_pairs"] for r in cells} == {pairs}, "config %s: n_pairs %s, expected %s"
                    % (extra, sorted({r["n_pairs"] for r in cells}), pairs))
    code, text, _ = u.run([analyze, "--help"], quiet=True)
    keys = ["--config", "--data-root", "--num-layers", "--num-q-heads", "--num-k-heads", "--max-tokens-per-head",
            "--normality-max-dims", "--p-alpha", "--seed", "--num-pairs-per-bucket", "--max-rel-dist",
            "--output-dir", "--threads"]
    c.check(code == 0 and all(k in text for k in keys), "--help should list every option: %s" % text)


def main():
    u.require_numpy()
    analyze, work = sys.argv[1:3]
    u.fresh_dir(work)
    c = u.Checker()
    clean_root = os.path.join(work, "clean")
    base_dump(clean_root)
    clean_out = os.path.join(work, "clean_out")
    code, _, err = u.run([analyze, "--data-root", clean_root, "--output-dir", clean_out])
    c.check(code == 0 and "error" not in err, "clean run: exit %d, stderr %s" % (code, err))
    _, rows = u.read_csv(os.path.join(clean_out, "head_metrics.csv"))
    c.check(len(rows) == LAYERS * Q_HEADS, "clean run: %d metric rows" % len(rows))

    for case in CASES:
        check_input_case(c, analyze, work, clean_root, clean_out, [case], case.__name__)
    # Several broken heads in one run.
    check_input_case(c, analyze, work, clean_root, clean_out, [c_missing_file, c_garbage, c_key_folder, c_truncated],
                     "several")
    check_valid_variants(c, analyze, work, clean_root, clean_out)
    check_config_errors(c, analyze, work, clean_root)
    c.close("test_bad_input")


if __name__ == "__main__":
    main()
