#!/usr/bin/env bash
# ringrpc as a meson subproject, the way docs/services.md tells a user to add it: a tarball of
# this source tree behind subprojects/ringrpc.wrap ([wrap-file]; the tarball sits in
# subprojects/packagecache/, where meson looks before it downloads, so no network is used). The
# parent project (tests/services/out_of_tree) builds and runs a plain and a typed program; the
# subproject must build none of its tests, benchmarks or tools and install nothing.
# Exit 77 (skipped) in a sanitizer build (it only costs time there) or without io_uring.
# Usage: subproject_test.sh SOURCE_ROOT B_SANITIZE
set -eu
top=$1
if [ "$2" != none ]; then echo "skipped: b_sanitize=$2"; exit 77; fi
# one_server_init, and scripts/lib.sh's start_server and wait_listening
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
one_server_init ringrpc_subproject
fail() { echo "FAIL: $*" >&2; exit 1; }

version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$top/meson.build" | head -n1)
proj=$work/parent
mkdir -p "$proj/subprojects/packagecache"
src=$top/tests/services/out_of_tree
cp "$src/meson.build" "$src/hello.cpp" "$src/hello_ops.cpp" "$src/server_api.cpp" "$proj/"
cp "$top/examples/greeter/greeter.fbs" "$top/examples/greeter/greeter_server.cpp" \
  "$top/examples/greeter/greeter_client.cpp" "$proj/"
# The tree as a release tarball would hold it: no build directories, no git metadata.
tar -C "$top" --exclude=./build --exclude=./.git --exclude='./obj-*' --exclude=./debian/tmp \
  --transform "s,^\\.,ringrpc-$version," -czf "$proj/subprojects/packagecache/ringrpc-$version.tar.gz" .
hash=$(sha256sum "$proj/subprojects/packagecache/ringrpc-$version.tar.gz" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@HASH@/$hash/" "$top/tests/services/ringrpc.wrap.in" \
  >"$proj/subprojects/ringrpc.wrap"

# --force-fallback-for: use the wrap even where a ringrpc is installed on the machine. The parent
# uses neither TLS nor discovery: leaving them out spares scripts/test compiling them once more,
# and a unity build (files compiled in batches, as scripts/test does) halves what is left.
meson setup "$work/build" "$proj" -Dbuildtype=plain -Dwrap_mode=nodownload \
  -Dringrpc:tls=disabled -Dringrpc:discovery=disabled -Dunity=on -Dunity_size=5 \
  --force-fallback-for=ringrpc,ringrpc-ops >"$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; fail "meson setup of the parent project"; }
"$top/scripts/unity_guard" "$work/build" || fail "configuring the parent project without unity"
{ grep -q "Executing subproject ringrpc" "$work/setup.log" &&
  grep -q "Dependency ringrpc found: YES $version (overridden)" "$work/setup.log"; } ||
  { cat "$work/setup.log" >&2; fail "ringrpc did not come from the subproject"; }
if grep -qi 'gtest\|benchmark' "$work/setup.log"; then fail "the subproject looked for gtest or benchmark"; fi

meson introspect --targets "$work/build" >"$work/targets.json"
python3 - "$work/targets.json" <<'PY' || fail "the subproject builds more than the parent needs"
import json, sys
names = sorted(t["name"] for t in json.load(open(sys.argv[1])))
extra = [n for n in names if n.endswith("_test") or n in ("ringrpc-server", "ringrpc-call", "ringrpc-load")]
print("targets:", " ".join(names))
sys.exit(1 if extra else 0)
PY
meson introspect --installed "$work/build" >"$work/installed.json"
[ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$work/installed.json")" = 0 ] ||
  { cat "$work/installed.json" >&2; fail "the subproject installs into the parent"; }
ninja -C "$work/build" -j2 >"$work/ninja.log" 2>&1 || { tail -n 40 "$work/ninja.log" >&2; fail "building the parent"; }
echo "$(grep -c '^\[' "$work/ninja.log") build steps"

run() {
  rc=0
  timeout 30 "$work/build/$1" || rc=$?
  [ $rc -eq 77 ] && { echo "skipped: io_uring unavailable here"; exit 77; }
  [ $rc -eq 0 ] || fail "$1 exited $rc"
}
run hello
run hello_ops
run server_api
start_server "$work/server" "$work/build/greeter_server" 0 || fail "greeter_server did not start"
port=$listen_port
out=$(timeout 10 "$work/build/greeter_client" "$port" subproject) || fail "greeter_client"
echo "$out" | grep -q 'hello, subproject' || fail "unexpected greeting '$out'"
echo "PASS"
