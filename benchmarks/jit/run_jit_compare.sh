#!/usr/bin/env bash
# The JIT tier against the interpreter, OpenJDK 17 and Go, in one interleaved
# run of whole-process CPU time (docs/performance.md, "JIT tier", quotes the
# tables):
#
#   start-up  fib.mv 1 everywhere: each configuration's fixed cost (for the
#             JVMs mostly pre-touching the heap), which net_s subtracts.
#   alloc32   (alloc32.mv / AllocLoop.java / alloc_loop.go): N objects of two
#             reference fields, each dead at once: the allocation fast path.
#   alloc_mix (../compare/alloc_mix.mv / AllocMix.java / alloc_mix.go): nodes
#             and 24 B, 1,000 B, 100 KB and 2 MiB byte arrays in one loop.
#   fib       (fib.mv / Fib.java / fib.go): calls and integer arithmetic.
#   binary trees at each of BT_DEPTHS (../programs/binary_trees.mv,
#             ../compare/BinaryTrees.java, ../compare/binary_trees.go).
#   Then the compile time per function: every function of the benchmark and
#   example programs at eager's quick tier, and every one that runs at the
#   optimising tier (--verbose:jit).
#
#   benchmarks/jit/run_jit_compare.sh [path/to/minivm]
#
# Configurations: minivm --jit=off (the interpreter), --jit=auto (the default:
# hot functions compiled in the background), --jit=eager, each with minivm's
# default 1 GiB heap; OpenJDK with G1 and with ParallelGC, each with a fixed,
# pre-touched heap of JAVA_HEAP (-XmsH -XmxH -XX:+AlwaysPreTouch; 1g, the
# same budget as minivm's, holds every program); Go with its default GOGC=100.
#
# Interleaving: RUNS rounds; each round runs every (program, configuration)
# once, programs in the order above and configurations in the order above, so
# a change of the machine's load during the run hits all rows alike. Each
# figure is the median over the rounds. Times are user + sys CPU seconds of
# the whole process, all its threads (GC workers, JIT compiler threads)
# included; wall time is printed beside it.
#
# Output check: the stdout of every timed run must equal that program's
# output under minivm --jit=off in the first round (the first run of each
# program); a mismatch or a non-zero exit is reported at once on stderr, the
# row shows it instead of figures, and the script exits 1.
#
# Environment: RUNS (default 5), ALLOC_N (alloc32 objects, default
# 200000000), MIX_N (alloc_mix iterations, default 20000000), FIB_N (default
# 35), BT_DEPTHS (default "16 20"), JAVA_HEAP (default 1g), JAVA/JAVAC/GO
# (default from PATH). Needs bash 5, java and javac (OpenJDK 17) and go.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COMPARE=$HERE/../compare
source "$HERE/../lib.sh"  # cpu_run, median, ratio, private_minivm
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
private_minivm "$0" "${1:-}"
MV=$MINIVM
RUNS=${RUNS:-5}
ALLOC_N=${ALLOC_N:-200000000}
MIX_N=${MIX_N:-20000000}
FIB_N=${FIB_N:-35}
BT_DEPTHS=${BT_DEPTHS:-"16 20"}
JAVA_HEAP=${JAVA_HEAP:-1g}
JAVA=${JAVA:-java}
JAVAC=${JAVAC:-javac}
GO=${GO:-go}
JAVA_FIXED_HEAP=("-Xms$JAVA_HEAP" "-Xmx$JAVA_HEAP" -XX:+AlwaysPreTouch)

"$JAVAC" -d "$TMP/java" "$HERE/AllocLoop.java" "$HERE/Fib.java" "$COMPARE/BinaryTrees.java" "$COMPARE/AllocMix.java"
mkdir -p "$TMP/go"
for src in "$HERE/alloc_loop.go" "$HERE/fib.go" "$COMPARE/binary_trees.go" "$COMPARE/alloc_mix.go"; do
  name=$(basename "$src" .go)
  (cd "$TMP/go" && GOCACHE=$TMP/gocache GO111MODULE=off "$GO" build -o "$name" "$src")
done

# --- programs and configurations -------------------------------------------
# Per program: title, minivm source, Java class, Go binary, the one argument,
# and the number of objects it allocates (0: not an allocation benchmark).
declare -A TITLE MV_SRC JCLASS GOBIN ARG OBJECTS
PROGS=()
add_prog() {
  PROGS+=("$1")
  TITLE[$1]=$2 MV_SRC[$1]=$3 JCLASS[$1]=$4 GOBIN[$1]=$5 ARG[$1]=$6 OBJECTS[$1]=$7
}
# Nodes binary_trees allocates at argument N (its main, counted).
bt_objects() {
  awk -v n="$1" 'BEGIN { m = (n < 6 ? 6 : n); t = 2 ^ (m + 2) - 1 + 2 ^ (m + 1) - 1
                         for (d = 4; d <= m; d += 2) t += 2 ^ (m - d + 4) * (2 ^ (d + 1) - 1)
                         printf "%d", t }'
}
# alloc_mix prints its own object count ("... N objects, check: ...").
mix_objects() { awk -v n="$1" 'BEGIN { printf "%d", 2 * n + int((n + 15) / 16) + int((n + 1023) / 1024) + int((n + 32767) / 32768) }'; }

add_prog startup "start-up: fib(1)" "$HERE/fib.mv" Fib fib 1 0
add_prog alloc32 "alloc32: $ALLOC_N objects of two fields" "$HERE/alloc32.mv" AllocLoop alloc_loop "$ALLOC_N" "$ALLOC_N"
add_prog alloc_mix "alloc_mix: $MIX_N iterations (nodes, 24 B, 1,000 B, 100 KB, 2 MiB)" \
  "$COMPARE/alloc_mix.mv" AllocMix alloc_mix "$MIX_N" "$(mix_objects "$MIX_N")"
add_prog fib "fib($FIB_N)" "$HERE/fib.mv" Fib fib "$FIB_N" 0
for d in $BT_DEPTHS; do
  add_prog "bt$d" "binary trees, depth $d" "$HERE/../programs/binary_trees.mv" BinaryTrees binary_trees "$d" "$(bt_objects "$d")"
done

CONFIGS=(off auto eager g1 par go)
declare -A CNAME=([off]="minivm --jit=off" [auto]="minivm --jit=auto" [eager]="minivm --jit=eager"
  [g1]="HotSpot G1" [par]="HotSpot ParallelGC" [go]="Go")

# run_config CONFIG PROG OUT: one timed run; prints "CPU_S WALL_S EXIT_CODE".
run_config() {
  local c=$1 p=$2 out=$3
  case $c in
    off | auto | eager) cpu_run "$out" "$MV" --jit="$c" "${MV_SRC[$p]}" "${ARG[$p]}" ;;
    g1) cpu_run "$out" "$JAVA" -XX:+UseG1GC "${JAVA_FIXED_HEAP[@]}" -cp "$TMP/java" "${JCLASS[$p]}" "${ARG[$p]}" ;;
    par) cpu_run "$out" "$JAVA" -XX:+UseParallelGC "${JAVA_FIXED_HEAP[@]}" -cp "$TMP/java" "${JCLASS[$p]}" "${ARG[$p]}" ;;
    go) cpu_run "$out" "$TMP/go/${GOBIN[$p]}" "${ARG[$p]}" ;;
  esac
}

status=0
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "minivm: copy of $MINIVM_ORIG ($("$MV" --version 2>&1 | head -1); built $(date -u -r "$MINIVM_ORIG" '+%F %T UTC'); sha256 $(sha256sum "$MV" | cut -c1-12))"
echo "java: $("$JAVA" -version 2>&1 | head -1), ${JAVA_FIXED_HEAP[*]}; go: $("$GO" version), GOGC=${GOGC:-100}"
echo "each figure: median of $RUNS interleaved rounds; cpu_s = user + sys of the whole process; net_s = cpu_s - that configuration's start-up cpu_s"
echo "x G1, x Par, x Go: this row's cpu_s / that runtime's cpu_s (net_s / net_s in parentheses); below 1 = less CPU than it"

# --- the interleaved rounds --------------------------------------------------
declare -A CPU WALL BAD
for ((r = 1; r <= RUNS; r++)); do
  echo "round $r/$RUNS, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  for p in "${PROGS[@]}"; do
    for c in "${CONFIGS[@]}"; do
      read -r cpu wall rc <<<"$(run_config "$c" "$p" "$TMP/out")"
      if [[ $rc != 0 ]]; then
        echo "FAILED: ${CNAME[$c]} on $p exited with $rc: $(head -1 "$TMP/out.err")" >&2
        BAD[$p,$c]="exit $rc"
        status=1
        continue
      fi
      if [[ $r == 1 && $c == off ]]; then
        cp "$TMP/out" "$TMP/ref.$p"
      elif ! cmp -s "$TMP/out" "$TMP/ref.$p"; then
        echo "OUTPUT MISMATCH: ${CNAME[$c]} on $p differs from minivm --jit=off's output" >&2
        BAD[$p,$c]="output differs"
        status=1
        continue
      fi
      CPU[$p,$c]+="$cpu "
      WALL[$p,$c]+="$wall "
    done
  done
done

# --- tables -------------------------------------------------------------------
# MED / MEDW[P,C]: median cpu_s / wall_s of program P under configuration C,
# unset if a run of it failed or printed something else.
declare -A MED MEDW
for p in "${PROGS[@]}"; do
  for c in "${CONFIGS[@]}"; do
    if [[ -n ${CPU[$p,$c]:-} && -z ${BAD[$p,$c]:-} ]]; then
      # shellcheck disable=SC2086  # the lists split into numbers on purpose
      MED[$p,$c]=$(printf '%s\n' ${CPU[$p,$c]} | median)
      # shellcheck disable=SC2086
      MEDW[$p,$c]=$(printf '%s\n' ${WALL[$p,$c]} | median)
    fi
  done
done
# net P C: cpu_s minus the start-up cpu_s of the same configuration (n/a
# without both).
net() {
  if [[ -z ${MED[$1,$2]:-} || -z ${MED[startup,$2]:-} ]]; then
    echo n/a
  else
    awk -v a="${MED[$1,$2]}" -v b="${MED[startup,$2]}" 'BEGIN { printf "%.3f", a - b }'
  fi
}
# pos_ratio A B: A / B, or n/a unless both are positive (a net_s at or below
# zero says the program ran too briefly to tell from start-up).
pos_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
# both P C REF: "whole (net)" ratio of configuration C to REF on program P.
both() {
  [[ -z ${MED[$1,$2]:-} || -z ${MED[$1,$3]:-} ]] && { echo n/a; return; }
  if [[ $1 == startup ]]; then
    ratio "${MED[$1,$2]}" "${MED[$1,$3]}"
  else
    echo "$(ratio "${MED[$1,$2]}" "${MED[$1,$3]}") ($(pos_ratio "$(net "$1" "$2")" "$(net "$1" "$3")"))"
  fi
}
# rate OBJECTS SECONDS: millions of objects per second (n/a unless SECONDS > 0).
rate() { awk -v o="$1" -v s="$2" 'BEGIN { if (s + 0 > 0) printf "%.1f", o / s / 1e6; else print "n/a" }'; }

for p in "${PROGS[@]}"; do
  echo
  echo "== ${TITLE[$p]} =="
  allocs=${OBJECTS[$p]}
  head=$(printf '%-20s %8s %8s %8s %13s %13s %13s' runtime cpu_s wall_s net_s "x G1" "x Par" "x Go")
  [[ $allocs != 0 ]] && head+=$(printf ' %17s' "Mobj/cpu_s (net)")
  echo "$head"
  for c in "${CONFIGS[@]}"; do
    if [[ -n ${BAD[$p,$c]:-} ]]; then
      printf '%-20s %s\n' "${CNAME[$c]}" "${BAD[$p,$c]}: no figures"
      continue
    fi
    n=$(net "$p" "$c")
    [[ $p == startup ]] && n=-
    row=$(printf '%-20s %8s %8s %8s %13s %13s %13s' "${CNAME[$c]}" "${MED[$p,$c]}" "${MEDW[$p,$c]}" "$n" \
      "$(both "$p" "$c" g1)" "$(both "$p" "$c" par)" "$(both "$p" "$c" go)")
    [[ $allocs != 0 ]] && row+=$(printf ' %17s' "$(rate "$allocs" "${MED[$p,$c]}") ($(rate "$allocs" "$n"))")
    echo "$row"
  done
done

echo
echo "== summary =="
for p in "${PROGS[@]}"; do
  [[ ${OBJECTS[$p]} == 0 || -z ${MED[$p,auto]:-} ]] && continue
  # Same objects in both: the rate ratio is the inverse of the CPU ratio.
  echo "allocation rate, minivm --jit=auto / HotSpot, ${TITLE[$p]}: G1 $(both "$p" g1 auto), ParallelGC $(both "$p" par auto)"
done
for p in "${PROGS[@]}"; do
  [[ $p == fib || $p == bt* ]] || continue
  [[ -n ${MED[$p,off]:-} && -n ${MED[$p,auto]:-} ]] || continue
  echo "speedup of --jit=auto over --jit=off (cpu_s off / auto), ${TITLE[$p]}: $(both "$p" off auto)"
done
echo "load at end of the rounds: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
# compile_times LABEL PATTERN MINIVM_ARGS...: per-function compile times of
# the "[jit] PATTERN NAME (N bytes of bytecode) in Tms" lines.
compile_times() {
  local label=$1 pattern=$2
  shift 2
  : >"$TMP/ms"
  for p in "$HERE"/*.mv "$HERE"/../programs/*.mv "$HERE"/../../examples/programs/*.mv; do
    "$MV" "$@" --verbose:jit "$p" 1 2>&1 >/dev/null |
      sed -n "s/^\[jit\] $pattern .* (\([0-9]*\) bytes of bytecode) in \([0-9.]*\)ms.*\$/\1 \2/p" >>"$TMP/ms" || true
  done
  sort -k2 -g "$TMP/ms" | awk -v label="$label" '{ b[NR] = $1; t[NR] = $2; sb += $1; st += $2 }
    END { printf "%s: %d functions, %d bytes of bytecode: median %.2f ms, mean %.2f ms, max %.2f ms (%.1f us per bytecode byte)\n",
          label, NR, sb, t[int((NR + 1) / 2)], st / NR, t[NR], 1000 * st / sb }'
}
echo "== compile time per function (--verbose:jit) =="
# Eager's quick tier compiles every function; its tier-up at threshold 1
# optimises (--jit-opt=2 and inlining) every function that runs.
compile_times "quick tier (--jit=eager)" compiled --jit=eager
compile_times "optimising tier (--jit=eager --jit-threshold=1 --jit-sync)" optimised \
  --jit=eager --jit-threshold=1 --jit-sync
echo "(the first function of each process also pays LLVM's one-time set-up)"
exit $status
