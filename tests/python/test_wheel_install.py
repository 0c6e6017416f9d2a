"""The self-contained wheel (scripts/build_wheel.sh) as a user gets it: installed by pip into a
fresh venv (no system site-packages, no index, nothing compiled), imported away from the source
tree, its module's shared libraries (OpenBLAS and its Fortran runtime, yaml-cpp) resolved from
inside the wheel, its kernel report (docs/method.md §7.7), its version, and the byte-identity
tests of the results against ap_analyze's CSVs (test_bindings_dump.py) run on it.

Run by ctest as python_wheel_install, after python_package_install has built the wheel into
$AP_WHEEL_DIR. The fresh venv installs the wheel's dependencies and pytest from
$AP_WHEELHOUSE (default: the wheelhouse folder of the venv running this test, where
scripts/setup_python.sh keeps them) with --no-index: the test downloads nothing. The programs
come from $AP_ANALYZE / $AP_SYNTH / $AP_MERGE as for the other tests (bindings_util.py).

The wheel is the cluster wheel (scripts/build_wheel.sh's default target): manylinux_2_28 or older,
for RHEL/Rocky 8 and 9 (glibc 2.28, 2.34). Checked by auditwheel, by the symbol versions and the
needed libraries of every ELF file in it, and by a run in a mount namespace where Debian's
OpenBLAS, LAPACK, yaml-cpp, Fortran runtime (and, for loading the module alone, its C++ runtime)
are hidden, whose CSVs are ap_analyze's bytes (docs/method.md §7.7).
"""

import glob
import json
import os
import re
import subprocess
import sys
import venv
import zipfile

import pytest

import bindings_util as bu

WHEEL_DIR = os.environ.get("AP_WHEEL_DIR") or os.path.join(bu.ROOT, "build", "wheel")
# scripts/setup_python.sh keeps it in the venv's folder (this interpreter's sys.prefix).
WHEELHOUSE = os.environ.get("AP_WHEELHOUSE") or os.path.join(sys.prefix, "wheelhouse")
# The libraries the module needs beyond the manylinux policy (auditwheel copies them in): OpenBLAS
# only. yaml-cpp and libstdc++ are linked into the module; OpenBLAS carries no libgfortran.
BUNDLED = ("openblas",)
NOT_BUNDLED = ("gfortran", "quadmath", "yaml-cpp", "libstdc++", "libgcc_s")
# The oldest glibc the wheel must load on: RHEL/Rocky 8's; and the newest libgcc_s symbol version
# the manylinux_2_28 policy allows (GCC 8's, RHEL 8's system compiler, has it).
MAX_GLIBC = (2, 28)
MAX_GCC = (7, 0, 0)
# The manylinux policy's system libraries the module and its copies may need: glibc's own and
# libgcc_s (unwinding).
POLICY_LIBS = ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2",
               "libgcc_s.so.1")
# Debian's libraries that the cluster wheel must not use: hidden in the mount namespace.
DEBIAN_HIDDEN = ("libopenblas", "libblas.so", "liblapack.so", "libyaml-cpp", "libgfortran", "libquadmath")
DEBIAN_CXX_RUNTIME = ("libstdc++.so",)


def the_wheel():
    # This interpreter's wheel (cp311-cp311): the folder may keep the abi3 one too (test_wheel_abi3.py).
    tag = "cp%d%d" % sys.version_info[:2]
    wheels = glob.glob(os.path.join(WHEEL_DIR, f"attention_plasticity-*-{tag}-{tag}-*.whl"))
    assert len(wheels) == 1, f"expected one {tag} wheel of scripts/build_wheel.sh in {WHEEL_DIR}, found {wheels}"
    return wheels[0]


def clean_env(**extra):
    """The environment of a user's shell: nothing pointing at the source tree or the build."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh venv with the wheel installed: (python, its site-packages, a folder outside the source tree)."""
    assert os.path.isdir(WHEELHOUSE), (f"no wheelhouse at {WHEELHOUSE}: run scripts/setup_python.sh (it keeps the "
                                       "wheels the fresh venv installs offline)")
    root = tmp_path_factory.mktemp("wheel")
    env_dir = root / "venv"
    # Without its own pip (ensurepip takes longer than the install): this venv's pip installs into it.
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    # --only-binary: no sdist is ever built (no compiler step); --no-index and no pip configuration:
    # nothing downloaded, nothing taken from elsewhere than the wheelhouse.
    # --no-compile: no .pyc of numpy, pandas and pyarrow made ahead (Python makes them as it imports).
    bu.check_run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index",
                  "--no-compile", "--only-binary=:all:", "--find-links", WHEELHOUSE, the_wheel(), "pytest"],
                 env=clean_env(PIP_CONFIG_FILE=os.devnull), cwd=root)
    site = bu.check_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        env=clean_env(), cwd=root).stdout.strip()
    site = os.path.realpath(site)
    work = root / "run"
    work.mkdir()
    return python, site, str(work)


def in_fresh(fresh, code, **env):
    python, _, work = fresh
    return bu.check_run([python, "-c", code], env=clean_env(**env), cwd=work)


def test_wheel_is_manylinux_per_auditwheel():
    """auditwheel show (the project's venv's) confirms the wheel's manylinux tag, which its name carries."""
    wheel = the_wheel()
    show = bu.check_run([sys.executable, "-m", "auditwheel", "show", wheel],
                        env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]))
    text = " ".join(show.stdout.split())
    tag = re.search(r'is consistent with the following platform tag: "(manylinux_\d+_\d+_x86_64)"', text)
    assert tag, show.stdout
    assert tag.group(1) in os.path.basename(wheel)
    glibc = tuple(int(part) for part in re.match(r"manylinux_(\d+)_(\d+)", tag.group(1)).groups())
    assert glibc <= MAX_GLIBC, f"{tag.group(1)}: the wheel does not install on glibc {MAX_GLIBC} (RHEL/Rocky 8)"
    # Every library the module needs beyond the policy is inside the wheel, and only those.
    with zipfile.ZipFile(wheel) as z:
        bundled = [name for name in z.namelist() if name.startswith("attention_plasticity.libs/")]
    for part in BUNDLED:
        assert any(part in name for name in bundled), (part, bundled)
    for part in NOT_BUNDLED:
        assert not any(part in name for name in bundled), (part, bundled)


def elf_files(site):
    """The module and the libraries of the installed wheel."""
    files = glob.glob(os.path.join(site, "attention_plasticity", "_core*.so"))
    files += glob.glob(os.path.join(site, "attention_plasticity.libs", "*"))
    assert len(files) >= 1 + len(BUNDLED), files
    return sorted(files)


def test_symbol_versions_of_every_file(fresh):
    """objdump of each ELF file of the wheel: no glibc symbol newer than 2.28, no libgcc_s symbol
    newer than the policy's, no libstdc++ of the system (no GLIBCXX_/CXXABI_ version), every needed
    library the policy's or the wheel's own, and no symbol left to chance: each undefined one is
    versioned (glibc, libgcc_s), Python's, or the wheel's OpenBLAS's. The module exports Python's
    entry point and nanobind's, not yaml-cpp or libstdc++ (they cannot meet another copy in the
    process, such as torch's libstdc++)."""
    _, site, _ = fresh
    files = elf_files(site)
    own = {os.path.basename(path) for path in files}
    for path in files:
        dynamic = bu.check_run(["objdump", "-T", path]).stdout
        glibc = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)", dynamic)]
        assert glibc and max(glibc) <= MAX_GLIBC, (path, max(glibc))
        assert not re.search(r"\b(GLIBCXX|CXXABI)_\d", dynamic), (path, re.findall(r"\b(?:GLIBCXX|CXXABI)_[\d.]+", dynamic))
        gcc = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"\bGCC_(\d+(?:\.\d+)+)", dynamic)]
        assert not gcc or max(gcc) <= MAX_GCC, (path, max(gcc))
        needed = re.findall(r"^\s*NEEDED\s+(\S+)", bu.check_run(["objdump", "-p", path]).stdout, re.M)
        assert needed and all(name in POLICY_LIBS or name in own for name in needed), (path, needed)
    (core,) = [path for path in files if os.path.basename(path).startswith("_core")]
    exported = re.findall(r"^\S+\s+[TDBVWRui]\s+(\S+)$", bu.check_run(["nm", "-D", "--defined-only", core]).stdout, re.M)
    assert "PyInit__core" in exported
    assert not [name for name in exported if "YAML" in name or name.startswith(("_ZNSt", "_ZSt", "_ZNKSt"))], exported
    blas = [path for path in files if "openblas" in os.path.basename(path)]
    provided = set()
    for path in blas:
        provided |= set(re.findall(r"^\S+\s+[TWi]\s+(\S+)$", bu.check_run(["nm", "-D", "--defined-only", path]).stdout, re.M))
    undefined = re.findall(r"^\S+\s+(w?)\s+\S+\s+\*UND\*\s+\S+\s+(\S+)\s+(\S+)$",
                           bu.check_run(["objdump", "-T", core]).stdout, re.M)
    loose = [name for weak, version, name in undefined
             if version in ("Base", "") and not name.startswith(("Py", "_Py")) and name not in provided]
    assert not loose, f"undefined symbols the module takes from no versioned library: {loose}"


def test_imports_from_the_wheel_not_the_source_tree(fresh):
    _, site, _ = fresh
    out = in_fresh(fresh, "import attention_plasticity as ap, attention_plasticity._core as c; "
                          "print(ap.__file__); print(c.__file__)").stdout.split()
    out = [os.path.realpath(path) for path in out]
    assert all(path.startswith(site + os.sep) for path in out), out
    assert not any(path.startswith(bu.ROOT + os.sep) for path in out), out


def test_module_libraries_resolve_inside_the_wheel(fresh):
    """ldd of the installed module: OpenBLAS comes from the wheel's attention_plasticity.libs
    (relative RPATH), everything else is glibc's (the policy's libraries), nothing is missing;
    and the process that imports the package maps the wheel's OpenBLAS, not the system's."""
    _, site, _ = fresh
    libs = os.path.join(site, "attention_plasticity.libs")
    (core,) = glob.glob(os.path.join(site, "attention_plasticity", "_core*.so"))
    ldd = bu.check_run(["ldd", core], env=clean_env()).stdout
    assert "not found" not in ldd, ldd
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
    for part in BUNDLED:
        names = [name for name in resolved if part in name]
        assert names, f"the module needs no {part} library?\n{ldd}"
        for name in names:
            assert os.path.dirname(os.path.realpath(resolved[name])) == libs, f"{name} resolved outside the wheel:\n{ldd}"
    outside = [name for name, path in resolved.items()
               if os.path.dirname(os.path.realpath(path)) != libs and name not in POLICY_LIBS]
    assert not outside, f"the module needs system libraries beyond glibc's: {outside}\n{ldd}"
    # The dynamic loader's own account (LD_DEBUG=files) of a process that imports the package and
    # runs a GEMM: every library loaded for the module or for a library of the wheel is the
    # wheel's or glibc's (numpy, pandas and pyarrow bring their own and the system's libstdc++).
    proc = bu.check_run([fresh[0], "-c", "import numpy as np, attention_plasticity as ap; "
                         "print(ap.blas_report())"], env=clean_env(LD_DEBUG="files"), cwd=fresh[2])
    loads = re.findall(r"file=(\S+) \[\d+\];\s+needed by (\S+)", proc.stderr)
    ours = [(name, by) for name, by in loads
            if os.path.realpath(by).startswith(site + os.sep + "attention_plasticity")]
    assert any("openblas" in name for name, _ in ours), proc.stderr[-3000:]
    assert all(name in POLICY_LIBS or "openblas" in name for name, _ in ours), ours
    maps = in_fresh(fresh, "import attention_plasticity\nprint(open('/proc/self/maps').read())").stdout
    mapped = {line.split()[-1] for line in maps.splitlines() if "openblas" in line and "scipy_openblas" not in line}
    assert mapped and all(os.path.dirname(os.path.realpath(path)) == libs for path in mapped), mapped


def hidden_debian_files(with_cxx_runtime):
    """Debian's files of OpenBLAS, LAPACK, yaml-cpp and the Fortran runtime (and its C++ runtime):
    what the mount namespace hides."""
    parts = DEBIAN_HIDDEN + (DEBIAN_CXX_RUNTIME if with_cxx_runtime else ())
    found = []
    for folder in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        # The folder and its subfolders one deep (Debian's openblas-pthread/, blas/, lapack/).
        for path in glob.glob(os.path.join(folder, "lib*.so*")) + glob.glob(os.path.join(folder, "*", "lib*.so*")):
            if any(part in os.path.basename(path) for part in parts) and os.path.isfile(path) \
                    and not os.path.islink(path):
                found.append(os.path.realpath(path))
    return sorted(set(found))


def in_namespace(fresh, code, hidden, **env):
    """Runs `python -c code` of the fresh venv in a mount namespace where each file of `hidden` is
    /dev/null: as on a machine without those packages. As root `unshare -m`, else `unshare -rm`
    (a user namespace). A machine that allows neither fails this test: it is not skipped."""
    python, _, work = fresh
    mounts = " && ".join(f"mount --bind /dev/null '{path}'" for path in hidden)
    script = f"{mounts} && exec \"$0\" -c \"$1\""
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    proc = bu.run(unshare + ["sh", "-c", script, python, code], env=clean_env(**env), cwd=work)
    assert proc.returncode == 0, (f"{' '.join(unshare)} with {len(hidden)} Debian files hidden failed "
                                  f"({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def test_runs_with_the_debian_libraries_hidden(fresh, tmp_path):
    """On a machine without Debian's OpenBLAS, LAPACK, yaml-cpp and Fortran runtime (a mount
    namespace hides every file of them): the module loads, and `python -m attention_plasticity`
    writes ap_analyze's CSV bytes (ap_analyze runs outside, with Debian's libraries); with the
    system's libstdc++ hidden as well, the module and its OpenBLAS still load (numpy needs it, the
    module carries its own)."""
    _, site, _ = fresh
    hidden = hidden_debian_files(with_cxx_runtime=False)
    assert [path for path in hidden if "openblas" in path] and [path for path in hidden if "yaml-cpp" in path], hidden
    npy, want = tmp_path / "npy", tmp_path / "ap_analyze"
    bu.check_run([bu.ap_synth(), "--out", npy, "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2,
                  "--dim", 16, "--tokens", 1024, "--examples", 8, "--buckets", 8, "--seed", 5])
    layout = ["--num-q-heads", "4", "--num-k-heads", "2", "--threads", "2"]
    bu.check_run([bu.ap_analyze(), "--data-root", npy, "--output-dir", want] + layout)
    got = tmp_path / "wheel"
    code = ("import sys, runpy; "
            f"sys.argv = ['attention_plasticity', '--data-root', {str(npy)!r}, '--output-dir', {str(got)!r}] + {layout!r}; "
            "runpy.run_module('attention_plasticity', run_name='__main__')")
    proc = in_namespace(fresh, code, hidden)
    assert bu.result_files(got) == bu.result_files(want), proc.stderr[-3000:]
    assert "kernels " in proc.stderr, proc.stderr[-3000:]
    # The maps of that process: the wheel's OpenBLAS, no file of Debian's (hidden files are /dev/null).
    maps = in_namespace(fresh, "import attention_plasticity\nprint(open('/proc/self/maps').read())", hidden).stdout
    mapped = {line.split()[5] for line in maps.splitlines() if len(line.split()) >= 6 and line.split()[5].startswith("/")}
    assert not [path for path in mapped if any(part in path for part in DEBIAN_HIDDEN) and not path.startswith(site)], mapped
    (core,) = glob.glob(os.path.join(site, "attention_plasticity", "_core*.so"))
    everything = hidden_debian_files(with_cxx_runtime=True)
    assert [path for path in everything if "libstdc++" in path], everything
    loaded = in_namespace(fresh, f"import ctypes; ctypes.CDLL({core!r}); print('loaded')", everything).stdout
    assert loaded.strip() == "loaded"


def test_blas_report_names_the_kernels(fresh):
    """The wheel keeps the kernel policy: the report names Debian's OpenBLAS and its kernels, on
    one thread; on an AVX2 + FMA CPU the Haswell ones (docs/method.md §7.7)."""
    report = in_fresh(fresh, "import attention_plasticity as ap; print(ap.blas_report())").stdout
    assert re.search(r"BLAS: OpenBLAS \S+ .*DYNAMIC_ARCH.*; kernels \w+ \(", report), report
    assert "1 OpenBLAS thread" in report, report
    with open("/proc/cpuinfo") as f:
        cpu = f.read()
    if " avx2" in cpu and " fma" in cpu and "OPENBLAS_CORETYPE" not in os.environ:
        assert "kernels Haswell (" in report, report


def test_version_of_the_wheel(fresh):
    """__version__, the installed distribution's version and ap_analyze --version agree."""
    out = in_fresh(fresh, "import importlib.metadata as m, attention_plasticity as ap; "
                          "print(ap.__version__, m.version('attention_plasticity'))").stdout.split()
    assert out[0] == out[1]
    assert bu.check_run([bu.ap_analyze(), "--version"]).stdout == f"ap_analyze {out[0]}\n"


def test_byte_identity_with_ap_analyze_from_the_wheel(fresh):
    """test_bindings_dump.py (analyze_dump and `python -m attention_plasticity` against ap_analyze's
    CSV bytes) in the fresh venv, the package imported from the wheel; a plugin checks that no
    other copy of it was imported."""
    python, site, work = fresh
    plugin = os.path.join(work, "ap_wheel_only.py")
    with open(plugin, "w") as f:
        f.write("import os, attention_plasticity, attention_plasticity._core\n"
                f"SITE = {json.dumps(site + os.sep)}\n"
                "def pytest_sessionfinish(session, exitstatus):\n"
                "    for m in (attention_plasticity, attention_plasticity._core):\n"
                "        assert os.path.realpath(m.__file__).startswith(SITE), m.__file__\n")
    programs = {name: os.path.abspath(path) for name, path in
                (("AP_ANALYZE", bu.ap_analyze()), ("AP_SYNTH", bu.ap_synth()), ("AP_MERGE", bu.ap_merge()))}
    env = clean_env(PYTHONPATH=work, **programs)
    proc = bu.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ap_wheel_only",
                   os.path.join(bu.HERE, "test_bindings_dump.py")], env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in .*", summary), proc.stdout[-3000:]  # nothing failed, nothing skipped
