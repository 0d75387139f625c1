#!/bin/sh
# The README's embedding recipe as a new user follows it: a build configured with `--prefix`
# somewhere other than /usr, `meson install`, PKG_CONFIG_PATH set as the README says, then
# tests/readme_example.cpp and tests/readme_coroutine_example.cpp (the README's examples;
# readme_in_sync keeps them equal) built with the README's own g++ line and run. The program must find libringrpc.so.3 through the rpath the
# .pc file gives, with no LD_LIBRARY_PATH and no ldconfig.
# It installs THIS build, so it needs a build whose prefix is a scratch directory beside it:
# BUILD_ROOT-prefix (scripts/lib.sh configures build/release with --prefix=build/release-prefix).
# Any other prefix (/usr/local by default) is never written to: the test skips. Installing the
# build under test, rather than compiling the core again for a prefix of the test's own, saves
# scripts/test a whole build of the library.
# Exit 77 (skipped) in a sanitizer build, without a scratch prefix, or without io_uring.
# Usage: prefix_install_test.sh SOURCE_ROOT BUILD_ROOT B_SANITIZE
set -eu
src=$1 buildroot=$2
if [ "$3" != none ]; then echo "skipped: b_sanitize=$3"; exit 77; fi
# meson test points LD_LIBRARY_PATH at the build tree's libraries; a user has none of that.
unset LD_LIBRARY_PATH
fail() { echo "FAIL: $*" >&2; exit 1; }

scratch=$(cd "$buildroot" && pwd)-prefix
prefix=$(meson introspect "$buildroot" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))') ||
  fail "cannot read the build's prefix"
if [ "$prefix" != "$scratch" ]; then
  echo "skipped: the build's prefix is $prefix, not the scratch prefix $scratch (configure with -Dprefix=$scratch)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ringrpc_prefix_install.XXXXXX")
mkdir -p "$work/app"
trap 'rm -rf "$work" "$scratch"' EXIT
rm -rf "$scratch"
meson install -C "$buildroot" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "meson install"; }

pc=$(find "$scratch" -name ringrpc.pc | head -n1)
[ -n "$pc" ] || fail "no ringrpc.pc under the prefix"
grep -q 'rpath' "$pc" || fail "ringrpc.pc gives no rpath: $(grep '^Libs:' "$pc")"

# The README's lines, as written: the PKG_CONFIG_PATH it names (with DIR replaced) and the one
# g++ line of its Embedding section.
readme=$src/README.md
# shellcheck disable=SC2016  # backquotes and $( are the README's text, not the shell's
pcpath=$(sed -n 's/.*`export PKG_CONFIG_PATH=DIR\(\/[^`]*\)`.*/\1/p' "$readme" | head -n1)
[ -n "$pcpath" ] || fail "README.md names no PKG_CONFIG_PATH for a prefix"
[ "$scratch$pcpath" = "$(dirname "$pc")" ] ||
  fail "README.md says the .pc files are in DIR$pcpath; they are in $(dirname "$pc")"
# shellcheck disable=SC2016
line=$(grep -m1 '^    g++ -std=c++20 main.cpp \$(pkg-config --cflags --libs ringrpc)' "$readme" | sed 's/^    //')
[ -n "$line" ] || fail "README.md has no pkg-config build line"
echo "README: $line"
cp "$src/tests/readme_example.cpp" "$work/app/main.cpp"
out=$(cd "$work/app" && PKG_CONFIG_PATH="$scratch$pcpath" && export PKG_CONFIG_PATH &&
  timeout 120 sh -c "$line" 2>"$work/run.err") || {
  rc=$?
  grep -qi io_uring "$work/run.err" && { echo "skipped: io_uring unavailable here"; exit 77; }
  cat "$work/run.err" >&2
  fail "the README's line exited $rc"
}
echo "./main: $out"
[ "$out" = "hello, ringrpc" ] || fail "./main printed '$out', not 'hello, ringrpc'"
ldd "$work/app/main" | grep -q "libringrpc.so.3 => $scratch/" ||
  fail "main does not load libringrpc.so.3 from the prefix"

# The README's second example (a coroutine handler awaiting a call), with the same line.
rm -f "$work/app/main"
cp "$src/tests/readme_coroutine_example.cpp" "$work/app/main.cpp"
out=$(cd "$work/app" && PKG_CONFIG_PATH="$scratch$pcpath" && export PKG_CONFIG_PATH &&
  timeout 120 sh -c "$line" 2>"$work/run.err") || {
  rc=$?
  cat "$work/run.err" >&2
  fail "the README's line exited $rc for the coroutine example"
}
echo "./main (coroutines): $out"
[ "$out" = "hello, ringrpc, welcome" ] || fail "./main printed '$out', not 'hello, ringrpc, welcome'"
echo "PASS"
