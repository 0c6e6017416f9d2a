#!/usr/bin/env bash
# Prints the path of a CPython interpreter of the version asked for (3.12, 3.13, ...), the first
# that runs and reports that version of:
#   1. $AP_PYTHON312 (AP_PYTHON and the version without its dot; a path or a command name);
#   2. python3.12 on PATH (a pyenv shim of a version that is not active fails here and is passed);
#   3. pyenv's copy: `pyenv prefix 3.12`/bin/python3.12 (any installed 3.12.x).
# Used by scripts/setup_python.sh (the abi3 wheel's build venv) and the test of the abi3 wheel
# (tests/python/test_wheel_abi3.py). Exits 1, naming what it tried, when there is none.
# usage: scripts/find_python.sh VERSION
set -euo pipefail
version="${1:?usage: scripts/find_python.sh VERSION (e.g. 3.12)}"
if [[ ! "$version" =~ ^3\.[0-9]+$ ]]; then
  echo "find_python.sh: VERSION is '$version'; expected 3.N, e.g. 3.12" >&2
  exit 2
fi
variable="AP_PYTHON${version//./}"
candidates=()
[[ -n "${!variable:-}" ]] && candidates+=("${!variable}")
candidates+=("python$version")
if command -v pyenv >/dev/null 2>&1; then
  prefix="$(pyenv prefix "$version" 2>/dev/null || true)"
  [[ -n "$prefix" ]] && candidates+=("$prefix/bin/python$version")
fi
check="import sys; sys.exit(sys.implementation.name != 'cpython' or '%d.%d' % sys.version_info[:2] != '$version')"
for candidate in "${candidates[@]}"; do
  path="$(command -v "$candidate" 2>/dev/null || true)"
  if [[ -n "$path" ]] && "$path" -c "$check" >/dev/null 2>&1; then
    # The interpreter's own path (a shim's target, not the shim).
    "$path" -c 'import sys; print(sys.executable)'
    exit 0
  fi
done
echo "find_python.sh: no CPython $version found (tried: ${candidates[*]}); set $variable to one" >&2
exit 1
