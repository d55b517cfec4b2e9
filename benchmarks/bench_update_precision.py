"""Train = serve under a bf16 engine: an fp32 trainer against bf16 compute over fp32 masters.

One vLLM engine serving bf16 (as `engine.dtype: auto` does on an AMX CPU and on GPUs) and, one
after the other, two trainers from the default model's weights: `model.compute_dtype: float32` (the
trainer scores tokens with its fp32 weights W while the engine serves bf16(W)) and `bfloat16`
(train/precision.py: the trainer computes with bf16(W), the weights the engine serves). Each runs
`--steps` synced updates on fresh engine samples (train/served_drift.py: fixed prompts, `--group`
completions each at T = `--temperature`, GRPO advantages of a scripted reward, AdamW at `--lr`, one
`Trainer.update` and a weight sync per step); sampling seeds repeat, so both see the same first
batch. Printed side by side per step: KL(engine || trainer) on the freshly sampled tokens (the
update's mismatch_kl, what a run warns on above 0.015), the update's wall and CPU seconds, and both
per unique (tree) token.

Run: `nice -n 10 .venv/bin/python benchmarks/bench_update_precision.py --steps 6` (~4 min on the
2-core box). `--json out.json` keeps the rows.
"""

from __future__ import annotations

import argparse
import json
import time

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


def chat_ids(tok, text: str) -> list[int]:
    return tok.encode(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                              tokenize=False), add_special_tokens=False)


def run_setting(engine, model_dir: str, compute: str, prompts, args) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.served_drift import synced_updates
    from harnessrl.train.trainer import Trainer

    torch.manual_seed(args.seed)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    opt = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=0.0)
    trainer = Trainer(policy, opt, PPOSettings(is_mode="tis", is_cap=2.0), token_budget=args.token_budget,
                      compute_dtype=None if compute == "float32" else torch.bfloat16)
    rows = synced_updates(engine, trainer, prompts, args.steps, group=args.group, temperature=args.temperature,
                          max_tokens=args.max_tokens, seed=args.seed, first_version=engine.policy_version + 1)
    return [{"compute": compute, **r.as_dict()} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--group", type=int, default=4, help="completions per prompt")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=3e-5, help="AdamW lr (make demo's)")
    ap.add_argument("--token-budget", type=int, default=2048)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", default="float32,bfloat16")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    model_dir = str(resolve_model(None))
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = [chat_ids(tok, p) for p in PROMPTS[: args.prompts]]
    t0 = time.perf_counter()
    engine = VLLMEngine(model_dir, dtype="bfloat16", max_model_len=1024, max_num_seqs=32, kv_cache_gib=0.5, seed=0)
    print(f"engine: vLLM bf16, up in {time.perf_counter() - t0:.1f} s", flush=True)
    rows: list[dict] = []
    try:
        for compute in args.settings.split(","):
            for r in run_setting(engine, model_dir, compute, prompts, args):
                rows.append(r)
                print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    finally:
        engine.close()
    by = {c: [r for r in rows if r["compute"] == c] for c in args.settings.split(",")}
    names = list(by)
    print("\nKL(engine || trainer) on fresh samples after k synced updates; update wall / CPU per unique token")
    print("| step | " + " | ".join(f"{c} KL" for c in names) + " | "
          + " | ".join(f"{c} tokens (unique)" for c in names) + " | "
          + " | ".join(f"{c} update wall s (ms/tok) | {c} CPU s (ms/tok)" for c in names) + " |")
    print("|---" * (1 + 4 * len(names)) + "|")
    for k in range(args.steps + 1):
        cells = [f"{by[c][k]['mismatch_kl']:.4f}" for c in names]
        cells += [f"{by[c][k]['sampled_tokens']} ({by[c][k]['unique_tokens']})" for c in names]
        for c in names:
            r = by[c][k]
            u = r["unique_tokens"]
            cells.append(f"{r['update_wall_s']:.2f} ({1e3 * r['update_wall_s'] / u:.2f}) | "
                         f"{r['update_cpu_s']:.2f} ({1e3 * r['update_cpu_s'] / u:.2f})")
        print(f"| {k} | " + " | ".join(cells) + " |")
    tot = {c: (sum(r["update_wall_s"] for r in by[c]), sum(r["update_cpu_s"] for r in by[c]),
               sum(r["unique_tokens"] for r in by[c])) for c in names}
    for c in names:
        w, cpu, u = tot[c]
        print(f"{c}: mean KL {sum(r['mismatch_kl'] for r in by[c]) / len(by[c]):.4f}, max {max(r['mismatch_kl'] for r in by[c]):.4f}; "
              f"update {w:.1f} s wall, {cpu:.1f} s CPU over {u} unique tokens "
              f"({1e3 * w / u:.2f} / {1e3 * cpu / u:.2f} ms per token)")
    if len(names) == 2:
        (a, b) = names
        print(f"{a} / {b} per unique token: wall {(tot[a][0] / tot[a][2]) / (tot[b][0] / tot[b][2]):.2f}x, "
              f"CPU {(tot[a][1] / tot[a][2]) / (tot[b][1] / tot[b][2]):.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
