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
# The libraries the module needs beyond the manylinux policy (auditwheel copies them in).
BUNDLED = ("openblas", "gfortran", "quadmath", "yaml-cpp")


def the_wheel():
    wheels = glob.glob(os.path.join(WHEEL_DIR, "attention_plasticity-*.whl"))
    assert len(wheels) == 1, f"expected one wheel of scripts/build_wheel.sh in {WHEEL_DIR}, found {wheels}"
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
    # Every library the module needs beyond the policy is inside the wheel.
    with zipfile.ZipFile(wheel) as z:
        bundled = [name for name in z.namelist() if name.startswith("attention_plasticity.libs/")]
    for part in BUNDLED:
        assert any(part in name for name in bundled), (part, bundled)


def test_imports_from_the_wheel_not_the_source_tree(fresh):
    _, site, _ = fresh
    out = in_fresh(fresh, "import attention_plasticity as ap, attention_plasticity._core as c; "
                          "print(ap.__file__); print(c.__file__)").stdout.split()
    out = [os.path.realpath(path) for path in out]
    assert all(path.startswith(site + os.sep) for path in out), out
    assert not any(path.startswith(bu.ROOT + os.sep) for path in out), out


def test_module_libraries_resolve_inside_the_wheel(fresh):
    """ldd of the installed module: OpenBLAS, the Fortran runtime and yaml-cpp come from the wheel's
    attention_plasticity.libs (relative RPATH), nothing is missing; and the process that imports
    the package maps the wheel's OpenBLAS, not the system's."""
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
    maps = in_fresh(fresh, "import attention_plasticity\nprint(open('/proc/self/maps').read())").stdout
    mapped = {line.split()[-1] for line in maps.splitlines() if "openblas" in line and "scipy_openblas" not in line}
    assert mapped and all(os.path.dirname(os.path.realpath(path)) == libs for path in mapped), mapped


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
