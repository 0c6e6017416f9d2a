#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

usage: /usr/bin/python3 fuzz/make_corpus.py   (needs NumPy; rewrites the committed seeds)

fuzz_npy: valid NPY files of every dtype, rank and format version the reader accepts, and a
few it refuses (Fortran order, big-endian, structured, float16). fuzz_config: a byte 0x00
(the configuration), 0x01 (metadata.json), 0x02 (a shard's shard.json) or 0x03 (any JSON
text, io/json.hpp) followed by the text. fuzz_cmdline: arguments separated by NUL bytes.
"""

import io
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# A shard manifest as ap_analyze --shard writes it (include/attention_plasticity/run/shard_manifest.hpp).
MANIFEST = """{
  "ap_shard_manifest": 1,
  "program": "ap_analyze 0.1.0",
  "shard": 1,
  "num_shards": 3,
  "options_fingerprint": "0ffdc015584a86cc",
  "options": {"num_layers": "2", "seed": "0"},
  "dump_fingerprint": "c9177137fbd785ee",
  "data_root": "dump \\u00e9\\u0001",
  "run_heads": 8,
  "present_heads": 8,
  "layout_heads": 8,
  "host": "vm",
  "seconds": 0.012,
  "files": ["head_metrics.csv", "head_profile.csv"],
  "heads": [
    {"layer": 0, "q_head": 1, "k_head": 0, "tokens": 2048, "analyzed": true, "rows": [1, 7]},
    {"layer": 1, "q_head": 0, "k_head": 0, "tokens": 0, "analyzed": false, "error": "x: \\"bad\\"", "rows": []}
  ]
}
"""


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def npy(array, version=None):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def main():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 3))
    write("fuzz_npy", "f8_2d_v1", npy(vectors))
    write("fuzz_npy", "f4_2d_v1", npy(vectors.astype(np.float32)))
    write("fuzz_npy", "f8_2d_v2", npy(vectors, version=(2, 0)))
    write("fuzz_npy", "f4_2d_v3", npy(vectors.astype(np.float32), version=(3, 0)))
    write("fuzz_npy", "i8_1d", npy(np.arange(7, dtype=np.int64)))
    write("fuzz_npy", "i4_1d", npy(np.arange(7, dtype=np.int32)))
    write("fuzz_npy", "i8_empty", npy(np.zeros(0, dtype=np.int64)))
    write("fuzz_npy", "f8_nan", npy(np.array([[1.0, np.nan]])))
    write("fuzz_npy", "f8_fortran", npy(np.asfortranarray(vectors)))
    write("fuzz_npy", "f8_big_endian", npy(vectors.astype(">f8")))
    write("fuzz_npy", "f2", npy(vectors.astype(np.float16)))
    write("fuzz_npy", "structured", npy(np.zeros(2, dtype=[("a", "<i8"), ("b", "<f8")])))
    write("fuzz_npy", "scalar", npy(np.float64(1.5)))

    config = ("data_root: /data/dump\nnum_layers: 36\nnum_q_heads: 32\nnum_k_heads: 8\nmax_tokens_per_head: 50000\n"
              "normality_max_dims: 64\np_alpha: 0.01\nseed: 0\nnum_pairs_per_bucket: 256\nmax_rel_dist: 0.05\n"
              "output_dir: results\nthreads: 0\n")
    write("fuzz_config", "full", b"\0" + config.encode())
    write("fuzz_config", "lists", b"\0" + b"layers: [0-3, 7]\nheads:\n  - 1\n  - 4-5\n")
    write("fuzz_config", "flow", b"\0" + b"{seed: 1, p_alpha: 1e-3, layers: '0,2'}\n")
    write("fuzz_config", "metadata", b"\1" + b'{"num_layers": 36, "num_q_heads": 32, "num_k_heads": 8, "model": "x"}')
    write("fuzz_config", "metadata_partial", b"\1" + b'{"num_q_heads": 12, "num_k_heads": null}')

    write("fuzz_config", "manifest", b"\2" + MANIFEST.encode())
    write("fuzz_config", "shard", b"\0" + b"data_root: /d\nshard: 3/8\n")
    write("fuzz_config", "json", b"\3" + '{"a": [1, -2.5e-3, 18446744073709551615, true, null], "b": {"c": "\\u00e9\\ud83d\\ude00"}}'.encode())

    def args(*items):
        return b"\0".join(s.encode() for s in items)
    write("fuzz_cmdline", "basic", args("--data-root", "/d", "--output-dir", "/o", "--threads", "2"))
    write("fuzz_cmdline", "equals", args("--data-root=/d", "--layers=0-3,7", "--heads", "1,2", "--seed=18446744073709551615"))
    write("fuzz_cmdline", "layout", args("--data-root", "/d", "--num-layers", "36", "--num-q-heads", "32",
                                         "--num-k-heads", "8", "--p-alpha", "0.05", "--max-rel-dist", "1e-2"))
    write("fuzz_cmdline", "folders", args("l00h00q", "l12h31k", "l100h07q", "l000h00q", "l4000000000h00q", "0-3,7"))
    write("fuzz_cmdline", "help", args("--help"))
    write("fuzz_cmdline", "shard", args("--data-root", "/d", "--shard", "3/8", "--output-dir=/o/shard-3"))
    write("fuzz_cmdline", "merge", args("/o/shard-0", "--output-dir", "/o", "/o/shard-1", "--", "--x"))


if __name__ == "__main__":
    main()
