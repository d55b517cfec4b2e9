"""Tasks: the in-memory Task, loaders (ClawGym and native directories), the verifier runner and the
built-in suite. Pure Python: imports neither torch, transformers nor vllm."""

from harnessrl.tasks.loader import load_task_dir, load_tasks
from harnessrl.tasks.model import Task, TaskError, Verifier
from harnessrl.tasks.verifier import VerifierResult, run_verifier

__all__ = ["Task", "TaskError", "Verifier", "VerifierResult", "load_task_dir", "load_tasks", "run_verifier"]
