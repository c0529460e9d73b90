"""The build's exceptions, apart so that `cache.py` and `compile.py` can share them."""

from __future__ import annotations

from collections.abc import Sequence


class BuildError(Exception):
    """The C compiler is missing or rejected the unit; the message has the command and stderr."""

    def __init__(self, message: str, command: Sequence[str] = (), stderr: str = "") -> None:
        super().__init__(message)
        self.command = tuple(command)
        self.stderr = stderr


class CacheError(BuildError):
    """Neither the build cache nor a private temporary one can be written; a one-line message."""


class LoadError(BuildError):
    """A shared object cannot be opened, or lacks a declared symbol, and could not be rebuilt."""
