"""``stripMatch``: the JSON a step's ``slateWrite`` matched, removed from the reply the caller
sees (the writes still see the model's whole output).

Streaming keeps the same text: deltas are sent up to the first character that can start a
JSON value or a fenced block (``{``, ``[`` or a backtick), less trailing whitespace; the rest is
held until the step ends, then sent with the match removed. The streamed reply is therefore
exactly the non-streamed one.
"""

from __future__ import annotations

from collections.abc import Iterator

from cairn.ladders.config import StepSpec
from cairn.ladders.providers import ChatReply
from cairn.slates.extract import extract_value, remove_span

_HOLD = "{[`"


def shown_reply(step: StepSpec, output: str) -> str:
    """What the caller sees of ``output``: with ``stripMatch``, trimmed and without the JSON
    that ``slateWrite`` matched (if one did)."""
    if not step.stripMatch or step.slateWrite is None:
        return output
    w = step.slateWrite
    found = extract_value(output, match=w.match, field=w.field)
    if found.span is None:
        return output.strip()
    return remove_span(output, found.span)


def _safe_end(text: str) -> int:
    """How much of ``text`` may be sent now: up to the first possible JSON start, without
    the whitespace before it, and nothing while it is only whitespace."""
    cut = min((i for i in (text.find(c) for c in _HOLD) if i >= 0), default=len(text))
    return len(text[:cut].rstrip())


def stream_shown(step: StepSpec, deltas: Iterator[str | ChatReply]) -> Iterator[str | ChatReply]:
    """Pass a step's stream through, holding back what ``stripMatch`` may remove."""
    if not step.stripMatch or step.slateWrite is None:
        yield from deltas
        return
    text = ""
    sent = 0  # characters of the trimmed text already sent
    for item in deltas:
        if isinstance(item, ChatReply):
            final = shown_reply(step, item.content)
            if final[:sent] == text.lstrip()[:sent] and len(final) > sent:
                yield final[sent:]
            yield item
            continue
        text += item
        body = text.lstrip()
        end = _safe_end(body)
        if end > sent:
            yield body[sent:end]
            sent = end


__all__ = ["shown_reply", "stream_shown"]
