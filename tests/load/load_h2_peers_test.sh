#!/usr/bin/env bash
# ringrpc-load's h2c:// against nginx (listen ... http2, no TLS) and grpc:// against a real gRPC
# server built from libgrpc++ (grpc_echo_server): calls counted right (the servers' own counts),
# request bytes right, a gRPC error status counted as its kind, --shard runs merged, and the
# wrong protocol diagnosed (h2c/grpc at an HTTP/1.1 server, http at an HTTP/2 one).
# Usage: load_h2_peers_test.sh ringrpc-load grpc_echo_server echo.proto
# Exit 77 (skipped) when nginx or python3 is missing or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load grpc_echo_server echo.proto}
grpc_server=${2:?usage}
proto=${3:?usage}
nginx=$(command -v nginx || echo /usr/sbin/nginx)

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
skip_unless_installed "nginx or python3 (Debian: nginx-light, python3)" "$nginx"
test_init load_h2_peers

# --- nginx: an h2c port and an HTTP/1.1 port -----------------------------------------------------
h2port=$(free_port)
h1port=$(free_port)
start_nginx "$work/nginx" "$h2port" "$h1port" <<CONF
  log_format calls '\$server_protocol \$status \$request_uri';
  access_log $work/nginx/logs/access.log calls;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$h2port http2;
    location = /ok { return 200 "ok-h2"; }
    location = /needs-header { if (\$http_x_load_test != "yes") { return 403; } return 200 "yes"; }
    location / { return 404; }
  }
  server {
    listen 127.0.0.1:$h1port;
    location / { return 200 "h1"; }
  }
CONF

# 300 calls over 2 connections x 8 streams: nginx logs exactly 300 HTTP/2 requests.
run_load h2ok -c 2 -P 8 -n 300 --json "$work/h2ok.json" "h2c://127.0.0.1:$h2port/ok"
if [ $rc -eq 77 ] || grep -qi "io_uring" "$work/h2ok.err"; then echo "io_uring unusable: skipped"; exit 77; fi
sleep 0.3  # nginx writes its access log line after the response
logged=$(grep -c '^HTTP/2.0 200 /ok$' "$work/nginx/logs/access.log" 2>/dev/null)
got=$(json_field "$work/h2ok.json" 'j["calls_ok"]')
if [ $rc -ne 0 ] || [ "$got" != 300 ] || [ "$logged" != 300 ]; then
  fail "h2c 300 calls: exit $rc, calls_ok $got, nginx logged $logged HTTP/2 200s"; cat "$work/h2ok.err" "$work/h2ok.out" >&2
else
  ok "h2c: 300 calls at depth 8, nginx logged 300 HTTP/2 requests"
fi

# Many streams on one connection at once, for a while (nginx's 128 concurrent streams).
run_load h2deep -c 1 -P 64 -d 1s --warmup 0 --json "$work/h2deep.json" "h2c://127.0.0.1:$h2port/ok"
if [ $rc -ne 0 ] || [ "$(json_field "$work/h2deep.json" 'j["calls_ok"] > 64 and not j["errors"]')" != True ]; then
  fail "h2c depth 64 for 1 s: exit $rc"; cat "$work/h2deep.err" "$work/h2deep.out" >&2
else
  ok "h2c depth 64 on one connection: $(json_field "$work/h2deep.json" 'j["calls_ok"]') calls, no error"
fi

# -H reaches nginx; HTTP statuses are counted as their kind.
run_load h2nohdr -c 1 -n 20 "h2c://127.0.0.1:$h2port/needs-header"
run_load h2hdr -c 1 -n 20 -H 'X-Load-Test: yes' "h2c://127.0.0.1:$h2port/needs-header"
if ! grep -Eq 'http_403 +20$' "$work/h2nohdr.out"; then
  fail "h2c without -H: expected 20 http_403"; cat "$work/h2nohdr.out" "$work/h2nohdr.err" >&2
elif [ $rc -ne 0 ] || ! grep -Eq 'calls ok +20$' "$work/h2hdr.out"; then
  fail "h2c -H 'X-Load-Test: yes' did not reach nginx"; cat "$work/h2hdr.out" "$work/h2hdr.err" >&2
else
  ok "h2c -H: 20 x http_403 without the header, 20 ok with it"
fi

# nginx ends a connection after keepalive_requests with GOAWAY: the engine reconnects and the
# calls go on, none fails. The calls pipelined past the GOAWAY's last stream were never processed:
# they are issued again on the next connection, so exactly -n calls succeed.
h2gport=$(free_port)
sed -e "s/keepalive_requests 100000;/keepalive_requests 50;/" -e "s/:$h2port http2/:$h2gport http2/" \
  -e "s/:$h1port;/:$(free_port);/" -e "s#$work/nginx/nginx.pid#$work/nginx/g.pid#" \
  -e "s#access_log [^;]*;#access_log off;#" "$work/nginx.conf" >"$work/nginx-goaway.conf"
"$nginx" -p "$work/nginx" -c "$work/nginx-goaway.conf" >"$work/nginx-g.out" 2>&1 &
pids="$pids $!"
if wait_port 127.0.0.1 "$h2gport"; then
  run_load h2goaway -c 2 -P 4 -n 500 --json "$work/h2goaway.json" "h2c://127.0.0.1:$h2gport/ok"
  if [ $rc -ne 0 ] || [ "$(json_field "$work/h2goaway.json" 'not j["errors"] and j["calls_ok"] == 500')" != True ]; then
    fail "h2c across GOAWAY every 50 requests: exit $rc"; cat "$work/h2goaway.out" "$work/h2goaway.err" >&2
  else
    ok "h2c: $(json_field "$work/h2goaway.json" 'j["calls_ok"]') of 500 calls across nginx's GOAWAY every 50 requests, none failed"
  fi
else
  fail "the second nginx did not start"; cat "$work/nginx-g.out" >&2
fi

# nginx takes 3 streams per connection (http2_max_concurrent_streams) and 30 requests before its
# GOAWAY, against a depth of 16: the streams over its limit are refused (or held back once its
# SETTINGS arrived) and sent again, those past a GOAWAY go on the next connection; ok + errors is
# -n, nothing unfinished, and nginx served exactly -n requests.
h2rport=$(free_port)
sed -e "s/keepalive_requests 100000;/keepalive_requests 30; http2_max_concurrent_streams 3;/" \
  -e "s/:$h2port http2/:$h2rport http2/" -e "s/:$h1port;/:$(free_port);/" \
  -e "s#$work/nginx/nginx.pid#$work/nginx/r.pid#" -e "s#$work/nginx/logs/access.log#$work/nginx/logs/r-access.log#" \
  "$work/nginx.conf" >"$work/nginx-refuse.conf"
"$nginx" -p "$work/nginx" -c "$work/nginx-refuse.conf" >"$work/nginx-r.out" 2>&1 &
pids="$pids $!"
if wait_port 127.0.0.1 "$h2rport"; then
  run_load h2refuse -c 2 -P 16 -n 600 --json "$work/h2refuse.json" "h2c://127.0.0.1:$h2rport/ok"
  sleep 0.3
  logged=$(grep -c '^HTTP/2.0 200 /ok$' "$work/nginx/logs/r-access.log" 2>/dev/null)
  if [ $rc -ne 0 ] || [ "$(json_field "$work/h2refuse.json" 'not j["errors"] and j["calls_ok"] == 600')" != True ] ||
    [ "$logged" != 600 ]; then
    fail "h2c at depth 16 against 3 concurrent streams and GOAWAY every 30: exit $rc, nginx logged $logged"
    cat "$work/h2refuse.out" "$work/h2refuse.err" >&2
  else
    ok "h2c: 600 of 600 calls at depth 16 against nginx's 3 concurrent streams and GOAWAY every 30 requests"
  fi
else
  fail "the third nginx did not start"; cat "$work/nginx-r.out" >&2
fi

# --- the gRPC server -------------------------------------------------------------------------
if ! start_server "$work/grpc" "$grpc_server" 2; then
  fail "grpc_echo_server did not start"
  exit 1
fi
gpid=$server_pid gport=$listen_port
gurl="grpc://127.0.0.1:$gport/ringtest.Echo/Say"

# 400 calls of {"text":"hello"} (7 bytes as protobuf) and 100 that fail with NOT_FOUND (5);
# the server's own counts must agree.
run_load gok -c 2 -P 4 -n 400 --proto "$proto" --data '{"text":"hello"}' --json "$work/gok.json" "$gurl"
if [ $rc -ne 0 ] || [ "$(json_field "$work/gok.json" 'j["calls_ok"]')" != 400 ]; then
  fail "grpc 400 calls: exit $rc"; cat "$work/gok.out" "$work/gok.err" >&2
else
  ok "grpc: 400 calls ok"
fi
echo '{"text": "x", "failWith": 5}' >"$work/fail.json"
run_load gfail -c 1 -P 2 -n 100 --proto "$proto" --data "@$work/fail.json" --json "$work/gfail.json" "$gurl"
if [ $rc -ne 3 ] || [ "$(json_field "$work/gfail.json" 'j["errors"].get("grpc_not_found")')" != 100 ] ||
   [ "$(json_field "$work/gfail.json" 'j["calls_ok"]')" != 0 ]; then
  fail "grpc NOT_FOUND x100: exit $rc (want 3)"; cat "$work/gfail.out" "$work/gfail.err" >&2
elif ! grep -Eq 'grpc_not_found +100$' "$work/gfail.out"; then
  fail "the summary does not show grpc_not_found 100"; cat "$work/gfail.out" >&2
else
  ok "grpc: status 5 counted as 100 grpc_not_found"
fi

# Raw message bytes from a file: field 1 (text) = "raw" is 0a 03 72 61 77.
printf '\n\003raw' >"$work/raw.bin"
run_load graw -c 1 -n 50 --payload-file "$work/raw.bin" --json "$work/graw.json" "$gurl"
if [ $rc -ne 0 ] || [ "$(json_field "$work/graw.json" 'j["calls_ok"]')" != 50 ]; then
  fail "grpc --payload-file: exit $rc"; cat "$work/graw.out" "$work/graw.err" >&2
else
  ok "grpc: 50 calls with raw message bytes from --payload-file"
fi

# Placeholders in --data: each call's message made from the template. The server counts the
# distinct texts it received (at exit): 200 for {seq}, 3 for {random:3} over 100 calls (one
# missing has odds 3 * (2/3)^100), on top of hello and raw (a failed call is not recorded).
run_load gtseq -c 2 -P 4 -n 200 --proto "$proto" --data '{"text": "t{seq}-{random:3}"}' --json "$work/gtseq.json" "$gurl"
rc_seq=$rc
run_load gtrand -c 2 -P 4 -n 100 --proto "$proto" --data '{"text": "r{random:3}"}' --seed 7 "$gurl"
if [ $rc_seq -ne 0 ] || [ $rc -ne 0 ] || [ "$(json_field "$work/gtseq.json" 'j["calls_ok"]')" != 200 ]; then
  fail "grpc --data with placeholders: exit $rc_seq, $rc"; cat "$work/gtseq.out" "$work/gtseq.err" "$work/gtrand.err" >&2
else
  ok "grpc: 200 + 100 calls with --data placeholders"
fi

# Two shards started together (--start-at) sum to -c and -n; merge of their logs counts both.
at="@$(($(date +%s) + 2))"
"$load" --shard 1/2 --start-at "$at" -c 3 -n 301 --proto "$proto" --data '{"text":"hello"}' \
  --json "$work/s1.json" --hdr-log "$work/s1.hlog" "$gurl" >"$work/s1.out" 2>"$work/s1.err" &
s1=$!
"$load" --shard 2/2 --start-at "$at" -c 3 -n 301 --proto "$proto" --data '{"text":"hello"}' \
  --json "$work/s2.json" --hdr-log "$work/s2.hlog" "$gurl" >"$work/s2.out" 2>"$work/s2.err"
rc2=$?
wait $s1
rc1=$?
"$load" merge "$work/s1.hlog" "$work/s2.hlog" >"$work/merge.out" 2>&1
c1=$(json_field "$work/s1.json" 'j["calls_ok"]')
c2=$(json_field "$work/s2.json" 'j["calls_ok"]')
k1=$(json_field "$work/s1.json" 'j["config"]["connections"]')
k2=$(json_field "$work/s2.json" 'j["config"]["connections"]')
merged=$(sed -n 's/^ *calls ok *\([0-9][0-9]*\).*/\1/p' "$work/merge.out" | head -1)
if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || [ "$c1" != 151 ] || [ "$c2" != 150 ] || [ "$k1" != 2 ] || [ "$k2" != 1 ] ||
   [ "$merged" != 301 ]; then
  fail "shards: exit $rc1/$rc2, calls $c1+$c2 (want 151+150), connections $k1+$k2 (want 2+1), merged $merged"
  cat "$work/s1.err" "$work/s2.err" "$work/merge.out" >&2
else
  ok "--shard 1/2 + 2/2 at one --start-at: 151 + 150 calls on 2 + 1 connections, merge counts 301"
fi

stop_pid "$gpid"
pids=$(echo "$pids" | sed "s/ $gpid\$//; s/ $gpid / /")
served=$(sed -n 's/^served \([0-9]*\) calls, \([0-9]*\) request bytes$/\1 \2/p' "$work/grpc.out")
# 400 + 100 + 50 + 200 + 100 + 301 calls, but warm-up-free -n runs send exactly -n each.
# "t{seq}-{random:3}" is 3 bytes and seq's digits (490 over 0..199), plus 2 of framing each.
want_calls=$((400 + 100 + 50 + 200 + 100 + 301))
want_bytes=$((400 * 7 + 100 * 5 + 50 * 5 + 200 * 5 + 490 + 100 * 4 + 301 * 7))
if [ "$served" != "$want_calls $want_bytes" ]; then
  fail "the gRPC server served '$served', expected '$want_calls $want_bytes' (calls, request bytes)"
else
  ok "the gRPC server counted $want_calls calls and $want_bytes request bytes, as sent"
fi
texts=$(sed -n 's/^distinct texts \([0-9]*\)$/\1/p' "$work/grpc.out")
if [ "$texts" != 205 ]; then
  fail "the gRPC server saw $texts distinct texts, expected 205 (2 fixed, 200 of {seq}, 3 of {random:3})"
else
  ok "the gRPC server saw 205 distinct texts: each {seq} once, {random:3} below 3"
fi

# --- the wrong protocol ------------------------------------------------------------------------
expect_diagnosis h1_h2c "looks like an HTTP/1.1 server; try http://127.0.0.1:$h1port/" "h2c://127.0.0.1:$h1port/"
expect_diagnosis h1_grpc "looks like an HTTP/1.1 server; try http://" "grpc://127.0.0.1:$h1port/ringtest.Echo/Say"
expect_diagnosis h2_http "(looks like an HTTP/2 server; try h2c://|closed the connection)" "http://127.0.0.1:$h2port/ok"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
exit 0
