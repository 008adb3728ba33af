"""JSON Schema validation whose regular expressions cannot stall the server.

A slate write's ``match`` schema comes from the caller, and ``pattern`` is a regular
expression: with Python's ``re`` (what ``jsonschema`` uses) a pattern like ``^(a+)+$`` on a
few dozen characters backtracks for minutes while holding the interpreter lock, so one request
froze every other one, ``/healthz`` included. Here the keywords that run a pattern
(``pattern``, ``patternProperties``, ``additionalProperties`` beside them) use the ``regex``
engine with a time limit instead: a pattern that takes longer than ``PATTERN_SECONDS`` on a
value counts as not matching it, with a message that says so. ``unevaluatedProperties`` with
``patternProperties`` in the same schema is refused (``check_patterns``): ``jsonschema``
evaluates those patterns itself.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import Draft202012Validator, ValidationError, validators

PATTERN_SECONDS = 0.05
# All the patterns of one extraction together (a pattern under ``items`` runs once per item):
# past it every pattern counts as not matching.
EXTRACTION_PATTERN_SECONDS = 0.5
_DEADLINE: ContextVar[float | None] = ContextVar("cairn_pattern_deadline", default=None)


@contextmanager
def pattern_budget(seconds: float = EXTRACTION_PATTERN_SECONDS) -> Iterator[None]:
    """Bound the time every pattern searched inside the block may take together."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class PatternTimeout(Exception):
    """A pattern ran past ``PATTERN_SECONDS`` on a value."""


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` finds a match in ``text``; ``PatternTimeout`` past the limit."""
    limit = PATTERN_SECONDS
    deadline = _DEADLINE.get()
    if deadline is not None:
        limit = min(limit, deadline - time.monotonic())
        if limit <= 0:
            raise PatternTimeout(pattern)
    try:
        return regex.search(pattern, text, timeout=limit) is not None
    except TimeoutError as exc:
        raise PatternTimeout(pattern) from exc
    except regex.error:
        return False  # (``check_patterns`` refuses a pattern that does not compile)


def _too_slow(pattern: str) -> ValidationError:
    return ValidationError(
        f"pattern {pattern!r} took over {PATTERN_SECONDS:g} s on this value, or the patterns "
        f"over {EXTRACTION_PATTERN_SECONDS:g} s together (counted as no match)"
    )


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = search(pattern, instance)
    except PatternTimeout:
        yield _too_slow(pattern)
        return
    if not found:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                hit = search(pattern, key)
            except PatternTimeout:
                yield _too_slow(pattern)
                return
            if hit:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        if key in named:
            continue
        try:
            if any(search(p, key) for p in patterns):
                continue
        except PatternTimeout as exc:
            yield _too_slow(str(exc))
            return
        extras.append(key)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        listed = ", ".join(repr(k) for k in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


BoundedValidator = validators.extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def bounded_schema(schema: Any) -> Any:
    """A copy of ``schema`` for ``BoundedValidator``: without ``$schema`` anywhere, since
    jsonschema validates a subschema that names its dialect with that dialect's stock
    validator (Python's ``re`` again); every schema here is read as Draft 2020-12."""
    copied = copy.deepcopy(schema)
    for node in schema_objects(copied):
        node.pop("$schema", None)
    return copied


def check_patterns(schema: Any) -> str | None:
    """What is wrong with the schema's patterns for ``BoundedValidator``, or None: every
    pattern must compile, and ``unevaluatedProperties`` may not sit beside
    ``patternProperties`` (``jsonschema`` would run those patterns unbounded)."""
    nodes = list(schema_objects(schema))
    # jsonschema finds the keys patternProperties evaluated, anywhere below (allOf, $ref,
    # if, dependentSchemas), with Python's re.
    if any("unevaluatedProperties" in n for n in nodes) and any(
        "patternProperties" in n for n in nodes
    ):
        return "unevaluatedProperties in a schema with patternProperties is not supported"
    for node in nodes:
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        pattern_props = node.get("patternProperties")
        if isinstance(pattern_props, dict):
            patterns += list(pattern_props)
        for pattern in patterns:
            try:
                regex.compile(pattern)
            except regex.error as exc:
                return f"pattern {pattern!r} does not compile: {exc}"
    return None


# Keywords whose values are data, not schemas (a "pattern" or "$ref" in them is text), and
# keywords whose values map names to schemas (a property may be called "const").
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def schema_objects(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object inside ``schema`` (walked without recursion): not the data of
    ``const``/``enum``/…, not the name maps of ``properties``/``$defs``/… (their values are)."""
    stack: list[tuple[Any, bool]] = [(schema, False)]  # (node, whether it maps names)
    while stack:
        node, names = stack.pop()
        if isinstance(node, list):
            stack.extend((item, False) for item in node)
        elif isinstance(node, dict) and names:
            stack.extend((value, False) for value in node.values())
        elif isinstance(node, dict):
            yield node
            for key, value in node.items():
                if key not in _DATA_KEYWORDS:
                    stack.append((value, key in _SCHEMA_MAPS))


__all__ = [
    "PATTERN_SECONDS",
    "BoundedValidator",
    "bounded_schema",
    "check_patterns",
    "pattern_budget",
    "schema_objects",
    "search",
]
