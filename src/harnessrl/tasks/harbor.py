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
  ``bash /tests/test.sh`` in the workspace under the reward guard (GUARD_SH); its output goes to
  stderr, and the reward file is the reward (a missing or malformed one is a verifier_error) once
  the guard found it written by test.sh's own reward command. A reward file written by another
  process (the agent's code that test.sh runs), locked, or not a regular file is a forgery:
  ``reward_forged``, scored 0 (tasks/verifier.py);
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
from harnessrl.tasks.verifier import FORGERY_EXIT, FORGERY_KEY

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
TESTS_DEST = ".harbor-tests"
DEFAULT_WORKDIR = "/app"
# What environment/ may hold instead of a Dockerfile, in the order looked for.
ENV_IMAGES = ("image.tar", "image.oci.tar", "image", "rootfs")
# The verifier: Harbor's /tests and /logs/verifier on the verifier's own fresh root, test.sh's
# output on stderr (stdout is the reward channel), then the reward file as a JSON object.
# UNGUARDED_VERIFY_SH trusts whatever the reward file holds when test.sh ends; VERIFY_SH (the
# default) runs test.sh under GUARD_SH and takes the reward only when the guard found it written
# by test.sh's own reward command (see GUARD_SH).
_SETUP = f"""T="$HARNESSRL_WORKSPACE/{TESTS_DEST}"
rm -rf /tests /logs/verifier 2>/dev/null
ln -s "$T" /tests && mkdir -p /logs/verifier /logs/agent || {{ echo "cannot create /tests and /logs/verifier on the image's root" >&2; exit 1; }}
"""
_READ = """if [ -f /logs/verifier/reward.txt ]; then printf '{"reward": %s}\\n' "$(tr -d ' \\t\\r\\n' < /logs/verifier/reward.txt)"
elif [ -f /logs/verifier/reward.json ]; then tr -d '\\n' < /logs/verifier/reward.json; echo
else echo "tests/test.sh (exit $code) wrote neither /logs/verifier/reward.txt nor reward.json" >&2; exit 1; fi
"""
UNGUARDED_VERIFY_SH = _SETUP + """cd "$HARNESSRL_WORKSPACE" && bash /tests/test.sh </dev/null >&2
code=$?
""" + _READ
GUARD_NAME = ".harnessrl-reward-guard.sh"  # beside test.sh in the verifier's read-only files
GUARD_OK = 79  # test.sh ended under the guard and its reward is its own
GUARD_FORGED = {80: "not_regular", 81: "locked", 82: "present", 83: "tampered"}
VERIFY_SH = _SETUP + f"""cd "$HARNESSRL_WORKSPACE" && BASH_ENV="$T/{GUARD_NAME}" bash /tests/test.sh </dev/null >&2
code=$?
case $code in
  {GUARD_OK}) ;;
""" + "".join(f"""  {c}) echo "the reward file was forged ({k}): see the guard's line above" >&2
      printf '{{"{FORGERY_KEY}": "{k}"}}\\n'; exit {FORGERY_EXIT};;
""" for c, k in GUARD_FORGED.items()) + """  *) echo "tests/test.sh ended outside the reward guard (exit $code: killed by a signal, or it exec'd another program)" >&2; exit 1;;
esac
""" + _READ.replace(" (exit $code)", "")

# The reward guard: sourced (BASH_ENV) by the bash that runs tests/test.sh, before test.sh. Harbor's
# test.sh runs the agent's code (a `sum.sh`, the agent's module under pytest) as the same user that
# writes the reward, so that code could write /logs/verifier/reward.txt = 1 and lock it, make it a
# directory, write reward.json, or keep a process rewriting it. The guard tells test.sh's own
# reward writes from the rest without a second uid: it lives in test.sh's shell (its variables are
# out of reach of the processes that shell starts: no ptrace, a read-only /proc), and a DEBUG trap
# runs in that shell before each of its commands:
# - a command of test.sh that names the reward (its text, or a variable it uses, holds "reward") may
#   change it: before it runs, every other process of the sandbox is killed (but this shell, its
#   ancestors and the rest of its own pipeline), and the reward must still be what test.sh last
#   wrote; its change is accepted at the next check;
# - any other change of the reward between two checks (while test.sh ran something else: the
#   agent's code) is a forgery ("present"), and so is a reward file that is locked ("locked": the
#   file or /logs/verifier not writable by its owner) or not a regular file ("not_regular");
# - when test.sh ends (its own EXIT trap first, kept by a `trap` wrapper), every other process is
#   killed, the reward checked once more, and the shell exits GUARD_OK or the forgery's code; the
#   verifier reads the reward only after GUARD_OK, when nothing but itself is left to write it.
# The guard only uses bash builtins (and one command substitution for `jobs -p`); anything it cannot
# check (a process it cannot stop, /proc it cannot list) is "tampered".
GUARD_SH = r"""# harnessrl's reward guard (tasks/harbor.py): sourced by the bash that runs tests/test.sh.
unset BASH_ENV
__hr_pid=$BASHPID __hr_state= __hr_now= __hr_pending=0 __hr_forged= __hr_user_exit= __hr_user_debug= __hr_pp= __hr_st=
__hr_opts() { __hr_o=$-; set +eufx; }
__hr_restore() { case $__hr_o in *e*) set -e;; esac; case $__hr_o in *u*) set -u;; esac
  case $__hr_o in *f*) set -f;; esac; case $__hr_o in *x*) set -x;; esac; }
__hr_forge() { [ -n "$__hr_forged" ] || { __hr_forged=$1; echo "harnessrl reward guard: $1: $2" >&2; }; }
__hr_snap() {  # the reward's state now, in __hr_now
  local IFS=$' \t\n' f c rc s=
  for f in /logs /logs/verifier; do
    if [[ -L $f || ! -d $f ]]; then s+="$f=not_regular;"; elif [[ ! -w $f ]]; then s+="$f=locked;"; fi
  done
  for f in /logs/verifier/reward.txt /logs/verifier/reward.json; do
    if [[ -L $f ]]; then s+="$f=not_regular;"
    elif [[ ! -e $f ]]; then s+="$f=none;"
    elif [[ ! -f $f ]]; then s+="$f=not_regular;"
    elif [[ ! -w $f ]]; then s+="$f=locked;"
    else
      c= rc=999
      { IFS= read -r -d '' -N 65537 -t 5 c; rc=$?; } 2>/dev/null < "$f"
      if (( rc == 999 || rc > 128 )); then s+="$f=unreadable;"; elif (( rc == 0 )); then s+="$f=too_big;"
      else s+="$f=file:${#c}:$c;"; fi
    fi
  done
  __hr_now=$s
}
__hr_judge() {  # a forgery in the state itself: not a regular file, locked, unreadable
  case $__hr_now in
    *=not_regular\;*) __hr_forge not_regular "a reward path is a link, a directory or another special file";;
    *=locked\;*) __hr_forge locked "the reward file or /logs/verifier is not writable by its owner";;
    *=unreadable\;*|*=too_big\;*) __hr_forge tampered "the reward file cannot be read (or is over 64 KiB)";;
  esac
}
__hr_stat() {  # state and parent pid of process $1, in __hr_st / __hr_pp
  local line rest
  { IFS= read -r line; } 2>/dev/null < "/proc/$1/stat" || return 1
  rest=${line##*) }; __hr_st=${rest%% *}; rest=${rest#* }; __hr_pp=${rest%% *}
}
__hr_reap() {  # kill every process of the sandbox but this shell and its ancestors ($1 = spare: and
  # the rest of the pipeline running now); 0 once none is left alive
  local IFS=$' \t\n' anc=" " p pid q n i jobsnow=" " spare
  local -A parent=() state=()
  p=$BASHPID
  while [[ $p -gt 0 ]]; do anc+="$p "; __hr_stat "$p" || break; p=$__hr_pp; done
  if [[ $1 == spare ]]; then jobsnow=$(jobs -p) || return 1; jobsnow=" ${jobsnow//$'\n'/ } "; fi
  for ((i = 0; i < 200; i++)); do
    parent=() state=() n=0
    for p in /proc/[0-9]*; do
      pid=${p#/proc/}; __hr_stat "$pid" && { parent[$pid]=$__hr_pp; state[$pid]=$__hr_st; }
    done
    [[ -n ${parent[$BASHPID]-} ]] || return 1  # /proc could not be listed
    for pid in "${!parent[@]}"; do
      [[ $anc == *" $pid "* || $pid == 1 || ${state[$pid]} == [ZX] ]] && continue
      if [[ $1 == spare ]]; then  # spared: below a child of this shell that is no background job
        spare= q=$pid
        while [[ -n ${parent[$q]-} && $q -gt 1 ]]; do
          if [[ ${parent[$q]} == "$__hr_pid" ]]; then [[ $jobsnow == *" $q "* ]] || spare=1; break; fi
          q=${parent[$q]}
        done
        [[ -n $spare ]] && continue
      fi
      kill -9 "$pid" 2>/dev/null && n=$((n + 1))
    done
    (( n == 0 )) && return 0
  done
  return 1
}
__hr_wake() {  # continue this shell's ancestors (the verifier), in case a process it killed stopped them
  local p=$PPID
  while [[ $p -gt 1 ]]; do kill -CONT "$p" 2>/dev/null; __hr_stat "$p" || break; p=$__hr_pp; done
}
__hr_names_reward() {  # the command about to run names the reward (in its text or a variable's value)
  local c=${BASH_COMMAND,,} v rest=$BASH_COMMAND
  [[ $c == *reward* ]] && return 0
  while [[ $rest == *'$'* ]]; do  # string operations only: test.sh's BASH_REMATCH stays its own
    rest=${rest#*'$'}; rest=${rest#'{'}; v=${rest%%[!A-Za-z0-9_]*}
    [[ -n $v && $v != [0-9]* && ${!v-} == *[Rr][Ee][Ww][Aa][Rr][Dd]* ]] && return 0
  done
  return 1
}
__hr_check() {  # at each command of test.sh's own shell ($1 = the command's name, or "exit")
  [[ $BASHPID == "$__hr_pid" && -z $__hr_forged ]] || return 0
  if (( __hr_pending )); then
    __hr_reap spare || __hr_forge tampered "could not stop the other processes of the sandbox"
    __hr_snap; __hr_state=$__hr_now; __hr_pending=0
  else
    __hr_snap
    [[ $__hr_now == "$__hr_state" ]] || { __hr_judge; __hr_forge present "the reward changed while test.sh ran a command that does not write it"; }
  fi
  __hr_judge
  [[ $1 == command ]] && __hr_names_reward || return 0
  __hr_reap spare || __hr_forge tampered "could not stop the other processes of the sandbox"
  __hr_snap
  [[ $__hr_now == "$__hr_state" ]] || { __hr_judge; __hr_forge present "the reward changed before test.sh wrote it"; }
  __hr_judge
  __hr_pending=1
}
__hr_debug() {  # the DEBUG trap (not re-entered from the guard's own functions: __hr_in)
  local __hr_o
  __hr_opts; __hr_check command; __hr_restore
  [[ -z $__hr_user_debug ]] || eval "$__hr_user_debug"
}
__hr_exit() {  # the EXIT trap; $1: the exit status
  local __hr_code=$1 __hr_o
  [[ -z $__hr_user_exit ]] || { (exit "$__hr_code"); eval "$__hr_user_exit"; }
  [[ $BASHPID == "$__hr_pid" ]] || return
  __hr_opts
  if [[ -z $__hr_forged ]]; then
    __hr_reap all || __hr_forge tampered "could not stop the other processes of the sandbox"
    __hr_wake
    __hr_snap
    if [[ $__hr_now != "$__hr_state" ]]; then
      (( __hr_pending )) && __hr_state=$__hr_now || { __hr_judge; __hr_forge present "the reward changed after test.sh last wrote it"; }
    fi
    __hr_judge
  fi
  echo "harnessrl reward guard: tests/test.sh exited $__hr_code" >&2
  case $__hr_forged in
    "") builtin exit 79;; not_regular) builtin exit 80;; locked) builtin exit 81;; present) builtin exit 82;;
    *) builtin exit 83;;
  esac
}
trap() {  # test.sh's own EXIT and DEBUG traps run inside the guard's
  local arg sig rest=()
  case ${1-} in ""|-p|-l|-lp|-pl) builtin trap "$@"; return;; --) shift;; esac
  if (( $# == 1 )); then arg=-; else arg=$1; shift; fi
  for sig in "$@"; do
    case ${sig^^} in
      EXIT|0|SIGEXIT) [[ $arg == - ]] && __hr_user_exit= || __hr_user_exit=$arg;;
      DEBUG|SIGDEBUG) [[ $arg == - ]] && __hr_user_debug= || __hr_user_debug=$arg;;
      *) rest+=("$sig");;
    esac
  done
  (( ${#rest[@]} == 0 )) || builtin trap -- "$arg" "${rest[@]}"
}
__hr_snap; __hr_state=$__hr_now
set -o functrace  # the DEBUG trap also before each command of test.sh's functions
builtin trap '[[ -n ${__hr_in-} ]] || { __hr_in=1; __hr_debug; __hr_in=; }' DEBUG
builtin trap '__hr_c=$?; __hr_in=1; __hr_exit "$__hr_c"' EXIT
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


def load_harbor(path: Path, limits: TaskLimits | None = None, reward_guard: bool = True) -> Task:
    """One Harbor task directory; TaskError names the missing or malformed part, or says how to
    supply an image the task only describes (a Dockerfile, a registry name). `reward_guard` False:
    the reward file is taken as test.sh leaves it (UNGUARDED_VERIFY_SH; only to show what the
    guard stops)."""
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
    if reward_guard:
        tests = {**tests, GUARD_NAME: GUARD_SH.encode()}
    verifier = Verifier(kind="checks", command=VERIFY_SH if reward_guard else UNGUARDED_VERIFY_SH,
                        files=tests, dest=TESTS_DEST,
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
