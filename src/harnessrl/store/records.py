"""Frozen records: the contract between capture (proxy, runner) and consumers (tree, trainer, CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Per-token provenance of prompt ids: PROMPT for harness/environment text; a value v >= 0 means the
# token was sampled by policy version v in an earlier call and reused verbatim (exact history).
PROMPT = -1

# context_exceeded: a request of the rollout did not fit the model's context (the proxy answered its
# typed "prompt too long" error), whether the harness gave up or went on (a summariser call served
# after it): scored like any policy end, never recorded as ok
# cancelled: the run was interrupted (Ctrl-C, SIGTERM) while the rollout ran; its harness was ended
# runner_error: a bug in harnessrl's own runner (reported with its traceback type); never the policy's
# workspace_limit: the workspace the policy left passed a host-side limit on its way to the verifier
# (entries, depth, path length, bytes, time; sandbox/treeops.py): scored 0, never retried
# workspace_link: the workspace held a link into the verifier's own files or out of it (sandbox/views.py)
# reward_forged: the verifier's reward channel was tampered with (tasks/harbor.py); both scored 0
ROLLOUT_STATUSES = ("ok", "harness_error", "timeout", "verifier_error", "sandbox_error", "context_exceeded",
                    "workspace_limit", "workspace_link", "reward_forged", "cancelled", "runner_error")

# How a status is treated (docs/training.md, "Rollout statuses"). The policy is an optimiser: an
# outcome it can reach must never be cheaper than failing, so every end the policy caused is SCORED
# (the verifier runs on the workspace it left; 0 when that fails) and trained against. Only the
# host's failures, and rollouts in which the policy sampled nothing, are left out (no reward):
INFRASTRUCTURE_STATUSES = ("sandbox_error", "cancelled", "runner_error")


def is_scored(status: str, reward: float | None) -> bool:
    """Whether a rollout is a policy outcome that counts (group baseline, loss, pass@k)."""
    return reward is not None and status not in INFRASTRUCTURE_STATUSES


class PassRule(Protocol):
    """A task's own pass threshold (harnessrl.tasks.model.Task.passed)."""

    def passed(self, reward: float) -> bool: ...


def rollout_passed(record: RolloutRecord, task: PassRule | None) -> bool:
    """The one pass rule: a scored rollout (`is_scored`: whatever way its harness ended, the
    verifier scored the workspace) whose reward meets the task's own threshold (>= 1.0 without a
    task). An infrastructure failure or an unscored rollout counts as a fail."""
    if not is_scored(record.status, record.reward) or record.reward is None:
        return False
    if task is None:
        return record.reward >= 1.0 - 1e-9
    return task.passed(record.reward)


@dataclass(frozen=True)
class CallRecord:
    call_id: str
    rollout_id: str  # "adhoc" for the unnamed /v1 route
    seq: int  # order of the call within its rollout (0, 1, ...)
    protocol: str  # "openai.chat" | "anthropic.messages" | "openai.responses"
    prompt_ids: list[int]
    sampled_ids: list[int]
    logprobs: list[float]  # one per sampled id
    prompt_provenance: list[int]  # one per prompt id: PROMPT or the policy version that sampled it
    policy_version: int
    temperature: float
    top_p: float
    finish_reason: str  # "stop" | "length"
    status: str = "ok"  # "ok" | "error" (error calls have no sampled ids)
    t_start: float = 0.0
    t_end: float = 0.0
    request: dict[str, Any] | None = None  # raw request body (as received)
    response: dict[str, Any] | None = None  # raw response (non-stream body or assembled stream)
    meta: dict[str, Any] = field(default_factory=dict)  # model alias, render mode, timings, error...
    # False: the proxy stored the call but did not see its answer's last byte handed to an open
    # connection (a crash or kill -9 in between, or the client gone): the harness may never have
    # seen it. The tree builder keeps such a completion as context, never as a decision.
    delivered: bool = True


@dataclass(frozen=True)
class Lineage:
    """Where a branched rollout comes from (rollout/branching.py, proxy/replay.py): the proxy
    answered its first `branch_call` calls with `parent`'s recorded answers, then it sampled fresh."""

    parent: str  # the rollout whose served calls were replayed
    branch_call: int  # how many of them were replayed: the branch decides afresh from that call on
    replayed: int = 0  # replayed answers the harness got
    exact: int = 0  # of those, matched by identical prompt ids (the others matched by meaning)
    # "" for a branch that reached its branch point; else why it is not the parent's sibling:
    # "prompt" (the harness sent a prompt that matches no recorded call) or "ended" (the harness
    # stopped before asking for every replayed call)
    diverged: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"parent": self.parent, "branch_call": self.branch_call, "replayed": self.replayed,
                "exact": self.exact, "diverged": self.diverged}

    @classmethod
    def from_json(cls, value: Any) -> "Lineage | None":
        if not isinstance(value, dict) or not value.get("parent"):
            return None
        return cls(str(value["parent"]), int(value.get("branch_call", 0)), int(value.get("replayed", 0)),
                   int(value.get("exact", 0)), str(value.get("diverged", "")))


@dataclass(frozen=True)
class RolloutRecord:
    rollout_id: str
    task_id: str
    harness: str  # the harness spec as given, e.g. "claude-code:small"
    group_id: str  # all rollouts of one task in one step share a group (one prefix tree)
    status: str  # one of ROLLOUT_STATUSES
    reward: float | None  # None: not scored (an infrastructure status, or the policy sampled nothing)
    checks: dict[str, float] = field(default_factory=dict)
    step: int = 0
    sample_idx: int = 0
    category: str = ""
    split: str = ""
    call_count: int = 0
    durations: dict[str, float] = field(default_factory=dict)  # sandbox_s, harness_s, verifier_s, total_s
    error: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    profile: str = ""  # the harness profile it ran with ("" = none, e.g. runs written before profiles)
    lineage: Lineage | None = None  # set on a branch: its parent rollout and branch call


def served_calls(calls: Sequence[CallRecord]) -> list[CallRecord]:
    """A rollout's calls the harness acted on, in order: served (status ok), delivered, with
    sampled ids. Call j of a branch point (rollout/branching.py) is the j-th of these, and so is
    call j of the replay that re-runs it (proxy/replay.py)."""
    return sorted((c for c in calls if c.status == "ok" and c.delivered and len(c.sampled_ids)), key=lambda c: c.seq)
