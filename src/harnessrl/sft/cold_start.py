"""A cold start inside a training run (config `cold_start`): reference demonstrations through the
run's own harnesses, then SFT on the passing ones, before the run's baseline eval.

    policy = ensure_cold_start(cfg, log=print)   # <run_dir>/cold_start/sft/policy, or None
    run_training(cfg, start_model=policy)        # the baseline eval measures the cold start

What it runs is what `harnessrl demos` and `harnessrl sft` run (sft/demos.py, sft/fine_tune.py),
kept in <run_dir>/cold_start: `demos/` (the store of the reference rollouts), `sft/` (the
checkpoint and sft.json) and `cold_start.json` (the figures), written last. A run resumed after
that file exists reuses the checkpoint; one stopped before it starts the cold start over, so a
half-written store or checkpoint is never trained on.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from harnessrl.config import RunConfig
from harnessrl.errors import HarnessRLError
from harnessrl.report.cold_start import ColdStart, cold_start_dir, read_cold_start, write_cold_start


class ColdStartError(HarnessRLError):
    """The cold start cannot run (no reference solution, no passing demonstration)."""


def ensure_cold_start(cfg: RunConfig, log: Callable[[str], None] = lambda line: None,
                      progress: bool = False) -> Path | None:
    """The checkpoint the run starts from after its cold start (None: `cfg.cold_start` is off).
    `cfg.output.run_dir` must be resolved (run/open_run.py `with_run_dir`)."""
    section = cfg.cold_start
    if not section.enabled:
        return None
    run_dir = Path(cfg.output.run_dir)
    done = read_cold_start(run_dir)
    if done is not None:
        log(f"cold start: reusing {done.policy_dir} ({done.passed}/{done.rollouts} demonstrations)")
        return Path(done.policy_dir)
    result = run_cold_start(cfg, run_dir, log, progress)
    return Path(result.policy_dir)


def run_cold_start(cfg: RunConfig, run_dir: Path, log: Callable[[str], None] = lambda line: None,
                   progress: bool = False) -> ColdStart:
    """Demonstrations of `cfg.cold_start.tasks` through its harnesses into <run_dir>/cold_start/demos,
    SFT into .../sft, the record (report/cold_start.py) last. Whatever an earlier, unfinished try
    left in <run_dir>/cold_start is removed first."""
    from harnessrl.sft.demos import collect_demos
    from harnessrl.sft.fine_tune import SFTOptions, run_sft
    from harnessrl.run.task_sets import demonstrated_tasks

    section = cfg.cold_start
    out = cold_start_dir(run_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tasks = demonstrated_tasks(section)
    specs, options = cfg.harness_specs(section.harnesses)
    t0 = time.perf_counter()
    demos = collect_demos(cfg, tasks, specs, out / "demos", harness_options=options,
                          progress=progress)
    demos_s = time.perf_counter() - t0
    log(f"cold start: {demos.passed}/{demos.rollouts} reference demonstrations passed "
        f"({', '.join(f'{h} {n}' for h, n in demos.passed_by_harness.items()) or 'none'}) in {demos_s:.0f}s")
    if demos.passed == 0:
        raise ColdStartError(f"no reference demonstration of cold_start.tasks {section.tasks} passed "
                             f"(statuses {demos.statuses}); see {out / 'demos'} and run `harnessrl demos` on them")
    opts = SFTOptions(model=cfg.model.path, epochs=section.epochs, lr=section.lr, batch_trees=section.batch_trees,
                      token_budget=cfg.algorithm.token_budget, seed=cfg.loop.seed, dtype=cfg.model.dtype)
    sft = run_sft([out / "demos"], out / "sft", opts, log=log)
    result = ColdStart(policy_dir=sft.policy_dir, tasks=len(tasks), rollouts=demos.rollouts, passed=demos.passed,
                       passed_by_harness=demos.passed_by_harness, sft_trees=sft.trees, nll_before=sft.nll_before,
                       nll_after=sft.nll_after, demos_s=round(demos_s, 1), sft_s=sft.seconds)
    log(f"cold start: SFT on {sft.trees} trees, {sft.steps} steps, mean NLL {sft.nll_before:.3f} -> "
        f"{sft.nll_after:.3f} in {sft.seconds:.0f}s")
    write_cold_start(run_dir, result)
    return result
