"""The tree page in a real headless browser (Chromium): it renders, and shows rewards and advantages.

Skipped only where no Chromium is installed (a dev box); `make test` installs it (Makefile `browser`)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from harnessrl.store import RunStore
from harnessrl.app.tree import register
from tests.support.synthetic import claude_code_group

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (make test installs it: apt-get install chromium)")


def headless(*args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def page(tmp_path):
    """`tree show RUN --html` (no --task: every task) on a run store with two rewarded groups."""
    with RunStore(tmp_path / "run") as store:
        for g, task in enumerate(("fix_bug", "write_word")):
            calls, rollouts = claude_code_group(4, 30, 2, completion_tokens=(4, 10), observation_tokens=(2, 5),
                                                vocab=2000, seed=g, group_id=f"g{g}")
            rewards = [1.0, 0.0, 0.5, 0.0]
            rollouts = [replace(r, task_id=task, reward=rw) for r, rw in zip(rollouts, rewards)]
            store.insert_calls(calls)
            for r in rollouts:
                store.put_rollout(r)
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    out = tmp_path / "trees.html"
    res = CliRunner().invoke(app, ["tree", "show", str(tmp_path / "run"), "--tokenizer", "none", "--html", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_tree_page_renders_rewards_and_advantages_in_chromium(page, tmp_path):
    from PIL import Image

    dom = headless("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "task fix_bug" in html and "task write_word" in html  # both tasks' trees on one page
    assert html.count("<td>1.000</td>") == 2 and html.count("<td>0.500</td>") == 2  # rewards
    advantages = [float(x) for x in _cells_after(html, "advantage")]
    assert advantages and any(a > 0 for a in advantages) and any(a < 0 for a in advantages)

    shot = tmp_path / "shot.png"
    res = headless(f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (1400, 1200)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    ink = (img.sum(-1) < 600).mean()  # text and table lines
    green = ((g - r > 25) & (g - b > 15)).mean()  # tokens with A > 0 (advantage colour)
    red = ((r - g > 25) & (r - b > 25)).mean()  # tokens with A < 0
    assert ink > 0.005 and green > 0.0005 and red > 0.0005, (ink, green, red)


def _cells_after(html: str, header: str) -> list[str]:
    """Values of the rollout tables' column ``header`` (signed advantages like +0.866), found by
    the column's position under its table header."""
    import re

    out, col = [], None
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S):
        heads = re.findall(r"<th[^>]*>(.*?)</th>", row)  # a header may carry a title
        if heads:
            col = heads.index(header) if header in heads else None
            continue
        cells = re.findall(r"<td>(.*?)</td>", row)
        if col is not None and col < len(cells) and re.fullmatch(r"[+-]\d+\.\d{3}", cells[col]):
            out.append(cells[col])
    return out
