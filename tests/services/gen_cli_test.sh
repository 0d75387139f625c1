#!/bin/sh
# ringrpc-gen's command line: a good schema (files written, depfile), refused schemas (an id
# collision, an unknown streaming kind) with exit status 1 and messages naming the methods, and usage
# errors with exit status 2.
# Usage: gen_cli_test.sh PATH/TO/ringrpc-gen PATH/TO/flatc
set -u

gen=${1:?usage: $0 ringrpc-gen flatc}
flatc=${2:?usage: $0 ringrpc-gen flatc}
work=$(mktemp -d "${TMPDIR:-/tmp}/gen_cli.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# expect STATUS PATTERN ARGS...: ringrpc-gen exits STATUS and stderr matches PATTERN (grep -E).
expect() {
  want=$1
  pattern=$2
  shift 2
  "$gen" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc -ne "$want" ]; then
    fail "ringrpc-gen $* exited $rc, expected $want"
    cat "$work/err" >&2
  elif [ -n "$pattern" ] && ! grep -Eq -- "$pattern" "$work/err"; then
    fail "ringrpc-gen $*: stderr does not match /$pattern/:"
    cat "$work/err" >&2
  else
    ok "ringrpc-gen $* -> $rc"
  fi
}

mkdir "$work/inc" "$work/out1"
cat >"$work/inc/types.fbs" <<'FBS'
namespace t;
table Req { name: string; }
table Rep { text: string; }
FBS
cat >"$work/good.fbs" <<'FBS'
include "types.fbs";
namespace t;
rpc_service Good { Call(Req): Rep; }
FBS
# -I right before the schema, as ringrpc_service_gen's extra_args put it.
expect 0 '' --flatc "$flatc" -o "$work/out1" --depfile "$work/good.d" -I "$work/inc" "$work/good.fbs"
for f in good_generated.h good_ringrpc.hpp good.bfbs; do
  [ -s "$work/out1/$f" ] || fail "no $f written"
done
if grep -q "types.fbs" "$work/good.d" && grep -q "good.fbs" "$work/good.d" && grep -q "good_ringrpc.hpp:" "$work/good.d"; then
  ok "the depfile names the header, the schema and its include"
else
  fail "depfile: $(cat "$work/good.d")"
fi
grep -q 'Call_id = 0x' "$work/out1/good_ringrpc.hpp" || fail "no Call_id constant"

# --bfbs: no flatc run, the given binary schema embedded.
mkdir "$work/out2"
expect 0 '' --flatc /nonexistent/flatc --bfbs "$work/out1/good.bfbs" -I "$work/inc" -o "$work/out2" "$work/good.fbs"
[ -s "$work/out2/good_ringrpc.hpp" ] || fail "--bfbs wrote no header"
[ -e "$work/out2/good_generated.h" ] && fail "--bfbs ran flatc"
cmp -s "$work/out1/good_ringrpc.hpp" "$work/out2/good_ringrpc.hpp" || fail "--bfbs gave another header"

# A binary schema of something else is refused.
cat >"$work/other.fbs" <<'FBS'
table X {}
rpc_service Other { Call(X): X; }
FBS
"$flatc" --binary --schema -o "$work" "$work/other.fbs" || fail "flatc failed"
expect 1 'other services or methods' --bfbs "$work/other.bfbs" -I "$work/inc" -o "$work/out2" "$work/good.fbs"

# Method ids that collide: both names, the id, exit 1, and no header.
cat >"$work/clash.fbs" <<'FBS'
table Req {}
rpc_service Clash {
  yenqitbu(Req): Req;
  lnfvmnim(Req): Req;
}
FBS
mkdir "$work/out3"
expect 1 'clash.fbs: method id collision: Clash.yenqitbu and Clash.lnfvmnim both have id 0x3c630053' \
  --flatc "$flatc" -o "$work/out3" "$work/clash.fbs"
[ -e "$work/out3/clash_ringrpc.hpp" ] && fail "a header was written for a refused schema"

# Streaming methods are generated, and their kinds reach the embedded binary schema (flatc
# --bfbs-builtins), which reflection reads; an unknown kind is refused.
cat >"$work/stream.fbs" <<'FBS'
table Req {}
rpc_service Streams { Watch(Req): Req (streaming: "server"); Talk(Req): Req (streaming: "bidi"); }
FBS
mkdir "$work/out4"
expect 0 '' --flatc "$flatc" -o "$work/out4" "$work/stream.fbs"
grep -q 'typed_client_stream<::Req, ::Req> Watch(' "$work/out4/stream_ringrpc.hpp" ||
  fail "no typed stream stub for Streams.Watch"
grep -q 'stream_kind::bidi' "$work/out4/stream_ringrpc.hpp" || fail "Streams.Talk is not opened as a bidi stream"
grep -q streaming "$work/out4/stream.bfbs" || fail "the binary schema lacks the streaming kinds"
cat >"$work/sideways.fbs" <<'FBS'
table Req {}
rpc_service Streams { Watch(Req): Req (streaming: "sideways"); }
FBS
expect 1 'Streams.Watch has an unknown streaming kind \(streaming: "sideways"\)' \
  --flatc "$flatc" -o "$work/out3" "$work/sideways.fbs"

printf 'table T { x: nosuchtype; }\n' >"$work/broken.fbs"
expect 1 'broken.fbs.*nosuchtype' --flatc "$flatc" -o "$work/out3" "$work/broken.fbs"
expect 1 'cannot read' -o "$work/out3" "$work/missing.fbs"
expect 1 'cannot run /nonexistent/flatc' --flatc /nonexistent/flatc -I "$work/inc" -o "$work/out3" "$work/good.fbs"

# Usage.
expect 2 'schema is required|required' -o "$work/out3"
expect 2 '' --no-such-flag "$work/good.fbs"
"$gen" --help >"$work/help" 2>&1 || fail "--help exited non-zero"
grep -q -- '--flatc' "$work/help" || fail "--help does not mention --flatc"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "all ringrpc-gen command-line checks passed"
