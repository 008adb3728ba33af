"""Errors of the Go template interpreter; each names the line and column of the template."""

from __future__ import annotations


def position(source: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters) of ``offset`` in ``source``."""
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, column


class GoTemplateError(Exception):
    """A template error at a position: ``line``, ``column`` and the bare ``reason``."""

    kind = "error"

    def __init__(self, reason: str, source: str, offset: int) -> None:
        self.reason = reason
        self.line, self.column = position(source, max(0, min(offset, len(source))))
        super().__init__(f"line {self.line}, column {self.column}: {reason}")


class TemplateSyntaxError(GoTemplateError):
    """The template does not parse."""


class TemplateExecError(GoTemplateError):
    """The template failed while executing (a missing field or key, a bad function call)."""
