"""Tests of examples/convert_sniffed_qk.py (qk-sniffer Parquet -> the NPY layout).

Reading and checking a folder is attention_plasticity.sniffed (tested in test_sniffed.py);
here: the NPY writing, the command line, and the conversion of dumps in qk-sniffer's exact
schema. Needs numpy and pyarrow (the project's .venv); a missing package is an error, not a
skip. Run from the repository root:
    .venv/bin/python -m unittest discover -s tests/python -p 'test_convert_sniffed_qk.py' -v
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "convert_sniffed_qk.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
sys.path.insert(0, HERE)

import convert_sniffed_qk as conv  # noqa: E402
from sniffed_fixtures import sniffed_table, to_bf16, write_table  # noqa: E402


def run_converter(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=300)


def sample_arrays(n=6, d=4, seed=0, window=None):
    rng = np.random.default_rng(seed)
    position = np.arange(n, dtype=np.int32)
    return {"vector": rng.standard_normal((n, d)).astype(np.float32), "position": position,
            "bucket": (position // 2).astype(np.int32),
            "example_id": np.zeros(n, dtype=np.int32),
            "sliding_window": None if window is None else np.full(n, window, np.int32)}


class TempDirTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ap_convert_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def snapshot(folder):
        out = {}
        for name in os.listdir(folder):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
        return out

    def load(self, folder, stem):
        return np.load(os.path.join(folder, stem + ".npy"), allow_pickle=False)


class TestWriteNpyHead(TempDirTestCase):
    def test_round_trip(self):
        arrays = sample_arrays(window=4096)
        folder = os.path.join(self.tmp, "out", "l03h07q")
        written = conv.write_npy_head(folder, arrays)
        self.assertEqual(sorted(os.path.basename(p) for p in written),
                         ["bucket.npy", "example_id.npy", "position.npy",
                          "sliding_window.npy", "vector.npy"])
        self.assertEqual(sorted(os.listdir(folder)), sorted(os.path.basename(p)
                                                            for p in written))
        for stem in ("vector", "position", "bucket", "example_id", "sliding_window"):
            got = self.load(folder, stem)
            self.assertEqual(got.dtype, arrays[stem].dtype, stem)
            self.assertIn(got.dtype.byteorder, ("<", "=", "|"), stem)
            np.testing.assert_array_equal(got, arrays[stem])
        self.assertTrue(self.load(folder, "vector").flags["C_CONTIGUOUS"])

    def test_no_window_no_file_and_stale_window_removed(self):
        folder = os.path.join(self.tmp, "l00h00q")
        conv.write_npy_head(folder, sample_arrays(window=64))
        self.assertTrue(os.path.exists(os.path.join(folder, "sliding_window.npy")))
        conv.write_npy_head(folder, sample_arrays(n=7, d=2, seed=3))
        self.assertEqual(sorted(os.listdir(folder)),
                         ["bucket.npy", "example_id.npy", "position.npy", "vector.npy"])
        self.assertEqual(self.load(folder, "vector").shape, (7, 2))

    def test_row_count_mismatch_writes_nothing(self):
        folder = os.path.join(self.tmp, "l00h00q")
        conv.write_npy_head(folder, sample_arrays())
        before = self.snapshot(folder)
        bad = sample_arrays(seed=1)
        bad["position"] = bad["position"][:-1]
        with self.assertRaises(ValueError) as ctx:
            conv.write_npy_head(folder, bad)
        self.assertIn("'position'", str(ctx.exception))
        self.assertEqual(self.snapshot(folder), before)


class TestFindHeadFolders(TempDirTestCase):
    def test_finds_only_head_folders_with_parquet(self):
        for name in ("l10h02q", "l00h01k", "l00h01q", "l00h00q", "l0h0q", "l00h00x",
                     "notes", "l01h00k"):
            os.makedirs(os.path.join(self.tmp, name))
            if name != "l01h00k":
                open(os.path.join(self.tmp, name, "data.parquet"), "wb").close()
        self.assertEqual(conv.find_head_folders(self.tmp),
                         ["l00h00q", "l00h01k", "l00h01q", "l10h02q"])


    def test_suggests_nested_dump_roots(self):
        for sub in ("data/model_a/l00h00q", "data/model_b/l00h00k", "data/other"):
            os.makedirs(os.path.join(self.tmp, sub))
        for sub in ("data/model_a/l00h00q", "data/model_b/l00h00k"):
            open(os.path.join(self.tmp, sub, "data.parquet"), "wb").close()
        self.assertEqual(conv.find_head_folders(os.path.join(self.tmp, "data")), [])
        self.assertEqual(conv.find_dump_roots(os.path.join(self.tmp, "data")),
                         [os.path.join(self.tmp, "data", "model_a"),
                          os.path.join(self.tmp, "data", "model_b")])
        proc = run_converter(os.path.join(self.tmp, "data"), os.path.join(self.tmp, "npy"))
        self.assertEqual(proc.returncode, conv.EXIT_USAGE)
        self.assertIn(os.path.join(self.tmp, "data", "model_a"), proc.stderr)


class TestCommandLineWithoutParquet(TempDirTestCase):
    def fake_missing_pyarrow_env(self):
        """An environment where 'import pyarrow' fails, whether or not it is installed."""
        shadow = os.path.join(self.tmp, "shadow")
        os.makedirs(os.path.join(shadow, "pyarrow"))
        with open(os.path.join(shadow, "pyarrow", "__init__.py"), "w") as f:
            f.write("raise ImportError('No module named pyarrow (test shadow)')\n")
        env = dict(os.environ)
        env["PYTHONPATH"] = shadow + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def test_missing_pyarrow_is_a_clear_error(self):
        src = os.path.join(self.tmp, "dump", "l00h00q")
        os.makedirs(src)
        open(os.path.join(src, "data.parquet"), "wb").close()
        proc = run_converter(os.path.join(self.tmp, "dump"), os.path.join(self.tmp, "npy"),
                             env=self.fake_missing_pyarrow_env())
        self.assertEqual(proc.returncode, conv.EXIT_NO_PYARROW)
        self.assertIn("pyarrow is not installed", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "npy")))

    def test_help_works_without_pyarrow(self):
        proc = run_converter("--help", env=self.fake_missing_pyarrow_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("sliding_window", proc.stdout)

    def test_no_head_folders(self):
        proc = run_converter(self.tmp, os.path.join(self.tmp, "npy"))
        self.assertEqual(proc.returncode, conv.EXIT_USAGE)
        self.assertIn("no l{LL}h{HH}q", proc.stderr)


class TestParquetConversion(TempDirTestCase):
    """End to end on small dumps in qk-sniffer's exact schema, several row groups each."""

    def write_head(self, folder, n, d, seed=0, window=None, row_group_size=3):
        rng = np.random.default_rng(seed)
        position = np.arange(n, dtype=np.int32) % 16
        data = {"vector": to_bf16(rng.standard_normal((n, d)).astype(np.float32)),
                "position": position, "bucket": position // 4,
                "example_id": (np.arange(n) // 16).astype(np.int32)}
        write_table(os.path.join(self.tmp, "dump", folder),
                    sniffed_table(**data, sliding_window=window), row_group_size)
        return data

    def test_convert_dump(self):
        q = self.write_head("l00h00q", n=40, d=8, window=64)
        k = self.write_head("l00h00k", n=37, d=8, seed=1)
        dst = os.path.join(self.tmp, "npy")
        proc = run_converter(os.path.join(self.tmp, "dump"), dst)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("40 rows, d = 8", proc.stdout)
        for name, data in (("l00h00q", q), ("l00h00k", k)):
            folder = os.path.join(dst, name)
            for stem in ("vector", "position", "bucket", "example_id"):
                got = self.load(folder, stem)
                self.assertEqual(got.dtype, data[stem].dtype, stem)
                np.testing.assert_array_equal(got, data[stem])
        np.testing.assert_array_equal(self.load(os.path.join(dst, "l00h00q"), "sliding_window"),
                                      np.full(40, 64))
        self.assertEqual(sorted(os.listdir(os.path.join(dst, "l00h00k"))),
                         ["bucket.npy", "example_id.npy", "position.npy", "vector.npy"])

    def test_examples_csv_is_carried_or_its_absence_said(self):
        # qk-sniffer's Parquet records no documents: none written, and the note says so (an
        # earlier run's examples.csv removed); a capture_qk.py dump's examples.csv is copied as is
        self.write_head("l00h00q", n=20, d=2)
        self.write_head("l00h00k", n=20, d=2)
        src, dst = os.path.join(self.tmp, "dump"), os.path.join(self.tmp, "npy")
        os.makedirs(dst)
        with open(os.path.join(dst, "examples.csv"), "w") as f:
            f.write("stale\n")
        proc = run_converter(src, dst)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("no examples.csv (qk-sniffer's Parquet records no documents): each example is "
                      "taken as its own document", proc.stdout)
        self.assertFalse(os.path.exists(os.path.join(dst, "examples.csv")))
        text = ("example_id,document_id,chunk,fingerprint,document_fingerprint\n"
                "0,5,0,0123456789abcdef,fedcba9876543210\n1,5,1,,\n")
        with open(os.path.join(src, "examples.csv"), "w") as f:
            f.write(text)
        proc = run_converter(src, dst)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(dst, "examples.csv")) as f:
            self.assertEqual(f.read(), text)

    def test_only(self):
        self.write_head("l00h00q", n=5, d=2)
        self.write_head("l00h00k", n=5, d=2)
        dst = os.path.join(self.tmp, "npy")
        proc = run_converter(os.path.join(self.tmp, "dump"), dst, "--only", "l00h00k", "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "")
        self.assertEqual(os.listdir(dst), ["l00h00k"])
        proc = run_converter(os.path.join(self.tmp, "dump"), dst, "--only", "l09h00k")
        self.assertEqual(proc.returncode, conv.EXIT_USAGE)
        self.assertIn("l09h00k", proc.stderr)

    def test_bad_folders_fail_others_convert(self):
        self.write_head("l00h00q", n=6, d=4)
        data = self.write_head("l00h01q", n=6, d=4)
        rows = data["vector"].tolist()
        rows[4] = rows[4][:3]
        table = sniffed_table(**data).set_column(
            3, "vector", pa.array(rows, type=pa.list_(pa.float32())))
        ragged = write_table(os.path.join(self.tmp, "dump", "l00h01q"), table, 2)
        os.makedirs(os.path.join(self.tmp, "dump", "l00h02q"))
        broken = os.path.join(self.tmp, "dump", "l00h02q", "data.parquet")
        with open(broken, "w") as f:
            f.write("not parquet")
        dst = os.path.join(self.tmp, "npy")
        proc = run_converter(os.path.join(self.tmp, "dump"), dst)
        self.assertEqual(proc.returncode, conv.EXIT_SOME_FAILED)
        self.assertIn(ragged + ": column 'vector'", proc.stderr)
        self.assertIn("row 4 has length 3", proc.stderr)
        self.assertIn(broken + ": not a readable Parquet file", proc.stderr)
        self.assertIn("2 of 3 folders not converted", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertTrue(os.path.exists(os.path.join(dst, "l00h00q", "vector.npy")))
        self.assertFalse(os.path.exists(os.path.join(dst, "l00h01q")))
        self.assertFalse(os.path.exists(os.path.join(dst, "l00h02q")))


if __name__ == "__main__":
    unittest.main()
