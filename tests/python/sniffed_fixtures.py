"""Writing small qk-sniffer dumps in qk-sniffer's exact Parquet schema, for the tests.

    bucket int32, example_id int32, position int32, vector list<float32>,
    sliding_window int32 (null where the layer has none), token_str string (nullable)

one data.parquet per l{LL}h{HH}{q|k} folder (docs/method.md §1). Needs numpy and pyarrow.
"""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([("bucket", pa.int32()), ("example_id", pa.int32()),
                    ("position", pa.int32()), ("vector", pa.list_(pa.float32())),
                    ("sliding_window", pa.int32()), ("token_str", pa.string())])


def to_bf16(x):
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def sniffed_table(vector, position, bucket, example_id, sliding_window=None, tokens=None):
    """A table in the exact schema; sliding_window None: null in every row; tokens None:
    't<position>'."""
    vectors = np.ascontiguousarray(vector, dtype=np.float32)
    n, d = vectors.shape
    offsets = pa.array(np.arange(0, n * d + 1, d, dtype=np.int32))
    window = pa.nulls(n, pa.int32()) if sliding_window is None else \
        pa.array(np.full(n, sliding_window, np.int32) if np.isscalar(sliding_window)
                 else sliding_window, type=pa.int32())
    if tokens is None:
        tokens = ["t%d" % p for p in np.asarray(position)]
    return pa.Table.from_arrays([
        pa.array(np.asarray(bucket, np.int32)), pa.array(np.asarray(example_id, np.int32)),
        pa.array(np.asarray(position, np.int32)),
        pa.ListArray.from_arrays(offsets, pa.array(vectors.ravel(), type=pa.float32())),
        window, pa.array(tokens, type=pa.string())], schema=SCHEMA)


def write_table(folder, table, row_group_size=None):
    """data.parquet in ``folder`` (created); several row groups when row_group_size < rows."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "data.parquet")
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def head_data(rng, n_tokens, d, examples, bucket_size, rate, drift=0.05):
    """One head's kept tokens: positions 0..n_tokens/examples - 1 in each example, each token
    kept with probability ``rate``; vectors with a position drift, rounded to bf16."""
    length = n_tokens // examples
    position = np.tile(np.arange(length), examples)
    example_id = np.repeat(np.arange(examples), length)
    keep = rng.random(position.size) < rate
    position, example_id = position[keep], example_id[keep]
    direction = rng.standard_normal(d)
    vectors = rng.standard_normal((position.size, d)) * rng.uniform(0.5, 2.0, d) \
        + drift * np.outer(position, direction) / np.sqrt(d)
    return {"vector": to_bf16(vectors.astype(np.float32)), "position": position.astype(np.int32),
            "bucket": (position // bucket_size).astype(np.int32),
            "example_id": example_id.astype(np.int32)}
