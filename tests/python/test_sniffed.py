"""Tests of python/attention_plasticity/sniffed.py, the reader of qk-sniffer's Parquet folders.

Needs numpy and pyarrow (the project's .venv); a missing package is an error, not a skip.
Run from the repository root:
    .venv/bin/python -m unittest discover -s tests/python -p 'test_sniffed.py' -v
"""

import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from sniffed_fixtures import SCHEMA, sniffed_table, to_bf16, write_table  # noqa: E402

from attention_plasticity.sniffed import read_sniffed_folder  # noqa: E402


def sample(n=50, d=6, seed=0):
    rng = np.random.default_rng(seed)
    position = np.arange(n, dtype=np.int32) % 20
    return {"vector": to_bf16(rng.standard_normal((n, d)).astype(np.float32)),
            "position": position, "bucket": position // 4,
            "example_id": (np.arange(n) // 20).astype(np.int32)}


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ap_sniffed_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def folder(self, name="l00h00q"):
        return os.path.join(self.tmp, name)

    def write(self, table, name="l00h00q", row_group_size=7):
        return write_table(self.folder(name), table, row_group_size)

    def write_columns(self, columns, name="l00h00q", row_group_size=7):
        """A table from {name: pyarrow array} in the given order (for malformed files)."""
        return self.write(pa.table(columns), name, row_group_size)

    def assert_error(self, path, column, *fragments):
        with self.assertRaises(ValueError) as ctx:
            read_sniffed_folder(os.path.dirname(path))
        message = str(ctx.exception)
        self.assertTrue(message.startswith(path), f"message does not start with the file: "
                                                  f"{message}")
        if column is not None:
            self.assertIn(f"'{column}'", message)
        for fragment in fragments:
            self.assertIn(fragment, message)
        return message


class TestExactSchema(TempDir):
    def test_several_row_groups(self):
        data = sample(n=50)
        path = self.write(sniffed_table(**data), row_group_size=7)
        self.assertEqual(pq.ParquetFile(path).metadata.num_row_groups, 8)
        self.assertEqual(pq.read_schema(path).remove_metadata(), SCHEMA)
        got = read_sniffed_folder(self.folder())
        np.testing.assert_array_equal(got["vector"], data["vector"])
        self.assertEqual(got["vector"].dtype, np.float32)
        self.assertTrue(got["vector"].flags["C_CONTIGUOUS"])
        self.assertTrue(got["vector"].flags["WRITEABLE"])
        for name in ("position", "bucket", "example_id"):
            self.assertEqual(got[name].dtype, np.int32, name)
            np.testing.assert_array_equal(got[name], data[name])
            self.assertTrue(got[name].flags["WRITEABLE"])
        self.assertIsNone(got["sliding_window"])  # null in every row: no window
        self.assertNotIn("token_str", got)

    def test_file_path_and_token_str(self):
        data = sample(n=9)
        tokens = ["[CLS]"] + ["w%d" % i for i in range(7)] + [None]
        path = self.write(sniffed_table(**data, tokens=tokens))
        got = read_sniffed_folder(path, token_str=True)  # the file itself
        self.assertEqual(list(got["token_str"]), tokens)
        np.testing.assert_array_equal(got["position"], data["position"])

    def test_sliding_window(self):
        data = sample(n=12)
        self.write(sniffed_table(**data, sliding_window=64))
        window = read_sniffed_folder(self.folder())["sliding_window"]
        self.assertEqual(window.dtype, np.int32)
        np.testing.assert_array_equal(window, np.full(12, 64))
        # Nulls among values become 0 (<= 0 means no window).
        mixed = pa.array([None, 64] * 6, type=pa.int32())
        self.write(sniffed_table(**data, sliding_window=mixed), name="l01h00q")
        np.testing.assert_array_equal(read_sniffed_folder(self.folder("l01h00q"))["sliding_window"],
                                      [0, 64] * 6)

    def test_no_optional_columns(self):
        data = sample(n=5)
        table = sniffed_table(**data).drop_columns(["sliding_window", "token_str"])
        self.write(table)
        got = read_sniffed_folder(self.folder(), token_str=True)
        self.assertIsNone(got["sliding_window"])
        self.assertIsNone(got["token_str"])


class TestAcceptedVariants(TempDir):
    """Other encodings of the same data: read as the same arrays."""

    def test_fixed_size_and_large_list_and_wider_types(self):
        data = sample(n=10, d=3)
        base = {"bucket": pa.array(data["bucket"], pa.int64()),
                "example_id": pa.array(data["example_id"], pa.int16()),
                "position": pa.array(data["position"], pa.uint32())}
        flat = pa.array(data["vector"].ravel())
        for name, vector in (("fixed", pa.FixedSizeListArray.from_arrays(flat, 3)),
                             ("large", pa.LargeListArray.from_arrays(
                                 pa.array(np.arange(0, 31, 3, dtype=np.int64)), flat))):
            with self.subTest(name):
                self.write_columns({**base, "vector": vector}, name=f"l00h0{len(name)}q")
                got = read_sniffed_folder(self.folder(f"l00h0{len(name)}q"))
                np.testing.assert_array_equal(got["vector"], data["vector"])
                self.assertEqual(got["bucket"].dtype, np.int64)
                self.assertEqual(got["example_id"].dtype, np.int64)
                self.assertEqual(got["position"].dtype, np.int64)
                np.testing.assert_array_equal(got["position"], data["position"])

    def test_float64_and_float16_values(self):
        data = sample(n=4, d=2)
        for value_type, dtype in ((pa.float64(), np.float64), (pa.float16(), np.float32)):
            with self.subTest(str(value_type)):
                vector = pa.array(data["vector"].astype(dtype).tolist(),
                                  type=pa.list_(value_type))
                self.write_columns({"bucket": pa.array(data["bucket"]),
                                    "example_id": pa.array(data["example_id"]),
                                    "position": pa.array(data["position"]), "vector": vector})
                got = read_sniffed_folder(self.folder())["vector"]
                self.assertEqual(got.dtype, dtype)
                np.testing.assert_array_equal(got, data["vector"])

    def test_untyped_all_null_window(self):
        data = sample(n=4)
        table = sniffed_table(**data).drop_columns(["sliding_window"])
        table = table.append_column("sliding_window", pa.nulls(4))
        self.write(table)
        self.assertIsNone(read_sniffed_folder(self.folder())["sliding_window"])


class TestMalformed(TempDir):
    """One test per kind of bad input; the message starts with the file and names the column."""

    def columns(self, n=30, **override):
        data = sample(n=n, d=4)
        table = sniffed_table(**data)
        cols = {name: table.column(name) for name in table.column_names}
        cols.update(override)
        return cols

    def test_missing_column(self):
        for column in ("bucket", "example_id", "position", "vector"):
            with self.subTest(column):
                cols = self.columns()
                del cols[column]
                path = self.write_columns(cols, name=f"l00h00{column[0]}")
                # l00h00{b,e,p,v}: not head-folder names, but the reader takes any folder.
                self.assert_error(path, column, "missing column")

    def test_wrong_types(self):
        n = 30
        cases = {
            "position": pa.array(np.arange(n, dtype=np.float64)),
            "bucket": pa.array(["0"] * n),
            "example_id": pa.array([True] * n),
            "vector": pa.array(np.ones(n, np.float32)),
            "sliding_window": pa.array(np.ones(n, np.float32)),
            "token_str": pa.array(np.arange(n, dtype=np.int32)),
        }
        for column, array in cases.items():
            with self.subTest(column):
                path = self.write_columns(self.columns(**{column: array}), name="l00h01q")
                self.assert_error(path, column, "type")

    def test_vector_of_integers(self):
        n = 30
        ints = pa.array([[1, 2, 3, 4]] * n, type=pa.list_(pa.int32()))
        path = self.write_columns(self.columns(vector=ints))
        self.assert_error(path, "vector", "int32", "list<float32>")

    def test_ragged_vectors(self):
        data = sample(n=30, d=4)
        rows = data["vector"].tolist()
        rows[17] = rows[17][:3]  # in the third row group of 7 rows
        path = self.write_columns(self.columns(vector=pa.array(rows, type=pa.list_(pa.float32()))))
        self.assert_error(path, "vector", "different lengths", "row 17 has length 3",
                          "row 0 has length 4")

    def test_null_vector_row(self):
        rows = sample(n=30, d=4)["vector"].tolist()
        rows[23] = None
        path = self.write_columns(self.columns(vector=pa.array(rows, type=pa.list_(pa.float32()))))
        self.assert_error(path, "vector", "null in row 23")

    def test_null_inside_a_vector(self):
        rows = sample(n=30, d=4)["vector"].tolist()
        rows[9][2] = None
        path = self.write_columns(self.columns(vector=pa.array(rows, type=pa.list_(pa.float32()))))
        self.assert_error(path, "vector", "null value in row 9", "element 2")

    def test_nulls_in_integer_columns(self):
        for column in ("bucket", "example_id", "position"):
            with self.subTest(column):
                values = list(range(30))
                values[11] = None
                path = self.write_columns(self.columns(**{column: pa.array(values, pa.int32())}))
                self.assert_error(path, column, "null in row 11")

    def test_empty_vectors(self):
        path = self.write_columns(self.columns(
            vector=pa.array([[]] * 30, type=pa.list_(pa.float32()))))
        self.assert_error(path, "vector", "empty vectors")

    def test_no_rows(self):
        path = self.write(sniffed_table(**sample(n=0)))
        self.assert_error(path, "vector", "no rows")

    def test_empty_file(self):
        os.makedirs(self.folder())
        path = os.path.join(self.folder(), "data.parquet")
        open(path, "wb").close()
        self.assert_error(path, None, "empty file")

    def test_not_parquet(self):
        os.makedirs(self.folder())
        path = os.path.join(self.folder(), "data.parquet")
        with open(path, "w") as f:
            f.write("bucket,example_id,position,vector\n0,0,0,1.0\n")
        self.assert_error(path, None, "not a readable Parquet file")

    def test_truncated_parquet(self):
        path = self.write(sniffed_table(**sample(n=30)))
        with open(path, "rb") as f:
            head = f.read()[:200]
        with open(path, "wb") as f:
            f.write(head)
        self.assert_error(path, None, "Parquet")

    def test_missing_file(self):
        os.makedirs(self.folder())
        with self.assertRaises(FileNotFoundError) as ctx:
            read_sniffed_folder(self.folder())
        self.assertIn(os.path.join(self.folder(), "data.parquet"), str(ctx.exception))

    def test_uint64_too_large(self):
        values = pa.array([0] * 29 + [2 ** 63], type=pa.uint64())
        path = self.write_columns(self.columns(position=values))
        self.assert_error(path, "position", "row 29", "int64")


if __name__ == "__main__":
    unittest.main()
