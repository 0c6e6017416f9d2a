#!/usr/bin/env python3
"""Largest relative difference per CSV column between two ap_analyze result folders.

usage: compare_results.py OLD_DIR NEW_DIR

For each result file (docs/method.md §3 and §8.1's distance map; a file absent from both
folders is skipped), rows are matched in order (the files
list heads, buckets and components in a fixed order) and every numeric column is compared:
the report gives, per column, how many values differ at all and the largest relative
difference |new - old| / max(|old|, 1e-300) (NaN equal to NaN). Identifier and count columns
must be equal. Exit status 1 when the files differ in shape or in an integer column.
Standard library only.
"""

import csv
import math
import os
import sys

FILES = ["head_metrics.csv", "head_bucket_plasticity.csv", "head_profile.csv", "head_component_weights.csv",
         "head_distance_plasticity.csv"]


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def is_int(text):
    try:
        int(text)
        return True
    except ValueError:
        return False


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    old_dir, new_dir = sys.argv[1:3]
    status = 0
    for name in FILES:
        if not os.path.exists(os.path.join(old_dir, name)) and not os.path.exists(os.path.join(new_dir, name)):
            continue
        old_header, old_rows = read(os.path.join(old_dir, name))
        new_header, new_rows = read(os.path.join(new_dir, name))
        if old_header != new_header or len(old_rows) != len(new_rows):
            print("%s: different shape (%d vs %d rows)" % (name, len(old_rows), len(new_rows)))
            status = 1
            continue
        print("%s (%d rows)" % (name, len(old_rows)))
        for c, column in enumerate(old_header):
            changed = 0
            worst = 0.0
            integer_mismatch = False
            for a_row, b_row in zip(old_rows, new_rows):
                a, b = a_row[c], b_row[c]
                if a == b:
                    continue
                changed += 1
                if is_int(a) and is_int(b):
                    integer_mismatch = True
                    continue
                x, y = float(a), float(b)
                if math.isnan(x) or math.isnan(y):
                    worst = math.inf
                    continue
                worst = max(worst, abs(y - x) / max(abs(x), 1e-300))
            if integer_mismatch:
                status = 1
            if changed:
                print("  %-28s %5d values differ, max relative difference %.3g%s" % (
                    column, changed, worst, "  (INTEGER MISMATCH)" if integer_mismatch else ""))
        print()
    return status


if __name__ == "__main__":
    sys.exit(main())
