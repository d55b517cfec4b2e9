"""What one trainer update measured (torch-free, so the step record and the loop import it freely).

`TokenSums` are the path-weighted sums a loss accumulates over the trained tokens (train/losses.py
fills one per chunk, the trainer adds them up, over ranks too); `UpdateStats` is what
`Trainer.update` returns: those sums turned into means, and the update's token counts. Both are
plain fields: a new statistic is a new field here, checked by mypy where it is written and read.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields


@dataclass
class TokenSums:
    """Sums over trained tokens, each weighted by the token's summed path weight (but `weight`,
    `tokens` and `loss`): divide by `weight` for the weighted means."""

    clip_frac: float = 0.0
    is_weight: float = 0.0
    is_kept: float = 0.0
    kl: float = 0.0
    abs_logp_gap: float = 0.0
    mismatch_kl: float = 0.0
    is_capped: float = 0.0
    entropy: float = 0.0
    weight: float = 0.0  # the summed path weight of the tokens
    tokens: float = 0.0  # how many tokens
    loss: float = 0.0  # the loss already divided by the batch denominator
    added: int = 0  # how many chunk sums were added into these (0: no token reached the loss)

    def add(self, other: TokenSums) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_floats(self) -> list[float]:
        """The fields in order (to sum over ranks); `from_floats` reads them back."""
        return [float(v) for v in astuple(self)]

    @classmethod
    def from_floats(cls, values: list[float]) -> TokenSums:
        out = cls()
        for f, v in zip(fields(cls), values):
            setattr(out, f.name, int(round(v)) if f.name == "added" else float(v))
        return out


@dataclass
class UpdateStats:
    """One trainer update (`Trainer.update`): means over the trained tokens weighted by path weight,
    and the token counts. The weighted means are absent when no token reached the loss."""

    clip_frac: float | None = None
    is_weight: float | None = None
    is_kept: float | None = None
    kl: float | None = None
    abs_logp_gap: float | None = None  # mean |logp_trainer - logp_engine| of the sampled tokens
    mismatch_kl: float | None = None  # KL(engine || trainer) on the sampled tokens
    is_capped: float | None = None
    entropy: float | None = None
    loss: float = 0.0
    tokens_trained: float = 0.0
    grad_norm: float = 0.0
    tokens_computed: float = 0.0
    unique_tree_tokens: float = 0.0
    chunks: float = 0.0
    value_loss: float | None = None  # ppo's critic
    # a batch of several harnesses (train/harness_grads.py): cosine of each pair's policy gradients,
    # keyed "a|b", and each harness's gradient norm (first epoch, before clipping)
    grad_cosine: dict[str, float] | None = None
    harness_grad_norm: dict[str, float] | None = None
    # wall seconds of the update's parts (profile/run_profile.py); forward/backward includes the gradient split
    old_logprobs_s: float | None = None
    forward_backward_s: float | None = None
    optimizer_s: float | None = None

    @classmethod
    def from_sums(cls, sums: TokenSums, epochs: int, *, grad_norm: float, tokens_computed: float,
                  unique_tree_tokens: float, chunks: float, value_loss: float | None = None,
                  grad_cosine: dict[str, float] | None = None,
                  harness_grad_norm: dict[str, float] | None = None,
                  seconds: dict[str, float] | None = None, kl_computed: bool = True) -> UpdateStats:
        """Means of the summed epochs (`sums` holds every epoch's tokens; the loss and token count
        are per epoch). `kl_computed` False (no reference model): `kl` stays None, not a 0 nobody
        measured."""
        w = max(sums.weight, 1e-8)
        has = sums.added > 0
        t = seconds or {}

        def mean(total: float) -> float | None:
            return total / w if has else None

        return cls(clip_frac=mean(sums.clip_frac), is_weight=mean(sums.is_weight), is_kept=mean(sums.is_kept),
                   kl=mean(sums.kl) if kl_computed else None, abs_logp_gap=mean(sums.abs_logp_gap), mismatch_kl=mean(sums.mismatch_kl),
                   is_capped=mean(sums.is_capped), entropy=mean(sums.entropy), loss=sums.loss / epochs,
                   tokens_trained=sums.tokens / epochs, grad_norm=grad_norm, tokens_computed=tokens_computed,
                   unique_tree_tokens=unique_tree_tokens, chunks=chunks, value_loss=value_loss,
                   grad_cosine=grad_cosine, harness_grad_norm=harness_grad_norm,
                   old_logprobs_s=t.get("old_logprobs_s"), forward_backward_s=t.get("forward_backward_s"),
                   optimizer_s=t.get("optimizer_s"))
