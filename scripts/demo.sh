#!/usr/bin/env bash
# The main job: installs what is missing, builds minivm (Release), and runs a
# realistic program with a leak (examples/programs/leaky_cache.mv: a cache
# that never evicts, beside steady-state garbage) under the heapprof agent.
# It prints the top allocation sites by live and by allocated bytes, and
# writes build/heap.pb.gz for `go tool pprof`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target minivm heapprof >/dev/null
echo "== examples/programs/leaky_cache.mv under heapprof (64 KiB sampling interval, default heap)"
# No heap tuning: heapprof collects before the final profile, so what it
# reports as live is what the program still holds (docs/tools.md).
build/bin/minivm -agentlib:heapprof=file=build/heap.pb.gz,interval=64k \
  examples/programs/leaky_cache.mv
