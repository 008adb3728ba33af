"""Steps: resolve a step's fields and lay them into the messages sent to the model.

The message layout is fixed (and documented in docs/ladders.md):

1. a ``system`` message with the step's ``systemPrompt`` (left out when it is empty);
2. a ``user`` message with every field, in declaration order, as a labelled section::

       ## Question
       What is the capital of France?

       ## KnownFacts
       No prior facts available.

   Sections are separated by one blank line; a field's value is inserted as is.

A step without fields sends the request's own messages after its system prompt (the request's
messages pass through unchanged), so a one-step ladder with no fields is a plain chat proxy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.errors import CairnError
from cairn.ladders.board import STEP_REPLIES, STEPS, Board, message_text
from cairn.ladders.config import SlateReadField, StepSpec, TextField
from cairn.slates.config import SlateReadSource

# Reads a slate file or metatag (with an optional fallback) and returns its text.
SlateReader = Callable[[SlateReadSource, str | None], str]


@dataclass
class ResolvedField:
    name: str
    value: str
    source: str  # what the value came from, for the trace
    fallback_used: bool = False
    error: str | None = None
    slate: dict[str, Any] | None = None

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "from": self.source,
            "chars": len(self.value),
            "fallback_used": self.fallback_used,
        }
        if self.slate is not None:
            out["slate"] = self.slate
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class RenderedStep:
    messages: list[dict[str, Any]]
    fields: list[ResolvedField] = field(default_factory=list)

    def slate_reads(self) -> list[dict[str, Any]]:
        return [
            {
                "field": f.name,
                **(f.slate or {}),
                "chars": len(f.value),
                "fallback_used": f.fallback_used,
                **({"error": f.error} if f.error else {}),
            }
            for f in self.fields
            if f.slate is not None
        ]


def transcript(messages: list[dict[str, Any]]) -> str:
    """The conversation as ``role: text`` lines (for ``input.messages``)."""
    return "\n".join(f"{m.get('role', 'user')}: {message_text(m)}" for m in messages)


def to_text(value: Any) -> str:
    """A board value as prompt text: strings as they are; a list of recalled items (objects
    with ``content``) as ``- content`` lines; anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, list) and all(
        (isinstance(v, Mapping) and "content" in v) or hasattr(v, "content") for v in value
    ):
        return "\n".join(
            f"- {v['content'] if isinstance(v, Mapping) else v.content}" for v in value
        )
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def source_text(src: str, board: Board, *, whole: bool = False) -> str:
    """The text of a source: ``input.context``, ``input.messages``, ``board.NAME``,
    ``steps.ID`` (``whole``: a step's whole reply, with the JSON ``stripMatch`` removed from
    what later steps and the caller see)."""
    if src == "input.context":
        return board.current_message
    if src == "input.messages":
        return transcript(board.messages)
    if src.startswith("board."):
        return to_text(board.get(src[len("board.") :]))
    step_id = src.split(".")[1]  # steps.ID[.output]
    if whole and step_id in board.get(STEP_REPLIES, {}):
        return to_text(board.get(STEP_REPLIES)[step_id])
    return to_text(board.get(STEPS, {}).get(step_id))


def resolve_text(f: TextField, board: Board) -> ResolvedField:
    src = f.source
    value = source_text(src, board)
    if not value and f.fallback is not None:
        return ResolvedField(f.name, f.fallback, src, fallback_used=True)
    return ResolvedField(f.name, value, src)


def resolve_slate_read(f: SlateReadField, read: SlateReader) -> ResolvedField:
    ref = f.source
    where = ref.model_dump(exclude_none=True)
    label = f"slate:{ref.slate}" + "".join(f"/{p}" for p in (ref.folder, ref.file) if p)
    try:
        value = read(ref, f.fallback)
        error = None
    except CairnError as exc:  # a failed read is recorded, and reads as the fallback or ''
        value, error = f.fallback or "", f"{exc.code}: {exc.message}"
    used = f.fallback is not None and value == f.fallback
    return ResolvedField(f.name, value, label, used, error, where)


def render_step(step: StepSpec, board: Board, read: SlateReader) -> RenderedStep:
    """Resolve the fields and build the messages, in the fixed layout above."""
    resolved = [
        resolve_text(f, board) if isinstance(f, TextField) else resolve_slate_read(f, read)
        for f in step.fields
    ]
    messages: list[dict[str, Any]] = []
    if step.systemPrompt:
        messages.append({"role": "system", "content": step.systemPrompt})
    if resolved:
        body = "\n\n".join(f"## {r.name}\n{r.value}" for r in resolved)
        messages.append({"role": "user", "content": body})
    else:
        messages.extend(
            {"role": str(m.get("role", "user")), "content": message_text(m)} for m in board.messages
        )
    return RenderedStep(messages=messages, fields=resolved)


__all__ = [
    "RenderedStep",
    "ResolvedField",
    "SlateReader",
    "render_step",
    "source_text",
    "to_text",
    "transcript",
]
