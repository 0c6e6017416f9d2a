"""The Parquet path agrees with the NPY path: a dump in qk-sniffer's exact schema, converted by
examples/convert_sniffed_qk.py and analyzed by ap_analyze, gives CSVs byte-identical to
ap_analyze on the same dump written directly as NPY.

The dump: 2 layers of 4 query heads on 2 key heads (GQA), layer 1 with a sliding window;
tokens sampled independently for queries and keys; bf16-rounded vectors; several row
groups per file. ap_analyze is $AP_ANALYZE (set by ctest), else build/examples/ap_analyze;
not finding it is a failure. Needs numpy and pyarrow (the project's .venv). Run:
    AP_ANALYZE=build/examples/ap_analyze .venv/bin/python -m unittest \
        discover -s tests/python -p 'test_sniffed_pipeline.py' -v
"""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bindings_util as bu  # noqa: E402
from sniffed_fixtures import head_data, sniffed_table, write_table  # noqa: E402

NUM_LAYERS, NUM_Q, NUM_K, DIM = 2, 4, 2, 8
WINDOW = {0: None, 1: 48}


def run(args):
    return subprocess.run([str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600)


class TestParquetEqualsNpy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ap_sniffed_pipeline_")
        cls.parquet = os.path.join(cls.tmp, "parquet")
        cls.direct = os.path.join(cls.tmp, "npy_direct")
        cls.converted = os.path.join(cls.tmp, "npy_converted")
        rng = np.random.default_rng(7)
        for layer in range(NUM_LAYERS):
            for kind, count in (("q", NUM_Q), ("k", NUM_K)):
                for head in range(count):
                    name = "l%02dh%02d%s" % (layer, head, kind)
                    data = head_data(rng, n_tokens=3 * 128, d=DIM, examples=3,
                                     bucket_size=16, rate=0.5)
                    window = WINDOW[layer]
                    write_table(os.path.join(cls.parquet, name),
                                sniffed_table(**data, sliding_window=window), row_group_size=50)
                    folder = os.path.join(cls.direct, name)
                    os.makedirs(folder)
                    for stem, values in data.items():
                        np.save(os.path.join(folder, stem + ".npy"), values)
                    if window is not None:
                        np.save(os.path.join(folder, "sliding_window.npy"),
                                np.full(len(data["position"]), window, np.int32))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def analyze(self, root, name):
        out = os.path.join(self.tmp, name)
        proc = run([bu.ap_analyze(), "--data-root", root, "--output-dir", out,
                    "--num-q-heads", NUM_Q, "--num-k-heads", NUM_K, "--threads", 2])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return out

    def test_converted_equals_direct(self):
        proc = run([sys.executable, bu.CONVERTER, "--quiet", self.parquet, self.converted])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(sorted(os.listdir(self.converted)), sorted(os.listdir(self.direct)))
        for name in os.listdir(self.direct):
            for stem in ("vector", "position", "bucket", "example_id", "sliding_window"):
                direct = os.path.join(self.direct, name, stem + ".npy")
                converted = os.path.join(self.converted, name, stem + ".npy")
                self.assertEqual(os.path.exists(converted), os.path.exists(direct), converted)
                if os.path.exists(direct):
                    a, b = np.load(direct), np.load(converted)
                    self.assertEqual(a.dtype, b.dtype, converted)
                    np.testing.assert_array_equal(a, b, err_msg=converted)

        from_npy = self.analyze(self.direct, "out_direct")
        from_parquet = self.analyze(self.converted, "out_converted")
        for name in bu.CSV_FILES:  # every CSV of the set, the distance map of §8.1 included
            with open(os.path.join(from_npy, name), "rb") as f:
                want = f.read()
            with open(os.path.join(from_parquet, name), "rb") as f:
                self.assertEqual(f.read(), want, f"{name} differs between the NPY and the "
                                                 f"Parquet path")

        # The layout really is GQA, and the window really reached the analysis.
        with open(os.path.join(from_parquet, "head_metrics.csv"), newline="") as f:
            metrics = list(csv.DictReader(f))
        self.assertEqual(len(metrics), NUM_LAYERS * NUM_Q)
        for row in metrics:
            self.assertEqual(int(row["k_head"]), int(row["q_head"]) // (NUM_Q // NUM_K))
        with open(os.path.join(from_parquet, "head_bucket_plasticity.csv"), newline="") as f:
            cells = list(csv.DictReader(f))
        per_layer = [sum(1 for r in cells if int(r["layer"]) == layer) for layer in range(2)]
        self.assertLess(per_layer[1], per_layer[0],
                        f"the sliding window of layer 1 should remove cells: {per_layer}")


if __name__ == "__main__":
    unittest.main()
