"""Fails when a tool's --help has an option the docs' option table does not list.

Usage: tools_help_in_sync.py TOOL DOC HEADING [TOOL DOC HEADING]...

For each TOOL, every option line of `TOOL --help` (CLI11's "  -x,--name ARG  text" layout) must
have a table row ("| ... |") in DOC's section that starts with the line HEADING (up to the next
heading of the same or a higher level) naming the option in backticks: its long name, or its
short one when it has no long name. When the help text ends with a configuration key in
brackets ("[server.port]", as ringrpc-server's flags do), the row must name that key too.
"""
import re
import subprocess
import sys

OPTION = re.compile(r"^  (?:(-[A-Za-z]),)?(--[a-z0-9][a-z0-9-]*)?(?:\s|$)|^  (-[A-Za-z])(?:\s|$)")
KEY = re.compile(r"\[([a-z_]+\.[a-z_.]+)\]\s*$")


def options(tool):
    """(name, key or None) for each option of the tool's --help."""
    text = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = []
    current = None
    for line in text.splitlines():
        m = OPTION.match(line)
        if m and (m.group(2) or m.group(1) or m.group(3)):
            current = [m.group(2) or m.group(1) or m.group(3), line]
            found.append(current)
        elif current is not None and line.startswith("      ") and line.strip():
            current[1] += " " + line.strip()  # the description wrapped onto its own line
        else:
            current = None
    out = []
    for name, full in found:
        k = KEY.search(full)
        out.append((name, k.group(1) if k else None))
    return out


def section_rows(doc, heading):
    with open(doc, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        sys.exit(f"{doc}: no heading line '{heading}'")
    level = len(heading) - len(heading.lstrip("#"))
    rows = []
    for line in lines[start + 1:]:
        m = re.match(r"^(#+) ", line)
        if m and len(m.group(1)) <= level:
            break
        if line.startswith("|"):
            rows.append(line)
    return rows


def names(row, name):
    """True when the row names the option in backticks (`--name`, `-x, --name ARG`, ...)."""
    return re.search(r"`[^`]*(?<![A-Za-z0-9-])" + re.escape(name) + r"(?![A-Za-z0-9-])[^`]*`", row) is not None


def main(argv):
    if len(argv) < 4 or (len(argv) - 1) % 3 != 0:
        sys.exit(__doc__)
    problems = []
    for i in range(1, len(argv), 3):
        tool, doc, heading = argv[i:i + 3]
        rows = section_rows(doc, heading)
        opts = options(tool)
        if len(opts) < 3:
            problems.append(f"{tool} --help: only {len(opts)} options found; has its layout changed?")
        for name, key in opts:
            hits = [r for r in rows if names(r, name)]
            if not hits:
                problems.append(f"{doc} ({heading}): no table row for {tool.rsplit('/', 1)[-1]} {name}")
            elif key is not None and not any(f"`{key}`" in r for r in hits):
                problems.append(f"{doc} ({heading}): the row of {name} does not name its key `{key}`")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(f"{len(problems)} option(s) out of step with the docs")
    print("every option of every tool's --help has its row in the docs")


if __name__ == "__main__":
    main(sys.argv)
