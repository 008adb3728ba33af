"""What one step of a custom template would make, checked before it runs.

A step that runs in C (a repetition, ``%``, ``str.format``, ``join``, ``replace``, a padding
or wrapping filter) cannot be stopped by the sandbox's watchdog, which acts between Python
steps: it must be refused before it starts when what it would make is over
``MAX_RENDER_CHARS``. What it makes is predicted from its inputs: the characters of the
strings it copies (``weight``: a list holding one long string a million times is as long as
a million copies of it once printed), the widths and precisions of its format specs (only
the specs: a number in a format string's plain text is text), and its repeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jinja2 import nodes, pass_environment, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.filters import (
    do_batch,
    do_format,
    do_indent,
    do_join,
    do_replace,
    do_tojson,
    do_wordwrap,
)
from jinja2.sandbox import SandboxedFormatter
from markupsafe import escape

MAX_RENDER_CHARS = 1_000_000  # output, and any one string or list a template builds
MAX_INDENT = 1_000  # spaces (or characters of a prefix) of ``indent`` and ``tojson``

# A ``%`` conversion: mapping key, flags, width, precision, length modifier, type.
_PERCENT = re.compile(
    r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([diouxXeEfFgGcrsab%])"
)
# A ``str.format`` spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?", re.S)


def too_big(what: str) -> SecurityError:
    return SecurityError(f"{what} over {MAX_RENDER_CHARS:,} characters is not allowed")


def weight(value: Any, seen: dict[int, int] | None = None) -> int:
    """About how many characters ``value`` is once printed: a string's (or bytes') length,
    a container's items summed (each distinct object counted once, then by reference), 1 for
    anything else. Stops counting past ``MAX_RENDER_CHARS``."""
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if not isinstance(value, list | tuple | dict | set | frozenset):
        return 1
    seen = {} if seen is None else seen
    known = seen.get(id(value))
    if known is not None:
        return known
    seen[id(value)] = 1  # (a container holding itself)
    items: Iterable[Any] = value.values() if isinstance(value, dict) else value
    total = 2
    for item in items:
        total += weight(item, seen) + 2
        if total > MAX_RENDER_CHARS:
            break
    seen[id(value)] = total
    return total


def repeated_size(left: Any, right: Any) -> int:
    """What ``left * right`` makes when it repeats a string, bytes or a sequence."""
    for seq, n in ((left, right), (right, left)):
        if isinstance(n, int) and not isinstance(n, bool):
            if isinstance(seq, str | bytes | bytearray):
                return len(seq) * n
            if isinstance(seq, list | tuple):
                return weight(seq) * n  # (at least its length: every item weighs 1 or more)
    return 0


def _number(digits: str | None) -> int:
    if not digits:
        return 0
    if len(digits) > 12:  # (and no int() of a 5,000-digit run)
        return MAX_RENDER_CHARS + 1
    return int(digits)


def check_percent(fmt: str, args: Any) -> None:
    """``fmt % args``: the widths and precisions of its conversions, plus what its
    arguments print, within bounds; no width or precision taken from the arguments."""
    total = len(fmt) + weight(args)
    for m in _PERCENT.finditer(fmt):
        if "*" in (m.group(1), m.group(2)):
            raise SecurityError(
                "a width or precision taken from the arguments ('*') is not allowed"
            )
        total += _number(m.group(1)) + _number(m.group(2))
    if total > MAX_RENDER_CHARS:
        raise too_big("a formatted text")


class FormatSizes(SandboxedFormatter):
    """A dry run of ``str.format`` in the sandbox: every field resolved as the real call
    resolves it (attribute and item lookups checked by the sandbox), and formatted only once
    what it would make is known to be within bounds, so a nested spec (``{0:>{1}}``) is
    filled in before the field it shapes is measured; what the fields make summed."""

    def __init__(self, env: Any, text: str) -> None:
        super().__init__(env)
        self.total = len(text)

    def format_field(self, value: Any, format_spec: str) -> Any:
        m = _SPEC.fullmatch(format_spec)
        width = _number(m.group(1)) + _number(m.group(2)) if m else 0
        self.total += max(width, weight(value))
        if self.total > MAX_RENDER_CHARS:
            raise too_big("a formatted text")
        return super().format_field(value, format_spec)


def check_format(env: Any, text: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    FormatSizes(env, text).vformat(text, args, kwargs)


def check_str_call(text: str, name: str, args: tuple[Any, ...]) -> None:
    """A ``str`` method that can make far more than it is given: padding, ``replace``,
    ``join``, ``translate``, ``expandtabs``."""
    if name in ("ljust", "rjust", "center", "zfill") and args:
        if isinstance(args[0], int) and args[0] > MAX_RENDER_CHARS:
            raise too_big("padding")
    elif name == "expandtabs":
        size = args[0] if args and isinstance(args[0], int) else 8
        if len(text) + text.count("\t") * max(size, 0) > MAX_RENDER_CHARS:
            raise too_big("padding")
    elif name == "replace" and len(args) >= 2:
        check_replace(text, args[0], args[1])
    elif name == "join" and args:
        if len(text) * max(len(args[0]) - 1, 0) + weight(args[0]) > MAX_RENDER_CHARS:
            raise too_big("a join")
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((weight(v) for v in args[0].values()), default=1)
        if len(text) * longest > MAX_RENDER_CHARS:
            raise too_big("a translation")


def check_replace(text: Any, old: Any, new: Any) -> None:
    text, old, new = str(text), str(old), str(new)
    times = text.count(old) if old else len(text) + 1
    if len(text) + times * len(new) > MAX_RENDER_CHARS:
        raise too_big("a replace making")


@pass_eval_context
def bounded_replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> Any:
    """Jinja's ``replace`` filter: it calls ``str.replace`` in its own code, out of the
    sandbox's sight."""
    check_replace(s, old, new)
    return do_replace(eval_ctx, s, old, new, count)


@pass_eval_context
def bounded_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
    items = list(value)
    if len(str(d)) * max(len(items) - 1, 0) + weight(items) > MAX_RENDER_CHARS:
        raise too_big("a join")
    return do_join(eval_ctx, items, d, attribute)


@pass_environment
def bounded_wordwrap(environment: Any, s: str, width: int = 79, *args: Any, **kwargs: Any) -> str:
    wrapstring = kwargs.get("wrapstring", args[1] if len(args) > 1 else None)
    breaks = len(s) // max(int(width), 1) + s.count("\n") + 1
    if len(s) + breaks * len(str(wrapstring or "\n")) > MAX_RENDER_CHARS:
        raise too_big("a wrapped text")
    return str(do_wordwrap(environment, s, width, *args, **kwargs))


def bounded_indent(value: Any, width: Any = 4, first: bool = False, blank: bool = False) -> str:
    """Jinja's ``indent``: a prefix of at most ``MAX_INDENT`` characters, and the text it
    makes within bounds (the prefix once per line)."""
    prefix = width if isinstance(width, str) else " " * min(int(width), MAX_INDENT + 1)
    if len(prefix) > MAX_INDENT:
        raise SecurityError(f"an indent wider than {MAX_INDENT:,} is not allowed")
    text = str(printable(value))
    if len(text) + (text.count("\n") + 1) * len(prefix) > MAX_RENDER_CHARS:
        raise too_big("an indented text")
    return str(do_indent(text, width, first, blank))


def bounded_center(value: Any, width: int = 80) -> str:
    return str(printable(value)).center(min(int(width), MAX_RENDER_CHARS))


def bounded_format(value: Any, *args: Any, **kwargs: Any) -> str:
    """Jinja's ``format`` filter (printf-style): it applies ``%`` in its own code."""
    check_percent(str(value), kwargs or args)
    return str(do_format(value, *args, **kwargs))


def bounded_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    if int(linecount) > MAX_RENDER_CHARS:
        raise too_big("a batch")
    return do_batch(value, linecount, fill_with)


def printable(value: Any) -> Any:
    """A value about to be printed (``{{ value }}``: the environment's ``finalize``), or
    made text by a filter: a container holding long strings many times is made text in C,
    all at once (a literal list naming one long string 20,000 times)."""
    if (
        isinstance(value, list | tuple | dict | set | frozenset)
        and weight(value) > MAX_RENDER_CHARS
    ):
        raise too_big("a value printed")
    return value


def bounded_string(value: Any) -> str:
    return str(printable(value))


@pass_eval_context
def bounded_tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
    if indent is not None and int(indent) > MAX_INDENT:
        raise SecurityError(f"an indent wider than {MAX_INDENT:,} is not allowed")
    return do_tojson(eval_ctx, printable(value), indent)


def bounded_escape(value: Any) -> Any:
    return escape(printable(value))


def concat(values: tuple[Any, ...]) -> str:
    """``a ~ b ~ …`` (Jinja's ``str_join``, compiled in by ``BoundedCodeGenerator``): each
    value made text in C, so measured first."""
    if sum(weight(v) for v in values) > MAX_RENDER_CHARS:
        raise too_big("a concatenation")
    return "".join(map(str, values))


class BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator with ``~`` through ``environment.measured_concat`` (the
    sandbox does not intercept it: it joins its operands' text directly)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.measured_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _text_input(flt: Any) -> Any:
    """A filter that makes its value text first (``lower``, ``truncate``, …), given a value
    measured as one printed (``printable``)."""

    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        return flt(printable(value), *args, **kwargs)

    return bounded


# Jinja's filters that make their value text (in C) before working on it.
_TEXT_FILTERS = (
    "lower",
    "upper",
    "title",
    "capitalize",
    "trim",
    "striptags",
    "wordcount",
    "urlencode",
    "safe",
    "forceescape",
)


def text_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """``_TEXT_FILTERS`` of ``filters``, each given a value measured first (none of them
    takes the environment or context first, which Jinja would pass before the value)."""
    return {name: _text_input(filters[name]) for name in _TEXT_FILTERS}


# The filters that replace Jinja's own (``BoundedEnvironment`` installs them).
FILTERS = {
    "replace": bounded_replace,
    "join": bounded_join,
    "wordwrap": bounded_wordwrap,
    "indent": bounded_indent,
    "center": bounded_center,
    "format": bounded_format,
    "batch": bounded_batch,
    "tojson": bounded_tojson,
    "string": bounded_string,
    "escape": bounded_escape,
    "e": bounded_escape,
}
