# Shell helpers shared by the whole-program comparison scripts
# (compare/run_compare.sh, jit/run_jit_compare.sh). Source it (bash 5: it
# reads EPOCHREALTIME); median_seconds expects RUNS to be set, same_output
# sets `status` to 1 on an output mismatch.

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# private_minivm SCRIPT [PATH]: PATH (default build/bin/minivm) must be an
# executable, else a usage line and exit 2. Sets MINIVM_ORIG to its absolute
# path and MINIVM to a private copy in $TMP (which must exist): a rebuild of
# the original during the run must not change the binary between tables.
private_minivm() {
  local script=$1 path=${2:-$LIB_DIR/../build/bin/minivm}
  if [[ ! -x "$path" ]]; then
    echo "$script: not an executable: $path (usage: $script [path/to/minivm])" >&2
    exit 2
  fi
  MINIVM_ORIG=$(cd "$(dirname "$path")" && pwd)/$(basename "$path")
  cp "$MINIVM_ORIG" "$TMP/minivm"
  MINIVM=$TMP/minivm
}

# median_seconds CMD...: median whole-process wall time of RUNS runs.
median_seconds() {
  local start end
  local -a t=()
  for ((r = 0; r < RUNS; r++)); do
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    t+=($((end - start)))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.3f\n", a[int((NR + 1) / 2)] / 1e9 }'
}

# cpu_run OUT CMD...: runs CMD once, its stdout to file OUT and its stderr to
# OUT.err, and prints "CPU_S WALL_S EXIT_CODE". CPU_S is user + sys of CMD's
# process and of everything it waited for, all threads included (getrusage
# RUSAGE_CHILDREN, as bash's `times` prints it, to the millisecond). The
# subshell starts with zero child usage, so it counts CMD alone; the clock is
# read with EPOCHREALTIME, not date, because a forked date would be counted.
cpu_run() {
  local out=$1
  shift
  local r
  r=$(
    s=$EPOCHREALTIME
    "$@" >"$out" 2>"$out.err"
    rc=$?
    e=$EPOCHREALTIME
    echo "$rc $s $e"
    times
  )
  # times: line 2 is the shell's own usage, line 3 its children's, as
  # "XmY.YYYs XmY.YYYs" (user, sys).
  awk 'function sec(t) { sub(/s$/, "", t); split(t, p, "m"); return p[1] * 60 + p[2] }
       NR == 1 { rc = $1; wall = $3 - $2 }
       NR == 3 { cpu = sec($1) + sec($2) }
       END { printf "%.3f %.3f %d\n", cpu, wall, rc }' <<<"$r"
}

# median: the median of the numbers on stdin, one a line (0 if none).
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }'; }

# same_output NAME REF CMD...: CMD's stdout must equal file REF.
same_output() {
  local name=$1 ref=$2
  shift 2
  if ! "$@" 2>/dev/null | cmp -s - "$ref"; then
    echo "OUTPUT MISMATCH: $name differs from minivm's output" >&2
    status=1
  fi
}

# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
