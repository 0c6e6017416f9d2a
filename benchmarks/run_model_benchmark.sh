#!/usr/bin/env bash
# Whole model: ap_analyze on a synthetic dump of 64 query heads (8 layers x 8 q heads, 2 k heads)
# of the Qwen3-8B head shape (50,000 tokens, d = 128, 12 buckets, 8 examples), with 1 and 2
# threads, alternating, ROUNDS rounds each: median wall time, heads/s, speed-up, peak RSS
# (/usr/bin/time -v), and whether every CSV of every run is byte-identical. Then one head
# alone (--layers 0 --heads 0) with 1 and 2 threads: ap_analyze gives the spare thread to the
# head's own steps (head_options::threads).
# usage: benchmarks/run_model_benchmark.sh [BUILD_DIR] [WORK_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
work=${2:-/tmp/ap_model_bench}
rounds=${3:-3}
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
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/examples/ap_analyze" --data-root "$work/dump" --output-dir "$work/probe" --layers 0 --heads 0 --threads 1 2>&1 \
  | grep -m1 "BLAS:" || true

# One run: wall seconds and peak RSS (kB) into the named variables; the results in $work/out_$tag.
run() {
  local tag=$1 threads=$2
  shift 2
  /usr/bin/time -v -o "$work/time_$tag.txt" "$build/examples/ap_analyze" --data-root "$work/dump" \
    --output-dir "$work/out_$tag" --threads "$threads" "$@" >/dev/null 2>"$work/log_$tag.txt"
  awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' \
    "$work/time_$tag.txt"
  awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time_$tag.txt" >"$work/rss_$tag.txt"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
same_results() {
  local a=$1 b=$2 f
  for f in "$work/out_$a"/*.csv; do
    cmp -s "$f" "$work/out_$b/$(basename "$f")" || return 1
  done
}

: >"$work/wall_1.txt"
: >"$work/wall_2.txt"
identical=yes
for r in $(seq 1 "$rounds"); do
  for threads in 1 2; do
    run "model_${threads}_$r" "$threads" >>"$work/wall_$threads.txt"
    same_results "model_1_1" "model_${threads}_$r" || identical=no
  done
done
for threads in 1 2; do
  w=$(median <"$work/wall_$threads.txt")
  rss=$(cat "$work"/rss_model_${threads}_*.txt | sort -g | tail -1)
  eval "wall_$threads=$w"
  awk -v t="$threads" -v w="$w" -v r="$rss" -v h="$heads" -v all="$(tr '\n' ' ' <"$work/wall_$threads.txt")" \
    'BEGIN {printf "%d thread(s): median wall %.2f s (runs: %s), %.2f heads/s, peak RSS %.0f MB\n", t, w, all, h / w, r / 1024}'
done
awk -v a="$wall_1" -v b="$wall_2" 'BEGIN {printf "speed-up 2 vs 1 thread: %.2fx\n", a / b}'
echo "every CSV of all $((2 * rounds)) runs byte-identical: $identical"

# One head alone.
: >"$work/one_1.txt"
: >"$work/one_2.txt"
for r in $(seq 1 "$rounds"); do
  for threads in 1 2; do
    run "one_${threads}_$r" "$threads" --layers 0 --heads 0 >>"$work/one_$threads.txt"
    same_results "one_1_1" "one_${threads}_$r" || identical=no
  done
done
o1=$(median <"$work/one_1.txt")
o2=$(median <"$work/one_2.txt")
awk -v a="$o1" -v b="$o2" 'BEGIN {printf "one head (whole process, loading included): 1 thread %.3f s, 2 threads %.3f s: %.2fx\n", a, b, a / b}'
echo "one head: results of 1 and 2 threads byte-identical: $identical"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
