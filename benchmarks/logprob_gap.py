"""Why the trainer/engine logprob gap grows with training: a decomposition, step by step.

One vLLM engine (`--engine-dtype`, bf16 as vLLM serves by default, or float32) and an fp32 HF
trainer start from the default model. Each step: the engine samples completions (T = 1, top_p = 1,
as in rollouts); the trainer scores the same tokens; one Adam step (lr as `make demo`) raises the
logprob of the sampled completions (self-distillation: like RL it sharpens the policy and lowers its
entropy); the new weights are synced into the engine (the real `update_weights`). Per step, on the
sampled tokens:

- gap_engine     mean |logp_trainer - logp_engine| (what the trainer logs as abs_logp_gap)
- kl_engine      KL(engine || trainer), k3 estimate on engine samples (what the run warns on)
- gap_weights    mean |logp(W) - logp(bf16(W))|, both fp32 compute: the weight-rounding part alone
- gap_compute    mean |logp(bf16(W)) - logp_engine|: what is left once the weights are equal
- gap_stale      mean |logp(bf16(W_prev)) - logp_engine|: larger than gap_compute = no stale weights
- gap_bf16_fwd   mean |logp_hf_bf16(W) - logp_engine|: an HF bf16 forward as the old-logprob source
- changed        fraction of weight elements W_k != W_0, and bf16(W_k) != bf16(W_0) (what the engine sees)
- gap_low_ent / gap_high_ent: gap_engine on tokens with trainer entropy < / >= 0.3 nats
- gen_s, gen_cpu_s  wall seconds of the step's sampling, and CPU seconds the engine processes spent
                 on it (the steadier figure on a shared machine): the cost of the engine dtype

Run: `nice -n 15 .venv/bin/python benchmarks/logprob_gap.py --steps 8 --engine-dtype bfloat16`
(one vLLM engine at a time; ~1 min a step on the shared 2-core machine). `--json out.json` keeps
the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import time

import torch

PROMPTS = [
    "Write a shell command that counts the lines of every .py file in a directory.",
    "Create a file named notes.txt containing the word 'banana'.",
    "Explain in two sentences what a prefix tree is.",
    "Write a Python function that reverses the words of a sentence.",
    "List three ways to find a file by name on Linux.",
    "Fix the bug: `for i in range(10) print(i)`.",
    "What does `grep -rn TODO .` print?",
    "Write a haiku about unit tests.",
]


def logprobs(model, seqs: list[tuple[list[int], list[int]]]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(per-sequence logprobs of the completion tokens, entropies) under ``model``, T = 1."""
    out_lp, out_ent = [], []
    with torch.no_grad():
        for prompt, completion in seqs:
            ids = torch.tensor([prompt + completion])
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
            lp = torch.log_softmax(logits, -1)
            out_lp.append(lp.gather(-1, torch.tensor(completion)[:, None])[:, 0])
            out_ent.append(-(lp.exp() * lp).sum(-1))
    return out_lp, out_ent


def bf16_copy(model, dtype=torch.float32):
    """A copy whose weights are rounded to bf16 (kept in ``dtype`` for the compute)."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))
    return m.to(dtype)


def changed_fraction(model, base: dict[str, torch.Tensor]) -> tuple[float, float]:
    n = fp = bf = 0
    for name, p in model.state_dict().items():
        b = base[name]
        n += p.numel()
        fp += int((p != b).sum())
        bf += int((p.to(torch.bfloat16) != b.to(torch.bfloat16)).sum())
    return fp / n, bf / n


def engine_cpu_s() -> float:
    """CPU seconds of this process's children (vLLM's engine core and workers)."""
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def mean_abs(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    d = torch.cat([x - y for x, y in zip(a, b)])
    return float(d.abs().mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--engine-dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--samples", type=int, default=4, help="completions per prompt")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-5, help="Adam lr (make demo's)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.engine import EngineConfig, make_engine, resolve_model
    from harnessrl.engine.base import SamplingParams

    torch.manual_seed(0)
    model_dir = str(resolve_model(None))
    tok = AutoTokenizer.from_pretrained(model_dir)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    base = {k: v.clone() for k, v in policy.state_dict().items()}
    opt = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=0.0)
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                  tokenize=False), add_special_tokens=False) for p in PROMPTS]
    engine = make_engine(EngineConfig(type="vllm", model=model_dir, dtype=args.engine_dtype, max_model_len=1024,
                                      max_batch=32, kv_cache_gib=0.5, seed=0))
    rows = []
    prev_rounded = None
    try:
        for step in range(args.steps + 1):
            params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)

            async def sample():
                jobs = [engine.generate(list(p), params) for p in prompts for _ in range(args.samples)]
                return await asyncio.gather(*jobs)

            t0, c0 = time.perf_counter(), engine_cpu_s()
            gens = asyncio.run(sample())
            gen_s, gen_cpu_s = time.perf_counter() - t0, engine_cpu_s() - c0
            seqs = [(list(p), g.token_ids) for p, g in zip([p for p in prompts for _ in range(args.samples)], gens)
                    if g.token_ids]
            eng = [torch.tensor(g.logprobs) for g in gens if g.token_ids]
            policy.eval()
            trainer_lp, ent = logprobs(policy, seqs)
            rounded = bf16_copy(policy)
            rounded_lp, _ = logprobs(rounded, seqs)
            hf_bf16_lp, _ = logprobs(bf16_copy(policy, torch.bfloat16), seqs)
            stale = mean_abs(logprobs(prev_rounded, seqs)[0], eng) if prev_rounded is not None else float("nan")
            d = torch.cat([t - e for t, e in zip(trainer_lp, eng)])
            ents = torch.cat(ent)
            low = ents < 0.3
            fp_changed, bf_changed = changed_fraction(policy, base)
            row = {
                "step": step, "tokens": int(d.numel()), "entropy": float(ents.mean()),
                "gap_engine": float(d.abs().mean()), "kl_engine": float((d.exp() - d - 1).mean()),
                "gap_weights": mean_abs(trainer_lp, rounded_lp), "gap_compute": mean_abs(rounded_lp, eng),
                "gap_stale": stale, "gap_bf16_fwd": mean_abs(hf_bf16_lp, eng),
                "gap_low_ent": float(d[low].abs().mean()) if low.any() else float("nan"),
                "gap_high_ent": float(d[~low].abs().mean()) if (~low).any() else float("nan"),
                "low_ent_frac": float(low.float().mean()), "changed_fp32": fp_changed, "changed_bf16": bf_changed,
                "gen_s": gen_s, "gen_cpu_s": gen_cpu_s, "gen_tokens": sum(len(c) for _, c in seqs),
            }
            rows.append(row)
            print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
            if step == args.steps:
                break
            prev_rounded = rounded
            # one update: raise the logprob of the sampled completions (sharpens, like RL)
            policy.train()
            opt.zero_grad(set_to_none=True)
            total = sum(len(c) for _, c in seqs)
            for prompt, completion in seqs:
                ids = torch.tensor([prompt + completion])
                lp = torch.log_softmax(policy(ids).logits[0, len(prompt) - 1 : -1], -1)
                (-(lp.gather(-1, torch.tensor(completion)[:, None]).sum()) / total).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            engine.update_weights([(k, v.detach()) for k, v in policy.state_dict().items()], step + 1)
    finally:
        engine.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"engine_dtype": args.engine_dtype, "lr": args.lr, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
