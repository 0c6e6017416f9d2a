#!/usr/bin/python3
"""Pairing verified from the texts, and the influence table checked on reading (docs/method.md
§8.6; issue 32 items 4 and 5), through ap_compare on sets of ap_synth (--examples-per-document 2:
examples.csv with document fingerprints) analyzed by ap_analyze --sequence-influences on, copied
into plain folders and edited here.

usage: test_compare_design.py AP_SYNTH AP_ANALYZE AP_COMPARE WORK_DIR [--python]

  - A and A2: the same documents (ap_synth --seed 1) with other token draws (--query-seed 7): the
    same fingerprints, so design auto is paired ("paired (auto: same documents)");
  - A3: A2 with other document ids (d -> 1000 + 11 - d in examples.csv and in the influence table):
    paired by fingerprint, A vs A3 gives the bytes of A vs A2 (ids may differ between sets);
  - B (--seed 2): other documents: auto is unpaired ("auto: other documents"), paired is refused
    naming the first unmatched documents (document_id and fingerprint);
  - A, A2 without examples.csv: auto is unpaired ("no fingerprints"); paired is by id with the
    note "pairing could not be checked from the texts";
  - tampered influence tables, each refused naming the file and the head: a document id not in
    examples.csv; a missing (head, document, quantity) row; a NaN influence of a quantity with a
    standard error; influences scaled by 1.01 (their sum of squares no longer gives the head's
    standard error, §8.6); rows beyond the head's n_documents (50,000 more, or the table twice) and
    a bucket not in head_profile.csv, refused as they are read (bounded reading, issue 33 item 3);
  - ids near 2^63: A and A2 with example and document ids 2^63 - 1000 + i, compared (kept exact).
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

INFLUENCE = "head_sequence_influence.csv"
EXAMPLES = "examples.csv"
FILES = ("compare_heads.csv", "compare_changed.csv", "compare_summary.csv", "compare_trajectory.csv")


def plain_copy(src, dst):
    """The set's CSVs as plain files (as a user copies a result folder)."""
    u.fresh_dir(dst)
    for name in os.listdir(src):
        if name.endswith(".csv"):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    return dst


def edit(path, change):
    """Rewrites a CSV: change(header, rows) -> rows (lists of fields)."""
    with open(path) as f:
        lines = f.read().split("\n")
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:] if line]
    rows = change(header, rows)
    with open(path, "w") as f:
        f.write(",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows))


def remap_ids(folder, document, example=None):
    """Document ids through `document` (examples.csv and the influence table), example ids through
    `example` (examples.csv)."""
    def ex(header, rows):
        i_e, i_d = header.index("example_id"), header.index("document_id")
        for r in rows:
            r[i_d] = str(document(int(r[i_d])))
            if example is not None:
                r[i_e] = str(example(int(r[i_e])))
        return rows

    def inf(header, rows):
        i_d = header.index("document_id")
        for r in rows:
            r[i_d] = str(document(int(r[i_d])))
        return rows

    edit(os.path.join(folder, EXAMPLES), ex)
    edit(os.path.join(folder, INFLUENCE), inf)


def compare(ap_compare, out, sets, design=None, expect=None):
    args = [ap_compare, "--output-dir", out] + (["--design", design] if design else []) + list(sets)
    if os.path.exists(out):
        shutil.rmtree(out)
    return u.run(args, expect=expect)


def designs(out):
    _h, rows = u.read_csv(os.path.join(out, "compare_heads.csv"))
    return {r["design"] for r in rows}


def read(out, name):
    with open(os.path.join(out, name)) as f:
        return f.read()


def main():
    ap_synth, ap_analyze, ap_compare, work = sys.argv[1:5]
    c = u.Checker()
    u.fresh_dir(work)
    made = {}
    for name, seed, query_seed in (("A", 1, None), ("A2", 1, 7), ("B", 2, None)):
        dump = os.path.join(work, "dump_" + name)
        u.run([ap_synth, "--out", dump, "--num-layers", 1, "--num-q-heads", 2, "--num-k-heads", 1, "--dim", 16,
               "--tokens", 6144, "--examples", 24, "--examples-per-document", 2, "--seed", seed, "--threads", 1]
              + (["--query-seed", query_seed] if query_seed is not None else []), expect=0, quiet=True)
        out = os.path.join(work, "analyzed_" + name)
        u.run([ap_analyze, "--data-root", dump, "--output-dir", out, "--sequence-influences", "on", "--threads", 1],
              expect=0, quiet=True)
        made[name] = plain_copy(out, os.path.join(work, name))
    A, A2, B = made["A"], made["A2"], made["B"]
    with open(os.path.join(A, EXAMPLES)) as f1, open(os.path.join(A2, EXAMPLES)) as f2:
        c.check(f1.read() == f2.read(), "A and A2 should have the same examples.csv (same texts)")

    # Same documents, other token draws: auto is paired.
    out_auto = os.path.join(work, "auto_same")
    rc, _o, err = compare(ap_compare, out_auto, [A, A2])
    c.check(rc == 0 and designs(out_auto) == {"paired (auto: same documents)"},
            "same documents: auto should be paired: %s %s" % (rc, err))
    c.check("design paired, auto: the sets hold the same documents" in err, "auto's note: %s" % err)
    out_paired = os.path.join(work, "paired_same")
    compare(ap_compare, out_paired, [A, A2], "paired", expect=0)
    for name in FILES:
        c.check(read(out_auto, name).replace("paired (auto: same documents)", "paired") == read(out_paired, name),
                "auto and paired differ in %s" % name)

    # The same documents under other ids: paired by fingerprint, the same numbers.
    A3 = plain_copy(A2, os.path.join(work, "A3"))
    remap_ids(A3, lambda d: 1000 + 11 - d)
    out_renamed = os.path.join(work, "paired_renamed")
    compare(ap_compare, out_renamed, [A, A3], "paired", expect=0)
    for name in FILES:
        c.check(read(out_renamed, name).replace(",A3,", ",A2,").replace("A3,", "A2,") == read(out_paired, name),
                "ids renamed: %s differs from the same documents' (documents not matched by fingerprint)" % name)

    # A corpus that holds one text twice (documents 0 and 1 of one fingerprint in both sets, as
    # the pydoc topics hold two identical texts): still the same documents, paired one for one in
    # increasing document_id order, the same numbers as above.
    def duplicate_text(header, rows):
        i_d, i_p = header.index("document_id"), header.index("document_fingerprint")
        first = next(r[i_p] for r in rows if r[i_d] == "0")
        for r in rows:
            if r[i_d] == "1":
                r[i_p] = first
        return rows
    dup_a = plain_copy(A, os.path.join(work, "A_dup"))
    dup_a2 = plain_copy(A2, os.path.join(work, "A2_dup"))
    for folder in (dup_a, dup_a2):
        edit(os.path.join(folder, EXAMPLES), duplicate_text)
    out_dup = os.path.join(work, "auto_duplicates")
    rc, _o, err = compare(ap_compare, out_dup, [dup_a, dup_a2])
    c.check(rc == 0 and designs(out_dup) == {"paired (auto: same documents)"},
            "a text held twice: auto should be paired: %s %s" % (rc, err))
    if rc == 0:
        c.check(read(out_dup, "compare_heads.csv").replace("A2_dup", "A2").replace("A_dup", "A")
                .replace("paired (auto: same documents)", "paired") == read(out_paired, "compare_heads.csv"),
                "a text held twice: the paired numbers differ from the same documents'")

    # Other documents: auto unpaired, paired refused naming the first unmatched documents.
    out_other = os.path.join(work, "auto_other")
    rc, _o, err = compare(ap_compare, out_other, [A, B])
    c.check(rc == 0 and designs(out_other) == {"unpaired (auto: other documents)"},
            "other documents: auto should be unpaired: %s %s" % (rc, err))
    rc, _o, err = compare(ap_compare, os.path.join(work, "refused"), [A, B], "paired")
    with open(os.path.join(A, EXAMPLES)) as f:
        first_print = f.read().split("\n")[1].split(",")[4]
    c.check(rc == 2 and "do not hold the same documents" in err and "document_id 0 (document_fingerprint "
            + first_print + ")" in err, "paired over other documents should be refused naming them: %s %s" % (rc, err))

    # Sets without examples.csv: auto unpaired; paired by id with a note.
    bare = {}
    for name, src in (("A_bare", A), ("A2_bare", A2)):
        bare[name] = plain_copy(src, os.path.join(work, name))
        os.remove(os.path.join(bare[name], EXAMPLES))
    out_bare = os.path.join(work, "auto_bare")
    rc, _o, err = compare(ap_compare, out_bare, [bare["A_bare"], bare["A2_bare"]])
    c.check(rc == 0 and designs(out_bare) == {"unpaired (auto: no fingerprints)"},
            "no examples.csv: auto should be unpaired: %s %s" % (rc, err))
    out_bare_paired = os.path.join(work, "paired_bare")
    rc, _o, err = compare(ap_compare, out_bare_paired, [bare["A_bare"], bare["A2_bare"]], "paired")
    c.check(rc == 0 and "pairing could not be checked from the texts" in err
            and designs(out_bare_paired) == {"paired (by id: unchecked)"},
            "no examples.csv, paired: by id with a note: %s %s" % (rc, err))

    # Tampered influence tables: each refused naming the file and the head.
    def tampered(name, change):
        folder = plain_copy(A2, os.path.join(work, name))
        edit(os.path.join(folder, INFLUENCE), change)
        rc, _o, err = compare(ap_compare, os.path.join(work, "refused"), [A, folder])
        c.check(rc == 2 and INFLUENCE in err and "head layer 0 q_head" in err,
                "%s: should be refused naming the file and the head: %s %s" % (name, rc, err))
        return err

    def unknown_id(header, rows):
        rows[0][header.index("document_id")] = "999"
        return rows

    def missing_row(header, rows):
        return rows[:3] + rows[4:]

    def nan_influence(header, rows):
        rows[2][header.index("influence")] = "nan"
        return rows

    def scaled(header, rows):
        i = header.index("influence")
        for r in rows:
            r[i] = repr(float(r[i]) * 1.01)
        return rows

    err = tampered("unknown_id", unknown_id)
    c.check("999" in err, "the unknown id is not named: %s" % err)
    tampered("missing_row", missing_row)
    tampered("nan_influence", nan_influence)
    err = tampered("scaled", scaled)
    c.check("standard error" in err, "scaled influences: the message should name the standard error: %s" % err)

    # Bounded reading (issue 33 item 3): a quantity has a row per document of the head, so rows
    # beyond the head's n_documents are refused as they are read (the line named is the first row
    # beyond them, not the file's end: memory does not grow with the file), and so is a bucket
    # the head does not have in head_profile.csv.
    def oversized(header, rows):
        first = [r for r in rows if r[header.index("quantity")] == "ap_overall" and r[1] == rows[0][1]]
        extra = []
        for k in range(50000):
            r = list(first[0])
            r[header.index("document_id")] = str(100000 + k)
            extra.append(r)
        return rows + extra

    def repeated(header, rows):
        return rows + rows

    def other_bucket(header, rows):
        i = header.index("q_bucket")
        r = next(r for r in rows if r[header.index("quantity")] == "ap_bucket")
        r[i] = "77"
        return rows

    with open(os.path.join(A2, INFLUENCE)) as f:
        n_rows = sum(1 for _ in f) - 1
    for name, change in (("oversized", oversized), ("repeated", repeated)):
        err = tampered(name, change)
        c.check("more rows than the head's 12 documents (n_documents in head_metrics.csv)" in err,
                "%s: rows beyond the head's documents should be refused as read: %s" % (name, err))
        line = err.split(": line ", 1)[1].split(":", 1)[0] if ": line " in err else ""
        c.check(line.isdigit() and int(line) <= n_rows + 2,
                "%s: refused at line %s, not as the rows beyond the documents are read (%d rows)" % (name, line, n_rows))
    err = tampered("other_bucket", other_bucket)
    c.check("has no bucket 77 in head_profile.csv" in err, "a bucket the head does not have: %s" % err)

    # Ids near 2^63 (beyond 2^53): kept exact.
    big = {}
    top = 2 ** 63 - 1000
    for name, src in (("A_big", A), ("A2_big", A2)):
        big[name] = plain_copy(src, os.path.join(work, name))
        remap_ids(big[name], lambda d: top + d, lambda e: top + e)
    out_big = os.path.join(work, "paired_big")
    rc, _o, err = compare(ap_compare, out_big, [big["A_big"], big["A2_big"]], "paired")
    c.check(rc == 0, "ids near 2^63 refused: %s" % err)
    if rc == 0:
        for name in FILES:
            c.check(read(out_big, name).replace("_big", "") == read(out_paired, name),
                    "ids near 2^63: %s differs from the small ids'" % name)
    c.close("test_compare_design")


if __name__ == "__main__":
    main()
