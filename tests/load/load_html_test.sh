#!/usr/bin/env bash
# ringrpc-load --html against a hostile HTTP target on 127.0.0.1 (hostile_http_server.py: a
# quarter of its answers are 500s carrying markup): the report has the run's numbers (calls,
# errors, rate, percentiles as in --json), the server's CPU per call with --server-pid and "not
# measured" without, and markup in the target URL and a header stays text in the HTML and in
# the --plot SVG (html_report_check.py). Also: --html - is refused, a bad path fails before the
# run, and SIGINT still writes the report. The page's inline plot has the layout properties
# of --plot's (plot_properties.py).
# Usage: load_html_test.sh PATH/TO/ringrpc-load
# Exit 77 (skipped) without python3.
set -u

load=${1:?usage: $0 ringrpc-load}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=tests/lib.sh
. "$here/../lib.sh"
test_init load_html
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
cd "$work" || exit 1

start_server "$work/target" python3 "$here/hostile_http_server.py" || exit $?
spid=$server_pid port=$listen_port
script='<script>alert(1)</script>'
img='"><img src=x onerror=alert(1)>'
url="http://127.0.0.1:$port/$script"
check=("python3" "$here/html_report_check.py")

# --- a closed-loop run with its server's CPU --------------------------------------------------
run_load closed -c 2 -d 2s --warmup 0 --server-pid "$spid" -H "X-Note: $img" \
  --json closed.json --html closed.html --plot closed.svg "$url"
if [ $rc -ne 3 ]; then
  fail "closed loop against the hostile target: exit $rc, expected 3 (its 500s)"
  cat closed.err >&2
elif ! "${check[@]}" closed.html closed.json --svg closed.svg --hostile "$script" --hostile "$img" \
  --server-measured >check.out 2>&1; then
  fail "closed.html: $(cat check.out)"
elif ! grep -q 'http_500' closed.html; then
  fail "closed.html does not list the http_500 errors"
else
  ok "closed loop: $(cat check.out)"
fi

# --- an open-loop run without a server to measure ----------------------------------------------
run_load open -c 2 -R 100 -d 2s --warmup 0 --json open.json --html open.html "$url"
if [ $rc -ne 3 ]; then
  fail "open loop: exit $rc, expected 3"
  cat open.err >&2
elif ! "${check[@]}" open.html open.json --hostile "$script" --server-not-measured \
  --extract-plot open-plot.svg >check.out 2>&1; then
  fail "open.html: $(cat check.out)"
elif ! python3 "$here/plot_properties.py" "$load" open-plot.svg >props.out 2>&1; then
  fail "open.html's plot: $(cat props.out)"
elif ! grep -q 'id="requested-rate"><th>requested calls/s</th><td class="n">100.0<' open.html ||
  ! grep -q '>service</th>' open.html; then
  fail "open.html lacks the requested rate or the service-time column"
else
  ok "open loop: $(cat check.out)"
fi

# --- only --json goes to stdout; a bad path fails before the run --------------------------------
run_load dash -c 1 -d 1s --html - "$url"
if [ $rc -ne 2 ] || ! grep -q 'only --json can go to stdout' dash.err; then
  fail "--html -: exit $rc, expected 2 naming the rule: $(cat dash.err)"
else
  ok "--html - refused: $(head -n 1 dash.err)"
fi
run_load badpath -c 1 -d 30s --html "$work/no-such-dir/r.html" "$url"
if [ $rc -ne 2 ] || ! grep -q "cannot write $work/no-such-dir/r.html" badpath.err; then
  fail "--html into a missing directory: exit $rc: $(cat badpath.err)"
else
  ok "--html into a missing directory fails at once"
fi

# --- SIGINT: the run's report is still written ---------------------------------------------------
"$load" -c 2 -d 30s --warmup 0 --json int.json --html int.html "$url" >int.out 2>int.err &
interrupt_load $! 1.5
if [ $rc -ne 3 ]; then
  fail "after SIGINT: exit $rc, expected 3 (the target's 500s)"
elif ! "${check[@]}" int.html int.json --hostile "$script" --interrupted >check.out 2>&1; then
  fail "after SIGINT: $(cat check.out)"
else
  ok "SIGINT: $(cat check.out)"
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
exit 0
