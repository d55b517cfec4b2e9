"""output.wandb: a run on a tiny model with in-process fakes mirrors its step metrics, tables,
plots and pages into a W&B offline run under <run_dir>/wandb (read back from the .wandb file),
and a tracker that raises is one warning, never a failed run."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from rich.console import Console

from harnessrl.engine import make_tiny_model
from harnessrl.report import tracking
from harnessrl.config import load_config
from harnessrl.run.loop import run_training
from harnessrl.report.tracking import SafeTracker
from harnessrl.store import RunStore

from .fakes import fake_collector_factory, fake_tasks

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402

BLOCK = 32768  # the .wandb file is a LevelDB-style log of Record protobufs in 32 KiB blocks


def wandb_records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The Records of a .wandb transaction log (header ":W&B", 0xBEE1, version; then chunks of
    crc32 (type byte + data), length, type: 1 full, 2 first, 3 middle, 4 last)."""
    data = path.read_bytes()
    ident, magic, _ = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1
    out, pos, buf = [], 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if kind == 0:  # the block's zero padding
            pos += left
            continue
        chunk = data[pos + 7:pos + 7 + length]
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == crc
        pos += 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(buf)
            out.append(rec)
    return out


def history(records: list[wandb_internal_pb2.Record]) -> dict[int, dict[str, object]]:
    """step -> {key: value} of the history records (keys as logged, values decoded from JSON)."""
    rows: dict[int, dict[str, object]] = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = rows.setdefault(r.history.step.num, {})
            row.update({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item})
    return rows


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


def overrides(tiny_dir, run_dir, *extra):
    return [f"model.path={tiny_dir}", "engine.type=hf", f"output.run_dir={run_dir}", "output.tensorboard=false",
            "loop.steps=2", "loop.groups_per_step=2", "loop.n_per_group=3", "loop.eval_size=2", "loop.eval_every=2",
            "serve.max_tokens=6", "filters.truncated=keep", "optimizer.lr=1e-3", "algorithm.token_budget=64",
            "harnesses=[{name: builtin, weight: 1}, {name: mini-swe-agent, weight: 1}]", *extra]


def run(cfg, console: Console | None = None, resume: bool = False):
    return run_training(cfg, resume=resume, console=console or Console(quiet=True),
                        collector_factory=fake_collector_factory(), tasks_loader=fake_tasks)


def test_an_offline_wandb_run_holds_the_step_metrics_tables_plots_and_pages(tiny_dir, tmp_path):
    run_dir = tmp_path / "run"
    cfg = load_config(None, overrides(tiny_dir, run_dir, "output.wandb={project: harnessrl-test, mode: offline}"))
    res = run(cfg)
    with RunStore(run_dir) as store:
        run_id = store.get_meta(tracking.RUN_ID_KEY)
    (run_file,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    records = wandb_records(run_file)
    kinds = [r.WhichOneof("record_type") for r in records]
    assert kinds[0] == "header" and "run" in kinds and kinds[-1] == "exit"
    (started,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert started.project == "harnessrl-test" and started.display_name == "run"
    config = {u.key: json.loads(u.value_json) for u in started.config.update}
    assert config["loop"]["steps"] == 2 and config["output"]["wandb"]["mode"] == "offline"  # the run's config
    rows = history(records)
    metrics = {r["step"]: r for r in res.records}
    assert sorted(rows) == [0, 1, 2]
    for step in (1, 2):  # every number of the step's record, at its step
        logged, rec = rows[step], metrics[step]
        for key in ("loss", "informative_groups", "wasted_rollouts", "pick_pass_rate", "tokens_trained"):
            assert logged[key] == pytest.approx(rec[key]), key
        for h in ("builtin", "mini-swe-agent"):
            assert logged[f"reward/{h}"] == pytest.approx(rec["reward"][h])
            assert logged[f"dynamics/{h}/calls_per_rollout"] == pytest.approx(rec["dynamics"][h]["calls_per_rollout"])
            assert logged[f"dynamics/{h}/trained_share"] == pytest.approx(rec["dynamics"][h]["trained_share"])
    for step in (0, 2):
        assert rows[step]["eval_sets/test/builtin/pass@1"] == pytest.approx(metrics[step]["eval_sets"]["test"]
                                                                              ["builtin"]["pass@1"])
    end = rows[2]  # the end of the run: tables, plots, the pages as an artifact
    for table in ("eval", "held_out_change", "harness_dynamics"):
        assert end[f"tables/{table}/_type"] == "table-file", table
    assert end["tables/harness_dynamics/nrows"] == 4  # 2 steps x 2 harnesses
    assert end["plots/harness_dynamics/_type"] == "image-file" and end["plots/informative/_type"] == "image-file"
    tables = {p.name.split("_")[0] for p in run_file.parent.glob("files/media/table/tables/*.table.json")}
    assert {"eval", "held", "harness"} <= tables
    (artifact,) = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"
                   and r.artifact.type == "run-pages"]
    assert {m.path for m in artifact.manifest.contents} >= {"report.md", "report.html", "trees.html"}

    # --resume logs to the same W&B run: one more offline dir of that id, holding the new step
    res = run(load_config(None, overrides(tiny_dir, run_dir, "loop.steps=3",
                                          "output.wandb={project: harnessrl-test, mode: offline}")), resume=True)
    (again,) = set((run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")) - {run_file}
    rows = history(wandb_records(again))
    assert sorted(rows) == [3] and rows[3]["loss"] == pytest.approx(res.records[-1]["loss"])


def test_a_tracker_that_raises_is_one_warning_and_the_run_goes_on(tiny_dir, tmp_path, monkeypatch, capfd):
    calls = []

    def broken(self, step, metrics):
        calls.append(step)
        raise RuntimeError("tracker down")

    monkeypatch.setattr(tracking.WandbTracker, "log_step", broken)
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run", "output.wandb={mode: offline}"))
    res = run(cfg, Console(width=400))  # the run's console writes to the terminal's fd (run/logs.py)
    assert res.last_step == 2 and [r["step"] for r in res.records] == [0, 1, 2]
    assert res.report.is_file()
    text = capfd.readouterr().out
    assert text.count("W&B logging failed (RuntimeError: tracker down)") == 1
    assert calls == [0]  # after the first error, tracking stops


def test_a_tracker_that_cannot_start_is_a_warning(tiny_dir, tmp_path, monkeypatch, capfd):
    def refuse(*args, **kwargs):
        raise OSError("no space left for wandb")

    monkeypatch.setattr(tracking.WandbTracker, "start", refuse)
    res = run(load_config(None, overrides(tiny_dir, tmp_path / "run", "loop.steps=1",
                                          "output.wandb={mode: offline}")), Console(width=400))
    assert res.last_step == 1
    assert "W&B did not start (OSError: no space left for wandb)" in capfd.readouterr().out
    assert not (tmp_path / "run" / "wandb").exists()


class Broken:
    """A tracker whose every call raises."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def fail(*args):
            self.calls.append(name)
            raise ValueError(f"{name} broke")
        return fail


def test_safe_tracker_warns_once_stops_and_still_finishes():
    warnings: list[str] = []
    inner = Broken()
    safe = SafeTracker(inner, warnings.append, name="T")
    safe.log_step(1, {"a": 1.0})
    safe.log_table("t", ["a"], [[1]])
    safe.log_images("plots", [Path("x.png")])
    safe.finish()
    safe.finish()
    assert warnings == ["T logging failed (ValueError: log_step broke); the run goes on without T, its record is in "
                        "the run store"]
    assert inner.calls == ["log_step", "finish"]  # nothing after the error but one quiet finish


def test_no_section_or_disabled_opens_no_tracker(tmp_path):
    cfg = load_config(None, ["output.wandb={mode: disabled}"])
    assert tracking.open_tracker(cfg.output.wandb, tmp_path, {}, None, print) is None
    assert tracking.open_tracker(None, tmp_path, {}, None, print) is None


def test_online_without_credentials_is_a_warning_and_no_tracker(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    for var, path in (("HOME", tmp_path), ("NETRC", tmp_path / ".netrc"), ("WANDB_CONFIG_DIR", tmp_path / "wb")):
        monkeypatch.setenv(var, str(path))
    warnings: list[str] = []
    cfg = load_config(None, ["output.wandb={mode: online}"])
    with RunStore(tmp_path / "run") as store:
        assert tracking.open_tracker(cfg.output.wandb, tmp_path / "run", {}, store, warnings.append) is None
        assert store.get_meta(tracking.RUN_ID_KEY) is None
    assert len(warnings) == 1 and "no W&B credentials" in warnings[0] and "mode=offline" in warnings[0]
