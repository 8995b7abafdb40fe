#!/usr/bin/env bash
# Times each benchmarks/programs/*.mv under minivm against its CPython
# equivalent (*.py, same algorithm and output) in the same run, and prints a
# table of mean seconds and the minivm/python ratio.
#
#   benchmarks/run_programs.sh [path/to/minivm [name...]]
#
# The minivm path defaults to build/bin/minivm; names (fib, loops, ...)
# restrict the run to those benchmarks.
#
# Uses hyperfine when installed, else a loop timed with `date +%s%N`.
# Environment: RUNS (default 3), PYTHON (default python3), and per-benchmark
# arguments can be overridden with ARGS_<name>, e.g. ARGS_binary_trees=16.
# Before timing, each pair is run once and their outputs compared; a mismatch
# is reported and counts as a failure (exit code 1).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $# -ge 1 ]]; then
  MINIVM=$1
  shift
else
  MINIVM=$HERE/../build/bin/minivm
fi
if [[ ! -x "$MINIVM" ]]; then
  echo "$0: not an executable: $MINIVM (usage: $0 [path/to/minivm [benchmark...]])" >&2
  exit 2
fi

PROGRAMS=$HERE/programs
RUNS=${RUNS:-3}
PYTHON=${PYTHON:-python3}

# Default arguments: sized so that CPython takes a few seconds at most.
declare -A DEFAULT_ARGS=(
  [fib]=""
  [alloc_loop]="10000000"
  [binary_trees]="14"
  [loops]="30000000"
)

if [[ $# -gt 0 ]]; then
  NAMES=("$@")
else
  NAMES=()
  for f in "$PROGRAMS"/*.mv; do
    n=$(basename "$f" .mv)
    [[ -f "$PROGRAMS/$n.py" ]] && NAMES+=("$n")
  done
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# mean_seconds CMD...: mean wall time of RUNS runs, in seconds.
mean_seconds() {
  if command -v hyperfine >/dev/null 2>&1; then
    hyperfine --style none --warmup 1 --runs "$RUNS" --export-json "$TMP/h.json" \
      "$(printf '%q ' "$@")" >/dev/null 2>&1
    "$PYTHON" -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["results"][0]["mean"])' "$TMP/h.json"
  else
    local total=0 start end
    for ((r = 0; r < RUNS; r++)); do
      start=$(date +%s%N)
      "$@" >/dev/null 2>&1
      end=$(date +%s%N)
      total=$((total + end - start))
    done
    awk -v ns="$total" -v n="$RUNS" 'BEGIN { printf "%.3f\n", ns / n / 1e9 }'
  fi
}

if command -v hyperfine >/dev/null 2>&1; then
  echo "timing with hyperfine, $RUNS runs each (plus 1 warm-up)"
else
  echo "timing with date +%s%N, mean of $RUNS runs each"
fi
printf '%-14s %-10s %10s %10s %10s\n' benchmark args minivm_s python_s ratio
status=0
for name in "${NAMES[@]}"; do
  mv="$PROGRAMS/$name.mv"
  py="$PROGRAMS/$name.py"
  if [[ ! -f "$mv" || ! -f "$py" ]]; then
    echo "$name: missing $name.mv or $name.py" >&2
    status=1
    continue
  fi
  var="ARGS_$name"
  args=${!var-${DEFAULT_ARGS[$name]-}}
  # shellcheck disable=SC2206
  argv=($args)
  if ! "$MINIVM" "$mv" "${argv[@]}" >"$TMP/mv.out" 2>"$TMP/mv.err"; then
    echo "$name: minivm failed: $(head -1 "$TMP/mv.err")" >&2
    status=1
    continue
  fi
  "$PYTHON" "$py" "${argv[@]}" >"$TMP/py.out" 2>&1
  if ! cmp -s "$TMP/mv.out" "$TMP/py.out"; then
    echo "$name: outputs differ between minivm and python:" >&2
    diff "$TMP/mv.out" "$TMP/py.out" | head -5 >&2 || true
    status=1
  fi
  t_mv=$(mean_seconds "$MINIVM" "$mv" "${argv[@]}")
  t_py=$(mean_seconds "$PYTHON" "$py" "${argv[@]}")
  ratio=$(awk -v a="$t_mv" -v b="$t_py" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
  printf '%-14s %-10s %10s %10s %10s\n' "$name" "${args:--}" "$t_mv" "$t_py" "$ratio"
done
exit $status
