"""Fails when README.md no longer shows tests/readme_example.cpp verbatim."""
import sys

readme, example = sys.argv[1], sys.argv[2]
with open(readme, encoding="utf-8") as f:
    text = f.read()
with open(example, encoding="utf-8") as f:
    code = f.read()
if code.strip() not in text:
    sys.exit("README.md's embedding example differs from tests/readme_example.cpp; update one of them")
