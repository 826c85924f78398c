"""User-facing errors: the CLI prints them as one line and exits non-zero."""
from __future__ import annotations


class SchedrecError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class ModelImportError(SchedrecError):
    """A model spec that cannot be turned into a Relax module."""


class TargetError(SchedrecError):
    """A target spec that cannot be parsed or detected."""
