"""The `fix_calc` office family: calc.py has three small functions, one of them wrong, and
test_calc.py (unittest) fails; the job is to fix calc.py so that `python3 test_calc.py` passes.

The checks cannot be forged by the agent's code: the test runs in a child process whose output
is captured (never this verifier's stdout), it must exit 0 with unittest's own "Ran 3 tests ... OK"
and test_calc.py must be byte-identical to the original (sha256); and, since code that exits 0 at
import would fake a run, a second check calls the three functions directly, in an isolated child
(`python3 -I`), on inputs the agent never sees, and compares the values with the right ones.
Neither child can reach this verifier: the step checker is non-dumpable and runs each child in a
Landlock domain of its own (docs/security.md, "The verifier and the code it runs").
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Callable

from harnessrl.tasks.suite.families import Job
from harnessrl.tasks.suite.pools import Pools

# name -> (parameters, right body, wrong body, right function, input maker); the wrong function is
# the wrong body as a function in WRONG (tests check the two agree)
_Inputs = Callable[[random.Random], list[Any]]
FUNCS: dict[str, tuple[str, str, str, Callable[..., Any], _Inputs]] = {
    "add": ("a, b", "a + b", "a - b", lambda a, b: a + b,
            lambda r: [r.randint(2, 90), r.randint(2, 90)]),
    "subtract": ("a, b", "a - b", "b - a", lambda a, b: a - b,
                 lambda r: [r.randint(50, 99), r.randint(1, 40)]),
    "multiply": ("a, b", "a * b", "a + b", lambda a, b: a * b,
                 lambda r: [r.randint(3, 12), r.randint(3, 12)]),
    "average": ("xs", "sum(xs) / len(xs)", "sum(xs) / (len(xs) + 1)", lambda xs: sum(xs) / len(xs),
                lambda r: [[r.randint(1, 50) for _ in range(r.randint(2, 5))]]),
    "clamp": ("x, lo, hi", "max(lo, min(x, hi))", "min(lo, max(x, hi))", lambda x, lo, hi: max(lo, min(x, hi)),
              lambda r: [r.randint(-20, 120), r.randint(0, 10), r.randint(50, 100)]),
    "percent": ("part, whole", "100 * part / whole", "part / whole", lambda part, whole: 100 * part / whole,
                lambda r: [r.randint(1, 40), r.randint(41, 200)]),
}

WRONG: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a - b,
    "subtract": lambda a, b: b - a,
    "multiply": lambda a, b: a + b,
    "average": lambda xs: sum(xs) / (len(xs) + 1),
    "clamp": lambda x, lo, hi: min(lo, max(x, hi)),
    "percent": lambda part, whole: part / whole,
}


def _module(names: list[str], broken: str | None) -> str:
    parts = ['"""Small arithmetic helpers."""\n']
    for n in names:
        params, right, wrong = FUNCS[n][:3]
        parts.append(f"\ndef {n}({params}):\n    return {wrong if n == broken else right}\n")
    return "\n".join(parts)


def _distinct_inputs(rng: random.Random, name: str, k: int) -> list[list[Any]]:
    """k inputs on which the wrong body of `name` gives another value than the right one."""
    _params, _right, _wrong, fn, make = FUNCS[name]
    bad = WRONG[name]
    out: list[list[Any]] = []
    while len(out) < k:
        args = make(rng)
        if bad(*args) != fn(*args) and args not in out:
            out.append(args)
    return out


def _tests(names: list[str], visible: dict[str, list[list[Any]]]) -> str:
    lines = ["import unittest", "", "from calc import " + ", ".join(names), "", "",
             "class TestCalc(unittest.TestCase):"]
    for n in names:
        lines.append(f"    def test_{n}(self):")
        for args in visible[n]:
            call = f"{n}({', '.join(repr(a) for a in args)})"
            lines.append(f"        self.assertAlmostEqual({call}, {FUNCS[n][3](*args)!r})")
        lines.append("")
    lines += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
    return "\n".join(lines)


def calc_job(rng: random.Random, p: Pools, _split: str) -> Job:
    names = rng.sample(sorted(FUNCS), 3)
    broken = rng.choice(names)
    visible = {n: _distinct_inputs(rng, n, 2) for n in names}
    hidden = {n: [a for a in _distinct_inputs(rng, n, 5) if a not in visible[n]][:3] for n in names}
    test_text = _tests(names, visible)
    calls = [[n, args, FUNCS[n][3](*args)] for n in names for args in hidden[n]]
    checks: list[dict[str, Any]] = [
        {"name": "python3 test_calc.py passes, test file unchanged", "kind": "py_test", "path": "test_calc.py",
         "sha256": hashlib.sha256(test_text.encode()).hexdigest(), "tests": len(names)},
        {"name": "calc.py functions give the right values", "kind": "py_values", "path": "calc.py",
         "calls": calls}]
    solution = (f"cat > calc.py <<'EOF'\n{_module(names, None)}EOF",)
    return Job({"module": "calc.py", "test": "test_calc.py"},
               {"calc.py": _module(names, broken), "test_calc.py": test_text}, checks, solution,
               {"answer": broken, "functions": names})
