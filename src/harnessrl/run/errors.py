"""The run's own error."""

from __future__ import annotations


class TrainError(RuntimeError):
    """The run cannot start or continue; the message says why and what to do."""
