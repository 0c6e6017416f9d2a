#!/usr/bin/env bash
# Creates the project's Python virtual environment (default: .venv at the repository root)
# with the pinned packages of requirements.txt, and installs this project's Python package
# into it (pip install . : the compiled module is built by this project's CMake through
# scikit-build-core, in build/python-package, the folder of `scripts/build_wheel.sh`'s system
# target; it needs the Debian packages of scripts/install_deps.sh; ctest's python_package_install
# then replaces it with the cluster wheel, built in build/python-package-cluster), and keeps in VENV_DIR/wheelhouse
# the wheels that the test of the self-contained wheel installs offline. Needs a CPython 3.11 with
# the venv module: the first of $AP_PYTHON_BASE, python3.11, python3 that is 3.11 (Debian's
# /usr/bin/python3 needs the python3-venv package; the machines' default python3 has it).
# The abi3 wheel (CPython 3.12 and newer; scripts/build_wheel.sh): the build venv
# VENV_DIR/abi3-build (requirements-abi3.txt) from the Python 3.12, else 3.13, that
# scripts/find_python.sh finds ($AP_PYTHON312, python3.12, pyenv's); and the cp312 and cp313
# wheels of the package's dependencies (requirements-wheelhouse.txt) in the wheelhouse, with which
# ctest's python_wheel_abi3 installs it into fresh 3.12 and 3.13 venvs offline.
# usage: scripts/setup_python.sh [VENV_DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$repo/.venv}"
base=""
for candidate in "${AP_PYTHON_BASE:-}" python3.11 python3; do
  [[ -n "$candidate" ]] || continue
  if command -v "$candidate" >/dev/null 2>&1 \
     && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    base="$candidate"
    break
  fi
done
if [[ -z "$base" ]]; then
  echo "setup_python.sh: no Python 3.11 with the venv module found (set AP_PYTHON_BASE)" >&2
  exit 2
fi
if [[ ! -x "$venv/bin/python" ]]; then
  "$base" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet -r "$repo/requirements.txt"
# The wheels a fresh venv needs to install the package's wheel (scripts/build_wheel.sh) and test
# it with no network (ctest's python_wheel_install): the wheel's dependencies and pytest, at the
# versions of requirements.txt, kept in the venv's folder.
"$venv/bin/python" -m pip download --quiet --only-binary=:all: --dest "$venv/wheelhouse" \
  -c "$repo/requirements.txt" -c "$repo/requirements-wheelhouse.txt" numpy pandas pyarrow tqdm pytest
# The same for the abi3 wheel's fresh 3.12 and 3.13 venvs (the dependencies only: that test runs
# no pytest inside them).
for version in 3.12 3.13; do
  "$venv/bin/python" -m pip download --quiet --only-binary=:all: --python-version "$version" \
    --implementation cp --dest "$venv/wheelhouse" -r "$repo/requirements-wheelhouse.txt"
done
# The abi3 wheel's build venv, from the oldest Python 3.12+ found (3.13's works as well: the module
# targets 3.12's stable ABI either way).
base3=""
for version in 3.12 3.13; do
  if base3="$("$repo/scripts/find_python.sh" "$version" 2>/dev/null)"; then
    break
  fi
done
if [[ -n "$base3" ]]; then
  if [[ ! -x "$venv/abi3-build/bin/python" ]]; then
    "$base3" -m venv "$venv/abi3-build"
  fi
  "$venv/abi3-build/bin/python" -m pip install --quiet -r "$repo/requirements-abi3.txt"
else
  echo "setup_python.sh: no Python 3.12 or 3.13 found (set AP_PYTHON312): no build venv for the abi3 wheel;" \
       "ctest's python_wheel_abi3 skips (and fails with CI=true)" >&2
fi
# The package, without build isolation: nanobind and scikit-build-core are pinned above.
"$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
  --config-settings=build-dir="$repo/build/python-package" "$repo"
echo "setup_python.sh: $("$venv/bin/python" --version) in $venv, with attention_plasticity"
if [[ -n "$base3" ]]; then
  echo "setup_python.sh: $("$venv/abi3-build/bin/python" --version) in $venv/abi3-build, to build the abi3 wheel"
fi
