#!/usr/bin/env bash
# Builds and runs minivm's whole test suite:
#   1. Release build, warnings as errors: unit tests, language tests, agent tests,
#      each with the interpreter and in the JIT modes (docs/jit.md, "Testing"),
#      the tool and collector tests.
#   2. ASan+UBSan build: the same suite, less the eager-only JIT runs.
#   3. TSan build: the suite with the interpreter in full; its JIT runs take
#      only the programs that start threads (docs/jit.md, "Testing").
#   4. The compiler fuzzer (libFuzzer, clang) for a bounded time, then the
#      collector's record-parser fuzzer; the two share the time budget.
# Exits non-zero if anything fails. The last line totals every ctest run.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

jobs=$(nproc)
fuzz_seconds=${MINIVM_FUZZ_SECONDS:-120}
# Stage 4's budget, split: the collector fuzzer gets half.
collector_fuzz_seconds=$((fuzz_seconds / 2))
fuzz_seconds=$((fuzz_seconds - collector_fuzz_seconds))
status=0
passed=0
failed=0

build() {  # build DIR [cmake args...]; BUILD_TARGET=name builds one target
  local dir=$1
  shift
  cmake -S . -B "$dir" -DMINIVM_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j"$jobs" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
}

run_ctest() {  # run_ctest DIR [ctest args...]
  local dir=$1
  shift
  local log
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1]))
    passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  else
    failed=$((failed + 1))  # ctest itself did not run
  fi
  rm -f "$log"
  [ "$rc" -eq 0 ] || status=1
}


echo "== [1/4] release build and tests"
if build build -DCMAKE_BUILD_TYPE=Release; then run_ctest build; else status=1; failed=$((failed + 1)); fi

echo "== [2/4] ASan+UBSan build and tests"
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DMINIVM_SANITIZE=address -DMINIVM_BUILD_BENCHMARKS=OFF; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest build-asan
else status=1; failed=$((failed + 1)); fi

echo "== [3/4] TSan build and tests"
if build build-tsan -DCMAKE_BUILD_TYPE=Debug -DMINIVM_SANITIZE=thread -DMINIVM_BUILD_BENCHMARKS=OFF; then
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build-tsan
else status=1; failed=$((failed + 1)); fi

# fuzz NAME TARGET SECONDS [libFuzzer args...]: builds TARGET in build-fuzz and
# runs it for SECONDS on a fresh corpus seeded from the checked-in one.
fuzz() {
  local name=$1 target=$2 seconds=$3
  shift 3
  echo "== [4/4] $name, ${seconds}s"
  if ! CC=clang CXX=clang++ BUILD_TARGET=$target build build-fuzz -DCMAKE_BUILD_TYPE=Debug \
       -DMINIVM_FUZZ=ON -DMINIVM_BUILD_BENCHMARKS=OFF -DMINIVM_WERROR=OFF; then
    status=1; failed=$((failed + 1)); return
  fi
  local corpus log=build-fuzz/$target.log
  corpus=$(mktemp -d)
  if build-fuzz/tests/fuzz/$target -max_total_time="$seconds" -print_final_stats=1 "$@" \
       "$corpus" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "$name: no crash in ${seconds}s ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') inputs)"
  else
    failed=$((failed + 1)); status=1
    tail -40 "$log"
  fi
  rm -rf "$corpus"
}
fuzz "compiler fuzzer" compile_fuzzer "$fuzz_seconds" tests/fuzz/corpus
fuzz "collector record-parser fuzzer" collector_fuzzer "$collector_fuzz_seconds" \
  -dict=tests/fuzz/collector.dict tests/fuzz/collector_corpus

echo "suite: $passed passed, $failed failed"
exit $status
