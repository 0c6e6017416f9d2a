#!/usr/bin/python3
"""A full disk under the output folder: the run fails with a message naming the folder and
the reason, the earlier result set stays whole, nothing is left behind, and a rerun with
space writes the whole new set.

usage: test_disk_full.py AP_ANALYZE SMALL_DUMP WORK_DIR

The output folder is a small tmpfs mounted in a private mount namespace (unshare; as root,
or as a user through a user namespace), so that no mount outlives the test. Exits 77
(skipped, with the reason) only when no tmpfs can be mounted.
  - no space for the new set beside the earlier one: exit 1, "No space left on device",
    the earlier set unchanged, no temporary folder left;
  - no space at all and no earlier set: refused before any work (exit 2, "not enough free
    space"), nothing written;
  - no inode left: the output folder is refused before any work (exit 2);
  - the same folder with room for both sets again: exit 0, the whole new set;
  - a valid sparse vector.npy (a page never written: a hole) in a dump on a full tmpfs: the
    reader reads it instead of mapping it (a mapped hole page is allocated when touched, which
    on a full tmpfs is SIGBUS), exit 0 and the same results as the same bytes on a disk.
"""

import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

PAGE = 4096


def mount_tmpfs(path, options):
    subprocess.run(["umount", path], stderr=subprocess.DEVNULL)
    os.makedirs(path, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path], stderr=subprocess.PIPE,
                          universal_newlines=True)
    return proc.returncode == 0, proc.stderr.strip()


def fill(fs):
    """Fills the file system at fs with one file, page by page, until no space is left; returns its path."""
    filler = os.path.join(fs, "filler")
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\1" * PAGE)
        except OSError:
            pass
    return filler


def set_pages(files):
    return sum(max(1, math.ceil(len(data) / PAGE)) for data in files.values())


def inner(analyze, dump, work):
    ck = u.Checker()
    ref_old = os.path.join(work, "ref_old")
    ref_new = os.path.join(work, "ref_new")
    u.run([analyze, "--data-root", dump, "--output-dir", ref_old, "--seed", 1], expect=0, quiet=True)
    u.run([analyze, "--data-root", dump, "--output-dir", ref_new, "--seed", 2], expect=0, quiet=True)
    old, new = u.read_set(ref_old), u.read_set(ref_new)
    fs = os.path.join(work, "fs")
    pages = set_pages(old) + set_pages(new) - 2
    ok, why = mount_tmpfs(fs, "size=%dk" % (pages * PAGE // 1024))
    if not ok:
        print("SKIP: cannot mount a tmpfs at %s: %s" % (fs, why))
        return u.SKIP
    try:
        out = os.path.join(fs, "results")
        u.run([analyze, "--data-root", dump, "--output-dir", out, "--seed", 1], expect=0, quiet=True)
        ck.check(u.read_set(out) == old, "the earlier set was not written whole")

        # 1. Room for the earlier set, not for both.
        code, _, err = u.run([analyze, "--data-root", dump, "--output-dir", out, "--seed", 2], quiet=True)
        ck.check(code == 1, "no room for the new set: exit %d, expected 1:\n%s" % (code, err))
        ck.check("No space left on device" in err and "the earlier results in %s are unchanged" % out in err,
                 "no room: the message should say so and that the earlier set is kept:\n%s" % err)
        ck.check(u.read_set(out) == old, "no room: the earlier set changed")
        ck.check(not u.leftovers(out), "no room: leftovers %s" % u.leftovers(out))

        # 2. A full disk and no earlier set.
        filler = fill(fs)
        fresh = os.path.join(fs, "fresh")
        code, _, err = u.run([analyze, "--data-root", dump, "--output-dir", fresh, "--seed", 2], quiet=True)
        print("full disk, no earlier set: exit %d: %s" % (code, err.strip().splitlines()[-1]))
        # Refused before any work (free space against the smallest set the run can write).
        ck.check(code == 2 and "progress:" not in err, "full disk: exit %d, expected 2 before any work:\n%s"
                 % (code, err))
        ck.check(("No space left on device" in err) and fresh in err and "not enough free space" in err
                 and "nothing was written to %s" % fresh in err, "full disk: message:\n%s" % err)
        got = u.read_set(fresh) if os.path.isdir(fresh) else {n: None for n in u.CSVS}
        ck.check(all(v is None for v in got.values()), "full disk: files appeared")
        ck.check(u.read_set(out) == old, "full disk: the earlier set changed")
        os.remove(filler)

        # 3. Space again (the new set is written beside the earlier one, then swapped).
        subprocess.run(["mount", "-o", "remount,size=%dk" % (4 * pages * PAGE // 1024), fs], check=True)
        code, _, err = u.run([analyze, "--data-root", dump, "--output-dir", out, "--seed", 2], quiet=True)
        ck.check(code == 0 and u.read_set(out) == new, "with space again: exit %d, new set %s:\n%s"
                 % (code, u.read_set(out) == new, err))
        ck.check(not u.leftovers(out), "with space again: leftovers %s" % u.leftovers(out))
    finally:
        subprocess.run(["umount", fs])

    # 4. No inode left: refused before any work.
    ok, why = mount_tmpfs(fs, "size=1m,nr_inodes=3")
    if not ok:
        ck.check(False, "cannot mount a tmpfs with an inode limit: %s" % why)
    else:
        try:
            os.makedirs(os.path.join(fs, "results"))   # the root and this folder use the inodes
            code, _, err = u.run([analyze, "--data-root", dump, "--output-dir", os.path.join(fs, "results")], quiet=True)
            print("no inode left: exit %d: %s" % (code, err.strip().splitlines()[-1]))
            ck.check(code == 2 and "cannot write into it" in err and "progress:" not in err,
                     "no inode: exit %d (expected 2, before any work):\n%s" % (code, err))
        finally:
            subprocess.run(["umount", fs])
    sparse_dump_on_full_tmpfs(ck, analyze, dump, work, fs)
    ck.close("test_disk_full")


def write_sparse_vectors(path, dense_copy):
    """Rewrites the NPY file `path` with its payload page [PAGE, 2 PAGE) left unwritten (a hole,
    which reads as zeros), and `dense_copy` with the same bytes all written. The file must be
    longer than 2 pages."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    assert len(data) > 2 * PAGE, "%s: %d bytes, too short for a hole page" % (path, len(data))
    data[PAGE:2 * PAGE] = bytes(PAGE)
    with open(dense_copy, "wb") as f:
        f.write(data)
    os.remove(path)
    with open(path, "wb") as f:
        f.write(data[:PAGE])
        f.seek(2 * PAGE)
        f.write(data[2 * PAGE:])


def sparse_dump_on_full_tmpfs(ck, analyze, dump, work, fs):
    """5. A valid sparse vector.npy on a full tmpfs (issue 25, item 8)."""
    ok, why = mount_tmpfs(fs, "size=1m")
    if not ok:
        ck.check(False, "cannot mount a tmpfs for the sparse dump: %s" % why)
        return
    try:
        sparse_dump = os.path.join(fs, "dump")
        dense_dump = os.path.join(work, "dense_dump")
        u.copy_tree(dump, sparse_dump)
        u.copy_tree(dump, dense_dump)
        vectors = os.path.join(sparse_dump, "l00h00q", "vector.npy")
        write_sparse_vectors(vectors, os.path.join(dense_dump, "l00h00q", "vector.npy"))
        ck.check(os.stat(vectors).st_blocks * 512 < os.path.getsize(vectors), "the sparse file has no hole")
        fill(fs)
        ref, out = os.path.join(work, "dense_results"), os.path.join(work, "sparse_results")
        u.run([analyze, "--data-root", dense_dump, "--output-dir", ref, "--seed", 1], expect=0, quiet=True)
        code, _, err = u.run([analyze, "--data-root", sparse_dump, "--output-dir", out, "--seed", 1], quiet=True)
        print("sparse vector.npy on a full tmpfs: exit %d" % code)
        ck.check(code == 0, "sparse vector.npy on a full tmpfs: exit %d (-7: SIGBUS), expected 0:\n%s" % (code, err))
        ck.check(code != 0 or u.read_set(out) == u.read_set(ref),
                 "sparse vector.npy on a full tmpfs: the results differ from the same bytes on a disk")
    finally:
        subprocess.run(["umount", fs])


def main():
    u.require_numpy()
    if sys.argv[1] == "--inner":
        sys.exit(inner(*sys.argv[2:5]))
    analyze, dump, work = sys.argv[1:4]
    u.fresh_dir(work)
    unshare = shutil.which("unshare")
    if unshare is None:
        print("SKIP: unshare (util-linux) is not installed: no private mount namespace for the tmpfs")
        sys.exit(u.SKIP)
    if os.geteuid() == 0:
        prefix = [unshare, "--mount", "--propagation", "private"]
    else:
        prefix = [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]
    probe = subprocess.run(prefix + ["true"], stderr=subprocess.PIPE, universal_newlines=True)
    if probe.returncode != 0:
        print("SKIP: cannot create a mount namespace (%s): %s" % (" ".join(prefix), probe.stderr.strip()))
        sys.exit(u.SKIP)
    proc = subprocess.run(prefix + [sys.executable, os.path.abspath(__file__), "--inner", analyze, dump, work])
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
