"""The figures of a result set, from Python: ``attention_plasticity.plots``.

Each function takes the table it draws (docs/method.md §3) as a pandas DataFrame, as a mapping of
table name to DataFrame (``ap.tables(results)``), or as a result that holds it (``DumpResult`` of
``ap.analyze_dump``, ``ModelProfile`` of ``ap.profile_model``, ``CompareResult`` of
``ap.compare_runs``), takes keyword options like the scripts' (examples/plots), and returns a
``matplotlib.figure.Figure``; it never shows or saves it (``fig.savefig(path)``; in a notebook the
figure is displayed). Figures are made with pyplot, so ``plt.show()`` shows them and
``plt.close(fig)`` frees one. The backend is left as the caller has it.

    import attention_plasticity as ap
    result = ap.analyze_dump("dump/", "results/")
    ap.plots.head_map(result).savefig("head_map.png")
    ap.plots.profile(result, facet_by_layer=True)
    ap.plots.bucket_heatmap(pandas.read_csv("results/head_bucket_plasticity.csv"))

- ``head_map``: layer x head heatmaps of ap_overall and ap_drop (head_metrics);
- ``profile``: plasticity against query position, a line per head (head_profile);
- ``bucket_heatmap``: query bucket x key bucket (head_bucket_plasticity; positions from
  head_profile);
- ``distance_map``: inter-key distance x key-to-query distance (head_distance_plasticity, §8.1);
- ``component_weights``: the positional share per query component (head_component_weights);
- ``trajectory`` and ``changes``: result sets compared in order (compare_trajectory,
  compare_heads of ``ap.compare_runs`` / ap_compare, §8.6); ``trajectory(folder)`` of an
  ``ap.PlasticityMonitor``'s folder is ``monitor_trajectory``: the run's means against the step,
  with their intervals as bands and the steps where heads changed marked.

A table that lacks a column the plot reads, or holds a value that is not a number, raises
``PlotInputError`` (a ``ValueError``) naming the function, the table and the column.

``ap.plots`` is loaded on first use: ``import attention_plasticity`` does not import matplotlib.
This package imports nothing of the compiled module (NumPy, pandas and matplotlib only): the
scripts of examples/plots load it from the source tree with a Python that has no compiled
package (e.g. Debian's python3).
"""

from ._buckets import bucket_heatmap
from ._components import component_weights
from ._distance import distance_map
from ._head_map import head_map
from ._monitor import monitor_trajectory
from ._profile import profile
from ._tables import PlotInputError
from ._trajectory import changes, trajectory

__all__ = ["head_map", "profile", "bucket_heatmap", "distance_map", "component_weights",
           "trajectory", "changes", "monitor_trajectory", "PlotInputError"]
