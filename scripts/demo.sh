#!/usr/bin/env bash
# The main job: installs what is missing, builds minivm (Release), and runs a
# realistic program with a leak under a heap-sampling agent, printing where
# the memory goes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target minivm minimal >/dev/null
echo "== examples/programs/leaky_cache.mv under -agentlib:minimal (64 KiB sampling interval)"
build/bin/minivm -agentlib:minimal=65536 examples/programs/leaky_cache.mv
