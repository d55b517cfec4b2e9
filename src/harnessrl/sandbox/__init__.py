"""Sandboxes for rollouts: `make_sandbox(SandboxConfig(...), workspace_src=..., proxy=...)`.

Backends: `bwrap` (isolated; default), `local` (no isolation). The contract is documented in
`harnessrl.sandbox.base`; `make_sandbox` (sandbox/factory.py) picks the backend.
"""

from harnessrl.sandbox.base import (
    ProcessResult,
    ProxyEndpoint,
    Sandbox,
    SandboxClosed,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
    WorkspaceLost,
)
from harnessrl.sandbox.factory import make_sandbox

__all__ = [
    "ProcessResult",
    "ProxyEndpoint",
    "Sandbox",
    "SandboxClosed",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailable",
    "WorkspaceLost",
    "make_sandbox",
]
