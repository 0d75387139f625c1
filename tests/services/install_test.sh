#!/usr/bin/env bash
# ringrpc as an installed library: `meson install --destdir` (or, with --root, a tree unpacked
# from the Debian packages by scripts/package_deb), then programs outside the source tree built
# with `pkg-config --cflags --libs` only, shared and static (one of them calls every declaration
# of ringrpc/server.hpp with libringrpc alone), and a meson project with a typed service found
# through pkg-config. Each built program runs a server and a client on 127.0.0.1.
# Exit 77 (skipped) in a sanitizer build (installed sanitized libraries need sanitized programs)
# or where io_uring is unavailable.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR B_SANITIZE     (meson test)
#        install_test.sh --root DIR SOURCE_DIR                (an unpacked package tree)
set -eu
# meson test points LD_LIBRARY_PATH at the build tree's libraries: the programs here must find
# the installed ones, through their rpath only.
unset LD_LIBRARY_PATH
if [ "$1" = --root ]; then
  root=$2 src=$3 build=
else
  build=$1 src=$2
  if [ "$3" != none ]; then echo "skipped: b_sanitize=$3"; exit 77; fi
  root=
fi
# one_server_init, and scripts/lib.sh's start_server and wait_listening
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
one_server_init ringrpc_install
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ -z "$root" ]; then
  root=$work/root
  meson install -C "$build" --no-rebuild --quiet --destdir "$root" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "meson install"; }
fi

pc=$(find "$root" -name ringrpc.pc | head -n1)
[ -n "$pc" ] || fail "no ringrpc.pc installed"
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
[ -f "$pcdir/ringrpc-ops.pc" ] || fail "no ringrpc-ops.pc"
for h in server.hpp client.hpp service.hpp config.hpp ops.hpp version.hpp cxx20.hpp; do
  [ -f "$(find "$root" -path "*/include/ringrpc/$h" | head -n1)" ] || fail "header ringrpc/$h not installed"
done
[ -f "$libdir/libringrpc.a" ] || fail "no libringrpc.a in $libdir"
[ -f "$libdir/libringrpc_ops.a" ] || fail "no libringrpc_ops.a"
soname=$(readelf -d "$libdir/libringrpc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libringrpc.so.3 ] || fail "libringrpc.so has soname '$soname', not libringrpc.so.3"
[ -e "$libdir/libringrpc.so.3" ] || fail "no libringrpc.so.3"
for t in ringrpc-server ringrpc-call ringrpc-gen ringrpc-load; do
  [ -x "$(find "$root" -path "*/bin/$t" | head -n1)" ] || fail "$t not installed"
done
# Man pages, made from --help: present wherever help2man was at build time (the packages need it).
for t in ringrpc-server ringrpc-call ringrpc-gen ringrpc-load; do
  page=$(find "$root" -path "*/man1/$t.1*" | head -n1)
  if [ -z "$page" ]; then
    if [ -z "$build" ] || command -v help2man >/dev/null; then fail "no man page for $t"; fi
    echo "note: help2man not installed, no man pages to check"
    continue
  fi
  case $page in *.gz) text=$(zcat "$page") ;; *) text=$(cat "$page") ;; esac
  echo "$text" | grep -q '^\.TH' || fail "$page is not a man page"
  case $t in
    ringrpc-load) ;;  # its --help is ringrpc-load's own business
    *) echo "$text" | grep -q 'Exit status' || fail "$page lacks the exit status" ;;
  esac
  if echo "$text" | grep -q '/build/\|\./tools/'; then fail "$page shows a build path"; fi
done
echo "installed: headers, libringrpc.{a,so.0}, libringrpc_ops.{a,so.0}, ringrpc.pc, ringrpc-ops.pc, tools"

# pkg-config only: PKG_CONFIG_SYSROOT_DIR maps the .pc files' /usr/local (or /usr) into $root.
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$root"
cflags=$(pkg-config --cflags ringrpc) || fail "pkg-config --cflags ringrpc"
libs=$(pkg-config --libs ringrpc) || fail "pkg-config --libs ringrpc"
echo "pkg-config --cflags --libs ringrpc: $cflags $libs"
pkg-config --print-requires-private ringrpc | grep -q liburing || fail "Requires.private lacks liburing"
pkg-config --static --libs ringrpc | grep -q -- -luring || fail "--static --libs lacks -luring"

run() {  # run NAME: runs $work/NAME, bounded; 77 from it skips the test
  rc=0
  timeout 30 "$work/$1" || rc=$?
  [ $rc -eq 77 ] && { echo "skipped: io_uring unavailable here"; exit 77; }
  [ $rc -eq 0 ] || fail "$1 exited $rc"
}

# Shared: the rpath only says where $root's libraries are; nothing else is given by hand.
# shellcheck disable=SC2046,SC2086  # the flags are words
g++ -std=c++20 -o "$work/hello" "$src/hello.cpp" $cflags $libs -Wl,-rpath,"$libdir" ||
  fail "building hello with pkg-config --cflags --libs ringrpc"
readelf -d "$work/hello" | grep -q 'NEEDED.*libringrpc.so.3' || fail "hello does not link libringrpc.so.3"
ldd "$work/hello" | grep -q "libringrpc.so.3 => $libdir/" || fail "hello does not load $libdir/libringrpc.so.3"
run hello

# Every declaration of ringrpc/server.hpp with libringrpc alone: the core library defines all
# of them (none lives in libringrpc_ops), or this does not link.
# shellcheck disable=SC2046,SC2086  # the flags are words
g++ -std=c++20 -o "$work/server_api" "$src/server_api.cpp" $cflags $libs -Wl,-rpath,"$libdir" ||
  fail "building server_api with pkg-config --cflags --libs ringrpc (ringrpc-ops not given)"
if readelf -d "$work/server_api" | grep -q 'NEEDED.*libringrpc_ops'; then fail "server_api needs libringrpc_ops"; fi
run server_api

# Static: the archive, then what `pkg-config --static` says it needs.
# shellcheck disable=SC2046,SC2086  # the flags are words
g++ -std=c++20 -o "$work/hello_static" "$src/hello.cpp" $cflags "$libdir/libringrpc.a" \
  $(pkg-config --static --libs ringrpc) -Wl,--as-needed || fail "building hello statically"
if readelf -d "$work/hello_static" | grep -q 'NEEDED.*libringrpc'; then fail "hello_static needs libringrpc.so"; fi
run hello_static

# shellcheck disable=SC2046,SC2086  # the flags are words
g++ -std=c++20 -o "$work/hello_ops" "$src/hello_ops.cpp" $(pkg-config --cflags --libs ringrpc-ops) \
  -Wl,-rpath,"$libdir" || fail "building hello_ops with pkg-config ringrpc-ops"
run hello_ops

# An older -std is refused with one clear line, not errors from inside the headers.
printf '#include <ringrpc/server.hpp>\nint main() {}\n' >"$work/old.cpp"
# shellcheck disable=SC2086
if g++ -std=c++17 -fsyntax-only $cflags "$work/old.cpp" >"$work/old.log" 2>&1; then fail "-std=c++17 compiled"; fi
grep -q 'ringrpc needs C++20' "$work/old.log" || { cat "$work/old.log" >&2; fail "no clear C++20 message"; }

# A meson project with a typed service, through pkg-config.
proj=$work/proj
mkdir -p "$proj"
cp "$src/meson.build" "$src/hello.cpp" "$src/hello_ops.cpp" "$src/server_api.cpp" "$proj/"
cp "$src/../../../examples/greeter/greeter.fbs" "$src/../../../examples/greeter/greeter_server.cpp" \
  "$src/../../../examples/greeter/greeter_client.cpp" "$proj/"
meson setup "$work/proj-build" "$proj" -Dbuildtype=plain \
  "-Dcpp_link_args=-Wl,-rpath,$libdir" >"$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; fail "meson setup of the user project"; }
grep -q 'Run-time dependency ringrpc found: YES' "$work/setup.log" || fail "ringrpc not found through pkg-config"
ninja -C "$work/proj-build" -j2 >"$work/ninja.log" 2>&1 || { cat "$work/ninja.log" >&2; fail "building the user project"; }
cp "$work/proj-build/greeter_server" "$work/proj-build/greeter_client" "$work/proj-build/hello" "$work/"
run hello
start_server "$work/server" "$work/greeter_server" 0 || { [ $? -eq 77 ] && exit 77; fail "greeter_server did not start"; }
port=$listen_port
out=$(timeout 10 "$work/greeter_client" "$port" installed) || fail "greeter_client"
echo "greeter_client: $out"
echo "$out" | grep -q 'hello, installed' || fail "unexpected greeting"
echo "PASS"
