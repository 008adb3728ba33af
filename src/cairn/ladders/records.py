"""``recordTemplate``: a step records a memory-template episode (seed 000) after it runs.

Values come from literals or text sources (``input.context``, ``board.NAME``, ``steps.ID`` …),
optionally one member of the JSON found in the source. The episode goes through ordinary ingest
with the idempotency key ``RUN_ID:STEP_ID``, so a retried run records it once. A template that
rejects the values (a missing required field, an unknown one) is a no-op recorded in the trace
with the template's error code, like a ``slateWrite`` that does not match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.engine.ingest import IngestListener, record_episode
from cairn.errors import CairnError
from cairn.ladders.board import Board
from cairn.ladders.config import TemplateRecordSpec
from cairn.ladders.steps import source_text
from cairn.slates.extract import as_content, extract_json
from cairn.store import Store
from cairn.templates import TemplateCatalogue, apply_template


def template_values(spec: TemplateRecordSpec, board: Board) -> tuple[dict[str, Any], str | None]:
    """The values to apply, or why they cannot be had."""
    values: dict[str, Any] = {}
    for name, v in spec.values.items():
        if isinstance(v, str):
            values[name] = v
            continue
        if v.field is None:
            values[name] = source_text(v.source, board)
            continue
        # A member of a step's JSON is read from its whole reply: stripMatch removes the
        # JSON only from what later steps and the caller see.
        data = extract_json(source_text(v.source, board, whole=True))
        if not isinstance(data, dict) or v.field not in data:
            return {}, f"values.{name}: the JSON of {v.source} has no member {v.field!r}"
        values[name] = as_content(data[v.field])
    return values, None


def record_template(
    store: Store,
    templates: TemplateCatalogue,
    listeners: Sequence[IngestListener],
    tenant: str,
    spec: TemplateRecordSpec,
    board: Board,
    key: str,
) -> dict[str, Any]:
    """Apply the template; the trace entry says what was recorded, or why nothing was.
    ``listeners`` are told of the new episode (the compile-on-ingest ones)."""
    out: dict[str, Any] = {"kind": "recordTemplate", "template": spec.template}
    values, problem = template_values(spec, board)
    if problem is not None:
        return {**out, "written": False, "reason": "value_missing", "detail": problem}
    try:
        template = templates.get(spec.template)
        item = apply_template(
            template, spec.target(), values, session_id=spec.session_id, idempotency_key=key
        )
        episode, created = record_episode(store, tenant, item, listeners)
    except CairnError as exc:
        return {**out, "written": False, "reason": exc.code, "detail": exc.message}
    return {
        **out,
        "written": True,
        "episode_id": str(episode.id),
        "created": created,
        "subject_id": episode.scope.subject_id,
    }


__all__ = ["record_template", "template_values"]
