"""Shared pytest fixtures. Tier markers are declared in pyproject.toml (--strict-markers)."""

from __future__ import annotations
