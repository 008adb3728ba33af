"""JSON extraction from model output, ``match`` validation and ``field`` selection.

``extract_json`` looks, in this order, for:
1. the whole output (trimmed) parsed as a JSON object or array;
2. the first fenced code block (```` ``` ```` or ```` ```json ````) whose body parses as JSON;
3. the first ``{`` or ``[`` in the text where a complete JSON object or array starts.
Scalars (a bare ``"text"`` or ``3``) are never extracted: a model's prose is not JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from cairn.slates.model import canonical_json

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_MISSING = object()


def extract_json(output: str) -> Any:
    """The JSON object or array the output carries, or ``None`` when there is none."""
    text = output.strip()
    if text[:1] in "{[":
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, (dict, list)):
                return value
    for match in _FENCE.finditer(output):
        lang = match.group(1).lower()
        if lang not in ("", "json", "jsonc", "json5"):
            continue
        try:
            value = json.loads(match.group(2))
        except json.JSONDecodeError:
            continue
        if isinstance(value, (dict, list)):
            return value
    decoder = json.JSONDecoder()
    for i, ch in enumerate(output):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(output, i)
            except json.JSONDecodeError:
                continue
            if isinstance(value, (dict, list)):
                return value
    return None


@dataclass(frozen=True, slots=True)
class Extraction:
    """The value to write, or why there is none (``reason`` is a stable code)."""

    value: Any = None
    reason: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def extract_value(output: str, *, match: Any = None, field: str | None = None) -> Extraction:
    """Extract JSON, check it against ``match`` (Draft 2020-12), then pick ``field``.

    Reasons: ``no_json``, ``schema_mismatch``, ``field_missing``, ``empty_value``.
    """
    value = extract_json(output)
    if value is None:
        return Extraction(reason="no_json", detail="the output holds no JSON object or array")
    if match is not None:
        errors = sorted(Draft202012Validator(match).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path) or "(root)"
            return Extraction(reason="schema_mismatch", detail=f"{where}: {first.message}")
    if field is not None:
        member = value.get(field, _MISSING) if isinstance(value, dict) else _MISSING
        if member is _MISSING:
            return Extraction(reason="field_missing", detail=f"the JSON has no member {field!r}")
        value = member
    if value is None or value == "":
        return Extraction(reason="empty_value", detail="the value to write is empty")
    return Extraction(value=value)


def as_content(value: Any) -> str:
    """How an extracted value is written: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else canonical_json(value)
