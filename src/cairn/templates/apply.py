"""Applying a template: strict validation of the caller's values, then one ordinary episode.

``apply_template`` is pure: it returns the ``NewEpisode``, and the caller (the API, the CLI, the
inspector, a ladder's ``recordTemplate``) ingests it with ``cairn.engine.ingest.record_episode``
like any other, so it is idempotent per key, appears in the timeline and is compiled and
recalled with everything else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.core.text import NUL
from cairn.errors import InvalidInput
from cairn.templates.errors import INVALID_VALUE, MISSING_FIELD, UNKNOWN_FIELD
from cairn.templates.model import MemoryTemplate

# The episode ``source`` of every template application.
TEMPLATE_SOURCE = "memory-template"

_JSON_TYPES = {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _value_problem(value: object) -> str:
    """Why a value is not acceptable ("" if it is): not a string, or a string with a NUL
    character (which PostgreSQL cannot store, so no backend accepts it)."""
    if not isinstance(value, str):
        return _json_type(value)
    if NUL in value:
        return "a string containing a NUL character"
    return ""


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def validate_values(template: MemoryTemplate, values: Mapping[str, Any]) -> dict[str, str]:
    """Check ``values`` against the template; returns them unchanged when they pass.

    Checks run in a fixed order, each with its own code, and each error names every
    offending field (``details.fields``) and the first one (``details.field``):
    unknown field → ``template_unknown_field``; a value that is not a string (numbers,
    booleans, null, arrays, objects) or contains a NUL character → ``template_invalid_value``;
    an omitted required field → ``template_missing_field``.
    """
    declared = template.field_names
    unknown = [name for name in values if name not in declared]
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {_quoted(unknown)} for template '{template.id}' "
            f"(its fields: {', '.join(declared)})",
            code=UNKNOWN_FIELD,
            details={
                "template_id": template.id,
                "field": unknown[0],
                "fields": unknown,
                "allowed": declared,
            },
        )
    problems = {name: _value_problem(values[name]) for name in declared if name in values}
    invalid = [name for name, problem in problems.items() if problem]
    if invalid:
        kinds = {name: problems[name] for name in invalid}
        described = ", ".join(f"'{n}' is {kinds[n]}" for n in invalid)
        raise InvalidInput(
            f"template values must be strings without NUL characters: {described}",
            code=INVALID_VALUE,
            details={
                "template_id": template.id,
                "field": invalid[0],
                "fields": invalid,
                "types": kinds,
            },
        )
    missing = [name for name in template.required_fields if name not in values]
    if missing:
        raise InvalidInput(
            f"missing required field(s) {_quoted(missing)} for template '{template.id}'",
            code=MISSING_FIELD,
            details={"template_id": template.id, "field": missing[0], "fields": missing},
        )
    return dict(values)


def apply_template(
    template: MemoryTemplate,
    scope: Scope,
    values: Mapping[str, Any],
    *,
    session_id: str | None = None,
    idempotency_key: str | None = None,
    occurred_at: datetime | None = None,
) -> NewEpisode:
    """The episode a template application produces (validates ``values`` first; nothing is
    produced when validation fails). Ingest it with ``cairn.engine.ingest.record_episode``."""
    fields = validate_values(template, values)
    provenance = {"id": template.id, "version": template.version}
    return NewEpisode(
        scope=scope,
        source=TEMPLATE_SOURCE,
        type=template.episode_type,
        payload={
            "template_id": template.id,
            "template_version": template.version,
            "fields": fields,
            "content": template.render(fields),
        },
        metadata={"template": provenance},
        session_id=session_id,
        idempotency_key=idempotency_key,
        occurred_at=occurred_at,
    )
