"""`docker` backend: not implemented.

No Docker engine runs on the machines harnessrl was built on (the client exists, the daemon does
not), so a docker backend could not be tested here and is not faked. ``create`` raises
``SandboxUnavailable`` saying so; use ``type='bwrap'`` (default on Linux) or ``'local'``.
"""

from __future__ import annotations

from pathlib import Path

from harnessrl.sandbox.base import ProxyEndpoint, SandboxConfig, SandboxUnavailable


class DockerSandbox:
    @classmethod
    def create(cls, cfg: SandboxConfig, *, workspace_src: Path | None, proxy: ProxyEndpoint | None):
        raise SandboxUnavailable(
            "sandbox type 'docker' is not implemented: no Docker engine runs where harnessrl was "
            "built, so it could not be tested. Use type='bwrap' (isolated, Linux) or 'local'."
        )
