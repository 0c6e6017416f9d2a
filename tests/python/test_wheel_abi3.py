"""The abi3 wheel (scripts/build_wheel.sh with AP_WHEEL_BUILD_PYTHON a Python 3.12 or newer:
attention_plasticity-VERSION-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl, one wheel
for CPython 3.12 and every later version; README.md, "Python") as a user of 3.12 or 3.13 gets it:
installed by pip into a fresh venv of that interpreter from the wheelhouse only (no index, nothing
compiled), its module the stable-ABI one (_core.abi3.so), and one real analysis (analyze_dump on a
dump of the C++ ap_synth), run where Debian's OpenBLAS, LAPACK, yaml-cpp and Fortran runtime are
hidden, writing ap_analyze's CSV bytes (docs/method.md §7.7). Its module has the cluster wheel's
symbol versions (glibc 2.28 at most, no libstdc++ of the system), as test_wheel_install.py checks
for the cp311 wheel; and pip refuses the cp311 wheel in a 3.12 venv (the abi3 wheel is the one that
installs there).

Run by ctest as python_wheel_abi3, after python_wheel_abi3_build has built the wheel into
$AP_WHEEL_ABI3_DIR. The interpreters are found by scripts/find_python.sh ($AP_PYTHON312 and
$AP_PYTHON313, python3.12/python3.13 on PATH, pyenv's); the wheelhouse ($AP_WHEELHOUSE, default
the wheelhouse folder of the venv running this test) holds their cp312 and cp313 wheels of numpy,
pandas, pyarrow and tqdm (scripts/setup_python.sh, requirements-wheelhouse.txt). A missing
interpreter or wheel fails the test with CI=true, and skips it, with the reason, elsewhere.
"""

import glob
import os
import re
import subprocess
import sys
import venv
import zipfile

import pytest

import bindings_util as bu
from test_wheel_install import MAX_GCC, MAX_GLIBC, POLICY_LIBS, clean_env, hidden_debian_files

WHEEL_DIR = os.path.abspath(os.environ.get("AP_WHEEL_ABI3_DIR") or os.path.join(bu.ROOT, "build", "wheel-abi3"))
CP311_WHEEL_DIR = os.path.abspath(os.environ.get("AP_WHEEL_DIR") or os.path.join(bu.ROOT, "build", "wheel"))
WHEELHOUSE = os.environ.get("AP_WHEELHOUSE") or os.path.join(sys.prefix, "wheelhouse")
VERSIONS = ("3.12", "3.13")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")


def missing(reason):
    """Under CI a missing interpreter or wheel is a failure, elsewhere a skip that says why."""
    if IN_CI:
        pytest.fail(f"{reason} (CI is set: this test does not skip)")
    pytest.skip(reason)


def interpreter(version):
    proc = bu.run([os.path.join(bu.ROOT, "scripts", "find_python.sh"), version])
    if proc.returncode != 0:
        missing(proc.stderr.strip())
    return proc.stdout.strip()


def the_wheel():
    wheels = glob.glob(os.path.join(WHEEL_DIR, "attention_plasticity-*-cp312-abi3-manylinux*.whl"))
    if not wheels:
        missing(f"no cp312-abi3 wheel in {WHEEL_DIR}: ctest's python_wheel_abi3_build makes it with the build venv "
                "of scripts/setup_python.sh (VENV/abi3-build, from a Python 3.12 or 3.13)")
    assert len(wheels) == 1, wheels
    return wheels[0]


def fresh_venv(root, version):
    """A fresh venv of CPython `version`, without pip (this venv's pip installs into it): its python."""
    env_dir = root / f"venv{version}"
    bu.check_run([interpreter(version), "-m", "venv", "--without-pip", env_dir], env=clean_env(), cwd=root)
    python = str(env_dir / "bin" / "python")
    assert bu.check_run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                        env=clean_env()).stdout.strip() == version
    return python


def pip_install(root, python, *wheels):
    """pip install into `python`'s venv from the wheelhouse only: no index, no sdist, no pip configuration."""
    assert os.path.isdir(WHEELHOUSE), f"no wheelhouse at {WHEELHOUSE}: run scripts/setup_python.sh"
    return bu.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index",
                   "--no-compile", "--only-binary=:all:", "--find-links", WHEELHOUSE, *wheels],
                  env=clean_env(PIP_CONFIG_FILE=os.devnull), cwd=root)


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """A dump of ap_synth and ap_analyze's CSVs of it (the C++ programs, with Debian's libraries)."""
    root = tmp_path_factory.mktemp("dump")
    npy, want = root / "npy", root / "ap_analyze"
    bu.check_run([bu.ap_synth(), "--out", npy, "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2,
                  "--dim", 16, "--tokens", 1024, "--examples", 8, "--buckets", 8, "--seed", 5])
    bu.check_run([bu.ap_analyze(), "--data-root", npy, "--output-dir", want,
                  "--num-q-heads", 4, "--num-k-heads", 2, "--threads", 2])
    return npy, bu.result_files(want)


def test_wheel_name_and_auditwheel():
    """The wheel's tags: cp312-abi3 (pyproject.toml's wheel.py-api), manylinux_2_28 or older, per
    auditwheel show; its module is the stable-ABI one (_core.abi3.so), with OpenBLAS beside it."""
    wheel = the_wheel()
    name = os.path.basename(wheel)
    assert re.fullmatch(r"attention_plasticity-[0-9.]+-cp312-abi3-manylinux_2_27_x86_64\.manylinux_2_28_x86_64\.whl",
                        name), name
    show = bu.check_run([sys.executable, "-m", "auditwheel", "show", wheel],
                        env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]))
    text = " ".join(show.stdout.split())
    tag = re.search(r'is consistent with the following platform tag: "manylinux_(\d+)_(\d+)_x86_64"', text)
    assert tag and tuple(int(x) for x in tag.groups()) <= MAX_GLIBC, show.stdout
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "attention_plasticity/_core.abi3.so" in names, names
    assert not [n for n in names if re.search(r"_core\.cpython-", n)], names
    assert [n for n in names if n.startswith("attention_plasticity.libs/libopenblas")], names


def test_symbol_versions_of_the_abi3_module(tmp_path):
    """objdump of the wheel's module: no glibc symbol newer than 2.28, no libgcc_s symbol newer than
    the policy's, no GLIBCXX_/CXXABI_ version (libstdc++ is linked in), no libpython needed (the
    interpreter's symbols are resolved at import, as for every extension module)."""
    with zipfile.ZipFile(the_wheel()) as z:
        core = z.extract("attention_plasticity/_core.abi3.so", tmp_path)
    dynamic = bu.check_run(["objdump", "-T", core]).stdout
    glibc = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)", dynamic)]
    assert glibc and max(glibc) <= MAX_GLIBC, max(glibc)
    assert not re.search(r"\b(GLIBCXX|CXXABI)_\d", dynamic), re.findall(r"\b(?:GLIBCXX|CXXABI)_[\d.]+", dynamic)
    gcc = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"\bGCC_(\d+(?:\.\d+)+)", dynamic)]
    assert not gcc or max(gcc) <= MAX_GCC, max(gcc)
    needed = re.findall(r"^\s*NEEDED\s+(\S+)", bu.check_run(["objdump", "-p", core]).stdout, re.M)
    assert all(name in POLICY_LIBS or name.startswith("libopenblas") for name in needed), needed
    assert "PyInit__core" in bu.check_run(["nm", "-D", "--defined-only", core]).stdout


def test_pip_refuses_the_cp311_wheel_in_312(tmp_path):
    """The tags are what pip goes by: the cp311 wheel (python_package_install's) does not install
    into a 3.12 venv; the abi3 wheel is the one for 3.12 and newer."""
    wheels = glob.glob(os.path.join(CP311_WHEEL_DIR, "attention_plasticity-*-cp311-cp311-*.whl"))
    assert len(wheels) == 1, f"expected the cp311 wheel of python_package_install in {CP311_WHEEL_DIR}: {wheels}"
    python = fresh_venv(tmp_path, "3.12")
    proc = pip_install(tmp_path, python, wheels[0])
    assert proc.returncode != 0 and "is not a supported wheel on this platform" in proc.stderr, proc.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_installs_and_analyzes_as_ap_analyze(dump, tmp_path, version):
    """A fresh venv of `version`: pip installs the abi3 wheel and its dependencies offline; the
    package and its module come from that venv (the stable-ABI module); with Debian's libraries
    hidden (a mount namespace, as test_wheel_install.py), analyze_dump writes ap_analyze's CSV
    bytes, its tables' CSV text is the same bytes, and the kernel report names the wheel's OpenBLAS."""
    wheel = the_wheel()
    python = fresh_venv(tmp_path, version)
    proc = pip_install(tmp_path, python, wheel)
    assert proc.returncode == 0, proc.stderr
    site = os.path.realpath(bu.check_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                         env=clean_env()).stdout.strip())
    npy, want = dump
    got = tmp_path / "wheel"
    code = ("import sys, attention_plasticity as ap, attention_plasticity._core as c\n"
            "print(c.__file__)\n"
            f"r = ap.analyze_dump({str(npy)!r}, {str(got)!r}, num_q_heads=4, num_k_heads=2, threads=2, progress=False)\n"
            "assert r.errors == [], r.errors\n"
            "for name in r.tables:\n"
            f"    assert r.csv_text(name).encode() == open({str(got)!r} + '/' + name + '.csv', 'rb').read(), name\n"
            "print(ap.blas_report())\n")
    hidden = hidden_debian_files(with_cxx_runtime=False)
    assert [path for path in hidden if "openblas" in path], hidden
    mounts = " && ".join(f"mount --bind /dev/null '{path}'" for path in hidden)
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    work = tmp_path / "run"
    work.mkdir()
    proc = bu.run(unshare + ["sh", "-c", f"{mounts} && exec \"$0\" -c \"$1\"", python, code], env=clean_env(), cwd=work)
    assert proc.returncode == 0, proc.stderr[-4000:]
    module = os.path.realpath(proc.stdout.splitlines()[0])
    assert module == os.path.join(site, "attention_plasticity", "_core.abi3.so"), module
    assert bu.result_files(got) == want
    assert re.search(r"BLAS: OpenBLAS \S+ .*DYNAMIC_ARCH.*; kernels \w+ \(", proc.stdout), proc.stdout
