#!/bin/sh
# The README's embedding recipe as a new user follows it: configure with `--prefix` somewhere
# other than /usr, `meson install`, set PKG_CONFIG_PATH as the README says, then build
# tests/readme_example.cpp (the README's example; readme_in_sync keeps the two equal) with the
# README's own g++ line and run it. The program must find libringrpc.so.2 through the rpath the
# .pc file gives, with no LD_LIBRARY_PATH and no ldconfig.
# The core is compiled again (tools, tests, benchmarks, TLS and discovery off) in a fixed
# directory under the build tree, so a second run is mostly compiler-cache hits.
# Exit 77 (skipped) in a sanitizer build or where io_uring is unavailable.
# Usage: prefix_install_test.sh SOURCE_ROOT BUILD_ROOT B_SANITIZE
set -eu
src=$1 buildroot=$2
if [ "$3" != none ]; then echo "skipped: b_sanitize=$3"; exit 77; fi
# meson test points LD_LIBRARY_PATH at the build tree's libraries; a user has none of that.
unset LD_LIBRARY_PATH
work=$buildroot/prefix_install_test
rm -rf "$work"
mkdir -p "$work/app"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

meson setup "$work/build" "$src" --prefix "$work/prefix" -Dbuildtype=release -Dtests=false \
  -Dbenchmarks=false -Dtools=false -Dtls=disabled -Ddiscovery=disabled >"$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; fail "meson setup --prefix"; }
ninja -C "$work/build" -j"${RINGRPC_JOBS:-2}" >"$work/ninja.log" 2>&1 ||
  { tail -n 50 "$work/ninja.log" >&2; fail "building the core"; }
meson install -C "$work/build" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "meson install"; }

pc=$(find "$work/prefix" -name ringrpc.pc | head -n1)
[ -n "$pc" ] || fail "no ringrpc.pc under the prefix"
grep -q 'rpath' "$pc" || fail "ringrpc.pc gives no rpath: $(grep '^Libs:' "$pc")"

# The README's lines, as written: the PKG_CONFIG_PATH it names (with DIR replaced) and the one
# g++ line of its Embedding section.
readme=$src/README.md
# shellcheck disable=SC2016  # backquotes and $( are the README's text, not the shell's
pcpath=$(sed -n 's/.*`export PKG_CONFIG_PATH=DIR\(\/[^`]*\)`.*/\1/p' "$readme" | head -n1)
[ -n "$pcpath" ] || fail "README.md names no PKG_CONFIG_PATH for a prefix"
[ "$work/prefix$pcpath" = "$(dirname "$pc")" ] ||
  fail "README.md says the .pc files are in DIR$pcpath; they are in $(dirname "$pc")"
# shellcheck disable=SC2016
line=$(grep -m1 '^    g++ -std=c++20 main.cpp \$(pkg-config --cflags --libs ringrpc)' "$readme" | sed 's/^    //')
[ -n "$line" ] || fail "README.md has no pkg-config build line"
echo "README: $line"
cp "$src/tests/readme_example.cpp" "$work/app/main.cpp"
out=$(cd "$work/app" && PKG_CONFIG_PATH="$work/prefix$pcpath" && export PKG_CONFIG_PATH &&
  timeout 120 sh -c "$line" 2>"$work/run.err") || {
  rc=$?
  grep -qi io_uring "$work/run.err" && { echo "skipped: io_uring unavailable here"; exit 77; }
  cat "$work/run.err" >&2
  fail "the README's line exited $rc"
}
echo "./main: $out"
[ "$out" = "hello, ringrpc" ] || fail "./main printed '$out', not 'hello, ringrpc'"
ldd "$work/app/main" | grep -q "libringrpc.so.2 => $work/prefix/" ||
  fail "main does not load libringrpc.so.2 from the prefix"
echo "PASS"
