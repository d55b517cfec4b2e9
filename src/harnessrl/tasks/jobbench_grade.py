"""JobBench rubric grading by fact anchors, as a verifier file (standard library only: it runs as
`python3 -I .verifier/jobbench_grade.py` in the verifier's sandbox, workspace as working directory).

JobBench grades a task with its RUBRICS.json, weighted criteria that an LLM judge reads against the
agent's deliverables. The verifier sandbox has no model to ask, so this grader keeps to what a
criterion states as fact: the numbers it names ("20.2% (236/1166)") and the phrases it quotes.
- A criterion's anchors are the numbers in its `rubric` text that carry a decimal point, a % or $
  sign, or at least three digits (not a year), and its quoted phrases (3 to 80 characters); when
  the rubric text has none, those of its `criterion` list.
- A criterion passes when every one of its anchors is in the deliverables: a number written to at
  least the anchor's precision (20.24% meets 20.2%), a phrase in any letter case.
- The reward is the passed criteria's share of the positive weight of ALL criteria: a criterion
  without anchors never passes here, so the reward is a lower bound of what a judge could give.
  Negative weights (penalties) are left out.

The deliverables are the files the agent wrote or changed in the workspace (regular files only,
never through a link; .docx/.xlsx/.pptx read as their XML text, other binary files such as PDFs
not read; at most 8 MiB a file, 32 MiB in all) and its final message. A file byte-identical to a starting file, and every line that is also
a line of a starting file, do not count: copying the inputs proves nothing. Deliverables that
state more than MAX_NUMBERS (1000) distinct numbers score 0: a list of guesses would meet every
numeric anchor. The grader is a stand-in for the judge; for RL on JobBench, a policy that learns to
game it shows up as rising reward with flat judged scores.

Reads `rubrics.json` and `inputs.json` ({"files": [sha256...], "lines": [hash...]}) beside this
file. Prints one JSON object: a check per anchored criterion ("c03": 0 or 1), and "reward".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import zipfile
from pathlib import Path
from typing import Any

MAX_FILE = 8 << 20
MAX_TOTAL = 32 << 20
MAX_PAYLOAD = 64 << 20
MAX_NUMBERS = 1000  # distinct numbers the deliverables may state (more: a list of guesses, reward 0)
ZIP_TEXT = (".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp")
_NUM = re.compile(r"(?<![\w.])[-\u2212]?\$?\d[\d,]*(?:\.\d+)?%?")
# quoted phrases: "..." and \u201c...\u201d anywhere; '...' and \u2018...\u2019 only between non-letters (an
# apostrophe, as in "the agent's report", opens no quote)
_QUOTED = re.compile("\"([^\"]{3,80})\"|\u201c([^\u201d]{3,80})\u201d|(?<!\\w)'([^']{3,80})'(?!\\w)"
                     "|(?<!\\w)\u2018([^\u2019]{3,80})\u2019(?!\\w)")
_TAG = re.compile(r"<[^>]{0,4096}>")


def line_key(line: str) -> str:
    """The hash of a line as starting files and deliverables are compared (normalised)."""
    norm = " ".join(line.lower().split())
    return hashlib.blake2b(norm.encode(), digest_size=8).hexdigest()


def _number(token: str) -> tuple[float, int] | None:
    """(value, decimals) of a number token ('$1,166.50%' -> (1166.5, 2))."""
    plain = token.replace("\u2212", "-").replace("$", "").replace(",", "").rstrip("%")
    try:
        value = float(plain)
    except ValueError:
        return None
    return value, len(plain.split(".")[1]) if "." in plain else 0


def anchors(text: str) -> tuple[list[tuple[float, int]], list[str]]:
    """The numbers and quoted phrases of a criterion's text that a deliverable must state."""
    nums = []
    for m in _NUM.finditer(text):
        tok, parsed = m.group(), _number(m.group())
        if parsed is None:
            continue
        value, decimals = parsed
        year = decimals == 0 and 1900 <= value <= 2100
        if ("." in tok or "%" in tok or "$" in tok or abs(value) >= 100) and not year:
            nums.append(parsed)
    found = ("".join(groups) for groups in _QUOTED.findall(text))
    phrases = [" ".join(p.lower().split()) for p in found if p.strip()]
    return list(dict.fromkeys(nums)), list(dict.fromkeys(phrases))


def item_anchors(item: dict[str, Any]) -> tuple[list[tuple[float, int]], list[str]]:
    nums, phrases = anchors(str(item.get("rubric", "")))
    if not nums and not phrases:
        crit = item.get("criterion") or []
        nums, phrases = anchors(" ".join(str(c) for c in (crit if isinstance(crit, list) else [crit])))
    return nums, phrases


def _read_regular(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def zip_text(data: bytes) -> str:
    """The XML text of an Office/OpenDocument file ('' when it is not a readable zip)."""
    import io

    parts, total = [], 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if not info.filename.endswith(".xml") or total > MAX_FILE:
                    continue
                with z.open(info) as f:
                    chunk = f.read(MAX_FILE - total)
                total += len(chunk)
                parts.append(_TAG.sub("\n", chunk.decode("utf-8", errors="replace")))
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, NotImplementedError):
        return ""
    return "\n".join(parts)


def file_text(name: str, data: bytes) -> str:
    """A file's text: Office/OpenDocument files as their XML text, other binary files (a NUL byte
    in the first 8 KiB: PDF, images) as none, the rest as UTF-8."""
    if name.lower().endswith(ZIP_TEXT):
        return zip_text(data)
    return "" if b"\0" in data[:8192] else data.decode("utf-8", errors="replace")


def deliverables(inputs: dict[str, Any]) -> str:
    """The text of what the agent produced (see the module docstring), lines of the inputs dropped."""
    starting, seen_lines = set(inputs.get("files", [])), set(inputs.get("lines", []))
    texts, total = [], 0
    for top, dirs, files in os.walk(".", followlinks=False):
        dirs[:] = sorted(d for d in dirs if not (top == "." and d == ".verifier"))
        for name in sorted(files):
            if total >= MAX_TOTAL:
                break
            data = _read_regular(os.path.join(top, name), MAX_FILE)
            if data is None or hashlib.sha256(data).hexdigest() in starting:
                continue
            total += len(data)
            texts.append(file_text(name, data))
    payload = os.environ.get("OPENCLAW_REWARD_PAYLOAD", "")
    raw = _read_regular(payload, MAX_PAYLOAD) if payload else None
    try:
        message = json.loads(raw).get("final_message", "") if raw else ""
    except (ValueError, AttributeError):
        message = ""
    if isinstance(message, str):
        texts.append(message[:MAX_FILE])
    lines = (line for text in texts for line in text.splitlines())
    return "\n".join(line for line in lines if line.strip() and line_key(line) not in seen_lines)


def stated(text: str) -> tuple[list[tuple[float, int]], str]:
    norm = " ".join(text.lower().replace("\u2212", "-").split())
    return [p for p in (_number(m.group()) for m in _NUM.finditer(norm)) if p is not None], norm


def passes(item: dict[str, Any], numbers: list[tuple[float, int]], norm: str) -> bool:
    nums, phrases = item_anchors(item)
    if not nums and not phrases:
        return False
    ok_num = all(any(d >= dec and round(v, dec) == round(a, dec) for v, d in numbers) for a, dec in nums)
    return ok_num and all(p in norm for p in phrases)


def rubric_items(doc: Any) -> list[dict[str, Any]]:
    items = doc.get("rubrics", []) if isinstance(doc, dict) else doc
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def grade(doc: Any, inputs: dict[str, Any]) -> dict[str, float]:
    items = rubric_items(doc)
    weights = [float(i.get("weight", 1) or 0) for i in items]
    total = sum(w for w in weights if w > 0)
    numbers, norm = stated(deliverables(inputs))
    checks: dict[str, float] = {"within_number_cap": float(len(set(numbers)) <= MAX_NUMBERS)}
    if not checks["within_number_cap"]:
        numbers, norm = [], ""
    earned = 0.0
    for n, (item, w) in enumerate(zip(items, weights), start=1):
        if w <= 0 or not any(item_anchors(item)):
            continue
        ok = bool(norm) and passes(item, numbers, norm)
        checks[f"c{n:02d}"] = float(ok)
        earned += w if ok else 0.0
    checks["reward"] = min(1.0, earned / total) if total > 0 else 0.0
    return checks


def main() -> int:
    here = Path(__file__).parent
    doc = json.loads((here / "rubrics.json").read_text())
    inputs = json.loads((here / "inputs.json").read_text())
    print(json.dumps(grade(doc, inputs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
