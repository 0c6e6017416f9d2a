#!/usr/bin/env bash
# Submits a whole-model analysis to Slurm (docs/method.md §8.4): an array job of NUM_SHARDS
# tasks (ap_array.sbatch: task I runs `ap_analyze --shard I/NUM_SHARDS` into OUT_DIR/shard-I)
# and a merge job (ap_merge.sbatch: the CSVs into OUT_DIR) that starts once the array job has
# ended. Prints both job ids.
#
# usage: examples/slurm/submit.sh [--only LIST] NUM_SHARDS OUT_DIR [ap_analyze options...]
#   examples/slurm/submit.sh 64 results/qwen3-8b --config qwen3-8b.yaml
#   examples/slurm/submit.sh --only 5,17 64 results/qwen3-8b --config qwen3-8b.yaml   # rerun shards 5, 17
#
# --only LIST   run only these shards (Slurm's --array syntax: 5,17 or 0-3,9), then merge all
# Logs: OUT_DIR/logs/shard-I.log and OUT_DIR/logs/merge-JOBID.log.
# Environment:
#   AP_BIN          folder of ap_analyze and ap_merge (default: <repository>/build/examples when
#                   built there, else the folder of ap_analyze on PATH)
#   AP_SBATCH_ARGS  more sbatch options for both jobs, e.g. "--partition=cpu --account=lab"
#                   (they override the #SBATCH lines of the two scripts)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage="usage: $0 [--only LIST] NUM_SHARDS OUT_DIR [ap_analyze options...]"
only=""
if [[ "${1:-}" == "--only" ]]; then
  only="${2:?$usage}"
  shift 2
elif [[ "${1:-}" == --only=* ]]; then
  only="${1#--only=}"
  shift
fi
if [[ $# -lt 2 ]]; then
  echo "$usage" >&2
  exit 2
fi
num_shards=$1
out=$2
shift 2
if ! [[ "$num_shards" =~ ^[1-9][0-9]*$ ]]; then
  echo "submit.sh: NUM_SHARDS must be a positive integer, not '$num_shards'" >&2
  exit 2
fi
if [[ -n "$only" ]] && ! [[ "$only" =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]]; then
  echo "submit.sh: --only '$only' is not a list of shards such as 5,17 or 0-3,9" >&2
  exit 2
fi
bin="${AP_BIN:-}"
if [[ -z "$bin" ]]; then
  if [[ -x "$here/../../build/examples/ap_analyze" ]]; then
    bin="$here/../../build/examples"
  elif command -v ap_analyze >/dev/null 2>&1; then
    bin="$(dirname "$(command -v ap_analyze)")"
  else
    echo "submit.sh: ap_analyze not found: build it, put it on PATH, or set AP_BIN" >&2
    exit 2
  fi
fi
bin="$(cd "$bin" && pwd)"
for program in ap_analyze ap_merge; do
  if [[ ! -x "$bin/$program" ]]; then
    echo "submit.sh: $bin/$program not found or not executable (AP_BIN)" >&2
    exit 2
  fi
done
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
# shellcheck disable=SC2206  # AP_SBATCH_ARGS is a list of options, split on spaces
extra=(${AP_SBATCH_ARGS:-})
array=$(sbatch --parsable "${extra[@]}" --export="ALL,AP_BIN=$bin" --array="${only:-0-$((num_shards - 1))}" \
  --output="$out/logs/shard-%a.log" "$here/ap_array.sbatch" "$num_shards" "$out" "$@")
array=${array%%;*}
merge=$(sbatch --parsable "${extra[@]}" --export="ALL,AP_BIN=$bin" --dependency="afterany:$array" \
  --output="$out/logs/merge-%j.log" "$here/ap_merge.sbatch" "$out")
merge=${merge%%;*}
echo "array job $array: shards ${only:-0-$((num_shards - 1))} of $num_shards -> $out/shard-I (logs: $out/logs/shard-I.log)"
echo "merge job $merge: after job $array ends -> $out (log: $out/logs/merge-$merge.log)"
