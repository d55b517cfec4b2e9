"""Harbor (Terminal-Bench 2) task directories, run on their prebuilt image.

    my-task/
      task.toml         [verifier] timeout_sec, [agent] timeout_sec, [environment] docker_image, [metadata]
      instruction.md    what the agent is asked
      environment/      the image: image.tar (`docker save` or an OCI archive), image/ (an OCI
                        layout) or rootfs/ (a root directory); or a Dockerfile (refused, see below)
      tests/test.sh     the test script: writes the reward to /logs/verifier/reward.txt (a number)
                        or /logs/verifier/reward.json (an object with "reward")
      solution/solve.sh optional reference solution (Harbor's oracle agent)

How a Harbor trial maps onto a harnessrl task:
- the image is ``Task.image`` (tasks/images.py): ``[environment] docker_image`` when it names a
  path (relative to the task directory) skopeo reads locally, else the image in ``environment/``.
  A registry name cannot be pulled (a sandbox has no network) and a Dockerfile cannot be built
  (no Docker engine): both are a TaskError that says how to supply the image;
- the workspace is the image's WorkingDir (``/app`` in Terminal-Bench images, also the default),
  its starting files the image's own;
- the verifier runs on the same image in its own fresh sandbox with ``tests/`` read-only at
  ``/tests`` (a link to ``<workspace>/.harbor-tests``), ``/logs/verifier`` empty, and
  ``bash /tests/test.sh`` in the workspace; its output goes to stderr, and the reward file is the
  reward (a missing or malformed one is a verifier_error);
- ``solution/solve.sh`` is the reference solution, run in the workspace (``harnessrl tasks
  validate``: the untouched workspace must score below 1, the reference solution 1).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib  # type: ignore[no-redef, unused-ignore]

from harnessrl.tasks.files import TaskDataReader, TaskLimits
from harnessrl.tasks.model import Task, TaskError, TaskDataError, Verifier, check_mount_dir

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
TESTS_DEST = ".harbor-tests"
DEFAULT_WORKDIR = "/app"
# What environment/ may hold instead of a Dockerfile, in the order looked for.
ENV_IMAGES = ("image.tar", "image.oci.tar", "image", "rootfs")
# The verifier: Harbor's /tests and /logs/verifier on the verifier's own fresh root, test.sh's
# output on stderr (stdout is the reward channel), then the reward file as a JSON object.
VERIFY_SH = f"""T="$HARNESSRL_WORKSPACE/{TESTS_DEST}"
rm -rf /tests /logs/verifier 2>/dev/null
ln -s "$T" /tests && mkdir -p /logs/verifier /logs/agent || {{ echo "cannot create /tests and /logs/verifier on the image's root" >&2; exit 1; }}
cd "$HARNESSRL_WORKSPACE" && bash /tests/test.sh </dev/null >&2
code=$?
if [ -f /logs/verifier/reward.txt ]; then printf '{{"reward": %s}}\\n' "$(tr -d ' \\t\\r\\n' < /logs/verifier/reward.txt)"
elif [ -f /logs/verifier/reward.json ]; then tr -d '\\n' < /logs/verifier/reward.json; echo
else echo "tests/test.sh (exit $code) wrote neither /logs/verifier/reward.txt nor reward.json" >&2; exit 1; fi
"""


def is_harbor_dir(path: Path) -> bool:
    """A Harbor task: task.toml beside instruction.md (a native task has no instruction.md)."""
    return path.is_dir() and os.path.lexists(path / TASK_TOML) and os.path.lexists(path / INSTRUCTION)


def _spec(path: Path, text: str) -> dict[str, Any]:
    try:
        spec = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise TaskError(f"{path / TASK_TOML}: cannot parse TOML ({type(e).__name__}: {str(e)[:200]})") from None
    for key in ("task", "metadata", "verifier", "agent", "environment", "solution"):
        if not isinstance(spec.get(key, {}), dict):
            raise TaskError(f"{path / TASK_TOML}: [{key}] must be a table")
    return spec


def _seconds(path: Path, table: dict[str, Any], section: str, default: float) -> float:
    value = table.get("timeout_sec", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86400 * 7:
        raise TaskError(f"{path / TASK_TOML}: [{section}] timeout_sec must be a positive number, got {value!r}")
    return float(value)


def supply_hint(path: Path, name: str) -> str:
    return (f"build and save the image where a Docker engine runs, then put it beside the task: "
            f"`docker build -t {name} {path / 'environment'} && docker save {name} -o "
            f"{path / 'environment' / 'image.tar'}` (or `skopeo copy docker-daemon:{name}:latest "
            f"oci-archive:{path / 'environment' / 'image.tar'}`), or set [environment] docker_image in "
            f"{path / TASK_TOML} to the path of an OCI layout, an image tarball or a root directory")


def _local_ref(path: Path, ref: str) -> str:
    """``ref`` (``PATH`` or ``LAYOUT:TAG``, relative to the task directory) as an absolute local
    image path, or "" when nothing is there."""
    def where(text: str) -> Path:
        return Path(text) if text.startswith("/") else path / text

    if where(ref).exists():
        return str(where(ref).resolve())
    head, sep, tag = ref.rpartition(":")
    if sep and head and "/" not in tag and where(head).is_dir():
        return f"{where(head).resolve()}:{tag}"
    return ""


def harbor_image(path: Path, env: dict[str, Any]) -> str:
    """The task's image as a local path (tasks/images.py); TaskError saying how to supply one."""
    name = path.name.lower()
    ref = env.get("docker_image")
    if ref is not None:
        if not isinstance(ref, str) or not ref:
            raise TaskError(f"{path / TASK_TOML}: [environment] docker_image must be a non-empty string")
        local = _local_ref(path, ref)
        if local:
            return local
        raise TaskError(f"task {path.name}: [environment] docker_image {ref!r} is not a local image (a "
                        f"sandbox cannot pull from a registry); save it where the registry is reachable "
                        f"(`skopeo copy docker://{ref} oci-archive:{path / 'environment' / 'image.tar'}`) and "
                        f"drop docker_image, or set it to the saved file's path")
    for candidate in ENV_IMAGES:
        found = path / "environment" / candidate
        if found.exists() and not found.is_symlink():
            return str(found.resolve())
    if (path / "environment" / "Dockerfile").exists() or (path / "environment" / "docker-compose.yaml").exists():
        raise TaskError(f"task {path.name}: its environment is a Dockerfile (environment/), which cannot be "
                        f"built here (no Docker engine); {supply_hint(path, name)}")
    raise TaskError(f"task {path.name}: no environment: {supply_hint(path, name)}")


def _workdir(image: str) -> str:
    """The image's WorkingDir where the sandbox accepts it as a workspace, else /app. An image that
    cannot be read here loads anyway: its rollouts end as a sandbox_error naming it."""
    from harnessrl.tasks.images import ImageError, image_kind, inspect_image

    try:
        if image_kind(image) == "rootfs":
            return DEFAULT_WORKDIR
        workdir = str(inspect_image(image)[1].get("WorkingDir") or DEFAULT_WORKDIR)
        return check_mount_dir(workdir, "image")
    except (ImageError, TaskError):
        return DEFAULT_WORKDIR


def load_harbor(path: Path, limits: TaskLimits | None = None) -> Task:
    """One Harbor task directory; TaskError names the missing or malformed part, or says how to
    supply an image the task only describes (a Dockerfile, a registry name)."""
    with TaskDataReader(path, limits) as reader:
        spec = _spec(path, reader.read_text(TASK_TOML))
        instruction = reader.read_text(INSTRUCTION).strip()
        if not reader.exists("tests/test.sh"):
            raise TaskError(f"{path}: needs tests/test.sh (Harbor's test script)")
        tests = reader.read_tree("tests")
        solve = reader.read_text("solution/solve.sh") if reader.exists("solution/solve.sh") else ""
    if not instruction:
        raise TaskError(f"{path / INSTRUCTION}: the instruction is empty")
    image = harbor_image(path, spec.get("environment") or {})
    meta = dict(spec.get("metadata") or {})
    task_table = spec.get("task") or {}
    meta.update({"format": "harbor", "image": image,
                 "agent_timeout_s": _seconds(path, spec.get("agent") or {}, "agent", 600.0)})
    if task_table.get("name"):
        meta["harbor_name"] = str(task_table["name"])
    verifier = Verifier(kind="checks", command=VERIFY_SH, files=tests, dest=TESTS_DEST,
                        timeout_s=_seconds(path, spec.get("verifier") or {}, "verifier", 600.0))
    try:
        return Task(id=path.name, instruction=instruction, files={}, verifier=verifier,
                    category=str(meta.get("category") or "harbor"), split="test", family=path.name,
                    input_mount_dir=_workdir(image), reference_solution=(solve,) if solve.strip() else (),
                    image=image, metadata=meta, source=str(path))
    except TaskDataError:
        raise
    except (TypeError, ValueError) as e:
        if isinstance(e, TaskError):
            raise
        raise TaskError(f"{path / TASK_TOML}: a field has the wrong type ({e})") from None


def load_harbor_tasks(root: Path, limits: TaskLimits | None = None) -> list[Task]:
    """A Harbor task directory, or a dataset directory of them (sorted by name)."""
    if is_harbor_dir(root):
        return [load_harbor(root, limits)]
    dirs = sorted(p for p in root.iterdir() if not p.is_symlink() and is_harbor_dir(p))
    if not dirs:
        raise TaskError(f"{root} holds no Harbor task directories (task.toml + instruction.md)")
    return [load_harbor(p, limits) for p in dirs]
