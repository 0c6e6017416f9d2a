#!/usr/bin/env bash
# Installs the Debian packages this project builds, runs and plots with.
#   scripts/install_deps.sh           the library, the tools, the demo and its figures
#   scripts/install_deps.sh --tests   also what the tests need: clang and its runtime (the
#                                     fuzzers and the sanitizer build), strace (the crash
#                                     tests), slurm-wlm and munge (the Slurm test's one-node
#                                     cluster), chromium and chromium-driver (the report's
#                                     browser tests, tests/python/test_report.py)
# The Python side (bindings, converter, real-model capture, tests): scripts/setup_python.sh.
set -euo pipefail
packages=(
  cmake g++ make
  libxtensor-dev libxtensor-blas-dev libopenblas-dev catch2
  libyaml-cpp-dev nlohmann-json3-dev libbenchmark-dev
  python3 python3-numpy python3-scipy python3-matplotlib python3-pandas
  patch xz-utils  # scripts/build_cluster_deps.sh: Debian's source packages for the cluster wheel
)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(clang libclang-rt-14-dev strace slurm-wlm munge chromium chromium-driver)
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/install_deps.sh [--tests]" >&2
  exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo)
fi
"${as_root[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
