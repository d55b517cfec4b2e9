"""Types at the proxy's seams (issue 40 item 6): a parameter or field that carries one of the
project's own objects across modules (the run store, the renderer, a conversation and its rendered
prompt, a replay script, the engine, the serving policy) names its type, not `Any`; JSON bodies
may stay dict[str, Any]."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl

PROXY = Path(harnessrl.__file__).resolve().parent / "proxy"
SEAMS = {"store", "renderer", "renderer_or_model_dir", "conversation", "rendered", "replay", "engine", "policy",
         "load_replay", "new_conversation"}


def _any(node: ast.expr | None) -> bool:
    return node is not None and any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(node))


def test_no_seam_of_the_proxy_is_any():
    found = []
    for path in sorted(PROXY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{path.name}:{node.lineno} {a.arg}" for a in node.args.args + node.args.kwonlyargs
                          if a.arg in SEAMS and _any(a.annotation)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in SEAMS \
                    and _any(node.annotation):
                found.append(f"{path.name}:{node.lineno} {node.target.id}")
    assert found == []
