"""Standalone verifier of the built-in suite (copied into the sandbox as .verifier/verify.py).

Runs with the workspace as working directory, reads `checks.json` beside itself (a list of
{"name", "kind", ...}) and prints one JSON object {name: score in [0, 1]}. Stdlib only: it runs
under the sandbox's python3, not the project's venv.
"""

import json
import os
import sys


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _lines(text):
    return [line.strip() for line in text.strip().splitlines()] if text is not None else None


def _number(text):
    try:
        return float(text.strip().split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def score(check):
    kind, path = check["kind"], check.get("path", "")
    text = _read(path) if path else None
    if kind == "file_exists":
        return os.path.isfile(path)
    if kind == "file_absent":
        return not os.path.exists(path)
    if kind == "dir_exists":
        return os.path.isdir(path)
    if kind == "text_equals":
        return text is not None and text.strip() == check["value"].strip()
    if kind == "text_contains":
        return text is not None and check["value"] in text
    if kind == "text_lacks":
        return text is not None and check["value"] not in text
    if kind == "lines_equal":
        return _lines(text) == [line.strip() for line in check["lines"]]
    if kind == "last_line":
        lines = _lines(text)
        return bool(lines) and lines[-1] == check["value"].strip()
    if kind == "number_equals":
        value = _number(text) if text is not None else None
        return value is not None and abs(value - check["value"]) <= check.get("tol", 1e-6)
    raise ValueError("unknown check kind: " + kind)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "checks.json"), encoding="utf-8") as f:
        checks = json.load(f)
    print(json.dumps({c["name"]: float(bool(score(c))) for c in checks}))


if __name__ == "__main__":
    sys.exit(main())
