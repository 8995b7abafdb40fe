#!/usr/bin/env bash
# The install is usable by an agent author outside this tree:
#   1. `cmake --install` into a fresh prefix;
#   2. examples/agents/minimal builds on its own with find_package(minivm)
#      (target minivm::vmti), and with pkg-config (minivm-vmti);
#   3. the installed minivm finds an installed agent with -agentlib.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/vmti/vmti.h"
# minivm-attach (docs/attach.md) is installed beside minivm.
test -x "$work/prefix/bin/minivm-attach"

cmake -S "$src/examples/agents/minimal" -B "$work/agent" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/agent" >/dev/null
test -f "$work/agent/libminimal.so"

PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" cc -std=c99 -shared -fPIC \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags minivm-vmti) \
  "$src/examples/agents/minimal/minimal.c" -o "$work/libviapc.so"

printf 'class C { a }\nfn main() { var i = 0; while (i < 100000) { new C(); i = i + 1; } }\n' > "$work/p.mv"
out=$("$work/prefix/bin/minivm" -agentlib:minimal=0 "$work/p.mv")
echo "$out"
# Interval 0 samples every allocation: exactly 100000 objects of class C.
echo "$out" | grep -Eq '^C +100000 +100000 +2400000$'
out=$("$work/prefix/bin/minivm" "-agentpath:$work/libviapc.so=0" "$work/p.mv")
echo "$out" | grep -Eq '^C +100000 '
echo "install: ok"
