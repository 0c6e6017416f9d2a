"""Tests of examples/convert_sniffed_qk.py.

The NPY writing and the column checks are tested on plain Python / NumPy data (no
pyarrow needed). The Parquet conversion end to end needs pyarrow and is SKIPPED, with
the reason, where pyarrow cannot be imported. Run from the repository root:
    /usr/bin/python3 -m unittest discover -s tests/python -v
or alone:
    /usr/bin/python3 tests/python/test_convert_sniffed_qk.py -v
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "convert_sniffed_qk.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

import convert_sniffed_qk as conv  # noqa: E402

HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None
NO_PYARROW_REASON = ("pyarrow is not installed for " + sys.executable +
                     ": the Parquet -> NPY conversion is not tested here")


def run_converter(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=300)


def sample_columns(n=6, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "vector": [list(rng.standard_normal(d).astype(np.float32)) for _ in range(n)],
        "position": list(range(n)),
        "bucket": [0] + [int(np.log2(p)) + 1 for p in range(1, n)],
        "example_id": [0] * (n // 2) + [1] * (n - n // 2),
        "sliding_window": [None] * n,
        "token_str": ["tok"] * n,
    }


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
        cols = sample_columns()
        folder = os.path.join(self.tmp, "out", "l03h07q")
        written = conv.write_npy_head(folder, cols)
        self.assertEqual(sorted(os.path.basename(p) for p in written),
                         ["bucket.npy", "example_id.npy", "position.npy",
                          "sliding_window.npy", "vector.npy"])
        self.assertEqual(sorted(os.listdir(folder)), sorted(os.path.basename(p)
                                                            for p in written))
        vec = self.load(folder, "vector")
        self.assertEqual(vec.dtype, np.float32)
        self.assertEqual(vec.shape, (6, 4))
        self.assertTrue(vec.flags["C_CONTIGUOUS"])
        np.testing.assert_array_equal(vec, np.array(cols["vector"], dtype=np.float32))
        for name in ("position", "bucket", "example_id"):
            arr = self.load(folder, name)
            self.assertIn(arr.dtype, (np.dtype(np.int32), np.dtype(np.int64)), name)
            self.assertEqual(arr.dtype.byteorder in ("<", "="), True)
            np.testing.assert_array_equal(arr, cols[name])

    def test_null_sliding_windows_become_zero(self):
        cols = sample_columns(n=4)
        cols["sliding_window"] = [None, 4096, None, 4096]
        folder = os.path.join(self.tmp, "l00h00q")
        conv.write_npy_head(folder, cols)
        sw = self.load(folder, "sliding_window")
        self.assertIn(sw.dtype, (np.dtype(np.int32), np.dtype(np.int64)))
        np.testing.assert_array_equal(sw, [0, 4096, 0, 4096])

    def test_all_null_and_masked_sliding_windows(self):
        cols = sample_columns(n=3)
        conv.write_npy_head(os.path.join(self.tmp, "a"), cols)
        np.testing.assert_array_equal(self.load(os.path.join(self.tmp, "a"),
                                                "sliding_window"), [0, 0, 0])
        cols["sliding_window"] = np.ma.masked_array(np.array([7, 512, 7], dtype=np.int32),
                                                    mask=[True, False, True])
        conv.write_npy_head(os.path.join(self.tmp, "b"), cols)
        sw = self.load(os.path.join(self.tmp, "b"), "sliding_window")
        self.assertEqual(sw.dtype, np.int32)
        np.testing.assert_array_equal(sw, [0, 512, 0])

    def test_numpy_input_keeps_int32_and_float32(self):
        n, d = 5, 3
        cols = {
            "vector": np.arange(n * d, dtype=np.float32).reshape(n, d),
            "position": np.arange(n, dtype=np.int32),
            "bucket": np.array([0, 1, 2, 2, 3], dtype=np.int32),
            "example_id": np.zeros(n, dtype=np.int32),
        }
        folder = os.path.join(self.tmp, "l01h01k")
        conv.write_npy_head(folder, cols)
        for name in ("position", "bucket", "example_id"):
            self.assertEqual(self.load(folder, name).dtype, np.int32, name)
        np.testing.assert_array_equal(self.load(folder, "vector"), cols["vector"])
        # No sliding_window column: no file (the driver treats that as no window).
        self.assertFalse(os.path.exists(os.path.join(folder, "sliding_window.npy")))

    def test_ragged_vectors_are_an_error_naming_folder_and_row(self):
        cols = sample_columns(n=5, d=4)
        cols["vector"][3] = cols["vector"][3][:3]
        folder = os.path.join(self.tmp, "l02h05k")
        with self.assertRaises(conv.ConversionError) as ctx:
            conv.write_npy_head(folder, cols)
        msg = str(ctx.exception)
        self.assertIn(folder, msg)
        self.assertIn("row 3", msg)
        self.assertIn("length 3", msg)
        self.assertFalse(os.path.exists(folder), "nothing may be written on error")

    def test_error_names_label(self):
        cols = sample_columns(n=3)
        cols["vector"][2] = cols["vector"][2] + [0.0]
        with self.assertRaises(conv.ConversionError) as ctx:
            conv.write_npy_head(os.path.join(self.tmp, "x"), cols, label="dump/l00h01q")
        self.assertIn("dump/l00h01q", str(ctx.exception))
        self.assertIn("row 2", str(ctx.exception))

    def test_failed_write_leaves_previous_files(self):
        folder = os.path.join(self.tmp, "l00h00q")
        good = sample_columns(n=4)
        conv.write_npy_head(folder, good)
        before = self.snapshot(folder)
        bad = sample_columns(n=4, seed=1)
        bad["vector"][1] = None
        with self.assertRaises(conv.ConversionError) as ctx:
            conv.write_npy_head(folder, bad)
        self.assertIn("row 1", str(ctx.exception))
        after = self.snapshot(folder)
        self.assertEqual(before, after)

    def test_overwrite_leaves_no_temp_files_and_drops_stale_window(self):
        folder = os.path.join(self.tmp, "l00h00q")
        conv.write_npy_head(folder, sample_columns(n=4))
        self.assertTrue(os.path.exists(os.path.join(folder, "sliding_window.npy")))
        cols = sample_columns(n=7, d=2, seed=3)
        del cols["sliding_window"]
        conv.write_npy_head(folder, cols)
        self.assertEqual(sorted(os.listdir(folder)),
                         ["bucket.npy", "example_id.npy", "position.npy", "vector.npy"])
        self.assertEqual(self.load(folder, "vector").shape, (7, 2))

    def test_other_column_errors(self):
        cases = [
            ("missing column", lambda c: c.pop("example_id"), "'example_id'"),
            ("null position", lambda c: c["position"].__setitem__(2, None), "row 2"),
            ("non-integer bucket", lambda c: c.__setitem__("bucket", [0, 1, 2.5, 3, 3, 3]),
             "row 2"),
            ("row count", lambda c: c["position"].append(99), "'position' has 7 rows"),
            ("no rows", lambda c: c.update(vector=[], position=[], bucket=[],
                                           example_id=[], sliding_window=[]), "no rows"),
            ("empty vectors", lambda c: c.update(vector=[[]] * 6), "empty"),
        ]
        for what, change, expected in cases:
            with self.subTest(what):
                cols = sample_columns(n=6)
                change(cols)
                with self.assertRaises(conv.ConversionError) as ctx:
                    conv.validate_columns("l04h00q", cols)
                self.assertIn("l04h00q", str(ctx.exception))
                self.assertIn(expected, str(ctx.exception))


class TestVectorsFromFlat(unittest.TestCase):
    """The helper the pyarrow path uses: concatenated values plus per-row lengths."""

    def test_reshape(self):
        m = conv.vectors_from_flat("f", np.arange(6, dtype=np.float32), [2, 2, 2])
        np.testing.assert_array_equal(m, [[0, 1], [2, 3], [4, 5]])
        self.assertEqual(m.dtype, np.float32)

    def test_ragged_and_null(self):
        with self.assertRaises(conv.ConversionError) as ctx:
            conv.vectors_from_flat("l00h00k", np.arange(5.0), [2, 2, 1])
        self.assertIn("row 2", str(ctx.exception))
        with self.assertRaises(conv.ConversionError) as ctx:
            conv.vectors_from_flat("l00h00k", np.arange(4.0), [2, -1, 2])
        self.assertIn("null in row 1", str(ctx.exception))


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


@unittest.skipUnless(HAVE_PYARROW, NO_PYARROW_REASON)
class TestParquetConversion(TempDirTestCase):
    """End to end on small Parquet files in the qk-sniffer schema (needs pyarrow)."""

    def write_parquet(self, folder, n, d, ragged_row=None, windows=None, seed=0,
                      fixed_size=False):
        import pyarrow as pa
        import pyarrow.parquet as pq

        rng = np.random.default_rng(seed)
        vectors = [rng.standard_normal(d).astype(np.float32).tolist() for _ in range(n)]
        if ragged_row is not None:
            vectors[ragged_row] = vectors[ragged_row][:-1]
        table = pa.table({
            "bucket": pa.array([min(p, 7) for p in range(n)], type=pa.int32()),
            "example_id": pa.array([p // 4 for p in range(n)], type=pa.int32()),
            "position": pa.array([p % 4 for p in range(n)], type=pa.int32()),
            # qk-sniffer's notes say fixed_size_list<float32>; the brief says list<float32>.
            "vector": pa.array(vectors, type=pa.list_(pa.float32(), d) if fixed_size
                               else pa.list_(pa.float32())),
            "sliding_window": pa.array(windows if windows is not None else [None] * n,
                                       type=pa.int32()),
            "token_str": pa.array([f"t{p}" for p in range(n)], type=pa.string()),
        })
        os.makedirs(os.path.join(self.tmp, "dump", folder))
        # Small row groups: the reader must handle several chunks.
        pq.write_table(table, os.path.join(self.tmp, "dump", folder, "data.parquet"),
                       row_group_size=3)
        return vectors

    def test_convert_dump(self):
        q = self.write_parquet("l00h00q", n=10, d=8, windows=[None, 64] * 5)
        k = self.write_parquet("l00h00k", n=9, d=8, seed=1, fixed_size=True)
        dst = os.path.join(self.tmp, "npy")
        proc = run_converter(os.path.join(self.tmp, "dump"), dst)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        qf, kf = os.path.join(dst, "l00h00q"), os.path.join(dst, "l00h00k")
        np.testing.assert_array_equal(self.load(qf, "vector"), np.array(q, np.float32))
        np.testing.assert_array_equal(self.load(kf, "vector"), np.array(k, np.float32))
        self.assertEqual(self.load(qf, "vector").dtype, np.float32)
        np.testing.assert_array_equal(self.load(qf, "sliding_window"), [0, 64] * 5)
        np.testing.assert_array_equal(self.load(kf, "sliding_window"), [0] * 9)
        np.testing.assert_array_equal(self.load(qf, "position"), [p % 4 for p in range(10)])
        np.testing.assert_array_equal(self.load(qf, "bucket"), [min(p, 7) for p in range(10)])
        np.testing.assert_array_equal(self.load(qf, "example_id"), [p // 4 for p in range(10)])
        self.assertFalse(os.path.exists(os.path.join(qf, "token_str.npy")))

    def test_ragged_folder_fails_others_convert(self):
        self.write_parquet("l00h00q", n=6, d=4)
        self.write_parquet("l00h01q", n=6, d=4, ragged_row=4)
        dst = os.path.join(self.tmp, "npy")
        proc = run_converter(os.path.join(self.tmp, "dump"), dst)
        self.assertEqual(proc.returncode, conv.EXIT_SOME_FAILED)
        self.assertIn("l00h01q", proc.stderr)
        self.assertIn("row 4", proc.stderr)
        self.assertTrue(os.path.exists(os.path.join(dst, "l00h00q", "vector.npy")))
        self.assertFalse(os.path.exists(os.path.join(dst, "l00h01q")))


if __name__ == "__main__":
    unittest.main()
