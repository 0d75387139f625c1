#!/usr/bin/env bash
# ringrpc-bench end to end: its command line (--help, a bad option, a missing program, an
# unreadable --compare file, each with its documented exit status), a short --quick run on
# loopback whose JSON must hold every figure of the suite, --compare of two reports into one
# SVG, and, when run as root with `ip netns`, the two-host mode between two network namespaces
# joined by a veth pair (created here, removed on exit, failure included; skipped otherwise).
# Asserts fields and counts, never speed.
# Usage: ringrpc_bench_test.sh RINGRPC_BENCH BIN_DIR     (meson test)
set -euo pipefail
bench=$1 bin_dir=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ringrpc_bench_test.XXXXXX")
ns_srv=rrb_srv_$$ ns_cli=rrb_cli_$$ serve_pid='' client_pid=''
cleanup() {
  if [[ -n $client_pid ]]; then kill -TERM "$client_pid" 2>/dev/null || true; wait "$client_pid" 2>/dev/null || true; fi
  if [[ -n $serve_pid ]]; then kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  # Deleting a namespace removes the veth end inside it, and with it its peer.
  ip netns del "$ns_srv" 2>/dev/null || true
  ip netns del "$ns_cli" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # meson's timeout sends TERM: the namespaces go all the same
fail() { echo "FAIL: $*" >&2; exit 1; }
# wait_for, from scripts/lib.sh:
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../../scripts/lib.sh"
python=$(command -v python3) || { echo "skipped: no python3"; exit 77; }

# --- the command line
"$bench" --help >"$work/help.txt" || fail "--help exited $?"
grep -q -- "--server HOST:PORT" "$work/help.txt" || fail "--help does not document --server"
grep -q "Exit status" "$work/help.txt" || fail "--help does not list the exit codes"
set +e
"$bench" --no-such-option >/dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "a bad option exited $rc, not 2"
"$bench" --bin-dir "$work/empty" --server 127.0.0.1:1 --out "$work/x" >/dev/null 2>"$work/err" </dev/null
rc=$?
echo '{"not": "a report"}' >"$work/other.json"
"$bench" --compare "$work/other.json" --out "$work/bad" >/dev/null 2>"$work/cmp_err"; crc=$?
set -e
# ringrpc-load may be on PATH (an installed copy); only a missing one is a usage error.
if ! command -v ringrpc-load >/dev/null; then
  [[ $rc == 2 ]] || fail "a missing ringrpc-load exited $rc, not 2"
  grep -q "ringrpc-load not found" "$work/err" || fail "no message for the missing program: $(cat "$work/err")"
fi
[[ $crc == 2 ]] || fail "--compare of a file that is no report exited $crc, not 2"
[[ ! -e $work/bad.svg ]] || fail "--compare wrote an SVG from a bad file"

# check_report JSON MODE: every figure of the suite is there, for both servers.
check_report() {
  "$python" - "$1" "$2" <<'EOF'
import json, sys
path, mode = sys.argv[1], sys.argv[2]
r = json.load(open(path))
def need(cond, what):
    if not cond:
        sys.exit("FAIL: %s: %s" % (path, what))
res, cfg = r["results"], r["config"]
need(r["report"] == "ringrpc-bench", "report kind")
need(cfg["mode"].startswith(mode), "mode %r" % cfg["mode"])
for k in ("hostname", "kernel", "cpu_model", "affinity", "client_cpu", "rlimit_nofile", "date_utc"):
    need(k in r["host"], "host." + k)
pct = ["p50", "p90", "p99", "p99.9", "p99.99", "max"]
sizes = cfg["sizes"]
def rows(key, **match):
    return [x for x in res[key] if all(x.get(k) == v for k, v in match.items())]
for v in ("ringrpc", "raw"):
    for s in sizes:
        pp = rows("ping_pong", variant=v, size=s)
        need(len(pp) == 1, "one ping-pong row for %s %d B" % (v, s))
        lat = pp[0]["latency_us"]
        need(all(lat[p] is not None and lat[p] > 0 for p in pct), "latency percentiles %s %d B" % (v, s))
        need(lat["p50"] <= lat["p99"] <= lat["max"], "percentiles in order %s %d B" % (v, s))
        need(pp[0]["calls_ok"] > 0 and pp[0]["errors"] == 0, "calls without errors %s %d B" % (v, s))
        for d in cfg["depths"]:
            tp = rows("throughput", variant=v, size=s, depth=d)
            need(len(tp) == 1, "one throughput row %s %d B depth %d" % (v, s, d))
            t = tp[0]
            need(t["calls_per_sec"] > 0 and t["bytes_per_sec"] == t["calls_per_sec"] * s * 2, "calls/s, bytes/s")
            need(t["client_cpu_us_per_call"] is not None and t["client_cpu_us_per_call"] >= 0, "client CPU")
            if v == "ringrpc" or mode == "loopback":  # the raw loop has no /metrics on another host
                need(t["server_cpu_us_per_call"] is not None, "server CPU per call %s %d B depth %d" % (v, s, d))
    cps = rows("connections_per_second", variant=v)
    need(len(cps) == 1 and cps[0]["connections_per_sec"] > 0, "connections/s " + v)
    for n in cfg["flows"]:
        f = rows("flows", variant=v, connections=n)
        need(len(f) == 1 and f[0]["calls_per_sec"] > 0, "flows %s %d" % (v, n))
need(len(res["ping_pong_64_rounds"]) == cfg["rounds"], "one 64 B row per round")
fo = r["frame_overhead"]
need(fo and fo["request_overhead_bytes"] > 0 and fo["reply_overhead_bytes"] > 0, "frame bytes per call")
if r["config"].get("sockperf"):
    need(len(res["sockperf"]) == cfg["rounds"] and res["sockperf"][0]["latency_us"]["p50"] > 0, "sockperf rows")
    need(any("sockperf" in q["what"] for q in r["ratios"]), "a ratio to sockperf")
    need("full-rtt" in r["sockperf_comparison"], "how sockperf is compared")
for q in r["ratios"]:
    need(q["ratio"] > 0 and q["better"] in ("higher", "lower"), "ratio fields")
    need(q["verdict"] == (q["note"] == ""), "a qualified ratio is no verdict")
svg = open(path[:-5] + ".svg").read()
import xml.dom.minidom
xml.dom.minidom.parseString(svg)
for q in r["ratios"]:  # the picture qualifies each ratio as the console does
    if q["note"]:
        need(q["note"].replace("'", "&apos;") in svg or q["note"] in svg, "SVG lacks the note: " + q["note"])
for unit in ("round trip (us)", "calls/s", "bytes/s", "us/call"):
    need(unit in svg, "SVG axis unit " + unit)
print("%s: %d ratios, %d ping-pong rows" % (path, len(r["ratios"]), len(res["ping_pong"])))
EOF
}

# --- loopback, --quick cut down further to keep the test short
quick=(--quick --duration 0.3 --rounds 2 --sizes "64,65536" --flows "1,50")
"$bench" --bin-dir "$bin_dir" "${quick[@]}" --out "$work/out/a" >"$work/a.txt" 2>&1 || {
  cat "$work/a.txt" >&2; fail "--quick run exited $?"; }
[[ -s $work/out/a.json && -s $work/out/a.svg ]] || fail "no JSON and SVG where --out said"
grep -q "ratios (ringrpc / baseline" "$work/a.txt" || fail "console has no ratios"
check_report "$work/out/a.json" loopback

# --- two reports overlaid in one picture
cp "$work/out/a.json" "$work/b.json"
"$bench" --compare "$work/out/a.json" "$work/b.json" --out "$work/cmp" >/dev/null || fail "--compare exited $?"
grep -q "solid a:" "$work/cmp.svg" || fail "--compare SVG does not name the first report"
grep -q "dashed b:" "$work/cmp.svg" || fail "--compare SVG does not name the second report"

# --- two hosts: two namespaces joined by a veth pair
if [[ $(id -u) != 0 ]] || ! ip netns list >/dev/null 2>&1; then
  echo "two-namespace mode skipped: needs root and ip netns"
  exit 0
fi
if ! ip netns add "$ns_srv" || ! ip netns add "$ns_cli"; then
  echo "two-namespace mode skipped: ip netns add failed"
  exit 0
fi
ip link add "rrbs$$" netns "$ns_srv" type veth peer name "rrbc$$" netns "$ns_cli"
ip -n "$ns_srv" addr add 10.231.0.1/30 dev "rrbs$$"
ip -n "$ns_cli" addr add 10.231.0.2/30 dev "rrbc$$"
for ns in "$ns_srv" "$ns_cli"; do ip -n "$ns" link set lo up; done
ip -n "$ns_srv" link set "rrbs$$" up
ip -n "$ns_cli" link set "rrbc$$" up
ip netns exec "$ns_srv" "$bench" --bin-dir "$bin_dir" serve --bind 10.231.0.1 --port 7100 --seconds 120 \
  >"$work/serve.txt" 2>&1 &
serve_pid=$!
wait_for "$work/serve.txt" "ringrpc-bench serve:" 100 || fail "serve did not start: $(cat "$work/serve.txt")"
# In the background and waited for, so that a TERM (meson's timeout) runs the cleanup at once.
ip netns exec "$ns_cli" "$bench" --bin-dir "$bin_dir" --server 10.231.0.1:7100 --quick --duration 0.3 --rounds 1 \
  --sizes 64 --flows 1 --out "$work/out/two" >"$work/two.txt" 2>&1 &
client_pid=$!
rc=0
wait "$client_pid" || rc=$?
client_pid=
[[ $rc == 0 ]] || { cat "$work/two.txt" >&2; fail "--server run exited $rc"; }
check_report "$work/out/two.json" "two hosts"
echo "two-namespace mode: ok"
