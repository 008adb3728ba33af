"""The memory hooks of seed 001, and the ``resources:`` / ``agents:`` blocks that declare them.

- ``memory.context`` (a prepare hook) recalls context into the board before the steps run;
- ``memory.turn`` (a commit hook) pushes the completed turn into the assembly afterwards.

Each hook is an object built from validated settings and a ``memory.Assembly``; the runtime
calls it with the request's board (a mutable mapping of variables; names starting with ``__`` are
the engine's) and a ``RequestContext``::

    hook = MemoryContextHook(settings, assembly)
    result = hook(board, RequestContext(context_id="conv-1", message="hi", run_id="run-1"))

``load_memory_config`` parses the YAML verbatim; ``build_assemblies`` and ``build_agent_hooks``
turn it into objects. Settings files are read only from inside the config's directory and only
up to ``MAX_SETTINGS_FILE_BYTES``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cairn.core.memory import (
    Assembly,
    Budget,
    ContextRenderer,
    ContextRequest,
    ContextResult,
    Message,
    Turn,
    TurnCommit,
)
from cairn.core.scope import NewScope, Scope
from cairn.core.text import check_no_nul
from cairn.core.validation import validation_details
from cairn.engine.context.fit import fit_rendering
from cairn.engine.context.gotmpl import GoTemplateRenderer
from cairn.engine.context.render import DefaultRenderer, TemplateRenderer
from cairn.errors import InvalidInput

RESERVED_PREFIX = "__"
MAIN_CHANNEL = "__main_channel"
MAX_SETTINGS_FILE_BYTES = 256 * 1024
MAX_CONFIG_FILE_BYTES = 1024 * 1024

# A board is any mapping-like of variables: a dict, or the ladders runtime's ``Board`` (which
# writes through ``set``). Hooks read with ``in`` / ``[]`` / ``get`` and write through ``_write``.
Board = MutableMapping[str, Any] | Any


def _write(board: Any, name: str, value: Any) -> None:
    setter = getattr(board, "set", None)
    if callable(setter):
        setter(name, value)
    else:
        board[name] = value


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a hook knows about the request: its context id (the default conversation id),
    the current user message, and the run id (the idempotency key of the turn)."""

    context_id: str = ""
    message: str = ""
    run_id: str = ""


def check_board_var(name: str, field_name: str) -> str:
    """A board variable a hook may write: not empty, no ``__`` prefix."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{field_name} must name a board variable (it is empty)")
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(
            f"{field_name} {name!r} is reserved: board variables starting with "
            f"'{RESERVED_PREFIX}' belong to the engine"
        )
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _conversation_id(value: str | None) -> str | None:
    """A set ``conversation_id`` is trimmed and must say something (absent: the request's
    context id); NUL is refused here, not at the first call."""
    if value is None:
        return None
    check_no_nul(value, "conversation_id")
    value = value.strip()
    if not value:
        raise ValueError(
            "conversation_id must not be blank (leave it out to use the request's context id)"
        )
    return value


class QuerySource(_Strict):
    """Exactly one of: literal text, a board variable, the current message, the recall window."""

    literal: str | None = None
    board: str | None = None
    current_message: bool = Field(default=False, strict=True)
    recent_only: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _exactly_one(self) -> QuerySource:
        chosen = [
            name
            for name, on in (
                ("literal", self.literal is not None),
                ("board", self.board is not None),
                ("current_message", self.current_message),
                ("recent_only", self.recent_only),
            )
            if on
        ]
        if len(chosen) != 1:
            got = ", ".join(chosen) if chosen else "none"
            raise ValueError(
                "query must select exactly one of literal, board, current_message, recent_only "
                f"(got {got})"
            )
        if self.literal is not None and not self.literal.strip():
            raise ValueError("query.literal must not be empty")
        for name in ("literal", "board"):
            check_no_nul(getattr(self, name) or "", f"query.{name}")
        if self.board is not None and not self.board.strip():
            raise ValueError("query.board must name a board variable (it is empty)")
        return self


class TemplateSpec(_Strict):
    """A Jinja2 template (``jinja:``, or ``template:``) and its ``max_chars``."""

    template: str
    max_chars: int = Field(default=0, ge=0, strict=True)

    @field_validator("template")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:  # a bad template is a settings error, found when the config loads
            TemplateRenderer(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc
        return value


class GoTemplateSpec(_Strict):
    """The seed's ``gotmpl: {template, max_chars}``: a Go ``text/template`` (FlowCraft's
    renderer); an empty or blank template is the default block, as in FlowCraft."""

    template: str = ""
    max_chars: int = Field(default=0, ge=0, strict=True)

    @field_validator("template")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            GoTemplateRenderer(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc
        return value


class RenderSpec(_Strict):
    """Where rendered text goes, and how it is rendered: the default block, a Go template
    (``gotmpl``, the seed's key) or a Jinja2 template (``jinja``; ``template`` is the same)."""

    output: str
    gotmpl: GoTemplateSpec | None = None
    jinja: TemplateSpec | None = None
    template: TemplateSpec | None = None
    max_chars: int = Field(default=0, ge=0, strict=True)

    @field_validator("output")
    @classmethod
    def _output(cls, value: str) -> str:
        return check_board_var(value, "render.output")

    @model_validator(mode="after")
    def _one_template(self) -> RenderSpec:
        chosen = [k for k in ("gotmpl", "jinja", "template") if getattr(self, k) is not None]
        if len(chosen) > 1:
            raise ValueError(
                f"render takes one of gotmpl, jinja or template (got {', '.join(chosen)})"
            )
        return self

    def renderer(self) -> ContextRenderer:
        if self.gotmpl is not None:
            return GoTemplateRenderer(self.gotmpl.template, self.gotmpl.max_chars or self.max_chars)
        spec = self.jinja or self.template
        if spec is None:
            return DefaultRenderer(self.max_chars)
        return TemplateRenderer(spec.template, spec.max_chars or self.max_chars)


class ContextHookSettings(_Strict):
    query: QuerySource
    scope: Scope
    conversation_id: str | None = None
    dataset_ids: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    min_score: float = Field(default=0.0, strict=True)
    recent_turns: int = Field(default=6, ge=0, le=200, strict=True)
    output: str
    render: RenderSpec | None = None

    @field_validator("output")
    @classmethod
    def _output(cls, value: str) -> str:
        return check_board_var(value, "output")

    @field_validator("conversation_id")
    @classmethod
    def _conversation(cls, value: str | None) -> str | None:
        return _conversation_id(value)

    @field_validator("min_score")
    @classmethod
    def _min_score(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"min_score must be a finite number in [0, 1], got {value}")
        return value

    @field_validator("dataset_ids")
    @classmethod
    def _datasets(cls, value: list[str]) -> list[str]:
        for i, item in enumerate(value):
            if not item.strip():
                raise ValueError(f"dataset_ids[{i}] must not be empty")
            check_no_nul(item, f"dataset_ids[{i}]")
            if item in value[:i]:
                raise ValueError(f"dataset_ids[{i}] repeats {item!r}; ids must be unique")
        return value

    @model_validator(mode="after")
    def _outputs_differ(self) -> ContextHookSettings:
        if self.render is not None and self.render.output == self.output:
            raise ValueError(f"render.output must differ from output (both are {self.output!r})")
        return self


class TurnHookSettings(_Strict):
    scope: NewScope  # turns are written under it: its user must be a subject id (at load)
    conversation_id: str | None = None
    channel: str = MAIN_CHANNEL

    @field_validator("conversation_id")
    @classmethod
    def _conversation(cls, value: str | None) -> str | None:
        return _conversation_id(value)

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("channel must name a board variable (it is empty)")
        return value


def _invalid(exc: ValidationError, what: str) -> InvalidInput:
    errors = [dict(e) for e in exc.errors(include_url=False)]
    details = validation_details(errors, request=False)
    parts = [f"{d['field']}: {d['message']}" if d["field"] else d["message"] for d in details]
    return InvalidInput(
        f"invalid {what}: " + "; ".join(parts), code="invalid_hook_settings", details=details
    )


class MemoryContextHook:
    """``memory.context``: recall into ``board[output]`` (a list of item dicts) and, with
    ``render``, rendered text into ``board[render.output]``."""

    type = "memory.context"
    phase = "prepare"

    def __init__(self, settings: ContextHookSettings | Mapping[str, Any], memory: Assembly) -> None:
        if not isinstance(settings, ContextHookSettings):
            try:
                settings = ContextHookSettings.model_validate(dict(settings))
            except ValidationError as exc:
                raise _invalid(exc, "memory.context settings") from exc
        self.settings = settings
        self.memory = memory
        self.renderer = settings.render.renderer() if settings.render else None

    def request_for(self, board: Board, request: RequestContext) -> ContextRequest:
        """The ContextRequest this hook makes for one board and request."""
        s = self.settings
        q = s.query
        if q.literal is not None:
            query = q.literal
        elif q.board is not None:
            if q.board not in board:
                raise InvalidInput(
                    f"query.board names board variable {q.board!r}, which is not set",
                    code="board_variable_missing",
                )
            value = board[q.board]
            if not isinstance(value, str):
                raise InvalidInput(
                    f"board variable {q.board!r} holds {type(value).__name__}, not text",
                    code="board_variable_type",
                )
            query = value
        elif q.current_message:
            query = request.message
        else:
            query = ""
        try:
            return ContextRequest(
                scope=s.scope,
                conversation_id=s.conversation_id or request.context_id,
                dataset_ids=s.dataset_ids,
                query=query,
                budget=s.budget,
                min_score=s.min_score,
                recent_turns=s.recent_turns,
                recent_only=q.recent_only,
            )
        except ValidationError as exc:
            raise _invalid(exc, "memory.context request") from exc

    def __call__(self, board: Board, request: RequestContext) -> ContextResult:
        result = self.memory.context(self.request_for(board, request))
        text = None
        if self.renderer is not None:
            # Drop the lowest-ranked items until the rendering fits ``max_chars``.
            result, text = fit_rendering(result, self.renderer)
        # Write only after everything succeeded, so a failed hook leaves the board as it was.
        _write(board, self.settings.output, [item.model_dump(mode="json") for item in result.items])
        if text is not None and self.settings.render is not None:
            _write(board, self.settings.render.output, text)
        return result


def _messages(value: Any, channel: str) -> list[Message]:
    if isinstance(value, str):
        value = [{"role": "assistant", "content": value}]
    if not isinstance(value, list | tuple):
        raise InvalidInput(
            f"channel {channel!r} holds {type(value).__name__}, not a list of messages",
            code="board_variable_type",
        )
    out = []
    for i, m in enumerate(value):
        if isinstance(m, Message):
            out.append(m)
            continue
        if not isinstance(m, Mapping):
            m = {"role": getattr(m, "role", None), "content": getattr(m, "content", None)}
        content = m.get("content")
        if isinstance(content, list):  # OpenAI-style parts: keep the text parts
            content = "\n".join(
                str(p.get("text", ""))
                for p in content
                if isinstance(p, Mapping) and p.get("type") == "text"
            )
        try:
            out.append(Message(role=m.get("role"), content=content))
        except ValidationError as exc:
            raise _invalid(exc, f"message {i} of channel {channel!r}") from exc
    return out


class MemoryTurnHook:
    """``memory.turn``: commit the turn held in ``board[channel]`` (a list of ``{role,
    content}``) once per run id; a retried run returns the original commit."""

    type = "memory.turn"
    phase = "commit"

    def __init__(self, settings: TurnHookSettings | Mapping[str, Any], memory: Assembly) -> None:
        if not isinstance(settings, TurnHookSettings):
            try:
                settings = TurnHookSettings.model_validate(dict(settings))
            except ValidationError as exc:
                raise _invalid(exc, "memory.turn settings") from exc
        self.settings = settings
        self.memory = memory

    def turn_for(self, board: Board, request: RequestContext) -> Turn:
        s = self.settings
        if not request.run_id.strip():
            raise InvalidInput("memory.turn needs the request's run id", code="missing_run_id")
        conversation = s.conversation_id or request.context_id
        if not conversation.strip():
            raise InvalidInput(
                "memory.turn needs a conversation: set conversation_id or send a context id",
                code="missing_conversation_id",
            )
        messages = _messages(board.get(s.channel) or [], s.channel)
        if not messages and request.message:
            messages = [Message(role="user", content=request.message)]
        if not messages:
            raise InvalidInput(
                f"channel {s.channel!r} holds no messages to commit", code="empty_turn"
            )
        # Two commit hooks of one run on different channels are two turns.
        key = request.run_id if s.channel == MAIN_CHANNEL else f"{request.run_id}:{s.channel}"
        try:
            return Turn(
                scope=s.scope,
                conversation_id=conversation,
                idempotency_key=key,
                messages=messages,
                metadata={"run_id": request.run_id, "channel": s.channel},
            )
        except ValidationError as exc:
            raise _invalid(exc, "memory.turn turn") from exc

    def __call__(self, board: Board, request: RequestContext) -> TurnCommit:
        return self.memory.commit_turn(self.turn_for(board, request))
