#!/usr/bin/env bash
# ringrpc-load against etcd://: a real etcd on loopback, two ringrpc-server processes that
# register the same service in it ([discovery], docs/deployment.md), one run spread over both
# (each member gets calls, the per-member counts add up to the total, no errors), and clear
# failures for a service with no members and for an etcd that does not answer.
# Usage: load_etcd_test.sh ringrpc-load ringrpc-server etcd
# Exit 77 (skipped) when etcd or python3 cannot run here.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server etcd}
server=${2:?usage}
etcd=${3:?usage}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
skip_unless_installed "etcd or python3 (Debian: etcd-server, python3)" "$etcd"
test_init load_etcd

# --- etcd --------------------------------------------------------------------------------------
cport=$(free_port)
pport=$(free_port)
curl_url=http://127.0.0.1:$cport
"$etcd" --data-dir "$work/etcd" --name loadtest --listen-client-urls "$curl_url" \
  --advertise-client-urls "$curl_url" --listen-peer-urls "http://127.0.0.1:$pport" \
  --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "loadtest=http://127.0.0.1:$pport" \
  --log-level warn >"$work/etcd.log" 2>&1 &
etcd_pid=$!
pids="$pids $etcd_pid"
if ! wait_port 127.0.0.1 "$cport" 100; then
  if ! kill -0 "$etcd_pid" 2>/dev/null; then
    echo "etcd does not start here: $(tail -3 "$work/etcd.log"): skipped"
    exit 77
  fi
  echo "FAIL: etcd did not listen on $cport within 10 s" >&2
  exit 1
fi

# --- two servers registering service "loadecho" ----------------------------------------------
cat >"$work/fleet.toml" <<TOML
[discovery]
etcd = "$curl_url"
service = "loadecho"
lease_ttl_s = 5
deregister_grace_ms = 0
TOML
ports=
for _ in 1 2; do
  p=$(free_port)
  ports="$ports $p"
  "$server" -c "$work/fleet.toml" --port "$p" --readers 1 --handlers 1 >"$work/server-$p.log" 2>&1 &
  pids="$pids $!"
done
for p in $ports; do
  wait_port 127.0.0.1 "$p" 100 || { echo "FAIL: server on $p did not listen" >&2; cat "$work/server-$p.log" >&2; exit 1; }
done
# Registered once both keys are listed (etcd may take a moment after the servers listen).
registered=0
for _ in $(seq 50); do
  run_load probe -c 1 -n 1 "etcd://127.0.0.1:$cport/loadecho/echo"
  if grep -q "lists 2 member" "$work/probe.err"; then registered=1; break; fi
  sleep 0.1
done
[ "$registered" = 1 ] || { fail "both servers never appeared in etcd: $(cat "$work/probe.err")"; exit 1; }

# --- a run spread over both members ----------------------------------------------------------
run_load spread -c 4 -n 400 --json "$work/spread.json" "etcd://127.0.0.1:$cport/loadecho/echo"
if [ "$rc" != 0 ]; then
  fail "etcd:// run exited $rc: $(cat "$work/spread.err")"
else
  total=$(json_field "$work/spread.json" 'j["calls_ok"]')
  members=$(json_field "$work/spread.json" 'len(j["members"])')
  sum=$(json_field "$work/spread.json" 'sum(m["calls_ok"] for m in j["members"])')
  least=$(json_field "$work/spread.json" 'min(m["calls_ok"] for m in j["members"])')
  errs=$(json_field "$work/spread.json" 'sum(j["errors"].values()) + sum(m["error_total"] for m in j["members"])')
  addrs=$(json_field "$work/spread.json" '" ".join(sorted(m["address"] for m in j["members"]))')
  want=$(for p in $ports; do echo "127.0.0.1:$p"; done | sort | tr '\n' ' ' | sed 's/ $//')
  [ "$total" = 400 ] && ok "400 calls in total" || fail "calls_ok $total, want 400"
  [ "$members" = 2 ] && ok "two members reported" || fail "members: $members"
  [ "$addrs" = "$want" ] && ok "members are the two servers ($addrs)" || fail "member addresses '$addrs', want '$want'"
  [ "$sum" = "$total" ] && ok "per-member calls sum to the total" || fail "per-member sum $sum != total $total"
  [ -n "$least" ] && [ "$least" -gt 0 ] && ok "both members got calls (least: $least)" || fail "a member got no call ($least)"
  [ "$errs" = 0 ] && ok "no errors" || fail "errors: $errs"
  grep -q "member" "$work/spread.out" && ok "summary has the per-member table" || fail "no member table in the summary"
  p50=$(json_field "$work/spread.json" 'min(m["latency_us"]["p50"] for m in j["members"]) > 0')
  [ "$p50" = True ] && ok "per-member p50 present" || fail "per-member p50: $p50"
fi

# --- a service nobody registered -------------------------------------------------------------
run_load empty -c 1 -n 1 "etcd://127.0.0.1:$cport/nosuchservice/echo"
if [ "$rc" != 0 ] && grep -q "ringrpc-load: .*no live member of service 'nosuchservice'" "$work/empty.err"; then
  ok "no members: exit $rc, $(cat "$work/empty.err")"
else
  fail "no members: exit $rc, $(cat "$work/empty.err")"
fi

# --- an etcd that does not answer ------------------------------------------------------------
dead=$(free_port)
run_load unreachable -c 1 -n 1 "etcd://127.0.0.1:$dead/loadecho/echo"
if [ "$rc" != 0 ] && grep -q "ringrpc-load: cannot list the members of .*etcd at" "$work/unreachable.err"; then
  ok "unreachable etcd: exit $rc, $(cat "$work/unreachable.err")"
else
  fail "unreachable etcd: exit $rc, $(cat "$work/unreachable.err")"
fi

# --- a malformed etcd:// URL -----------------------------------------------------------------
run_load badq -c 1 -n 1 "etcd://127.0.0.1:$cport/loadecho/echo?color=red"
if [ "$rc" != 0 ] && grep -q "unknown query 'color=red'" "$work/badq.err"; then
  ok "unknown query refused"
else
  fail "unknown query: exit $rc, $(cat "$work/badq.err")"
fi

[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "all etcd:// checks passed"
