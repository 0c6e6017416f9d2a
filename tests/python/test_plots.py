"""Tests of the plot scripts in examples/plots/ on a small synthetic set of the driver's CSVs.

Each script runs as a subprocess, as a user would run it. Run from the repository root:
    /usr/bin/python3 -m unittest discover -s tests/python -v
or alone:
    /usr/bin/python3 tests/python/test_plots.py -v
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOTS = os.path.join(ROOT, "examples", "plots")
sys.path.insert(0, HERE)
sys.path.insert(0, PLOTS)

from png_check import check_png  # noqa: E402
from synthetic_results import write_synthetic_results  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402

SCRIPTS = ("plot_profile.py", "plot_bucket_heatmap.py", "plot_component_weights.py",
           "plot_head_map.py", "plot_distance_map.py", "render_all.py", "plot_trajectory.py")

# Figure size and resolution set on every call, so that the pixel size is known.
FIG_W, FIG_H, DPI = 8.0, 5.0, 60.0
SIZE_ARGS = ["--figsize", str(FIG_W), str(FIG_H), "--dpi", str(DPI)]
EXPECTED_SHAPE = (int(round(FIG_H * DPI)), int(round(FIG_W * DPI)))


def run_script(name, *args):
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the scripts must choose Agg themselves
    return subprocess.run([sys.executable, os.path.join(PLOTS, name)] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, timeout=300)


class PlotTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ap_plot_test_")
        cls.results = os.path.join(cls.tmp, "results")
        cls.csv = write_synthetic_results(cls.results)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.tmp, self.id().rsplit(".", 1)[-1], name)

    def run_ok(self, name, *args):
        proc = run_script(name, *args)
        self.assertEqual(proc.returncode, 0,
                         f"{name} {' '.join(args)} failed:\n{proc.stderr}")
        return [line for line in proc.stdout.splitlines() if line.strip()]

    def assert_png(self, path, shape=EXPECTED_SHAPE):
        return check_png(path, shape)

    def assert_pdf(self, path):
        self.assertTrue(os.path.isfile(path), f"{path} was not written")
        with open(path, "rb") as f:
            self.assertEqual(f.read(5), b"%PDF-", f"{path} is not a PDF")


def write_compare_results(folder):
    """A small compare_trajectory.csv and compare_heads.csv (docs/method.md §8.6) of three sets."""
    os.makedirs(folder, exist_ok=True)
    rows = ["set,order,quantity,layer,n_heads,mean,se,ci_low,ci_high"]
    for order, name in enumerate(("step1k", "step2k", "ext32k")):
        for quantity, value in (("ap_overall", 0.5), ("ap_first20", 0.6 + 0.02 * order),
                                ("ap_last20", 0.55 - 0.08 * order), ("ap_drop", 0.05 + 0.1 * order),
                                ("bias_strength", 0.02 - 0.009 * order)):
            se = "nan" if quantity == "bias_strength" else "0.01"
            for layer in ("all", "0", "1"):
                rows.append(f"{name},{order},{quantity},{layer},8,{value},{se},{value - 0.02},{value + 0.02}")
    with open(os.path.join(folder, "compare_trajectory.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    rows = ["set_a,set_b,layer,q_head,k_head,quantity,q_bucket,value_a,value_b,difference,se,z,p,q_bh,p_holm,"
            "significant"]
    for a, b in (("step1k", "step2k"), ("step2k", "ext32k")):
        for layer in range(2):
            for head in range(4):
                d = 0.01 * (head - 1.5) * (layer + 1)
                sig = int(abs(d) > 0.02)
                rows.append(f"{a},{b},{layer},{head},{head // 2},ap_overall,,0.5,{0.5 + d},{d},0.01,{d / 0.01},"
                            f"{0.01 if sig else 0.5},{0.02 if sig else 0.6},{0.03 if sig else 1.0},{sig}")
    with open(os.path.join(folder, "compare_heads.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


class TestTrajectory(PlotTestCase):
    def test_trajectory_and_changes(self):
        folder = self.out("compared")
        write_compare_results(folder)
        png = os.path.join(folder, "t.png")
        printed = self.run_ok("plot_trajectory.py", folder, "-o", png, "--changes", *SIZE_ARGS)
        self.assertEqual(printed, [png, os.path.join(folder, "t_changes.png")])
        self.assert_png(png)
        self.assert_png(os.path.join(folder, "t_changes.png"))

    def test_trajectory_by_layer_and_pair(self):
        folder = self.out("compared")
        write_compare_results(folder)
        png = os.path.join(folder, "t.png")
        self.run_ok("plot_trajectory.py", folder, "-o", png, "--layers", "0-1", "--changes", "--pair",
                    "step2k,ext32k", *SIZE_ARGS)
        self.assert_png(os.path.join(folder, "t_changes.png"))
        proc = run_script("plot_trajectory.py", folder, "-o", png, "--changes", "--pair", "x,y")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no rows of ap_overall for the pair x -> y", proc.stderr)


class TestEachPlot(PlotTestCase):
    def test_help(self):
        for name in SCRIPTS:
            with self.subTest(script=name):
                proc = run_script(name, "--help")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("usage:", proc.stdout)

    def test_profile(self):
        png = self.out("profile.png")
        printed = self.run_ok("plot_profile.py", self.csv["profile"], "-o", png, *SIZE_ARGS)
        self.assertEqual(printed, [png])
        self.assert_png(png)

    def test_profile_marks_small_buckets(self):
        """Buckets flagged small_bucket (docs/method.md §2.14) are marked and left out of the mean."""
        import pandas as pd
        import plot_profile
        df = pd.read_csv(self.csv["profile"])
        df["small_bucket"] = (df["q_bucket"] == df["q_bucket"].max()).astype(int)
        path = os.path.join(self.tmp, "profile_small.csv")
        df.to_csv(path, index=False)
        marked = (df["small_bucket"] == 1) & np.isfinite(df["plasticity"])
        self.assertEqual(len(plot_profile.small_buckets(df)), int(marked.sum()))
        self.assertNotIn(df["q_bucket"].max(), set(plot_profile.mean_profile(df)["q_bucket"]))
        self.assertIn(df["q_bucket"].max(), set(plot_profile.mean_profile(df.drop(columns="small_bucket"))["q_bucket"]))
        for extra in ([], ["--facet-by-layer"]):
            png = self.out(f"profile_small{len(extra)}.png")
            self.run_ok("plot_profile.py", path, "-o", png, *extra, *SIZE_ARGS)
            self.assert_png(png)

    def test_profile_facet_by_layer(self):
        png = self.out("profile_facets.png")
        self.run_ok("plot_profile.py", self.csv["profile"], "--facet-by-layer", "-o", png,
                    *SIZE_ARGS)
        self.assert_png(png)

    def test_profile_linear_x_and_layer_subset(self):
        png = self.out("profile_sub.png")
        self.run_ok("plot_profile.py", self.csv["profile"], "--xscale", "linear",
                    "--layers", "1-2", "-o", png, *SIZE_ARGS)
        self.assert_png(png)

    def test_bucket_heatmap_ids(self):
        png = self.out("heatmap_ids.png")
        self.run_ok("plot_bucket_heatmap.py", self.csv["bucket"], "-o", png, *SIZE_ARGS)
        self.assert_png(png)

    def test_bucket_heatmap_tokens_median(self):
        png = self.out("heatmap_tokens.png")
        self.run_ok("plot_bucket_heatmap.py", self.csv["bucket"], "--profile",
                    self.csv["profile"], "--stat", "median", "-o", png, *SIZE_ARGS)
        self.assert_png(png)

    def test_distance_map(self):
        png = self.out("distance.png")
        printed = self.run_ok("plot_distance_map.py", self.csv["distance"], "-o", png, *SIZE_ARGS)
        self.assertEqual(printed, [png])
        img = self.assert_png(png)
        self.assertGreater(len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)), 10)

    def test_distance_map_stats_and_layers(self):
        for stat in ("median", "pooled"):
            with self.subTest(stat=stat):
                png = self.out(f"distance_{stat}.png")
                self.run_ok("plot_distance_map.py", self.csv["distance"], "--stat", stat,
                            "--min-pairs", "50", "--layers", "0-1", "-o", png, *SIZE_ARGS)
                self.assert_png(png)

    def test_distance_map_no_bin_left_still_renders(self):
        png = self.out("distance_empty.png")
        self.run_ok("plot_distance_map.py", self.csv["distance"], "--min-pairs", "100000",
                    "-o", png, *SIZE_ARGS)
        self.assert_png(png)

    def test_distance_map_cell_values(self):
        import plot_distance_map
        import pandas as pd

        df = pd.DataFrame({"layer": [0, 0, 1], "q_head": [0, 0, 0], "k_head": [0, 0, 0],
                           "key_distance_low": [1.0, 1.0, 1.0], "key_distance_high": [2.0, 2.0, 2.0],
                           "query_distance_low": [-np.inf, 4.0, 4.0],
                           "query_distance_high": [0.0, 8.0, 8.0],
                           "plasticity": [0.2, 0.5, 0.9], "n_pairs": [5, 10, 30]})
        keys, queries, values, counts = plot_distance_map.cell_matrix(df, "mean", 1)
        self.assertEqual(keys, [(1.0, 2.0)])
        self.assertEqual(queries, [(-np.inf, 0.0), (4.0, 8.0)])
        np.testing.assert_allclose(values, [[0.2, 0.7]])
        self.assertEqual(counts.tolist(), [[1, 2]])
        _, _, pooled, _ = plot_distance_map.cell_matrix(df, "pooled", 1)
        self.assertAlmostEqual(pooled[0, 1], (0.5 * 10 + 0.9 * 30) / 40)
        _, kept_queries, kept, _ = plot_distance_map.cell_matrix(df, "mean", 6)  # the 5-pair bin goes
        self.assertEqual(kept_queries, [(4.0, 8.0)])
        self.assertAlmostEqual(kept[0, 0], 0.7)
        self.assertEqual(plot_distance_map.edge_label(-np.inf, 0.0), "<0")
        self.assertEqual(plot_distance_map.edge_label(2.0, 4.0), "2-4")
        self.assertEqual(plot_distance_map.edge_label(2 ** 0.5, 2.0), "1.41-2")

    def test_component_weights(self):
        png = self.out("components.png")
        self.run_ok("plot_component_weights.py", self.csv["component"], "-o", png,
                    *SIZE_ARGS)
        self.assert_png(png)

    def test_head_map_two_panels(self):
        png = self.out("head_map.png")
        self.run_ok("plot_head_map.py", self.csv["metrics"], "-o", png, *SIZE_ARGS)
        self.assert_png(png)

    def test_head_map_two_files(self):
        png = self.out("head_map.png")
        printed = self.run_ok("plot_head_map.py", self.csv["metrics"], "--separate",
                              "-o", png, *SIZE_ARGS)
        expected = [self.out("head_map_ap_overall.png"), self.out("head_map_ap_drop.png")]
        self.assertEqual(printed, expected)
        for path in expected:
            self.assert_png(path)

    def test_pdf_on_request(self):
        png = self.out("components.png")
        printed = self.run_ok("plot_component_weights.py", self.csv["component"], "-o", png,
                              "--pdf", *SIZE_ARGS)
        pdf = self.out("components.pdf")
        self.assertEqual(printed, [png, pdf])
        self.assert_png(png)
        self.assert_pdf(pdf)

    def test_format_pdf_only(self):
        base = self.out("profile")
        printed = self.run_ok("plot_profile.py", self.csv["profile"], "-o", base,
                              "--format", "pdf")
        self.assertEqual(printed, [base + ".pdf"])
        self.assert_pdf(base + ".pdf")
        self.assertFalse(os.path.exists(base + ".png"))

    def test_default_output_beside_csv(self):
        results = os.path.join(self.tmp, "default_out")
        csv = write_synthetic_results(results)
        printed = self.run_ok("plot_head_map.py", results)  # a directory stands for its CSV
        self.assertEqual(printed, [os.path.join(results, "head_map.png")])
        self.assertEqual(os.path.dirname(printed[0]), os.path.dirname(csv["metrics"]))
        img = mpimg.imread(printed[0])
        self.assertGreater(img.shape[0], 100)

    def test_all_nan_values_still_render(self):
        results = os.path.join(self.tmp, "all_nan")
        os.makedirs(results)
        with open(os.path.join(results, "head_bucket_plasticity.csv"), "w") as f:
            f.write("layer,q_head,k_head,q_bucket,k_bucket,plasticity,n_pairs\n"
                    "0,0,0,1,0,nan,0\n0,0,0,2,0,nan,0\n0,0,0,2,1,nan,0\n")
        with open(os.path.join(results, "head_profile.csv"), "w") as f:
            f.write("layer,q_head,k_head,q_bucket,tau,n_queries,plasticity,n_pairs\n"
                    "0,0,0,1,1.5,10,nan,0\n0,0,0,2,3.5,20,nan,0\n")
        for name, extra in (("plot_bucket_heatmap.py", ["--profile", results]),
                            ("plot_profile.py", [])):
            with self.subTest(script=name):
                csv = "head_bucket_plasticity.csv" if "heatmap" in name else "head_profile.csv"
                png = self.out(name.replace(".py", ".png"))
                self.run_ok(name, os.path.join(results, csv), "-o", png, *extra, *SIZE_ARGS)
                self.assert_png(png)


class TestRenderAll(PlotTestCase):
    def test_render_all(self):
        out = self.out("figures")
        printed = self.run_ok("render_all.py", "--results", self.results, "--out", out,
                              "--dpi", "50")
        names = ["plasticity_profile.png", "bucket_heatmap.png", "component_weights.png",
                 "head_map.png", "distance_map.png"]
        self.assertEqual(printed, [os.path.join(out, n) for n in names])
        for path in printed:
            img = mpimg.imread(path)
            self.assertGreater(len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)), 1)

    def test_render_all_pdf_and_facets(self):
        out = self.out("figures")
        printed = self.run_ok("render_all.py", "--results", self.results, "--out", out,
                              "--dpi", "40", "--pdf", "--facet-by-layer")
        self.assertEqual(len(printed), 12)
        for path in printed:
            self.assertTrue(os.path.isfile(path), path)
            if path.endswith(".pdf"):
                self.assert_pdf(path)

    def test_render_all_reports_missing_inputs(self):
        results = os.path.join(self.tmp, "partial")
        os.makedirs(results)
        shutil.copy(self.csv["metrics"], results)
        out = self.out("figures")
        proc = run_script("render_all.py", "--results", results, "--out", out)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout.split(), [os.path.join(out, "head_map.png")])
        self.assertIn(os.path.join(results, "head_profile.csv"), proc.stderr)
        self.assertIn(os.path.join(results, "head_component_weights.csv"), proc.stderr)
        self.assertIn(os.path.join(results, "head_distance_plasticity.csv"), proc.stderr)


class TestInputErrors(PlotTestCase):
    CASES = (
        ("plot_profile.py", "profile", "tau"),
        ("plot_bucket_heatmap.py", "bucket", "k_bucket"),
        ("plot_component_weights.py", "component", "weight"),
        ("plot_head_map.py", "metrics", "ap_drop"),
        ("plot_distance_map.py", "distance", "query_distance_high"),
    )

    def drop_column(self, src, column, name):
        import pandas as pd

        df = pd.read_csv(src)
        path = os.path.join(self.tmp, f"missing_{column}_{name}.csv")
        df.drop(columns=[column]).to_csv(path, index=False, na_rep="nan")
        return path

    def test_missing_column(self):
        for script, key, column in self.CASES:
            with self.subTest(script=script, column=column):
                path = self.drop_column(self.csv[key], column, key)
                proc = run_script(script, path, "-o", self.out(key + ".png"))
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(path, proc.stderr)
                self.assertIn(f"'{column}'", proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)
                self.assertFalse(os.path.exists(self.out(key + ".png")))

    def test_missing_profile_column_for_heatmap_labels(self):
        path = self.drop_column(self.csv["profile"], "tau", "profile_for_heatmap")
        proc = run_script("plot_bucket_heatmap.py", self.csv["bucket"], "--profile", path,
                          "-o", self.out("h.png"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn(path, proc.stderr)
        self.assertIn("'tau'", proc.stderr)

    def test_missing_file(self):
        for script, _key, _column in self.CASES:
            with self.subTest(script=script):
                path = os.path.join(self.tmp, "no_such_dir", "no_such.csv")
                proc = run_script(script, path)
                self.assertEqual(proc.returncode, 2)
                self.assertIn(path, proc.stderr)
                self.assertIn("not found", proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)

    def test_empty_and_non_numeric(self):
        empty = os.path.join(self.tmp, "empty.csv")
        open(empty, "w").close()
        proc = run_script("plot_profile.py", empty)
        self.assertEqual(proc.returncode, 2)
        self.assertIn(empty, proc.stderr)
        bad = os.path.join(self.tmp, "bad_value.csv")
        with open(bad, "w") as f:
            f.write("layer,q_head,k_head,component,component_r2,weight\n"
                    "0,0,0,0,0.5,0.25\n0,0,0,1,0.5,oops\n")
        proc = run_script("plot_component_weights.py", bad)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("'weight'", proc.stderr)
        self.assertIn("line 3", proc.stderr)

    def test_bad_format(self):
        proc = run_script("plot_profile.py", self.csv["profile"], "--format", "gif")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("gif", proc.stderr)

    def test_render_all_missing_results_dir(self):
        proc = run_script("render_all.py", "--results", os.path.join(self.tmp, "nope"),
                          "--out", self.out("x"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn("nope", proc.stderr)


class TestCommonLoading(unittest.TestCase):
    """_common.load_csv in-process: 'nan' text, extra columns, whole-number checks."""

    def setUp(self):
        import _common
        import plot_head_map

        self.C = _common
        self.metrics_columns = plot_head_map.COLUMNS
        self.tmp = tempfile.mkdtemp(prefix="ap_common_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, text):
        path = os.path.join(self.tmp, "t.csv")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_nan_and_extra_columns(self):
        path = self.write("layer,q_head,k_head,ap_overall,ap_first20,ap_last20,ap_drop,"
                          "extra\n0,1,0,nan,0.5,-nan,nan,x\n1,0,0,0.25,0.5,0.125,0.375,y\n")
        df = self.C.load_csv(path, self.metrics_columns)
        self.assertTrue(np.isnan(df["ap_overall"].iloc[0]))
        self.assertTrue(np.isnan(df["ap_last20"].iloc[0]))
        self.assertEqual(df["ap_drop"].iloc[1], 0.375)
        self.assertEqual(df["layer"].dtype, np.int64)
        self.assertEqual(list(df["extra"]), ["x", "y"])

    def test_nan_in_id_column_is_an_error(self):
        path = self.write("layer,q_head,k_head,ap_overall,ap_first20,ap_last20,ap_drop\n"
                          "nan,1,0,0.5,0.5,0.5,0\n")
        with self.assertRaises(self.C.InputError) as ctx:
            self.C.load_csv(path, self.metrics_columns)
        self.assertIn("'layer'", str(ctx.exception))
        self.assertIn(path, str(ctx.exception))

    def test_parse_layers(self):
        self.assertEqual(self.C.parse_layers("0-2,5"), {0, 1, 2, 5})
        self.assertEqual(self.C.format_layer_set({0, 1, 2, 5, 7, 8}), "0-2, 5, 7-8")


if __name__ == "__main__":
    unittest.main()
