"""The wording generator (tasks/suite/wording.py, style_words.py, names.py): deterministic, broad
(many sentence shapes, five file-name styles, several politeness levels), and split so that the
`reworded` and `style` generators never produce a training instruction."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from harnessrl.tasks import load_tasks
from harnessrl.tasks.suite.names import NAME_STYLES, styled
from harnessrl.tasks.suite.pools import TRAIN
from harnessrl.tasks.suite.style_words import CORES, FRAMES, JOINS
from harnessrl.tasks.suite.wording import STYLE_GROUPS, producible, shapes, word_job, word_jobs

KINDS = tuple(CORES["plain"])
SETS = ("wide", "lookup", "jobs")
TRAINING_SPLITS = ("train", "test", "long")  # worded by the training group


def _kinds(task) -> tuple[str, ...]:
    if task.category == "lookup":
        return (task.family,)
    return tuple(task.metadata["jobs"]) if task.family == "jobs" else (task.family,)


def _by_group() -> dict[str, list]:
    out: dict[str, list] = {}
    for s in SETS:
        for t in load_tasks(f"builtin:{s}"):
            out.setdefault(t.metadata["wording_group"], []).append(t)
    return out


BY_GROUP = _by_group()


def test_generation_is_deterministic():
    for s in SETS:
        a, b = load_tasks(f"builtin:{s}"), load_tasks(f"builtin:{s}")
        assert [(t.id, t.instruction, t.files, t.reference_solution) for t in a] == \
               [(t.id, t.instruction, t.files, t.reference_solution) for t in b]
    slots = {"name": "amber3.note", "word": "maple"}
    assert word_job(random.Random(7), "train", "write_word", slots) == word_job(random.Random(7), "train", "write_word", slots)
    texts = {word_job(random.Random(i), "train", "write_word", slots).text for i in range(200)}
    assert len(texts) >= 40  # and the seed matters


def test_every_style_has_every_kind_and_the_groups_share_nothing():
    for style in FRAMES:
        assert set(CORES[style]) == set(KINDS), style
    for a in STYLE_GROUPS:
        for b in STYLE_GROUPS:
            if a >= b:
                continue
            sa, sb = STYLE_GROUPS[a], STYLE_GROUPS[b]
            assert not {f for s in sa for f in FRAMES[s]} & {f for s in sb for f in FRAMES[s]}, (a, b)
            assert not {j for s in sa for j in JOINS[s]} & {j for s in sb for j in JOINS[s]}, (a, b)
            for kind in KINDS:
                assert not {c for s in sa for c in CORES[s][kind]} & {c for s in sb for c in CORES[s][kind]}, kind
                assert not shapes(a, kind) & shapes(b, kind), (a, b, kind)


def test_breadth_of_shapes_politeness_and_orders():
    for kind in KINDS:
        assert len(shapes("train", kind)) >= 40, kind
        assert len(shapes("reworded", kind)) >= 20 and len(shapes("style", kind)) >= 20, kind
    # the training split of the file jobs really uses many shapes, and both training styles
    wide = [t for t in BY_GROUP["train"] if t.id.startswith("wide-") and t.split == "train"]
    for family, tasks in _group(wide, lambda t: t.family).items():
        assert len({t.metadata["shape"] + "|" + t.metadata["cores"][0] for t in tasks}) >= 15, family
        assert {t.metadata["style"] for t in tasks} == {"plain", "request"}, family
    # politeness: terse, "please", questions, thanks; orders: the file named first, the action first
    frames = [f for s in STYLE_GROUPS["train"] for f in FRAMES[s]]
    assert any(f == "{Core}." for f in frames) and any("lease" in f for f in frames)
    assert any(f.endswith("?") for f in frames) and any("Thanks" in f for f in frames)
    cores = [c for s in STYLE_GROUPS["train"] for c in CORES[s]["write_word"]]
    assert any(c.startswith("{name}") for c in cores) and any(c.startswith("write") for c in cores)


def test_file_names_come_in_five_styles():
    pools = styled(TRAIN)
    names = [n for i in range(100) for n in pools.files(random.Random(i), 3)]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)  # never needs quoting
    shapes_seen = Counter(
        "title" if re.fullmatch(r"[A-Z][a-z]+_\w+\.\w+", n) else "kebab" if re.fullmatch(r"[a-z]+-\d+\.\w+", n)
        else "digit" if re.fullmatch(r"[a-z]+\d\.\w+", n) else "snake" if "_" in n else "plain" for n in names)
    assert set(shapes_seen) == set(NAME_STYLES) and min(shapes_seen.values()) >= 20, shapes_seen
    assert all(len(set(pools.files(random.Random(i), 5))) == 5 for i in range(50))


def test_each_instruction_is_its_own_groups_and_no_other():
    """The regular expressions recognise what their own generator wrote (so the negative check
    below can fail), and no training instruction is producible by the reworded or style generator
    (nor the other way round)."""
    for group, tasks in BY_GROUP.items():
        for t in tasks:
            kinds = _kinds(t)
            assert producible(group, kinds, t.instruction), (group, t.id, t.instruction)
            for other in STYLE_GROUPS:
                if other != group:
                    assert not producible(other, kinds, t.instruction), (other, t.id, t.instruction)
    assert {t.split for t in BY_GROUP["train"]} == set(TRAINING_SPLITS)
    assert {t.split for t in BY_GROUP["reworded"]} == {"reworded"}
    assert {t.split for t in BY_GROUP["style"]} == {"style"}


def test_no_instruction_reads_as_a_command_line_option():
    """A harness takes the task as an argument (claude -p TASK): one starting with "-" was refused as
    an unknown option by Claude Code."""
    for tasks in BY_GROUP.values():
        assert not [t.id for t in tasks if t.instruction.startswith("-")]
    for style, frames in FRAMES.items():
        assert not [f for f in frames if f.startswith("-")], style
        assert not [j for j in JOINS[style] if j[0].startswith("-")], style


def test_producible_is_strict():
    slots = {"name": "amber3.note"}
    text = word_job(random.Random(1), "style", "delete_file", slots).text
    assert producible("style", ("delete_file",), text)
    assert not producible("style", ("delete_file",), text + " now")
    assert not producible("style", ("touch_file",), text)
    two = word_jobs(random.Random(2), "train", [("delete_file", slots), ("write_word", {"name": "b.txt", "word": "x"})])
    assert producible("train", ("delete_file", "write_word"), two.text)
    assert not producible("train", ("write_word", "delete_file"), two.text)
    with pytest.raises(ValueError, match="unknown wording group"):
        word_job(random.Random(0), "paraphrase", "delete_file", slots)


def _group(tasks, key) -> dict:
    out: dict = {}
    for t in tasks:
        out.setdefault(key(t), []).append(t)
    return out
