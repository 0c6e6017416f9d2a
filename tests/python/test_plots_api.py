"""Tests of attention_plasticity.plots, the figures as functions of DataFrames and results.

Each function is called on in-memory DataFrames (hand-made tables whose cell values are known, and
the synthetic result set of the plot script tests read with pandas), and the figure it returns is
read back: its axes, titles, and the values in its images, lines and bars, compared with values
computed here from the rows. The package is loaded from this source tree as the scripts of
examples/plots load it, so that these tests run with Debian's /usr/bin/python3 (numpy, pandas,
matplotlib; no compiled module). With ``--package`` (the project's venv, the package installed)
they also check ``ap.plots`` itself: that ``import attention_plasticity`` does not import
matplotlib, and each function on the tables of a real analysis (analyze_dump).

Run from the repository root:
    /usr/bin/python3 tests/python/test_plots_api.py -v
    .venv/bin/python tests/python/test_plots_api.py -v --package
"""

import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
from collections import namedtuple

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "examples", "plots")]

PACKAGE = "--package" in sys.argv
if PACKAGE:
    sys.argv.remove("--package")

import _common  # noqa: E402  (loads the plots package from the source tree, Agg backend)
from synthetic_results import write_synthetic_results  # noqa: E402

P = _common.P
NAN = float("nan")


def close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)


def image_axes(fig):
    """The axes that hold a heatmap image, in order."""
    return [ax for ax in fig.axes if ax.images]


def image_values(ax):
    """The heatmap's cell values: NaN where the cell is masked (no value)."""
    return np.ma.filled(np.ma.asarray(ax.images[0].get_array()).astype(float), np.nan)


def metrics_frame():
    """head_metrics of 2 layers x 3 query heads; layer 1 head 2 has no row, layer 0 head 1 no
    ap_overall (NaN)."""
    rows = [  # layer, q_head, ap_overall, ap_first20, ap_last20
        (0, 0, 0.50, 0.60, 0.40),
        (0, 1, NAN, 0.70, 0.65),
        (0, 2, 0.25, 0.30, 0.45),
        (1, 0, 0.80, 0.90, 0.50),
        (1, 1, 0.10, 0.20, 0.20),
    ]
    return pd.DataFrame({"layer": [r[0] for r in rows], "q_head": [r[1] for r in rows],
                         "k_head": [r[1] // 2 for r in rows], "ap_overall": [r[2] for r in rows],
                         "ap_first20": [r[3] for r in rows], "ap_last20": [r[4] for r in rows],
                         "ap_drop": [r[3] - r[4] for r in rows], "n_q_tokens": 100})


class SyntheticTables(unittest.TestCase):
    """The synthetic result set of the script tests, read into DataFrames."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ap_plots_api_")
        paths = write_synthetic_results(cls.tmp)
        cls.tables = {os.path.basename(p)[:-4]: pd.read_csv(p) for p in paths.values()}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


class TestHeadMap(unittest.TestCase):
    def test_cells_are_the_tables_values(self):
        df = metrics_frame()
        fig = P.head_map(df)
        try:
            self.assertEqual(len(image_axes(fig)), 2)
            self.assertEqual(len(fig.axes), 4)  # two panels, two colour bars
            overall, drop = (image_values(ax) for ax in image_axes(fig))
            np.testing.assert_array_equal(overall, [[0.50, NAN, 0.25], [0.80, 0.10, NAN]])
            np.testing.assert_allclose(drop, [[0.20, 0.05, -0.15], [0.40, 0.0, NAN]], atol=1e-15)
            titles = [ax.get_title() for ax in image_axes(fig)]
            self.assertTrue(titles[0].startswith("ap_overall"), titles)
            self.assertIn("2 of 6 heads without a value", titles[0])
            self.assertTrue(titles[1].startswith("ap_drop"), titles)
            self.assertEqual(fig._suptitle.get_text(), "Attention plasticity per head (5 heads in 2 layers)")
            lo, hi = image_axes(fig)[1].images[0].get_clim()
            self.assertEqual((lo, hi), (-0.4, 0.4))  # diverging, centred on 0
        finally:
            close(fig)

    def test_one_quantity_and_layers(self):
        fig = P.head_map(metrics_frame(), ("ap_first20",), layers=[1], title="T", figsize=(4, 3))
        try:
            (ax,) = image_axes(fig)
            np.testing.assert_array_equal(image_values(ax), [[0.90, 0.20]])  # the heads of layer 1
            self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["1"])
            self.assertEqual(fig._suptitle.get_text(), "T")
            self.assertEqual(tuple(fig.get_size_inches()), (4.0, 3.0))
        finally:
            close(fig)

    def test_annotations_are_the_values(self):
        fig = P.head_map(metrics_frame(), "ap_overall", annotate="yes")
        try:
            texts = sorted(t.get_text() for t in image_axes(fig)[0].texts)
            self.assertEqual(texts, ["0.10", "0.25", "0.50", "0.80"])
        finally:
            close(fig)


class TestProfile(SyntheticTables):
    def test_mean_line_is_the_mean_over_heads(self):
        df = self.tables["head_profile"]
        fig = P.profile(df)
        try:
            ax = fig.axes[0]
            # Independent mean: per query bucket, over the rows with pairs and a plasticity.
            sums = {}
            for _, r in df.iterrows():
                if r["n_pairs"] > 0 and np.isfinite(r["plasticity"]):
                    s = sums.setdefault(int(r["q_bucket"]), [0.0, 0, 0.0, 0])
                    s[0] += r["plasticity"]
                    s[1] += 1
                if np.isfinite(r["tau"]):
                    s = sums.setdefault(int(r["q_bucket"]), [0.0, 0, 0.0, 0])
                    s[2] += r["tau"]
                    s[3] += 1
            expected = sorted((s[2] / s[3], s[0] / s[1]) for s in sums.values() if s[1])
            mean = max(ax.lines, key=lambda line: line.get_linewidth())
            np.testing.assert_allclose(np.column_stack([mean.get_xdata(), mean.get_ydata()]), expected)
            heads_with_values = df[(df["n_pairs"] > 0) & df["plasticity"].notna()][["layer", "q_head"]]
            self.assertEqual(len(ax.lines), len(heads_with_values.drop_duplicates()) + 1)
            self.assertIn("12 heads in 3 layers", ax.get_title())
            self.assertEqual(ax.get_xscale(), "log")  # tau spans more than a factor 20
        finally:
            close(fig)

    def test_facets_one_panel_per_layer(self):
        df = self.tables["head_profile"]
        fig = P.profile(df, facet_by_layer=True, layers=[0, 2], xscale="linear", ylim=(0.1, 0.9))
        try:
            panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().startswith("layer")]
            self.assertEqual([ax.get_title() for ax in panels], ["layer 0", "layer 2"])
            self.assertEqual(panels[0].get_ylim(), (0.1, 0.9))
            self.assertEqual(panels[0].get_xscale(), "linear")
        finally:
            close(fig)


class TestBucketHeatmap(unittest.TestCase):
    def frame(self):
        rows = [  # layer, q_head, q_bucket, k_bucket, plasticity, n_pairs
            (0, 0, 1, 0, 0.2, 5), (0, 0, 2, 0, 0.4, 5), (0, 0, 2, 1, 0.6, 5),
            (0, 1, 1, 0, 0.4, 5), (0, 1, 2, 0, 0.9, 0), (0, 1, 2, 1, 0.9, 5),
            (0, 2, 1, 0, 0.9, 5),
        ]
        return pd.DataFrame(rows, columns=["layer", "q_head", "q_bucket", "k_bucket", "plasticity",
                                           "n_pairs"]).assign(k_head=0)

    def test_cells_are_the_mean_over_heads(self):
        fig = P.bucket_heatmap(self.frame())
        try:
            (ax,) = image_axes(fig)
            # (1,0): heads 0.2, 0.4, 0.9; (2,0): 0.4 (head 1 has no pairs there); (2,1): 0.6, 0.9
            np.testing.assert_allclose(image_values(ax), [[1.5 / 3, NAN], [0.4, 0.75]])
            self.assertIn("up to 3 heads with a value per cell", ax.get_title())
            self.assertEqual(ax.get_ylabel(), "query bucket id (no head_profile: ids, not tokens)")
        finally:
            close(fig)
        fig = P.bucket_heatmap(self.frame(), stat="median", vmin=0, vmax=1)
        try:
            ax = image_axes(fig)[0]
            np.testing.assert_allclose(image_values(ax), [[0.4, NAN], [0.4, 0.75]])
            self.assertEqual(ax.images[0].get_clim(), (0, 1))
        finally:
            close(fig)

    def test_profile_labels_the_buckets_in_tokens(self):
        profile = pd.DataFrame({"layer": 0, "q_head": [0, 0, 1, 1], "k_head": 0, "q_bucket": [1, 2, 1, 2],
                                "tau": [1.0, 3.0, 2.0, 3.0]})
        for fig in (P.bucket_heatmap(self.frame(), profile=profile),
                    P.bucket_heatmap({"head_bucket_plasticity": self.frame(), "head_profile": profile}),
                    P.bucket_heatmap(types.SimpleNamespace(tables={"head_bucket_plasticity": self.frame(),
                                                                   "head_profile": profile}))):
            try:
                ax = image_axes(fig)[0]
                self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["1.5", "3"])
                self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["#0", "1.5"])
            finally:
                close(fig)
        fig = P.bucket_heatmap({"head_bucket_plasticity": self.frame(), "head_profile": profile}, profile=False)
        try:
            self.assertEqual([t.get_text() for t in image_axes(fig)[0].get_yticklabels()], ["1", "2"])
        finally:
            close(fig)


class TestDistanceMap(unittest.TestCase):
    def frame(self):
        return pd.DataFrame({"layer": [0, 0, 1, 1], "q_head": 0, "k_head": 0,
                             "key_distance_low": [1.0, 1.0, 1.0, 2.0], "key_distance_high": [2.0, 2.0, 2.0, 4.0],
                             "query_distance_low": [-np.inf, 4.0, 4.0, 4.0],
                             "query_distance_high": [0.0, 8.0, 8.0, 8.0],
                             "plasticity": [0.2, 0.5, 0.9, 0.3], "n_pairs": [5, 10, 30, 20]})

    def test_cells_by_stat(self):
        for stat, cell in (("mean", 0.7), ("median", 0.7), ("pooled", (0.5 * 10 + 0.9 * 30) / 40)):
            fig = P.distance_map(self.frame(), stat=stat, min_pairs=1)
            try:
                (ax,) = image_axes(fig)
                # rows: key distance 1-2, 2-4 (from the bottom); columns: <0, 4-8
                np.testing.assert_allclose(image_values(ax), [[0.2, cell], [NAN, 0.3]])
                self.assertEqual(ax.images[0].origin, "lower")
                self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["<0", "4-8"])
                self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["1-2", "2-4"])
            finally:
                close(fig)

    def test_min_pairs_leaves_bins_out(self):
        fig = P.distance_map(self.frame(), min_pairs=6)  # the 5-pair bin goes
        try:
            np.testing.assert_allclose(image_values(image_axes(fig)[0]), [[0.7], [0.3]])
        finally:
            close(fig)


class TestComponentWeights(SyntheticTables):
    def test_bars_are_the_mean_weights(self):
        df = self.tables["head_component_weights"]
        fig = P.component_weights(df, logy=True)
        try:
            ax = fig.axes[0]
            expected = {}
            for _, r in df.iterrows():
                if np.isfinite(r["weight"]):
                    expected.setdefault(int(r["component"]), []).append(r["weight"])
            bars = {int(round(p.get_x() + p.get_width() / 2)): p.get_height() for p in ax.patches}
            self.assertEqual(sorted(bars), sorted(expected))
            for c, weights in expected.items():
                self.assertAlmostEqual(bars[c], sum(weights) / len(weights), places=12)
            self.assertEqual(ax.get_yscale(), "log")
        finally:
            close(fig)


def compare_tables():
    """compare_trajectory and compare_heads of three sets (docs/method.md §8.6), as DataFrames."""
    rows = []
    for order, name in enumerate(("a", "b", "c")):
        for quantity, value in (("ap_first20", 0.6 + 0.02 * order), ("ap_last20", 0.55 - 0.08 * order),
                                ("bias_strength", 0.02 - 0.009 * order)):
            for layer in ("all", "0"):
                rows.append((name, order, quantity, layer, 4, value, 0.01, value - 0.02, value + 0.03))
    trajectory = pd.DataFrame(rows, columns=["set", "order", "quantity", "layer", "n_heads", "mean", "se",
                                             "ci_low", "ci_high"])
    rows = []
    for a, b in (("a", "b"), ("b", "c")):
        for layer in range(2):
            for head in range(3):
                d = 0.01 * (head - 1) * (layer + 1) + (0.5 if a == "b" else 0.0)
                rows.append((a, b, layer, head, "ap_overall", d, 0.01, 0.5, int(abs(d) > 0.015)))
    heads = pd.DataFrame(rows, columns=["set_a", "set_b", "layer", "q_head", "quantity", "difference", "se",
                                        "q_bh", "significant"])
    return trajectory, heads


class TestTrajectory(unittest.TestCase):
    def test_trajectory_points_are_the_means_in_order(self):
        trajectory, _ = compare_tables()
        fig = P.trajectory(trajectory.sample(frac=1.0, random_state=1))  # rows in any order
        try:
            top, bottom = fig.axes
            first = [line for line in top.lines if line.get_linestyle() == "-"][0]
            np.testing.assert_allclose(np.asarray(first.get_ydata(), dtype=float), [0.60, 0.62, 0.64])
            np.testing.assert_allclose(np.asarray(first.get_xdata(), dtype=float), [0, 1, 2])
            np.testing.assert_allclose([p.get_height() for p in bottom.patches], [0.02, 0.011, 0.002])
            self.assertEqual([t.get_text() for t in bottom.get_xticklabels()], ["a", "b", "c"])
        finally:
            close(fig)

    def test_changes_grid_and_outlines(self):
        _, heads = compare_tables()
        result = namedtuple("Compared", "heads trajectory")(heads, compare_tables()[0])
        fig = P.changes(result)  # the first pair, a -> b
        try:
            (ax,) = image_axes(fig)
            np.testing.assert_allclose(image_values(ax), [[-0.01, 0.0, 0.01], [-0.02, 0.0, 0.02]], atol=1e-15)
            self.assertEqual(len(ax.patches), 2)  # |d| > 0.015: layer 1 heads 0 and 2
            self.assertIn("change of ap_overall: a -> b", ax.get_title())
            self.assertIn("2 of 6 heads changed", ax.get_title())
        finally:
            close(fig)
        fig = P.changes(heads, pair=("b", "c"))
        try:
            self.assertEqual(len(image_axes(fig)[0].patches), 6)
        finally:
            close(fig)
        fig = P.trajectory(result, layers=[0])
        close(fig)


class TestInputErrors(SyntheticTables):
    def test_missing_column_names_function_table_and_column(self):
        cases = ((P.head_map, "head_metrics", "ap_drop"), (P.profile, "head_profile", "tau"),
                 (P.bucket_heatmap, "head_bucket_plasticity", "k_bucket"),
                 (P.distance_map, "head_distance_plasticity", "query_distance_high"),
                 (P.component_weights, "head_component_weights", "weight"))
        for fn, table, column in cases:
            with self.subTest(function=fn.__name__):
                df = self.tables[table].drop(columns=[column])
                with self.assertRaises(P.PlotInputError) as ctx:
                    fn(df)
                self.assertIsInstance(ctx.exception, ValueError)
                self.assertTrue(str(ctx.exception).startswith(f"{fn.__name__}: {table}: missing column "
                                                              f"'{column}' (the table has: "), str(ctx.exception))
                with self.assertRaises(P.PlotInputError) as ctx:
                    fn(dict(self.tables, **{table: df}))
                self.assertIn(f"'{column}'", str(ctx.exception))

    def test_bad_values_and_tables(self):
        df = metrics_frame().astype({"ap_overall": object})
        df.loc[3, "ap_overall"] = "oops"
        with self.assertRaisesRegex(ValueError, r"^head_map: head_metrics: column 'ap_overall' has a "
                                                r"non-numeric value 'oops' on row 3$"):
            P.head_map(df)
        df = metrics_frame().astype({"layer": float})
        df.loc[1, "layer"] = 0.5
        with self.assertRaisesRegex(ValueError, "column 'layer' must hold whole numbers; row 1 has 0.5"):
            P.head_map(df)
        with self.assertRaisesRegex(ValueError, r"^profile: head_profile: no table 'head_profile' in the dict "
                                                r"given \(it has: head_metrics\)$"):
            P.profile({"head_metrics": metrics_frame()})
        with self.assertRaisesRegex(ValueError, r"^head_map: head_metrics: none of the requested layers 5, 7 "
                                                r"is in the table \(it has 0-1\)$"):
            P.head_map(metrics_frame(), layers=[5, 7])
        with self.assertRaisesRegex(ValueError, r"^my run: no rows$"):
            P.head_map(metrics_frame().iloc[:0], source="my run")
        with self.assertRaisesRegex(TypeError, "head_map: expected a DataFrame of head_metrics"):
            P.head_map(42)
        _, heads = compare_tables()
        with self.assertRaisesRegex(ValueError, r"^changes: compare_heads: no rows of ap_drop for the pair a -> b$"):
            P.changes(heads, quantity="ap_drop")

    def test_bad_options_name_the_argument(self):
        cases = ((P.head_map, dict(annotate="maybe"), "head_map: annotate: 'maybe' is not one of auto, yes, no"),
                 (P.head_map, dict(quantities=("ap_nope",)), "head_map: quantities: 'ap_nope' is not one of"),
                 (P.profile, dict(xscale="loglog"), "profile: xscale: 'loglog'"),
                 (P.bucket_heatmap, dict(stat="max"), "bucket_heatmap: stat: 'max'"),
                 (P.distance_map, dict(min_pairs=0), "distance_map: min_pairs: must be an integer >= 1, got 0"),
                 (P.component_weights, dict(layers=["x"]), "component_weights: layers: expected layer numbers"),
                 (P.changes, dict(pair="ab"), "changes: pair: expected two set names"))
        for fn, kwargs, message in cases:
            with self.subTest(function=fn.__name__, **{k: str(v) for k, v in kwargs.items()}):
                table = {"changes": compare_tables()[1], "head_map": metrics_frame()}.get(fn.__name__, self.tables)
                with self.assertRaises(ValueError) as ctx:
                    fn(table, **kwargs)
                self.assertIn(message, str(ctx.exception))


class TestBackend(unittest.TestCase):
    def test_the_library_keeps_the_callers_backend(self):
        """Only the scripts choose Agg; a notebook's backend stays as it is."""
        code = ("import importlib.util, os, sys, matplotlib\n"
                f"src = {_common.PLOTS_SOURCE!r}\n"
                "spec = importlib.util.spec_from_file_location('p', os.path.join(src, '__init__.py'), "
                "submodule_search_locations=[src])\n"
                "p = importlib.util.module_from_spec(spec); sys.modules['p'] = p; spec.loader.exec_module(p)\n"
                "import pandas as pd\n"
                "df = pd.DataFrame({'layer': [0], 'q_head': [0], 'k_head': [0], 'ap_overall': [0.5], "
                "'ap_first20': [0.5], 'ap_last20': [0.5], 'ap_drop': [0.0]})\n"
                "fig = p.head_map(df)\n"
                "print(matplotlib.get_backend(), type(fig).__module__)\n")
        env = dict(os.environ, MPLBACKEND="svg")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["svg", "matplotlib.figure"])


if PACKAGE:
    class TestPackage(unittest.TestCase):
        """ap.plots in the installed package (the venv)."""

        def test_import_does_not_import_matplotlib(self):
            code = ("import sys, attention_plasticity as ap\n"
                    "before = 'matplotlib' in sys.modules\n"
                    "plots = ap.plots\n"
                    "import attention_plasticity.plots as p2\n"
                    "print(before, 'matplotlib' in sys.modules, plots is p2, callable(plots.head_map))\n")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                                 cwd=tempfile.gettempdir())
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(), ["False", "True", "True", "True"])

        def test_each_plot_on_an_analysis(self):
            import attention_plasticity as ap

            result = ap.analyze_dump(os.path.join(ROOT, "tests", "data", "small_dump"), progress=False,
                                     warn=False)
            metrics = result.tables["head_metrics"]
            for fn in (ap.plots.head_map, ap.plots.profile, ap.plots.bucket_heatmap, ap.plots.distance_map,
                       ap.plots.component_weights):
                for data in (result, ap.tables(result)):
                    with self.subTest(function=fn.__name__, data=type(data).__name__):
                        fig = fn(data)
                        try:
                            self.assertGreaterEqual(len(fig.axes), 1)
                            if fn is ap.plots.head_map:
                                got = image_values(image_axes(fig)[0])
                                for _, r in metrics.iterrows():
                                    self.assertEqual(got[int(r["layer"]), int(r["q_head"])], r["ap_overall"])
                        finally:
                            close(fig)


if __name__ == "__main__":
    unittest.main()
