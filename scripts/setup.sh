#!/usr/bin/env bash
# Installs the Debian 12 packages minivm needs, if any is missing.
# Idempotent: does nothing (and needs no network) when all are present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config python3   # toolchain, test runner
  libabsl-dev                                # containers, Status, synchronization, strings
  libgtest-dev libgmock-dev                  # unit tests
  libbenchmark-dev                           # benchmarks
  clang libclang-rt-14-dev                   # libFuzzer target (tests/fuzz)
  zlib1g-dev                                 # tool agents: gzipped pprof profiles
  golang-go graphviz                         # tests/tools: `go tool pprof` reads our profiles
  llvm-19-dev                                # the JIT tier (LLVM ORC)
  libcpp-httplib-dev                         # heapprof's live endpoint (net/http/pprof)
  nlohmann-json3-dev                         # JSON output (lifetimes)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
