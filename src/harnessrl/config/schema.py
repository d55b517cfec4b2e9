"""Run configuration: the sections of sections.py composed into `RunConfig`, with the checks that
span sections. YAML files hold a RunConfig (load.py reads them, applies `key=value` overrides and
migrates older keys, migrate.py)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator

from harnessrl.config.migrate import migrate
from harnessrl.config.sections import (AlgorithmConfig, ClusterSection, ColdStartSection, EngineSection,
                                       HarnessEntry, LoopConfig, ModelConfig, OptimizerConfig, OutputConfig, RenderSection, SandboxSection,
                                       ServeSection, TasksSection, _Strict)
from harnessrl.engine.factory import SERVER_ENGINES, TRAINABLE_ENGINES
from harnessrl.tree.filters import FilterConfig


class RunConfig(_Strict):
    model: ModelConfig = ModelConfig()
    cold_start: ColdStartSection = ColdStartSection()  # demos + SFT in the run, before its baseline
    engine: EngineSection = EngineSection()
    render: RenderSection = RenderSection()
    serve: ServeSection = ServeSection()
    sandbox: SandboxSection = SandboxSection()
    harnesses: list[HarnessEntry] = [HarnessEntry(name="builtin")]
    # the harnesses the held-out sets are evaluated through (None: `harnesses`). Train through one
    # harness and evaluate through several: the run's before/after evals then hold the transfer
    # matrix's row (`harnessrl transfer`)
    eval_harnesses: list[HarnessEntry] | None = None
    tasks: TasksSection = TasksSection()
    filters: FilterConfig = FilterConfig()  # what is excluded from the loss
    algorithm: AlgorithmConfig = AlgorithmConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    loop: LoopConfig = LoopConfig()
    output: OutputConfig = OutputConfig()
    cluster: ClusterSection = ClusterSection()

    @field_validator("harnesses", "eval_harnesses")
    @classmethod
    def _unique_harnesses(cls, v: list[HarnessEntry] | None) -> list[HarnessEntry] | None:
        names = [h.name for h in v or ()]
        if v is not None and (not v or len(set(names)) != len(names)):
            raise ValueError(f"harnesses must be a non-empty list of distinct names, got {names}")
        return v

    def eval_harness_entries(self) -> list[HarnessEntry]:
        """The harnesses the held-out sets are evaluated through."""
        return list(self.eval_harnesses) if self.eval_harnesses is not None else list(self.harnesses)

    def harness_specs(self, given: list[str] | None = None,
                      evaluated: bool = False) -> tuple[list[str], dict[str, dict[str, Any]]]:
        """(harness specs, {spec: adapter options}): the given specs, else the config's harnesses (with
        `evaluated`, those it evaluates through: eval_harnesses, else harnesses); a spec the config
        names keeps its options (profile settings, extra_args), so it runs as it trained."""
        options = {h.name: dict(h.options) for h in self.harness_entries()}
        default = self.eval_harness_entries() if evaluated else self.harnesses
        specs = list(given) if given else [h.name for h in default]
        return specs, {s: options[s] for s in specs if options.get(s)}

    def harness_entries(self) -> list[HarnessEntry]:
        """Every harness the run starts, trained or evaluated through (a name once: its training entry)."""
        return list({h.name: h for h in [*self.eval_harness_entries(), *self.harnesses]}.values())

    @model_validator(mode="after")
    def _check_engine_and_cluster(self) -> RunConfig:
        if self.engine.type in SERVER_ENGINES and not self.engine.base_urls:
            raise ValueError(f"engine.type={self.engine.type} needs engine.base_urls (the running servers)")
        if self.cluster.ray.trainer_world_size > 1 and self.cluster.backend != "ray":
            raise ValueError(f"cluster.ray.trainer_world_size={self.cluster.ray.trainer_world_size} starts trainer "
                             "ranks as Ray actors: set cluster.backend=ray (ray.address=local starts a cluster "
                             "on this machine)")
        if self.cluster.backend == "ray" and self.algorithm.name == "ppo":
            raise ValueError("cluster.backend=ray trains grpo or tree_grpo (the PPO critic is not a Ray actor yet)")
        if self.cluster.backend == "ray" and self.loop.branching.enabled:
            raise ValueError("loop.branching needs cluster.backend=local: a branch replays calls from its "
                             "parent's store, and Ray workers keep separate store shards")
        return self

    @field_validator("engine")
    @classmethod
    def _trainable_engine(cls, v: EngineSection) -> EngineSection:
        if v.type not in TRAINABLE_ENGINES:
            raise ValueError(f"a training run needs an engine it can update: type must be one of "
                             f"{', '.join(TRAINABLE_ENGINES)}, got {v.type!r}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data) if isinstance(data, dict) else data
