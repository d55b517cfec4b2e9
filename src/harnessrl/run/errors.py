"""The run's own error."""

from __future__ import annotations

from harnessrl.errors import HarnessRLError


class TrainError(HarnessRLError, RuntimeError):
    """The run cannot start or continue; the message says why and what to do."""
