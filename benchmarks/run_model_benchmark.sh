#!/usr/bin/env bash
# (d) Whole model: ap_analyze on a synthetic dump of 64 query heads (8 layers x 8 q heads,
# 2 k heads) of the Qwen3-8B head shape (50,000 tokens, d = 128, 12 buckets, 8 examples),
# with 1 and 2 threads: wall time, heads/s, speed-up and peak RSS (/usr/bin/time -v).
# usage: benchmarks/run_model_benchmark.sh [BUILD_DIR] [WORK_DIR]
set -euo pipefail
build=${1:-build}
work=${2:-/tmp/ap_model_bench}
heads=64
if [ ! -x /usr/bin/time ]; then
  echo "needs /usr/bin/time (apt-get install time)" >&2
  exit 1
fi
mkdir -p "$work"
if [ ! -f "$work/dump/true_ap.csv" ]; then
  "$build/examples/ap_synth" --out "$work/dump" --num-layers 8 --num-q-heads 8 --num-k-heads 2 --dim 128 \
    --tokens 50000 --examples 8 --buckets 12 --true-pairs 16 --seed 0 >/dev/null
fi
du -sh "$work/dump" | awk '{print "dump size: " $1}'
declare -A wall
for threads in 1 2; do
  /usr/bin/time -v -o "$work/time_$threads.txt" "$build/examples/ap_analyze" --data-root "$work/dump" \
    --output-dir "$work/out_$threads" --threads "$threads" >/dev/null 2>"$work/log_$threads.txt"
  w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/time_$threads.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time_$threads.txt")
  wall[$threads]=$w
  awk -v t="$threads" -v w="$w" -v r="$rss" -v h="$heads" \
    'BEGIN {printf "threads %d: wall %.2f s, %.2f heads/s, peak RSS %.0f MB\n", t, w, h / w, r / 1024}'
done
awk -v a="${wall[1]}" -v b="${wall[2]}" 'BEGIN {printf "speed-up 2 vs 1 thread: %.2fx\n", a / b}'
cmp -s "$work/out_1/head_metrics.csv" "$work/out_2/head_metrics.csv" && echo "outputs of 1 and 2 threads identical"
