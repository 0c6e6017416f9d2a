"""Reading one head folder of a qk-sniffer dump (Parquet), with every check in one place.

qk-sniffer writes one folder per (layer, head, kind), ``l{LL}h{HH}q`` or ``l{LL}h{HH}k``,
holding ``data.parquet`` with one row per captured token (docs/method.md §1):

    bucket          int32                  position bucket id
    example_id      int32                  source sequence id
    position        int32                  token position in its sequence
    vector          list<float32>          the query or key vector; one length d per file
    sliding_window  int32, nullable        the layer's window in tokens; null: none
    token_str       string, nullable       the token's text (optional)

``read_sniffed_folder`` reads such a folder (or its ``data.parquet``) into NumPy arrays
without a Python loop over rows: the vectors come from the flattened list values of each
row group, checked through the list offsets. Anything that does not fit the schema is a
``ValueError`` whose message names the file and the column (and the first offending row,
counted from 0 over the whole file).

Accepted beyond the exact schema, because they carry the same data: any integer type for
the integer columns (int32 and int64 are kept, others become int64), ``large_list`` and
``fixed_size_list`` for ``vector``, float16 / float64 vector values (float16 becomes
float32; float64 stays float64), ``large_string`` for ``token_str``. Needs numpy and
pyarrow only.
"""

import os
import stat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .layout import PARQUET_NAME  # noqa: F401  (the dump layout's file name)

INT_COLUMNS = ("bucket", "example_id", "position")
REQUIRED_COLUMNS = INT_COLUMNS + ("vector",)
OPTIONAL_COLUMNS = ("sliding_window", "token_str")


def parquet_path(path):
    """The data.parquet of a head folder; a path to a file is returned as it is."""
    path = os.fspath(path)
    return os.path.join(path, PARQUET_NAME) if os.path.isdir(path) else path


def read_sniffed_folder(path, token_str=False):
    """Read and check one head folder of a qk-sniffer dump.

    Parameters
    ----------
    path : str or os.PathLike
        A ``l{LL}h{HH}{q|k}`` folder holding ``data.parquet``, or the Parquet file itself.
    token_str : bool
        Also return the ``token_str`` column (an object array of str, None where null;
        None when the file has no such column).

    Returns
    -------
    dict with
        ``vector``          float32 (float64 if stored so) [n, d], C-contiguous, writable
        ``position``, ``bucket``, ``example_id``
                            int32 or int64 [n], as stored (other integer types: int64)
        ``sliding_window``  None when the column is absent or null in every row (no
                            window); else int32/int64 [n] with nulls as 0 (<= 0: none)
        ``token_str``       only when asked for (see above)

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is empty, not Parquet, has no rows, or a column is missing, of the wrong
        type, null where it may not be, or ``vector`` holds vectors of different lengths.
        The message starts with the file's path and names the column.
    """
    file = parquet_path(path)
    if not os.path.exists(file):
        if os.path.islink(file):
            raise FileNotFoundError(f"{file}: dangling symbolic link (to '{os.readlink(file)}', which does not exist)")
        raise FileNotFoundError(f"{file}: no such file")
    if not stat.S_ISREG(os.stat(file).st_mode):  # a FIFO would make the reader wait forever
        raise ValueError(f"{file}: not a regular file (a FIFO, device or folder), not a Parquet file")
    if os.path.getsize(file) == 0:
        raise ValueError(f"{file}: empty file (0 bytes), not a Parquet file")
    try:
        parquet = pq.ParquetFile(file)
        schema = parquet.schema_arrow
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise ValueError(f"{file}: not a readable Parquet file ({exc})") from None
    _check_schema(file, schema)
    if parquet.metadata.num_rows == 0:
        raise ValueError(f"{file}: no rows (column 'vector' is empty)")

    wanted = list(REQUIRED_COLUMNS) + [c for c in OPTIONAL_COLUMNS
                                       if c in schema.names and (c != "token_str" or token_str)]
    try:
        table = parquet.read(columns=wanted, use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{file}: cannot read the columns {', '.join(wanted)} ({exc})") from None

    out = {"vector": _vectors(file, table.column("vector"))}
    for name in INT_COLUMNS:
        out[name] = _int_column(file, name, table.column(name), nullable=False)
    out["sliding_window"] = None
    if "sliding_window" in table.column_names:
        column = table.column("sliding_window")
        if not pa.types.is_null(column.type) and column.null_count < len(column):
            out["sliding_window"] = _int_column(file, "sliding_window", column, nullable=True)
    if token_str:
        out["token_str"] = (table.column("token_str").to_numpy()
                            if "token_str" in table.column_names else None)
    return out


def _check_schema(file, schema):
    names = schema.names
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"{file}: column '{duplicated[0]}' appears more than once")
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{file}: missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(repr(c) for c in missing)} (the file has: "
                         f"{', '.join(names) if names else 'no columns'})")
    for name in INT_COLUMNS + ("sliding_window",):
        if name in names:
            t = schema.field(name).type
            # An all-null sliding_window written without a type (pyarrow's null type)
            # still means "no window".
            if not (pa.types.is_integer(t) or (name == "sliding_window" and pa.types.is_null(t))):
                raise ValueError(f"{file}: column '{name}' has type {t}, expected int32")
    t = schema.field("vector").type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        raise ValueError(f"{file}: column 'vector' has type {t}, expected list<float32>")
    if not pa.types.is_floating(t.value_type):
        raise ValueError(f"{file}: column 'vector' holds {t.value_type} values, expected "
                         f"list<float32>")
    if "token_str" in names:
        t = schema.field("token_str").type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise ValueError(f"{file}: column 'token_str' has type {t}, expected string")


def _first_true(mask):
    return int(np.flatnonzero(mask)[0])


def _vectors(file, column):
    """[n, d] from the chunks (row groups) of a list column: lengths from the offsets, values
    from the flattened child array, copied once into the result."""
    n = len(column)
    lengths = pc.list_value_length(column)  # null for a null row
    if lengths.null_count:
        row = _first_true(lengths.is_null().to_numpy(zero_copy_only=False))
        raise ValueError(f"{file}: column 'vector' is null in row {row}")
    lengths = lengths.to_numpy(zero_copy_only=False)
    d = int(lengths[0])
    if d == 0:
        raise ValueError(f"{file}: column 'vector' holds empty vectors (row 0 has length 0)")
    ragged = lengths != d
    if ragged.any():
        row = _first_true(ragged)
        raise ValueError(f"{file}: column 'vector' has vectors of different lengths: row {row} "
                         f"has length {int(lengths[row])}, row 0 has length {d} "
                         f"({int(ragged.sum())} of {n} rows differ from row 0)")
    value_type = column.type.value_type
    dtype = np.float64 if pa.types.is_float64(value_type) else np.float32
    out = np.empty((n, d), dtype=dtype)
    row = 0
    for chunk in column.chunks:
        values = chunk.flatten()  # the values of this chunk's rows, slice-aware
        if values.null_count:
            first = _first_true(values.is_null().to_numpy(zero_copy_only=False))
            raise ValueError(f"{file}: column 'vector' holds a null value in row "
                             f"{row + first // d} (element {first % d})")
        rows = len(chunk)
        out[row:row + rows] = values.to_numpy(zero_copy_only=False).reshape(rows, d)
        row += rows
    return out


def _int_column(file, name, column, nullable):
    """int32 / int64 [n]; nulls are an error, or 0 when ``nullable``."""
    if column.null_count:
        if not nullable:
            row = _first_true(column.is_null().to_numpy(zero_copy_only=False))
            raise ValueError(f"{file}: column '{name}' is null in row {row}")
        column = column.fill_null(0)
    t = column.type
    if pa.types.is_int32(t) or pa.types.is_int64(t):
        return np.array(column.to_numpy(), copy=True)
    if pa.types.is_uint64(t):
        too_big = pc.greater(column, pa.scalar(np.iinfo(np.int64).max, pa.uint64()))
        if pc.any(too_big).as_py():
            row = _first_true(too_big.to_numpy(zero_copy_only=False))
            raise ValueError(f"{file}: column '{name}' row {row} does not fit in int64 "
                             f"({column[row].as_py()})")
    return column.to_numpy().astype(np.int64)
