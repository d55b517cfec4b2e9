"""Sandboxes for rollouts: `make_sandbox(SandboxConfig(...), workspace_src=..., proxy=...)`.

Backends: `bwrap` (isolated; default), `local` (no isolation), `docker` (not available here).
The interface is documented in `harnessrl.sandbox.base`.
"""

from harnessrl.sandbox.base import (
    ProcessResult,
    ProxyEndpoint,
    Sandbox,
    SandboxClosed,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
    make_sandbox,
)

__all__ = [
    "ProcessResult",
    "ProxyEndpoint",
    "Sandbox",
    "SandboxClosed",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailable",
    "make_sandbox",
]
