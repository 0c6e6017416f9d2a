#!/usr/bin/env python3
"""Convert a qk-sniffer dump (Parquet) into the NPY layout that ap_analyze reads.

A qk-sniffer dump has one folder per (layer, head, kind), named l{LL}h{HH}q or
l{LL}h{HH}k, each holding data.parquet with the columns

    bucket          int32             position bucket id
    example_id      int32             source sequence id
    position        int32             token position
    vector          list<float32>     the query or key vector, same length in a folder
                                      (fixed_size_list<float32> and large_list too)
    sliding_window  int32 or null     optional; null means no window
    token_str       string            optional; not converted

For each such folder SRC/lLLhHHx/ this writes DST/lLLhHHx/ with (SPEC section 1)

    vector.npy          float32 [n, d]
    position.npy        int32 or int64 [n]
    bucket.npy          int32 or int64 [n]
    example_id.npy      int32 or int64 [n]
    sliding_window.npy  int32 or int64 [n], nulls written as 0 (only when the column exists)

Each file is written whole: first to a temporary name in the same folder, then renamed.
A folder with a problem (missing column, vectors of different lengths, nulls in a
required column, ...) is reported on stderr, nothing is written for it, and the other
folders go on.

Exit status: 0 all folders converted; 1 some folders failed; 2 bad arguments or no
head folder found; 3 pyarrow (needed to read Parquet) is not installed.

The NPY writing and the column checks (write_npy_head, validate_columns) take plain
Python / NumPy data and do not need pyarrow.
"""

import argparse
import os
import re
import sys

import numpy as np

EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_PYARROW = 3

HEAD_FOLDER_RE = re.compile(r"^l(\d{2,})h(\d{2,})([qk])$")
PARQUET_NAME = "data.parquet"
REQUIRED_COLUMNS = ("bucket", "example_id", "position", "vector")
INT_COLUMNS = ("position", "bucket", "example_id")
OPTIONAL_COLUMNS = ("sliding_window",)
NPY_FILES = ("vector", "position", "bucket", "example_id", "sliding_window")

PYARROW_MISSING_MESSAGE = (
    "pyarrow is not installed, and it is needed to read the Parquet files of a "
    "qk-sniffer dump.\n"
    "Install it (for example 'python3 -m pip install pyarrow', or the python3-pyarrow "
    "package where your distribution has one) and run this again.")


class ConversionError(Exception):
    """A folder's data cannot be converted; the message names the folder and the problem."""


# ---------------------------------------------------------------------------
# Checks and conversion of plain Python / NumPy columns (no pyarrow needed)
# ---------------------------------------------------------------------------

def check_vector_lengths(folder, lengths):
    """Return d, the common length of all vectors; raise naming the first offending row.

    ``lengths`` holds each row's vector length, with -1 for a null vector.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        raise ConversionError(f"{folder}: no rows")
    nulls = np.flatnonzero(lengths < 0)
    if nulls.size:
        raise ConversionError(f"{folder}: column 'vector' is null in row {int(nulls[0])}")
    d = int(lengths[0])
    bad = np.flatnonzero(lengths != d)
    if bad.size:
        row = int(bad[0])
        raise ConversionError(
            f"{folder}: column 'vector' has vectors of different lengths: row {row} has "
            f"length {int(lengths[row])}, row 0 has length {d} ({bad.size} of "
            f"{lengths.size} rows differ from row 0)")
    if d == 0:
        raise ConversionError(f"{folder}: column 'vector' holds empty vectors")
    return d


def vectors_to_matrix(folder, vectors):
    """A float32 [n, d] array from a 2-D array or a sequence of 1-D sequences (None = null)."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2 and vectors.dtype != object:
        check_vector_lengths(folder, np.full(vectors.shape[0], vectors.shape[1]))
        return _as_float32(folder, vectors)
    rows = list(vectors)
    lengths = []
    for i, r in enumerate(rows):
        try:
            lengths.append(-1 if r is None else len(r))
        except TypeError:
            raise ConversionError(f"{folder}: column 'vector' row {i} is not a list of "
                                  f"numbers ({r!r})") from None
    d = check_vector_lengths(folder, lengths)
    out = np.empty((len(rows), d), dtype=np.float32)
    for i, r in enumerate(rows):
        try:
            out[i] = np.asarray(r, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConversionError(f"{folder}: column 'vector' row {i} holds a "
                                  f"non-numeric or null value") from None
    return out


def vectors_from_flat(folder, flat_values, lengths):
    """A float32 [n, d] array from the concatenated values and each row's length."""
    d = check_vector_lengths(folder, lengths)
    flat = np.asarray(flat_values)
    n = len(lengths)
    if flat.size != n * d:
        raise ConversionError(f"{folder}: column 'vector' has {flat.size} values for "
                              f"{n} rows of {d}")
    return _as_float32(folder, flat.reshape(n, d))


def _as_float32(folder, matrix):
    if not np.issubdtype(np.asarray(matrix).dtype, np.number):
        raise ConversionError(f"{folder}: column 'vector' is not numeric "
                              f"(dtype {np.asarray(matrix).dtype})")
    return np.ascontiguousarray(matrix, dtype=np.float32)


def int_column(folder, name, values, null_value=None):
    """A 1-D int32 or int64 array; nulls (None, masked) become ``null_value`` or an error.

    int32 data stays int32; other integer data becomes int64.
    """
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        data = np.ma.getdata(values)
    else:
        arr = np.asarray(values)  # a list with None becomes an object array
        if arr.dtype == object:
            mask = np.array([v is None for v in arr.ravel()], dtype=bool).reshape(arr.shape)
            data = np.where(mask, 0, arr)
        else:
            mask = np.zeros(arr.shape, dtype=bool)
            data = arr
    if np.ndim(data) != 1:
        raise ConversionError(f"{folder}: column '{name}' must be one value per row "
                              f"(got shape {np.shape(data)})")
    if mask.any() and null_value is None:
        raise ConversionError(f"{folder}: column '{name}' is null in row "
                              f"{int(np.flatnonzero(mask)[0])}")
    data = np.asarray(data)
    if np.issubdtype(data.dtype, np.integer):
        dtype = data.dtype if data.dtype in (np.int32, np.int64) else np.int64
        if dtype == np.int64 and data.dtype == np.uint64 and data.size \
                and data.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(data))
            raise ConversionError(f"{folder}: column '{name}' row {row} does not fit "
                                  f"in int64 ({data[row]})")
        out = np.array(data, dtype=dtype, copy=True)
        out[mask] = 0 if null_value is None else null_value
        return out
    if np.issubdtype(data.dtype, np.floating):
        bad = ~mask & (~np.isfinite(data) | (data != np.round(data)))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ConversionError(f"{folder}: column '{name}' row {row} is not an "
                                  f"integer ({data[row]!r})")
        out = np.where(mask, 0, data).astype(np.int64)
        out[mask] = 0 if null_value is None else null_value
        return out
    out = np.empty(data.shape, dtype=np.int64)
    for i, v in enumerate(data):
        if mask[i]:
            out[i] = null_value
            continue
        try:
            iv = int(v)
            exact = float(v) == iv
        except (TypeError, ValueError, OverflowError):
            exact = False
        if not exact or isinstance(v, (str, bytes)):
            raise ConversionError(f"{folder}: column '{name}' row {i} is not an integer "
                                  f"({v!r})")
        out[i] = iv
    return out


def validate_columns(folder, columns):
    """Check one folder's columns and return the arrays to write, by NPY file stem.

    ``columns`` maps column name to data: 'vector' a 2-D array or a sequence of 1-D
    sequences; 'position', 'bucket', 'example_id' 1-D integer data; optional
    'sliding_window' 1-D integer data where None / masked means no window (written as
    0). Other keys (e.g. 'token_str') are ignored. Raises ConversionError naming
    ``folder`` and the problem.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in columns or columns[c] is None]
    if missing:
        raise ConversionError(f"{folder}: missing column"
                              f"{'s' if len(missing) != 1 else ''} "
                              f"{', '.join(repr(c) for c in missing)}")
    out = {"vector": vectors_to_matrix(folder, columns["vector"])}
    n = out["vector"].shape[0]
    for name in INT_COLUMNS:
        out[name] = int_column(folder, name, columns[name])
    if columns.get("sliding_window") is not None:
        out["sliding_window"] = int_column(folder, "sliding_window",
                                           columns["sliding_window"], null_value=0)
    for name, arr in out.items():
        if arr.shape[0] != n:
            raise ConversionError(f"{folder}: column '{name}' has {arr.shape[0]} rows, "
                                  f"'vector' has {n}")
    return out


def write_npy_head(folder, columns, label=None):
    """Validate ``columns`` (see validate_columns) and write them as NPY files in ``folder``.

    Error messages name ``label`` (default: ``folder``), e.g. the source folder.
    Nothing is written when validation fails. Every file is first written under a
    temporary name in ``folder`` and then renamed over the final name, so a reader never
    sees a partial file. A sliding_window.npy left from an earlier run is removed when
    the new data has no sliding_window column. Returns the paths written.
    """
    arrays = validate_columns(folder if label is None else label, columns)
    os.makedirs(folder, exist_ok=True)
    temps = {}
    try:
        for stem, arr in arrays.items():
            final = os.path.join(folder, stem + ".npy")
            tmp = os.path.join(folder, f".{stem}.npy.tmp{os.getpid()}")
            arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
            with open(tmp, "wb") as f:
                np.save(f, arr, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            temps[tmp] = final
        for tmp, final in temps.items():
            os.replace(tmp, final)
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.remove(tmp)
    stale = os.path.join(folder, "sliding_window.npy")
    if "sliding_window" not in arrays and os.path.exists(stale):
        os.remove(stale)
    return [os.path.join(folder, stem + ".npy") for stem in arrays]


def find_head_folders(src):
    """Sorted names of the lLLhHH{q|k} folders of ``src`` that hold data.parquet."""
    found = []
    for name in os.listdir(src):
        if HEAD_FOLDER_RE.match(name) and os.path.isfile(os.path.join(src, name,
                                                                      PARQUET_NAME)):
            found.append(name)

    def key(name):
        m = HEAD_FOLDER_RE.match(name)
        return int(m.group(1)), int(m.group(2)), m.group(3)

    return sorted(found, key=key)


def find_dump_roots(src, max_depth=3, limit=5):
    """Directories below ``src`` (not ``src`` itself) that hold head folders, e.g. the
    data/{model}/ folders of a qk-sniffer dataset; at most ``limit``."""
    roots = []
    base_depth = os.path.abspath(src).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, _files in os.walk(src):
        dirnames.sort()
        depth = os.path.abspath(dirpath).rstrip(os.sep).count(os.sep) - base_depth
        if depth >= max_depth:
            dirnames[:] = []
        if depth > 0 and find_head_folders(dirpath):
            roots.append(dirpath)
            dirnames[:] = []
            if len(roots) >= limit:
                break
        else:
            dirnames[:] = [d for d in dirnames if not HEAD_FOLDER_RE.match(d)]
    return roots


# ---------------------------------------------------------------------------
# Parquet reading (pyarrow)
# ---------------------------------------------------------------------------

def import_pyarrow():
    """(pyarrow, pyarrow.compute, pyarrow.parquet), or None when pyarrow is missing."""
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.parquet
    except ImportError:
        return None
    return pyarrow, pyarrow.compute, pyarrow.parquet


def read_parquet_columns(path, folder, pa_modules):
    """The columns of one data.parquet as plain NumPy data for validate_columns."""
    pa, pc, pq = pa_modules
    names = set(pq.read_schema(path).names)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConversionError(f"{path}: missing column"
                              f"{'s' if len(missing) != 1 else ''} "
                              f"{', '.join(repr(c) for c in missing)} (it has: "
                              f"{', '.join(sorted(names))})")
    wanted = list(REQUIRED_COLUMNS) + [c for c in OPTIONAL_COLUMNS if c in names]
    table = pq.read_table(path, columns=wanted)
    columns = {}
    for name in wanted:
        arr = table.column(name).combine_chunks()
        if name == "vector":
            columns[name] = _vector_matrix(folder, arr, pa, pc)
        else:
            columns[name] = _int_array(arr, pa)
    return columns


def _int_array(arr, pa):
    if not pa.types.is_integer(arr.type):
        # Let int_column report non-integers with the row.
        return np.asarray(arr.to_pylist(), dtype=object)
    if arr.null_count == 0:
        return arr.to_numpy(zero_copy_only=False)
    mask = np.asarray(arr.is_null().to_pylist(), dtype=bool)
    data = np.asarray([0 if v is None else v for v in arr.to_pylist()],
                      dtype=arr.type.to_pandas_dtype())
    return np.ma.masked_array(data, mask=mask)


def _vector_matrix(folder, arr, pa, pc):
    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)):
        raise ConversionError(f"{folder}: column 'vector' has type {t}, expected a list "
                              f"of floats")
    if not (pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type)):
        raise ConversionError(f"{folder}: column 'vector' holds {t.value_type}, "
                              f"expected floats")
    if pa.types.is_fixed_size_list(t):  # what qk-sniffer writes: FixedSizeList[float32]
        lengths = np.full(len(arr), t.list_size, dtype=np.int64)
        if arr.null_count:
            lengths[np.asarray(arr.is_null().to_pylist(), dtype=bool)] = -1
    else:
        lengths = pc.list_value_length(arr).fill_null(-1).to_numpy(zero_copy_only=False)
    d = check_vector_lengths(folder, lengths)
    flat = arr.flatten()  # values of the non-null rows, in row order, slice-aware
    if flat.null_count:
        first = int(np.flatnonzero(np.asarray(flat.is_null().to_pylist()))[0])
        raise ConversionError(f"{folder}: column 'vector' row {first // d} holds a null "
                              f"value")
    return vectors_from_flat(folder, flat.to_numpy(zero_copy_only=False), lengths)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="the qk-sniffer dump: a directory with lLLhHH{q|k}/"
                                    "data.parquet folders")
    parser.add_argument("dst", help="output data root (created if needed); ap_analyze "
                                    "reads it as its data root")
    parser.add_argument("--only", metavar="FOLDER", action="append",
                        help="convert only this folder (e.g. l00h03q); repeatable")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not print a line per converted folder")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    prog = "convert_sniffed_qk.py"
    if not os.path.isdir(args.src):
        print(f"{prog}: error: {args.src}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    folders = find_head_folders(args.src)
    if args.only:
        unknown = sorted(set(args.only) - set(folders))
        if unknown:
            print(f"{prog}: error: {args.src}: no folder {', '.join(unknown)} with "
                  f"{PARQUET_NAME}", file=sys.stderr)
            return EXIT_USAGE
        folders = [f for f in folders if f in set(args.only)]
    if not folders:
        roots = find_dump_roots(args.src)
        hint = ("; pass one of these folders instead: " + ", ".join(roots)) if roots else ""
        print(f"{prog}: error: {args.src}: no l{{LL}}h{{HH}}q or l{{LL}}h{{HH}}k folder "
              f"with {PARQUET_NAME}{hint}", file=sys.stderr)
        return EXIT_USAGE
    pa_modules = import_pyarrow()
    if pa_modules is None:
        print(f"{prog}: error: {PYARROW_MISSING_MESSAGE}", file=sys.stderr)
        return EXIT_NO_PYARROW
    failed = 0
    for name in folders:
        src_folder = os.path.join(args.src, name)
        src_path = os.path.join(src_folder, PARQUET_NAME)
        dst_folder = os.path.join(args.dst, name)
        try:
            columns = read_parquet_columns(src_path, src_folder, pa_modules)
            write_npy_head(dst_folder, columns, label=src_folder)
            n, d = np.shape(columns["vector"])
        except ConversionError as exc:
            failed += 1
            print(f"{prog}: error: {exc}", file=sys.stderr)
            continue
        except (OSError, pa_modules[0].ArrowException) as exc:
            failed += 1
            print(f"{prog}: error: {src_path}: {exc}", file=sys.stderr)
            continue
        if not args.quiet:
            print(f"{dst_folder}: {n} rows, d = {d}")
    if failed:
        print(f"{prog}: {failed} of {len(folders)} folders not converted",
              file=sys.stderr)
        return EXIT_SOME_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
