#!/bin/sh
# A plot as a person sees it: headless Debian chromium renders an SVG of `ringrpc-load plot`
# and the screenshot must not be blank (enough non-white pixels, and the first series' blue).
# Usage: plot_screenshot_test.sh PATH/TO/ringrpc-load PATH/TO/plot_properties.py
# Exit 77 (skipped) without chromium (Debian: chromium) or python3.
set -u
load=${1:?usage: $0 ringrpc-load plot_properties.py}
props=${2:?usage: $0 ringrpc-load plot_properties.py}
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ] || ! command -v python3 >/dev/null; then
  echo "chromium or python3 not installed: skipped"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/plot_shot.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
python3 "$props" --samples "$work" || exit 1
timeout 30 "$load" plot "$work/open-20k.json" "$work/closed.json" -o "$work/plot.svg" >/dev/null || exit 1
# Chromium wants a writable home and profile; --no-sandbox because tests may run as root.
HOME=$work timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size=1000,470 \
  --screenshot="$work/plot.png" "file://$work/plot.svg" >"$work/chromium.log" 2>&1
if [ ! -s "$work/plot.png" ]; then
  echo "FAIL: chromium wrote no screenshot:" >&2
  tail -20 "$work/chromium.log" >&2
  exit 1
fi
python3 "$(dirname "$0")/screenshot_ink.py" "$work/plot.png"
