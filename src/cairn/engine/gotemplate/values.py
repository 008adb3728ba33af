"""Go-shaped values for templates, and how Go prints them (``fmt``'s ``%v``).

Templates see plain Python values — ``str``, ``int``, ``float``, ``bool``, ``None``, lists,
dicts (Go maps: a missing key is an error) — and ``GoStruct`` objects, whose fields are fixed
(an unknown field is an error, as for a Go struct).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any


class GoStruct:
    """A Go struct: a type name, named fields, and methods without arguments. ``text`` (when
    set) is what printing it shows instead of ``{field …}``."""

    __slots__ = ("fields", "methods", "text", "type_name")

    def __init__(
        self,
        type_name: str,
        fields: Mapping[str, Any],
        methods: Mapping[str, Callable[[], Any]] | None = None,
        text: str | None = None,
    ) -> None:
        self.type_name = type_name
        self.fields = dict(fields)
        self.methods = dict(methods or {})
        self.text = text


def type_name(value: Any) -> str:
    """The Go type name a value stands for (used in error messages and ``%T``)."""
    if isinstance(value, GoStruct):
        return value.type_name
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time.Time"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if value is None:
        return "<nil>"
    return type(value).__name__


def format_float(value: float, verb: str = "g", precision: int | None = None) -> str:
    """Go's ``strconv.FormatFloat``: ``g`` with no precision is the shortest form that reads
    back exactly, in exponent form when the exponent is < -4 or >= 6 (``1e+06``), as ``%v``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if verb in "fF":
        return f"{value:.{6 if precision is None else precision}f}"
    if verb in "eE":
        text = f"{value:.{6 if precision is None else precision}e}"
        return text.upper() if verb == "E" else text
    if precision is not None:
        text = f"{value:.{max(precision, 1)}g}"
        return _go_exponent(text)
    # Shortest representation, as Go's %v: exponent form when exp < -4 or exp >= 6.
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    if not isinstance(exp, int):  # pragma: no cover - finite floats only
        return repr(value)
    ds = "".join(map(str, digits)) or "0"
    point = len(ds) + exp  # position of the decimal point from the left of ds
    x = point - 1
    neg = "-" if sign else ""
    if value == 0:
        return neg + "0"
    if x < -4 or x >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return neg + ds + "0" * (point - len(ds))
    return f"{neg}{ds[:point]}.{ds[point:]}"


def _go_exponent(text: str) -> str:
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant}e{exp[0]}{int(exp[1:]):02d}"
    return text


def format_time(value: datetime) -> str:
    """Go's ``time.Time.String`` layout: ``2006-01-02 15:04:05.999999999 -0700 MST``."""
    base = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        base += f".{value.microsecond:06d}".rstrip("0")
    offset = value.strftime("%z") or "+0000"
    zone = "UTC" if offset == "+0000" else (value.tzname() or offset)
    return f"{base} {offset} {zone}"


def format_value(value: Any) -> str:
    """``fmt.Sprint`` of one value (``%v``)."""
    if isinstance(value, GoStruct):
        if value.text is not None:
            return value.text
        return "{" + " ".join(format_value(v) for v in value.fields.values()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>"
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, list | tuple):
        return "[" + " ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "map[" + " ".join(f"{format_value(k)}:{format_value(v)}" for k, v in items) + "]"
    return str(value)


def truth(value: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings, slices and maps are false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | tuple | dict):
        return len(value) > 0
    return True
