"""The policy (and optional critic / reference) and one tree-packed update.

`Trainer.update(batch)` packs the batch forest into chunks under the token budget, runs the
policy on each chunk once per epoch, sums the PPO token objective over decision tokens and divides
by the batch's summed path weight (computed over the whole batch, so chunking changes nothing),
then takes one optimizer step per epoch. A critic, when present, is trained on the same chunks.
When the batch mixes harnesses (and `harness_grad_cosine`), the first epoch also splits the policy
gradient by harness and reports how the harnesses' gradients agree (train/harness_grads.py): the
chunks then break where the trees change harness, so each chunk is one harness's and its one
backward is that harness's part; nothing is computed twice.

`compute_dtype` (bfloat16 under a bf16 engine: `model.compute_dtype`, train/precision.py): every
forward and backward, the old-logprob and reference passes included, computes with the master
weights rounded to that dtype, i.e. the weights the engine serves after a sync; gradients and the
optimizer step stay on the fp32 masters, and `sync_weights` sends the rounded weights.

`Trainer` is the in-process backend of `train.protocol.TrainerBackend` (update, tree values, weight
sync, checkpoints); the Ray backend runs one inside an actor (cluster/ray_trainer.py).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import torch

from harnessrl.train.batch import TrainBatch, forest_of_flat
from harnessrl.train.checkpoint import save_checkpoint
from harnessrl.train.critic import forest_values
from harnessrl.train.harness_grads import HarnessGradients, chunk_harness, gradient_agreement, harness_breaks
from harnessrl.train.losses import PPOSettings, policy_loss, value_loss
from harnessrl.train.packing import PackedChunk, model_attention, pack_forest, token_logprobs
from harnessrl.train.precision import compute_weights
from harnessrl.train.update_stats import TokenSums, UpdateStats
from harnessrl.train.weight_sync import rank_served_weights, send_weights
from harnessrl.train.weights import is_peft

if TYPE_CHECKING:
    from harnessrl.engine.base import Engine
    from harnessrl.train.critic import ValueModel
    from harnessrl.train.fsdp import Ranks
    from harnessrl.tree.nodes import FlatTree


@dataclass
class ChunkTargets:
    """The decision tokens a chunk trains (local positions) and their fields as tensors."""

    local: torch.Tensor
    temperature: torch.Tensor
    engine_logp: torch.Tensor
    adv_pos: torch.Tensor
    adv_neg: torch.Tensor
    weight: torch.Tensor


def chunk_targets(chunk: PackedChunk, batch: TrainBatch) -> ChunkTargets:
    own = chunk.owned.numpy() & batch.decision[chunk.index] & (chunk.pred_pos.numpy() >= 0)
    local = np.flatnonzero(own)
    g = chunk.index[local]

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a[g], dtype=torch.float32)

    return ChunkTargets(torch.as_tensor(local, dtype=torch.long), t(batch.temperature), t(batch.engine_logp),
                        t(batch.adv_pos), t(batch.adv_neg), t(batch.weight))


class Trainer:
    """Owns the policy, its optimizer, and optionally a frozen reference and a critic."""

    def __init__(self, policy: torch.nn.Module, optimizer: torch.optim.Optimizer, settings: PPOSettings,
                 token_budget: int, backend: str = "sdpa", grad_clip: float = 1.0, epochs: int = 1,
                 reference: torch.nn.Module | None = None, critic: ValueModel | None = None,
                 critic_optimizer: torch.optim.Optimizer | None = None, use_lora_reference: bool = False,
                 ranks: Ranks | None = None, harness_grad_cosine: bool = True,
                 compute_dtype: torch.dtype | None = None) -> None:
        self.policy = policy
        self.optimizer = optimizer
        self.settings = settings
        self.token_budget = token_budget
        self.backend = backend
        self.grad_clip = grad_clip
        self.epochs = epochs
        self.reference = reference
        self.use_lora_reference = use_lora_reference  # peft: the base with adapters off is the reference
        self.critic = critic
        self.critic_optimizer = critic_optimizer
        # ranks (train.fsdp.Ranks): this process's share of the chunks when the policy is sharded
        # over several processes; None = one process trains every chunk.
        self.ranks = ranks
        self.harness_grad_cosine = harness_grad_cosine  # per-harness gradients of mixed batches
        # the dtype the policy (and reference) compute in over their own weights; None: their own
        self.compute_dtype = compute_dtype
        if ranks is not None and ranks.world > 1 and critic is not None:
            raise ValueError("the PPO critic is not sharded yet: use grpo or tree_grpo with several trainer ranks")

    def _ref_logprobs(self, chunk: PackedChunk, tg: ChunkTargets) -> torch.Tensor | None:
        if self.reference is None and not self.use_lora_reference:
            return None
        with torch.no_grad():
            if self.use_lora_reference:  # inside update's compute_weights block: the policy is cast
                with self.policy.disable_adapter():
                    return token_logprobs(self.policy, chunk, tg.local, tg.temperature, self.backend)[0]
            with compute_weights(self.reference, self.compute_dtype):
                return token_logprobs(self.reference, chunk, tg.local, tg.temperature, self.backend)[0]

    def _old_logprobs(self, work: list[tuple]) -> list[torch.Tensor] | None:
        need = self.epochs > 1 or self.settings.is_mode == "mis"
        if not need:
            return None
        with torch.no_grad(), compute_weights(self.policy, self.compute_dtype):
            return [token_logprobs(self.policy, c, tg.local, tg.temperature, self.backend)[0]
                    for c, tg, _ in work]

    def _work(self, chunks: list[PackedChunk], targets: list[ChunkTargets]) -> list[tuple]:
        """(chunk, targets, live) this process runs. One process: every chunk with targets. Several
        ranks: a balanced share, padded with zero-weight repeats so every rank runs the same number
        of forward/backward passes (each is a collective of the sharded model)."""
        if self.ranks is None or self.ranks.world == 1:
            return [(c, tg, True) for c, tg in zip(chunks, targets) if len(tg.local)]
        from harnessrl.train.fsdp import assign_chunks

        return assign_chunks(chunks, targets, self.ranks.rank, self.ranks.world)

    def update(self, batch: TrainBatch) -> UpdateStats:
        """One PPO/GRPO update on a batch; returns the update's statistics."""
        token_harness = self._token_harness(batch)
        breaks = () if token_harness is None else harness_breaks(batch.tree_offsets, batch.tree_harness or [])
        chunks = pack_forest(batch.forest, self.token_budget, breaks)  # a harness's chunks are its own
        targets = [chunk_targets(c, batch) for c in chunks]
        work = self._work(chunks, targets)
        t_old = time.perf_counter()
        old = self._old_logprobs(work)
        seconds = {"old_logprobs_s": time.perf_counter() - t_old, "forward_backward_s": 0.0, "optimizer_s": 0.0}
        denom = self._denominator(work, old, batch.denom)
        world = 1 if self.ranks is None else self.ranks.world
        sums = TokenSums()
        grad_norm = torch.zeros(())
        cosine: dict[str, float] | None = None
        harness_norm: dict[str, float] | None = None
        self.policy.train()
        for epoch in range(self.epochs):
            # read each epoch: one list for all epochs gave an FSDP2-sharded policy a wrong grad norm
            # from its second epoch on (tests/scale/test_fsdp.py, the mis_epochs case)
            params = [p for p in self.policy.parameters() if p.requires_grad]
            split = HarnessGradients(params) if token_harness is not None and epoch == 0 else None
            t_fb = time.perf_counter()
            with compute_weights(self.policy, self.compute_dtype):  # one cast of the weights per epoch
                for i, (chunk, tg, live) in enumerate(work):
                    chunk_sums = self._chunk_backward(chunk, tg, None if old is None else old[i], denom, world,
                                                      live, split, token_harness)
                    if live:
                        sums.add(chunk_sums)
            if split is not None:
                split.finish()
                if len(split.parts) >= 2:
                    cosine, harness_norm = gradient_agreement(split.parts)
                del split  # its copies of the gradient before the optimizer step
            t_opt = time.perf_counter()
            seconds["forward_backward_s"] += t_opt - t_fb
            grad_norm = torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            seconds["optimizer_s"] += time.perf_counter() - t_opt
        if world > 1 and self.ranks is not None:
            sums = TokenSums.from_floats(self.ranks.sum_floats(sums.as_floats()))
        value = None
        if self.critic is not None and batch.returns is not None and batch.value_weight is not None:
            value = self.update_critic(chunks, batch.returns, batch.value_weight)
        norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        return UpdateStats.from_sums(sums, self.epochs, grad_norm=float(norm),
                                     tokens_computed=float(sum(len(c) for c in chunks)),
                                     unique_tree_tokens=float(len(batch)), chunks=float(len(chunks)),
                                     value_loss=value, grad_cosine=cosine or None, harness_grad_norm=harness_norm,
                                     seconds=seconds,
                                     kl_computed=self.reference is not None or self.use_lora_reference)

    def _chunk_backward(self, chunk: PackedChunk, tg: ChunkTargets, old_lp: torch.Tensor | None, denom: float,
                        world: int, live: bool, split: HarnessGradients | None,
                        token_harness: np.ndarray | None) -> TokenSums:
        """Forward one chunk and backpropagate its loss over `denom` (several ranks: times the world
        size, 0 for padding); with `split`, into the part of the chunk's harness (a chunk holds one:
        `update` breaks the chunks where the harness changes). Returns the chunk's sums (entropy and
        loss filled in)."""
        if split is not None and token_harness is not None:
            harness = chunk_harness(token_harness[chunk.index[tg.local.numpy()]])
            if harness is not None:
                split.switch(harness)
        logp, ent = token_logprobs(self.policy, chunk, tg.local, tg.temperature, self.backend, with_entropy=True)
        old_lp = logp.detach() if old_lp is None else old_lp
        ref = self._ref_logprobs(chunk, tg)
        scale = 1.0 if world == 1 else (float(world) if live else 0.0)  # sharded: averaged over ranks
        parts = policy_loss(logp, old_lp, tg.engine_logp, tg.adv_pos, tg.adv_neg, tg.weight, self.settings, ref)
        with model_attention(self.policy, self.backend):  # checkpointed layers recompute in backward
            (parts.loss * scale / denom).backward()
        parts.sums.entropy = float((ent * tg.weight).sum()) if ent is not None else 0.0
        parts.sums.loss = float(parts.loss.detach()) / denom
        return parts.sums

    def _token_harness(self, batch: TrainBatch) -> np.ndarray | None:
        """Each token's harness, when this update splits its gradient by harness: the setting is on,
        the batch holds two harnesses or more, and one process holds the whole gradient (a sharded
        policy reports nothing: every backward sums its gradient shards over the ranks)."""
        if not self.harness_grad_cosine or batch.tree_harness is None or len(set(batch.tree_harness)) < 2:
            return None
        if self.ranks is not None and self.ranks.world > 1:
            return None
        names, codes = batch.harness_codes()
        return np.asarray(names, dtype=object)[codes]

    def _denominator(self, work: list[tuple], old: list[torch.Tensor] | None, base: float | None) -> float:
        """The batch loss denominator (algo's summed tree norms, else the summed path weight of the
        trained tokens); MIS-dropped tokens leave it in proportion to their weight. Summed over ranks."""
        total, full = 0.0, 0.0
        for i, (_, tg, live) in enumerate(work):
            if not live:
                continue
            full += float(tg.weight.sum())
            if self.settings.is_mode == "mis" and old is not None:
                ratio = torch.exp(old[i] - tg.engine_logp)
                keep = (ratio >= self.settings.mis_low) & (ratio <= self.settings.mis_high)
                total += float((tg.weight * keep).sum())
            else:
                total += float(tg.weight.sum())
        if self.ranks is not None and self.ranks.world > 1:
            total, full = self.ranks.sum_floats([total, full])
        if base is not None and full > 0:
            total = base * total / full
        return max(total, 1e-8)

    def update_critic(self, chunks: list[PackedChunk], returns: np.ndarray, vw_all: np.ndarray) -> float:
        """One value-regression step on GAE returns (every tree token that carries a return weight,
        `vw_all`, over the batch's tokens)."""
        if self.critic is None or self.critic_optimizer is None:
            raise ValueError("a critic update needs the critic and its optimizer (algorithm ppo)")
        denom = max(float(vw_all.sum()), 1e-8)
        total = 0.0
        self.critic.train()
        for chunk in chunks:
            own = chunk.owned.numpy() & (vw_all[chunk.index] > 0) & (chunk.pred_pos.numpy() >= 0)
            local = np.flatnonzero(own)
            if len(local) == 0:
                continue
            g = chunk.index[local]  # the value of token q's state is read at its parent position
            values = self.critic.chunk_values(chunk, self.backend)[chunk.pred_pos[torch.as_tensor(local)]]
            loss = value_loss(values, torch.as_tensor(returns[g]), torch.as_tensor(vw_all[g])) / denom
            with model_attention(self.critic.backbone, self.backend):
                loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.grad_clip)
        self.critic_optimizer.step()
        self.critic_optimizer.zero_grad(set_to_none=True)
        return total

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The policy's weights under plain HF names (LoRA merged in), for sync and checkpoints."""
        from harnessrl.train.weights import hf_named_weights

        return hf_named_weights(self.policy)

    # -- the TrainerBackend protocol (train/protocol.py), in this process --------------------------

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        """The critic's value of every token of a flattened tree (algorithm ppo builds the critic)."""
        if self.critic is None:
            raise ValueError("tree values need the trainer's critic: algorithm ppo builds one (run/trainer_setup.py)")
        return forest_values(self.critic, forest_of_flat(flat), self.token_budget, self.backend)

    def sync_weights(self, engine: Engine, version: int) -> None:
        """The weights the trainer computes with (cast to compute_dtype) into the engine (train/weight_sync.py)."""
        send_weights(engine, rank_served_weights(self, on_cpu=False), version)

    def save_checkpoint(self, run_dir: Path, step: int, source_dir: Path | None, keep: int) -> Path:
        return save_checkpoint(run_dir, step, self.policy, self.state(), source_dir, keep=keep)

    def close(self) -> None:
        pass  # everything it holds lives in this process

    # -- trainer state for --resume ----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything but the policy weights (those are in the HF dir): optimizer, adapters, critic, RNG."""
        state = {"optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                 "python_rng": random.getstate(), "numpy_rng": np.random.get_state()}
        if is_peft(self.policy):
            state["adapters"] = {k: v for k, v in self.policy.state_dict().items() if "lora_" in k}
        if self.critic is not None:
            assert self.critic_optimizer is not None  # built together (run/trainer_setup.py)
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a saved `state()` (the policy's weights come from the checkpoint's HF dir)."""
        self.optimizer.load_state_dict(state["optimizer"])
        if "adapters" in state:
            self.policy.load_state_dict(state["adapters"], strict=False)
        if "critic" in state and self.critic is not None:
            assert self.critic_optimizer is not None
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
