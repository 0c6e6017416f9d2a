"""One version everywhere: the version in CMakeLists.txt's project(attention_plasticity VERSION ...)
(its one home, read here from the file itself) is what attention_plasticity.__version__, the
installed distribution's metadata, every program's --version, each result set's run.json (from
ap_analyze and from the Python package) and the installed CMake package (find_package with a
version) report, and the newest entry of CHANGELOG.md.

Run by ctest as python_version (AP_ANALYZE, AP_COMPARE, AP_MERGE, AP_SYNTH: the programs;
AP_BUILD_DIR: the CMake build tree whose install is found; AP_CMAKE: cmake).
"""

import importlib.metadata
import json
import os
import re
import sys

import pytest

import bindings_util as bu
import attention_plasticity as ap

SMALL_DUMP = os.path.join(bu.ROOT, "tests", "data", "small_dump")


def project_version():
    with open(os.path.join(bu.ROOT, "CMakeLists.txt")) as f:
        match = re.search(r"^project\(attention_plasticity\s+VERSION\s+(\d+\.\d+\.\d+)\b", f.read(), re.M)
    assert match, "CMakeLists.txt has no project(attention_plasticity VERSION x.y.z)"
    return match.group(1)


VERSION = project_version()


def test_changelog_starts_with_the_version():
    with open(os.path.join(bu.ROOT, "CHANGELOG.md")) as f:
        headings = re.findall(r"^## (\S+)", f.read(), re.M)
    assert headings and headings[0] == VERSION, headings[:3]


def test_python_version_and_metadata():
    assert ap.__version__ == VERSION
    assert importlib.metadata.version("attention_plasticity") == VERSION


@pytest.mark.parametrize("name", ["ap_analyze", "ap_compare", "ap_merge", "ap_synth"])
def test_program_version(name):
    program = bu.program(name, "AP_" + name[3:].upper())
    proc = bu.check_run([program, "--version"])
    assert proc.stdout == f"{name} {VERSION}\n" and proc.stderr == ""
    # anywhere on the line, before the other options are checked (as --help)
    proc = bu.check_run([program, "--no-such-option", "--version"])
    assert proc.stdout == f"{name} {VERSION}\n"
    assert "\n  --version " in bu.check_run([program, "--help"]).stdout


def test_python_module_version():
    proc = bu.check_run([sys.executable, "-m", "attention_plasticity", "--version"])
    assert proc.stdout == f"python -m attention_plasticity {VERSION}\n"
    assert "\n  --version " in bu.check_run([sys.executable, "-m", "attention_plasticity", "--help"]).stdout


def read_run_json(out):
    with open(os.path.join(out, ".ap_results", "current", "run.json")) as f:
        return json.load(f)


def test_run_json_of_each_front_end(tmp_path):
    cpp, py = str(tmp_path / "cpp"), str(tmp_path / "py")
    bu.check_run([bu.ap_analyze(), "--data-root", SMALL_DUMP, "--output-dir", cpp, "--threads", "1"])
    ap.analyze_dump(SMALL_DUMP, py, progress=False)
    for out in (cpp, py):
        run = read_run_json(out)
        assert run["attention_plasticity_version"] == VERSION
        assert sorted(run["files"]) == sorted(name for name in os.listdir(out) if not name.startswith("."))


def test_cmake_package_version(tmp_path):
    """The installed package is found by find_package(attention_plasticity X.Y CONFIG) for its own
    major.minor and reports the version; a newer minor version is refused (SameMinorVersion)."""
    cmake = os.environ.get("AP_CMAKE", "cmake")
    build = os.environ.get("AP_BUILD_DIR") or os.path.join(bu.ROOT, "build")
    prefix = tmp_path / "prefix"
    bu.check_run([cmake, "--install", build, "--prefix", prefix])
    major, minor, _ = VERSION.split(".")
    for wanted, found in ((f"{major}.{minor}", True), (f"{major}.{int(minor) + 1}", False)):
        project = tmp_path / f"consumer-{wanted}"
        project.mkdir()
        (project / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.16)\nproject(version_consumer LANGUAGES CXX)\n"
            f"find_package(attention_plasticity {wanted} CONFIG)\n"
            'message(STATUS "found=${attention_plasticity_FOUND} version=${attention_plasticity_VERSION}")\n')
        proc = bu.run([cmake, "-S", project, "-B", project / "build", f"-DCMAKE_PREFIX_PATH={prefix}"])
        assert proc.returncode == 0, proc.stderr
        if found:
            assert f"found=1 version={VERSION}" in proc.stdout, proc.stdout
        else:
            assert "found=0" in proc.stdout, proc.stdout
