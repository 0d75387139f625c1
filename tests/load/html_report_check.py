#!/usr/bin/env python3
"""Checks a `ringrpc-load --html` report (and optionally its --plot SVG) against its --json:
the key numbers are in the page, and markup the target or the command line put in texts stays
text: no element or attribute it could have injected, its escaped form present instead.

Usage: html_report_check.py REPORT.html RUN.json [--svg PLOT.svg] [--hostile TEXT]...
         [--server-measured | --server-not-measured] [--interrupted] [--extract-plot OUT.svg]
--extract-plot writes the page's inline plot to OUT.svg, for plot_properties.py.
Exits 1 naming the first check that fails."""

import argparse
import html
import html.parser
import json
import sys
import xml.etree.ElementTree as ET

# What the report may contain; anything else (script, img, iframe, object, ...) was injected.
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "tr", "th", "td", "div"}
SVG_TAGS = {"svg", "rect", "line", "polyline", "text", "title", "circle"}


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.bad_attrs, self.by_id, self._id, self.text = set(), [], {}, None, []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                self.bad_attrs.append((tag, name, value))
            if name == "id" and tag == "tr":
                self._id = value
                self.by_id[value] = []

    def handle_endtag(self, tag):
        if tag == "tr":
            self._id = None

    def handle_data(self, data):
        self.text.append(data)
        if self._id is not None and data.strip():
            self.by_id[self._id].append(data.strip())


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


def cell(page, row_id):
    """The value cell of the summary row `row_id` (its second text)."""
    texts = page.by_id.get(row_id)
    if not texts or len(texts) < 2:
        fail("no row id=%r with a value in the HTML" % row_id)
    return texts[1]


def check_svg(path, hostile):
    raw = open(path, encoding="utf-8").read()
    root = ET.fromstring(raw)  # well-formed XML: an unescaped < or & would not parse
    for el in root.iter():
        tag = el.tag.split("}")[-1]
        if tag not in SVG_TAGS:
            fail("%s: element <%s> is not one the plot draws" % (path, tag))
        for name in el.attrib:
            if name.split("}")[-1].startswith("on"):
                fail("%s: event attribute %s on <%s>" % (path, name, tag))
    for text in hostile:
        if text in raw:
            fail("%s: %r appears unescaped" % (path, text))


def check_numbers(page, j, args):
    if int(cell(page, "calls-ok")) != j["calls_ok"]:
        fail("calls ok %s, JSON %s" % (cell(page, "calls-ok"), j["calls_ok"]))
    if int(cell(page, "errors")) != sum(j["errors"].values()):
        fail("errors %s, JSON %s" % (cell(page, "errors"), j["errors"]))
    if abs(float(cell(page, "rate")) - j["calls_per_sec"]) > 0.051:
        fail("rate %s, JSON %s" % (cell(page, "rate"), j["calls_per_sec"]))
    for key, us in j["latency_us"].items():
        if key.startswith("p") and abs(float(cell(page, "lat-" + key)) - us) > max(0.01 * us, 0.006):
            fail("%s %s, JSON %s" % (key, cell(page, "lat-" + key), us))
    if args.server_measured and abs(float(cell(page, "server-cpu-per-call")) -
                                    j["server_cost"]["cpu_us_per_call"]) > 0.006:
        fail("server CPU per call %s, JSON %s" % (cell(page, "server-cpu-per-call"), j["server_cost"]))
    text = " ".join(page.text)
    if args.server_not_measured and "not measured" not in text:
        fail("no 'not measured' for the server's CPU")
    if args.interrupted and "ended early by SIGINT" not in text:
        fail("an interrupted run's report does not say so")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("json")
    ap.add_argument("--svg")
    ap.add_argument("--hostile", action="append", default=[])
    ap.add_argument("--server-measured", action="store_true")
    ap.add_argument("--server-not-measured", action="store_true")
    ap.add_argument("--interrupted", action="store_true")
    ap.add_argument("--extract-plot")
    args = ap.parse_args()
    raw = open(args.report, encoding="utf-8").read()
    page = Page()
    page.feed(raw)
    page.close()
    injected = page.tags - HTML_TAGS - SVG_TAGS
    if injected:
        fail("elements the report never writes: %s" % sorted(injected))
    if page.bad_attrs:
        fail("event handler or javascript: attributes: %s" % page.bad_attrs)
    for text in args.hostile:
        if text in raw:
            fail("%r appears unescaped in the HTML" % text)
        if html.escape(text, quote=True).replace("&#x27;", "&apos;") not in raw:
            fail("%r does not appear escaped in the HTML" % text)
    check_numbers(page, json.load(open(args.json)), args)
    if args.svg:
        check_svg(args.svg, args.hostile)
    if args.extract_plot:
        start = raw.index('<div id="plot">') + len('<div id="plot">\n')
        with open(args.extract_plot, "w", encoding="utf-8") as out:
            out.write(raw[start:raw.index("</svg>", start) + len("</svg>")] + "\n")
        check_svg(args.extract_plot, args.hostile)
    print("ok: %s: numbers match the JSON, %d hostile text(s) escaped" % (args.report, len(args.hostile)))


if __name__ == "__main__":
    main()
