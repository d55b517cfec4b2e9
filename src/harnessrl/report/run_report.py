"""End-of-run PNG plots (matplotlib, Agg) and a short markdown report from the step records.

report.md holds: held-out pass@1 before/after (and per eval set, with the held-out change table),
the run's totals, "Informative groups" (report/sampling.py), "Harness dynamics"
(report/dynamics.py), the cost budget, the tree page link, the plots and the config; report.html is
the same, self-contained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.report.dynamics import dynamics_lines, plot_dynamics
from harnessrl.report.heldout import change_text
from harnessrl.report.record import StepRecord, step_records
from harnessrl.report.sampling import sampling_lines

PANELS = (  # (file stem, title, metric keys; "x/*" = every sub-key of x)
    ("reward", "mean reward per harness (train rollouts)", ["reward/*"]),
    ("pass_rate", "pass rate per harness (train rollouts)", ["pass_rate/*"]),
    ("eval", "held-out pass@1 per harness", ["eval/*"]),
    ("eval_sets", "pass@1 per eval set / harness", ["eval_sets/*/*/pass@1"]),
    ("loss", "policy loss", ["loss", "value_loss"]),
    ("kl_entropy", "KL to reference / entropy", ["kl", "entropy"]),
    ("clip_is", "clip fraction / mean IS weight / TIS capped / MIS kept", ["clip_frac", "is_weight", "is_capped",
                                                                        "is_kept"]),
    ("logp_gap", "trainer/engine mismatch: mean |dlogp|, KL(engine||trainer)", ["abs_logp_gap", "mismatch_kl"]),
    ("grad_cosine", "cosine of the per-harness policy gradients (below 0: negative transfer)", ["grad_cosine/*"]),
    ("grad_norm", "policy gradient norm before clipping: total / per harness", ["grad_norm", "harness_grad_norm/*"]),
    ("tokens", "tokens: trained (decisions) / computed / unique tree / per-call", [
        "tokens_trained", "tokens_computed", "unique_tree_tokens", "per_call_tokens", "per_rollout_tokens"]),
    ("time", "step time split (s)", ["time/*"]),
    ("informative", "informative share (trained, sampled), mean picked p, mixed branch points",
     ["informative_groups", "sampled_informative", "pick_pass_rate", "branch_mixed"]),
    ("wasted_rollouts", "rollouts sampled / without contrast / extra; groups dropped per reason, extra, top-up "
     "and rescue groups", ["rollouts_sampled", "wasted_rollouts", "extra_rollouts", "dropped_groups/*",
                           "extra_groups", "topup_groups", "rescue_groups"]),
)
Y_LIMITS = {"grad_cosine": (-1.05, 1.05)}  # panels with a fixed y range (file stem -> (low, high))


def _series(records: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = {}
    for rec in records:
        step = rec["step"]
        if key.endswith("/*/*/pass@1"):  # eval_sets/<set>/<harness>/pass@1
            for set_name, per_harness in (rec.get(key.split("/")[0]) or {}).items():
                for harness, agg in per_harness.items():
                    if isinstance(agg, dict) and isinstance(agg.get("pass@1"), (int, float)):
                        xs, ys = out.setdefault(f"{set_name}/{harness}", ([], []))
                        xs.append(step)
                        ys.append(float(agg["pass@1"]))
        elif key.endswith("/*"):
            sub = rec.get(key[:-2])
            items = sub.items() if isinstance(sub, dict) else ()
            for name, v in items:
                if isinstance(v, (int, float)):
                    xs, ys = out.setdefault(f"{key[:-2]}/{name}", ([], []))
                    xs.append(step)
                    ys.append(float(v))
        elif isinstance(rec.get(key), (int, float)):
            xs, ys = out.setdefault(key, ([], []))
            xs.append(step)
            ys.append(float(rec[key]))
    return out


def panel_title(stem: str, title: str, series: dict[str, Any]) -> str:
    """A panel's title naming only what it draws: a run without a reference model records no KL
    to it (UpdateStats.kl None), so its kl_entropy panel is the entropy alone and says why."""
    if stem == "kl_entropy" and "kl" not in series:
        return "policy entropy (no reference model: no KL to plot)"
    return title


def write_plots(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per panel that has data, and the harness dynamics plot (report/dynamics.py); returns
    the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, title, keys in PANELS:
        series = {}
        for k in keys:
            series.update(_series(records, k))
        if not series:
            continue
        title = panel_title(stem, title, series)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, (xs, ys) in sorted(series.items()):
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
        if stem in Y_LIMITS:
            ax.set_ylim(*Y_LIMITS[stem])
            ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    dynamics = plot_dynamics(records, out_dir)
    return written + ([dynamics] if dynamics is not None else [])


def eval_table(records: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """(first, last) held-out pass@1 per harness."""
    evals = [rec.eval.pass_at_1 for _, rec in step_records(records) if rec.eval and rec.eval.pass_at_1]
    if not evals:
        return {}, {}
    return evals[0], evals[-1]


def eval_sets_lines(records: list[dict[str, Any]]) -> list[str]:
    """Markdown: per eval set and harness, pass@1 before and after with n and the 95% interval."""
    evals = [(step, rec.eval.sets) for step, rec in step_records(records) if rec.eval and rec.eval.sets]
    if not evals:
        return []
    (s0, first), (s1, last) = evals[0], evals[-1]
    lines = ["## Eval sets: pass@1 per harness (95% CI: bootstrap over tasks)", "",
             f"Before = step {s0}, after = step {s1}. test = held-out tasks of the trained families, paraphrase = "
             "the same jobs in new wording with new names and values, unseen = families never trained on.", "",
             "| set | harness | before | after | change | n |", "|---|---|---|---|---|---|"]
    for name in list(dict.fromkeys([*first, *last])):
        for h in sorted(set(first.get(name, {})) | set(last.get(name, {}))):
            b, a = first.get(name, {}).get(h), last.get(name, {}).get(h)
            delta = (f"{100 * (a['pass@1'] - b['pass@1']):+.1f} pts" if a and b else "-")
            n = a or b or {}
            lines.append(f"| {name} | {h} | {_agg(b)} | {_agg(a)} | {delta} | "
                         f"{n.get('n_tasks', '-')} tasks, {n.get('n_rollouts', '-')} rollouts |")
    return lines + [""]


def grad_cosine_means(steps: list[StepRecord]) -> dict[str, float]:
    """Mean of each harness pair's gradient cosine over the step records that have one."""
    per_pair: dict[str, list[float]] = {}
    for rec in steps:
        for pair, v in ((rec.update.grad_cosine if rec.update else None) or {}).items():
            per_pair.setdefault(pair, []).append(float(v))
    return {pair: sum(vs) / len(vs) for pair, vs in sorted(per_pair.items())}


def _agg(a: dict[str, Any] | None) -> str:
    if not a:
        return "-"
    ci = a.get("pass@1_ci95")
    return f"{_pct(a['pass@1'])}" + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "") + \
        f" ({a.get('passed', '-')}/{a.get('n_rollouts', '-')})"


def write_report(records: list[dict[str, Any]], run_dir: Path, plots: list[Path], title: str,
                 config_yaml: str, tree_page: Path | None = None, changes: list[str] | None = None,
                 extra: list[str] | None = None, paired: dict[str, Any] | None = None) -> Path:
    """report.md (before/after held-out pass@1 per harness, totals, plots, config) and the same as a
    self-contained report.html (plots inlined, tree view linked) to open in a browser; returns the .md.
    `extra`: markdown sections after the run's totals (e.g. the cost budget, profile/run_profile.py);
    `paired`: harness -> its paired change on the headline set (heldout.headline_cells), whose
    95% interval the headline table prints next to the change."""
    before, after = eval_table(records)
    steps = step_records(records)
    train_steps = [rec for step, rec in steps if step > 0]
    lines = [f"# {title}", ""]
    rows: list[list[str]] = []
    if before:
        for h in sorted(set(before) | set(after)):
            b, a = before.get(h), after.get(h)
            delta = f"{100 * (a - b):+.1f} pts" if a is not None and b is not None else "-"
            cell = (paired or {}).get(h)
            rows.append([h, _pct(b), _pct(a), change_text(cell) if cell is not None else delta])
        lines += ["## Held-out pass@1 per harness", "",
                  "| harness | before | after | change [95% CI, paired over tasks] |" if paired else
                  "| harness | before | after | change |", "|---|---|---|---|"]
        lines += [f"| {' | '.join(r)} |" for r in rows] + [""]
    sets = (changes or []) + eval_sets_lines(records)  # changes: heldout.changes_markdown
    lines += sets
    facts: list[str] = []
    if train_steps:
        tot = {k: sum(float(rec.time.get(k, 0.0)) for _, rec in steps)
               for k in ("rollout", "branch", "tree", "train", "sync", "eval", "checkpoint")}
        if not tot["branch"]:
            del tot["branch"]  # a run without loop.branching
        unique = sum(rec.update.unique_tree_tokens for rec in train_steps if rec.update)
        per_call = sum(rec.trees.per_call_tokens for rec in train_steps if rec.trees)
        gaps = [rec.update.mismatch_kl for rec in train_steps if rec.update and rec.update.mismatch_kl is not None]
        facts = [f"steps: {len(train_steps)}", "time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in tot.items()),
                 f"unique tree tokens {unique:.0f} vs per-call tokens {per_call:.0f}"
                 + (f" ({per_call / unique:.1f}x)" if unique else "")]
        cos = grad_cosine_means(train_steps)
        if cos:
            n_cos = sum(1 for rec in train_steps if rec.update and rec.update.grad_cosine)
            facts.append(f"per-harness policy gradients, mean cosine over the {n_cos} of {len(train_steps)} steps "
                         "that trained two harnesses or more: "
                         + ", ".join(f"{pair} {v:+.3f}" for pair, v in cos.items()))
        if gaps:
            facts.append(f"trainer/engine mismatch KL(engine||trainer): first {kl_text(gaps[0])}, last "
                         f"{kl_text(gaps[-1])}, max {kl_text(max(gaps))}")
        lines += ["## Run", ""] + [f"- {f}" for f in facts] + [""]
    sections = sampling_lines(records, plots, run_dir) + dynamics_lines(records, _plot(plots, "harness_dynamics"),
                                                                        run_dir)
    lines += sections + (extra or [])
    if tree_page is not None:
        lines += ["## Trees", "", f"[prefix trees of the last step, with rewards and advantages]"
                                  f"({tree_page.relative_to(run_dir)})", ""]
    shown = {line[2:line.index("]")] for line in sections if line.startswith("![")}  # the sections' plots
    rest = [p for p in plots if p.stem not in shown]
    if rest:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.relative_to(run_dir)})" for p in rest] + [""]
    lines += ["## Config", "", "```yaml", config_yaml.rstrip(), "```", ""]
    path = Path(run_dir) / "report.md"
    path.write_text("\n".join(lines))
    _write_html(Path(run_dir) / "report.html", title, rows, facts, plots, tree_page, run_dir, config_yaml, sets,
                sections + (extra or []))
    return path


def _plot(plots: list[Path], stem: str) -> Path | None:
    return next((p for p in plots if p.stem == stem), None)


def _write_html(path: Path, title: str, rows: list[list[str]], facts: list[str], plots: list[Path],
                tree_page: Path | None, run_dir: Path, config_yaml: str, sets: list[str],
                extra: list[str]) -> None:
    import base64
    import html

    e = html.escape
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
           "body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px;color:#222}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 10px}"
           ".plots{display:flex;flex-wrap:wrap;gap:8px}.plots img{width:600px;border:1px solid #eee}"
           "pre{background:#f6f6f6;padding:1em;font-size:12px}</style></head><body>", f"<h1>{e(title)}</h1>"]
    if rows:
        change = "change [95% CI, paired over tasks]" if any("[" in r[3] for r in rows) else "change"
        out.append("<h2>Held-out pass@1 per harness</h2><table><tr><th>harness</th><th>before</th><th>after</th>"
                   f"<th>{change}</th></tr>" + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                                                    for r in rows) + "</table>")
    if sets:  # the markdown table of eval_sets_lines, as HTML
        table = [line for line in sets if line.startswith("|") and not line.startswith("|---")]
        out.append(f"<h2>{e(sets[0].lstrip('# '))}</h2><p>{e(sets[2])}</p><table>")
        for i, line in enumerate(table):
            cells = [c.strip() for c in line.strip("|").split("|")]
            tag = "th" if i == 0 else "td"
            out.append("<tr>" + "".join(f"<{tag}>{e(c)}</{tag}>" for c in cells) + "</tr>")
        out.append("</table>")
    if facts:
        out.append("<h2>Run</h2><ul>" + "".join(f"<li>{e(f)}</li>" for f in facts) + "</ul>")
    out.append(_markdown_html(extra))
    if tree_page is not None:
        rel = tree_page.relative_to(run_dir)
        out.append(f"<h2>Trees</h2><p><a id='trees' href='{e(str(rel))}'>prefix trees of the last step</a> "
                   "(tokens coloured by advantage, rollout rewards)</p>")
    if plots:
        out.append("<h2>Plots</h2><div class='plots'>")
        for p in plots:
            data = base64.b64encode(Path(p).read_bytes()).decode()
            out.append(f"<img alt='{e(p.stem)}' title='{e(p.stem)}' src='data:image/png;base64,{data}'>")
        out.append("</div>")
    out.append(f"<h2>Config</h2><pre>{e(config_yaml)}</pre></body></html>")
    path.write_text("".join(out), encoding="utf-8")


def _markdown_html(lines: list[str]) -> str:
    """HTML of simple markdown: '## ' headings, '- ' items, '|' tables, other lines as paragraphs;
    image lines are left out (report.html inlines every plot)."""
    import html

    out, table = [], False
    for line in lines:
        is_row = line.startswith("|")
        if table and not is_row:
            out.append("</table>")
            table = False
        if is_row and not line.startswith("|---"):
            cells = [html.escape(c.strip()) for c in line.strip().strip("|").split("|")]
            tag = "td" if table else "th"
            out.append(("" if table else "<table>") + "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            table = True
        elif line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("- "):
            out.append(f"<p>&bull; {html.escape(line[2:])}</p>")
        elif line.strip() and not is_row and not line.startswith("!["):
            out.append(f"<p>{html.escape(line)}</p>")
    return "".join(out) + ("</table>" if table else "")


def kl_text(x: float | None) -> str:
    """A k3 KL estimate to 4 decimals: every term of it is >= 0, so a sum below 0 is float rounding
    (exp(d) - d - 1 for d ~ 1e-4 in float32) and prints as 0.0000, never "-0.0000"; "-" when not
    computed."""
    if x is None:
        return "-"
    return f"{x if x > 0 else 0.0:.4f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
