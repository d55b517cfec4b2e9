"""What a run prints: library output routed to run.log, the closing summary, report.html."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rich.console import Console

from harnessrl.report.display import RunDisplay, summary_table
from harnessrl.report.run_report import write_plots, write_report

RECORDS = [
    {"step": 0, "eval": {"builtin": 0.25, "mini-swe-agent": 0.0}, "time": {"eval": 30.0}},
    {"step": 1, "reward": {"builtin": 0.4}, "mismatch_kl": 0.002, "abs_logp_gap": 0.01,
     "time": {"rollout": 100.0, "tree": 1.0, "train": 20.0, "sync": 2.0, "checkpoint": 3.0}},
    {"step": 2, "reward": {"builtin": 0.7}, "mismatch_kl": 0.003, "abs_logp_gap": 0.012,
     "eval": {"builtin": 0.875, "mini-swe-agent": 0.0},
     "time": {"rollout": 90.0, "tree": 1.0, "train": 20.0, "sync": 2.0, "eval": 30.0, "checkpoint": 3.0}},
]


def test_library_output_goes_to_the_run_log_and_the_terminal_keeps_the_run(tmp_path):
    """Prints, logging, a child process's stderr and raw fd writes land in run.log; console lines do not."""
    script = textwrap.dedent(f"""
        import logging, os, subprocess, sys
        from pathlib import Path
        from rich.console import Console
        from harnessrl.run.logs import library_logs
        with library_logs(Path({str(tmp_path)!r}) / "run", Console()) as (console, log):
            print("LIB print to stdout")
            logging.getLogger("vllm").warning("LIB logging warning")
            os.write(2, b"LIB raw fd 2\\n")
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('LIB child stderr\\\\n')"])
            console.print("RUN step 1: reward 0.5")
        print("after the run")
    """)
    env_path = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    terminal = out.stdout + out.stderr
    assert "RUN step 1: reward 0.5" in terminal and "after the run" in terminal
    assert "LIB" not in terminal
    log = (tmp_path / "run" / "run.log").read_text()
    for line in ("LIB print to stdout", "LIB logging warning", "LIB raw fd 2", "LIB child stderr"):
        assert line in log, line
    assert "RUN step" not in log


def test_summary_table_has_before_after_phases_and_paths(tmp_path):
    console = Console(record=True, width=160)
    console.print(summary_table(RECORDS, tmp_path, tmp_path / "report.html", tmp_path / "plots",
                                tmp_path / "run.log", tmp_path / "trees.html"))
    text = console.export_text()
    assert "pass@1 builtin" in text and "25.0%" in text and "87.5%" in text and "+62.5 pts" in text
    assert "rollout" in text and "3:10" in text  # 190 s of rollouts
    for name in ("report.html", "plots", "checkpoints", "trees.html", "run.log"):
        assert name in text, name


def test_report_html_inlines_plots_and_links_the_trees(tmp_path):
    plots = write_plots(RECORDS, tmp_path / "plots")
    trees = tmp_path / "trees.html"
    trees.write_text("<html></html>")
    md = write_report(RECORDS, tmp_path, plots, "run x", "a: 1\n", trees)
    assert "(trees.html)" in md.read_text() and "![reward](plots/reward.png)" in md.read_text()
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(plots) >= 3
    assert "href='trees.html'" in page and "+62.5 pts" in page and "mismatch KL" in page
    assert (tmp_path / "plots" / "logp_gap.png").is_file()


def test_display_is_inert_off_a_terminal():
    console = Console(file=open("/dev/null", "w"), force_terminal=False)
    with RunDisplay(console, 3, 1) as d:
        advance, close = d.rollouts([type("P", (), {"harness": "builtin", "n": 4})()])
        advance(1, "builtin")
        advance(1)
        close()
        d.phase(1, "rollouts")
        d.step_done(1, 10.0, "step 1")
        assert d.eta_s() == 30.0  # 3 steps of 10 s left counting the current one


def test_plain_progress_lines_when_stdout_is_a_pipe(tmp_path):
    """`harnessrl train` into a pipe (CI, nohup, | tee): every phase that runs rollouts and the update
    print a start line, progress lines (each rollout here: output.progress_every_s=0) and an end line."""
    from harnessrl.engine import make_tiny_model

    model = make_tiny_model(tmp_path / "model", seed=3)
    here = Path(__file__).parent
    ov = [f"model.path={model}", "engine.type=hf", f"output.run_dir={tmp_path / 'run'}", "output.tensorboard=false",
          "output.progress_every_s=0", "loop.steps=1", "loop.groups_per_step=2", "loop.n_per_group=2",
          "loop.eval_size=2", "serve.max_tokens=4", "filters.truncated=keep", "algorithm.token_budget=64"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, str(here / "run_fake.py"), "0", "fresh", *ov], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    for phase, total in (("baseline eval · eval (held-out pass@1)", 2), ("step 1/1 · rollouts", 4),
                         ("step 1/1 · eval (held-out pass@1)", 2)):
        mine = [line for line in lines if line.startswith(phase + ": ")]
        assert mine[0] == f"{phase}: start, 0/{total} rollouts", lines
        assert any(line.startswith(f"{phase}: 1/{total} rollouts (ok 1)") for line in mine), mine
        assert mine[-1].startswith(f"{phase}: done {total}/{total} rollouts (ok {total}), "), mine
    update = [line for line in lines if line.startswith("step 1/1 · train (tree-packed update): ")]
    assert update[0].endswith(": start, running") and "done in " in update[-1], lines
    assert any(line.startswith("step 1: reward") for line in lines)  # the step line comes after its phases
    assert "\x1b[" not in out.stdout  # no live bars, no colour codes into a pipe
