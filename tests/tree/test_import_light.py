"""tree/ and algo/ import (and run) with torch, vllm and transformers blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    HEAVY = ("torch", "vllm", "transformers")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                raise ImportError(f"blocked heavy import: {name}")
            return None

    for mod in list(sys.modules):
        if mod.split(".")[0] in HEAVY:
            del sys.modules[mod]
    sys.meta_path.insert(0, Block())
""")

USE = textwrap.dedent("""
    import numpy as np
    import harnessrl.tree, harnessrl.algo, harnessrl.app.tree, harnessrl.algo.estimator, harnessrl.algo.trained
    from harnessrl.tree import build_tree
    from tests.support.synthetic import claude_code_group
    from harnessrl.algo import grpo, tree_grpo, gae
    tree = build_tree(*claude_code_group(3, 200, 3))
    grpo(tree); tree_grpo(tree); gae(tree, np.zeros(len(tree.flat())))
    loaded = [m for m in sys.modules if m.split(".")[0] in HEAVY]
    assert not loaded, loaded
    print("light ok")
""")


def test_tree_and_algo_import_without_heavy_deps():
    out = subprocess.run([sys.executable, "-c", BLOCKER + USE], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "light ok" in out.stdout


def test_blocker_really_blocks():
    out = subprocess.run([sys.executable, "-c", BLOCKER + "import torch"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode != 0 and "blocked heavy import" in out.stderr
