"""ap.plots in memory bounded by the rows given (issue 33, item 6): an index far beyond the others
(a q_head of 2**20 or 2**40, a layer, bucket or component as far) is drawn on a compacted axis
(the indices present, plots/_style.py index_axis), not on one cell per index in between; the
figure's peak Python memory (tracemalloc) stays within a few MiB, and the cells are the rows'
values. An axis whose span is near the indices present keeps its gaps (missing heads in grey).

Loaded from the source tree as the plot scripts load it (any Python with numpy, pandas and
matplotlib). Run from the repository root:
    /usr/bin/python3 tests/python/test_plots_bounded.py -v
"""

import os
import sys
import tracemalloc
import unittest

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "examples", "plots")]

import _common  # noqa: E402  (loads the plots package from the source tree, Agg backend)

P = _common.P
# A figure of a handful of rows allocates a few MiB in matplotlib; one cell per head up to 2**20
# in 2 layers is 16 MiB of float64 per panel (the defect reached 23 GiB with its annotations).
BOUND = 20 * 2**20  # the same figure with heads 0 to 8 peaks at 13.4 MiB
FAR = (2**20, 2**40)


def peak_of(draw):
    """(figure, peak bytes traced while drawing it and rendering it)."""
    import matplotlib.pyplot as plt

    tracemalloc.start()
    try:
        fig = draw()
        fig.canvas.draw()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plt.close(fig)
    return fig, peak


def image_values(ax):
    return np.ma.filled(np.ma.asarray(ax.images[0].get_array()).astype(float), np.nan)


def metrics(heads, layers=(0, 1)):
    rows = [(layer, h) for layer in layers for h in heads]
    v = np.linspace(0.1, 0.9, len(rows))
    return pd.DataFrame({"layer": [r[0] for r in rows], "q_head": [r[1] for r in rows],
                         "k_head": 0, "ap_overall": v, "ap_first20": v, "ap_last20": v / 2,
                         "ap_drop": v / 2})


class TestBounded(unittest.TestCase):
    def test_head_map_far_head(self):
        for far in FAR:
            with self.subTest(far=far):
                heads = list(range(8)) + [far]
                df = metrics(heads)
                fig, peak = peak_of(lambda: P.head_map(df))
                self.assertLess(peak, BOUND)
                ax = [a for a in fig.axes if a.images][0]
                values = image_values(ax)
                self.assertEqual(values.shape, (2, 9))  # the heads present, in order
                np.testing.assert_array_equal(values.ravel(), df["ap_overall"].to_numpy())
                labels = [t.get_text() for t in ax.get_xticklabels()]
                self.assertEqual(labels[-1] if len(labels) == 9 else str(far), str(far))

    def test_head_map_far_layer(self):
        df = metrics([0, 1, 2], layers=(0, 2**30))
        fig, peak = peak_of(lambda: P.head_map(df, "ap_overall"))
        self.assertLess(peak, BOUND)
        ax = [a for a in fig.axes if a.images][0]
        self.assertEqual(image_values(ax).shape, (2, 3))

    def test_gaps_near_the_rows_are_kept(self):
        """Heads 0, 1 and 5: six columns, 2, 3 and 4 without a value (as before)."""
        df = metrics([0, 1, 5])
        fig, _ = peak_of(lambda: P.head_map(df, "ap_overall"))
        values = image_values([a for a in fig.axes if a.images][0])
        self.assertEqual(values.shape, (2, 6))
        self.assertTrue(np.isnan(values[:, 2:5]).all())

    def test_bucket_heatmap_far_bucket(self):
        qb = [0, 1, 2**31]
        df = pd.DataFrame({"layer": 0, "q_head": 0, "k_head": 0, "q_bucket": qb, "k_bucket": [0, 2**33, 1],
                           "plasticity": [0.2, 0.4, 0.6], "n_pairs": 10})
        fig, peak = peak_of(lambda: P.bucket_heatmap(df))
        self.assertLess(peak, BOUND)
        values = image_values([a for a in fig.axes if a.images][0])
        self.assertEqual(values.shape, (3, 3))
        self.assertEqual(np.count_nonzero(np.isfinite(values)), 3)

    def test_component_weights_far_component(self):
        df = pd.DataFrame({"layer": 0, "q_head": 0, "k_head": 0, "component": [0, 1, 2, 2**40],
                           "component_r2": 0.5, "weight": [0.4, 0.3, 0.2, 0.1]})
        _, peak = peak_of(lambda: P.component_weights(df))
        self.assertLess(peak, BOUND)

    def test_profile_far_layer_and_head(self):
        rows = [(layer, h, b) for layer in (0, 2**40) for h in (0, 2**20) for b in range(3)]
        df = pd.DataFrame({"layer": [r[0] for r in rows], "q_head": [r[1] for r in rows], "k_head": 0,
                           "q_bucket": [r[2] for r in rows], "tau": [10.0 * (r[2] + 1) for r in rows],
                           "n_queries": 50, "plasticity": 0.5, "n_pairs": 8})
        for facet in (False, True):
            with self.subTest(facet_by_layer=facet):
                _, peak = peak_of(lambda: P.profile(df, facet_by_layer=facet))
                self.assertLess(peak, BOUND)


if __name__ == "__main__":
    unittest.main()
