"""Tree credit against flat GRPO at an equal sampled-token budget, on synthetic groups whose outcome
is decided at the second call, with the project's own functions (docs/training.md, "Tree credit").

    .venv/bin/python benchmarks/tree_credit_sim.py [--seeds 30] [--steps 20] [--groups 4] [--lr 2]
                                                   [--loss-agg seq_mean_token_mean|seq_sum]

The task: three calls per rollout. Call 0 looks (option g shows a hint, b does not); call 1 decides
(4 options, option 0 passes: always after the hint, half the time without it); call 2 closes
("Done." or "Finished.", no effect on the reward). A tabular softmax policy per context (call 0;
call 1 after g; call 1 after b; call 2) starts at J = 0.30. Each call samples 4 tokens (the option
and 3 fixed ones); the recorded logprob of the option token is log pi(option), as an engine records it.

Per step and group: fresh rollouts are sampled; in the tree arms `branch_points` (rollout/
branching.py, placement `open` unless named) picks the branch points on the recorded calls, and each
branch replays its parent's calls before the point (they cost no sampling) and samples the rest.
Branch budget left unused (no open point) is spent on fresh rollouts. `build_tree` builds the group,
`grpo` / `tree_grpo` give the advantages, and the policy moves by the exact policy gradient of the
linear surrogate sum_q (A+_q + A-_q) log pi(token q) over the step's trees, divided by their summed
norm (the trainer's denominator), one update per step. With seq_mean_token_mean a branched rollout's
segments are token-averaged each (shorter than the rollout), so its decisions weigh more per token
than in flat GRPO; seq_sum (Dr.GRPO) has no such length effect and compares the estimators alone. The figure is J after the last step
minus J before, exact (the task is small enough to enumerate), per seed; printed: median and range
over seeds, and the paired difference to flat GRPO at the same budget. Also printed: the bias of
V(root) (tree_grpo's node_value[0]) against the exact J, over every group of the tree arms.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, replace

import numpy as np

from harnessrl.algo import grpo, tree_grpo
from harnessrl.rollout.branching import BranchingConfig, branch_points
from harnessrl.store.records import PROMPT, CallRecord, Lineage, RolloutRecord
from harnessrl.tree import build_tree

OPTIONS = {"pre": 2, "look": 2, "after_g": 4, "after_b": 4, "close": 2}
TOKEN_BASE = {"pre": 50, "look": 10, "after_g": 20, "after_b": 30, "close": 40}  # option token = base + option
FILL = 3  # fixed tokens after the option token: each call samples 1 + FILL tokens
PROMPT_IDS = [1, 2, 3]


@dataclass(frozen=True)
class Arm:
    name: str
    estimator: str  # grpo | tree_grpo
    fresh: int
    points: int = 0
    width: int = 0
    policy: str = "open"
    at: int = 1  # the branch call the arm's budget expects (the first open call)


def init_policy() -> dict[str, np.ndarray]:
    return {"pre": np.array([4.0, 0.0]), "look": np.zeros(2), "after_g": np.array([0.7, 0, 0, 0]),
            "after_b": np.array([0.7, 0, 0, 0]), "close": np.zeros(2)}


def probs(theta: dict[str, np.ndarray], ctx: str) -> np.ndarray:
    z = np.exp(theta[ctx] - theta[ctx].max())
    return z / z.sum()


def expected_reward(theta: dict[str, np.ndarray]) -> float:
    look = probs(theta, "look")
    return float(look[0] * probs(theta, "after_g")[0] + look[1] * 0.5 * probs(theta, "after_b")[0])


def sample_path(theta, rng, prefix: list[int], settled: int) -> tuple[list[int], float]:
    """Options of the settled + 3 calls (those in `prefix` replayed) and the reward."""
    opts = list(prefix)
    for k in range(len(prefix), settled + 3):
        ctx = context(k, opts, settled)
        opts.append(int(rng.choice(OPTIONS[ctx], p=probs(theta, ctx))))
    passed = opts[settled + 1] == 0 and (opts[settled] == 0 or rng.random() < 0.5)
    return opts, float(passed)


def context(k: int, opts: list[int], settled: int) -> str:
    if k < settled:
        return "pre"  # a confident call that changes nothing (reading a file the task names)
    if k == settled:
        return "look"
    return "close" if k == settled + 2 else ("after_g" if opts[settled] == 0 else "after_b")


def rollout_calls(rid: str, opts: list[int], theta, settled: int, replayed_from: str = "",
                  replay: int = 0) -> list[CallRecord]:
    calls, prompt = [], list(PROMPT_IDS)
    for k, o in enumerate(opts):
        ctx = context(k, opts, settled)
        sampled = [TOKEN_BASE[ctx] + o] + [90 + k] * FILL
        lp = [float(np.log(probs(theta, ctx)[o]))] + [0.0] * FILL
        meta = {"replay": {"of": f"{replayed_from}:{k}", "match": "exact"}} if k < replay else {}
        calls.append(CallRecord(call_id=f"{rid}:{k}", rollout_id=rid, seq=k, protocol="sim", prompt_ids=list(prompt),
                                sampled_ids=sampled, logprobs=lp, prompt_provenance=[PROMPT] * len(prompt),
                                policy_version=0, temperature=1.0, top_p=1.0, finish_reason="stop", status="ok",
                                t_start=float(k), t_end=k + 0.5, meta=meta))
        prompt = prompt + sampled + [100 + 10 * k + o]  # the tool result
    return calls


def sample_group(theta, arm: Arm, rng, gid: str, settled: int) -> tuple[list[CallRecord], list[RolloutRecord], int]:
    """(calls, rollouts, sampled tokens) of one group of the arm."""
    per_call = 1 + FILL
    calls: list[CallRecord] = []
    rollouts: list[RolloutRecord] = []
    paths: dict[str, list[int]] = {}

    def fresh(n: int) -> None:
        for _ in range(n):
            rid = f"{gid}:{len(rollouts)}"
            opts, reward = sample_path(theta, rng, [], settled)
            paths[rid] = opts
            calls.extend(rollout_calls(rid, opts, theta, settled))
            rollouts.append(RolloutRecord(rid, "task", "sim", gid, "ok", reward, sample_idx=len(rollouts)))

    fresh(arm.fresh)
    n_calls = settled + 3
    tokens = arm.fresh * n_calls * per_call
    budget = arm.points * arm.width * (n_calls - arm.at) * per_call  # what the branches may sample
    if arm.points:
        cfg = BranchingConfig(points=arm.points, width=arm.width, placement=arm.policy, min_surprisal=0.05)  # type: ignore[arg-type]
        for p in branch_points(rollouts, calls, cfg, seed=int(rng.integers(1 << 30))):
            if (n_calls - p.branch_call) * per_call * arm.width > budget:
                continue  # a point earlier than the budget allows: never over the budget
            for _ in range(arm.width):
                rid = f"{gid}:{len(rollouts)}"
                opts, reward = sample_path(theta, rng, paths[p.parent][:p.branch_call], settled)
                calls.extend(rollout_calls(rid, opts, theta, settled, p.parent, p.branch_call))
                rollouts.append(RolloutRecord(rid, "task", "sim", gid, "ok", reward, sample_idx=len(rollouts),
                                              lineage=Lineage(p.parent, p.branch_call, p.branch_call, p.branch_call)))
                spent = (n_calls - p.branch_call) * per_call
                tokens += spent
                budget -= spent
        extra = max(budget, 0) // (n_calls * per_call)  # no open point: the rest samples fresh rollouts
        fresh(extra)
        tokens += extra * n_calls * per_call
    return calls, rollouts, tokens


def policy_gradient(tree, adv, theta) -> tuple[dict[str, np.ndarray], float]:
    """sum_q (A+_q + A-_q) d log pi(token q) / d theta over the option tokens, and the tree's norm."""
    flat = tree.flat()
    signal = adv.adv_pos.astype(np.float64) + adv.adv_neg
    grad = {c: np.zeros_like(v) for c, v in theta.items()}
    for q in np.flatnonzero(flat.decision & (signal != 0)):
        tok = int(flat.tokens[q])
        for ctx, base in TOKEN_BASE.items():
            if base <= tok < base + OPTIONS[ctx]:
                onehot = np.eye(OPTIONS[ctx])[tok - base]
                grad[ctx] += signal[q] * (onehot - probs(theta, ctx))
    return grad, adv.norm


def run(arm: Arm, seed: int, steps: int, groups: int, lr: float, loss_agg: str, settled: int
        ) -> tuple[float, list[float], float, float]:
    """(J after - J before, V(root) - J of every tree group, sampled tokens per group, loss weight
    per unit of the denominator: sum of the rows' weights / norm, over every group)."""
    rng = np.random.default_rng(seed)
    theta = init_policy()
    j0 = expected_reward(theta)
    bias, tokens, weight, units = [], [], 0.0, 0.0
    for step in range(steps):
        total = {c: np.zeros_like(v) for c, v in theta.items()}
        norm = 0.0
        j_now = expected_reward(theta)
        for g in range(groups):
            calls, rollouts, spent = sample_group(theta, arm, rng, f"s{step}g{g}", settled)
            tokens.append(spent)
            tree = build_tree(calls, rollouts)
            est = grpo if arm.estimator == "grpo" else tree_grpo
            adv = est(tree, loss_agg=loss_agg)
            if arm.estimator == "tree_grpo" and adv.node_value is not None:
                bias.append(float(adv.node_value[0]) - j_now)
            grad, n = policy_gradient(tree, adv, theta)
            weight += float(adv.weight.sum())
            units += n
            norm += n
            for c in total:
                total[c] += grad[c]
        if norm > 0:
            theta = {c: theta[c] + lr * total[c] / norm for c in theta}
    return expected_reward(theta) - j0, bias, float(np.mean(tokens)), weight / max(units, 1e-9)


def summary(xs: list[float]) -> str:
    return f"{statistics.median(xs):+.3f} [{min(xs):+.3f}, {max(xs):+.3f}]"


def arms_for(settled: int) -> list[Arm]:
    """The arms at equal sampled tokens per group: with no settled call a fresh rollout samples 12
    tokens and a branch at call 1 samples 8; with settled calls first a branch at the look samples
    12 of a fresh rollout's 4 (settled + 3)."""
    if settled == 0:
        return [Arm("flat GRPO, 8 fresh", "grpo", 8),
                Arm("tree, 4 fresh + 2 points x 3 (replace)", "tree_grpo", 4, 2, 3),
                Arm("tree, 6 fresh + 1 point x 3 (replace)", "tree_grpo", 6, 1, 3),
                Arm("tree, 4 fresh + 2 x 3, entropy policy", "tree_grpo", 4, 2, 3, "entropy"),
                Arm("tree, 4 fresh + 2 x 3, target policy", "tree_grpo", 4, 2, 3, "target"),
                Arm("flat GRPO, 12 fresh", "grpo", 12),
                Arm("tree, 8 fresh + 2 points x 3 (add)", "tree_grpo", 8, 2, 3),
                Arm("flat GRPO, 4 fresh", "grpo", 4)]
    width = (settled + 3) // 3 * 2  # branches as dear as 4 fresh rollouts
    return [Arm("flat GRPO, 8 fresh", "grpo", 8),
            Arm(f"tree, 4 fresh + 2 points x {width} (replace)", "tree_grpo", 4, 2, width, at=settled),
            Arm(f"tree, 6 fresh + 1 point x {width} (replace)", "tree_grpo", 6, 1, width, at=settled),
            Arm("flat GRPO, 12 fresh", "grpo", 12),
            Arm(f"tree, 8 fresh + 2 points x {width} (add)", "tree_grpo", 8, 2, width, at=settled),
            Arm("flat GRPO, 4 fresh", "grpo", 4)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2.0)
    ap.add_argument("--settled", type=int, default=0,
                    help="confident calls before the look: a branch at the look then costs 3 of settled + 3 calls")
    ap.add_argument("--loss-agg", default="seq_mean_token_mean", choices=["seq_mean_token_mean", "seq_sum"])
    args = ap.parse_args()
    # equal sampled tokens per group: a fresh rollout samples 12 tokens, a branch at call 1 samples 8
    arms = arms_for(args.settled)
    reference = {a.name: "flat GRPO, 12 fresh" for a in arms if "(add)" in a.name}
    gains: dict[str, list[float]] = {}
    print(f"{args.seeds} seeds x {args.steps} steps x {args.groups} groups, loss_agg {args.loss_agg}, "
          f"{args.settled} settled calls first; J before = "
          f"{expected_reward(init_policy()):.3f}; change of J (median [min, max] over seeds)")
    for arm in arms:
        out = [run(arm, seed, args.steps, args.groups, args.lr, args.loss_agg, args.settled)
               for seed in range(args.seeds)]
        gains[arm.name] = [o[0] for o in out]
        ref = reference.get(arm.name, "flat GRPO, 8 fresh")
        line = (f"{arm.name:44s} tokens/group {statistics.fmean(o[2] for o in out):5.1f}  weight/unit "
                f"{statistics.fmean(o[3] for o in out):.2f}  change {summary(gains[arm.name])}")
        if arm.estimator == "tree_grpo" and ref in gains:
            paired = [a - b for a, b in zip(gains[arm.name], gains[ref])]
            wins = sum(d > 0 for d in paired)
            line += f"  vs {ref}: {summary(paired)} ({wins}/{len(paired)} seeds ahead)"
            bias = [b for o in out for b in o[1]]
            line += f"  V(root) - J: mean {statistics.fmean(bias):+.4f} (se {statistics.stdev(bias) / len(bias) ** 0.5:.4f})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
