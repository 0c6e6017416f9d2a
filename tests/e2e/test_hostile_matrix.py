#!/usr/bin/python3
"""The hostile-input matrix of ap_analyze: broken and odd NPY files, dtypes, shapes, values,
folders, metadata, configs, flags and output folders, one case each.

usage: test_hostile_matrix.py AP_ANALYZE WORK_DIR [--compare AP_COMPARE [--python]] [CASE_NAME_SUBSTRING...]

Every case starts from a copy of a valid dump (2 layers x 4 query heads x 2 key heads, GQA
groups of 2; head (0, 1) is float32, the others float64) and an output folder that already
holds an earlier result set (another seed), breaks one thing, runs ap_analyze, and asserts:
  - the exit status (0 all present heads analyzed, 1 some head failed, 2 usage error);
  - the message: for a broken head, the line "error: layer L q_head H: FILE: REASON" naming
    the file and the reason, one per failed head; otherwise the expected text on stderr;
  - the results: the heads that did not fail have exactly the bytes of a clean run (the
    rows of failed, absent or unselected heads are left out); after a usage error (nothing
    analyzed) or a run where no head succeeded, the earlier set is unchanged byte for byte;
  - no leftover temporary entry in the output folder, and usage errors do no work (no
    progress line);
  - no case waits: each run is killed after 120 s and then fails (FIFOs where a file, the
    lock or data is expected); the cases that plant links to files outside the output folder
    check that those files are untouched and that none is created (issue 19).
With --compare, the same for ap_compare (and with --python, attention_plasticity.compare_runs):
FIFOs, links, devices, folders and huge files in place of a set's files or lock, tampered values,
an output folder that is or lies inside an input (see "ap_compare and compare_runs").
Cases needing to deny root its permissions run under setpriv (see e2e_util); disk-full and
kill -9 cases are in test_disk_full.py and test_kill_runs.py.
"""

import fcntl
import os
import shutil
import socket
import stat
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

LAYERS, Q_HEADS, K_HEADS, N, D = 2, 4, 2, 60, 4
LAYOUT = ["--num-q-heads", Q_HEADS, "--num-k-heads", K_HEADS]
ALL_HEADS = [(layer, head) for layer in range(LAYERS) for head in range(Q_HEADS)]


def np():
    import numpy
    return numpy


def base_dump(root):
    rng = np().random.default_rng(3)
    pos = np().tile(np().arange(N // 2), 2)
    bucket = pos // 5
    ex = np().repeat([4, 8], N // 2)
    for layer in range(LAYERS):
        for head in range(K_HEADS):
            u.write_folder(u.folder(root, layer, head, "k"), rng.standard_normal((N, D)), pos, bucket, ex)
        for head in range(Q_HEADS):
            x = rng.standard_normal((N, D)) + np().outer(pos, rng.standard_normal(D)) * 0.1
            u.write_folder(u.folder(root, layer, head, "q"), x, pos, bucket, ex,
                           vec_dtype="float32" if (layer, head) == (0, 1) else "float64")


class Expect:
    """What a case expects. code: exit status. failed: {(layer, q_head): (file, reason)}.
    messages: texts stderr must hold. keep(layer, q_head): which clean rows the output holds
    (default: every head not failed). changed: heads analyzed on purpose-changed input (their
    rows are not compared, but must be present). output: "rows" (compare with the clean run)
    or "earlier" (the earlier set must be unchanged). args: extra flags; layout=False drops
    the --num-q-heads/--num-k-heads flags; prefix: a command prefix (setpriv)."""

    def __init__(self, code, failed=None, messages=(), keep=None, changed=(), output=None, args=(), layout=True,
                 prefix=(), no_work=None, extra_check=None, allowed_leftovers=()):
        self.code = code
        self.failed = failed or {}
        self.messages = list(messages)
        self.keep = keep
        self.changed = set(changed)
        self.output = output or ("rows" if code != 2 else "earlier")
        self.args = list(args)
        self.layout = layout
        self.prefix = list(prefix)
        self.no_work = (code == 2) if no_work is None else no_work
        self.extra_check = extra_check
        self.allowed_leftovers = list(allowed_leftovers)


class Ctx:
    def __init__(self, work, name, clean_root):
        self.work = work
        self.name = name
        self.keep_open = None
        self.root = os.path.join(work, name)
        self.out = os.path.join(work, name + "_out")
        u.copy_tree(clean_root, self.root)

    def path(self, layer, head, kind, name=None):
        p = u.folder(self.root, layer, head, kind)
        return os.path.join(p, name) if name else p

    def load(self, layer, head, kind, name):
        return np().load(self.path(layer, head, kind, name))

    def save(self, layer, head, kind, name, array):
        np().save(self.path(layer, head, kind, name), array)

    def poke(self, layer, head, kind, name, index, value):
        """Sets one element of an array file; returns the file's path."""
        a = self.load(layer, head, kind, name)
        a[index] = value
        self.save(layer, head, kind, name, a)
        return self.path(layer, head, kind, name)


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def one(layer, head, file, reason):
    return {(layer, head): (file, reason)}


def raw_npy(path, header_dict, payload=b"", version=(1, 0), header_len=None):
    """An NPY file with the given header text (padded) and payload bytes."""
    text = header_dict.encode("latin1")
    if version[0] == 1:
        total = header_len if header_len is not None else len(text) + 1
        prefix = b"\x93NUMPY" + bytes(version) + struct.pack("<H", total)
    else:
        total = header_len if header_len is not None else len(text) + 1
        prefix = b"\x93NUMPY" + bytes(version) + struct.pack("<I", total)
    with open(path, "wb") as f:
        f.write(prefix + text + b"\n" + payload)


# ---------------------------------------------------------------- files and NPY format

@case
def file_missing(c):
    os.remove(c.path(0, 1, "q", "bucket.npy"))
    return Expect(1, one(0, 1, c.path(0, 1, "q", "bucket.npy"), "file not found"))


@case
def file_garbage(c):
    with open(c.path(0, 2, "q", "vector.npy"), "wb") as f:
        f.write(b"this is not a numpy file at all\n")
    return Expect(1, one(0, 2, c.path(0, 2, "q", "vector.npy"), "not an NPY file (bad magic string)"))


@case
def file_empty(c):
    open(c.path(1, 0, "q", "position.npy"), "wb").close()
    return Expect(1, one(1, 0, c.path(1, 0, "q", "position.npy"), "not an NPY file (shorter than"))


@case
def file_truncated(c):
    p = c.path(1, 0, "q", "vector.npy")
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 100)
    return Expect(1, one(1, 0, p, "truncated: the header announces"))


@case
def file_trailing_bytes(c):
    p = c.path(0, 3, "q", "bucket.npy")
    with open(p, "ab") as f:
        f.write(b"\0" * 8)
    return Expect(1, one(0, 3, p, "8 bytes follow the data"))


@case
def file_is_fifo_sharded(c):
    # --shard plans the split from every head's vector.npy: a FIFO is never opened (no wait).
    p = c.path(1, 1, "q", "vector.npy")
    os.remove(p)
    os.mkfifo(p)
    return Expect(1, one(1, 1, p, "is a FIFO, not an NPY file"), args=["--shard", "0/1"])


@case
def file_is_directory(c):
    p = c.path(0, 0, "q", "example_id.npy")
    os.remove(p)
    os.makedirs(p)
    return Expect(1, one(0, 0, p, "is a directory, not an NPY file"))


@case
def file_is_fifo(c):
    p = c.path(1, 1, "q", "vector.npy")
    os.remove(p)
    os.mkfifo(p)
    return Expect(1, one(1, 1, p, "is a FIFO, not an NPY file"))


@case
def file_symlink_loop(c):
    p = c.path(0, 2, "q", "vector.npy")
    os.remove(p)
    os.symlink("vector.npy", p)
    return Expect(1, one(0, 2, p, "symbolic link loop"))


@case
def file_dangling_symlink(c):
    p = c.path(0, 3, "q", "position.npy")
    os.remove(p)
    os.symlink("no_such_file.npy", p)
    return Expect(1, one(0, 3, p, "dangling symbolic link (to 'no_such_file.npy'"))


@case
def file_unreadable(c):
    prefix = u.without_dac_override()
    if prefix is None:
        return None
    p = c.path(1, 2, "q", "bucket.npy")
    os.chmod(p, 0)
    return Expect(1, one(1, 2, p, "permission denied (the file cannot be read)"), prefix=prefix)


@case
def npy_version_4(c):
    p = c.path(0, 0, "q", "vector.npy")
    with open(p, "r+b") as f:
        f.seek(6)
        f.write(b"\x04\x00")
    return Expect(1, one(0, 0, p, "unsupported NPY format version 4.0"))


@case
def npy_header_length_past_end(c):
    p = c.path(1, 3, "q", "vector.npy")
    raw_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (60, 4), }", version=(2, 0), header_len=0xFFFFFFF0)
    return Expect(1, one(1, 3, p, "header runs past the end of the file"))


@case
def npy_header_too_long(c):
    p = c.path(1, 3, "q", "vector.npy")
    a = c.load(1, 3, "q", "vector.npy")
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (60, 4), }" + " " * 70000
    raw_npy(p, text, a.tobytes(), version=(2, 0))
    return Expect(1, one(1, 3, p, "a header of 70061 bytes; at most 65536 are accepted"))


@case
def npy_header_lacks_shape(c):
    p = c.path(0, 1, "q", "example_id.npy")
    raw_npy(p, "{'descr': '<i8', 'fortran_order': False, }", b"\0" * 8 * N)
    return Expect(1, one(0, 1, p, "NPY header lacks the 'shape' key"))


@case
def npy_header_not_ascii(c):
    p = c.path(0, 1, "q", "example_id.npy")
    raw_npy(p, "{'descr': '<i\x88', 'fortran_order': False, 'shape': (60,), }", b"\0" * 8 * N)
    return Expect(1, one(0, 1, p, "non-printable byte"))


@case
def npy_shape_overflows(c):
    p = c.path(1, 1, "q", "vector.npy")
    raw_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (2 ** 63, 2 ** 63))
    return Expect(1, one(1, 1, p, "shape overflows"))


@case
def npy_shape_entry_overflows(c):
    p = c.path(1, 1, "q", "vector.npy")
    raw_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999, 4), }")
    return Expect(1, one(1, 1, p, "a shape entry overflows"))


@case
def npy_huge_shape_small_file(c):
    p = c.path(0, 2, "q", "vector.npy")
    raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000), }", b"\0" * 64)
    return Expect(1, one(0, 2, p, "truncated: the header announces 64000000000000 bytes of data but the file holds 64"))


@case
def npy_sparse_file_beyond_memory(c):
    # A (sparse) file that really holds what its header announces: 64 GiB, more than memory.
    p = c.path(0, 2, "q", "vector.npy")
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, 4), }" % (2 ** 31)
    raw_npy(p, header)
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) + 2 ** 36)
    return Expect(1, one(0, 2, p, "of data, more than this machine's"))


@case
def npy_dimension_above_limit(c):
    p = c.path(1, 0, "q", "vector.npy")
    c.save(1, 0, "q", "vector.npy", np().zeros((3, 20000), dtype="float32"))
    return Expect(1, one(1, 0, p, "d = 20000 columns, more than the limit 16384"))


@case
def npy_fortran_order(c):
    p = c.path(0, 0, "q", "vector.npy")
    c.save(0, 0, "q", "vector.npy", np().asfortranarray(c.load(0, 0, "q", "vector.npy")))
    return Expect(1, one(0, 0, p, "Fortran-order"))


@case
def npy_valid_variants(c):
    """Valid encodings (NPY 2.0, a 1.0 header whose length byte is >= 0x80, int32 columns,
    an all-zero sliding_window) give the clean results."""
    a = c.load(0, 0, "q", "vector.npy")
    with open(c.path(0, 0, "q", "vector.npy"), "wb") as f:
        np().lib.format.write_array(f, a, version=(2, 0))
    for layer, head, kind, name in ((0, 2, "q", "vector.npy"), (1, 0, "k", "position.npy")):
        a = np().ascontiguousarray(c.load(layer, head, kind, name))
        d = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (a.dtype.str, a.shape)
        raw_npy(c.path(layer, head, kind, name), d + " " * (133 - len(d)), a.tobytes())
    for name in ("position.npy", "bucket.npy", "example_id.npy"):
        c.save(1, 3, "q", name, c.load(1, 3, "q", name).astype("int32"))
    c.save(1, 2, "q", "sliding_window.npy", np().zeros(N, dtype=np().int32))
    return Expect(0)


# ---------------------------------------------------------------- dtypes and shapes

@case
def dtype_vector_int(c):
    c.save(0, 1, "q", "vector.npy", (c.load(0, 1, "q", "vector.npy") * 10).astype("int32"))
    return Expect(1, one(0, 1, c.path(0, 1, "q", "vector.npy"), "wrong dtype int32 ('<i4'); expected float32 or float64"))


@case
def dtype_column_float(c):
    c.save(1, 2, "q", "position.npy", c.load(1, 2, "q", "position.npy").astype("float64"))
    return Expect(1, one(1, 2, c.path(1, 2, "q", "position.npy"), "wrong dtype float64"))


@case
def dtype_float16(c):
    c.save(0, 2, "q", "vector.npy", c.load(0, 2, "q", "vector.npy").astype("float16"))
    return Expect(1, one(0, 2, c.path(0, 2, "q", "vector.npy"), "unsupported dtype '<f2'"))


@case
def dtype_big_endian(c):
    c.save(0, 3, "q", "vector.npy", c.load(0, 3, "q", "vector.npy").astype(">f8"))
    return Expect(1, one(0, 3, c.path(0, 3, "q", "vector.npy"), "big-endian"))


@case
def dtype_structured(c):
    c.save(0, 3, "q", "example_id.npy", np().zeros(N, dtype=[("a", "<i8"), ("b", "<f8")]))
    return Expect(1, one(0, 3, c.path(0, 3, "q", "example_id.npy"), "unsupported dtype"))


@case
def dtype_uint64(c):
    c.save(1, 1, "q", "bucket.npy", c.load(1, 1, "q", "bucket.npy").astype("uint64"))
    return Expect(1, one(1, 1, c.path(1, 1, "q", "bucket.npy"), "unsupported dtype '<u8'"))


@case
def shape_vector_rank_1(c):
    c.save(1, 1, "q", "vector.npy", c.load(1, 1, "q", "vector.npy").ravel())
    return Expect(1, one(1, 1, c.path(1, 1, "q", "vector.npy"), "wrong rank"))


@case
def shape_column_rank_2(c):
    c.save(1, 1, "q", "bucket.npy", c.load(1, 1, "q", "bucket.npy").reshape(-1, 1))
    return Expect(1, one(1, 1, c.path(1, 1, "q", "bucket.npy"), "wrong rank"))


@case
def shape_length_mismatch(c):
    c.save(0, 0, "q", "example_id.npy", c.load(0, 0, "q", "example_id.npy")[:-1])
    return Expect(1, one(0, 0, c.path(0, 0, "q", "example_id.npy"),
                         "length mismatch: %d entries, but vector.npy has %d rows" % (N - 1, N)))


@case
def shape_d_mismatch(c):
    a = c.load(1, 0, "q", "vector.npy")
    c.save(1, 0, "q", "vector.npy", np().hstack([a, a[:, :1]]))
    return Expect(1, one(1, 0, c.path(1, 0, "q", "vector.npy"), "d mismatch: queries have d = %d but %s has d = %d"
                         % (D + 1, c.path(1, 0, "k", "vector.npy"), D)))


@case
def shape_zero_columns(c):
    c.save(0, 3, "q", "vector.npy", np().zeros((N, 0)))
    return Expect(1, one(0, 3, c.path(0, 3, "q", "vector.npy"), "vectors have d = 0 columns"))


@case
def shape_one_query(c):
    for name in ("vector.npy", "position.npy", "bucket.npy", "example_id.npy"):
        c.save(1, 1, "q", name, c.load(1, 1, "q", name)[:1])
    return Expect(1, one(1, 1, c.path(1, 1, "q", "vector.npy"), "needs at least 2 queries, has 1 row"))


@case
def shape_zero_queries(c):
    for name in ("vector.npy", "position.npy", "bucket.npy", "example_id.npy"):
        c.save(0, 2, "q", name, c.load(0, 2, "q", name)[:0])
    return Expect(1, one(0, 2, c.path(0, 2, "q", "vector.npy"), "needs at least 2 queries, has 0 rows"))


@case
def shape_zero_keys(c):
    for name in ("vector.npy", "position.npy", "bucket.npy", "example_id.npy"):
        c.save(1, 0, "k", name, c.load(1, 0, "k", name)[:0])
    p = c.path(1, 0, "k", "vector.npy")
    return Expect(1, {(1, 0): (p, "has no keys (0 rows)"), (1, 1): (p, "has no keys (0 rows)")})


@case
def shape_window_length(c):
    c.save(0, 2, "q", "sliding_window.npy", np().full(N + 3, 32, dtype=np().int32))
    return Expect(1, one(0, 2, c.path(0, 2, "q", "sliding_window.npy"), "length mismatch"))


# ---------------------------------------------------------------- values

@case
def value_nan(c):
    p = c.poke(1, 3, "q", "vector.npy", (5, 2), float("nan"))
    return Expect(1, one(1, 3, p, "non-finite value (nan) at row 5, column 2"))


@case
def value_inf(c):
    p = c.poke(0, 1, "q", "vector.npy", (0, 0), float("-inf"))
    return Expect(1, one(0, 1, p, "non-finite value (-inf) at row 0, column 0"))


@case
def value_nan_in_keys(c):
    p = c.poke(1, 1, "k", "vector.npy", (2, 1), float("nan"))
    return Expect(1, {(1, 2): (p, "non-finite value (nan) at row 2, column 1"),
                      (1, 3): (p, "non-finite value (nan) at row 2, column 1")})


@case
def value_negative_position(c):
    p = c.poke(1, 2, "q", "position.npy", 3, -1)
    return Expect(1, one(1, 2, p, "negative position -1 at row 3"))


@case
def value_position_above_2_53(c):
    # 2^53 + 1 is no float64: refused, never rounded (issue 19); 2^53 itself is accepted.
    p = c.poke(1, 2, "q", "position.npy", 3, 2 ** 53 + 1)
    return Expect(1, one(1, 2, p, "position 9007199254740993 at row 3 is above 2^53 = 9007199254740992"))


@case
def value_two_windows(c):
    sw = np().full(N, 32, dtype=np().int64)
    sw[7] = 0
    sw[9] = 64
    c.save(0, 2, "q", "sliding_window.npy", sw)
    return Expect(1, one(0, 2, c.path(0, 2, "q", "sliding_window.npy"),
                         "two different positive sliding windows: 32 (row 0) and 64 (row 9)"))


@case
def value_constant_vectors(c):
    c.save(0, 3, "q", "vector.npy", np().zeros((N, D)))
    return Expect(0, changed=[(0, 3)])


@case
def value_constant_point_one_vectors(c):
    # Queries and keys all 0.1, whose float64 mean is not 0.1: no spread, so no drift direction
    # (drift_query_mean and bias_strength NaN, docs/method.md §7.3, §8.5; issue 25 item 3).
    c.save(0, 2, "q", "vector.npy", np().full((N, D), 0.1))
    c.save(0, 1, "k", "vector.npy", np().full((N, D), 0.1))  # the keys of q heads 2 and 3
    # Query positions whose mean is no float64 either (the clean ones centre exactly).
    c.save(0, 2, "q", "position.npy", (np().arange(N, dtype=np().int64) ** 2) % 97)

    def check(ck, name, out):
        _, rows = u.read_csv(os.path.join(out, "head_metrics.csv"))
        row = [r for r in rows if u.head_key(r) == (0, 2)]
        ck.check(len(row) == 1 and row[0]["drift_query_mean"] == "nan" and row[0]["bias_strength"] == "nan"
                 and row[0]["drift_slope_k"] == "nan",
                 "%s: constant 0.1 vectors should have no drift: %s" % (name, row))
    return Expect(0, changed=[(0, 2), (0, 3)], extra_check=check)


@case
def value_positions_offset_2_52(c):
    # Every position of layer 1 + 2^52 (below 2^53, accepted): what does not depend on where
    # positions start is the clean run's, to the bit (docs/method.md §2.3; issue 25 item 9:
    # q_R2_pos and q_beta_norm were 46% off). log2(t + 1), C and tau_j are absolute (changed).
    for kind, heads in (("q", Q_HEADS), ("k", K_HEADS)):
        for head in range(heads):
            p = c.load(1, head, kind, "position.npy")
            c.save(1, head, kind, "position.npy", p.astype(np().int64) + 2 ** 52)
    clean_metrics = os.path.join(c.work, "clean_out", "head_metrics.csv")
    clean_cells = os.path.join(c.work, "clean_out", "head_bucket_plasticity.csv")
    same = ["q_R2_pos", "q_beta_norm", "q_resid0_skew", "q_resid0_kurt", "q_resid0_ks_p", "q_noise_med_abs_skew",
            "q_noise_med_ks_p", "ap_overall", "ap_overall_se", "bias_strength", "drift_slope_k", "drift_query_mean"]

    def check(ck, name, out):
        for csv_name, clean, cols in (("head_metrics.csv", clean_metrics, same),
                                      ("head_bucket_plasticity.csv", clean_cells, ["n_pairs", "plasticity"])):
            _, want = u.read_csv(clean)
            _, got = u.read_csv(os.path.join(out, csv_name))
            want = [r for r in want if u.head_key(r)[0] == 1]
            got = [r for r in got if u.head_key(r)[0] == 1]
            ck.check(len(got) == len(want) and len(got) > 0, "%s: %s has %d rows of layer 1, the clean run %d"
                     % (name, csv_name, len(got), len(want)))
            for w, g in zip(want, got):
                for col in cols:
                    ck.check(w[col] == g[col], "%s: %s %s of head %s: %s, the clean run %s"
                             % (name, csv_name, col, u.head_key(w), g[col], w[col]))
    return Expect(0, changed=[(1, head) for head in range(Q_HEADS)], extra_check=check)


@case
def value_large_int32_positions(c):
    for layer, head, kind in ((1, 0, "q"), (1, 0, "k"), (1, 1, "q")):
        p = c.load(layer, head, kind, "position.npy")
        c.save(layer, head, kind, "position.npy", (p + 2 ** 31 - 64).astype("int32"))
    return Expect(0, changed=[(1, 0), (1, 1)])


@case
def value_every_bucket_distinct(c):
    for kind, head in (("q", 2), ("k", 1)):
        c.save(0, head, kind, "bucket.npy", np().arange(N, dtype=np().int64))
    return Expect(0, changed=[(0, 2), (0, 3)])


@case
def value_negative_buckets_and_ids(c):
    c.save(1, 3, "q", "bucket.npy", -c.load(1, 3, "q", "bucket.npy"))
    c.save(1, 3, "q", "example_id.npy", -c.load(1, 3, "q", "example_id.npy") - 5)
    return Expect(0, changed=[(1, 3)])


# ---------------------------------------------------------------- folders and layout

@case
def folder_query_not_captured(c):
    shutil.rmtree(c.path(1, 3, "q"))
    return Expect(0, keep=lambda layer, head: (layer, head) != (1, 3),
                  messages=["7 of the 8 query heads of the layout present: 7 analyzed, 0 failed"])


@case
def folder_key_not_captured(c):
    shutil.rmtree(c.path(0, 1, "k"))
    p = c.path(0, 1, "k")
    return Expect(1, {(0, 2): (p, "folder not found (the keys of query head 2's GQA group, key head 1)"),
                      (0, 3): (p, "folder not found (the keys of query head 3's GQA group, key head 1)")})


@case
def folder_is_a_file(c):
    shutil.rmtree(c.path(1, 2, "q"))
    open(c.path(1, 2, "q"), "w").close()
    return Expect(1, one(1, 2, c.path(1, 2, "q"), "is a regular file, not a folder"))


@case
def folder_symlink_loop(c):
    shutil.rmtree(c.path(0, 0, "q"))
    os.symlink("l00h00q", c.path(0, 0, "q"))
    return Expect(1, one(0, 0, c.path(0, 0, "q"), "symbolic link loop"))


@case
def folder_unreadable(c):
    prefix = u.without_dac_override()
    if prefix is None:
        return None
    os.chmod(c.path(0, 3, "q"), 0)
    return Expect(1, one(0, 3, c.path(0, 3, "q"), "permission denied (the folder cannot be entered)"), prefix=prefix)


@case
def folder_huge_layer_number(c):
    os.makedirs(os.path.join(c.root, "l4000000000h00q"))
    return Expect(2, messages=["l4000000000h00q: layer number 4000000000 is above the limit 9999"])


@case
def folder_huge_head_number(c):
    os.makedirs(os.path.join(c.root, "l00h99999999q"))
    return Expect(2, messages=["l00h99999999q: head number 99999999 is above the limit 9999"], layout=False)


@case
def folder_number_beyond_64_bits(c):
    os.makedirs(os.path.join(c.root, "l99999999999999999999h00q"))
    return Expect(2, messages=["layer number 99999999999999999999 is above the limit 9999"])


@case
def folder_ten_million_heads(c):
    os.makedirs(os.path.join(c.root, "l00h9999q"))
    return Expect(2, messages=["folder 'l00h9999q' is outside the layout (num_q_heads = 4, heads 0-3)"])


@case
def folder_ten_thousand_heads_inferred(c):
    # Inferring the layout from this folder would mean 2 x 10000 query heads, almost all absent.
    os.makedirs(os.path.join(c.root, "l00h9999q"))
    return Expect(2, layout=False, messages=["num_q_heads and num_k_heads are not known"])


@case
def folder_outside_layout_layers(c):
    return Expect(2, messages=["folder 'l01h00q' is outside the layout (num_layers = 1, layers 0)",
                               "use --layers and --heads"], args=["--num-layers", 1])


@case
def folder_name_not_canonical(c):
    os.rename(c.path(1, 2, "q"), os.path.join(c.root, "l001h02q"))
    return Expect(2, messages=["l001h02q: not in the dump's format (expected 'l01h02q'"])


@case
def folder_name_single_digits(c):
    os.makedirs(os.path.join(c.root, "l0h0k"))
    return Expect(2, messages=["l0h0k: not in the dump's format (expected 'l00h00k'"])


@case
def folder_stray_entries_ignored(c):
    for name in ("README", "l00h00q.bak", "l00h00x", "notes"):
        os.makedirs(os.path.join(c.root, name))
    open(os.path.join(c.root, "l01h01"), "w").close()
    return Expect(0)


@case
def layout_partial_set_not_inferred(c):
    shutil.rmtree(c.path(1, 3, "q"))
    return Expect(2, layout=False, messages=[
        "num_q_heads and num_k_heads are not known", "give --num-q-heads and --num-k-heads"])


@case
def layout_never_inferred_from_a_complete_looking_set(c):
    # Issue 19: query heads 0-5 of an 8-query/2-key model (and key heads 0-1) look like a
    # complete 6/2 dump; the counts are asked for, never guessed.
    return Expect(2, layout=False, messages=["num_q_heads and num_k_heads are not known",
                                             "--model-config with the model's config.json"])


@case
def layout_from_model_config(c):
    shutil.rmtree(c.path(0, 3, "q"))
    model = os.path.join(c.work, c.name + "_config.json")
    with open(model, "w") as f:
        f.write('{"architectures": ["ToyForCausalLM"], "num_attention_heads": 4, "num_key_value_heads": 2, '
                '"num_hidden_layers": 2, "hidden_size": 16}')
    return Expect(0, layout=False, args=["--model-config", model], keep=lambda layer, head: (layer, head) != (0, 3),
                  messages=["layout from " + model, "7 of the 8 query heads of the layout present"])


@case
def layout_from_multimodal_model_config(c):
    # A multimodal config.json: the language model's counts are in text_config (the vision
    # tower's in vision_config are not read; issue 25 item 14).
    model = os.path.join(c.work, c.name + "_config.json")
    with open(model, "w") as f:
        f.write('{"architectures": ["ToyForConditionalGeneration"], "model_type": "llava", '
                '"vision_config": {"num_attention_heads": 16, "num_hidden_layers": 24}, '
                '"text_config": {"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}}')
    return Expect(0, layout=False, args=["--model-config", model], messages=["layout from " + model])


@case
def layout_model_config_multi_query_conflict(c):
    # multi_query (one key head) beside num_key_value_heads 2: refused, naming the file and keys.
    model = os.path.join(c.work, c.name + "_config.json")
    with open(model, "w") as f:
        f.write('{"model_type": "gpt_bigcode", "n_head": 4, "n_layer": 2, "multi_query": true, '
                '"num_key_value_heads": 2}')
    return Expect(2, layout=False, args=["--model-config", model],
                  messages=["model_config %s: multi_query is true (one key head) but num_key_value_heads says 2"
                            % model])


@case
def layout_model_config_disagrees(c):
    model = os.path.join(c.work, c.name + "_config.json")
    with open(model, "w") as f:
        f.write('{"num_attention_heads": 8, "num_key_value_heads": 2}')
    return Expect(2, args=["--model-config", model],
                  messages=["num_q_heads: --num-q-heads (or the --config file) says 4 but --model-config %s says 8"
                            % model])


@case
def layout_multiple_names_only_counts_given(c):
    # "must be a multiple of" names the counts as given, with where they come from.
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": 4}')
    return Expect(2, layout=False, args=["--num-k-heads", 3],
                  messages=["num_q_heads (4, from metadata.json) must be a multiple of num_k_heads (3, given)"])


@case
def metadata_duplicate_key(c):
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": 4, "num_k_heads": 2, "num_q_heads": 8}')
    return Expect(2, layout=False, messages=["metadata.json: key 'num_q_heads' is given twice"])


@case
def layout_from_metadata(c):
    shutil.rmtree(c.path(0, 3, "q"))
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"model": "toy", "num_layers": 2, "num_q_heads": 4, "num_k_heads": 2, "sampled": true}')
    return Expect(0, layout=False, keep=lambda layer, head: (layer, head) != (0, 3),
                  messages=["layout from metadata.json", "7 of the 8 query heads of the layout present"])


@case
def layout_metadata_disagrees(c):
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": 8, "num_k_heads": 2}')
    return Expect(2, messages=["num_q_heads: --num-q-heads (or the --config file) says 4 but",
                               "metadata.json says 8"])


@case
def layout_metadata_not_json(c):
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": [4, ')
    return Expect(2, layout=False, messages=["metadata.json: not valid JSON"])


@case
def layout_metadata_bad_count(c):
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": 123456789012345678901234567890, "num_k_heads": 2}')
    return Expect(2, layout=False, messages=["metadata.json: num_q_heads: '123456789012345678901234567890' is out of range"])


@case
def metadata_second_document(c):
    with open(os.path.join(c.root, "metadata.json"), "w") as f:
        f.write('{"num_q_heads": 4, "num_k_heads": 2}\n---\n{"num_q_heads": 8}\n')
    return Expect(2, layout=False, messages=["metadata.json: holds 2 YAML documents"])


@case
def layout_metadata_is_folder(c):
    os.makedirs(os.path.join(c.root, "metadata.json"))
    return Expect(2, layout=False, messages=["metadata.json: is a folder, not a configuration file"])


@case
def layout_not_multiple(c):
    return Expect(2, args=["--num-q-heads", 4, "--num-k-heads", 3], layout=False,
                  messages=["num_q_heads (4, given) must be a multiple of num_k_heads (3, given)"])


@case
def data_root_is_file(c):
    shutil.rmtree(c.root)
    open(c.root, "w").close()
    return Expect(2, messages=["data_root: '%s' is a regular file, not a folder" % c.root])


@case
def data_root_symlink_loop(c):
    shutil.rmtree(c.root)
    os.symlink(os.path.basename(c.root), c.root)
    return Expect(2, messages=["data_root: '%s': symbolic link loop" % c.root])


@case
def data_root_unreadable(c):
    prefix = u.without_dac_override()
    if prefix is None:
        return None
    os.chmod(c.root, 0o311)
    return Expect(2, prefix=prefix, messages=["data_root: cannot list '%s': permission denied" % c.root])


@case
def data_root_without_queries(c):
    for layer, head in ALL_HEADS:
        shutil.rmtree(c.path(layer, head, "q"))
    return Expect(2, messages=["data_root: no query folders (l{LL}h{HH}q) in"])


# ---------------------------------------------------------------- selection

@case
def select_layers(c):
    return Expect(0, args=["--layers", "1"], keep=lambda layer, head: layer == 1,
                  messages=["8 of the 8 query heads of the layout present, 4 of them selected: 4 analyzed"])


@case
def select_heads_list_and_range(c):
    return Expect(0, args=["--heads", " 0-1 , 3"], keep=lambda layer, head: head in (0, 1, 3))


@case
def select_layers_outside(c):
    return Expect(2, args=["--layers", "0,5"], messages=["--layers: layer 5 is outside the layout (2 layers: 0-1)"])


@case
def select_descending_range(c):
    return Expect(2, args=["--heads", "3-1"], messages=["--heads: '3-1' is a descending range"])


@case
def select_empty_item(c):
    return Expect(2, args=["--heads", "1,,2"], messages=["--heads: '1,,2' has an empty item"])


@case
def select_negative(c):
    return Expect(2, args=["--layers=-1"], messages=["--layers: '-1' is not a non-negative index"])


@case
def select_number_beyond_64_bits(c):
    return Expect(2, args=["--layers", "0-99999999999999999999999"], messages=["--layers: '99999999999999999999999' is out of range"])


@case
def select_only_absent_heads(c):
    shutil.rmtree(c.path(0, 3, "q"))
    shutil.rmtree(c.path(1, 3, "q"))
    return Expect(2, args=["--heads", "3"], messages=["the selection --heads 3 matches no query head present"])


@case
def select_in_config_as_list(c):
    cfg = os.path.join(c.work, c.name + ".yaml")
    with open(cfg, "w") as f:
        f.write("layers: [0]\nheads:\n  - 0-1\n  - 3\n")
    return Expect(0, args=["--config", cfg], keep=lambda layer, head: layer == 0 and head != 2)


# ---------------------------------------------------------------- configuration files and flags

def config_case(name, args, needle, yaml_text=None, code=2, layout=True):
    def fn(c):
        extra = list(args)
        if yaml_text is not None:
            cfg = os.path.join(c.work, name + ".yaml")
            with open(cfg, "w") as f:
                f.write(yaml_text)
            extra += ["--config", cfg]
        return Expect(code, args=extra, messages=[needle], layout=layout)
    fn.__name__ = name
    CASES.append(fn)


config_case("flag_unknown", ["--bogus", "1"], "unknown option '--bogus'")
config_case("flag_underscore", ["--num_layers", "2"], "did you mean --num-layers")
config_case("flag_not_a_number", ["--num-layers", "abc"], "--num-layers: 'abc' is not a non-negative integer")
config_case("flag_zero_layers", ["--num-layers", "0"], "--num-layers: 0 must be >= 1")
config_case("flag_layers_above_limit", ["--num-layers", "10001"], "--num-layers: 10001 must be >= 1 and <= 10000")
config_case("flag_p_alpha_range", ["--p-alpha", "2"], "--p-alpha: 2 must be in [0, 1]")
config_case("flag_seed_negative", ["--seed", "-1"], "--seed: '-1' is not a non-negative integer")
config_case("flag_seed_beyond_64_bits", ["--seed", "18446744073709551616"], "--seed: '18446744073709551616' is out of range")
config_case("flag_threads_fraction", ["--threads", "1.5"], "--threads: '1.5' is not a non-negative integer")
config_case("flag_threads_huge", ["--threads", "100000"], "--threads: 100000 must be >= 0 and <= 4096")
config_case("flag_nan", ["--max-rel-dist", "nan"], "--max-rel-dist: 'nan' is not a finite number")
config_case("flag_subnormal", ["--max-rel-dist", "1e-310"],
            "--max-rel-dist: '1e-310' is too small: its magnitude is below the smallest normal float64")
config_case("flag_pairs_zero", ["--num-pairs-per-bucket", "0"], "--num-pairs-per-bucket: 0 must be >= 1")
config_case("flag_pairs_huge", ["--num-pairs-per-bucket", str(2 ** 40)], "--num-pairs-per-bucket: 1099511627776 must be")
config_case("flag_exponent", ["--max-tokens-per-head", "1e5"], "--max-tokens-per-head: '1e5' is not a non-negative integer")
config_case("flag_empty", ["--normality-max-dims", ""], "--normality-max-dims: missing value")
config_case("flag_missing_value", ["--seed"], "--seed: missing value")
config_case("flag_stray_argument", ["stray"], "unexpected argument 'stray'")
config_case("flag_no_data_root", ["--data-root="], "--data-root: empty value")
config_case("config_missing", ["--config", "/no/such/file.yaml"], "--config /no/such/file.yaml: file not found")
config_case("config_unknown_key", [], "unknown key 'foo'", "num_layers: 2\nfoo: 1\n")
config_case("config_syntax", [], "not valid YAML", "seed: [1, 2\n")
config_case("config_list_for_scalar", [], "seed: expected a single value, not a list or mapping", "seed: [1, 2]\n")
config_case("config_bad_real", [], "p_alpha: 'abc' is not a number", "p_alpha: abc\n")
config_case("config_null", [], "threads: missing value", "threads:\n")
config_case("config_top_level_list", [], "expected a mapping of keys to values", "- 1\n- 2\n")
config_case("config_twice", [], "seed: given twice", "seed: 1\nseed: 2\n")
config_case("config_second_document", [], "holds 2 YAML documents (separated by '---'); give one",
            "seed: 1\n---\nseed: 2\n")
config_case("config_count_above_limit", [], "num_layers: 99999999 must be >= 1 and <= 10000", "num_layers: 99999999\n",
            layout=False)
config_case("config_nested_list", [], "seed: expected a single value", "seed: " + "[" * 100 + "]" * 100 + "\n")
config_case("config_deep_flow_nesting", [], "not valid YAML", "seed: " + "[" * 100000 + "]" * 100000 + "\n")
config_case("config_deep_block_nesting", [], "not valid YAML", "seed:\n" + "".join(" " * i + "-\n" for i in range(1400)))
config_case("config_mapping_value", [], "layers: expected a value or a list of values", "layers: {a: 1}\n")
config_case("config_alias_bomb", [], "unknown key 'a'", "a: &a [1,1,1,1]\nb: &b [*a,*a,*a,*a]\nc: [*b,*b,*b,*b]\n")


@case
def config_is_folder(c):
    return Expect(2, args=["--config", c.work], messages=["--config %s: is a folder, not a configuration file" % c.work])


@case
def config_too_large(c):
    cfg = os.path.join(c.work, "large.yaml")
    with open(cfg, "w") as f:
        f.write("# padding\n" * 200000)
    return Expect(2, args=["--config", cfg], messages=["2000000 bytes; a configuration file may have at most 1048576"])


@case
def config_is_fifo(c):
    cfg = os.path.join(c.work, "fifo.yaml")
    if not os.path.exists(cfg):
        os.mkfifo(cfg)
    return Expect(2, args=["--config", cfg], messages=["is a FIFO, not a configuration file"])


@case
def config_overridden_by_flags(c):
    cfg = os.path.join(c.work, "override.yaml")
    with open(cfg, "w") as f:
        f.write("data_root: /no/such/dump\nseed: 5\nlayers: 1\n")
    return Expect(0, args=["--config", cfg, "--data-root", c.root, "--seed", 0, "--layers=0-1"])


# ---------------------------------------------------------------- output folder

@case
def output_is_a_file(c):
    shutil.rmtree(c.out)
    open(c.out, "w").close()
    return Expect(2, output="none", messages=["output_dir '%s' is a regular file, not a folder" % c.out])


@case
def output_parent_is_a_file(c):
    shutil.rmtree(c.out)
    open(c.out, "w").close()
    c.out = os.path.join(c.out, "results")
    return Expect(2, output="none", messages=["output_dir '%s': folder not found (a part of the path is not a folder)"
                                              % c.out])


@case
def output_not_writable(c):
    prefix = u.without_dac_override()
    if prefix is None:
        return None
    os.chmod(c.out, 0o555)
    return Expect(2, prefix=prefix, messages=["output_dir '%s': not writable (permission denied)" % c.out])


def hold_lock(c, owner_line):
    """Holds OUT's lock (until the run ends) with `owner_line` written into it."""
    os.makedirs(os.path.join(c.out, u.STATE), exist_ok=True)
    holder = open(os.path.join(c.out, u.STATE, "lock"), "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)
    holder.truncate(0)
    holder.write(owner_line)
    holder.flush()
    c.keep_open = holder


@case
def output_in_use(c):
    hold_lock(c, "pid %d on test-holder\n" % os.getpid())
    return Expect(2, messages=["output_dir '%s' is in use by another run (pid %d on test-holder)" % (c.out, os.getpid())])


@case
def output_in_use_stale_owner_line(c):
    # The lock holds the owner line of a run that finished long ago; another process holds
    # the lock: the message names the holder, never the finished run (issue 19).
    hold_lock(c, "pid %d on %s\n" % (4194304 + 7, host()))
    return Expect(2, messages=["output_dir '%s' is in use by another run (pid %d (" % (c.out, os.getpid()),
                               "holds its lock"])


def victim_check(victim, text, absent=False):
    def check(ck, name, out):
        if absent:
            ck.check(not os.path.lexists(victim), "%s: %s was created outside the output folder" % (name, victim))
        else:
            ck.check(open(victim).read() == text, "%s: %s outside the output folder was changed" % (name, victim))
    return check


def replace_lock(c, make):
    """Replaces OUT/.ap_results/lock by make(lock_path); returns a file outside OUT that
    holds "precious" (the target of the links made)."""
    victim = os.path.join(c.work, c.name + "_victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    lock = os.path.join(c.out, u.STATE, "lock")
    if os.path.lexists(lock):
        os.remove(lock)
    make(lock, victim)
    return victim


@case
def output_lock_links_outside(c):
    # OUT/.ap_results/lock -> a file outside OUT: never followed, truncated or written (issue 19).
    victim = replace_lock(c, lambda lock, victim: os.symlink(os.path.relpath(victim, os.path.dirname(lock)), lock))
    return Expect(2, messages=["lock: is a symbolic link (to '", "it is not followed"],
                  extra_check=victim_check(victim, "precious\n"))


@case
def output_lock_dangling_link(c):
    created = os.path.join(c.work, c.name + "_created")
    replace_lock(c, lambda lock, victim: os.symlink(created, lock))
    return Expect(2, messages=["lock: is a symbolic link (to '%s')" % created],
                  extra_check=victim_check(created, None, absent=True))


@case
def output_lock_hard_link_outside(c):
    victim = replace_lock(c, lambda lock, victim: os.link(victim, lock))
    return Expect(2, messages=["lock: has 2 names"], extra_check=victim_check(victim, "precious\n"))


@case
def output_lock_is_fifo(c):
    replace_lock(c, lambda lock, victim: os.mkfifo(lock))
    return Expect(2, messages=["lock: is a FIFO, not this program's lock file"])


@case
def threads_cannot_be_started(c):
    # Issue 19: a worker thread that cannot be created aborted the program (SIGABRT, no
    # message). Now the workers that could be started do the work, with a note. The process
    # limit binds only a user other than root, so the run drops to nobody (when root).
    setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
    if os.geteuid() == 0:
        if setpriv is None or prlimit is None:
            return None
        prefix = [prlimit, "--nproc=1", setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        for top in (c.root, c.out):
            for dirpath, dirnames, filenames in os.walk(top):
                os.chmod(dirpath, 0o777)
                for f in filenames:
                    if not os.path.islink(os.path.join(dirpath, f)):
                        os.chmod(os.path.join(dirpath, f), 0o666)
    else:
        prefix = [prlimit, "--nproc=1"] if prlimit else None
        if prefix is None:
            return None
    # OpenBLAS's own pool is not this case's subject: one BLAS thread. Under the sanitizers,
    # LeakSanitizer stops the world with a thread of its own, which the process limit forbids.
    env = ["env", "OPENBLAS_NUM_THREADS=1"]
    if "ASAN_OPTIONS" in os.environ:
        env.append("ASAN_OPTIONS=" + os.environ["ASAN_OPTIONS"] + ":detect_leaks=0")
    return Expect(0, prefix=env + prefix,
                  messages=["note: only 1 of the 2 worker threads could be started"])


@case
def output_previous_set_kept_for_readers(c):
    # The README's consistent read: resolve .ap_results/current once, read from there; a run
    # that finishes in between leaves the resolved set readable (kept as `previous`).
    state = os.path.join(c.out, u.STATE)
    resolved = os.path.join(state, os.readlink(os.path.join(state, "current")))
    before = {n: open(os.path.join(resolved, n), "rb").read() for n in u.CSVS}

    def check(ck, name, out):
        ck.check(os.path.realpath(os.path.join(state, "current")) != os.path.realpath(resolved),
                 "%s: the run did not make a new set" % name)
        try:
            after = {n: open(os.path.join(resolved, n), "rb").read() for n in u.CSVS}
        except OSError as e:
            ck.check(False, "%s: the resolved set is gone after one run: %s" % (name, e))
            return
        ck.check(after == before, "%s: the resolved set changed" % name)
        ck.check(os.readlink(os.path.join(state, "previous")) == os.path.basename(resolved),
                 "%s: `previous` does not name the set before" % name)
    return Expect(0, extra_check=check)


@case
def output_name_is_a_folder(c):
    os.remove(os.path.join(c.out, "head_profile.csv"))
    os.makedirs(os.path.join(c.out, "head_profile.csv"))
    return Expect(2, output="none", messages=["head_profile.csv: exists and is not a result file of this program (a folder)"])


@case
def output_name_is_foreign_link(c):
    os.remove(os.path.join(c.out, "head_metrics.csv"))
    os.symlink("/etc/hostname", os.path.join(c.out, "head_metrics.csv"))
    return Expect(2, output="none", messages=["head_metrics.csv: exists and is not a result file of this program "
                                              "(a symbolic link to '/etc/hostname')"])


@case
def output_user_files_kept(c):
    with open(os.path.join(c.out, "notes.txt"), "w") as f:
        f.write("my notes\n")
    os.makedirs(os.path.join(c.out, "figures"))
    with open(os.path.join(c.out, "figures", "a.png"), "wb") as f:
        f.write(b"\x89PNG")

    def check(ck, name, out):
        ck.check(open(os.path.join(out, "notes.txt")).read() == "my notes\n", "%s: notes.txt changed" % name)
        ck.check(open(os.path.join(out, "figures", "a.png"), "rb").read() == b"\x89PNG", "%s: figures changed" % name)
    return Expect(0, extra_check=check)


@case
def output_earlier_version_files(c):
    shutil.rmtree(c.out)
    os.makedirs(c.out)
    for name in u.CSVS:
        with open(os.path.join(c.out, name), "w") as f:
            f.write("written by an earlier version\n")
    return Expect(0)


@case
def output_no_head_succeeds(c):
    for head in range(K_HEADS):
        for layer in range(LAYERS):
            with open(c.path(layer, head, "k", "vector.npy"), "wb") as f:
                f.write(b"garbage")
    failed = {}
    for layer, head in ALL_HEADS:
        failed[(layer, head)] = (c.path(layer, head // 2, "k", "vector.npy"), "not an NPY file")
    return Expect(1, failed, output="earlier",
                  messages=["0 analyzed, 8 failed; no head was analyzed, so the earlier results in %s are left as they were"
                            % c.out])


@case
def output_no_head_succeeds_no_earlier(c):
    shutil.rmtree(c.out)
    for layer, head in ALL_HEADS:
        os.remove(c.path(layer, head, "q", "position.npy"))
    failed = {h: (c.path(h[0], h[1], "q", "position.npy"), "file not found") for h in ALL_HEADS}
    return Expect(1, failed, output="none", messages=["no head was analyzed, so nothing was written to %s" % c.out])


def fake_leftovers(c, token):
    state = os.path.join(c.out, u.STATE)
    for kind in ("tmp", "set", "link", "name", "legacy"):
        path = os.path.join(state, "%s-%s" % (kind, token))
        if kind in ("link", "name"):
            os.symlink("x", path)
        else:
            os.makedirs(path)
            open(os.path.join(path, "head_metrics.csv"), "w").close()
    return ["%s-%s" % (kind, token) for kind in ("tmp", "set", "link", "name", "legacy")]


def boot8():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return "".join(ch for ch in f.read() if ch in "0123456789abcdef")[:8]


def start_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def host():
    return "".join(ch if ch.isalnum() or ch in ".-" else "_" for ch in socket.gethostname()) or "localhost"


@case
def output_leftovers_of_dead_run(c):
    # pid 1 with another start time: that process is gone; and a pid that does not exist.
    names = fake_leftovers(c, "1-%d-%s-%s" % (start_ticks(1) + 12345, boot8(), host()))
    names += fake_leftovers(c, "%d-5-%s-%s" % (4194304 + 7, boot8(), host()))
    names += fake_leftovers(c, "77-5-00000000-%s" % host())   # another boot

    def check(ck, name, out):
        left = [e for e in names if os.path.lexists(os.path.join(out, u.STATE, e))]
        ck.check(not left, "%s: leftovers of dead runs not removed: %s" % (name, left))
    return Expect(0, extra_check=check)


@case
def output_leftovers_of_live_or_foreign_run(c):
    mine = fake_leftovers(c, "%d-%d-%s-%s" % (os.getpid(), start_ticks(os.getpid()), boot8(), host()))
    foreign = fake_leftovers(c, "%d-%d-%s-other-host.example" % (os.getpid(), 5, boot8()))

    def check(ck, name, out):
        left = [e for e in mine + foreign if os.path.lexists(os.path.join(out, u.STATE, e))]
        ck.check(len(left) == len(mine + foreign), "%s: leftovers of a live or foreign run were removed" % name)
    return Expect(0, extra_check=check, allowed_leftovers=mine + foreign,
                  messages=["was left by a run on host other-host.example and is left alone"])


# ---------------------------------------------------------------- ap_compare and compare_runs (issue 25)
#
# Two result sets A and B of the clean dump (token-level errors, two seeds) and an output folder
# that already holds a comparison of them; each case breaks one thing in A, B or the output
# folder, runs ap_compare (and, with --python, attention_plasticity.compare_runs in a child
# process) and asserts the exit status (UsageError for Python), the message, that nothing waits
# (killed after 60 s), that A and B are unchanged byte for byte (nothing lost), and that the
# earlier comparison is unchanged after a refusal (or is the clean comparison after a success).

COMPARE_FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")
COMPARE_CASES = []


def compare_case(fn):
    COMPARE_CASES.append(fn)
    return fn


class CompareExpect:
    """code: 0 compared, 2 refused. messages: texts stderr (or the Python error) must hold.
    out: the output folder to use (default the one with the earlier comparison). names: --names."""

    def __init__(self, code, messages=(), out=None, names=None, cleanup=None):
        self.code = code
        self.messages = list(messages)
        self.out = out
        self.names = names
        self.cleanup = cleanup


class CompareCtx:
    def __init__(self, work, name, set_a, set_b, earlier):
        self.work = work
        self.name = name
        self.a = os.path.join(work, name, "A")
        self.b = os.path.join(work, name, "B")
        self.out = os.path.join(work, name, "out")
        u.copy_tree(set_a, self.a)
        u.copy_tree(set_b, self.b)
        u.copy_tree(earlier, self.out)

    def set_file(self, folder, name):
        """The file `name` of the current set of `folder` (the bytes the folder's link names)."""
        return os.path.realpath(os.path.join(folder, name))

    def plain(self, folder):
        """Turns a result folder into plain copies of its files (as a user copies them)."""
        files = {}
        for name in os.listdir(folder):
            p = os.path.join(folder, name)
            if os.path.islink(p) and os.path.exists(p):
                with open(p, "rb") as f:
                    files[name] = f.read()
        shutil.rmtree(folder)
        os.makedirs(folder)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)

    def tamper(self, folder, name, fn):
        """Rewrites one CSV of the set in place: fn(lines) -> lines (header first)."""
        path = self.set_file(folder, name)
        with open(path) as f:
            lines = f.read().splitlines()
        os.chmod(path, 0o644)
        with open(path, "w") as f:
            f.write("\n".join(fn(lines)) + "\n")


def set_cell(lines, row, column, value):
    header = lines[0].split(",")
    fields = lines[row].split(",")
    fields[header.index(column)] = value
    return lines[:row] + [",".join(fields)] + lines[row + 1:]


@compare_case
def compare_clean(c):
    return CompareExpect(0)


@compare_case
def compare_metrics_is_fifo_in_set(c):
    p = c.set_file(c.b, "head_metrics.csv")
    os.remove(p)
    os.mkfifo(p)
    return CompareExpect(2, ["%s/head_metrics.csv: is a FIFO, not a regular file" % c.b])


def replaced_in_plain_copy(c, folder, name, make, kind):
    """Turns `folder` into plain copies, puts make(path) in place of its file `name`: refused
    as `kind`, not a regular file."""
    c.plain(folder)
    p = os.path.join(folder, name)
    os.remove(p)
    make(p)
    return CompareExpect(2, ["%s/%s: is %s, not a regular file" % (folder, name, kind)])


@compare_case
def compare_metrics_is_fifo_plain(c):
    return replaced_in_plain_copy(c, c.a, "head_metrics.csv", os.mkfifo, "a FIFO")


@compare_case
def compare_profile_links_to_fifo(c):
    fifo = os.path.join(c.work, c.name, "fifo")
    os.mkfifo(fifo)
    return replaced_in_plain_copy(c, c.b, "head_profile.csv", lambda p: os.symlink(fifo, p), "a FIFO")


@compare_case
def compare_metrics_is_dev_zero(c):
    return replaced_in_plain_copy(c, c.a, "head_metrics.csv", lambda p: os.symlink("/dev/zero", p),
                                  "a character device")


@compare_case
def compare_profile_beyond_memory(c):
    # A sparse file larger than the machine's memory: refused by its size, nothing read.
    c.plain(c.b)
    p = os.path.join(c.b, "head_profile.csv")
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with open(p, "r+b") as f:
        f.truncate(2 * memory)
    return CompareExpect(2, ["%s/head_profile.csv: %d bytes, more than the" % (c.b, 2 * memory)])


@compare_case
def compare_metrics_is_folder(c):
    return replaced_in_plain_copy(c, c.a, "head_metrics.csv", os.makedirs, "a folder")


@compare_case
def compare_influences_endless_line(c):
    c.plain(c.b)
    with open(os.path.join(c.b, "head_sequence_influence.csv"), "wb") as f:
        f.write(b"0" * 300000)
    return CompareExpect(2, ["%s/head_sequence_influence.csv: a line longer than 65536 bytes" % c.b])


@compare_case
def compare_lock_is_fifo(c):
    lock = os.path.join(c.a, u.STATE, "lock")
    os.remove(lock)
    os.mkfifo(lock)
    return CompareExpect(2, ["lock: is a FIFO, not this program's lock file"])


@compare_case
def compare_lock_links_to_fifo(c):
    fifo = os.path.join(c.work, c.name, "fifo")
    os.mkfifo(fifo)
    lock = os.path.join(c.b, u.STATE, "lock")
    os.remove(lock)
    os.symlink(fifo, lock)
    return CompareExpect(2, ["lock: is a symbolic link (to '%s'), not this program's lock file" % fifo])


@compare_case
def compare_set_being_written(c):
    lock = os.path.join(c.a, u.STATE, "lock")
    c.keep_open = open(lock, "r+")
    fcntl.flock(c.keep_open, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return CompareExpect(2, ["result set '%s': a run is writing into it" % c.a, "then compare"])


@compare_case
def compare_standard_error_infinite(c):
    c.tamper(c.b, "head_metrics.csv", lambda lines: set_cell(lines, 2, "ap_overall_se", "inf"))
    return CompareExpect(2, ["%s/head_metrics.csv: line 3: column ap_overall_se: inf is not a standard error" % c.b])


@compare_case
def compare_standard_error_negative(c):
    c.tamper(c.a, "head_profile.csv", lambda lines: set_cell(lines, 1, "plasticity_se", "-0.01"))
    return CompareExpect(2, ["%s/head_profile.csv: line 2: column plasticity_se: -0.01 is not a standard error" % c.a])


@compare_case
def compare_plasticity_out_of_range(c):
    c.tamper(c.b, "head_metrics.csv", lambda lines: set_cell(lines, 4, "ap_overall", "7.5"))
    return CompareExpect(2, ["%s/head_metrics.csv: line 5: column ap_overall: 7.5 is not a plasticity (within [0, 1]"
                             % c.b])


@compare_case
def compare_column_duplicated(c):
    def dup(lines):
        header = lines[0].split(",")
        i = header.index("ap_overall_se")
        return [",".join(line.split(",") + [line.split(",")[i]]) for line in lines]
    c.tamper(c.a, "head_metrics.csv", dup)
    return CompareExpect(2, ["%s/head_metrics.csv: line 1: column 'ap_overall_se' appears twice" % c.a])


@compare_case
def compare_row_duplicated(c):
    c.tamper(c.b, "head_profile.csv", lambda lines: lines + [lines[1]])
    return CompareExpect(2, ["%s/head_profile.csv: line " % c.b, " has two rows"])


@compare_case
def compare_set_name_with_quote(c):
    return CompareExpect(2, ["set name 'a\"b' holds a comma, a double quote or a line break"], names=["a\"b", "c"])


@compare_case
def compare_output_is_input_through_link(c):
    alias = os.path.join(c.work, c.name, "alias")
    os.symlink(c.a, alias)
    return CompareExpect(2, ["the output folder '%s' is the result set '%s'" % (alias, c.a)], out=alias)


@compare_case
def compare_output_inside_input(c):
    inner = os.path.join(c.b, "comparison")
    return CompareExpect(2, ["the output folder '%s' is inside the result set '%s'" % (inner, c.b)], out=inner)


@compare_case
def compare_output_holds_input(c):
    # The sets as subfolders of the output (as examples/slurm lays out shards): nothing of them is
    # written or replaced, so the comparison is made.
    outer = os.path.join(c.work, c.name)
    return CompareExpect(0, out=outer, names=["A", "B"])


@compare_case
def compare_output_is_an_analysis_folder(c):
    # Another analysis' folder (not compared): its set would be replaced and its links strand.
    other = os.path.join(c.work, c.name, "other_analysis")
    u.copy_tree(c.a, other)
    return CompareExpect(2, ["the output folder '%s' holds the results of another program (head_bucket_plasticity.csv"
                             % other], out=other)


@compare_case
def compare_output_bind_mount_of_input(c):
    mount = shutil.which("mount")
    target = os.path.join(c.work, c.name, "mounted")
    os.makedirs(target)
    if mount is None or u.run([mount, "--bind", c.b, target], quiet=True)[0] != 0:
        return None

    def cleanup():
        u.run(["umount", target], quiet=True)
    return CompareExpect(2, ["the output folder '%s' is the result set '%s'" % (target, c.b)], out=target,
                         cleanup=cleanup)


PYTHON_COMPARE = """
import sys
import attention_plasticity as ap
try:
    ap.compare_runs(sys.argv[3:5], output_dir=sys.argv[1], names=sys.argv[2].split('|') if sys.argv[2] else None)
except ap.UsageError as e:
    print(e, file=sys.stderr)
    sys.exit(2)
"""


def snapshot(folder):
    """{relative path: what is there} of a whole tree, links not followed: a regular file's bytes,
    a link's text, or the kind of anything else (a FIFO is never opened)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("folder",)
            elif stat.S_ISREG(st.st_mode) and st.st_size < (1 << 24):
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), st.st_size)
    return out


def run_compare_case(ck, compare, python, work, set_a, set_b, earlier, clean_comparison, fn):
    name = fn.__name__
    c = CompareCtx(work, name, set_a, set_b, earlier)
    c.keep_open = None
    e = fn(c)
    if e is None:
        print("SKIP %s: a bind mount cannot be made here (not root?)" % name)
        return False
    out = e.out or c.out
    inputs_before = {f: snapshot(f) for f in (c.a, c.b)}
    out_before = snapshot(out)
    runs = [("ap_compare", [compare, "--output-dir", out] + (["--names", ",".join(e.names)] if e.names else [])
             + [c.a, c.b])]
    if python:
        runs.append(("compare_runs", [sys.executable, "-c", PYTHON_COMPARE, out, "|".join(e.names or []), c.a, c.b]))
    failures_before = len(ck.failures)
    for program, args in runs:
        before = {f: open(os.path.join(c.out, f), "rb").read() for f in COMPARE_FILES}
        code, _, err = u.run(args, quiet=True, timeout=60)  # a case that waits fails, never hangs
        ck.check(code == e.code, "%s (%s): exit status %d, expected %d:\n%s" % (name, program, code, e.code, err))
        for needle in e.messages:
            ck.check(needle in err, "%s (%s): stderr lacks %r:\n%s" % (name, program, needle, err))
        for folder, files in inputs_before.items():
            ck.check(snapshot(folder) == files, "%s (%s): the result set %s changed" % (name, program, folder))
        got = {f: open(os.path.join(out if e.code == 0 else c.out, f), "rb").read() for f in COMPARE_FILES}
        if e.code == 0:
            ck.check(got == clean_comparison, "%s (%s): the comparison differs from the clean one" % (name, program))
        else:
            ck.check(got == before, "%s (%s): the earlier comparison changed" % (name, program))
            ck.check(snapshot(out) == out_before, "%s (%s): the output folder changed" % (name, program))
        ck.check(not u.leftovers(c.out), "%s (%s): leftovers in the output folder" % (name, program))
    if c.keep_open is not None:
        c.keep_open.close()
    if e.cleanup:
        e.cleanup()
    print("%-44s exit %d  %s" % (name, e.code, "ok" if len(ck.failures) == failures_before else "FAILED"))
    return True


def compare_matrix(ck, analyze, compare, python, work, clean_root, only):
    sets = []
    for seed in (1, 2):
        out = os.path.join(work, "compare_set_%d" % seed)
        u.run([analyze, "--data-root", clean_root, "--output-dir", out, "--seed", seed, "--sampling-unit", "token",
               "--threads", 2] + LAYOUT, expect=0, quiet=True)
        sets.append(out)
    earlier = os.path.join(work, "compare_earlier")
    u.run([compare, "--output-dir", earlier, "--names", "A,B"] + sets, expect=0, quiet=True)
    clean_comparison = {f: open(os.path.join(earlier, f), "rb").read() for f in COMPARE_FILES}
    ran = skipped = 0
    for fn in COMPARE_CASES:
        if only and not any(s in fn.__name__ for s in only):
            continue
        if run_compare_case(ck, compare, python, work, sets[0], sets[1], earlier, clean_comparison, fn):
            ran += 1
        else:
            skipped += 1
    return ran, skipped


# ---------------------------------------------------------------- the harness

def run_case(ck, analyze, work, clean_root, clean_set, earlier_out, earlier_set, fn):
    name = fn.__name__
    c = Ctx(work, name, clean_root)
    u.copy_tree(earlier_out, c.out)
    e = fn(c)
    if e is None:
        print("SKIP %s: cannot deny root its permissions here (no setpriv)" % name)
        return False
    before = u.read_set(c.out) if os.path.isdir(c.out) else None
    args = list(e.prefix) + [analyze, "--data-root", c.root, "--output-dir", c.out, "--threads", 2]
    args += (LAYOUT if e.layout else []) + e.args
    code, _, err = u.run(args, quiet=True, timeout=120)  # a case that waits fails, never hangs
    if c.keep_open is not None:
        c.keep_open.close()
    failures_before = len(ck.failures)
    ck.check(code == e.code, "%s: exit status %d, expected %d:\n%s" % (name, code, e.code, err))
    for needle in e.messages:
        ck.check(needle in err, "%s: stderr lacks %r:\n%s" % (name, needle, err))
    for (layer, head), (file, reason) in e.failed.items():
        line = "error: layer %d q_head %d: %s: " % (layer, head, file)
        hits = [ln for ln in err.splitlines() if ln.startswith(line)]
        ck.check(len(hits) == 1 and reason in hits[0],
                 "%s: expected one line '%s...%s', got:\n%s" % (name, line, reason, err))
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    ck.check(len(errors) == len(e.failed), "%s: %d error lines for %d failed heads:\n%s"
             % (name, len(errors), len(e.failed), err))
    if e.no_work:
        ck.check("progress:" not in err, "%s: a usage error after work was done:\n%s" % (name, err))
    got = u.read_set(c.out) if os.path.isdir(c.out) else {n: None for n in u.CSVS}
    if e.output == "rows":
        keep = e.keep or (lambda layer, head: (layer, head) not in e.failed)
        want = u.rows_where(clean_set, lambda layer, head: keep(layer, head) and (layer, head) not in e.changed)
        ok = all(got[n] is not None for n in u.CSVS)
        ck.check(ok, "%s: the result set is incomplete: %s" % (name, [n for n in u.CSVS if got[n] is None]))
        if ok:
            mine = u.rows_where(got, lambda layer, head: (layer, head) not in e.changed)
            for n in u.CSVS:
                ck.check(mine[n] == want[n], "%s: %s differs from the clean run's rows" % (name, n))
            for head in e.changed:
                ck.check(len(u.rows_where({"m": got[u.CSVS[0]]}, lambda *h: h == head)["m"].splitlines()) == 2,
                         "%s: head %s has no metrics row" % (name, head))
    elif e.output == "earlier":
        ck.check(got == earlier_set and got == before, "%s: the earlier result set changed" % name)
    else:
        ck.check(all(v is None for v in got.values()) or got == before,
                 "%s: results were written: %s" % (name, [n for n in u.CSVS if got[n] is not None]))
    if os.path.isdir(c.out):
        left = [x for x in u.leftovers(c.out) if x not in e.allowed_leftovers]
        ck.check(not left, "%s: leftovers in the output folder: %s" % (name, left))
    if e.extra_check:
        e.extra_check(ck, name, c.out)
    print("%-44s exit %d  %s" % (name, code, "ok" if len(ck.failures) == failures_before else "FAILED"))
    # Undo permission changes so that the work folder can be removed.
    for dirpath, dirnames, filenames in os.walk(work):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                os.chmod(full, 0o755)
    return True


def check_config_and_help(ck, analyze, work, clean_root):
    """The file sets values, flags override it (later flags override earlier ones); --help
    lists every option."""
    out = os.path.join(work, "config_out")
    cfg = os.path.join(work, "good.yaml")
    with open(cfg, "w") as f:
        f.write("data_root: %s\noutput_dir: %s\nnum_pairs_per_bucket: 8\nthreads: 1\nnum_q_heads: %d\nnum_k_heads: %d\n"
                % (clean_root, out, Q_HEADS, K_HEADS))
    for extra, pairs in (([], "8"), (["--num-pairs-per-bucket", "16"], "16"),
                         (["--num-pairs-per-bucket=2", "--num-pairs-per-bucket=24"], "24")):
        code, _, err = u.run([analyze, "--config", cfg] + extra, quiet=True)
        ck.check(code == 0, "good config %s: exit %d: %s" % (extra, code, err))
        if code == 0:
            _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
            ck.check({r["n_pairs"] for r in cells} == {pairs}, "config %s: n_pairs %s, expected %s"
                     % (extra, sorted({r["n_pairs"] for r in cells}), pairs))
    code, text, _ = u.run([analyze, "--help"], quiet=True)
    keys = ["--config", "--data-root", "--num-layers", "--num-q-heads", "--num-k-heads", "--layers", "--heads",
            "--max-tokens-per-head", "--normality-max-dims", "--p-alpha", "--seed", "--num-pairs-per-bucket",
            "--max-rel-dist", "--output-dir", "--threads"]
    ck.check(code == 0 and all(k in text for k in keys), "--help should list every option: %s" % text)


def main():
    u.require_numpy()
    args = sys.argv[1:]
    compare = python = None
    if "--compare" in args:
        i = args.index("--compare")
        compare = args[i + 1]
        del args[i:i + 2]
    if "--python" in args:
        args.remove("--python")
        python = True
    analyze, work = args[:2]
    only = args[2:]
    u.fresh_dir(work)
    ck = u.Checker()
    clean_root = os.path.join(work, "clean")
    base_dump(clean_root)
    clean_out = os.path.join(work, "clean_out")
    code, _, err = u.run([analyze, "--data-root", clean_root, "--output-dir", clean_out] + LAYOUT)
    ck.check(code == 0 and "error" not in err, "clean run: exit %d, stderr %s" % (code, err))
    clean_set = u.read_set(clean_out)
    _, rows = u.read_csv(os.path.join(clean_out, "head_metrics.csv"))
    ck.check(len(rows) == LAYERS * Q_HEADS, "clean run: %d metric rows" % len(rows))
    earlier_out = os.path.join(work, "earlier_out")
    u.run([analyze, "--data-root", clean_root, "--output-dir", earlier_out, "--seed", 5] + LAYOUT, expect=0)
    earlier_set = u.read_set(earlier_out)
    ck.check(earlier_set != clean_set, "the earlier set must differ from the clean one")
    ran = skipped = 0
    for fn in CASES:
        if only and not any(s in fn.__name__ for s in only):
            continue
        if run_case(ck, analyze, work, clean_root, clean_set, earlier_out, earlier_set, fn):
            ran += 1
        else:
            skipped += 1
    if compare:
        more, more_skipped = compare_matrix(ck, analyze, compare, python, work, clean_root, only)
        ran += more
        skipped += more_skipped
    if not only:
        check_config_and_help(ck, analyze, work, clean_root)
    print("%d cases run, %d skipped" % (ran, skipped))
    if skipped:
        ck.check(False, "%d cases could not run (see SKIP lines)" % skipped)
    ck.close("test_hostile_matrix")


if __name__ == "__main__":
    main()
