"""`make_sandbox`: the sandbox backend named by ``cfg.type``, imported lazily."""

from __future__ import annotations

import sys
from pathlib import Path

from harnessrl.sandbox.base import ProxyEndpoint, Sandbox, SandboxConfig, SandboxError, SandboxUnavailable


def make_sandbox(
    cfg: SandboxConfig | None = None,
    *,
    workspace_src: Path | str | None = None,
    proxy: ProxyEndpoint | None = None,
) -> Sandbox:
    """Create and start a sandbox of ``cfg.type``; backends are imported lazily."""
    cfg = cfg or SandboxConfig()
    src = Path(workspace_src) if workspace_src is not None else None
    if src is not None and not src.is_dir():
        raise SandboxError(f"workspace_src {src} is not a directory")
    if cfg.type == "local":
        from harnessrl.sandbox.local import LocalSandbox

        return LocalSandbox.create(cfg, workspace_src=src, proxy=proxy)
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable("the bwrap backend needs Linux; use type='local' (no isolation)")
    from harnessrl.sandbox.bwrap import BwrapSandbox

    return BwrapSandbox.create(cfg, workspace_src=src, proxy=proxy)
