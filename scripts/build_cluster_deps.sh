#!/usr/bin/env bash
# The libraries of the cluster wheel (scripts/build_wheel.sh; README.md, "Python"), built for
# glibc 2.28 (RHEL/Rocky 8 and newer) into a cache folder, once:
#
# - OpenBLAS: Debian 12's source package 0.3.21+ds-4 with Debian's patches, options and compiler
#   flags (debian/rules, pthread flavour: DYNAMIC_ARCH, NUM_THREADS=64, ...), compiled by Debian's
#   gcc as Debian compiles it, so that its kernels are the machine code of the libopenblas the C++
#   programs link (docs/method.md §7.7), with LAPACK as Debian adds it (the objects of Debian's
#   liblapack-pic: reference LAPACK 3.11 compiled by gfortran). Linked by zig's linker against
#   glibc 2.28's symbols (-z defs: nothing newer can slip in), without libgfortran
#   (scripts/cluster_toolchain/gfortran_shim.c gives the pieces LAPACK's objects use). Its kernel
#   set: Prescott (OpenBLAS's fallback; the tests' fallback runs), Haswell (the policy's choice on
#   every AVX2 + FMA CPU) and the cores Debian's build picks on the other CPUs of current
#   clusters, AP_OPENBLAS_CORES (Debian's has 20 more, for CPUs older than 2009 or rare: with
#   them the build takes 3-4 times longer).
# - yaml-cpp: Debian 12's source package 0.7.0+dfsg-8 with Debian's patches, a static,
#   position-independent library with hidden symbols, compiled by Debian's g++ (the module links
#   it in and exports none of it).
#
# The sources come from Debian's archive (deb.debian.org, checked against the SHA-256 below);
# zig from the pinned PyPI package ziglang (requirements.txt). Nothing from elsewhere.
#
# usage: scripts/build_cluster_deps.sh [CACHE_DIR]   (default build/cluster-deps; prints it last)
# CACHE_DIR/stage holds lib/libopenblas.so.0 and lib/libyaml-cpp.a with its CMake files;
# CACHE_DIR/zig-cc is zig's C compiler and linker for glibc 2.28. Each library is built again
# only when its recipe (sources, options, shim, compiler) changes: CACHE_DIR/stage/.openblas and
# .yaml-cpp hold their digests.
# AP_WHEEL_PYTHON: the Python with ziglang (default .venv/bin/python); AP_DEPS_JOBS: make's -j
# (default 2); AP_OPENBLAS_CORES: OpenBLAS's DYNAMIC_LIST beside Prescott.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${1:-$repo/build/cluster-deps}"
python="${AP_WHEEL_PYTHON:-$repo/.venv/bin/python}"
jobs="${AP_DEPS_JOBS:-2}"
cores="${AP_OPENBLAS_CORES:-NEHALEM SANDYBRIDGE HASWELL ZEN SKYLAKEX}"
glibc=2.28
if ! "$python" -m ziglang version >/dev/null 2>&1; then
  echo "build_cluster_deps.sh: $python has no ziglang (pip install -r requirements.txt)" >&2
  exit 2
fi
for tool in gcc g++ make ar cmake patch xz; do
  command -v "$tool" >/dev/null || { echo "build_cluster_deps.sh: needs $tool" >&2; exit 2; }
done
mkdir -p "$cache/src" "$cache/stage/lib"
cache="$(cd "$cache" && pwd)"
stage="$cache/stage"

# zig's C compiler and linker for glibc $glibc, its caches inside CACHE_DIR.
cat > "$cache/zig-cc" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$cache/zig-cache" ZIG_LOCAL_CACHE_DIR="$cache/zig-cache"
exec "$python" -m ziglang cc -target x86_64-linux-gnu.$glibc "\$@"
EOF
chmod +x "$cache/zig-cc"

# Debian's archive files: pool path and SHA-256 (from the .dsc of each source package and the
# Packages index of bookworm).
openblas_sources=(
  "o/openblas/openblas_0.3.21+ds.orig.tar.xz bbec5cca61c8033b2d57aaecde205d709323a0b35a5f193290081dbb3826848a"
  "o/openblas/openblas_0.3.21+ds-4.debian.tar.xz cb8ded6f29379c6a720ce3e7b62f9884419c7d3ba66e49184a3c09272af2065b"
  "l/lapack/liblapack-dev_3.11.0-2_amd64.deb b880ddeaf2982a8cf572925ae1728ec6310da3930db1e65c708e010694295bfd")
yaml_sources=(
  "y/yaml-cpp/yaml-cpp_0.7.0+dfsg.orig.tar.xz dc63708605404e0b963e0ca3a9619d1c8270eda2839603e6fa0384e5e51e5312"
  "y/yaml-cpp/yaml-cpp_0.7.0+dfsg-8.debian.tar.xz d2d09d2e54215b5865d5dfd4a92ec887c261f9c19c0b2521303647505127163e")
# debian/rules (0-pthread flavour) with dpkg-buildflags' CPPFLAGS and CFLAGS (-g and the file-prefix
# map left out: they change no instruction). No Fortran compiler: NOFORTRAN=1 only skips the
# Fortran test programs here (LAPACK comes compiled), F_COMPILER=GFORTRAN keeps gfortran's calling
# convention (-DF_INTERFACE_GFORT) as in Debian's build, where gfortran is found.
openblas_options=(CC=gcc NO_LAPACKE=1 NO_AFFINITY=1 NO_WARMUP=1 COMMON_OPT=
  "CFLAGS=-Wdate-time -D_FORTIFY_SOURCE=2 -O2 -fstack-protector-strong -Wformat -Werror=format-security"
  NUM_THREADS=64 DYNAMIC_ARCH=1 DYNAMIC_OLDER=1 TARGET=GENERIC "DYNAMIC_LIST=$cores"
  USE_THREAD=1 USE_OPENMP=0 INTERFACE64=0 LIBPREFIX=libopenblas
  NOFORTRAN=1 F_COMPILER=GFORTRAN NO_SHARED=1)
yaml_options=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_BUILD_TYPE=Release -DYAML_BUILD_SHARED_LIBS=OFF
  -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DCMAKE_CXX_VISIBILITY_PRESET=hidden -DCMAKE_VISIBILITY_INLINES_HIDDEN=ON)
digest() { sha256sum | cut -c1-16; }
openblas_digest="$( (printf '%s\n' "${openblas_sources[@]}" "${openblas_options[@]}" "$glibc" "corename: Prescott first"; \
  cat "$repo/scripts/cluster_toolchain/gfortran_shim.c"; gcc --version | head -n 1; "$python" -m ziglang version) | digest)"
yaml_digest="$( (printf '%s\n' "${yaml_sources[@]}" "${yaml_options[@]}"; g++ --version | head -n 1) | digest)"

fetch() {  # fetch "POOL_PATH SHA256": a file of Debian's archive into CACHE_DIR/src, checked
  set -- $1
  local file="$cache/src/${1##*/}"
  if [[ ! -f "$file" ]] || ! echo "$2  $file" | sha256sum --check --status; then
    "$python" - "https://deb.debian.org/debian/pool/main/$1" "$file.part" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())
EOF
    mv "$file.part" "$file"
  fi
  echo "$2  $file" | sha256sum --check --quiet
}

unpack() {  # unpack ORIG DEBIAN DIR: the source package as dpkg-source -x makes it (patches applied)
  local tmp="$3.tmp" patch
  rm -rf "$tmp" "$3"
  mkdir -p "$tmp"
  tar -xf "$cache/src/$1" -C "$tmp"
  mv "$tmp"/* "$3"
  rm -rf "$tmp"
  tar -xf "$cache/src/$2" -C "$3"
  while read -r patch; do
    [[ -z "$patch" || "$patch" == \#* ]] && continue
    patch -d "$3" -p1 --quiet < "$3/debian/patches/$patch"
  done < "$3/debian/patches/series"
}

# --- OpenBLAS ---------------------------------------------------------------------------------
if [[ ! -f "$stage/.openblas" || "$(cat "$stage/.openblas")" != "$openblas_digest" ]]; then
  rm -f "$stage/.openblas"
  for source in "${openblas_sources[@]}"; do fetch "$source"; done
  unpack openblas_0.3.21+ds.orig.tar.xz openblas_0.3.21+ds-4.debian.tar.xz "$cache/openblas"
  # Debian's liblapack-pic objects, from the liblapack-dev package (data.tar.xz inside the .deb).
  rm -rf "$cache/lapack-pic"
  mkdir -p "$cache/lapack-pic"
  (cd "$cache/lapack-pic" && ar x "$cache/src/liblapack-dev_3.11.0-2_amd64.deb" data.tar.xz \
    && tar -xf data.tar.xz ./usr/lib/x86_64-linux-gnu/liblapack_pic.a && rm data.tar.xz)
  lapack_pic="$cache/lapack-pic/usr/lib/x86_64-linux-gnu/liblapack_pic.a"
  # Debian's no-embedded-lapack.patch reads the archive from the installed package: here from the cache.
  sed -i "s|ar -x /usr/lib/\$\$(dpkg-architecture -q DEB_HOST_MULTIARCH)/liblapack_pic.a|ar -x $lapack_pic|" \
    "$cache/openblas/Makefile"
  grep -q "ar -x $lapack_pic" "$cache/openblas/Makefile"
  # OpenBLAS 0.3.21 names the kernels it runs by comparing pointers in gotoblas_corename, Katmai
  # first; in a DYNAMIC_LIST build the cores left out (Katmai, Coppermine, Core2, ...) are aliases
  # of Prescott's table, so Prescott's kernels (the fallback) would be reported as "Katmai".
  # Prescott is compared first: the report names the kernels that run (docs/method.md §7.7, the
  # fallback tests); no kernel changes.
  sed -i 's|^  if (gotoblas == &gotoblas_KATMAI)       return corename\[ 1\];|  if (gotoblas == \&gotoblas_PRESCOTT)     return corename[ 4];\n&|' \
    "$cache/openblas/driver/others/dynamic.c"
  grep -A2 '^char \*gotoblas_corename' "$cache/openblas/driver/others/dynamic.c" | grep -q 'gotoblas_PRESCOTT'
  make -C "$cache/openblas" -j"$jobs" libs "${openblas_options[@]}" > "$cache/openblas.log" 2>&1 \
    || { tail -30 "$cache/openblas.log" >&2; echo "build_cluster_deps.sh: OpenBLAS failed ($cache/openblas.log)" >&2; exit 1; }
  make -C "$cache/openblas" netlib "${openblas_options[@]}" >> "$cache/openblas.log" 2>&1 \
    || { tail -30 "$cache/openblas.log" >&2; echo "build_cluster_deps.sh: OpenBLAS's LAPACK failed" >&2; exit 1; }
  archive="$(readlink -f "$cache/openblas/libopenblas.a")"  # libopenblasp-r0.3.21.a
  # LAPACK's timers through gfortran's ETIME: the shim gives them.
  ar d "$archive" second_INT_ETIME.o dsecnd_INT_ETIME.o
  "$cache/zig-cc" -O2 -fPIC -c "$repo/scripts/cluster_toolchain/gfortran_shim.c" -o "$cache/gfortran_shim.o"
  "$cache/zig-cc" -shared -o "$stage/lib/libopenblas.so.0" -Wl,-soname,libopenblas.so.0 -Wl,-z,defs \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive "$cache/gfortran_shim.o" -lm -lpthread
  ln -sf libopenblas.so.0 "$stage/lib/libopenblas.so"
  echo "$openblas_digest" > "$stage/.openblas"
fi

# --- yaml-cpp ---------------------------------------------------------------------------------
if [[ ! -f "$stage/.yaml-cpp" || "$(cat "$stage/.yaml-cpp")" != "$yaml_digest" ]]; then
  rm -f "$stage/.yaml-cpp"
  for source in "${yaml_sources[@]}"; do fetch "$source"; done
  unpack yaml-cpp_0.7.0+dfsg.orig.tar.xz yaml-cpp_0.7.0+dfsg-8.debian.tar.xz "$cache/yaml-cpp"
  rm -rf "$cache/yaml-cpp-build" "$stage/lib/cmake/yaml-cpp" "$stage/include/yaml-cpp"
  cmake -S "$cache/yaml-cpp" -B "$cache/yaml-cpp-build" -DCMAKE_CXX_COMPILER=g++ "${yaml_options[@]}" \
    -DCMAKE_INSTALL_PREFIX="$stage" -DCMAKE_INSTALL_LIBDIR=lib > "$cache/yaml-cpp.log" 2>&1
  cmake --build "$cache/yaml-cpp-build" -j"$jobs" >> "$cache/yaml-cpp.log" 2>&1 \
    || { tail -30 "$cache/yaml-cpp.log" >&2; echo "build_cluster_deps.sh: yaml-cpp failed ($cache/yaml-cpp.log)" >&2; exit 1; }
  cmake --install "$cache/yaml-cpp-build" >> "$cache/yaml-cpp.log" 2>&1
  echo "$yaml_digest" > "$stage/.yaml-cpp"
fi
echo "$cache"
