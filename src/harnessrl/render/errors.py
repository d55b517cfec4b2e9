"""Typed rendering errors (ValueError subclasses: the proxy answers them with a 400)."""

from __future__ import annotations

from harnessrl.errors import HarnessRLError


class RenderError(HarnessRLError, ValueError):
    """A request the renderer cannot turn into prompt ids."""


class TemplateError(RenderError):
    """The chat template cannot be used (missing, or fails to render these messages)."""


class RenderInputError(RenderError):
    """A message or tool is not well formed (e.g. content that is not text)."""
