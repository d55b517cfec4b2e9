"""Run configuration: one pydantic model per component, composed into `RunConfig`.

The components' own models are embedded as they are: `engine` is the engine's `EngineSettings`
(an `EngineConfig` less the model, which is `model.path`) with the run's defaults, `filters` the
tree's `FilterConfig`, and `algorithm` extends the loss's `PPOSettings` (so the trainer takes
`cfg.algorithm` itself). The run-only sections (model, sandbox, harnesses, tasks,
optimizer, loop, output) are defined here.

YAML files hold a RunConfig; `key=value` overrides use dotted keys (`loop.steps=3`,
`harnesses.0.weight=2`) and YAML scalars/lists for values. `validate_files` checks every shipped
config (`harnessrl config validate configs/*.yaml`). Keys of older configs are migrated with a
warning (`MOVED_KEYS`, `REMOVED_KEYS`) so that old files still load; keys a run sets itself are
refused with the fix (`REFUSED_KEYS`).
"""

from __future__ import annotations

import copy
import difflib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harnessrl.engine.factory import SERVER_ENGINES, TRAINABLE_ENGINES, EngineConfig, EngineSettings, EngineType
from harnessrl.errors import HarnessRLError
from harnessrl.proxy.serving import DEFAULT_POLICY, MaxTokens, ServingPolicy, Temperature, TopP
from harnessrl.render.tool_formats import ToolFormat
from harnessrl.rollout.branching import BranchingConfig
from harnessrl.rollout.difficulty import SamplerConfig
from harnessrl.rollout.informative import DynamicSamplingConfig
from harnessrl.train.settings import PPOSettings
from harnessrl.tree.filters import FilterConfig

# old key -> new key (dotted); the value moves and a warning says so
MOVED_KEYS = {"engine.max_concurrency": "engine.max_batch"}
# removed key -> why; the key is dropped with a warning
REMOVED_KEYS = {
    "loop.temperature": "harnesses choose their own sampling temperature (set it through "
                        "harnesses[].options, e.g. extra_args: [--temperature, '1.0']); every call records it",
    "output.save_final": "the last step is always checkpointed (output.checkpoint_every, keep_checkpoints)",
    "algorithm.value_coef": "the critic has its own optimizer; algorithm.critic_lr sets the size of its steps",
}
# key -> the fix; a run sets these itself, so a config that sets one is refused (a stored config's
# default value, as older runs recorded it, is dropped)
REFUSED_KEYS = {
    "engine.model": "the run serves its own policy: set the model with model.path, not engine.model",
    "engine.base_url": "a run lists its servers in engine.base_urls (one URL per replica), not engine.base_url",
    "engine.script": "the scripted engine cannot be trained; a run's engine.type is one of "
                     f"{', '.join(TRAINABLE_ENGINES)}",
    "engine.eos_ids": "the run's engine takes its stop tokens from the model's own config",
}


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
    Defaults and bounds are the ServingPolicy's (proxy/serving.py); `RunConfig.serving_policy()`."""

    # The temperature of a request that sends none: Claude Code, Codex and OpenClaw never send one,
    # nor do the builtin and whitebox agents unless their options set one. 1.0 is the API default; a
    # small model (SmolLM2-135M) writes gibberish at 1.0 and usable shell at ~0.7. Recorded with
    # every call and used in the loss.
    default_temperature: Temperature = DEFAULT_POLICY.default_temperature
    default_top_p: TopP = DEFAULT_POLICY.default_top_p  # the top_p of a request that sends none
    # default: a value the harness sends is used (the serving value fills in when it sends none);
    # force: the serving value (default_temperature, default_top_p, loop.max_tokens) replaces what
    # the harness sends; the call records both (proxy/serving.py). aider sends temperature 0: force it
    temperature_mode: Literal["default", "force"] = "default"
    top_p_mode: Literal["default", "force"] = "default"
    max_tokens_mode: Literal["default", "force"] = "default"

    def forced(self) -> tuple[str, ...]:
        """The knobs whose serving value overrides the harness's (the proxy's `force`)."""
        modes = {"temperature": self.temperature_mode, "top_p": self.top_p_mode, "max_tokens": self.max_tokens_mode}
        return tuple(k for k, mode in modes.items() if mode == "force")


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


class LoopConfig(_Strict):
    steps: int = Field(10, ge=0)  # 0: only the baseline eval (step 0), as harnessrl experiment runs it
    groups_per_step: int = Field(4, ge=1)
    n_per_group: int = Field(4, ge=1)
    eval_every: int = Field(5, ge=0)  # 0: only before and after
    eval_size: int = Field(16, ge=0)  # held-out tasks per harness per eval
    eval_samples: int = Field(1, ge=1)  # samples per eval task (pass@1 = mean over them)
    max_tokens: MaxTokens = DEFAULT_POLICY.default_max_tokens  # per call: the default and the cap
    max_turns: int = Field(4, ge=1)
    rollout_timeout_s: float = Field(300, gt=0)
    concurrency: int = Field(8, ge=1)
    # a rollout starts only while this much memory is available (or none runs): the run slows down
    # instead of being OOM-killed (rollout/memory_gate.py); 0 = off
    memory_reserve_gib: float = Field(1.0, ge=0)
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
    # at most max_extra_groups a step
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
    (run/tracking.py); a logger error is a warning, never a failed run."""

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


class RunConfig(_Strict):
    model: ModelConfig = ModelConfig()
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

    def serving_policy(self) -> ServingPolicy:
        """How this run's proxy serves: serve.default_temperature / default_top_p, the knobs serve
        forces (serve.*_mode), loop.max_tokens as every call's default and cap."""
        return ServingPolicy(default_temperature=self.serve.default_temperature,
                             default_top_p=self.serve.default_top_p, default_max_tokens=self.loop.max_tokens,
                             max_tokens_cap=self.loop.max_tokens, force=self.serve.forced())

    def eval_harness_entries(self) -> list[HarnessEntry]:
        """The harnesses the held-out sets are evaluated through."""
        return list(self.eval_harnesses) if self.eval_harnesses is not None else list(self.harnesses)

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


def migrate(data: dict) -> dict:
    """Old configs still load: moved keys go to their new place, removed keys are dropped; each
    change is reported as a FutureWarning that names the key and what to do. A key the run sets
    itself (REFUSED_KEYS) raises ValueError with the fix."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for key, fix in REFUSED_KEYS.items():
        sec, name = key.split(".")
        section = data.get(sec)
        if isinstance(section, dict) and name in section:
            if not _is_default(section.pop(name), EngineConfig.model_fields[name].default):
                raise ValueError(f"{key}: {fix}")
    for old, new in MOVED_KEYS.items():
        (osec, okey), (nsec, nkey) = old.split("."), new.split(".")
        section = data.get(osec)
        if isinstance(section, dict) and okey in section:
            value = section.pop(okey)
            if isinstance(data.get(nsec), dict) and nkey in data[nsec]:
                raise ValueError(f"{old} and {new} are both set; {old} is the old name of {new}: keep only {new}")
            data.setdefault(nsec, {})[nkey] = value
            warnings.warn(f"config key {old} is now {new}; please rename it", FutureWarning, stacklevel=2)
    for old, why in REMOVED_KEYS.items():
        sec, key = old.split(".")
        section = data.get(sec)
        if isinstance(section, dict) and key in section:
            section.pop(key)
            warnings.warn(f"config key {old} was removed and is ignored: {why}", FutureWarning, stacklevel=2)
    return data


def _is_default(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return value is None or value == default


class ConfigError(HarnessRLError, ValueError):
    """A config file or override is invalid; the message names the key and the fix."""


def apply_override(data: dict, dotted: str) -> None:
    """Set `a.b.c=value` in a nested dict/list (list items by index); value parsed as YAML."""
    if "=" not in dotted:
        raise ConfigError(f"override {dotted!r} must look like key.sub=value")
    key, raw = dotted.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else None
    except yaml.YAMLError as err:
        raise ConfigError(f"override {dotted!r}: the value is not valid YAML ({getattr(err, 'problem', err)}); "
                          "quote it for the shell, e.g. 'harnesses=[{name: builtin}]'") from None
    parts = key.strip().split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"override {key!r}: {part!r} is not an index of a {len(node)}-item list")
            idx: Any = int(part)
        else:
            idx = part
        if last:
            node[idx] = value
        else:
            if isinstance(node, dict) and idx not in node:
                node[idx] = {}
            node = node[idx]


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML RunConfig (or the defaults when path is None) and apply overrides."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{p}: not valid YAML: {err}") from err
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of sections")
    return build_config(data, overrides, source=str(path or "config"))


def build_config(data: dict, overrides: Sequence[str] = (), source: str = "config") -> RunConfig:
    """A RunConfig from a mapping of sections (a file's, or one stored by a run) and overrides;
    ConfigError names `source` and every invalid key."""
    data = copy.deepcopy(data)
    for o in overrides:
        apply_override(data, o)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(invalid_message(err, source, overrides)) from err


def invalid_message(err: ValidationError, source: str, overrides: Sequence[str] = ()) -> str:
    """One line per invalid key, an unknown key with the nearest valid one ("did you mean
    loop.steps?"); headed by the override(s) that set the keys when they did (`loop.stpes=3`), else
    by `source`."""
    lines, blamed = [], []
    for e in err.errors():
        key = ".".join(map(str, e["loc"])) or "<root>"
        hint = ""
        if e["type"] == "extra_forbidden":
            near = difflib.get_close_matches(str(e["loc"][-1]), valid_keys(e["loc"][:-1]), n=1)
            hint = f"; did you mean {'.'.join(map(str, (*e['loc'][:-1], near[0])))}?" if near else ""
        override = next((o for o in overrides if _sets(o, key)), None)
        blamed.append(override)
        lines.append(f"  {key}: {e['msg']}{hint}")
    if blamed and all(blamed):
        head = f"override {', '.join(dict.fromkeys(o for o in blamed if o))} is invalid"
    else:
        head = f"{source} is invalid" + (f" (with {', '.join(overrides)})" if any(blamed) else "")
    return head + ":\n" + "\n".join(lines)


def _sets(override: str, key: str) -> bool:
    """Whether `override` ("loop.steps=3") set `key` (dotted), a key under it, or a section holding it."""
    target = override.partition("=")[0].strip()
    return key == target or key.startswith(target + ".") or target.startswith(key + ".")


def valid_keys(loc: Sequence[str | int]) -> list[str]:
    """The keys the config takes at `loc` (a pydantic error location: sections, list indexes)."""
    model: Any = RunConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue  # an item of a list: the item's model
        field = model.model_fields.get(part)
        if field is None:  # a union's member named by pydantic ("EvalSet")
            continue
        model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (X, X | None, list[X | str]), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def validate_files(paths: list[str | Path]) -> dict[str, str]:
    """Validate each file; returns {path: "ok" | error message}."""
    out = {}
    for p in paths:
        try:
            load_config(p)
            out[str(p)] = "ok"
        except ConfigError as err:
            out[str(p)] = str(err)
    return out
