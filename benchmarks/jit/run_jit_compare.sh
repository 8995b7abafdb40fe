#!/usr/bin/env bash
# The JIT tier against the interpreter, OpenJDK 17 and Go, in one run
# (docs/performance.md, "JIT tier", quotes the tables):
#
#   1. alloc32 (alloc32.mv / AllocLoop.java / alloc_loop.go): N objects of
#      two reference fields, each dead at once: the allocation fast path,
#      in ns per object (whole-process wall time / N, collections included).
#   2. fib (fib.mv / Fib.java / fib.go): calls and integer arithmetic.
#   3. binary trees (../programs/binary_trees.mv, ../compare/BinaryTrees.java,
#      ../compare/binary_trees.go).
#   4. Compile time per function: every function of the benchmark and
#      example programs under --jit=eager --verbose:jit.
#
#   benchmarks/jit/run_jit_compare.sh [path/to/minivm]
#
# Environment: RUNS (default 5; each time is the median of RUNS runs),
# ALLOC_N (default 200000000), FIB_N (default 35), BT_DEPTH (default 20),
# JAVA/JAVAC/GO (default from PATH). Each program's output is compared with
# minivm's before timing. minivm rows: --jit=off (interpreter), --jit=auto
# (the default: background compilation of hot functions), --jit=eager.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../lib.sh"  # median_seconds, same_output, ratio, private_minivm
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
private_minivm "$0" "${1:-}"
MV=$MINIVM
RUNS=${RUNS:-5}
ALLOC_N=${ALLOC_N:-200000000}
FIB_N=${FIB_N:-35}
BT_DEPTH=${BT_DEPTH:-20}
JAVA=${JAVA:-java}
JAVAC=${JAVAC:-javac}
GO=${GO:-go}

"$JAVAC" -d "$TMP/java" "$HERE/AllocLoop.java" "$HERE/Fib.java" "$HERE/../compare/BinaryTrees.java"
mkdir -p "$TMP/go"
for src in "$HERE/alloc_loop.go" "$HERE/fib.go" "$HERE/../compare/binary_trees.go"; do
  name=$(basename "$src" .go)
  (cd "$TMP/go" && GOCACHE=$TMP/gocache GO111MODULE=off "$GO" build -o "$name" "$src")
done

status=0

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "minivm: $MINIVM_ORIG ($("$MV" --version 2>&1 | head -1)); java: $("$JAVA" -version 2>&1 | head -1); go: $("$GO" version)"
echo "each time: median of $RUNS runs, whole-process wall time; ratio = runtime time / minivm --jit=eager time"

# table NAME PER_UNIT_N MV_PROGRAM ARGS JAVA_CLASS GO_BINARY
table() {
  local name=$1 per=$2 prog=$3 arg=$4 jclass=$5 gobin=$6
  echo
  echo "== $name =="
  "$MV" --jit=off "$prog" "$arg" >"$TMP/ref"
  for mode in auto eager; do same_output "minivm --jit=$mode" "$TMP/ref" "$MV" --jit=$mode "$prog" "$arg"; done
  same_output "java $jclass" "$TMP/ref" "$JAVA" -XX:+UseParallelGC -cp "$TMP/java" "$jclass" "$arg"
  same_output "go $gobin" "$TMP/ref" "$TMP/go/$gobin" "$arg"
  local -a names=("minivm --jit=off" "minivm --jit=auto" "minivm --jit=eager")
  local -a times=()
  times+=("$(median_seconds "$MV" --jit=off "$prog" "$arg")")
  times+=("$(median_seconds "$MV" --jit=auto "$prog" "$arg")")
  times+=("$(median_seconds "$MV" --jit=eager "$prog" "$arg")")
  if [[ $name == alloc32* ]]; then
    names+=("minivm --jit=eager --young=32m")
    times+=("$(median_seconds "$MV" --jit=eager --young=32m "$prog" "$arg")")
  fi
  names+=("java ParallelGC" "java G1 (default)" "go (GOGC=100)")
  times+=("$(median_seconds "$JAVA" -XX:+UseParallelGC -cp "$TMP/java" "$jclass" "$arg")")
  times+=("$(median_seconds "$JAVA" -cp "$TMP/java" "$jclass" "$arg")")
  times+=("$(median_seconds "$TMP/go/$gobin" "$arg")")
  local eager=${times[2]}
  if [[ $per != 0 ]]; then
    printf '%-32s %9s %10s %12s\n' runtime median_s ns/object x/eager
  else
    printf '%-32s %9s %12s\n' runtime median_s x/eager
  fi
  for i in "${!names[@]}"; do
    if [[ $per != 0 ]]; then
      printf '%-32s %9s %10s %12s\n' "${names[$i]}" "${times[$i]}" \
        "$(awk -v s="${times[$i]}" -v n="$per" 'BEGIN { printf "%.2f", s * 1e9 / n }')" \
        "$(ratio "${times[$i]}" "$eager")"
    else
      printf '%-32s %9s %12s\n' "${names[$i]}" "${times[$i]}" "$(ratio "${times[$i]}" "$eager")"
    fi
  done
}

table "alloc32: $ALLOC_N objects of 32 bytes" "$ALLOC_N" "$HERE/alloc32.mv" "$ALLOC_N" AllocLoop alloc_loop
table "fib($FIB_N)" 0 "$HERE/fib.mv" "$FIB_N" Fib fib
table "binary trees, depth $BT_DEPTH" 0 "$HERE/../programs/binary_trees.mv" "$BT_DEPTH" BinaryTrees binary_trees

echo
echo "== compile time per function (--jit=eager --verbose:jit; -O2 IR pipeline + CodeGen) =="
: >"$TMP/ms"
for p in "$HERE"/*.mv "$HERE"/../programs/*.mv "$HERE"/../../examples/programs/*.mv; do
  "$MV" --jit=eager --verbose:jit "$p" 1 2>&1 >/dev/null |
    sed -n 's/^\[jit\] compiled .* (\([0-9]*\) bytes of bytecode) in \([0-9.]*\)ms.*$/\1 \2/p' >>"$TMP/ms" || true
done
sort -k2 -g "$TMP/ms" | awk '{ b[NR] = $1; t[NR] = $2; sb += $1; st += $2 }
  END { printf "%d functions, %d bytes of bytecode: median %.2f ms, mean %.2f ms, max %.2f ms (%.1f us per bytecode byte)\n",
        NR, sb, t[int((NR + 1) / 2)], st / NR, t[NR], 1000 * st / sb }'
echo "(the first function of each process also pays LLVM's one-time set-up)"
exit $status
