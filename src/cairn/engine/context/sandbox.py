"""The bounds of a custom context template: the caller's code, run in the server.

Jinja2's sandbox keeps a template from reaching Python's internals; these keep it from
spending the server. A rendering may spend ``MAX_RENDER_SECONDS`` of CPU time and grow the
process by ``MAX_RENDER_BYTES``: a watchdog thread stops it past either (an exception raised in
the rendering thread, which takes effect between two Python steps, so it also stops a loop that
calls nothing). A single step that runs in C cannot be stopped that way: one that would make
more than ``MAX_RENDER_CHARS`` (a repetition, ``%`` and ``str.format`` with their widths and
arguments, padding, ``replace``, ``join``, ``translate``, the wrapping and indenting filters:
``cairn.engine.context.template_bounds``) is refused before it runs, as is a power of more
than ``MAX_POWER_BITS`` bits.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from cairn.engine.context.template_bounds import (
    FILTERS,
    MAX_RENDER_CHARS,
    BoundedCodeGenerator,
    check_format,
    check_percent,
    check_str_call,
    concat,
    printable,
    repeated_size,
    text_filters,
)

T = TypeVar("T")

MAX_RENDER_SECONDS = 1.0  # of the rendering thread's CPU time
WALL_FACTOR = 5  # and at most this many times that on the clock
MAX_RENDER_BYTES = 256 * 1024 * 1024  # growth of the process while one rendering runs
MAX_POWER_BITS = 10_000


class RenderStopped(BaseException):
    """Raised in a rendering thread by its watchdog (a BaseException: no template or library
    code on the way may swallow it)."""


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the bounds of this module's docstring (what one step would
    make: ``cairn.engine.context.template_bounds``)."""

    intercepted_binops = frozenset({"*", "**", "%"})
    code_generator_class = BoundedCodeGenerator  # ``~`` through ``measured_concat``

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("finalize", printable)  # what ``{{ value }}`` prints
        super().__init__(*args, **kwargs)
        self.filters.update(text_filters(self.filters))
        self.filters.update(FILTERS)

    # (Not ``concat``: Jinja joins a template's output chunks with that.)
    measured_concat = staticmethod(concat)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and _power_bits(left, right) > MAX_POWER_BITS:
            raise SecurityError(f"a power of more than {MAX_POWER_BITS:,} bits is not allowed")
        if operator == "*" and repeated_size(left, right) > MAX_RENDER_CHARS:
            raise SecurityError(f"a repetition over {MAX_RENDER_CHARS:,} items is not allowed")
        if operator == "%" and isinstance(left, str):
            check_percent(left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args and not isinstance(args[0], list | tuple | str):
                args = (list(args[0]), *args[1:])  # (an iterator: measured, then joined)
            check_str_call(owner, name, args)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``text.format`` as the sandbox wraps it (its method is never called as itself, so
        ``call`` does not see it), measured by a dry run first (``check_format``: every
        field's spec as the call fills it, nested ones included)."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map and len(args) == 1 and not kwargs:
                check_format(self, text, (), args[0])
            else:
                check_format(self, text, args, kwargs)
            return wrapped(*args, **kwargs)

        return bounded


def _power_bits(left: Any, right: Any) -> float:
    if not (isinstance(left, int | float) and isinstance(right, int | float)):
        return 0.0
    if right <= 0 or abs(left) <= 1:
        return 0.0
    return float(right) * math.log2(abs(left))


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


__all__ = ["MAX_RENDER_CHARS", "MAX_RENDER_SECONDS", "BoundedEnvironment", "watched"]
