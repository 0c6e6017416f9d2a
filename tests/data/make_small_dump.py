#!/usr/bin/python3
"""Writes the small committed dump tests/data/small_dump (the NPY layout of docs/method.md §1.1).

One layer, 4 query heads, 2 key heads (GQA group of 2), 256 tokens per head (4 examples of
64 positions, log2 position buckets), d = 8. The folders mix every supported dtype so that
each path of the driver's reader and dtype dispatch is exercised:

    l00h00k  float32 vectors, int32 columns     l00h00q  float32, int64   (f32 q, f32 k)
    l00h01k  float64 vectors, int64 columns     l00h01q  float64, int32   (f64 q, f32 k)
                                                l00h02q  float32, int32   (f32 q, f64 k)
                                                l00h03q  float64, int64   (f64 q, f64 k)

l00h01q has a sliding_window.npy (int32: zeros and 48), l00h03q one of all zeros (= none).
metadata.json gives the layout (1 layer, 4 query heads, 2 key heads).
Content: a positional drift along a random direction plus noise with a skewed and a
heavy-tailed component, so that every statistic of docs/method.md §2 is non-trivial.
Rows of every folder are shuffled.

Regenerate (only if the dump must change; the fixture must then be regenerated too):
    /usr/bin/python3 tests/data/make_small_dump.py tests/data/small_dump
    /usr/bin/python3 tests/reference/gen_pipeline_reference.py tests/data/small_dump \
        tests/reference/pipeline_reference.csv
"""

import os
import sys

import numpy as np

LENGTH = 64
EXAMPLE_IDS = (3, 10, 11, 40)
DIM = 8


def layout():
    pos = np.tile(np.arange(LENGTH), len(EXAMPLE_IDS))
    ex = np.repeat(np.array(EXAMPLE_IDS), LENGTH)
    bucket = np.floor(np.log2(pos + 1)).astype(np.int64)
    return pos, bucket, ex


def vectors(rng, pos, drift, offset):
    n = pos.size
    x = rng.standard_normal((n, DIM))
    x[:, 1] = rng.exponential(1.0, n)            # skewed
    x[:, 2] = rng.standard_t(4, n)               # heavy tails
    x[:, 3] *= 0.1                               # small variance
    direction = rng.standard_normal(DIM)
    direction /= np.linalg.norm(direction)
    x += np.outer(drift * pos / LENGTH, direction)
    x += offset
    q, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    return x @ q.T


def write_folder(root, name, rng, x, pos, bucket, ex, vec_dtype, int_dtype, window=None):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    order = rng.permutation(pos.size)
    np.save(os.path.join(folder, "vector.npy"), np.ascontiguousarray(x[order].astype(vec_dtype)))
    np.save(os.path.join(folder, "position.npy"), pos[order].astype(int_dtype))
    np.save(os.path.join(folder, "bucket.npy"), bucket[order].astype(int_dtype))
    np.save(os.path.join(folder, "example_id.npy"), ex[order].astype(int_dtype))
    sw = os.path.join(folder, "sliding_window.npy")
    if window is not None:
        np.save(sw, window[order].astype(int_dtype))
    elif os.path.exists(sw):
        os.remove(sw)


def main(root):
    rng = np.random.default_rng(20240611)
    pos, bucket, ex = layout()
    offsets = rng.standard_normal((6, DIM))
    write_folder(root, "l00h00k", rng, vectors(rng, pos, 1.5, offsets[0]), pos, bucket, ex, np.float32, np.int32)
    write_folder(root, "l00h01k", rng, vectors(rng, pos, 0.5, offsets[1]), pos, bucket, ex, np.float64, np.int64)
    window = np.where(np.arange(pos.size) % 3 == 0, 0, 48)
    specs = [("l00h00q", 3.0, np.float32, np.int64, None),
             ("l00h01q", 0.8, np.float64, np.int32, window),
             ("l00h02q", 2.0, np.float32, np.int32, None),
             ("l00h03q", 0.3, np.float64, np.int64, np.zeros(pos.size, dtype=np.int64))]
    for i, (name, drift, vdt, idt, win) in enumerate(specs):
        write_folder(root, name, rng, vectors(rng, pos, drift, offsets[2 + i]), pos, bucket, ex, vdt, idt, win)
    # The layout: the head counts are never guessed from the folder names (docs/method.md §1.3).
    with open(os.path.join(root, "metadata.json"), "w") as f:
        f.write('{"num_layers": 1, "num_q_heads": 4, "num_k_heads": 2}\n')


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_small_dump.py OUT_DIR")
    main(sys.argv[1])
