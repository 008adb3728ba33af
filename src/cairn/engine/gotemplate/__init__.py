"""A Go ``text/template`` interpreter: the subset templates over a context result use.

``GoTemplate(source, functions)`` parses once (a ``TemplateSyntaxError`` names line and
column); ``render(data)`` executes (``TemplateExecError``, also with line and column). Actions,
pipelines, variables, ``if``/``else if``/``else``, ``with``, ``range`` (with ``break`` and
``continue``), comments, ``{{- -}}`` trim markers and the builtin functions (``and or not len
index slice print printf println eq ne lt le gt ge html js urlquery``) behave as in Go; missing
map keys and unknown fields are errors (``missingkey=error``). Named templates (``define``,
``template``, ``block``) are not supported. No PyPI package implements this maturely (see
docs/context.md), hence this small interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cairn.engine.gotemplate.builtins import BUILTINS, LAZY, FunctionError, html_escape_string
from cairn.engine.gotemplate.errors import GoTemplateError, TemplateExecError, TemplateSyntaxError
from cairn.engine.gotemplate.executor import Executor
from cairn.engine.gotemplate.parser import parse
from cairn.engine.gotemplate.values import GoStruct, format_value


class GoTemplate:
    """A parsed template with its functions (the builtins plus ``functions``)."""

    def __init__(
        self, source: str, functions: Mapping[str, Callable[..., Any]] | None = None
    ) -> None:
        self.source = source
        self.functions = {**BUILTINS, **(functions or {})}
        self.tree = parse(source, [*self.functions, *LAZY])

    def render(self, data: Any) -> str:
        return Executor(self.source, self.functions).run(self.tree, data)


__all__ = [
    "FunctionError",
    "GoStruct",
    "GoTemplate",
    "GoTemplateError",
    "TemplateExecError",
    "TemplateSyntaxError",
    "format_value",
    "html_escape_string",
]
