#!/usr/bin/env bash
# The --html report as a person sees it: headless Debian chromium, offline (the page fetches
# nothing), renders a report of a run against the hostile HTTP target (hostile_http_server.py);
# the screenshot must not be blank (screenshot_ink.py: ink and the plot's blue), and the DOM
# chromium built must hold the run's numbers and no element the target's markup could inject.
# Usage: html_screenshot_test.sh PATH/TO/ringrpc-load
# Exit 77 (skipped) without chromium (Debian: chromium) or python3.
set -u
load=${1:?usage: $0 ringrpc-load}
here=$(cd "$(dirname "$0")" && pwd)
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ] || ! command -v python3 >/dev/null; then
  echo "chromium or python3 not installed: skipped"
  exit 77
fi

# shellcheck source=tests/lib.sh
. "$here/../lib.sh"
test_init html_shot
cd "$work" || exit 1
start_server "$work/target" python3 "$here/hostile_http_server.py" || exit $?
port=$listen_port
run_load run -c 2 -d 2s --warmup 0 --json run.json --html run.html "http://127.0.0.1:$port/<script>alert(1)</script>"
if [ $rc -ne 3 ] || [ ! -s run.html ]; then
  echo "FAIL: the run exited $rc (expected 3) or wrote no report:" >&2
  cat run.err >&2
  exit 1
fi

# Chromium wants a writable home and profile; --no-sandbox because tests may run as root.
shoot() {
  HOME=$work timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$work/profile" --hide-scrollbars "$@" "file://$work/run.html" 2>>"$work/chromium.log"
}
shoot --window-size=1100,1700 --screenshot="$work/run.png" >/dev/null
if [ ! -s run.png ]; then
  echo "FAIL: chromium wrote no screenshot:" >&2
  tail -20 chromium.log >&2
  exit 1
fi
python3 "$here/screenshot_ink.py" run.png || exit 1

shoot --dump-dom >dom.html
calls=$(json_field run.json 'j["calls_ok"]')
errors=$(json_field run.json 'sum(j["errors"].values())')
if [ ! -s dom.html ]; then
  fail "chromium dumped no DOM: $(tail -5 chromium.log)"
elif ! grep -q "id=\"calls-ok\"><th>calls ok</th><td class=\"n\">$calls</td>" dom.html ||
  ! grep -q "id=\"errors\"><th>errors</th><td class=\"n\">$errors</td>" dom.html; then
  fail "the DOM lacks calls ok $calls or errors $errors"
elif grep -qi '<script\|<img\|onerror=' dom.html; then
  fail "the DOM has an injected element: $(grep -oi '<script[^>]*>\|<img[^>]*>' dom.html | head -3)"
elif ! grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' dom.html || ! grep -q '<svg' dom.html; then
  fail "the DOM lacks the target's URL as text or the plots"
else
  ok "DOM: $calls calls ok, $errors errors, the target's markup as text, the plots inline"
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
exit 0
