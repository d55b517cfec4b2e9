"""The loss's settings (torch-free, so a run config can embed them without importing torch)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class PPOSettings(BaseModel):
    """Clipping, train-inference mismatch correction and KL of the policy loss (train/losses.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clip_low: float = Field(0.2, gt=0, lt=1)
    clip_high: float = Field(0.28, gt=0)
    dual_clip: float | None = Field(None, gt=1)  # c > 1 enables dual clip
    is_mode: Literal["tis", "mis", "none"] = "tis"
    is_cap: float = Field(2.0, gt=0)
    mis_low: float = Field(0.5, gt=0)
    mis_high: float = Field(2.0, gt=0)
    kl_coef: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _mis_range(self) -> PPOSettings:
        if self.mis_low >= self.mis_high:
            raise ValueError("mis_low must be below mis_high")
        return self


ComputeDtype = Literal["auto", "float32", "bfloat16"]


def resolve_compute_dtype(setting: str, weights_dtype: str, engine_dtype: str) -> str:
    """The dtype the trainer computes in (`model.compute_dtype`, train/precision.py) over master
    weights of `weights_dtype` (`model.dtype`). auto: the engine's served dtype (`engine_dtype`,
    resolved) when it is bfloat16, so both sides round the weights the same way; float32 otherwise
    (an fp32 or fp16 engine, or a server whose dtype is its own `auto`, which is bf16 on GPUs:
    set bfloat16 there). Never finer than the weights themselves."""
    if setting not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"compute_dtype {setting!r}: use auto, float32 or bfloat16")
    if weights_dtype == "bfloat16":
        return "bfloat16"
    if setting == "auto":
        return "bfloat16" if engine_dtype == "bfloat16" else "float32"
    return setting
