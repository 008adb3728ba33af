"""Pydantic validation errors as the ``details`` of a 422: one ``{field, message, type}`` per
problem, for the API's JSON answers, the inspector's forms and the ladders' hook settings
alike."""

from __future__ import annotations

from typing import Any


def _loc(loc: tuple[Any, ...] | list[Any], request: bool) -> str:
    parts = [str(p) for p in loc]
    if request and parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:] or parts
    return ".".join(parts)


def validation_details(
    errors: list[dict[str, Any]], *, request: bool = True
) -> list[dict[str, Any]]:
    """The `details` list of a 422 from pydantic's error dicts; ``request``: their locations
    start with the part of the request (``body``, ``query``…), which is left out."""
    return [_detail(e, request) for e in errors]


def _detail(e: dict[str, Any], request: bool) -> dict[str, Any]:
    if e.get("type") == "json_invalid":
        # FastAPI puts the character offset where a field name goes: name the body instead.
        loc = list(e.get("loc", ()))
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        reason = (e.get("ctx") or {}).get("error", "")
        return {
            "field": "body",
            "type": "json_invalid",
            "message": f"the body is not valid JSON{at}" + (f": {reason}" if reason else ""),
        }
    message = str(e.get("msg", ""))
    if e.get("type") == "value_error":
        message = message.removeprefix("Value error, ")  # pydantic's prefix says nothing
    elif e.get("type") in ("too_short", "too_long") and isinstance(e.get("input"), str):
        # A length checked after another validator reads "Value should have at least 1 item
        # after validation" even for a string: say characters.
        bound = (e.get("ctx") or {}).get("min_length" if e["type"] == "too_short" else "max_length")
        if bound is not None:
            least = "at least" if e["type"] == "too_short" else "at most"
            message = f"String should have {least} {bound} character{'s' * (bound != 1)}"
    return {"field": _loc(e.get("loc", ()), request), "message": message, "type": e.get("type", "")}
