"""``ap.report(obj, path)``: one self-contained, explorable HTML file of a result set, a comparison
or a training run (``python -m attention_plasticity report INPUT... -o report.html``).

The file holds its data, script and styles inline; it makes no request (a Content-Security-Policy
of ``default-src 'none'`` forbids any), so it opens from disk and works offline.

- **A result set** (a result object: ``read_results``, ``analyze_dump``, ``profile_model``; or a
  result folder): a layer x head map of a chosen quantity of head_metrics (docs/method.md §3.2),
  with its standard error and ``n_sequences`` on hover; a head (click, or arrows and Enter) shows
  its profile with intervals (§3.4, §8.3), bucket heatmap (§3.3), distance map (§3.6, §8.1),
  component weights (§3.5) and q diagnostics (§2.3-2.8); a sortable, filterable table of the
  heads; the provenance (the set's run.json, the source, notes) and each quantity's definition
  with its section of docs/method.md.
- **A comparison** (``compare_runs``' result, ``ap_compare``'s folder, or several result folders
  or objects, compared here with ``compare_runs``): the map of differences with the heads whose
  change has BH q <= alpha marked, the design stated; per head both profiles overlaid with their
  intervals (the per-bucket rows of compare_heads.csv, §8.6; with the sets at hand, each set's own
  intervals), and the difference by bucket with its 95% interval (Student's t law with the row's
  df, §8.6); the model-level summary.
- **A training run** (a ``PlasticityMonitor`` folder): the trajectories with their intervals
  (trajectory.csv's ci_low and ci_high) and a step slider that drives the map (each
  ``step_NNNNNN`` set).

Numbers are the files' numbers: every table is embedded as float64 columns (deflated, base64;
decoded in the page by the browser's DecompressionStream), so what the page shows and carries in
its ``data-value`` attributes is the CSV's value exactly.

Why hand-written SVG rather than a charting library: the issue asks for a well-kept library where
it serves. Plotly's bundle (``plotly.offline.get_plotlyjs()`` of the ``plotly`` package) is
4.6 MB alone, over the 2 MB a 4-layer report may weigh, and the PyPI package ships no partial
bundle; Vega-Lite needs three libraries (vega, vega-lite, vega-embed) that no pinned PyPI package
ships as files (vl-convert embeds them in a compiled binary). The page needs four plain charts (a
grid, a line with a band, a small heatmap, bars), which are a few hundred lines of SVG with no
dependency, no licence to track and no version to keep up with. The colour scales are
matplotlib's (already a dependency) perceptually uniform ``cividis`` (values) and ``berlin``
(signed differences), sampled at 256 points when the report is written; each legend states its
range.
"""

import base64
import json
import math
import os
import zlib

__all__ = ["report"]

# The quantities of the map: (column, definition, section of docs/method.md).
QUANTITIES = [
    ("ap_overall", "head-level attention plasticity: the omega-weighted mean of the buckets' AP_j", "2.14"),
    ("ap_first20", "AP over the query buckets with tau_j < 0.2 C (early positions)", "2.14"),
    ("ap_last20", "AP over the query buckets with tau_j >= 0.8 C (late positions)", "2.14"),
    ("ap_drop", "ap_first20 - ap_last20: how much plasticity falls along the context", "2.14"),
    ("ap_overall_corrected", "ap_overall minus its estimated bias: the centre of the interval", "8.3"),
    ("ap_empirical_overall", "model-free AP of the actual queries", "8.2"),
    ("bias_strength", "mu_Q^a alpha_K of the planar rotation model", "8.5"),
    ("q_R2_pos", "mean R^2 of the queries' position regression", "2.3"),
    ("q_R2_scalar", "R^2 of log2(t+1) on the projection on beta", "2.4"),
    ("q_beta_norm", "the queries' position slope |beta|", "2.3"),
    ("q_mae_ratio", "q_mae_proj / q_mae_baseline", "2.4"),
    ("pc0_r_q", "Pearson r of the queries' PC0 projection with position", "8.5"),
    ("pc0_r_k", "Pearson r of the keys' PC0 projection with position", "8.5"),
]
# A quantity's standard-error column, where the set has one.
SE_COLUMN = {"ap_overall": "ap_overall_se", "ap_first20": "ap_first20_se", "ap_last20": "ap_last20_se",
             "ap_drop": "ap_drop_se", "ap_overall_corrected": "ap_overall_se",
             "ap_empirical_overall": "ap_empirical_overall_se", "bias_strength": "bias_strength_se"}
SECTIONS = {"head_metrics": "3.2", "head_bucket_plasticity": "3.3", "head_profile": "3.4",
            "head_component_weights": "3.5", "head_distance_plasticity": "3.6", "compare": "8.6",
            "intervals": "8.3", "q": "2.3"}
# The tables a set's page uses (head_sequence_influence is not shown).
SET_TABLES = ("head_metrics", "head_profile", "head_bucket_plasticity", "head_component_weights",
              "head_distance_plasticity")
# Per step of a training run: the map's and the profile's tables only (the file stays small).
STEP_TABLES = ("head_metrics", "head_profile")


def _colormap(name):
    try:
        from matplotlib import colormaps
    except ImportError as exc:  # the colour scales are matplotlib's (the package's `plots` extra)
        raise ImportError("report: the colour scales need matplotlib (pip install "
                          "'attention_plasticity[plots]')") from exc

    cmap = colormaps[name]
    return ["#%02x%02x%02x" % tuple(int(round(255 * c)) for c in cmap(i / 255.0)[:3]) for i in range(256)]


def _encode(frame):
    """A DataFrame as {n, columns, num: {name: index}, str: {name: [...]}, blob}: the numeric
    columns float64 (NaN kept), concatenated column after column, deflated, base64."""
    import numpy as np

    num, strs, parts = {}, {}, []
    for name in frame.columns:
        column = frame[name]
        kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else "O"
        if kind in "fiub":
            num[str(name)] = len(parts)
            parts.append(np.ascontiguousarray(column.to_numpy(), dtype="<f8").tobytes())
        else:
            strs[str(name)] = ["" if (isinstance(v, float) and math.isnan(v)) else str(v) for v in column.tolist()]
    blob = base64.b64encode(zlib.compress(b"".join(parts), 6)).decode("ascii")
    return {"n": int(len(frame)), "columns": [str(c) for c in frame.columns], "num": num, "str": strs,
            "blob": blob}


def _set_tables(obj, names=SET_TABLES):
    tables = obj.tables
    return {name: _encode(tables[name]) for name in names if name in tables}


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _is_compare(obj):
    return all(hasattr(obj, a) for a in ("heads", "changed", "summary", "trajectory", "notes"))


def _is_result(obj):
    return hasattr(obj, "tables") and callable(getattr(obj, "write", None))


def _set_entry(obj, name):
    from .result_set import read_results

    provenance = {}
    if isinstance(obj, (str, os.PathLike)):
        folder = os.fspath(obj)
        run = _read_json(os.path.join(folder, ".ap_results", "current", "run.json"))
        if run is not None:
            provenance["run.json"] = run
        provenance["source"] = os.path.abspath(folder)
        obj = read_results(folder)
    else:
        if getattr(obj, "source", None):
            provenance["source"] = obj.source
    summary = getattr(obj, "summary", None)
    if isinstance(summary, str):
        provenance["summary"] = summary
    errors = getattr(obj, "errors", None) or []
    if errors:
        provenance["failed heads"] = [str(e) for e in errors]
    return obj, {"name": name, "provenance": provenance}


# The level of the per-bucket intervals the comparison page draws (its "95% interval").
BAND_ALPHA = 0.05


def _numeric_bucket(heads):
    """compare_heads' q_bucket (empty for a head-level row) as a number, NaN when empty, and
    ``half_width``: t_{0.975, df} se of each row, Student's t law with the row's df (the normal law
    for df inf, or where a set written before the t law has no df column; docs/method.md §8.6),
    computed by the library's one t quantile (student_t.hpp)."""
    import numpy as np
    import pandas as pd

    from ._core.companion import _t_half_widths

    heads = heads.copy()
    heads["q_bucket"] = pd.to_numeric(heads["q_bucket"], errors="coerce").astype("float64")
    se = pd.to_numeric(heads["se"], errors="coerce").to_numpy(dtype=np.float64)
    df = (pd.to_numeric(heads["df"], errors="coerce").to_numpy(dtype=np.float64) if "df" in heads.columns
          else np.full(len(heads), np.inf))
    heads["half_width"] = _t_half_widths(se, df, BAND_ALPHA)
    return heads


def _layer_labels(frame):
    """The summary's and trajectory's layer as the report's labels: "all" for a model-level row
    (NA in the tables, empty in the CSVs; "all" in sets written before), else the layer's number."""
    import pandas as pd

    frame = frame.copy()
    frame["layer"] = ["all" if pd.isna(v) or str(v) in ("", "all") else str(int(float(v))) for v in frame["layer"]]
    return frame


def _compare_entry(result):
    return {"heads": _encode(_numeric_bucket(result.heads)), "changed": _encode(result.changed),
            "summary": _encode(_layer_labels(result.summary)), "trajectory": _encode(_layer_labels(result.trajectory)),
            "notes": list(result.notes)}


def _read_compare_folder(folder):
    import pandas as pd

    out = {}
    for name in ("heads", "changed", "summary", "trajectory"):
        dtype = {"set_a": str, "set_b": str, "set": str, "quantity": str, "design": str, "quantities": str}
        if name in ("summary", "trajectory"):
            dtype["layer"] = str  # a layer, or empty (model-level; "all" before)
        frame = pd.read_csv(os.path.join(folder, f"compare_{name}.csv"), keep_default_na=False,
                            na_values=["nan", ""], dtype=dtype)
        out[name] = _encode(_numeric_bucket(frame) if name == "heads" else frame if name == "changed"
                            else _layer_labels(frame))
    out["notes"] = []
    return out


def _kind_of_folder(folder):
    if os.path.isfile(os.path.join(folder, "plasticity_run.json")):
        return "training"
    if os.path.isfile(os.path.join(folder, "compare_heads.csv")):
        return "comparison"
    return "result"


def _training(folder):
    import pandas as pd

    from .result_set import read_results

    run = _read_json(os.path.join(folder, "plasticity_run.json")) or {}
    steps = sorted(int(d[5:]) for d in os.listdir(folder) if d.startswith("step_") and d[5:].isdigit()
                   and os.path.isdir(os.path.join(folder, d)))
    sets = []
    for step in steps:
        sub = os.path.join(folder, f"step_{step:06d}")
        sets.append({"name": f"step_{step:06d}", "step": step,
                     "tables": _set_tables(read_results(sub), STEP_TABLES), "provenance": {}})
    data = {"kind": "training", "sets": sets, "run": run,
            "provenance": {"source": os.path.abspath(folder), "plasticity_run.json": run}}
    path = os.path.join(folder, "trajectory.csv")
    if os.path.isfile(path):
        data["trajectory"] = _encode(_layer_labels(pd.read_csv(path, keep_default_na=False,
                                                               na_values=["nan", "NaN", ""],
                                                               dtype={"set": str, "layer": str, "quantity": str})))
    path = os.path.join(folder, "changes.csv")
    if os.path.isfile(path):
        data["changes"] = _encode(pd.read_csv(path, keep_default_na=False, na_values=["nan", "NaN", ""]))
    return data


def _data(inputs, alpha, design):
    from .compare import compare_runs

    if len(inputs) == 1 and _is_compare(inputs[0]):
        return {"kind": "comparison", "compare": _compare_entry(inputs[0]), "sets": [],
                "provenance": {"notes": list(inputs[0].notes)}}
    if len(inputs) == 1 and isinstance(inputs[0], (str, os.PathLike)):
        folder = os.fspath(inputs[0])
        if not os.path.isdir(folder):
            raise ValueError(f"report: obj '{folder}' is not a folder")
        kind = _kind_of_folder(folder)
        if kind == "training":
            return _training(folder)
        if kind == "comparison":
            return {"kind": "comparison", "compare": _read_compare_folder(folder), "sets": [],
                    "provenance": {"source": os.path.abspath(folder)}}
    for obj in inputs:
        if not (_is_result(obj) or isinstance(obj, (str, os.PathLike))):
            raise TypeError(f"report: obj must be a result object, a result folder, a comparison "
                            f"(compare_runs' result or ap_compare's folder) or a monitor's folder; "
                            f"got {type(obj).__name__}")
    names = []
    for i, obj in enumerate(inputs):
        names.append(os.path.basename(os.path.normpath(os.fspath(obj))) if isinstance(obj, (str, os.PathLike))
                     else f"set_{i}")
    loaded = [_set_entry(obj, name) for obj, name in zip(inputs, names)]
    sets = []
    for obj, entry in loaded:
        entry["tables"] = _set_tables(obj)
        sets.append(entry)
    if len(loaded) == 1:
        return {"kind": "result", "sets": sets, "provenance": sets[0]["provenance"]}
    kw = {} if alpha is None else {"alpha": alpha}
    if design is not None:
        kw["design"] = design
    result = compare_runs([obj for obj, _e in loaded], names=names, **kw)
    return {"kind": "comparison", "compare": _compare_entry(result), "sets": sets,
            "provenance": {"notes": list(result.notes), "sets": [e["provenance"] for e in sets]}}


def report(obj, path, *, title=None, quantity="ap_overall", alpha=None, design=None, method_url=None):
    """Writes one self-contained HTML page of ``obj`` to ``path`` and returns ``path``.

    ``obj``: a result object (``read_results``, ``analyze_dump``, ``profile_model``, a
    ``ResultSet``), a result folder, a comparison (``compare_runs``' result or ``ap_compare``'s
    folder), a ``PlasticityMonitor`` output folder, or a list of result objects or folders (compared
    with ``compare_runs``, ``alpha`` its level). ``quantity``: the map's first quantity (a column of
    head_metrics, docs/method.md §3.2). The page holds its data, script and styles; it opens from
    disk with no network. See the module's help for what each page shows. ``method_url``: where
    the reader can open docs/method.md (a URL or a path of the project's copy); each definition then
    links to its section there. None (the default): the sections are named, not linked (the page
    makes no request, and the project has no address of its own to assume).
    """
    from ._core import __version__

    # (a CompareResult is a NamedTuple: one input, not a list of them)
    inputs = list(obj) if isinstance(obj, (list, tuple)) and not _is_compare(obj) else [obj]
    if not inputs:
        raise ValueError("report: obj is an empty list")
    if quantity not in [q for q, _d, _s in QUANTITIES]:
        raise ValueError(f"report: quantity '{quantity}' is not one of "
                         f"{', '.join(q for q, _d, _s in QUANTITIES)}")
    data = _data(inputs, alpha, design)
    if title is None:
        first = inputs[0]
        title = {"result": "Result set", "comparison": "Comparison", "training": "Training run"}[data["kind"]]
        if isinstance(first, (str, os.PathLike)):
            title += " - " + " vs ".join(os.path.basename(os.path.normpath(os.fspath(i))) for i in inputs
                                         if isinstance(i, (str, os.PathLike)))
    data.update({"title": str(title), "version": __version__, "quantity": quantity,
                 "quantities": [{"name": q, "definition": d, "section": s} for q, d, s in QUANTITIES],
                 "se_column": SE_COLUMN, "sections": SECTIONS, "method_url": None if method_url is None else str(method_url),
                 "colormaps": {"cividis": _colormap("cividis"), "berlin": _colormap("berlin")}})
    page = _page(data)
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path


def _page(data):
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    title = (data["title"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return (_HTML.replace("@TITLE@", title).replace("@CSS@", _CSS).replace("@DATA@", payload)
            .replace("@JS@", _JS))


_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@TITLE@</title>
<style>@CSS@</style>
</head>
<body>
<header><h1 id="title">@TITLE@</h1><div id="subtitle"></div></header>
<main>
<section id="controls" aria-label="controls"></section>
<div id="mapbox"><div id="map" role="grid" tabindex="0" aria-label="layer x head map"></div><div id="legend"></div></div>
<section id="head-panel" aria-live="polite"><p class="hint">Click a head on the map (or move with the arrow keys and press Enter) to see its profile.</p></section>
<section id="overview"></section>
<section id="table-section"></section>
<section id="provenance"></section>
<section id="definitions"></section>
</main>
<div id="tooltip" role="tooltip" hidden></div>
<script type="application/json" id="ap-data">@DATA@</script>
<script>@JS@</script>
</body>
</html>
"""

_CSS = r"""
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fff}
header{padding:10px 18px;border-bottom:1px solid #ddd}h1{font-size:20px;margin:0}
#subtitle{color:#555}main{padding:8px 18px}section{margin:14px 0}
h2{font-size:16px;margin:10px 0 6px}label{margin-right:12px}
#mapbox{display:flex;gap:16px;align-items:flex-start}#map{outline:none;overflow:auto;max-width:100%;max-height:80vh}
#map:focus-visible{box-shadow:0 0 0 3px #1a73e8}
#map rect.cell{stroke:none}#map rect.cursor{fill:none;stroke:#e8175d;stroke-width:2}
#map rect.selected{fill:none;stroke:#000;stroke-width:2}
#map circle.sig{fill:#fff;stroke:#000;stroke-width:.8;pointer-events:none}
#map rect.cursor,#map rect.selected{pointer-events:none}
#tooltip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:4px 8px;border-radius:4px;font-size:12px;z-index:10;white-space:pre}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}
th button{font:inherit;background:none;border:none;cursor:pointer;padding:0}
tr:hover{background:#f3f3f3}td.name{text-align:left}
.hint{color:#666}.charts{display:flex;flex-wrap:wrap;gap:18px}.chart{border:1px solid #eee;padding:4px}
.chart h3{font-size:13px;margin:2px 0}pre{background:#f7f7f7;padding:6px;overflow:auto;max-height:260px;font-size:12px}
svg text{font-size:10px;fill:#333}.axis line,.axis path{stroke:#888}
.note{color:#444;font-size:13px}a{color:#1558b0}
"""

_JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("ap-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
function el(tag, attrs, text) { const e = document.createElement(tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function sv(tag, attrs, text) { const e = document.createElementNS(NS, tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function fmt(v, digits) { if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return (typeof v === "number" && v !== v) || v === null ? "nan" : String(v); if (typeof v !== "number") return String(v); if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v); return v.toPrecision(digits || 4); }
function sectionLink(s) { const text = "docs/method.md \u00a7" + s;
  return D.method_url ? el("a", {href: D.method_url, target: "_blank", rel: "noopener"}, text) : el("span", {class: "section"}, text); }

async function inflate(b64) {
  const bin = atob(b64); const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return await new Response(stream).arrayBuffer();
}
// A table: {n, columns, col(name) -> Float64Array | string[]}
async function decode(enc) {
  if (!enc) return null;
  const buf = enc.n > 0 && Object.keys(enc.num).length ? await inflate(enc.blob) : new ArrayBuffer(0);
  const t = {n: enc.n, columns: enc.columns, cols: {}};
  for (const name in enc.num) t.cols[name] = new Float64Array(buf, enc.num[name] * enc.n * 8, enc.n);
  for (const name in enc.str) t.cols[name] = enc.str[name];
  t.has = (c) => c in t.cols;
  t.get = (c, i) => (c in t.cols ? t.cols[c][i] : undefined);
  return t;
}
async function decodeSet(s) { const out = {}; for (const k in s.tables) out[k] = await decode(s.tables[k]); return out; }
// Rows of a table for one head (layer, q_head), by a per-table index built once.
function headIndex(t) {
  if (!t || t._index) return t && t._index; const idx = new Map();
  const L = t.cols.layer, H = t.cols.q_head;
  for (let i = 0; i < t.n; i++) { const k = L[i] + ":" + H[i]; let a = idx.get(k); if (!a) { a = []; idx.set(k, a); } a.push(i); }
  t._index = idx; return idx;
}
function rowsOf(t, layer, head) { if (!t) return []; return headIndex(t).get(layer + ":" + head) || []; }

function colour(cmap, x) { if (!(x === x) || x === null) return "#d0d0d0"; const i = Math.max(0, Math.min(255, Math.round(x * 255))); return D.colormaps[cmap][i]; }

const S = {q: D.quantity, set: 0, cursor: [0, 0], selected: null, sets: [], cmp: null, step: 0, sortCol: null, sortDir: 1};

// ---------- the map ----------
function mapValues() {
  // -> {layers, heads, value(l,h), se(l,h), n(l,h), sig(l,h), range, cmap, label}
  const q = S.q;
  if (D.kind === "comparison") {
    const h = S.cmp.heads, idx = new Map();
    for (let i = 0; i < h.n; i++) if (h.cols.quantity[i] === q && !(h.cols.q_bucket[i] === h.cols.q_bucket[i])) idx.set(h.cols.layer[i] + ":" + h.cols.q_head[i], i);
    let layers = 0, heads = 0, amax = 0;
    for (const [k, i] of idx) { layers = Math.max(layers, h.cols.layer[i] + 1); heads = Math.max(heads, h.cols.q_head[i] + 1); const d = h.cols.difference[i]; if (d === d) amax = Math.max(amax, Math.abs(d)); }
    if (amax === 0) amax = 1;
    const at = (l, hd) => idx.get(l + ":" + hd);
    return {layers, heads, cmap: "berlin", range: [-amax, amax], label: "difference of " + q + " (B - A, bias-corrected)",
      value: (l, hd) => { const i = at(l, hd); return i === undefined ? undefined : h.cols.difference[i]; },
      se: (l, hd) => { const i = at(l, hd); return i === undefined ? undefined : h.cols.se[i]; },
      extra: (l, hd) => { const i = at(l, hd); return i === undefined ? "" : "A " + fmt(h.cols.value_a[i]) + ", B " + fmt(h.cols.value_b[i]) + "\nz " + fmt(h.cols.z[i]) + ", BH q " + fmt(h.cols.q_bh[i]); },
      sig: (l, hd) => { const i = at(l, hd); return i !== undefined && h.cols.significant[i] === 1; }};
  }
  const m = S.sets[S.set].head_metrics; const idx = new Map();
  let layers = 0, heads = 0, lo = Infinity, hi = -Infinity;
  const V = m.cols[q] || new Float64Array(m.n).fill(NaN); const seName = D.se_column[q]; const SE = seName && m.cols[seName];
  for (let i = 0; i < m.n; i++) { idx.set(m.cols.layer[i] + ":" + m.cols.q_head[i], i); layers = Math.max(layers, m.cols.layer[i] + 1); heads = Math.max(heads, m.cols.q_head[i] + 1); const v = V[i]; if (v === v && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }
  const bounded = /^ap_/.test(q) && q !== "ap_drop" || /R2/.test(q);
  let range = bounded ? [0, 1] : [lo, hi];
  if (q === "ap_drop") { const a = Math.max(Math.abs(lo), Math.abs(hi)) || 1; range = [-a, a]; }
  if (!(range[0] < range[1])) range = [isFinite(lo) ? lo - 0.5 : 0, isFinite(hi) ? hi + 0.5 : 1];
  const at = (l, hd) => idx.get(l + ":" + hd);
  return {layers, heads, cmap: q === "ap_drop" ? "berlin" : "cividis", range, label: q,
    value: (l, hd) => { const i = at(l, hd); return i === undefined ? undefined : V[i]; },
    se: (l, hd) => { const i = at(l, hd); return i === undefined || !SE ? undefined : SE[i]; },
    extra: (l, hd) => { const i = at(l, hd); return i === undefined ? "" : "n_sequences " + fmt(m.cols.n_sequences ? m.cols.n_sequences[i] : NaN) + ", k_head " + m.cols.k_head[i]; },
    sig: () => false};
}

function drawMap() {
  const box = $("map"); box.textContent = "";
  const mv = mapValues(); S.mv = mv;
  const cs = Math.max(6, Math.min(36, Math.floor(640 / Math.max(mv.heads, mv.layers, 1))));
  const left = 34, top = 22, W = left + mv.heads * cs + 4, H = top + mv.layers * cs + 4;
  const svg = sv("svg", {width: W, height: H, id: "map-svg"});
  svg.appendChild(sv("text", {x: left, y: 10}, "query head \u2192"));
  svg.appendChild(sv("text", {x: 2, y: top - 4}, "layer"));
  const step = Math.max(1, Math.ceil(12 / cs));
  for (let l = 0; l < mv.layers; l += step) svg.appendChild(sv("text", {x: 2, y: top + l * cs + cs * 0.7}, String(l)));
  for (let h = 0; h < mv.heads; h += step) svg.appendChild(sv("text", {x: left + h * cs + 1, y: top - 4}, String(h)));
  const [lo, hi] = mv.range; const frag = document.createDocumentFragment();
  for (let l = 0; l < mv.layers; l++) for (let h = 0; h < mv.heads; h++) {
    const v = mv.value(l, h); if (v === undefined) continue;
    const r = sv("rect", {x: left + h * cs, y: top + l * cs, width: cs - (cs > 8 ? 1 : 0), height: cs - (cs > 8 ? 1 : 0), class: "cell",
      fill: colour(mv.cmap, (v - lo) / (hi - lo)), "data-layer": l, "data-head": h, "data-value": v === v ? String(v) : "nan"});
    frag.appendChild(r);
    if (mv.sig(l, h)) frag.appendChild(sv("circle", {cx: left + h * cs + cs / 2, cy: top + l * cs + cs / 2, r: Math.max(1.5, cs / 6), class: "sig", "data-layer": l, "data-head": h}));
  }
  svg.appendChild(frag);
  const cur = sv("rect", {class: "cursor", id: "map-cursor", width: cs, height: cs}); svg.appendChild(cur);
  const sel = sv("rect", {class: "selected", id: "map-selected", width: cs, height: cs, visibility: "hidden"}); svg.appendChild(sel);
  S.geom = {left, top, cs};
  box.appendChild(svg); placeCursor(); placeSelected();
  svg.addEventListener("mousemove", (ev) => { const t = ev.target; if (t.dataset && t.dataset.layer !== undefined) showTip(ev, +t.dataset.layer, +t.dataset.head); else hideTip(); });
  svg.addEventListener("mouseleave", hideTip);
  svg.addEventListener("click", (ev) => { const t = ev.target; if (t.dataset && t.dataset.layer !== undefined) { S.cursor = [+t.dataset.layer, +t.dataset.head]; placeCursor(); selectHead(+t.dataset.layer, +t.dataset.head); } });
  drawLegend(mv);
}
function placeCursor() { const c = $("map-cursor"); if (!c) return; const g = S.geom; c.setAttribute("x", g.left + S.cursor[1] * g.cs); c.setAttribute("y", g.top + S.cursor[0] * g.cs); }
function placeSelected() { const c = $("map-selected"); if (!c || !S.selected) return; const g = S.geom; c.setAttribute("x", g.left + S.selected[1] * g.cs); c.setAttribute("y", g.top + S.selected[0] * g.cs); c.setAttribute("visibility", "visible"); }
function tipText(l, h) { const mv = S.mv; const v = mv.value(l, h), se = mv.se(l, h); return "layer " + l + ", head " + h + "\n" + mv.label + " = " + fmt(v) + (se !== undefined ? " \u00b1 " + fmt(se) + " (se)" : "") + "\n" + mv.extra(l, h) + (mv.sig(l, h) ? "\nselected (a changed head, docs/method.md \u00a78.6)" : ""); }
function showTip(ev, l, h) { const t = $("tooltip"); t.textContent = tipText(l, h); t.hidden = false; t.style.left = (ev.clientX + 14) + "px"; t.style.top = (ev.clientY + 10) + "px"; }
function hideTip() { $("tooltip").hidden = true; }
function drawLegend(mv) {
  const box = $("legend"); box.textContent = ""; const w = 16, h = 200;
  const svg = sv("svg", {width: 150, height: h + 40, id: "legend-svg"});
  const defs = sv("defs"); const grad = sv("linearGradient", {id: "lg", x1: 0, y1: 1, x2: 0, y2: 0});
  for (let i = 0; i <= 16; i++) grad.appendChild(sv("stop", {offset: (i / 16), "stop-color": D.colormaps[mv.cmap][Math.round(i * 255 / 16)]}));
  defs.appendChild(grad); svg.appendChild(defs);
  svg.appendChild(sv("rect", {x: 4, y: 16, width: w, height: h, fill: "url(#lg)"}));
  svg.appendChild(sv("text", {x: 4, y: 10}, mv.cmap + " (perceptually uniform)"));
  svg.appendChild(sv("text", {x: w + 8, y: 22, id: "legend-high"}, fmt(mv.range[1])));
  svg.appendChild(sv("text", {x: w + 8, y: h + 16, id: "legend-low"}, fmt(mv.range[0])));
  svg.appendChild(sv("text", {x: 4, y: h + 32}, "grey: nan"));
  box.appendChild(svg);
  box.appendChild(el("div", {class: "note", id: "legend-range"}, "range [" + fmt(mv.range[0]) + ", " + fmt(mv.range[1]) + "]"));
}
function mapKeys(ev) {
  const mv = S.mv; let [l, h] = S.cursor; const k = ev.key;
  if (k === "ArrowUp") l--; else if (k === "ArrowDown") l++; else if (k === "ArrowLeft") h--; else if (k === "ArrowRight") h++;
  else if (k === "Enter" || k === " ") { selectHead(l, h); ev.preventDefault(); return; } else return;
  ev.preventDefault(); S.cursor = [Math.max(0, Math.min(mv.layers - 1, l)), Math.max(0, Math.min(mv.heads - 1, h))]; placeCursor();
  $("map").setAttribute("aria-label", "layer x head map; " + tipText(S.cursor[0], S.cursor[1]).replace(/\n/g, "; "));
}

// ---------- charts ----------
function axes(svg, x0, y0, w, h, xr, yr, xl, yl) {
  const g = sv("g", {class: "axis"}); svg.appendChild(g);
  g.appendChild(sv("line", {x1: x0, y1: y0 + h, x2: x0 + w, y2: y0 + h})); g.appendChild(sv("line", {x1: x0, y1: y0, x2: x0, y2: y0 + h}));
  for (let i = 0; i <= 4; i++) { const xv = xr[0] + (xr[1] - xr[0]) * i / 4, yv = yr[0] + (yr[1] - yr[0]) * i / 4;
    g.appendChild(sv("text", {x: x0 + w * i / 4 - 8, y: y0 + h + 12}, fmt(xv, 3)));
    g.appendChild(sv("text", {x: 2, y: y0 + h - h * i / 4 + 3}, fmt(yv, 3))); }
  g.appendChild(sv("text", {x: x0 + w / 2 - 20, y: y0 + h + 25}, xl)); g.appendChild(sv("text", {x: x0, y: y0 - 4}, yl));
}
// series: [{name, colour, x[], y[], lo[], hi[]}]
function lineChart(id, title, series, xl, yl, yrange) {
  const W = 420, H = 230, x0 = 44, y0 = 18, w = W - x0 - 12, h = H - y0 - 34;
  const svg = sv("svg", {width: W, height: H, id: id, role: "img", "aria-label": title});
  let xs = [], ys = [];
  for (const s of series) { s.x.forEach((v) => { if (isFinite(v)) xs.push(v); }); [s.y, s.lo || [], s.hi || []].forEach((a) => a.forEach((v) => { if (v !== null && isFinite(v)) ys.push(v); })); }
  let xr = [Math.min(...xs), Math.max(...xs)]; if (!(xr[0] < xr[1])) xr = [xr[0] - 1, xr[0] + 1];
  let yr = yrange || [Math.min(...ys), Math.max(...ys)]; if (!(yr[0] < yr[1])) yr = [(yr[0] || 0) - 0.5, (yr[0] || 0) + 0.5];
  if (!xs.length) { xr = [0, 1]; yr = [0, 1]; }
  const X = (v) => x0 + (v - xr[0]) / (xr[1] - xr[0]) * w, Y = (v) => y0 + h - (v - yr[0]) / (yr[1] - yr[0]) * h;
  axes(svg, x0, y0, w, h, xr, yr, xl, yl);
  series.forEach((s, si) => {
    if (s.lo && s.hi) { let up = "", dn = ""; const pts = [];
      for (let i = 0; i < s.x.length; i++) if (isFinite(s.lo[i]) && isFinite(s.hi[i]) && s.lo[i] !== null) pts.push(i);
      if (pts.length) { up = pts.map((i) => X(s.x[i]) + "," + Y(s.hi[i])).join(" "); dn = pts.slice().reverse().map((i) => X(s.x[i]) + "," + Y(s.lo[i])).join(" ");
        svg.appendChild(sv("polygon", {points: up + " " + dn, fill: s.colour, "fill-opacity": 0.18, stroke: "none", class: "band"})); } }
    let d = ""; for (let i = 0; i < s.x.length; i++) if (isFinite(s.y[i]) && s.y[i] !== null) d += (d ? " L" : "M") + X(s.x[i]) + "," + Y(s.y[i]);
    svg.appendChild(sv("path", {d, fill: "none", stroke: s.colour, "stroke-width": 1.6, "stroke-dasharray": s.dash || "", class: "series"}));
    for (let i = 0; i < s.x.length; i++) if (isFinite(s.y[i]) && s.y[i] !== null) { const a = {cx: X(s.x[i]), cy: Y(s.y[i]), r: 2.2, fill: s.colour, class: "point", "data-series": s.name, "data-x": String(s.x[i]), "data-value": String(s.y[i])};
      if (s.lo && s.hi) { a["data-lo"] = String(s.lo[i]); a["data-hi"] = String(s.hi[i]); }  // the band's ends at this point
      svg.appendChild(sv("circle", a, undefined)); }
    svg.appendChild(sv("text", {x: x0 + 6 + 110 * (si % 3), y: y0 + 10 + 12 * Math.floor(si / 3), fill: s.colour, style: "fill:" + s.colour}, s.name));
  });
  return chartBox(title, svg);
}
function chartBox(title, svg, extra) { const box = el("div", {class: "chart"}); box.appendChild(el("h3", {}, title)); if (extra) box.appendChild(extra); box.appendChild(svg); return box; }
function heatmap(id, title, xs, ys, val, xl, yl) {
  // xs, ys: sorted distinct labels; val(x, y) -> number | undefined
  const cs = Math.max(4, Math.min(18, Math.floor(300 / Math.max(xs.length, ys.length, 1))));
  const x0 = 44, y0 = 16, W = Math.max(230, x0 + xs.length * cs + 80), H = Math.max(70, y0 + ys.length * cs + 34);
  const svg = sv("svg", {width: W, height: H, id: id, role: "img", "aria-label": title});
  let lo = Infinity, hi = -Infinity; for (const y of ys) for (const x of xs) { const v = val(x, y); if (v !== undefined && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }
  if (!(lo < hi)) { lo = isFinite(lo) ? lo - 0.5 : 0; hi = isFinite(hi) ? hi + 0.5 : 1; }
  ys.forEach((y, j) => xs.forEach((x, i) => { const v = val(x, y); if (v === undefined) return;
    const r = sv("rect", {x: x0 + i * cs, y: y0 + j * cs, width: cs, height: cs, fill: colour("cividis", (v - lo) / (hi - lo)), "data-value": String(v)});
    r.appendChild(sv("title", {}, xl + " " + x + ", " + yl + " " + y + ": " + fmt(v))); svg.appendChild(r); }));
  svg.appendChild(sv("text", {x: x0, y: y0 + ys.length * cs + 12}, xl + " \u2192 (" + fmt(xs[0]) + " .. " + fmt(xs[xs.length - 1]) + ")"));
  svg.appendChild(sv("text", {x: 2, y: 10}, yl + " \u2193 (" + fmt(ys[0]) + " .. " + fmt(ys[ys.length - 1]) + ")"));
  svg.appendChild(sv("text", {x: x0 + xs.length * cs + 6, y: y0 + 8}, "cividis"));
  svg.appendChild(sv("text", {x: x0 + xs.length * cs + 6, y: y0 + 20}, "max " + fmt(hi, 3)));
  svg.appendChild(sv("text", {x: x0 + xs.length * cs + 6, y: y0 + 32}, "min " + fmt(lo, 3)));
  return chartBox(title, svg);
}
function bars(id, title, xs, ys, xl, yl) {
  const W = 360, H = 200, x0 = 44, y0 = 16, w = W - x0 - 10, h = H - y0 - 34;
  const svg = sv("svg", {width: W, height: H, id: id, role: "img", "aria-label": title});
  const fin = ys.filter((v) => isFinite(v)); const hi = Math.max(1e-300, ...fin);
  axes(svg, x0, y0, w, h, [xs[0] || 0, xs[xs.length - 1] || 1], [0, hi], xl, yl);
  const bw = w / Math.max(1, xs.length);
  xs.forEach((x, i) => { const v = ys[i]; if (!isFinite(v)) return; const bh = v / hi * h;
    const r = sv("rect", {x: x0 + i * bw, y: y0 + h - bh, width: Math.max(1, bw - 1), height: bh, fill: D.colormaps.cividis[90], "data-value": String(v)});
    r.appendChild(sv("title", {}, xl + " " + x + ": " + fmt(v))); svg.appendChild(r); });
  return chartBox(title, svg);
}
const PALETTE = ["#1f77b4", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d"];

// ---------- a head ----------
function profileSeries(tabs, l, h, name, colour) {
  const p = tabs.head_profile; const rows = rowsOf(p, l, h);
  const x = rows.map((i) => p.cols.tau[i]), y = rows.map((i) => p.cols.plasticity[i]);
  const lo = rows.map((i) => p.cols.plasticity_ci_low ? p.cols.plasticity_ci_low[i] : NaN), hi = rows.map((i) => p.cols.plasticity_ci_high ? p.cols.plasticity_ci_high[i] : NaN);
  const s = [{name: name, colour, x, y, lo, hi}];
  if (p.cols.plasticity_empirical && rows.some((i) => isFinite(p.cols.plasticity_empirical[i]))) s.push({name: name + " empirical", colour: PALETTE[2], dash: "4 3", x, y: rows.map((i) => p.cols.plasticity_empirical[i])});
  return s;
}
function selectHead(l, h) {
  S.selected = [l, h]; placeSelected(); hideTip();
  const panel = $("head-panel"); panel.textContent = "";
  panel.appendChild(el("h2", {id: "head-title"}, "Head: layer " + l + ", query head " + h));
  const charts = el("div", {class: "charts"}); panel.appendChild(charts);
  if (D.kind === "comparison") return selectCompareHead(l, h, panel, charts);
  const tabs = S.sets[S.set]; const m = tabs.head_metrics; const mi = rowsOf(m, l, h)[0];
  if (mi === undefined) { panel.appendChild(el("p", {}, "This head has no row (failed or not present).")); return; }
  const ci = tabs.head_profile && tabs.head_profile.cols.plasticity_ci_low ? " with its " + "confidence interval (\u00a78.3)" : "";
  const prof = lineChart("profile-chart", "Profile AP_j against tau" + ci, profileSeries(tabs, l, h, "AP_j", PALETTE[0]), "tau (tokens)", "plasticity", [0, 1]);
  prof.appendChild(sectionLink("3.4")); charts.appendChild(prof);
  const b = tabs.head_bucket_plasticity;
  if (b) { const rows = rowsOf(b, l, h); const qs = [...new Set(rows.map((i) => b.cols.q_bucket[i]))].sort((a, c) => a - c), ks = [...new Set(rows.map((i) => b.cols.k_bucket[i]))].sort((a, c) => a - c);
    const map = new Map(rows.map((i) => [b.cols.q_bucket[i] + ":" + b.cols.k_bucket[i], b.cols.plasticity[i]]));
    if (rows.length) { const c = heatmap("bucket-heatmap", "Bucket heatmap: cell plasticity P_jc", ks, qs, (x, y) => map.get(y + ":" + x), "k_bucket", "q_bucket"); c.appendChild(sectionLink("3.3")); charts.appendChild(c); } }
  const dm = tabs.head_distance_plasticity;
  if (dm) { const rows = rowsOf(dm, l, h); if (rows.length) { const ks = [...new Set(rows.map((i) => dm.cols.key_distance_low[i]))].sort((a, c) => a - c), qs = [...new Set(rows.map((i) => dm.cols.query_distance_low[i]))].sort((a, c) => a - c);
    const map = new Map(rows.map((i) => [dm.cols.query_distance_low[i] + ":" + dm.cols.key_distance_low[i], dm.cols.plasticity[i]]));
    const c = heatmap("distance-map", "Distance map (bins by lower edge)", ks, qs, (x, y) => map.get(y + ":" + x), "key distance", "query distance"); c.appendChild(sectionLink("3.6")); charts.appendChild(c); } }
  const cw = tabs.head_component_weights;
  if (cw) { const rows = rowsOf(cw, l, h); if (rows.length) { const c = bars("component-weights", "Component weights", rows.map((i) => cw.cols.component[i]), rows.map((i) => cw.cols.weight[i]), "component", "weight"); c.appendChild(sectionLink("3.5")); charts.appendChild(c); } }
  const diag = el("table", {id: "head-metrics"}); const tb = el("tbody");
  for (const c of m.columns) { if (c === "layer" || c === "q_head") continue; const tr = el("tr"); tr.appendChild(el("td", {class: "name"}, c));
    const v = m.get(c, mi); tr.appendChild(el("td", {"data-col": c, "data-value": String(v)}, fmt(v))); tb.appendChild(tr); }
  diag.appendChild(tb); const box = el("div", {class: "chart"}); box.appendChild(el("h3", {}, "This head's metrics and q diagnostics")); box.appendChild(sectionLink("3.2")); box.appendChild(diag); charts.appendChild(box);
}
function selectCompareHead(l, h, panel, charts) {
  const t = S.cmp.heads; const rows = [];
  for (let i = 0; i < t.n; i++) if (t.cols.layer[i] === l && t.cols.q_head[i] === h && t.cols.q_bucket[i] === t.cols.q_bucket[i]) rows.push(i);
  const x = rows.map((i) => t.cols.q_bucket[i]);
  let series;
  if (S.sets.length >= 2) {
    series = profileSeries(S.sets[0], l, h, "A " + D.sets[0].name, PALETTE[0]).slice(0, 1).concat(profileSeries(S.sets[1], l, h, "B " + D.sets[1].name, PALETTE[1]).slice(0, 1));
    charts.appendChild(lineChart("profile-chart", "Both profiles AP_j against tau, with each set's interval (\u00a78.3)", series, "tau (tokens)", "plasticity", [0, 1]));
  } else {
    series = [{name: "A", colour: PALETTE[0], x, y: rows.map((i) => t.cols.value_a[i])}, {name: "B", colour: PALETTE[1], x, y: rows.map((i) => t.cols.value_b[i])}];
    charts.appendChild(lineChart("profile-chart", "Both profiles AP_j by query bucket (compare_heads.csv)", series, "q_bucket", "plasticity", [0, 1]));
  }
  const d = [{name: "B - A", colour: PALETTE[3], x, y: rows.map((i) => t.cols.difference[i]), lo: rows.map((i) => t.cols.difference[i] - t.cols.half_width[i]), hi: rows.map((i) => t.cols.difference[i] + t.cols.half_width[i])}];
  const c = lineChart("difference-chart", "Difference by bucket with its 95% interval (Student's t law with the row's df)", d, "q_bucket", "difference"); c.appendChild(sectionLink("8.6")); charts.appendChild(c);
  const tab = el("table", {id: "head-changes"}); const hr = el("tr");
  const cols = ["quantity", "value_a", "value_b", "difference", "se", "z", "q_bh", "significant"]; cols.forEach((c) => hr.appendChild(el("th", {}, c))); tab.appendChild(hr);
  for (let i = 0; i < t.n; i++) if (t.cols.layer[i] === l && t.cols.q_head[i] === h && !(t.cols.q_bucket[i] === t.cols.q_bucket[i])) { const tr = el("tr");
    cols.forEach((c) => { const v = t.cols[c][i]; tr.appendChild(el("td", {"data-col": c, "data-value": String(v)}, fmt(v))); }); tab.appendChild(tr); }
  const box = el("div", {class: "chart"}); box.appendChild(el("h3", {}, "This head's changes")); box.appendChild(tab); charts.appendChild(box);
}

// ---------- the head table ----------
const TABLE_COLS = ["layer", "q_head", "k_head", "ap_overall", "ap_overall_se", "ap_first20", "ap_last20", "ap_drop", "ap_drop_se", "bias_strength", "q_R2_pos", "n_sequences", "pca_class"];
const CMP_COLS = ["layer", "q_head", "quantity", "value_a", "value_b", "difference", "se", "z", "q_bh", "significant"];
function tableSource() {
  if (D.kind === "comparison") { const t = S.cmp.heads; const rows = []; for (let i = 0; i < t.n; i++) if (!(t.cols.q_bucket[i] === t.cols.q_bucket[i])) rows.push(i); return {t, rows, cols: CMP_COLS.filter((c) => t.has(c))}; }
  const t = S.sets[S.set].head_metrics; return {t, rows: [...Array(t.n).keys()], cols: TABLE_COLS.filter((c) => t.has(c))};
}
function drawTable() {
  const sec = $("table-section"); sec.textContent = "";
  sec.appendChild(el("h2", {}, D.kind === "comparison" ? "Head changes (sortable, filterable)" : "Heads (sortable, filterable)"));
  const f = el("input", {id: "table-filter", type: "search", placeholder: "filter: text, or column<0.5, layer=2", "aria-label": "filter the table", size: 40});
  f.value = S.filter || ""; sec.appendChild(f); const info = el("span", {id: "table-info", class: "note"}); sec.appendChild(info);
  const tab = el("table", {id: "head-table"}); sec.appendChild(tab);
  const render = () => {
    const {t, rows, cols} = tableSource(); S.filter = f.value.trim();
    let sel = rows; const m = S.filter.match(/^(\w+)\s*(<=|>=|=|<|>)\s*(\S+)$/);
    if (m && t.has(m[1])) { const c = t.cols[m[1]], v = isNaN(+m[3]) ? m[3] : +m[3]; const op = {"<": (a) => a < v, ">": (a) => a > v, "<=": (a) => a <= v, ">=": (a) => a >= v, "=": (a) => a == v}[m[2]]; sel = rows.filter((i) => op(c[i])); }
    else if (S.filter) { const s = S.filter.toLowerCase(); sel = rows.filter((i) => cols.some((c) => String(t.cols[c][i]).toLowerCase().includes(s))); }
    if (S.sortCol && t.has(S.sortCol)) { const c = t.cols[S.sortCol]; const key = (v) => (typeof v === "number" && !(v === v)) ? Infinity : v; sel = sel.slice().sort((a, b) => { const x = key(c[a]), y = key(c[b]); return (x < y ? -1 : x > y ? 1 : 0) * S.sortDir; }); }
    const LIMIT = 500; tab.textContent = ""; const hr = el("tr");
    cols.forEach((c) => { const th = el("th", {scope: "col", "aria-sort": S.sortCol === c ? (S.sortDir > 0 ? "ascending" : "descending") : "none"}); const bt = el("button", {type: "button", "data-col": c}, c + (S.sortCol === c ? (S.sortDir > 0 ? " \u25b2" : " \u25bc") : ""));
      bt.addEventListener("click", () => { if (S.sortCol === c) S.sortDir = -S.sortDir; else { S.sortCol = c; S.sortDir = 1; } render(); }); th.appendChild(bt); hr.appendChild(th); });
    tab.appendChild(hr);
    for (const i of sel.slice(0, LIMIT)) { const tr = el("tr", {tabindex: 0, "data-layer": t.cols.layer[i], "data-head": t.cols.q_head[i]});
      cols.forEach((c) => { const v = t.cols[c][i]; tr.appendChild(el("td", {"data-col": c, "data-value": String(v), class: typeof v === "string" ? "name" : ""}, fmt(v))); });
      const go = () => { S.cursor = [t.cols.layer[i], t.cols.q_head[i]]; placeCursor(); selectHead(t.cols.layer[i], t.cols.q_head[i]); };
      tr.addEventListener("click", go); tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); }); tab.appendChild(tr); }
    info.textContent = " " + sel.length + " of " + rows.length + " rows" + (sel.length > LIMIT ? " (first " + LIMIT + " shown)" : "");
  };
  f.addEventListener("input", render); render();
}

// ---------- controls, overview, provenance ----------
function drawControls() {
  const c = $("controls"); c.textContent = "";
  const lab = el("label", {for: "quantity"}, "Quantity "); c.appendChild(lab);
  const s = el("select", {id: "quantity"});
  let names = D.quantities.map((q) => q.name);
  if (D.kind === "comparison") { const t = S.cmp.heads; const present = new Set(); for (let i = 0; i < t.n; i++) if (!(t.cols.q_bucket[i] === t.cols.q_bucket[i])) present.add(t.cols.quantity[i]); names = [...present]; if (!present.has(S.q)) S.q = names[0]; }
  else { const m = S.sets[S.set].head_metrics; names = names.filter((n) => m.has(n)); }
  names.forEach((n) => { const o = el("option", {value: n}, n); if (n === S.q) o.selected = true; s.appendChild(o); });
  s.addEventListener("change", () => { S.q = s.value; drawMap(); drawDefinition(); });
  c.appendChild(s);
  const def = el("span", {id: "quantity-definition", class: "note"}); c.appendChild(def);
  if (D.kind === "training") {
    const l2 = el("label", {for: "step-slider"}, " Step "); c.appendChild(l2);
    const r = el("input", {id: "step-slider", type: "range", min: 0, max: D.sets.length - 1, step: 1, value: S.set, "aria-valuetext": "step " + D.sets[S.set].step});
    const out = el("output", {id: "step-value", for: "step-slider"}, String(D.sets[S.set].step));
    r.addEventListener("input", () => { S.set = +r.value; out.textContent = String(D.sets[S.set].step); r.setAttribute("aria-valuetext", "step " + D.sets[S.set].step); drawMap(); drawTable(); if (S.selected) selectHead(S.selected[0], S.selected[1]); });
    c.appendChild(r); c.appendChild(out);
  }
  drawDefinition();
}
function drawDefinition() {
  const d = $("quantity-definition"); d.textContent = " "; const q = D.quantities.find((x) => x.name === S.q);
  if (q) { d.appendChild(document.createTextNode(q.definition + " (")); d.appendChild(sectionLink(q.section)); d.appendChild(document.createTextNode(")")); }
  else if (D.kind === "comparison") { d.appendChild(document.createTextNode("the bias-corrected difference B - A of " + S.q + ", its se and BH q (")); d.appendChild(sectionLink("8.6")); d.appendChild(document.createTextNode(")")); }
}
function drawOverview() {
  const o = $("overview"); o.textContent = "";
  if (D.kind === "result") { const m = S.sets[0].head_metrics; $("subtitle").textContent = m.n + " heads; attention_plasticity " + D.version; }
  if (D.kind === "comparison") {
    const t = S.cmp.heads; const design = t.n ? t.cols.design[0] : "?";
    $("subtitle").textContent = "set A " + (t.n ? t.cols.set_a[0] : "") + " vs set B " + (t.n ? t.cols.set_b[0] : "") + "; attention_plasticity " + D.version;
    o.appendChild(el("p", {id: "design", class: "note"}, "Design: " + design + ". A head's difference is B - A of the bias-corrected values; marked heads (\u25cb) are the changed heads: selected by the hierarchical rule, whose list has a false discovery rate of at most alpha (docs/method.md \u00a78.6)."));
    const s = S.cmp.summary; const tab = el("table", {id: "summary-table"}); const cols = ["quantity", "layer", "n_heads", "mean_a", "mean_b", "mean_difference", "se", "ci_low", "ci_high", "p", "n_significant"].filter((c) => s.has(c));
    const hr = el("tr"); cols.forEach((c) => hr.appendChild(el("th", {}, c))); tab.appendChild(hr);
    for (let i = 0; i < s.n; i++) { const tr = el("tr"); cols.forEach((c) => { const v = s.cols[c][i]; tr.appendChild(el("td", {"data-col": c, "data-value": String(v)}, fmt(v))); }); tab.appendChild(tr); }
    o.appendChild(el("h2", {}, "Model-level summary (compare_summary.csv)")); o.appendChild(tab);
  }
  if (D.kind === "training") {
    $("subtitle").textContent = D.sets.length + " observations (steps " + D.sets.map((s) => s.step).join(", ") + "); attention_plasticity " + D.version;
    const t = S.traj; if (!t) return; const charts = el("div", {class: "charts", id: "trajectories"});
    const qs = [...new Set(t.cols.quantity)]; const layers = [...new Set(t.cols.layer)];
    for (const q of qs.filter((q) => /^ap_/.test(q))) {
      const series = layers.map((L, li) => { const rows = []; for (let i = 0; i < t.n; i++) if (t.cols.quantity[i] === q && t.cols.layer[i] === L) rows.push(i);
        return {name: L === "all" ? "all layers" : "layer " + L, colour: PALETTE[li % PALETTE.length], x: rows.map((i) => t.cols.step[i]), y: rows.map((i) => t.cols.mean[i]), lo: rows.map((i) => t.cols.ci_low ? t.cols.ci_low[i] : NaN), hi: rows.map((i) => t.cols.ci_high ? t.cols.ci_high[i] : NaN)}; });
      charts.appendChild(lineChart("trajectory-" + q, q + ": mean over heads, its interval (ci_low, ci_high: Student's t law, \u00a78.6)", series, "step", q));
    }
    o.appendChild(el("h2", {}, "Trajectories (trajectory.csv)")); o.appendChild(charts);
    const c = S.changes; if (c) { const tab = el("table", {id: "changes-table"}); const hr = el("tr"); c.columns.forEach((k) => hr.appendChild(el("th", {}, k))); tab.appendChild(hr);
      for (let i = 0; i < c.n; i++) { const tr = el("tr"); c.columns.forEach((k) => { const v = c.cols[k][i]; tr.appendChild(el("td", {"data-col": k, "data-value": String(v), class: typeof v === "string" ? "name" : ""}, fmt(v))); }); tab.appendChild(tr); }
      o.appendChild(el("h2", {}, "Heads changed at each observation (changes.csv; paired design, BH q \u2264 alpha, \u00a78.6)")); o.appendChild(tab); }
  }
}
function drawProvenance() {
  const p = $("provenance"); p.textContent = ""; p.appendChild(el("h2", {}, "Provenance"));
  p.appendChild(el("p", {class: "note"}, "Written by attention_plasticity " + D.version + " (ap.report)."));
  p.appendChild(el("pre", {id: "provenance-json"}, JSON.stringify(D.provenance || {}, null, 1)));
  if (D.compare && D.compare.notes && D.compare.notes.length) { const ul = el("ul", {id: "notes"}); D.compare.notes.forEach((n) => ul.appendChild(el("li", {class: "note"}, n))); p.appendChild(ul); }
}
function drawDefinitions() {
  const d = $("definitions"); d.textContent = ""; d.appendChild(el("h2", {}, "Definitions"));
  const ul = el("ul"); for (const q of D.quantities) { const li = el("li"); li.appendChild(el("code", {}, q.name)); li.appendChild(document.createTextNode(": " + q.definition + " (")); li.appendChild(sectionLink(q.section)); li.appendChild(document.createTextNode(")")); ul.appendChild(li); }
  const li = el("li"); li.appendChild(document.createTextNode("standard errors and intervals: ")); li.appendChild(sectionLink("8.3")); ul.appendChild(li);
  d.appendChild(ul);
}

async function main() {
  const t0 = performance.now();
  for (const s of D.sets) S.sets.push(await decodeSet(s));
  if (D.compare) { S.cmp = {}; for (const k of ["heads", "changed", "summary", "trajectory"]) S.cmp[k] = await decode(D.compare[k]); }
  if (D.trajectory) S.traj = await decode(D.trajectory);
  if (D.changes) S.changes = await decode(D.changes);
  if (D.kind === "training") S.set = D.sets.length - 1;
  drawControls(); drawOverview(); drawMap(); drawTable(); drawProvenance(); drawDefinitions();
  $("map").addEventListener("keydown", mapKeys);
  document.body.dataset.ready = "1"; document.body.dataset.readyMs = String(performance.now() - t0);
  document.body.dataset.readyAt = String(performance.now());  // ms since the navigation's start
}
main().catch((e) => { document.body.dataset.error = String(e); console.error(e); });
"""
