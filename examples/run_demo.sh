#!/usr/bin/env bash
# The demo: a synthetic model with a known attention plasticity per head (ap_synth), its
# analysis (ap_analyze), a table of estimated vs true AP per head, and the figures when
# examples/plots/render_all.py and matplotlib + pandas are available.
#
# usage: examples/run_demo.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  the CMake build folder holding examples/ap_synth and examples/ap_analyze
#              [build, next to examples/]
#   OUT_DIR    where data/, results/ and figures/ go [BUILD_DIR/demo]
# Environment: AP_DEMO_PLOTS=0 skips the figures; AP_PYTHON picks the Python for the table
# (stdlib only) [/usr/bin/python3, else python3]; extra ap_synth flags in AP_SYNTH_ARGS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
build="${1:-$repo/build}"
out="${2:-$build/demo}"
synth="$build/examples/ap_synth"
analyze="$build/examples/ap_analyze"
for exe in "$synth" "$analyze"; do
  if [[ ! -x "$exe" ]]; then
    echo "run_demo.sh: $exe not found; build first:" >&2
    echo "  cmake -S $repo -B $build && cmake --build $build -j" >&2
    exit 2
  fi
done
python="${AP_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x /usr/bin/python3 ]]; then python=/usr/bin/python3; else python=python3; fi
fi

start=$(date +%s.%N)
mkdir -p "$out"
rm -rf "$out/data" "$out/results"   # only the demo's own folders

echo "== 1/3 ap_synth: a synthetic model with known attention plasticity -> $out/data"
# shellcheck disable=SC2086
"$synth" --out "$out/data" --sliding-window-layers 3 ${AP_SYNTH_ARGS:-}

echo "== 2/3 ap_analyze -> $out/results"
# The synthetic tokens are independent draws around fixed keys, as ap_synth's true AP assumes: the
# token-level errors (docs/method.md §8.3; captured text wants the default, sequence).
"$analyze" --data-root "$out/data" --output-dir "$out/results" --sampling-unit token

echo "== 3/3 estimated vs true attention plasticity"
"$python" "$here/demo_table.py" "$out/results/head_metrics.csv" "$out/data/true_ap.csv"

end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

render="$here/plots/render_all.py"
if [[ "${AP_DEMO_PLOTS:-1}" != "0" && -f "$render" ]]; then
  if /usr/bin/python3 -c "import matplotlib, pandas" >/dev/null 2>&1; then
    echo "== figures"
    if /usr/bin/python3 "$render" --results "$out/results" --out "$out/figures"; then
      echo "figures in $out/figures"
    else
      echo "run_demo.sh: render_all.py failed (the results above are complete)" >&2
      exit 1
    fi
  else
    echo "(figures skipped: /usr/bin/python3 cannot import matplotlib and pandas)"
  fi
fi
echo "demo done in ${elapsed} s (synthesis, analysis and table); CSVs in $out/results"
