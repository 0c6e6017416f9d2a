#!/usr/bin/env python3
"""Convert a qk-sniffer dump (Parquet) into the NPY layout that ap_analyze reads.

A qk-sniffer dump has one folder per (layer, head, kind), named l{LL}h{HH}q or
l{LL}h{HH}k, each holding data.parquet with the columns (docs/method.md §1)

    bucket          int32             position bucket id
    example_id      int32             source sequence id
    position        int32             token position
    vector          list<float32>     the query or key vector, same length in a file
    sliding_window  int32, nullable   optional; null means no window
    token_str       string, nullable  optional; not converted

For each such folder SRC/lLLhHHx/ this writes DST/lLLhHHx/ with

    vector.npy          float32 [n, d] (float64 when stored as float64)
    position.npy        int32 or int64 [n], as stored
    bucket.npy          int32 or int64 [n]
    example_id.npy      int32 or int64 [n]
    sliding_window.npy  int32 or int64 [n], nulls written as 0; only when some row has a
                        window (absent or all null: no file, which means no window)

Reading and checking a folder is attention_plasticity.sniffed.read_sniffed_folder (the
installed package: scripts/setup_python.sh installs it into .venv).
Each file is written whole: first to a temporary name in the same folder, then renamed.
A folder with a problem (missing column, wrong type, vectors of different lengths, nulls
in a required column, not a Parquet file, ...) is reported on stderr with its file and
column, nothing is written for it, and the other folders go on.

Documents (docs/method.md §1.1, §8.3): qk-sniffer's Parquet records no document, only the
example_id. When SRC holds an examples.csv (a dump of examples/capture_qk.py: each example's
document, chunk and fingerprints) it is copied to DST as is; otherwise DST gets none (an earlier
run's is removed) and a note says so: each example is then taken as its own document.

Exit status: 0 all folders converted; 1 some folders failed; 2 bad arguments or no
head folder found; 3 pyarrow (needed to read Parquet) or the package is not installed.
"""

import argparse
import os
import sys

import numpy as np

EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_PYARROW = 3

PARQUET_NAME = "data.parquet"
EXAMPLES_NAME = "examples.csv"  # the examples' documents (docs/method.md §1.1), copied when SRC has one
NPY_FILES = ("vector", "position", "bucket", "example_id", "sliding_window")

PYARROW_MISSING_MESSAGE = (
    "pyarrow is not installed, and it is needed to read the Parquet files of a "
    "qk-sniffer dump.\n"
    "Run this with the project's virtual environment (scripts/setup_python.sh creates "
    ".venv; then .venv/bin/python examples/convert_sniffed_qk.py ...), or install "
    "pyarrow into your Python ('python3 -m pip install pyarrow').")
PACKAGE_MISSING_MESSAGE = (
    "the attention_plasticity package is not installed, and its reader of qk-sniffer's Parquet "
    "files is needed.\n"
    "Run this with the project's virtual environment (scripts/setup_python.sh creates .venv "
    "with the package), or install it into your Python ('python3 -m pip install .').")


def load_sniffed_module():
    """The module attention_plasticity.sniffed of the installed package (numpy + pyarrow).
    Raises ImportError when pyarrow, numpy or the package is missing."""
    import importlib
    return importlib.import_module("attention_plasticity.sniffed")


def write_npy_head(folder, arrays):
    """Write one head's arrays (as read_sniffed_folder returns them) as NPY files in ``folder``.

    ``arrays``: 'vector' [n, d], 'position', 'bucket', 'example_id' [n], and
    'sliding_window' [n] or None (no file; an earlier run's sliding_window.npy is removed).
    Every file is first written under a temporary name in ``folder`` and then renamed over
    the final name, so a reader never sees a partial file. Returns the paths written.
    """
    stems = [s for s in NPY_FILES if arrays.get(s) is not None]
    n = arrays["vector"].shape[0]
    for stem in stems:
        want = 2 if stem == "vector" else 1
        if arrays[stem].ndim != want or arrays[stem].shape[0] != n:
            raise ValueError(f"{folder}: '{stem}' has shape {arrays[stem].shape}, expected "
                             f"{want} dimension(s) and {n} rows")
    os.makedirs(folder, exist_ok=True)
    temps = {}
    try:
        for stem in stems:
            arr = arrays[stem]
            final = os.path.join(folder, stem + ".npy")
            tmp = os.path.join(folder, f".{stem}.npy.tmp{os.getpid()}")
            arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
            with open(tmp, "wb") as f:
                np.save(f, arr, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            temps[tmp] = final
        for tmp, final in temps.items():
            os.replace(tmp, final)
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.remove(tmp)
    stale = os.path.join(folder, "sliding_window.npy")
    if "sliding_window" not in stems and os.path.exists(stale):
        os.remove(stale)
    return [os.path.join(folder, stem + ".npy") for stem in stems]


def carry_examples(src, dst):
    """DST/examples.csv: SRC's copied whole (a temporary name renamed) when it has one, else none
    (an earlier run's removed). Returns whether SRC had one."""
    source, final = os.path.join(src, EXAMPLES_NAME), os.path.join(dst, EXAMPLES_NAME)
    if not os.path.isfile(source):
        if os.path.isfile(final):
            os.remove(final)
        return False
    with open(source, "rb") as f:
        data = f.read()
    os.makedirs(dst, exist_ok=True)
    tmp = os.path.join(dst, f".{EXAMPLES_NAME}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, final)
    return True


def layout_module():
    """attention_plasticity.layout, the package's one home of the head-folder names (it imports
    nothing but re). Raises ImportError when the package is missing."""
    import importlib
    return importlib.import_module("attention_plasticity.layout")


def head_folder_key(name):
    """(layer, head, kind) of a head folder's name in the dump's format, None for any other name
    (a name like l0h0q or l000h00q is not in the format: ap_analyze would refuse it)."""
    try:
        return layout_module().parse_head_folder(name)
    except ValueError:
        return None


def find_head_folders(src):
    """Sorted names of the lLLhHH{q|k} folders of ``src`` that hold data.parquet."""
    found = []
    for name in os.listdir(src):
        key = head_folder_key(name)
        if key is not None and os.path.isfile(os.path.join(src, name, PARQUET_NAME)):
            found.append((key, name))
    return [name for _key, name in sorted(found)]


def find_dump_roots(src, max_depth=3, limit=5):
    """Directories below ``src`` (not ``src`` itself) that hold head folders, e.g. the
    data/{model}/ folders of a qk-sniffer dataset; at most ``limit``."""
    roots = []
    base_depth = os.path.abspath(src).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, _files in os.walk(src):
        dirnames.sort()
        depth = os.path.abspath(dirpath).rstrip(os.sep).count(os.sep) - base_depth
        if depth >= max_depth:
            dirnames[:] = []
        if depth > 0 and find_head_folders(dirpath):
            roots.append(dirpath)
            dirnames[:] = []
            if len(roots) >= limit:
                break
        else:
            dirnames[:] = [d for d in dirnames if not layout_module().HEAD_FOLDER_RE.match(d)]
    return roots


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="the qk-sniffer dump: a directory with lLLhHH{q|k}/"
                                    "data.parquet folders")
    parser.add_argument("dst", help="output data root (created if needed); ap_analyze "
                                    "reads it as its data root")
    parser.add_argument("--only", metavar="FOLDER", action="append",
                        help="convert only this folder (e.g. l00h03q); repeatable")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not print a line per converted folder")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    prog = "convert_sniffed_qk.py"
    if not os.path.isdir(args.src):
        print(f"{prog}: error: {args.src}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        folders = find_head_folders(args.src)
        sniffed = load_sniffed_module()
    except ImportError as exc:
        package_missing = (exc.name or "").split(".")[0] == "attention_plasticity"
        message = PACKAGE_MISSING_MESSAGE if package_missing else PYARROW_MISSING_MESSAGE
        print(f"{prog}: error: {message}\n({exc})", file=sys.stderr)
        return EXIT_NO_PYARROW
    if args.only:
        unknown = sorted(set(args.only) - set(folders))
        if unknown:
            print(f"{prog}: error: {args.src}: no folder {', '.join(unknown)} with "
                  f"{PARQUET_NAME}", file=sys.stderr)
            return EXIT_USAGE
        folders = [f for f in folders if f in set(args.only)]
    if not folders:
        roots = find_dump_roots(args.src)
        hint = ("; pass one of these folders instead: " + ", ".join(roots)) if roots else ""
        print(f"{prog}: error: {args.src}: no l{{LL}}h{{HH}}q or l{{LL}}h{{HH}}k folder "
              f"with {PARQUET_NAME}{hint}", file=sys.stderr)
        return EXIT_USAGE
    try:
        documents = carry_examples(args.src, args.dst)
    except OSError as exc:
        print(f"{prog}: error: {EXAMPLES_NAME}: {exc}", file=sys.stderr)
        return EXIT_SOME_FAILED
    if not args.quiet:
        print(f"{os.path.join(args.dst, EXAMPLES_NAME)}: copied from {args.src} (the examples' documents)"
              if documents else
              f"{args.src}: no {EXAMPLES_NAME} (qk-sniffer's Parquet records no documents): each example is "
              f"taken as its own document (docs/method.md §8.3)")
    failed = 0
    for name in folders:
        src_folder = os.path.join(args.src, name)
        dst_folder = os.path.join(args.dst, name)
        try:
            arrays = sniffed.read_sniffed_folder(src_folder)
            write_npy_head(dst_folder, arrays)
        except (ValueError, OSError) as exc:
            failed += 1
            print(f"{prog}: error: {exc}", file=sys.stderr)
            continue
        if not args.quiet:
            n, d = arrays["vector"].shape
            print(f"{dst_folder}: {n} rows, d = {d}")
    if failed:
        print(f"{prog}: {failed} of {len(folders)} folders not converted",
              file=sys.stderr)
        return EXIT_SOME_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
