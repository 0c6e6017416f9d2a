#!/usr/bin/env bash
# Installs the Debian packages this project builds, tests and plots with.
set -euo pipefail
packages=(
  cmake g++ make
  libxtensor-dev libxtensor-blas-dev libopenblas-dev catch2
  libyaml-cpp-dev libbenchmark-dev
  python3 python3-numpy python3-scipy python3-matplotlib python3-pandas
)
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
