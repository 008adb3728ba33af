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

from collections.abc import Iterator
from typing import Any

import regex
from jsonschema import Draft202012Validator, ValidationError, validators

PATTERN_SECONDS = 0.05


class PatternTimeout(Exception):
    """A pattern ran past ``PATTERN_SECONDS`` on a value."""


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` finds a match in ``text``; ``PatternTimeout`` past the limit."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError as exc:
        raise PatternTimeout(pattern) from exc
    except regex.error:
        return False  # (``check_patterns`` refuses a pattern that does not compile)


def _too_slow(pattern: str) -> ValidationError:
    return ValidationError(
        f"pattern {pattern!r} took over {PATTERN_SECONDS:g} s on this value (counted as no match)"
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


def check_patterns(schema: Any) -> str | None:
    """What is wrong with the schema's patterns for ``BoundedValidator``, or None: every
    pattern must compile, and ``unevaluatedProperties`` may not sit beside
    ``patternProperties`` (``jsonschema`` would run those patterns unbounded)."""
    for node in schema_objects(schema):
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        pattern_props = node.get("patternProperties")
        if isinstance(pattern_props, dict):
            patterns += list(pattern_props)
            if "unevaluatedProperties" in node:
                return "unevaluatedProperties beside patternProperties is not supported"
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


__all__ = ["PATTERN_SECONDS", "BoundedValidator", "check_patterns", "schema_objects", "search"]
