#!/usr/bin/python3
"""Documents as the sampling unit (docs/method.md §1.1, §8.3), end to end with ap_synth's
multi-chunk documents (--examples-per-document) and ap_analyze / ap_merge.

usage: test_documents.py AP_SYNTH AP_ANALYZE AP_MERGE WORK_DIR

Checked:
  - one example per document: a dump with an examples.csv mapping each example to its own
    document gives every CSV byte for byte as the dump without examples.csv (whose run report
    says once that each example is taken as its own document);
  - documents of 4 examples (ap_synth's shared document effects): the reference here (NumPy)
    takes the per-example influences of the run WITHOUT examples.csv, sums them by document
    (the map of examples.csv) and recomputes each standard error as
    sqrt(G / (G - 1) sum_d (sum_{e in d} phi_e)^2) over the G documents: the run WITH
    examples.csv gives those influences (head_sequence_influence.csv, column document_id) and
    those errors (ap_overall_se, ap_first20_se, ap_last20_se, ap_drop_se, every plasticity_se)
    to 1e-12 relative; the estimates are the same in both runs; n_sequences counts the
    examples, n_documents the documents; the errors are larger than the per-example ones;
  - fewer than 10 documents of 40 examples: the sequence-level errors (and bias_strength_se)
    are NaN and the run's warning counts documents;
  - an example id of a head folder without a row: its heads fail naming examples.csv and the id;
  - run.json: "units" ("documents" / "examples") and metadata.json's "capture" object;
  - ap_merge of the two shards of the run with examples.csv: the unsharded run's bytes, and
    examples.csv; run.json "units": "documents" and the "capture"; shards whose examples.csv differ, or of which
    one has none, are refused (exit 2).
"""

import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

TABLES = ["head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv",
          "head_distance_plasticity.csv", "head_sequence_influence.csv"]
CAPTURE = {"rule": "spread", "example_seed": 7, "max_examples": 48, "documents": 12, "effective_documents": 11.5}
NOTE = "no examples.csv: each example is taken as its own document (docs/method.md §8.3)"


def synth(ap_synth, out, examples, per_document, seed=3):
    u.run([ap_synth, "--out", out, "--num-layers", "1", "--num-q-heads", "4", "--num-k-heads", "2", "--dim", "8",
           "--examples", examples, "--tokens", examples * 200, "--examples-per-document", per_document,
           "--seed", seed, "--threads", "1"], expect=0, quiet=True)


def without_examples(data, out):
    """A copy of the dump `data` without its examples.csv (head folders linked)."""
    u.fresh_dir(out)
    for name in os.listdir(data):
        if name != "examples.csv":
            os.symlink(os.path.abspath(os.path.join(data, name)), os.path.join(out, name))
    return out


def analyze(ap_analyze, data, out, *extra, expect=0):
    _rc, _out, err = u.run([ap_analyze, "--data-root", data, "--output-dir", out, "--sequence-influences", "on",
                            "--threads", "1"] + list(extra), expect=expect)
    return err


def read_examples(path):
    _h, rows = u.read_csv(path)
    return {int(r["example_id"]): int(r["document_id"]) for r in rows}


def influences(folder, column):
    _h, rows = u.read_csv(os.path.join(folder, "head_sequence_influence.csv"))
    out = {}
    for r in rows:
        key = (int(r["layer"]), int(r["q_head"]), r["quantity"], int(r["q_bucket"]))
        out.setdefault(key, {})[int(r[column])] = u.num(r["influence"])
    return out


def check_one_example_per_document(ap_synth, ap_analyze, work):
    data = os.path.join(work, "single")
    synth(ap_synth, data, 16, 1)
    plain = without_examples(data, os.path.join(work, "single_plain"))
    # examples.csv mapping each example to itself (ap_synth's own maps example e to document e).
    _h, rows = u.read_csv(os.path.join(data, "examples.csv"))
    with open(os.path.join(data, "examples.csv"), "w") as f:
        f.write("example_id,document_id,chunk,fingerprint,document_fingerprint\n")
        for r in rows:
            f.write("%s,%s,0,%s,%s\n" % (r["example_id"], r["example_id"], r["fingerprint"], r["document_fingerprint"]))
    err_plain = analyze(ap_analyze, plain, os.path.join(work, "single_out_plain"))
    err_docs = analyze(ap_analyze, data, os.path.join(work, "single_out_docs"))
    assert err_plain.count(NOTE) == 1, err_plain
    assert NOTE not in err_docs, err_docs
    for name in TABLES:
        with open(os.path.join(work, "single_out_plain", name), "rb") as a, \
                open(os.path.join(work, "single_out_docs", name), "rb") as b:
            assert a.read() == b.read(), name
    header, metrics = u.read_csv(os.path.join(work, "single_out_docs", "head_metrics.csv"))
    assert header[-1] == "n_documents"
    assert all(m["n_documents"] == m["n_sequences"] == "16" for m in metrics)
    print("one example per document: the same bytes with and without examples.csv")


def check_documents(ap_synth, ap_analyze, work):
    import numpy as np

    data = os.path.join(work, "docs")
    synth(ap_synth, data, 48, 4)
    # How the examples were chosen (metadata.json "capture"), recorded in run.json.
    with open(os.path.join(data, "metadata.json")) as f:
        meta = json.load(f)
    meta["capture"] = CAPTURE
    with open(os.path.join(data, "metadata.json"), "w") as f:
        json.dump(meta, f)
    plain = without_examples(data, os.path.join(work, "docs_plain"))
    out_docs, out_plain = os.path.join(work, "docs_out"), os.path.join(work, "docs_out_plain")
    analyze(ap_analyze, data, out_docs)
    analyze(ap_analyze, plain, out_plain)
    for out, units in ((out_docs, "documents"), (out_plain, "examples")):
        with open(os.path.join(out, ".ap_results", "current", "run.json")) as f:
            run_json = json.load(f)
        assert run_json["units"] == units and run_json["capture"] == CAPTURE, run_json
        assert ("examples.csv" in run_json["files"]) == (units == "documents")
    document_of = read_examples(os.path.join(data, "examples.csv"))
    assert len(set(document_of.values())) == 12
    per_example = influences(out_plain, "document_id")  # each example its own document
    per_document = influences(out_docs, "document_id")
    assert set(per_example) == set(per_document)
    # The reference: sums by document of the per-example influences, and the errors they give.
    reference_se = {}
    compared = 0
    for key, by_example in per_example.items():
        ids = sorted(by_example)
        phi = np.array([by_example[e] for e in ids], dtype=np.float64)
        documents = np.array([document_of[e] for e in ids], dtype=np.int64)
        names = np.unique(documents)
        sums = np.array([phi[documents == d].sum() for d in names], dtype=np.float64)
        g = len(names)
        reference_se[key] = math.sqrt(g / (g - 1) * float(np.sum(sums ** 2))) if np.all(np.isfinite(sums)) else math.nan
        got = per_document[key]
        assert sorted(got) == list(names), key
        scale = float(np.max(np.abs(sums))) if len(sums) else 0.0
        for d, want in zip(names, sums):
            assert abs(got[int(d)] - want) <= 1e-12 * max(abs(want), 1e-3 * scale), (key, d, got[int(d)], want)
            compared += 1
    assert compared > 100
    _h, metrics = u.read_csv(os.path.join(out_docs, "head_metrics.csv"))
    _h, metrics_plain = u.read_csv(os.path.join(out_plain, "head_metrics.csv"))
    larger = 0
    for m, p in zip(metrics, metrics_plain):
        layer, q_head = u.head_key(m)
        assert m["n_sequences"] == "48" and m["n_documents"] == "12"
        assert p["n_sequences"] == "48" and p["n_documents"] == "48"
        for column in m:
            if not (column.endswith("_se") or "_ci_" in column or column == "n_documents"):
                assert m[column] == p[column], column
        for quantity in ("ap_overall", "ap_first20", "ap_last20", "ap_drop"):
            want = reference_se.get((layer, q_head, quantity, 0), math.nan)
            got = u.num(m[quantity + "_se"])
            assert (math.isnan(want) and math.isnan(got)) or abs(got - want) <= 1e-12 * want, (quantity, got, want)
        larger += u.num(m["ap_overall_se"]) > u.num(p["ap_overall_se"])
    assert larger >= 3, "the document effects should widen the errors"
    _h, profile = u.read_csv(os.path.join(out_docs, "head_profile.csv"))
    buckets = 0
    for r in profile:
        key = (int(r["layer"]), int(r["q_head"]), "ap_bucket", int(r["q_bucket"]))
        got = u.num(r["plasticity_se"])
        if key in reference_se and not math.isnan(got):
            assert abs(got - reference_se[key]) <= 1e-12 * reference_se[key], (key, got, reference_se[key])
            buckets += 1
    assert buckets > 20
    print("documents of 4 examples: %d influences and %d bucket errors as the NumPy reference" % (compared, buckets))
    return data, out_docs


def check_few_documents(ap_synth, ap_analyze, work):
    data = os.path.join(work, "few")
    synth(ap_synth, data, 40, 5)
    err = analyze(ap_analyze, data, os.path.join(work, "few_out"))
    assert "fewer than 10 documents" in err, err
    _h, metrics = u.read_csv(os.path.join(work, "few_out", "head_metrics.csv"))
    for m in metrics:
        assert m["n_documents"] == "8" and m["n_sequences"] == "40"
        for column in ("ap_overall_se", "ap_drop_se", "bias_strength_se"):
            assert m[column] == "nan", column
    plain = without_examples(data, os.path.join(work, "few_plain"))
    err = analyze(ap_analyze, plain, os.path.join(work, "few_out_plain"))
    assert "fewer than 10" not in err
    _h, metrics = u.read_csv(os.path.join(work, "few_out_plain", "head_metrics.csv"))
    assert all(math.isfinite(u.num(m["ap_overall_se"])) for m in metrics)
    print("8 documents of 40 examples: NaN errors, the warning counts documents")


def check_missing_row(ap_synth, ap_analyze, work):
    data = os.path.join(work, "missing")
    synth(ap_synth, data, 16, 2)
    path = os.path.join(data, "examples.csv")
    with open(path) as f:
        lines = f.readlines()
    with open(path, "w") as f:
        f.writelines(line for line in lines if not line.startswith("22,"))
    err = analyze(ap_analyze, data, os.path.join(work, "missing_out"), expect=1)
    assert "examples.csv: has no row for example id 22" in err, err
    print("an example without a row: refused naming examples.csv and the id")


def check_merge(ap_analyze, ap_merge, work, data, out_docs):
    shards = []
    for i in (0, 1):
        out = os.path.join(work, "shard%d" % i)
        analyze(ap_analyze, data, out, "--shard", "%d/2" % i)  # shards 0/2 and 1/2
        shards.append(out)
    merged = os.path.join(work, "merged")
    u.run([ap_merge, "--output-dir", merged] + shards, expect=0)
    for name in TABLES + ["examples.csv"]:
        with open(os.path.join(merged, name), "rb") as a, open(os.path.join(out_docs, name), "rb") as b:
            assert a.read() == b.read(), name
    with open(os.path.join(merged, ".ap_results", "current", "run.json")) as f:
        meta = json.load(f)
    assert meta["units"] == "documents" and "examples.csv" in meta["files"], meta
    assert meta["capture"] == CAPTURE, meta
    # Plain copies of the shards (the files themselves), one with another examples.csv.
    copies = []
    for s in shards:
        copy = u.fresh_dir(s + "_copy")
        for name in os.listdir(s):
            if not name.startswith("."):
                shutil.copyfile(os.path.join(s, name), os.path.join(copy, name))
        copies.append(copy)
    u.run([ap_merge, "--output-dir", os.path.join(work, "merged_copies")] + copies, expect=0)
    path = os.path.join(copies[1], "examples.csv")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace(",1,", ",2,", 1))
    _rc, _o, err = u.run([ap_merge, "--output-dir", os.path.join(work, "merged_bad")] + copies, expect=2)
    assert "different examples.csv" in err, err
    os.remove(path)
    _rc, _o, err = u.run([ap_merge, "--output-dir", os.path.join(work, "merged_bad")] + copies, expect=2)
    assert "examples.csv in one of them only" in err, err
    assert not os.path.exists(os.path.join(work, "merged_bad", "head_metrics.csv"))
    print("ap_merge: carries examples.csv, refuses shards whose examples.csv differ")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    u.require_numpy()
    ap_synth, ap_analyze, ap_merge, work = sys.argv[1:]
    u.fresh_dir(work)
    check_one_example_per_document(ap_synth, ap_analyze, work)
    data, out_docs = check_documents(ap_synth, ap_analyze, work)
    check_few_documents(ap_synth, ap_analyze, work)
    check_missing_row(ap_synth, ap_analyze, work)
    check_merge(ap_analyze, ap_merge, work, data, out_docs)
    print("OK")


if __name__ == "__main__":
    main()
