"""The sections of a run config, one pydantic model per component (composed in schema.py `RunConfig`).

The components' own models are embedded as they are: `engine` is the engine's `EngineSettings`
(an `EngineConfig` less the model, which is `model.path`) with the run's defaults, `filters` the
tree's `FilterConfig`, and `algorithm` extends the loss's `PPOSettings` (so the trainer takes
`cfg.algorithm` itself). The run-only sections (model, sandbox, harnesses, tasks, optimizer, loop,
output) are defined here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harnessrl.engine.factory import EngineSettings, EngineType
from harnessrl.engine.knobs import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, MaxTokens, Temperature, TopP
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.render.tool_formats import ToolFormat
from harnessrl.rollout.branching import BranchingConfig
from harnessrl.rollout.difficulty import SamplerConfig
from harnessrl.rollout.informative import DynamicSamplingConfig
from harnessrl.train.settings import PPOSettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraConfig(_Strict):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class ModelConfig(_Strict):
    path: str | None = None  # None: the default model (SmolLM2-135M-Instruct); else HF dir or id
    dtype: Literal["float32", "bfloat16"] = "float32"
    # the trainer's forward/backward over those weights; auto: the engine's served dtype when bf16 (train = serve)
    compute_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # auto: flex on CUDA, sdpa elsewhere (SDPA per block of queries over the keys it sees: train/packing.py);
    # sdpa-dense: one SDPA call over the whole L x L tree mask (slower; for comparison)
    attention: Literal["auto", "sdpa", "sdpa-dense", "flex"] = "auto"
    lora: LoraConfig | None = None
    gradient_checkpointing: bool = False


class EngineSection(EngineSettings):
    """The run's engine: EngineSettings with the run's own defaults (the model is model.path)."""

    type: EngineType = "auto"  # auto: vllm when the vllm module is importable, else hf
    max_batch: int = Field(16, ge=1)


class RenderSection(_Strict):
    """How prompts are rendered (the same for `harnessrl serve --tool-format`: train = serve)."""

    # null: the chat template's own convention (hermes / smollm2). "bash": the model runs the
    # harness's shell tool by writing one fenced ```bash block (docs/render.md) — fits small models.
    # "bash_examples": the same, with three worked examples as earlier turns (a 135M model needs them)
    tool_format: ToolFormat | None = None  # render/tool_formats.py TOOL_FORMATS


class ServeSection(_Strict):
    """How the run's proxy serves the harnesses (the same knobs as `harnessrl serve`: train = serve).
    Defaults and bounds are engine/knobs.py's; `policy()` is the proxy's ServingPolicy (proxy/serving.py)."""

    # The temperature of a request that sends none: Claude Code, Codex and OpenClaw never send one,
    # nor do the builtin and whitebox agents unless their options set one. 1.0 is the API default; a
    # small model (SmolLM2-135M) writes gibberish at 1.0 and usable shell at ~0.7. Recorded with
    # every call and used in the loss.
    default_temperature: Temperature = DEFAULT_TEMPERATURE
    default_top_p: TopP = DEFAULT_TOP_P  # the top_p of a request that sends none
    # tokens per model reply: the default of a request that sets none and the cap whatever it asks
    # (Claude Code asks 32000); the cut reply ends with finish_reason "length". Was loop.max_tokens
    max_tokens: MaxTokens = DEFAULT_MAX_TOKENS
    # default: a value the harness sends is used (the serving value fills in when it sends none);
    # force: the serving value (default_temperature, default_top_p, max_tokens) replaces what
    # the harness sends; the call records both (proxy/serving.py). aider sends temperature 0: force it
    temperature_mode: Literal["default", "force"] = "default"
    top_p_mode: Literal["default", "force"] = "default"
    max_tokens_mode: Literal["default", "force"] = "default"

    def forced(self) -> tuple[str, ...]:
        """The knobs whose serving value overrides the harness's (the proxy's `force`)."""
        modes = {"temperature": self.temperature_mode, "top_p": self.top_p_mode, "max_tokens": self.max_tokens_mode}
        return tuple(k for k, mode in modes.items() if mode == "force")

    def policy(self, max_tokens_cap: int | None = None) -> ServingPolicy:
        """The ServingPolicy the proxy serves with: these values, `max_tokens` as every call's
        default and (unless `max_tokens_cap` is given: `harnessrl serve --max-tokens-cap`) its cap.
        ValueError (pydantic's) when the cap is out of its bound."""
        return ServingPolicy(default_temperature=self.default_temperature, default_top_p=self.default_top_p,
                             max_tokens=self.max_tokens,
                             max_tokens_cap=self.max_tokens if max_tokens_cap is None else max_tokens_cap,
                             force=self.forced())


class SandboxSection(_Strict):
    type: Literal["bwrap", "local"] = "bwrap"
    # bwrap as root: the unprivileged host uid every sandbox process runs as (docs/security.md)
    host_uid: int = Field(65534, gt=0)


class HarnessEntry(_Strict):
    name: str
    weight: float = Field(1.0, gt=0)
    options: dict[str, Any] = {}

    @model_validator(mode="after")
    def _known_options(self) -> "HarnessEntry":
        from harnessrl.harness import check_options  # a misspelled key (`rox:`) names the valid ones

        check_options(self.name, self.options)
        return self


class EvalSet(_Strict):
    """One held-out set with its own size: `{name: builtin:chain:test, size: 6, samples: 1}` (a long
    set can be smaller than the headline set). `size`/`samples` default to loop.eval_size /
    loop.eval_samples."""

    name: str
    size: int | None = Field(None, ge=1)
    samples: int | None = Field(None, ge=1)


class TasksSection(_Strict):
    """What is trained on and what is evaluated. `train_split` is one split or a list of them (their
    tasks together: `[train, builtin:chain:train]`). `eval_sets` names the held-out sets evaluated
    before, during and after training (default: [eval_split]); each entry is a split of the suite
    (builtin: test = held-out tasks of the trained families, paraphrase = the same jobs in new wording
    and new names and values, unseen = families never trained on) or, for the builtin suite, a full
    selector (`builtin:...`), alone or as `{name, size, samples}` (EvalSet). `families` (families or
    categories) filters the train split and every eval set but `unseen`, whose families are by
    definition not the trained ones. The first set is the run's headline ("eval" in the metrics);
    every set is reported with n and a 95% interval."""

    suite: str = "builtin"  # "builtin" or a path to a task directory
    families: list[str] | None = None  # restrict to these families or categories
    train_split: str | list[str] = "train"
    eval_split: str = "test"
    eval_sets: list[str | EvalSet] | None = None  # e.g. [test, paraphrase, unseen]; None = [eval_split]

    @field_validator("train_split")
    @classmethod
    def _some_split(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"train_split must be a split or a non-empty list of distinct splits, got {v}")
        return v

    @field_validator("eval_sets")
    @classmethod
    def _distinct_sets(cls, v: list[str | EvalSet] | None) -> list[str | EvalSet] | None:
        names = [x if isinstance(x, str) else x.name for x in v or ()]
        if v is not None and (not v or len(set(names)) != len(names)):
            raise ValueError(f"eval_sets must be a non-empty list of distinct names, got {names}")
        return v

    def train_splits(self) -> list[str]:
        return [self.train_split] if isinstance(self.train_split, str) else list(self.train_split)

    def eval_set_entries(self) -> list[EvalSet]:
        return [EvalSet(name=x) if isinstance(x, str) else x for x in self.eval_sets or [self.eval_split]]

    def eval_set_names(self) -> list[str]:
        return [e.name for e in self.eval_set_entries()]

    def eval_set_size(self, name: str, default: int) -> int:
        """Tasks of set `name` evaluated (its own size, else `default`: loop.eval_size)."""
        return next((e.size for e in self.eval_set_entries() if e.name == name and e.size), default)

    def eval_set_samples(self, name: str, default: int) -> int:
        """Rollouts per task of set `name` (its own samples, else `default`: loop.eval_samples)."""
        return next((e.samples for e in self.eval_set_entries() if e.name == name and e.samples), default)


class AlgorithmConfig(PPOSettings):
    """The loss's own settings (clip_low ... kl_coef, from `PPOSettings`) plus the advantage
    estimator and what the learner keeps around it. `harness_grad_cosine`: in a step whose batch
    holds two harnesses or more, split the policy gradient by harness and record the cosine of
    every pair (`grad_cosine`) and each one's norm (`harness_grad_norm`): negative transfer shows
    as a cosine below 0. It costs a flat float32 copy of the gradient per harness (plus two) during
    the update's first epoch (train/harness_grads.py); a sharded trainer (FSDP) records none."""

    model_config = ConfigDict(frozen=False, extra="forbid")

    name: Literal["grpo", "tree_grpo", "ppo"] = "grpo"  # ppo: GAE advantages from a critic (algo.gae)
    # the reward trained on: "score" = the verifier's reward (partial credit included); "pass" = 1 if
    # the rollout passes its task, else 0 (partial credit can be farmed: docs/training.md)
    reward: Literal["score", "pass"] = "score"
    std_normalize: bool = True  # False = Dr.GRPO
    per_harness_norm: bool = False  # normalise rewards per harness within a group
    per_harness_loss: bool = False  # each harness gets an equal share of the loss, whatever its tokens
    harness_grad_cosine: bool = True  # mixed batches: cosine of the per-harness policy gradients (above)
    reference_model: bool = False  # keep a frozen copy to log (and with kl_coef, penalise) KL
    mismatch_kl_warn: float = Field(0.015, ge=0)  # warn above this KL(engine||trainer) (0: never)
    epochs: int = Field(1, ge=1)
    token_budget: int = Field(2048, ge=64)  # max tokens per packed chunk (tree split at branch points)
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(0.95, ge=0, le=1)
    critic_lr: float = Field(1e-5, gt=0)


class OptimizerConfig(_Strict):
    lr: float = Field(1e-6, ge=0)  # 0: a null arm that trains nothing (harnessrl experiment's control)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = Field(1.0, gt=0)


# the fine-tuning defaults of a cold start, here and in `harnessrl sft` (sft/fine_tune.py SFTOptions)
SFT_EPOCHS, SFT_LR, SFT_BATCH_TREES = 3, 1e-5, 0


class ColdStartSection(_Strict):
    """A cold start inside the run, before its baseline eval: each task's reference solution drives
    the run's harnesses (the scripted engine behind the run's proxy), and the policy is fine-tuned
    on the passing rollouts (`harnessrl demos` + `harnessrl sft`, kept in <run_dir>/cold_start).
    The run then trains from that checkpoint; a resumed run reuses it. Empty `tasks`: no cold start."""

    tasks: list[str] = []  # selectors whose tasks carry a reference solution, e.g. [builtin:lookup:train]
    limit: int | None = Field(None, ge=1)  # at most this many tasks per selector (None: all)
    harnesses: list[str] | None = None  # None: the run's training harnesses (with their options)
    epochs: int = Field(SFT_EPOCHS, ge=1)
    lr: float = Field(SFT_LR, gt=0)
    batch_trees: int = Field(SFT_BATCH_TREES, ge=0)  # trees per SFT step (0: all of them)
    # False: RL never trains on a demonstrated task. On one it has seen solved, the policy is paid for
    # recalling the answer (acting at once), not for the behaviour the family teaches (reading first)
    train_demonstrated: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.tasks)


class LoopConfig(_Strict):
    steps: int = Field(10, ge=0)  # 0: only the baseline eval (step 0), as harnessrl experiment runs it
    groups_per_step: int = Field(4, ge=1)
    n_per_group: int = Field(4, ge=1)
    eval_every: int = Field(5, ge=0)  # 0: only before and after
    eval_size: int = Field(16, ge=0)  # held-out tasks per harness per eval
    eval_samples: int = Field(1, ge=1)  # samples per eval task (pass@1 = mean over them)
    max_turns: int = Field(4, ge=1)
    rollout_timeout_s: float = Field(300, gt=0)
    concurrency: int = Field(8, ge=1)
    # a rollout starts only while this much memory is available (or none runs): the run slows down
    # instead of being OOM-killed (rollout/memory_gate.py); 0 = off
    memory_reserve_gib: float = Field(1.0, ge=0)
    warm_pool: int = Field(0, ge=0)  # rollout sandboxes made ahead, each used once (sandbox/pool.py); 0 = off
    # asynchronous rollouts: 0 = synchronous; k >= 1 = rollouts of steps s+1..s+k run while step s
    # trains, so a sampled token is at most k policy versions older than the weights it trains
    max_policy_lag: int = Field(0, ge=0)
    seed: int = 0
    # branching rollouts (rollout/branching.py): after a step's groups end, `points` decisions per
    # group are re-run `width` times through the same harness, the earlier calls replayed
    branching: BranchingConfig = BranchingConfig()
    # which tasks a step draws (rollout/difficulty.py): uniform, or difficulty (tasks near p = 0.5)
    sampler: SamplerConfig = SamplerConfig()
    # informative groups (rollout/informative.py): a group with one outcome is dropped and replaced,
    # max_extra_groups a step, then topped up to target_share of the batch within rollout_cap
    dynamic_sampling: DynamicSamplingConfig = DynamicSamplingConfig()

    @model_validator(mode="after")
    def _informative_groups_possible(self) -> "LoopConfig":
        if self.dynamic_sampling.enabled and self.n_per_group < 2:
            raise ValueError("loop.dynamic_sampling keeps groups with mixed outcomes: it needs "
                             f"loop.n_per_group >= 2, got {self.n_per_group}")
        if self.branching.borrow and not self.branching.enabled:
            raise ValueError("loop.branching.borrow branches all-fail groups: set loop.branching.points >= 1")
        return self


class RaySection(_Strict):
    """Where the run's actors go when cluster.backend is ray (see docs/scale.md)."""

    address: str = "local"  # local: start a cluster in this process; auto: join `ray start`; or host:port
    num_cpus: int | None = Field(None, ge=1)  # local cluster only: logical CPUs (default: the machine's)
    rollout_workers: int = Field(2, ge=1)  # actors with a proxy + sandboxes each, spread over nodes
    worker_cpus: float = Field(1.0, gt=0)
    engine_cpus: float = Field(1.0, gt=0)
    engine_gpus: float = Field(0.0, ge=0)  # per engine replica (engine.replicas of them)
    trainer_cpus: float = Field(1.0, gt=0)  # per trainer rank
    trainer_gpus: float = Field(0.0, ge=0)  # per trainer rank
    # trainer ranks: N actors in one placement group, the policy sharded over them with FSDP2
    # (train/fsdp.py; gloo on CPU, NCCL on GPUs); 1: one trainer actor, unsharded
    trainer_world_size: int = Field(1, ge=1)
    shard_dir: str | None = None  # where each worker keeps its store shard on its node (default run_dir/shards)


class ClusterSection(_Strict):
    backend: Literal["local", "ray"] = "local"  # local: one process (the default, `make demo`)
    ray: RaySection = RaySection()


class WandbSection(_Strict):
    """An optional Weights & Biases run mirroring the step metrics, eval tables, plots and tree page
    (report/tracking.py); a logger error is a warning, never a failed run."""

    project: str = "harnessrl"
    name: str | None = None  # None: the run dir's name
    mode: Literal["online", "offline", "disabled"] = "online"  # offline: <run_dir>/wandb, `wandb sync` later


class OutputConfig(_Strict):
    run_dir: str = "runs/latest"  # "{time}" is replaced by the start time (YYYYmmdd-HHMMSS)
    tensorboard: bool = True
    wandb: WandbSection | None = None  # None: no W&B run (the default)
    progress_every_s: float = Field(30.0, ge=0)  # off a terminal: a progress line at least this often (0: each rollout)
    checkpoint_every: int = Field(1, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
