#!/usr/bin/env python3
"""Properties of ringrpc-load's SVG plots, not just that one renders:

* the SVG parses as XML;
* the latency axis is logarithmic: its tick values grow by constant factors and their
  positions are linear in log10(value);
* no two text boxes overlap, and every text lies inside the picture (boxes from each text's
  position, anchor, rotation and font size, average glyph width 0.62 em as in report_svg.cpp);
* every series (polyline) is named in a legend; an open-loop run has its corrected and service
  curves and its requested rate labelled; the title names the run's configuration.

Usage: plot_properties.py PATH/TO/ringrpc-load [EXTRA.svg ...]
       plot_properties.py --samples DIR      (writes the sample runs' JSON into DIR)
Plots are made by `ringrpc-load plot` from JSON files written here (a wide latency range, nine
nines, open and closed loop, long labels); EXTRA files (e.g. from a real run) get the generic checks.
"""
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
GLYPH_EM = 0.62
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, file=sys.stderr)


def text_boxes(root):
    """(label, x0, y0, x1, y1) of every <text>, in picture coordinates."""
    boxes = []
    for t in root.iter(NS + "text"):
        s = "".join(t.itertext())
        size = float(t.get("font-size", root.get("font-size", "12")))
        w = len(s) * size * GLYPH_EM
        x, y = float(t.get("x")), float(t.get("y"))
        anchor = t.get("text-anchor", "start")
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        box = (x0, y - 0.8 * size, x0 + w, y + 0.2 * size)
        m = re.match(r"rotate\((-?[\d.]+) ([\d.]+) ([\d.]+)\)", t.get("transform", ""))
        if m:
            angle, cx, cy = float(m.group(1)), float(m.group(2)), float(m.group(3))
            if angle != -90:
                fail("unexpected rotation %s" % angle)
            # Rotating -90 about (cx, cy): (x, y) -> (cx + (y - cy), cy - (x - cx)).
            xs = [cx + (box[1] - cy), cx + (box[3] - cy)]
            ys = [cy - (box[0] - cx), cy - (box[2] - cx)]
            box = (min(xs), min(ys), max(xs), max(ys))
        boxes.append((s,) + box)
    return boxes


def check_layout(root, name):
    width, height = float(root.get("width")), float(root.get("height"))
    boxes = text_boxes(root)
    if len(boxes) < 10:
        fail("%s: only %d texts" % (name, len(boxes)))
    for s, x0, y0, x1, y1 in boxes:
        if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
            fail("%s: text %r (%.0f,%.0f)-(%.0f,%.0f) is outside the %gx%g picture" % (name, s, x0, y0, x1, y1, width, height))
    for a, b in itertools.combinations(boxes, 2):
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]:
            fail("%s: texts %r and %r overlap" % (name, a[0], b[0]))


def check_log_axis(root, name):
    ticks = [t for t in root.iter(NS + "text") if "latency-tick" in t.get("class", "").split()]
    points = sorted((float(t.get("data-value")), float(t.get("y"))) for t in ticks)
    if len(points) < 2:
        fail("%s: %d latency ticks" % (name, len(points)))
        return
    (v0, y0), (vn, yn) = points[0], points[-1]
    if vn / v0 < 9.99:
        fail("%s: the latency axis spans %g..%g, less than a decade" % (name, v0, vn))
    per_decade = (yn - y0) / (math.log10(vn) - math.log10(v0))
    for v, y in points:
        expect = y0 + per_decade * (math.log10(v) - math.log10(v0))
        if abs(y - expect) > 0.6:
            fail("%s: latency tick %g at y=%.1f, a log axis puts it at %.1f" % (name, v, y, expect))
    decades = [v for v, _ in points if abs(math.log10(v) - round(math.log10(v))) < 1e-9]
    if len(decades) < 2:
        fail("%s: fewer than two powers of ten among the latency ticks %s" % (name, [v for v, _ in points]))


def check_labels(root, name):
    legend = {"".join(t.itertext()) for t in root.iter(NS + "text") if t.get("class") == "legend"}
    series = [p.get("data-label") for p in root.iter(NS + "polyline") if p.get("class") == "series"]
    if not series:
        fail("%s: no series drawn" % name)
    for s in series:
        if s not in legend:
            fail("%s: series %r is not in a legend (%s)" % (name, s, sorted(legend)))
    return legend


def parse(path):
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as e:
        fail("%s does not parse: %s" % (path, e))
        return None


def generic(path):
    root = parse(path)
    if root is None:
        return None
    check_layout(root, path)
    check_log_axis(root, path)
    check_labels(root, path)
    return root


def spectrum(lo_us, hi_us, nines):
    """An HdrHistogram-like spectrum from lo to hi up to `nines` nines, then 100."""
    pts, p = [], 0.0
    while p < 100 - 10 ** (2 - nines):
        x = math.log10(100 / (100 - p))
        pts.append({"percentile": p, "latency_us": lo_us * (hi_us / lo_us) ** (x / nines)})
        p += (100 - p) / 8
    pts.append({"percentile": 100.0, "latency_us": hi_us})
    return pts


def run_json(path, target, open_loop, nines, lo, hi, seconds, rate):
    j = {
        "config": {"target": target, "connections": 64, "depth": 16, "threads": 1, "duration_s": seconds,
                   "loop": "open" if open_loop else "closed"},
        "spectrum": spectrum(lo, hi, nines),
        "per_second": [{"t_s": float(i + 1), "calls_ok": int(rate * (0.9 + 0.1 * (i % 3))), "errors": 0,
                        "p99_us": 1.0} for i in range(seconds)],
        "requested_rate": float(rate) if open_loop else 0.0,
    }
    if open_loop:
        j["config"]["rate"] = float(rate)
        j["service_spectrum"] = spectrum(lo / 2, hi / 50, nines)
    with open(path, "w") as f:
        json.dump(j, f)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "--samples":
        # For the screenshot test: the same two runs' JSON, in the directory given.
        run_json(os.path.join(sys.argv[2], "open-20k.json"), "ringrpc://127.0.0.1:7000/echo", True, 9, 4.2, 2.9e6, 60, 20000)
        run_json(os.path.join(sys.argv[2], "closed.json"), "ringrpc://127.0.0.1:7000/echo", False, 6, 31.0, 8200.0, 7, 123456)
        return 0
    load = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "open-20k.json"), os.path.join(d, "closed-baseline-with-a-long-name.json")
        run_json(a, "ringrpc://127.0.0.1:7000/echo", True, 9, 4.2, 2.9e6, 60, 20000)
        run_json(b, "ringrpc://127.0.0.1:7000/echo", False, 6, 31.0, 8200.0, 7, 123456)
        cases = {"one open-loop run": [a], "open and closed overlaid": [a, b]}
        for case, files in cases.items():
            before = len(failures)
            out = os.path.join(d, "x.svg")
            r = subprocess.run([load, "plot"] + files + ["-o", out], capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                fail("%s: ringrpc-load plot exited %d: %s" % (case, r.returncode, r.stderr))
                continue
            root = generic(out)
            if root is None:
                continue
            legend = check_labels(root, case)
            for want in ("open-20k (corrected)", "open-20k (service)", "open-20k requested 20k/s"):
                if want not in legend:
                    fail("%s: no legend entry %r (%s)" % (case, want, sorted(legend)))
            title = [("".join(t.itertext())) for t in root.iter(NS + "text") if t.get("class") == "title"]
            if len(files) == 1 and not (title and all(w in title[0] for w in
                                                       ("ringrpc://127.0.0.1:7000/echo", "64 conn x depth 16",
                                                        "open loop 20k calls/s", "60 s"))):
                fail("%s: the title does not give the configuration: %s" % (case, title))
            nines = ["".join(t.itertext()) for t in root.iter(NS + "text") if "nines-tick" in t.get("class", "")]
            if "99.9%" not in nines or len(nines) < 4:
                fail("%s: nines labels %s" % (case, nines))
            if len(failures) == before:
                print("ok: %s: parses, log latency axis, %d texts without overlap, series labelled" %
                      (case, len(text_boxes(root))))
        # --rate-steps: the requested rate drawn as scheduled (a level per step), and an
        # interrupted run's last, partial second drawn at its real end and marked.
        c = os.path.join(d, "open-steps.json")
        run_json(c, "ringrpc://127.0.0.1:7000/echo", True, 6, 20.0, 9000.0, 6, 20000)
        with open(c) as f:
            j = json.load(f)
        j["steps"] = [{"start_s": 0.0, "duration_s": 3.0, "requested_rate": 10000.0},
                      {"start_s": 3.0, "duration_s": 2.5, "requested_rate": 30000.0}]
        j["measured_s"] = 5.5
        j["per_second"] = j["per_second"][:6]
        j["per_second"][5].update({"t_s": 5.5, "width_s": 0.5})
        with open(c, "w") as f:
            json.dump(j, f)
        out = os.path.join(d, "steps.svg")
        r = subprocess.run([load, "plot", c, "-o", out], capture_output=True, text=True, timeout=30)
        root = generic(out) if r.returncode == 0 else None
        if r.returncode != 0:
            fail("steps: ringrpc-load plot exited %d: %s" % (r.returncode, r.stderr))
        elif root is not None:
            req = [p for p in root.iter(NS + "polyline") if p.get("data-label") == "open-steps requested (steps)"]
            pts = [tuple(map(float, xy.split(","))) for xy in req[0].get("points").split()] if req else []
            if len(pts) != 4 or pts[0][1] != pts[1][1] or pts[2][1] != pts[3][1] or not pts[2][1] < pts[1][1]:
                fail("steps: the requested rate is not drawn as two steps: %s" % pts)
            if len([e for e in root.iter(NS + "circle") if e.get("class") == "partial"]) != 1:
                fail("steps: the partial last second is not marked")
            title = [("".join(t.itertext())) for t in root.iter(NS + "text") if t.get("class") == "title"]
            if not title or not title[0].endswith("5.5 s"):
                fail("steps: the title does not give the measured 5.5 s: %s" % title)
            else:
                print("ok: steps: requested drawn as steps, partial second marked, measured duration in the title")
    for extra in sys.argv[2:]:
        before = len(failures)
        if generic(extra) is not None and len(failures) == before:
            print("ok: %s" % extra)
    if failures:
        print("%d property check(s) failed" % len(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
