"""OfficeQA's answer scoring, as a verifier file (standard library only: it runs as
`python3 -I .verifier/officeqa_score.py` in the verifier's sandbox, workspace as working directory).

The rules are those OfficeQA's `reward.py` documents (databricks/officeqa, `score_answer`):
- the answer is the text inside `<FINAL_ANSWER>...</FINAL_ANSWER>` when the tags are there;
- numbers are compared as written (commas dropped, a Unicode minus read as '-'), within a relative
  `tolerance` (0.0 = exact); unit words are not applied ("543 million" and "543" agree);
- a ground truth with several numbers needs every one of them in the answer;
- year-like numbers (1900-2100) in the answer are passed over unless the ground truth is a year
  or carries text;
- the words of a ground truth that carries text ("March 1977") must appear in the answer too;
- a ground truth without numbers matches when its text (lower case, quotes and parentheses
  dropped) is found in the answer.

Where the agent's output is hostile, harnessrl is stricter than the reference scorer:
- `answer.txt` counts only as a regular file (never a link: a link to this verifier's own
  expected.json would hand the agent the ground truth);
- an answer longer than `max(200, 8 x the ground truth)` characters, or holding more than
  `max(4, 2 x the ground truth's)` numbers, scores 0: a list of guesses is not an answer.

Reads `expected.json` ({"answer", "tolerance"}) beside this file; the agent's answer from the
workspace's `answer.txt`, else from the final message (payload in OPENCLAW_REWARD_PAYLOAD).
Prints one JSON object: {"answered", "correct", "reward"}; nothing the agent wrote is printed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

ANSWER_FILE = "answer.txt"
MAX_READ = 64 << 10  # bytes read of answer.txt and of the final message
MAX_PAYLOAD = 64 << 20  # bytes read of the payload (it holds the transcript)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?%?")
_TAGS = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)
_UNIT_WORDS = ("trillions", "trillion", "billions", "billion", "millions", "million", "thousands",
               "thousand", "hundreds", "hundred", "percentage", "percent")


def normalize(text: str) -> str:
    return text.replace("\u2212", "-").replace("\u2013", "-")


def numbers(text: str) -> list[float]:
    """The numbers written in `text` (commas inside numbers dropped, a trailing % kept off)."""
    plain = re.sub(r"(?<=\d),(?=\d)", "", normalize(text))
    return [float(m.group().rstrip("%")) for m in _NUMBER.finditer(plain)]


def words(text: str) -> str:
    """The text of `text` without its numbers, unit words and punctuation (lower case)."""
    out = re.sub(r"-?\d+(?:\.\d+)?%?", " ", normalize(text).lower())
    for unit in _UNIT_WORDS:
        out = re.sub(rf"\b{unit}\b", " ", out)
    out = re.sub(r"[^\w\s]", " ", out)
    return re.sub(r"\s+", " ", out).strip()


def is_year(x: float) -> bool:
    return 1900 <= x <= 2100 and x == int(x)


def final_answer(text: str) -> str:
    m = _TAGS.search(text)
    return m.group(1).strip() if m else text.strip()


def _close(gt: float, pred: float, tolerance: float) -> bool:
    if gt == 0:
        return pred == 0
    return abs(gt - pred) / abs(gt) <= tolerance + 1e-12


def matches(truth: str, predicted: str, tolerance: float = 0.0) -> bool:
    """Whether `predicted` (already the final answer) is right for ground truth `truth`."""
    truth, predicted = truth.strip(), predicted.strip()
    if not truth or not predicted:
        return False
    if len(predicted) > max(200, 8 * len(truth)):
        return False
    gt_nums, pred_nums = numbers(truth), numbers(predicted)
    if len(pred_nums) > max(4, 2 * len(gt_nums)):
        return False
    gt_words, pred_words = words(truth), words(predicted)
    text_ok = len(gt_words) < 2 or (len(pred_words) >= 2 and (gt_words in pred_words or pred_words in gt_words))
    if gt_nums and pred_nums:
        if len(gt_nums) == 1 and not (is_year(gt_nums[0]) or len(gt_words) >= 2):
            pred_nums = [p for p in pred_nums if not is_year(p)]
        elif len(gt_nums) > 1 and not any(is_year(g) for g in gt_nums):
            pred_nums = [p for p in pred_nums if not is_year(p)]
        return text_ok and all(any(_close(g, p, tolerance) for p in pred_nums) for g in gt_nums)
    clean = (lambda s: " ".join(re.sub(r"\([^)]*\)", " ", s.lower().strip().strip("\"'")).split()))
    return bool(clean(truth)) and clean(truth) in clean(predicted)


def _read_regular(path: str, limit: int = MAX_READ) -> str | None:
    """The start of a regular file, never through a link (None when it is absent or not one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def agent_answer() -> str:
    """answer.txt of the workspace, else the final message of the payload ('' when neither)."""
    text = _read_regular(ANSWER_FILE)
    if text is not None and text.strip():
        return final_answer(text)
    payload = os.environ.get("OPENCLAW_REWARD_PAYLOAD", "")
    raw = _read_regular(payload, MAX_PAYLOAD) if payload else None
    try:
        message = json.loads(raw).get("final_message", "") if raw else ""
    except (ValueError, AttributeError):
        message = ""
    return final_answer(message[:MAX_READ]) if isinstance(message, str) else ""


def main() -> int:
    expected = json.loads((Path(__file__).parent / "expected.json").read_text())
    answer = agent_answer()
    correct = bool(answer) and matches(str(expected["answer"]), answer, float(expected.get("tolerance", 0.0)))
    print(json.dumps({"answered": float(bool(answer)), "correct": float(correct), "reward": float(correct)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
