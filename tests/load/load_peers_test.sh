#!/usr/bin/env bash
# ringrpc-load against the servers people point it at: nginx (HTTP/1.1, -H headers, --mix per
# kind, an IPv6 target) and redis-server, and the wrong scheme for each (the one-line protocol
# diagnosis, within seconds), started here on 127.0.0.1 / ::1 ports of their own.
# Usage: load_peers_test.sh PATH/TO/ringrpc-load PATH/TO/ringrpc-server
# Exit 77 (skipped) when nginx or redis-server is not installed or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server}
server=${2:?usage: $0 ringrpc-load ringrpc-server}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
need_nginx_and_redis
test_init load_peers

# --- nginx: one worker, a few locations -------------------------------------------------------
hport=$(free_port)
h6port=$(free_port 6)
start_nginx "$work/nginx" "$hport" <<CONF
  access_log off;
  server {
    listen 127.0.0.1:$hport;
    listen [::1]:$h6port;
    location = /ok { return 200 "ok"; }
    location = /needs-header { if (\$http_x_load_test != "yes") { return 403; } return 200 "yes"; }
    location = /host { if (\$host != "example.test") { return 421; } return 200 "host"; }
    location / { return 404; }
  }
CONF

run_load hok -c 2 -P 2 -d 1s --warmup 0 "http://127.0.0.1:$hport/ok"
if [ $rc -ne 0 ] || ! grep -Eq 'calls ok +[1-9]' "$work/hok.out"; then
  fail "GET /ok at nginx exited $rc"; cat "$work/hok.err" >&2
else
  ok "nginx GET /ok: $(grep 'calls/s' "$work/hok.out" | head -1 | tr -s ' ')"
fi

# -H: the header reaches nginx (403 without it), and a Host of ours replaces the default.
run_load hnohdr -c 1 -n 20 "http://127.0.0.1:$hport/needs-header"
run_load hhdr -c 1 -n 20 -H 'X-Load-Test: yes' "http://127.0.0.1:$hport/needs-header"
run_load hhost -c 1 -n 20 -H 'Host: example.test' "http://127.0.0.1:$hport/host"
if [ $rc -ne 0 ] || ! grep -Eq 'calls ok +20$' "$work/hhost.out"; then
  fail "-H 'Host: example.test' did not reach nginx as the Host (exit $rc)"; cat "$work/hhost.out" >&2
elif ! grep -Eq 'http_403 +20$' "$work/hnohdr.out"; then
  fail "without -H, /needs-header should give 20 http_403"; cat "$work/hnohdr.out" >&2
elif ! grep -Eq 'calls ok +20$' "$work/hhdr.out"; then
  fail "-H 'X-Load-Test: yes' did not reach nginx"; cat "$work/hhdr.out" "$work/hhdr.err" >&2
else
  ok "-H: 20 x 403 without the header, 20 ok with it; -H Host replaces the default"
fi

# IPv6 literal target.
run_load h6 -c 1 -n 20 "http://[::1]:$h6port/ok"
if [ $rc -ne 0 ] || ! grep -Eq 'calls ok +20$' "$work/h6.out"; then
  fail "http://[::1]:$h6port/ok exited $rc"; cat "$work/h6.out" "$work/h6.err" >&2
else
  ok "IPv6: 20 calls to http://[::1]:$h6port/ok"
fi

# --mix: per-kind rows and JSON; the 404s belong to /missing only.
run_load hmix -c 2 -d 1s --warmup 0 --mix 'GET /ok:3,GET /missing:1' --json "$work/mix.json" "http://127.0.0.1:$hport/"
verdict=$(python3 - "$work/mix.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = {x["kind"]: x for x in j.get("kinds", [])}
ok, miss = k.get("GET /ok"), k.get("GET /missing")
if not ok or not miss: print("no per-kind entries:", list(k)); sys.exit()
if ok["calls_ok"] <= 0 or ok["errors"]: print("GET /ok:", ok); sys.exit()
if miss["calls_ok"] != 0 or miss["errors"].get("http_404", 0) != j["errors"].get("http_404"): print("GET /missing:", miss); sys.exit()
if ok["calls_ok"] != j["calls_ok"]: print("calls_ok differ"); sys.exit()
share = miss["errors"]["http_404"] / (ok["calls_ok"] + miss["errors"]["http_404"])
if not 0.15 < share < 0.35: print("404 share", share); sys.exit()
print("ok", ok["calls_ok"], miss["errors"]["http_404"], ok["latency_us"]["p99"])
PY
)
case $verdict in
  ok*) if grep -Eq '^  GET /missing +0 +[1-9]' "$work/hmix.out"; then ok "--mix per kind: $verdict"; else fail "--mix summary has no per-kind rows"; cat "$work/hmix.out" >&2; fi ;;
  *) fail "--mix per kind: $verdict" ;;
esac

# --- redis-server ----------------------------------------------------------------------------
rport=$(free_port)
"$redis" --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.out" 2>&1 &
pids="$pids $!"
if ! wait_port 127.0.0.1 "$rport"; then
  echo "redis-server did not start:" >&2
  cat "$work/redis.out" >&2
  exit 1
fi
run_load rok -c 2 -P 4 -d 1s --warmup 0 --mix 'PING:1,SET:1,GET:2' "redis://127.0.0.1:$rport"
if [ $rc -ne 0 ] || ! grep -Eq '^  SET +[1-9]' "$work/rok.out"; then
  fail "redis --mix exited $rc"; cat "$work/rok.out" "$work/rok.err" >&2
else
  ok "redis PING/SET/GET mix with per-kind rows"
fi

# --new-conn-per-call over plaintext: every call on a connection of its own.
for target in "http://127.0.0.1:$hport/ok" "redis://127.0.0.1:$rport"; do
  run_load percall -c 2 -n 50 --new-conn-per-call --json "$work/percall.json" "$target"
  got=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["calls_ok"], sum(j["errors"].values()), j["connections"]["opened"])' "$work/percall.json" 2>&1)
  if [ $rc -ne 0 ] || [ "$got" != "50 0 50" ]; then
    fail "$target --new-conn-per-call: exit $rc, (ok, errors, connections) = '$got'"; cat "$work/percall.err" >&2
  else
    ok "$target --new-conn-per-call: 50 calls on 50 connections"
  fi
done

# --- the wrong scheme: one line naming what the server looks like, within seconds ---------------
start_server "$work/rs" "$server" --port 0 --readers 1 --handlers 1 || exit $?
sport=$listen_port

expect_diagnosis ngx_ringrpc "looks like an HTTP/1.1 server; try http://127.0.0.1:$hport/" "ringrpc://127.0.0.1:$hport/echo"
expect_diagnosis ngx_redis "looks like an HTTP/1.1 server; try http://" "redis://127.0.0.1:$hport"
expect_diagnosis ngx_echo "looks like an HTTP/1.1 server" "echo://127.0.0.1:$hport"
# Redis drops a connection that sends "Host:" (its guard against HTTP requests) unanswered.
expect_diagnosis redis_http "(looks like a Redis server; try redis://127.0.0.1:$rport|$rport closed the connection without answering)" "http://127.0.0.1:$rport/"
expect_diagnosis redis_ringrpc "(Redis|no byte came back|closed the connection)" "ringrpc://127.0.0.1:$rport/echo"
expect_diagnosis rs_http "(ringrpc|closed the connection|no byte came back)" "http://127.0.0.1:$sport/"
expect_diagnosis rs_redis "(ringrpc|closed the connection|no byte came back)" "redis://127.0.0.1:$sport"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
exit 0
