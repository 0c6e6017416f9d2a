#!/usr/bin/python3
"""Bucket rules of docs/method.md §2.10-§2.12 and §2.14 at the driver level, on crafted dumps.

usage: test_bucket_rules.py AP_ANALYZE WORK_DIR

Dump "rules" (1 layer, 2 query heads, 2 key heads, d = 3):
  q_head 0 / k_head 0: query bucket 0 (skipped), bucket 1 with one query (no profile row, no
    cells), buckets 2, 3, 5; key buckets 0, 1 (one key per example: no pairs), 2, 3, 4 and 6
    (never below a query bucket). Expected cells: (2,0) (2,1) (3,0) (3,1) (3,2) (5,0) .. (5,4);
    cells with key bucket 1 have plasticity nan and n_pairs 0.
  q_head 1 / k_head 1: query buckets 2 and 4; keys only in bucket 1 (no pairs) and 3. Bucket 2
    has a profile row with plasticity nan and n_pairs 0; ap_overall is AP_4.
  Run with --min-bucket-queries 2 (§2.10's rule alone), then with 4: buckets of fewer queries
  flagged small_bucket, left out of the aggregates and without an interval (§2.14).
Dump "window" (1 layer, 6 query heads sharing 1 key head): key bucket c holds positions
  10c .. 10c+9 (two examples), queries of bucket j sit at 10j+3 and 10j+5 (tau_j = 10j+4).
  Eligible key buckets (c < j, and c = j-1 or 10c+9 > tau_j - w):
    q0 w=25 (sliding_window.npy mixes 0 and 25): {j-2, j-1};  q1 w=1: {j-1};
    q2 values 0 and -5 only (no window): all c < j;  q3 w=1000: all c < j;
    q4 w=15: {j-1} (c = j-2 has its largest key position exactly tau_j - w: not eligible);
    q5 no sliding_window.npy: all c < j.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

PAIRS = 64


def rules_dump(root):
    import numpy as np
    rng = np.random.default_rng(5)

    def vecs(n):
        return rng.standard_normal((n, 3))

    # query head 0: (position, bucket, example)
    q0 = [(0, 0, 7), (1, 0, 7), (0, 0, 9), (1, 0, 9), (12, 1, 7)]
    q0 += [(p, 2, 7) for p in range(20, 25)] + [(p, 3, 9) for p in range(30, 34)] + [(p, 5, 7) for p in (50, 51, 52)]
    k0 = [(p, 0, 7) for p in range(10)] + [(10, 1, 7), (11, 1, 9)] + [(p, 2, 9) for p in range(20, 30)]
    k0 += [(p, 3, 7) for p in range(30, 36)] + [(p, 3, 9) for p in range(30, 33)]
    k0 += [(p, 4, 9) for p in range(40, 46)] + [(p, 6, 7) for p in range(60, 66)]
    q1 = [(p, 2, 7) for p in (20, 21, 22)] + [(p, 4, 9) for p in (40, 41)]
    k1 = [(10, 1, 7), (11, 1, 9)] + [(p, 3, 7) for p in range(30, 38)]
    for head, rows, kind in ((0, q0, "q"), (0, k0, "k"), (1, q1, "q"), (1, k1, "k")):
        pos, bucket, ex = zip(*rows)
        u.write_folder(u.folder(root, 0, head, kind), vecs(len(rows)), pos, bucket, ex)


def window_dump(root):
    import numpy as np
    rng = np.random.default_rng(6)
    keys = [(p, p // 10, e) for e in (1, 2) for p in range(60)]
    pos, bucket, ex = zip(*keys)
    u.write_folder(u.folder(root, 0, 0, "k"), rng.standard_normal((len(keys), 4)), pos, bucket, ex)
    queries = [(10 * j + off, j, e) for e in (1, 2) for j in range(6) for off in (3, 5)]
    pos, bucket, ex = zip(*queries)
    n = len(queries)
    windows = {0: [25 if i % 2 else 0 for i in range(n)], 1: [1] * n, 2: [0 if i % 2 else -5 for i in range(n)],
               3: [1000] * n, 4: [15] * n, 5: None}
    for head, sw in windows.items():
        u.write_folder(u.folder(root, 0, head, "q"), rng.standard_normal((n, 4)), pos, bucket, ex,
                       sliding_window=sw, int_dtype="int32" if head % 2 else "int64")


def rows_of(rows, q_head):
    return [r for r in rows if int(r["q_head"]) == q_head]


def check_consistency(c, name, cells, profile, metrics):
    """Profile = pair-weighted mean of its cells; ap_* = n_j-weighted means of the profile."""
    for p in profile:
        j = int(p["q_bucket"])
        mine = [x for x in cells if int(x["q_bucket"]) == j]
        n = sum(int(x["n_pairs"]) for x in mine)
        c.check(int(p["n_pairs"]) == n, "%s bucket %d: profile n_pairs %s, cells sum %d" % (name, j, p["n_pairs"], n))
        if n:
            mean = sum(u.num(x["plasticity"]) * int(x["n_pairs"]) for x in mine if int(x["n_pairs"])) / n
            c.check(u.close(u.num(p["plasticity"]), mean, rel=1e-12, abs_tol=1e-15),
                    "%s bucket %d: profile plasticity %s vs cell mean %r" % (name, j, p["plasticity"], mean))
        else:
            c.check(p["plasticity"] == "nan", "%s bucket %d: no pairs but plasticity %s" % (name, j, p["plasticity"]))
    # D of §2.14: a defined AP_j and not a small bucket (n_j < min_bucket_queries)
    defined = [p for p in profile if p["plasticity"] != "nan" and p["small_bucket"] == "0"]

    def weighted(keep):
        sel = [p for p in defined if keep(p)]
        den = sum(int(p["n_queries"]) for p in sel)
        return sum(int(p["n_queries"]) * u.num(p["plasticity"]) for p in sel) / den if den else float("nan")
    context = metrics["_C"]
    expect = {"ap_overall": weighted(lambda p: True),
              "ap_first20": weighted(lambda p: float(p["tau"]) < 0.2 * context),
              "ap_last20": weighted(lambda p: float(p["tau"]) >= 0.8 * context)}
    expect["ap_drop"] = expect["ap_first20"] - expect["ap_last20"]
    for key, value in expect.items():
        c.check(u.close(u.num(metrics[key]), value, rel=1e-12, abs_tol=1e-15),
                "%s %s = %s, expected %r" % (name, key, metrics[key], value))


def main():
    u.require_numpy()
    analyze, work = sys.argv[1:3]
    u.fresh_dir(work)
    c = u.Checker()

    # ---- dump "rules"
    root = os.path.join(work, "rules")
    rules_dump(root)
    out = os.path.join(work, "rules_out")
    # --min-bucket-queries 2: the rule of §2.10 alone (buckets of 3 to 5 queries)
    u.run([analyze, "--data-root", root, "--output-dir", out, "--num-pairs-per-bucket", PAIRS, "--threads", 1,
           "--min-bucket-queries", 2, "--num-q-heads", 2, "--num-k-heads", 2], expect=0)
    _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))

    got = [(int(r["q_bucket"]), int(r["k_bucket"])) for r in rows_of(cells, 0)]
    want = [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (5, 0), (5, 1), (5, 2), (5, 3), (5, 4)]
    c.check(got == want, "head 0 cells %s, expected %s" % (got, want))
    for r in rows_of(cells, 0):
        kb = int(r["k_bucket"])
        if kb == 1:
            c.check(r["plasticity"] == "nan" and r["n_pairs"] == "0",
                    "head 0 cell (%s,1) should be nan/0, got %s/%s" % (r["q_bucket"], r["plasticity"], r["n_pairs"]))
        else:
            p = u.num(r["plasticity"])
            c.check(r["n_pairs"] == str(PAIRS) and 0.0 <= p <= 1.0,
                    "head 0 cell (%s,%d): plasticity %s n_pairs %s" % (r["q_bucket"], kb, r["plasticity"], r["n_pairs"]))
    got = [(int(r["q_bucket"]), float(r["tau"]), int(r["n_queries"])) for r in rows_of(profile, 0)]
    want = [(2, 22.0, 5), (3, 31.5, 4), (5, 51.0, 3)]
    c.check(got == want, "head 0 profile (bucket, tau, n_queries) %s, expected %s" % (got, want))
    m0 = rows_of(metrics, 0)[0]
    m0["_C"] = 53.0
    check_consistency(c, "head 0", rows_of(cells, 0), rows_of(profile, 0), m0)
    c.check(m0["ap_first20"] == "nan" and m0["ap_drop"] == "nan",
            "head 0: no bucket has tau < 0.2 C, ap_first20/ap_drop should be nan: %s %s"
            % (m0["ap_first20"], m0["ap_drop"]))
    c.check(m0["n_q_tokens"] == "17" and m0["n_k_tokens"] == "43",
            "head 0 token counts %s %s" % (m0["n_q_tokens"], m0["n_k_tokens"]))

    got = [(int(r["q_bucket"]), int(r["k_bucket"]), r["plasticity"] == "nan", int(r["n_pairs"]))
           for r in rows_of(cells, 1)]
    want = [(2, 1, True, 0), (4, 1, True, 0), (4, 3, False, PAIRS)]
    c.check(got == want, "head 1 cells %s, expected %s" % (got, want))
    got = [(int(r["q_bucket"]), r["plasticity"] == "nan", int(r["n_pairs"])) for r in rows_of(profile, 1)]
    c.check(got == [(2, True, 0), (4, False, PAIRS)], "head 1 profile %s" % got)
    m1 = rows_of(metrics, 1)[0]
    m1["_C"] = 42.0
    check_consistency(c, "head 1", rows_of(cells, 1), rows_of(profile, 1), m1)
    c.check(m1["k_head"] == "1", "head 1 k_head %s (GQA with as many key heads as query heads)" % m1["k_head"])

    # ---- the small-bucket rule of §2.14: the same dump with --min-bucket-queries 4 (intervals on,
    # the default): the same rows and AP_j, buckets of fewer than 4 queries flagged, out of the
    # aggregates and without an interval
    small_out = os.path.join(work, "rules_small_out")
    u.run([analyze, "--data-root", root, "--output-dir", small_out, "--num-pairs-per-bucket", PAIRS,
           "--min-bucket-queries", 4, "--num-q-heads", 2, "--num-k-heads", 2], expect=0)
    _, small_profile = u.read_csv(os.path.join(small_out, "head_profile.csv"))
    _, small_metrics = u.read_csv(os.path.join(small_out, "head_metrics.csv"))
    for before, after in zip(profile, small_profile):
        flagged = int(after["n_queries"]) < 4
        c.check(after["small_bucket"] == ("1" if flagged else "0") and before["small_bucket"] == "0",
                "bucket %s of head %s: small_bucket %s with %s queries" % (after["q_bucket"], after["q_head"],
                                                                          after["small_bucket"], after["n_queries"]))
        c.check(after["plasticity"] == before["plasticity"] and after["n_pairs"] == before["n_pairs"],
                "bucket %s: AP_j changed by the rule" % after["q_bucket"])
        if flagged:
            c.check(all(after[k] == "nan" for k in ("plasticity_se", "plasticity_ci_low", "plasticity_ci_high")),
                    "small bucket %s of head %s has an interval" % (after["q_bucket"], after["q_head"]))
    for q_head, context in ((0, 53.0), (1, 42.0)):
        m = rows_of(small_metrics, q_head)[0]
        m["_C"] = context
        check_consistency(c, "head %d, min 4" % q_head, rows_of(cells, q_head), rows_of(small_profile, q_head), m)
    c.check(small_metrics[1]["ap_overall"] == "nan", "head 1 (buckets of 3 and 2 queries) has no bucket in D")

    # ---- dump "window"
    root = os.path.join(work, "window")
    window_dump(root)
    out = os.path.join(work, "window_out")
    # buckets of exactly min_bucket_queries queries are in D
    u.run([analyze, "--data-root", root, "--output-dir", out, "--num-pairs-per-bucket", PAIRS,
           "--min-bucket-queries", 4, "--num-q-heads", 6, "--num-k-heads", 1], expect=0)
    _, cells = u.read_csv(os.path.join(out, "head_bucket_plasticity.csv"))
    _, profile = u.read_csv(os.path.join(out, "head_profile.csv"))
    _, metrics = u.read_csv(os.path.join(out, "head_metrics.csv"))
    rule = {0: lambda j: range(max(0, j - 2), j), 1: lambda j: [j - 1], 2: lambda j: range(j),
            3: lambda j: range(j), 4: lambda j: [j - 1], 5: lambda j: range(j)}
    for q_head, eligible in rule.items():
        want = [(j, cb) for j in range(1, 6) for cb in eligible(j)]
        got = [(int(r["q_bucket"]), int(r["k_bucket"])) for r in rows_of(cells, q_head)]
        c.check(got == want, "window head %d cells %s, expected %s" % (q_head, got, want))
        c.check(all(r["n_pairs"] == str(PAIRS) for r in rows_of(cells, q_head)),
                "window head %d: every cell has %d pairs" % (q_head, PAIRS))
        got = [(int(r["q_bucket"]), float(r["tau"]), int(r["n_queries"])) for r in rows_of(profile, q_head)]
        c.check(got == [(j, 10.0 * j + 4.0, 4) for j in range(1, 6)], "window head %d profile %s" % (q_head, got))
        m = rows_of(metrics, q_head)[0]
        m["_C"] = 56.0
        check_consistency(c, "window head %d" % q_head, rows_of(cells, q_head), rows_of(profile, q_head), m)
    c.check(not math.isnan(u.num(rows_of(metrics, 2)[0]["ap_overall"])), "window head 2 has an ap_overall")
    c.close("test_bucket_rules")


if __name__ == "__main__":
    main()
