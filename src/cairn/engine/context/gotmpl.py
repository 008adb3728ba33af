"""The ``gotmpl`` renderer: a Go ``text/template`` over the context result, as FlowCraft's
``GoTemplate`` renderer sees it (seed 001).

The template's data is the result — ``.Items``, ``.TokenCount``, ``.Truncated`` (and
``.RecallEventID``, always empty here) — and each item has FlowCraft's field names: ``.ID``,
``.Kind``, ``.Content``, ``.Score``, ``.SourceClass``, ``.TokenCount``, ``.Timestamp``,
``.Sources`` (each ``.Kind``, ``.ID``, ``.DatasetID``, ``.DocumentID``), ``.Metadata``,
``.Title`` and ``.MessageRole`` (empty in Cairn), plus Cairn's ``.CreatedAt`` and
``.OccurredAt``. ``.Content`` prints as its text (in Go it is a ``message.Content``; use
``contentText`` to be portable). Functions: FlowCraft's ``contentText``, ``contentJSON``,
``score`` (``%.3f``), ``xml`` (HTML/XML escaping), and Go's builtins. A missing field or map
key is an error (FlowCraft runs with ``missingkey=error``). An empty template is the default
block of ``DefaultRenderer``.
"""

from __future__ import annotations

import json
from typing import Any

from cairn.core.memory import ContextItem, ContextResult
from cairn.engine.context.render import (
    MAX_TEMPLATE_CHARS,
    DefaultRenderer,
    RenderTooLarge,
)
from cairn.engine.gotemplate import (
    FunctionError,
    GoStruct,
    GoTemplate,
    GoTemplateError,
    TemplateSyntaxError,
    html_escape_string,
)
from cairn.errors import InvalidInput


def _content(text: str) -> GoStruct:
    part = GoStruct("message.TextPart", {"Text": text})
    return GoStruct("message.Content", {"Parts": [part]}, {"Text": lambda: text}, text=text)


def _source(ref: Any) -> GoStruct:
    return GoStruct(
        "memory.SourceRef",
        {
            "Kind": ref.type,
            "ID": ref.id,
            "DatasetID": ref.dataset_id or "",
            "DocumentID": ref.document_id or "",
        },
    )


def _item(item: ContextItem) -> GoStruct:
    return GoStruct(
        "memory.ContextItem",
        {
            "ID": item.id,
            "Kind": item.kind,
            "Content": _content(item.content),
            "Score": float(item.score),
            "SourceClass": item.source_class,
            "TokenCount": item.token_count,
            "Timestamp": item.occurred_at or item.created_at,
            "CreatedAt": item.created_at,
            "OccurredAt": item.occurred_at,
            "Sources": [_source(s) for s in item.provenance],
            "Metadata": dict(item.metadata),
            "Title": "",
            "MessageRole": "",
        },
    )


def template_data(result: ContextResult) -> GoStruct:
    """The ``ContextResult`` as the template sees it."""
    return GoStruct(
        "memory.ContextResult",
        {
            "Items": [_item(i) for i in result.items],
            "TokenCount": result.token_count,
            "Truncated": result.truncated,
            "RecallEventID": "",
        },
    )


def _content_text(content: Any) -> str:
    if isinstance(content, GoStruct) and content.type_name == "message.Content":
        return str(content.text)
    if isinstance(content, str):
        return content
    raise FunctionError("contentText needs an item's .Content")


def _content_json(content: Any) -> str:
    text = _content_text(content)
    encoded = json.dumps(
        {"parts": [{"type": "text", "text": text}]}, ensure_ascii=False, separators=(",", ":")
    )
    # Go's json.Marshal escapes these three for safe embedding in HTML.
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _score(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FunctionError("score needs a number")
    return f"{float(value):.3f}"


def _xml(value: Any) -> str:
    if not isinstance(value, str):
        raise FunctionError("xml needs a string (use contentText for .Content)")
    return html_escape_string(value)


FUNCTIONS = {
    "contentText": _content_text,
    "contentJSON": _content_json,
    "score": _score,
    "xml": _xml,
}


class GoTemplateRenderer:
    """A Go template over the result; ``max_chars`` is a hard limit on its output."""

    def __init__(self, template: str, max_chars: int = 0) -> None:
        if max_chars < 0:
            raise InvalidInput(f"max_chars must be >= 0, got {max_chars}")
        if len(template) > MAX_TEMPLATE_CHARS:
            raise InvalidInput(
                f"template is {len(template)} characters, over the limit {MAX_TEMPLATE_CHARS}",
                code="invalid_template",
            )
        self.max_chars = max_chars
        self._default = DefaultRenderer(max_chars) if not template.strip() else None
        try:
            self._template = GoTemplate(template, FUNCTIONS)
        except TemplateSyntaxError as exc:
            raise InvalidInput(f"gotmpl syntax error at {exc}", code="invalid_template") from exc

    def render(self, result: ContextResult) -> str:
        if self._default is not None:
            return self._default.render(result)
        try:
            text = self._template.render(template_data(result))
        except GoTemplateError as exc:
            raise InvalidInput(f"gotmpl failed at {exc}", code="template_error") from exc
        if self.max_chars and len(text) > self.max_chars:
            raise RenderTooLarge(
                f"rendered context is {len(text)} characters, over max_chars {self.max_chars}",
                details={"rendered_chars": len(text), "max_chars": self.max_chars},
            )
        return text
