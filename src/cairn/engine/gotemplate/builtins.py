"""The functions of Go ``text/template`` (``and`` and ``or`` are evaluated lazily by the
executor), and ``fmt``'s ``Sprintf`` for ``printf``."""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from cairn.engine.gotemplate.values import GoStruct, format_float, format_value, truth, type_name


class FunctionError(Exception):
    """A function refused its arguments; the executor adds the template position."""


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``."""
    out = ['"']
    special = {
        '"': '\\"',
        "\\": "\\\\",
        "\n": "\\n",
        "\t": "\\t",
        "\r": "\\r",
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\v": "\\v",
    }
    for ch in text:
        if ch in special:
            out.append(special[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d*))?([a-zA-Z%])|%$")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bad(verb: str, arg: Any) -> str:
    if arg is None:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({type_name(arg)}={format_value(arg)})"


def _number_text(arg: Any, verb: str, precision: int | None, plus: bool) -> str | None:
    if _is_int(arg):
        if verb == "d":
            text = str(arg)
        elif verb in "xX":
            text = format(arg, "x" if verb == "x" else "X")
        elif verb == "o":
            text = format(arg, "o")
        elif verb == "b":
            text = format(arg, "b")
        elif verb == "c":
            return chr(arg)
        elif verb == "q":
            return "'" + go_quote(chr(arg))[1:-1].replace("'", "\\'") + "'"
        else:
            return None
    elif isinstance(arg, float) and verb in "eEfFgG":
        text = format_float(arg, verb.lower() if verb in "fF" else verb, precision)
        if verb == "G":
            text = text.upper()
    else:
        return None
    if plus and not text.startswith("-"):
        text = "+" + text
    return text


def _format_one(arg: Any, flags: str, width: int | None, precision: int | None, verb: str) -> str:
    text: str | None
    numeric = False
    if verb == "v":
        text = (
            format_value(arg)
            if not (isinstance(arg, float) and precision is not None)
            else (format_float(arg, "g", precision))
        )
        numeric = _is_int(arg) or isinstance(arg, float)
    elif verb == "T":
        text = type_name(arg)
    elif verb == "t":
        text = ("true" if arg else "false") if isinstance(arg, bool) else None
    elif verb == "s":
        if isinstance(arg, str):
            text = arg
        elif isinstance(arg, GoStruct) and arg.text is not None:
            text = arg.text
        elif isinstance(arg, list | tuple | dict):
            text = format_value(arg)
        else:
            text = None
        if text is not None and precision is not None:
            text = text[:precision]
    elif verb == "q" and isinstance(arg, str):
        text = go_quote(arg)
    elif verb in "xX" and isinstance(arg, str):
        text = arg.encode("utf-8").hex()
        text = text.upper() if verb == "X" else text
    else:
        text = _number_text(arg, verb, precision, "+" in flags)
        numeric = text is not None
    if text is None:
        return _bad(verb, arg)
    if width is not None and len(text) < width:
        if "-" in flags:
            text = text.ljust(width)
        elif "0" in flags and numeric:
            sign = text[0] if text[:1] in "+-" else ""
            text = sign + text[len(sign) :].rjust(width - len(sign), "0")
        else:
            text = text.rjust(width)
    return text


_MAX_WIDTH_DIGITS = 6
_MAX_WIDTH = 10**_MAX_WIDTH_DIGITS - 1


def sprintf(fmt: str, *args: Any) -> str:
    """``fmt.Sprintf`` for the verbs templates use: ``%v %s %q %d %f %e %g %t %x %X %o %b %c
    %T %%``, with flags ``-+0``, width and precision; mistakes print as Go prints them
    (``%!d(string=x)``, ``%!s(MISSING)``, ``%!(EXTRA …)``)."""
    if not isinstance(fmt, str):
        raise FunctionError(f"printf: format must be a string, got {type_name(fmt)}")
    out: list[str] = []
    pos = used = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(4) is None:
            out.append("%!(NOVERB)")
            continue
        flags, width, precision, verb = m.group(1), m.group(2), m.group(3), m.group(4)
        if max(len(width or ""), len(precision or "")) > _MAX_WIDTH_DIGITS:
            # (Padded in C, a huge width or precision would hold the process for seconds.)
            raise FunctionError(f"printf: a width or precision over {_MAX_WIDTH:,}")
        if verb == "%":
            out.append("%")
            continue
        if used >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        arg = args[used]
        used += 1
        out.append(
            _format_one(
                arg,
                flags,
                int(width) if width else None,
                int(precision or 0) if precision is not None else None,
                verb,
            )
        )
    out.append(fmt[pos:])
    if used < len(args):
        extra = ", ".join(f"{type_name(a)}={format_value(a)}" for a in args[used:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def sprint(*args: Any) -> str:
    """``fmt.Sprint``: a space between operands when neither is a string."""
    out: list[str] = []
    for i, a in enumerate(args):
        if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(format_value(a))
    return "".join(out)


def sprintln(*args: Any) -> str:
    return " ".join(format_value(a) for a in args) + "\n"


def length(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))  # Go counts a string's bytes
    if isinstance(value, list | tuple | dict):
        return len(value)
    raise FunctionError(f"len of type {type_name(value)}")


def index(item: Any, *keys: Any) -> Any:
    for key in keys:
        if item is None:
            raise FunctionError("index of untyped nil")
        if isinstance(item, dict):
            item = item.get(key)  # Go's index gives the zero value for a missing map key
        elif isinstance(item, list | tuple | str):
            if not _is_int(key):
                raise FunctionError(f"cannot index slice/array with type {type_name(key)}")
            seq = item.encode("utf-8") if isinstance(item, str) else item
            if not 0 <= key < len(seq):
                raise FunctionError(f"index out of range: {key}")
            item = seq[key]
        else:
            raise FunctionError(f"can't index item of type {type_name(item)}")
    return item


def slice_of(item: Any, *bounds: Any) -> Any:
    if not isinstance(item, str | list | tuple):
        raise FunctionError(f"can't slice item of type {type_name(item)}")
    if len(bounds) > 2 or not all(_is_int(b) for b in bounds):
        raise FunctionError("slice takes at most two integer indexes here")
    seq: Any = item.encode("utf-8") if isinstance(item, str) else list(item)
    lo = bounds[0] if bounds else 0
    hi = bounds[1] if len(bounds) > 1 else len(seq)
    if not 0 <= lo <= hi <= len(seq):
        raise FunctionError(f"slice index out of range: {lo}:{hi}")
    part = seq[lo:hi]
    return part.decode("utf-8", errors="replace") if isinstance(item, str) else part


def _comparable(a: Any, b: Any, op: str) -> tuple[Any, Any]:
    basic = (bool, int, float, str, type(None))
    if not isinstance(a, basic) or not isinstance(b, basic):
        raise FunctionError(
            f"{op}: non-comparable type {type_name(a if not isinstance(a, basic) else b)}"
        )
    mixed = isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) != isinstance(b, str)
    if mixed and a is not None and b is not None:
        raise FunctionError(f"{op}: incompatible types for comparison")
    return a, b


def eq(a: Any, *others: Any) -> bool:
    if not others:
        raise FunctionError("eq: missing argument for comparison")
    for b in others:
        x, y = _comparable(a, b, "eq")
        if x == y:
            return True
    return False


def ne(a: Any, b: Any) -> bool:
    x, y = _comparable(a, b, "ne")
    return bool(x != y)


def _ordered(a: Any, b: Any, op: str) -> tuple[Any, Any]:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        raise FunctionError(f"{op}: invalid type for comparison")
    if (isinstance(a, numbers) and isinstance(b, numbers)) or (
        isinstance(a, str) and isinstance(b, str)
    ):
        return a, b
    raise FunctionError(f"{op}: incompatible types for comparison")


def js_escape(*args: Any) -> str:
    text = sprint(*args)
    out = []
    for ch in text:
        if ch in "\\'\"<>&=":
            out.append(f"\\u{ord(ch):04X}" if ch in "<>&=" else "\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04X}")
    return "".join(out)


def html_escape(*args: Any) -> str:
    return html_escape_string(sprint(*args))


def html_escape_string(text: str) -> str:
    """Go's ``html.EscapeString`` / ``template.HTMLEscapeString``: ``< > & ' "``."""
    return html.escape(text, quote=True).replace("&#x27;", "&#39;").replace("&quot;", "&#34;")


BUILTINS: dict[str, Callable[..., Any]] = {
    "not": lambda a: not truth(a),
    "len": length,
    "index": index,
    "slice": slice_of,
    "print": sprint,
    "printf": sprintf,
    "println": sprintln,
    "eq": eq,
    "ne": ne,
    "lt": lambda a, b: (lambda x, y: x < y)(*_ordered(a, b, "lt")),
    "le": lambda a, b: (lambda x, y: x <= y)(*_ordered(a, b, "le")),
    "gt": lambda a, b: (lambda x, y: x > y)(*_ordered(a, b, "gt")),
    "ge": lambda a, b: (lambda x, y: x >= y)(*_ordered(a, b, "ge")),
    "html": html_escape,
    "js": js_escape,
    "urlquery": lambda *a: urllib.parse.quote_plus(sprint(*a)),
}
# Evaluated lazily by the executor (they stop at the first decisive argument).
LAZY = frozenset({"and", "or"})
