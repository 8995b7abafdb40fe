# Shell helpers shared by the whole-program comparison scripts
# (compare/run_compare.sh, jit/run_jit_compare.sh). Source it; it expects
# RUNS to be set and sets `status` to 1 on an output mismatch.

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
