#!/usr/bin/env bash
# Compares minivm's allocator and collector with OpenJDK 17 and Go in one
# run, and prints three tables (docs/performance.md ("Collector performance") quotes them):
#
#   1. binary trees (binary_trees.mv / BinaryTrees.java / binary_trees.go):
#      allocation of short-lived small objects plus one long-lived tree;
#      median wall time and the GC time share of each runtime.
#   2. alloc_threads: N threads each allocating M small short-lived objects;
#      objects per second of whole-process wall time.
#   3. survivors.mv (minivm only): minor pause versus bytes surviving, for
#      several live volumes and eden sizes; the copy rate. Run with
#      --heap=2g: with --young=512m in the default 1g heap the promotion
#      guarantee (old free >= 1.33 x young used) fails and every collection
#      is a full one.
#
#   benchmarks/compare/run_compare.sh [path/to/minivm]
#
# Environment: RUNS (default 3; each time is the median of RUNS runs),
# DEPTHS (default "18 20"), THREADS (default "1 4"), OBJECTS (per thread,
# default 20000000), YOUNGS (default "32m 128m 512m"), SURV_MINORS (about
# how many minor collections each survivors.mv run has, default 25),
# SMALL_YOUNGS (--young sizes for the 32-byte-entry table, default 128m),
# JAVA/JAVAC/GO (default from PATH).
# Needs java and javac (OpenJDK 17) and go (Debian: apt-get install
# golang-go). The Java and Go programs are built into a temporary directory.
# Each program's output is compared with minivm's before timing.
#
# GC time share: one extra run per runtime with its GC log on, the sum of its
# stop-the-world pauses divided by that run's wall time:
#   minivm --verbose:gc   "[gc] minor (...) A->B (C) X.XXXms"
#   java -Xlog:gc         "GC(n) Pause ... X.XXXms"   (G1's concurrent phases excluded)
#   go GODEBUG=gctrace=1  "gc n @t s P%: a+b+c ms clock"  (a + c are STW; b is
#                          concurrent marking; P% is Go's own cumulative GC CPU share)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# median_seconds, median, same_output, ratio, private_minivm
source "$HERE/../lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
private_minivm "$0" "${1:-}"
RUNS=${RUNS:-3}
DEPTHS=${DEPTHS:-"18 20"}
THREADS=${THREADS:-"1 4"}
OBJECTS=${OBJECTS:-20000000}
YOUNGS=${YOUNGS:-"32m 128m 512m"}
SURV_MINORS=${SURV_MINORS:-25}
SMALL_YOUNGS=${SMALL_YOUNGS:-128m}
JAVA=${JAVA:-java}
JAVAC=${JAVAC:-javac}
GO=${GO:-go}
BT_MV=$HERE/../programs/binary_trees.mv

# --- build ---------------------------------------------------------------
"$JAVAC" -d "$TMP/java" "$HERE/BinaryTrees.java" "$HERE/AllocThreads.java"
mkdir -p "$TMP/go"
for p in binary_trees alloc_threads; do
  (cd "$TMP/go" && GOCACHE=$TMP/gocache GO111MODULE=off "$GO" build -o "$p" "$HERE/$p.go")
done

# --- helpers ---------------------------------------------------------------
# timed_log OUT CMD...: runs CMD once with stdout+stderr to OUT; prints wall s.
timed_log() {
  local out=$1 start end
  shift
  start=$(date +%s%N)
  "$@" >"$out" 2>&1
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}


# Sums of stop-the-world pause milliseconds in each runtime's GC log.
mv_pause_ms() { awk '/^\[gc\]/ { s += $NF + 0; n++ } END { printf "%.1f %d\n", s, n }' "$1"; }
java_pause_ms() {
  grep -E 'GC\([0-9]+\) Pause' "$1" |
    awk '{ v = $NF; sub(/ms$/, "", v); s += v; n++ } END { printf "%.1f %d\n", s, n }'
}
go_pause_ms() {
  awk '/^gc [0-9]+ @/ { split($5, c, "+"); s += c[1] + c[3]; n++; cpu = $4; sub(/:$/, "", cpu) }
       END { printf "%.1f %d %s\n", s, n, cpu }' "$1"
}
share() { awk -v ms="$1" -v s="$2" 'BEGIN { printf "%.1f%%", 100 * ms / 1000 / s }'; }

status=0
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "minivm: copy of $MINIVM_ORIG ($("$MINIVM" --version 2>&1 | head -1); built $(date -u -r "$MINIVM_ORIG" '+%F %T UTC'); sha256 $(sha256sum "$MINIVM" | cut -c1-12))"
echo "java: $("$JAVA" -version 2>&1 | head -1); go: $("$GO" version)"
echo "each time: median of $RUNS runs, whole-process wall time (date +%s%N)"

# --- 1. binary trees ---------------------------------------------------------
echo
echo "== 1. binary trees (benchmarks-game, single-threaded): wall time, GC share =="
printf '%-5s %-18s %8s %9s %7s %8s %s\n' depth runtime median_s minivm/x log_run_s gc_share "pauses (n, sum ms)"
for d in $DEPTHS; do
  "$MINIVM" "$BT_MV" "$d" >"$TMP/bt.ref"
  same_output "java BinaryTrees $d" "$TMP/bt.ref" "$JAVA" -XX:+UseParallelGC -cp "$TMP/java" BinaryTrees "$d"
  same_output "go binary_trees $d" "$TMP/bt.ref" "$TMP/go/binary_trees" "$d"

  t_mv=$(median_seconds "$MINIVM" "$BT_MV" "$d")
  t_par=$(median_seconds "$JAVA" -XX:+UseParallelGC -cp "$TMP/java" BinaryTrees "$d")
  t_g1=$(median_seconds "$JAVA" -cp "$TMP/java" BinaryTrees "$d")
  t_go=$(median_seconds "$TMP/go/binary_trees" "$d")

  w=$(timed_log "$TMP/mv.log" "$MINIVM" --verbose:gc "$BT_MV" "$d")
  read -r ms n <<<"$(mv_pause_ms "$TMP/mv.log")"
  printf '%-5s %-18s %8s %9s %7s %8s %s\n' "$d" "minivm" "$t_mv" "1.00" "$w" "$(share "$ms" "$w")" "$n, $ms"
  w=$(timed_log "$TMP/par.log" "$JAVA" -XX:+UseParallelGC -Xlog:gc -cp "$TMP/java" BinaryTrees "$d")
  read -r ms n <<<"$(java_pause_ms "$TMP/par.log")"
  printf '%-5s %-18s %8s %9s %7s %8s %s\n' "$d" "java ParallelGC" "$t_par" "$(ratio "$t_mv" "$t_par")" "$w" "$(share "$ms" "$w")" "$n, $ms"
  w=$(timed_log "$TMP/g1.log" "$JAVA" -Xlog:gc -cp "$TMP/java" BinaryTrees "$d")
  read -r ms n <<<"$(java_pause_ms "$TMP/g1.log")"
  printf '%-5s %-18s %8s %9s %7s %8s %s\n' "$d" "java G1 (default)" "$t_g1" "$(ratio "$t_mv" "$t_g1")" "$w" "$(share "$ms" "$w")" "$n, $ms"
  w=$(GODEBUG=gctrace=1 timed_log "$TMP/go.log" "$TMP/go/binary_trees" "$d")
  read -r ms n cpu <<<"$(go_pause_ms "$TMP/go.log")"
  printf '%-5s %-18s %8s %9s %7s %8s %s\n' "$d" "go (GOGC=100)" "$t_go" "$(ratio "$t_mv" "$t_go")" "$w" "$(share "$ms" "$w")" "$n, $ms STW; gctrace GC CPU $cpu"
done

# --- 2. allocation rate with threads -----------------------------------------
echo
echo "== 2. alloc_threads: N threads x $OBJECTS small short-lived objects each =="
printf '%-7s %-18s %8s %12s %9s\n' threads runtime median_s Mobjects/s minivm/x
for n in $THREADS; do
  total=$((n * OBJECTS))
  "$MINIVM" "$HERE/alloc_threads.mv" "$n" "$OBJECTS" >"$TMP/at.ref"
  same_output "java AllocThreads" "$TMP/at.ref" "$JAVA" -cp "$TMP/java" AllocThreads "$n" "$OBJECTS"
  same_output "go alloc_threads" "$TMP/at.ref" "$TMP/go/alloc_threads" "$n" "$OBJECTS"
  t_mv=$(median_seconds "$MINIVM" "$HERE/alloc_threads.mv" "$n" "$OBJECTS")
  t_par=$(median_seconds "$JAVA" -XX:+UseParallelGC -cp "$TMP/java" AllocThreads "$n" "$OBJECTS")
  t_g1=$(median_seconds "$JAVA" -cp "$TMP/java" AllocThreads "$n" "$OBJECTS")
  t_go=$(median_seconds "$TMP/go/alloc_threads" "$n" "$OBJECTS")
  rate_mv=$(awk -v o="$total" -v s="$t_mv" 'BEGIN { printf "%.1f", o / s / 1e6 }')
  for pair in "minivm:$t_mv" "java ParallelGC:$t_par" "java G1 (default):$t_g1" "go (GOGC=100):$t_go"; do
    name=${pair%:*}
    secs=${pair##*:}
    rate=$(awk -v o="$total" -v s="$secs" 'BEGIN { printf "%.1f", o / s / 1e6 }')
    printf '%-7s %-18s %8s %12s %9s\n' "$n" "$name" "$secs" "$rate" "$(ratio "$rate_mv" "$rate")"
  done
done

# --- 3. minor pause versus survivors (minivm) ----------------------------------
# Each run allocates SURV_MINORS edens' worth (at least 2 GiB), so every
# configuration has about that many minor collections. On a loaded machine a
# pause longer than a scheduler time slice is sometimes preempted and gains
# ~10 ms: the minimum over a run's collections is the unpreempted cost, the
# median shows how often that happens.
# survivors_table SLOTS YOUNG...: one block of rows per --young size.
survivors_table() {
  local slots=$1 y young_mib alloc_mib live n full after med mn mx base_after base_ms surv rate ring
  shift
  local entry=$((24 + 8 * slots))
  echo "   entries: Array($slots) of $entry B; survived = after - after at live 0 (same --young) - the"
  echo "   old-generation ring (8 B per entry, not copied); GB/s = survived / (min - min at live 0)"
  printf '%-6s %8s %7s %9s %9s %9s %9s %9s %7s\n' young live_KiB minors after_MiB surv_MiB min_ms median_ms max_ms GB/s
  for y in "$@"; do
    base_after=""
    base_ms=""
    young_mib=$(awk -v y="$y" 'BEGIN { v = y + 0; if (y ~ /g$/) v *= 1024; print v }')
    alloc_mib=$(awk -v y="$young_mib" -v n="$SURV_MINORS" 'BEGIN { a = int(y * 0.8 * n); print (a < 2048 ? 2048 : a) }')
    : >"$TMP/fit.txt"
    for live in 0 512 1024 2048 3072 4096 8192 16384 32768; do
      # Keep live data within one survivor space (young/10): beyond it the
      # excess is promoted, which is a different (slower) copy.
      awk -v l="$live" -v y="$young_mib" 'BEGIN { exit !(l / 1024 <= y / 10 * 0.95) }' || continue
      "$MINIVM" --verbose:gc --heap=2g --young="$y" "$HERE/survivors.mv" "$live" "$alloc_mib" "$slots" \
        >/dev/null 2>"$TMP/s.log"
      awk '/^\[gc\] minor/ { i++; if (i <= 2) next; for (f = 1; f <= NF; f++) if ($f ~ /->/) { split($f, ab, "->"); a = ab[2] } sub(/M$/, "", a);
           print a + 0, $NF + 0 }' "$TMP/s.log" >"$TMP/s.txt"
      n=$(wc -l <"$TMP/s.txt")
      full=$(grep -c '^\[gc\] full' "$TMP/s.log" || true)
      [[ "$full" != 0 ]] && echo "   note: $full full collections at --young=$y live=$live KiB"
      after=$(cut -d' ' -f1 "$TMP/s.txt" | median)
      med=$(cut -d' ' -f2 "$TMP/s.txt" | median)
      mn=$(cut -d' ' -f2 "$TMP/s.txt" | sort -g | head -1)
      mx=$(cut -d' ' -f2 "$TMP/s.txt" | sort -g | tail -1)
      if [[ -z "$base_after" ]]; then
        base_after=$after
        base_ms=$mn
      fi
      ring=$(awk -v l="$live" -v e="$entry" 'BEGIN { k = int(l * 1024 / e); print (k > 1 ? k * 8 / 1048576 : 0) }')
      surv=$(awk -v a="$after" -v b="$base_after" -v r="$ring" 'BEGIN { v = a - b - r; printf "%.1f", (v > 0 ? v : 0) }')
      rate=$(awk -v s="$surv" -v m="$mn" -v b="$base_ms" 'BEGIN { if (s > 0 && m > b) printf "%.2f", s * 1048576 / ((m - b) / 1000) / 1e9; else print "-" }')
      printf '%-6s %8s %7s %9s %9s %9s %9s %9s %7s\n' "$y" "$live" "$n" "$after" "$surv" "$mn" "$med" "$mx" "$rate"
      echo "$surv $mn" >>"$TMP/fit.txt"
    done
    # Least-squares line through (survived MiB, min pause ms).
    awk -v y="$y" '{ x += $1; z += $2; xx += $1 * $1; xz += $1 * $2; n++ }
      END { b = (n * xz - x * z) / (n * xx - x * x); a = (z - b * x) / n;
            printf "   fit --young=%s: min pause = %.3f ms + %.3f ms/MiB x survived  (copy rate %.2f GB/s)\n", y, a, b, 1048576 / (b / 1000) / 1e9 }' "$TMP/fit.txt"
  done
}

echo
echo "== 3. survivors.mv: minor pause vs bytes surviving (minivm, --heap=2g) =="
echo "   (over a run's minor collections, the first two skipped: min/median/max pause, median heap used after)"
# shellcheck disable=SC2086  # the lists split into arguments on purpose
survivors_table 29 $YOUNGS
echo
echo "== 3b. the same with small (32 B) entries: per-object cost =="
# shellcheck disable=SC2086
survivors_table 1 $SMALL_YOUNGS

echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
