"""`harnessrl sft`: supervised fine-tuning from captured calls (cold start before RL).

    harnessrl sft runs/r1 --out runs/sft1                         # rejection sampling: passing rollouts
    harnessrl sft runs/teacher --mode distill --out runs/sft2     # distillation: every served call

`run_sft` reads the trees (sft/data.py), checks that the recorded ids are the student's
tokenizer's, and trains the student tree-packed on them (train/sft.py: the trainer's packing,
uniform weights on the sampled tokens, `epochs` full-batch steps or `batch_trees` recorded groups a
step). A step's groups are packed into one tree per harness (sft/data.py `harness_trees`): the
prompt a harness sends in every rollout is computed once, not once per demonstration.
It writes a plain HF checkpoint to `<out>/policy` (what `train model.path=<out>/policy` starts
from and `vllm serve` loads) and `<out>/sft.json` with the mean cross-entropy before and after.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from harnessrl.config.sections import SFT_BATCH_TREES, SFT_EPOCHS, SFT_LR
from harnessrl.sft.data import (MODES, SFTData, SFTDataError, check_tokenizers, distill_trees, harness_trees,
                                rejection_trees)

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

T = TypeVar("T")

__all__ = ["SFTOptions", "SFTResult", "SFTDataError", "run_sft"]


@dataclass(frozen=True)
class SFTOptions:
    mode: str = "rejection"  # rejection | distill
    model: str | None = None  # the student (HF dir or id; None: the default model)
    epochs: int = SFT_EPOCHS
    lr: float = SFT_LR
    batch_trees: int = SFT_BATCH_TREES  # trees per optimizer step (0: all of them)
    token_budget: int = 2048  # tokens per packed chunk (algorithm.token_budget)
    min_reward: float = 1.0
    harness: str | None = None  # rejection: only this harness's rollouts
    seed: int = 0
    dtype: str = "float32"


@dataclass(frozen=True)
class SFTResult:
    out_dir: str
    policy_dir: str
    mode: str
    runs: list[str]
    trees: int
    rollouts: int
    calls: int
    sampled_tokens: int
    nll_before: float
    nll_after: float
    steps: int
    seconds: float
    warnings: list[str]
    tokens: int = 0  # the groups' trees' tokens, each tree on its own
    packed_tokens: int = 0  # the same packed into one tree per harness (what a full-batch pass computes)


def run_sft(run_dirs: list[Path], out_dir: Path, opts: SFTOptions,
            log: Callable[[str], None] = lambda line: None) -> SFTResult:
    """Train the student on the runs' recorded ids; write <out>/policy and <out>/sft.json."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.engine import resolve_model
    from harnessrl.store.run_store import RunStore
    from harnessrl.train.checkpoint import save_policy
    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.packing import default_backend
    from harnessrl.train.sft import sft_batch, sft_nll, sft_update
    from harnessrl.train.trainer import Trainer

    if opts.mode not in MODES:
        raise SFTDataError(f"unknown --mode {opts.mode!r}; use one of: {', '.join(MODES)}")
    if opts.epochs < 1 or opts.lr <= 0:
        raise SFTDataError(f"--epochs must be >= 1 and --lr > 0, got {opts.epochs}, {opts.lr}")
    t0 = time.perf_counter()
    model_dir = Path(resolve_model(opts.model))
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    stores = {Path(d): _open_store(RunStore, Path(d)) for d in run_dirs}
    try:
        warnings = check_tokenizers(stores, tokenizer)
        data = [_read(store, opts) for store in stores.values()]
    finally:
        for store in stores.values():
            store.close()
    trees = [t for d in data for t in d.trees]
    groups = [g for d in data for g in d.groups]
    _check_vocab(trees, len(tokenizer))
    random.seed(opts.seed)
    torch.manual_seed(opts.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backend = default_backend(device)
    policy = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, opts.dtype),
                                                  attn_implementation="flex_attention" if backend == "flex" else "sdpa").to(device)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=opts.lr)
    trainer = Trainer(policy, optimizer, PPOSettings(is_mode="none"), opts.token_budget, backend)
    packed = harness_trees(groups)  # one tree per harness: what the full-batch NLL computes
    full = sft_batch(packed)
    tokens, packed_tokens = (sum(len(t.flat().tokens) for t in ts) for ts in (trees, packed))
    before = sft_nll(trainer, full)
    log(f"sft {opts.mode}: {len(trees)} trees, {sum(d.rollouts for d in data)} rollouts, "
        f"{sum(d.sampled_tokens for d in data)} sampled tokens, {tokens} tree tokens packed into {packed_tokens} "
        f"(one tree per harness); mean NLL before {before:.4f}")
    steps = 0
    for epoch in range(opts.epochs):
        for batch in _batches(groups, opts.batch_trees, random.Random(opts.seed + epoch)):
            stats = sft_update(trainer, sft_batch(harness_trees(batch)))
            steps += 1
        log(f"epoch {epoch + 1}/{opts.epochs}: last step NLL {stats['nll']:.4f}")
    after = sft_nll(trainer, full)
    policy_dir = Path(out_dir) / "policy"
    save_policy(policy, policy_dir, model_dir)
    result = SFTResult(str(out_dir), str(policy_dir), opts.mode, [str(d) for d in run_dirs], len(trees),
                       sum(d.rollouts for d in data), sum(d.calls for d in data),
                       sum(d.sampled_tokens for d in data), before, after, steps,
                       round(time.perf_counter() - t0, 1), warnings, tokens, packed_tokens)
    (Path(out_dir) / "sft.json").write_text(json.dumps({**asdict(result), "options": asdict(opts)}, indent=2))
    return result


def _open_store(store_cls: type[RunStore], run_dir: Path) -> RunStore:
    from harnessrl.store.schema import DB_NAME

    if not (run_dir / DB_NAME).is_file():
        raise SFTDataError(f"{run_dir} holds no run (no {DB_NAME}). Fix: pass the --run-dir of a "
                           "`harnessrl rollout`, `train` or `serve` run")
    return store_cls(run_dir)


def _read(store: RunStore, opts: SFTOptions) -> SFTData:
    if opts.mode == "rejection":
        return rejection_trees(store, opts.min_reward, opts.harness)
    return distill_trees(store)


def _check_vocab(trees: list, vocab_size: int) -> None:
    top = max(int(t.flat().tokens.max()) for t in trees if len(t.flat().tokens))
    if top >= vocab_size:
        raise SFTDataError(f"the runs hold token id {top}, past the student's vocabulary ({vocab_size}): "
                           "they were served by another model family. Fix: pick a student with that tokenizer")


def _batches(groups: list[T], size: int, rng: random.Random) -> list[list[T]]:
    """The groups in batches of `size` (0: one batch), shuffled by `rng`."""
    if size <= 0 or size >= len(groups):
        return [list(groups)]
    order = list(groups)
    rng.shuffle(order)
    return [order[i:i + size] for i in range(0, len(order), size)]
