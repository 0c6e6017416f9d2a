"""A small synthetic set of the driver's five CSVs (docs/method.md §3), for the plot tests.

Values are made up but shaped like real output: log2 position buckets, plasticity in
[0, 1], NaN (written as ``nan``) where a head or cell has no value, and cells missing
for heads with a sliding window. Deterministic for a given seed.
Run as a script to write a set: ``python3 synthetic_results.py OUT_DIR [--big] [--full-headers]``.
"""

import math
import os
import random

INF = float("inf")

NAN = float("nan")


def _fmt(x):
    if isinstance(x, float):
        return format(x, ".17g")  # nan -> 'nan', as the driver writes it
    return str(x)


def _write(path, rows, header=None):
    """Rows are dicts column -> value, all with the same columns. ``header`` (the table's full
    header) orders them and adds the columns the rows lack, as nan; a column of the rows that
    is not in ``header`` is an error."""
    filled = list(rows[0])
    if header is None:
        header = filled
    unknown = [c for c in filled if c not in header]
    if unknown:
        raise ValueError(f"synthetic_results: {os.path.basename(path)}: the columns {unknown} are not in the "
                         f"table's header {list(header)}")
    with open(path, "w", newline="") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(_fmt(row.get(c, NAN)) for c in header) + "\n")


def _clip01(x):
    return min(1.0, max(0.0, x))


def write_synthetic_results(out_dir, num_layers=3, num_q_heads=4, num_k_heads=2,
                            num_buckets=8, d_model=16, seed=0, schema=None):
    """Write head_metrics.csv, head_bucket_plasticity.csv, head_profile.csv,
    head_component_weights.csv and head_distance_plasticity.csv into ``out_dir``; return a dict
    name -> path.

    The values are those of the columns the plots read (examples/plots, each script's READS).
    The tables' columns are defined once, by the C++ writer: ``schema``, when given, is
    attention_plasticity.result_schema() ({table: [(column, type)]}), and each file then has its
    table's full header, the columns not made here written as nan (a column made here that is
    not in it is an error). Without it (the plot tests, which also run with /usr/bin/python3,
    where the package is not installed) a file has only the columns made here.

    Query buckets are 1..num_buckets-1 (bucket j holds positions [2^(j-1), 2^j)),
    key buckets 0..j-1. Some values are NaN on purpose: layer 0 head 1 has no value in
    query bucket 2; the last head has no plasticity at all; key bucket 0 has no pairs;
    odd q_heads of the last layer have a sliding window (far cells absent).
    """
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    group = num_q_heads // num_k_heads
    context = 2 ** (num_buckets - 1)
    metrics, buckets, profile, components, distances = [], [], [], [], []
    for layer in range(num_layers):
        for q_head in range(num_q_heads):
            k_head = q_head // group
            ids = dict(layer=layer, q_head=q_head, k_head=k_head)
            dead = layer == num_layers - 1 and q_head == num_q_heads - 1
            windowed = layer == num_layers - 1 and q_head % 2 == 1 and not dead
            base = 0.35 + 0.4 * rng.random()
            slope = -0.5 + 0.6 * rng.random() - 0.1 * layer
            ap_rows = []
            for j in range(1, num_buckets):
                lo, hi = 2 ** (j - 1), 2 ** j
                tau = (lo + hi - 1) / 2.0 + rng.uniform(-0.2, 0.2) * (hi - lo) / 2.0
                n_q = (hi - lo) * 40
                cells = []
                for c in range(j):
                    if windowed and c < j - 2:
                        continue  # outside the sliding window: no row at all
                    if c == 0 or dead:
                        cells.append((c, NAN, 0))
                        continue
                    dist = (j - c) / num_buckets
                    p = _clip01(base + slope * math.log2(tau + 1) / num_buckets
                                + 0.3 * dist - 0.15 + rng.gauss(0, 0.04))
                    cells.append((c, p, 256))
                defined = [(p, n) for _, p, n in cells if n > 0]
                n_pairs = sum(n for _, n in defined)
                ap = (sum(p * n for p, n in defined) / n_pairs) if n_pairs else NAN
                if layer == 0 and q_head == 1 and j == 2:
                    ap, n_pairs = NAN, 0
                    cells = [(c, NAN, 0) for c, _, _ in cells]
                for c, p, n in cells:
                    buckets.append(dict(ids, q_bucket=j, k_bucket=c, plasticity=p, n_pairs=n))
                profile.append(dict(ids, q_bucket=j, tau=tau, n_queries=n_q, plasticity=ap, n_pairs=n_pairs))
                ap_rows.append((tau, n_q, ap))

            def wmean(rows):
                rows = [(n, a) for _, n, a in rows if not math.isnan(a)]
                return sum(n * a for n, a in rows) / sum(n for n, _ in rows) if rows else NAN

            ap_overall = wmean(ap_rows)
            first = wmean([r for r in ap_rows if r[0] < 0.2 * context])
            # Not the driver's 0.8 C: with log2 buckets no tau reaches it, and the
            # plots need ap_drop values.
            last = wmean([r for r in ap_rows if r[0] >= 0.5 * context])
            metrics.append(dict(ids, ap_overall=ap_overall, ap_first20=first, ap_last20=last, ap_drop=first - last))
            # Distance map: key distances [0, 1) .. [8, 16), query distances up to the context;
            # a few pairs after the queries' mean position (<0) in odd heads; none for dead heads.
            if not dead:
                for kb in range(5):
                    klo, khi = (0.0, 1.0) if kb == 0 else (2.0 ** (kb - 1), 2.0 ** kb)
                    qbins = [(-INF, 0.0)] if q_head % 2 else []
                    qbins += [(2.0 ** (qb - 1), 2.0 ** qb) for qb in range(2, num_buckets + 1)]
                    for qlo, qhi in qbins:
                        p = _clip01(base - 0.05 * math.log2(max(qhi, 1.0)) + 0.02 * kb + rng.gauss(0, 0.03))
                        distances.append(dict(ids, key_distance_low=klo, key_distance_high=khi,
                                              query_distance_low=qlo, query_distance_high=qhi, plasticity=p,
                                              n_pairs=rng.randint(1, 300)))
            r2 = [rng.uniform(-0.02, 0.05) + 0.6 * math.exp(-d / (d_model / 6.0))
                  * rng.uniform(0.5, 1.0) for d in range(d_model)]
            total = sum(max(x, 0.0) for x in r2)
            for d in range(d_model):
                w = max(r2[d], 0.0) / total
                components.append(dict(ids, component=d, component_r2=r2[d], weight=w))
    # One NaN weight, as a defensive case (the driver should not write one).
    components[1]["weight"] = NAN
    paths = {
        "metrics": os.path.join(out_dir, "head_metrics.csv"),
        "bucket": os.path.join(out_dir, "head_bucket_plasticity.csv"),
        "profile": os.path.join(out_dir, "head_profile.csv"),
        "component": os.path.join(out_dir, "head_component_weights.csv"),
        "distance": os.path.join(out_dir, "head_distance_plasticity.csv"),
    }
    for key, rows in (("metrics", metrics), ("bucket", buckets), ("profile", profile), ("component", components),
                      ("distance", distances)):
        table = os.path.splitext(os.path.basename(paths[key]))[0]
        _write(paths[key], rows, None if schema is None else [c for c, _ in schema[table]])
    return paths


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write a synthetic set of the driver's CSVs.")
    ap.add_argument("out_dir")
    ap.add_argument("--big", action="store_true",
                    help="model-sized: 24 layers x 16 heads, 14 buckets, d=64")
    ap.add_argument("--full-headers", action="store_true",
                    help="the tables' full headers, from the installed attention_plasticity")
    a = ap.parse_args()
    schema = None
    if a.full_headers:
        import attention_plasticity

        schema = attention_plasticity.result_schema()
    shape = (24, 16, 4, 14, 64) if a.big else ()
    print(write_synthetic_results(a.out_dir, *shape, schema=schema))
