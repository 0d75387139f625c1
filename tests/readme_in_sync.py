"""Fails when README.md no longer shows each example file (tests/readme_*example.cpp) verbatim."""
import sys

readme, examples = sys.argv[1], sys.argv[2:]
with open(readme, encoding="utf-8") as f:
    text = f.read()
for example in examples:
    with open(example, encoding="utf-8") as f:
        code = f.read()
    if code.strip() not in text:
        sys.exit(f"{readme}: its example differs from {example}; update one of them")
