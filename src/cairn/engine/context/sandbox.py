"""The bounds of a custom context template: the caller's code, run in the server.

Jinja2's sandbox keeps a template from reaching Python's internals; these keep it from
spending the server. A rendering may spend ``MAX_RENDER_SECONDS`` of CPU time and grow the
process by ``MAX_RENDER_BYTES``: a watchdog thread stops it past either (an exception raised in
the rendering thread, which takes effect between two Python steps, so it also stops a loop that
calls nothing). Single steps that could be huge on their own are refused before they run:
a repetition (``"x" * n``) or padding (``ljust``, ``center``, ``zfill``, the widths and
precisions of ``%``, the ``format`` filter and ``str.format``, none taken from the arguments
with ``*``) over ``MAX_RENDER_CHARS``, a power of more than ``MAX_POWER_BITS`` bits, a ``replace``
that would outgrow the limit.
"""

from __future__ import annotations

import ctypes
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

T = TypeVar("T")

MAX_RENDER_CHARS = 1_000_000  # output, and any one string or list a template builds
MAX_RENDER_SECONDS = 1.0  # of the rendering thread's CPU time
WALL_FACTOR = 5  # and at most this many times that on the clock
MAX_RENDER_BYTES = 256 * 1024 * 1024  # growth of the process while one rendering runs
MAX_POWER_BITS = 10_000
_WIDTH = re.compile(r"(\d+)")
# A ``%`` conversion whose width or precision is an argument: ``%*d``, ``%.*f``, ``%-*s``.
_PERCENT_STAR = re.compile(r"%[-#0 +]*(?:\*|\d*\.\*)")
# A replacement field inside another's format spec: ``{0:>{1}}``.
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")
_PADDING = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})


class RenderStopped(BaseException):
    """Raised in a rendering thread by its watchdog (a BaseException: no template or library
    code on the way may swallow it)."""


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the bounds of this module's docstring."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and _power_bits(left, right) > MAX_POWER_BITS:
            raise SecurityError(f"a power of more than {MAX_POWER_BITS:,} bits is not allowed")
        if operator == "*" and _repeated_size(left, right) > MAX_RENDER_CHARS:
            raise SecurityError(f"a repetition over {MAX_RENDER_CHARS:,} items is not allowed")
        if operator == "%" and isinstance(left, str):
            _check_widths(left)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            _check_str_call(owner, getattr(__obj, "__name__", ""), args)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``text.format`` as the sandbox wraps it (its method is never called as itself, so
        ``call`` does not see it), with the format string's widths checked, nested ones
        (``{0:>{1}}``) by the arguments that fill them."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text = value.__self__

        def bounded(*args: Any, **kwargs: Any) -> str:
            _check_widths(text)
            if _NESTED_FIELD.search(text):
                _check_width_arguments([*args, *kwargs.values()])
            return wrapped(*args, **kwargs)

        return bounded


def _power_bits(left: Any, right: Any) -> float:
    if not (isinstance(left, int | float) and isinstance(right, int | float)):
        return 0.0
    if right <= 0 or abs(left) <= 1:
        return 0.0
    return float(right) * math.log2(abs(left))


def _repeated_size(left: Any, right: Any) -> int:
    """How many items ``left * right`` makes when it repeats a string or a sequence."""
    for seq, n in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(n, int):
            return len(seq) * n
    return 0


def _check_widths(text: str) -> None:
    """A format string's field widths and precisions (``%05000000d``, ``%.2000000000f``,
    ``{:>9999999}``) stay within bounds, and none is taken from the arguments (``%*d``)."""
    if any(int(w) > MAX_RENDER_CHARS for w in _WIDTH.findall(text) if len(w) <= 12) or any(
        len(w) > 12 for w in _WIDTH.findall(text)
    ):
        raise SecurityError(f"a field wider than {MAX_RENDER_CHARS:,} is not allowed")
    if "*" in text and _PERCENT_STAR.search(text):
        raise SecurityError("a width or precision taken from the arguments ('*') is not allowed")


def _check_width_arguments(values: list[Any]) -> None:
    """Arguments that may fill a nested width (``{0:>{1}}``) stay within bounds."""
    for v in values:
        if isinstance(v, dict):  # format_map's mapping
            _check_width_arguments(list(v.values()))
        elif isinstance(v, int) and abs(v) > MAX_RENDER_CHARS:
            raise SecurityError(f"a field wider than {MAX_RENDER_CHARS:,} is not allowed")


def bounded_format(value: Any, *args: Any, **kwargs: Any) -> str:
    """Jinja's ``format`` filter (``"%.2f"|format(x)``, printf-style) with the widths of
    ``%`` checked: the filter applies ``%`` in Jinja's own code, where ``call_binop`` does not
    see it, and a huge width runs in C, where the watchdog cannot stop it."""
    from jinja2.filters import do_format

    _check_widths(str(value))
    return str(do_format(value, *args, **kwargs))


def _check_str_call(text: str, name: str, args: tuple[Any, ...]) -> None:
    if name in _PADDING and any(isinstance(a, int) and a > MAX_RENDER_CHARS for a in args):
        raise SecurityError(f"padding to over {MAX_RENDER_CHARS:,} characters is not allowed")
    if name in ("format", "format_map"):
        _check_widths(text)
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str):
        grown = (
            len(text) + text.count(args[0]) * len(str(args[1]))
            if args[0]
            else len(text) * (1 + len(str(args[1])))
        )
        if grown > MAX_RENDER_CHARS:
            raise SecurityError(f"a replace making over {MAX_RENDER_CHARS:,} characters")


def bounded_center(value: Any, width: int = 80) -> str:
    return str(value).center(min(int(width), MAX_RENDER_CHARS))


def bounded_indent(value: Any, width: Any = 4, first: bool = False, blank: bool = False) -> str:
    """Jinja's ``indent`` with a width of at most 1,000 (a number of spaces) or a short prefix."""
    from jinja2.filters import do_indent

    if (isinstance(width, int) and width > 1000) or (isinstance(width, str) and len(width) > 1000):
        raise SecurityError("an indent wider than 1,000 is not allowed")
    return str(do_indent(value, width, first, blank))


def watched(render: Callable[[], T], seconds: float = MAX_RENDER_SECONDS) -> T:
    """``render()`` in this thread, stopped (``SecurityError``) once it has spent ``seconds``
    of CPU time, or ``WALL_FACTOR`` times that on the clock, or grown the process by more than
    ``MAX_RENDER_BYTES``. CPU time, not the clock, is the limit: a template is charged for its
    own work, not for a busy machine's (the clock is a backstop should the thread be starved)."""
    target = threading.get_ident()
    done = threading.Event()
    lock = threading.Lock()
    fired: list[str] = []
    start = _rss()
    spent = _cpu_clock(target)
    cpu_limit = spent() + seconds
    deadline = time.monotonic() + seconds * WALL_FACTOR

    def watch() -> None:
        while not done.wait(0.01):
            # The time is read before the memory (reading /proc lets the rendering run on, so
            # the later reading is the fresher), and the memory named first: a rendering that
            # grew past the bound is stopped for that, even where its time ran out meanwhile.
            late = "cpu" if spent() > cpu_limit else ""
            late = late or ("clock" if time.monotonic() > deadline else "")
            why = "memory" if _rss() - start > MAX_RENDER_BYTES else late
            if why:
                with lock:
                    if not done.is_set():
                        fired.append(why)
                        _raise_in(target, RenderStopped)
                return

    watcher = threading.Thread(target=watch, name="cairn-template-watchdog", daemon=True)
    watcher.start()
    try:
        try:
            return render()
        finally:
            with lock:
                done.set()
                if fired:
                    _raise_in(target, None)  # clear it if it has not been raised yet
            watcher.join()
    except RenderStopped:
        if fired and fired[0] == "memory":
            raise SecurityError(
                f"the template used over {MAX_RENDER_BYTES // 2**20} MB of memory"
            ) from None
        if fired and fired[0] == "clock":
            raise SecurityError(
                f"the template ran over {seconds * WALL_FACTOR:g} s (its thread starved)"
            ) from None
        raise SecurityError(f"the template ran over {seconds:g} s of CPU time") from None


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


def _cpu_clock(thread_id: int) -> Callable[[], float]:
    """A reading of the thread's CPU time in seconds; the clock where the platform has none."""
    try:
        clock = time.pthread_getcpuclockid(thread_id)
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.monotonic
    return lambda: time.clock_gettime(clock)


def _rss() -> int:
    """This process's resident memory in bytes (Linux), 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except (OSError, ValueError, IndexError):
        return 0


__all__ = [
    "MAX_RENDER_CHARS",
    "MAX_RENDER_SECONDS",
    "BoundedEnvironment",
    "bounded_center",
    "bounded_format",
    "bounded_indent",
    "watched",
]
