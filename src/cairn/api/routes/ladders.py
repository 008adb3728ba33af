"""Ladders as OpenAI-compatible models, and their run traces.

- ``POST /v1/local/{ladder}/chat/completions`` — the OpenAI chat-completions format, with
  ``stream: true`` (server-sent events) and usage counts. ``Idempotency-Key`` is the run id.
- ``POST /v1/local/chat/completions`` — the same with ``model`` naming the ladder: one base URL
  (``/v1/local``) for front ends that pick a model from a list (Open WebUI, LiteLLM, LibreChat).
- ``GET /v1/local/models`` and ``GET /v1/local/models/{id}`` — the ladders, as OpenAI models;
  ``GET /v1/local/{ladder}/models[/{id}]`` — the one ladder, for the per-ladder base URL.

Errors on these routes also carry OpenAI's ``type`` and ``param`` (see ``cairn.api.errors``).
Tools, function calling and ``response_format`` are refused with a 400 naming the field: a
ladder's steps decide the prompts and the output, so they cannot be honoured silently.
- ``GET /v1/runs`` and ``GET /v1/runs/{run_id}`` — the tenant's runs and their traces.

Auth is Cairn's own (``Authorization: Bearer <key>`` or ``X-API-Key``); the tenant comes from the
key, and runs, slates and memory are the tenant's.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from cairn.api.errors import openai_error
from cairn.core.ids import uuid7
from cairn.core.memory import KEY_MAX_LENGTH
from cairn.core.text import has_nul
from cairn.errors import CairnError, InvalidInput, NotFound
from cairn.http.auth import require_tenant, services_of
from cairn.http.headers import header_text
from cairn.http.runtimes import ladder_runtime
from cairn.ladders.outcomes import SlateWriteRefused
from cairn.ladders.registry import Ladder
from cairn.ladders.requests import ReplayedReply
from cairn.ladders.runtime import RunOutcome, RunRequest, check_run_id
from cairn.store.runs import RunRecord

log = logging.getLogger("cairn.api")
router = APIRouter(tags=["ladders"])

OPTION_KEYS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = Field(None, max_length=256)

    @model_validator(mode="after")
    def _content(self) -> ChatMessageIn:
        # As OpenAI: only an assistant's (or a legacy function's) message may go without.
        if self.content is None and self.role not in ("assistant", "function"):
            raise ValueError(f"a {self.role} message needs 'content'")
        return self


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool = False


# OpenAI parameters that change what the model must answer: refused rather than dropped.
UNSUPPORTED_KEYS = ("tools", "tool_choice", "functions", "function_call", "response_format")


class ChatCompletionCreate(BaseModel):
    """The OpenAI request body. Sampling options go to the provider; tools, function calling
    and ``response_format`` are refused (400 ``unsupported_parameter``); other unknown
    parameters are accepted and ignored; ``n`` must be 1."""

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, max_length=256)
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=1000)
    stream: StrictBool = False  # (``"yes"`` or ``1`` is a 422, as OpenAI answers)
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1)
    user: str | None = Field(None, max_length=256)
    metadata: dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, gt=0)
    max_completion_tokens: int | None = Field(None, gt=0)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)

    @model_validator(mode="after")
    def _no_nul(self) -> ChatCompletionCreate:
        # NUL means nothing in a prompt, and PostgreSQL cannot store it in text or JSON.
        if has_nul(self.model_dump()):
            raise ValueError("the request must not contain a NUL character")
        return self


def refuse_unsupported(body: ChatCompletionCreate) -> None:
    """400 ``unsupported_parameter`` for the first of ``UNSUPPORTED_KEYS`` given a value that
    asks for something (``response_format: {"type": "text"}`` and empty lists ask nothing),
    and for a message content part that is not text (an image, audio, a file: a ladder's
    prompts are text, and dropping the part would answer as if it had not been sent)."""
    extra = body.model_extra or {}
    for key in UNSUPPORTED_KEYS:
        value = extra.get(key)
        if value in (None, [], {}) or (key == "response_format" and value == {"type": "text"}):
            continue
        raise InvalidInput(
            f"'{key}' is not supported: a ladder's steps decide the prompts and the output; "
            "leave it out of the request",
            code="unsupported_parameter",
            status=400,
            details={"param": key},
        )
    for i, message in enumerate(body.messages):
        for part in message.content if isinstance(message.content, list) else []:
            kind = part.get("type")
            if kind not in ("text", "refusal"):  # (an assistant's refusal is text too)
                raise InvalidInput(
                    f"messages[{i}] has a content part of type {kind!r}: a ladder reads text "
                    "only (parts of type 'text'); send images, audio and files another way",
                    code="unsupported_parameter",
                    status=400,
                    details={"param": f"messages[{i}].content", "type": kind},
                )


def _sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


@router.post("/v1/local/{ladder}/chat/completions", response_model=None)
def chat_completions(
    ladder: str,
    body: ChatCompletionCreate,
    request: Request,
    tenant: str = Depends(require_tenant),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key"),
    conversation_id: str | None = Header(None, alias="X-Conversation-ID"),
) -> Any:
    """Run the ladder as a chat model. Unknown ladder → 404 ``ladder_not_found``."""
    services = services_of(request)
    target = services.ladders.get(ladder)  # an unknown ladder is a 404 before anything else
    refuse_unsupported(body)
    if body.model == target.name:
        # The ladder's own name (as the models list offers it) asks for no model override.
        body = body.model_copy(update={"model": None})
    # An empty header is a malformed key (422), not an absent one.
    run_id = check_run_id(idempotency_key) if idempotency_key is not None else f"run-{uuid7().hex}"
    meta = body.metadata or {}
    options = {k: getattr(body, k) for k in OPTION_KEYS if getattr(body, k) is not None}
    run = RunRequest(
        tenant=tenant,
        ladder=target.name,
        messages=[m.model_dump(exclude_none=True) for m in body.messages],
        model=body.model,
        run_id=run_id,
        user=body.user or "",
        context_id=_context_id(conversation_id, meta),
        options=options,
    )
    runtime = ladder_runtime(request)
    headers = {"X-Cairn-Run-ID": run_id}
    metrics = request.app.state.metrics
    if not body.stream:
        try:
            outcome = runtime.run(target, run)
        except SlateWriteRefused as exc:
            metrics.count_writes(target.name, exc.details["writes"])
            raise _with_run_id(exc, run_id) from None
        except CairnError as exc:  # the run's error answers name the run too
            raise _with_run_id(exc, run_id) from None
        if outcome.replayed:
            headers["Idempotent-Replayed"] = "true"
        else:
            metrics.count_writes(target.name, outcome.writes)
        return _json(outcome.completion(), headers)

    events = runtime.run_stream(target, run, stream=True)
    # Run up to the first delta here, so errors before streaming are ordinary error answers.
    try:
        first = next(events)
    except SlateWriteRefused as exc:
        metrics.count_writes(target.name, exc.details["writes"])
        raise _with_run_id(exc, run_id) from None
    except CairnError as exc:
        raise _with_run_id(exc, run_id) from None
    if isinstance(first, ReplayedReply):
        headers["Idempotent-Replayed"] = "true"
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    model = body.model or target.name

    def count(writes: list[dict[str, Any]]) -> None:
        metrics.count_writes(target.name, writes)

    stop = threading.Event()
    return _ClosingStream(
        _stream(first, events, run_id, model, include_usage, count, stop),
        stop,
        media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache"},
    )


class _ClosingStream(StreamingResponse):
    """A run's event stream, closed as soon as the response ends, however it ends. A client
    that goes away mid-stream leaves the stream unfinished, and Starlette neither closes it nor
    lets it know: the run then stayed ``running`` (its retries refused with 409
    ``run_in_progress``) until the garbage collector closed the generator, a minute or more
    later. Closed here, the run records its failure (``client_disconnected``) at once when the
    stream is between chunks, else at its next chunk (``stop``); off the event loop, as the
    record is a database write."""

    def __init__(
        self, chunks: Generator[bytes, None, None], stop: threading.Event, **kwargs: Any
    ) -> None:
        super().__init__(chunks, **kwargs)
        self._chunks = chunks
        self._stop = stop

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._stop.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        try:
            self._chunks.close()
        except ValueError:  # running in a worker thread now: it stops at its next chunk
            pass
        except Exception:  # recording the run's end failed: the response is over anyway
            log.exception("closing a run's stream failed")


def _with_run_id(exc: CairnError, run_id: str) -> CairnError:
    """``exc`` with the ``X-Cairn-Run-ID`` header its error answer carries."""
    headers = dict(getattr(exc, "headers", None) or {})
    headers["X-Cairn-Run-ID"] = run_id
    exc.headers = headers  # type: ignore[attr-defined]
    return exc


def _json(data: dict[str, Any], headers: dict[str, str]) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(data, headers=headers)


def _stream(
    first: str | RunOutcome,
    events: Iterator[str | RunOutcome],
    run_id: str,
    model: str,
    include_usage: bool,
    count: Callable[[list[dict[str, Any]]], None],
    stop: threading.Event | None = None,
) -> Generator[bytes, None, None]:
    base = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "model": model,
        "system_fingerprint": None,
    }
    import time

    created = int(time.time())
    try:
        yield from _deltas(first, events, run_id, base, include_usage, count, created, stop)
    finally:  # the client went away (or the run ended): the run's own generator ends now
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _deltas(
    first: str | RunOutcome,
    events: Iterator[str | RunOutcome],
    run_id: str,
    base: dict[str, Any],
    include_usage: bool,
    count: Callable[[list[dict[str, Any]]], None],
    created: int,
    stop: threading.Event | None,
) -> Iterator[bytes]:
    """``_stream``'s chunks: the role, each delta of the run, its end (or its error)."""

    def chunk(delta: dict[str, Any], finish: str | None, created: int) -> dict[str, Any]:
        return {
            **base,
            "created": created,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield _sse(chunk({"role": "assistant", "content": ""}, None, created))
    outcome: RunOutcome | None = None
    try:
        item: str | RunOutcome | None = first
        while item is not None:
            if stop is not None and stop.is_set():
                return  # the response ended: nobody reads the rest
            if isinstance(item, RunOutcome):
                outcome = item
            elif item:
                yield _sse(chunk({"content": item}, None, created))
            item = next(events, None)
    except CairnError as exc:
        if isinstance(exc, SlateWriteRefused):
            count(exc.details["writes"])
        error = openai_error(exc.status, exc.code, exc.message, exc.details)
        yield _sse({"error": {**error, "request_id": None}})
        return
    except Exception:  # the status line is already sent: report in the stream
        # As the error handler does: the details go to the log, never to the client.
        log.exception("run %s failed while streaming", run_id)
        error = openai_error(500, "internal_error", "internal server error")
        yield _sse({"error": {**error, "request_id": None}})
        return
    final = chunk({}, "stop", created)
    if outcome is not None:
        # The run's slate-write outcomes ride on the last chunk, where OpenAI clients ignore them.
        final["cairn"] = outcome.cairn()
        if not outcome.replayed:
            count(outcome.writes)
    yield _sse(final)
    if include_usage and outcome is not None:
        yield _sse({**base, "created": created, "choices": [], "usage": outcome.usage})
    yield _sse("[DONE]")


@router.post("/v1/local/chat/completions", response_model=None)
def chat_completions_by_model(
    body: ChatCompletionCreate,
    request: Request,
    tenant: str = Depends(require_tenant),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key"),
    conversation_id: str | None = Header(None, alias="X-Conversation-ID"),
) -> Any:
    """The ladder named by ``model`` as a chat model (one base URL for every ladder)."""
    if not body.model:
        raise InvalidInput(
            "'model' must name the ladder to run (GET /v1/local/models lists them)",
            code="model_required",
            status=400,
            details={"param": "model"},
        )
    return chat_completions(body.model, body, request, tenant, idempotency_key, conversation_id)


def _context_id(header: str | None, meta: dict[str, Any]) -> str:
    """The run's conversation: ``X-Conversation-ID`` (a header in another script arrives as
    UTF-8 bytes read as Latin-1), else ``metadata.conversation_id``. Checked before anything
    runs: a ``memory.turn`` hook stores it with the turn, whose limit it must fit (one too
    long was refused only after the steps had run and written their slates)."""
    value = (header_text(header) or "").strip()
    field = "header.X-Conversation-ID"
    if not value:
        value, field = str(meta.get("conversation_id") or "").strip(), "metadata.conversation_id"
    if len(value) > KEY_MAX_LENGTH:
        problem = f"must be at most {KEY_MAX_LENGTH} characters (got {len(value)})"
        raise InvalidInput(
            f"invalid request at '{field}': a conversation id {problem}",
            details=[{"field": field, "type": "string_too_long", "message": problem}],
        )
    return value


def _model(ladder: Ladder) -> dict[str, Any]:
    try:
        created = int(ladder.path.stat().st_mtime)
    except OSError:
        created = 0
    return {
        "id": ladder.name,
        "object": "model",
        "created": created,
        "owned_by": "cairn",
        "description": ladder.spec.description,
    }


def _ladder_model(request: Request, model_id: str) -> Ladder:
    try:
        return services_of(request).ladders.get(model_id)
    except NotFound:
        raise NotFound(
            f"no model {model_id!r}: the models are the ladders (GET /v1/local/models)",
            code="model_not_found",
            details={"param": "model"},
        ) from None


@router.get("/v1/local/models")
def list_models(request: Request, tenant: str = Depends(require_tenant)) -> dict[str, Any]:
    """Every ladder as an OpenAI model."""
    return {"object": "list", "data": [_model(x) for x in services_of(request).ladders.all()]}


@router.get("/v1/local/models/{model_id}")
def get_model(
    model_id: str, request: Request, tenant: str = Depends(require_tenant)
) -> dict[str, Any]:
    """One ladder as an OpenAI model; 404 ``model_not_found``."""
    return _model(_ladder_model(request, model_id))


@router.get("/v1/local/{ladder}/models")
def list_ladder_models(
    ladder: str, request: Request, tenant: str = Depends(require_tenant)
) -> dict[str, Any]:
    """The per-ladder base URL's model list: the ladder itself."""
    return {"object": "list", "data": [_model(services_of(request).ladders.get(ladder))]}


@router.get("/v1/local/{ladder}/models/{model_id}")
def get_ladder_model(
    ladder: str, model_id: str, request: Request, tenant: str = Depends(require_tenant)
) -> dict[str, Any]:
    """The per-ladder base URL's model: the ladder, under its own name only."""
    target = services_of(request).ladders.get(ladder)
    if model_id != target.name:
        raise NotFound(
            f"no model {model_id!r} at this base URL: it serves {target.name!r}",
            code="model_not_found",
            details={"param": "model"},
        )
    return _model(target)


def _summary(r: RunRecord) -> dict[str, Any]:
    return {
        "id": r.id,
        "ladder": r.ladder,
        "status": r.status,
        "model": r.model,
        "user": r.user_id or None,
        "created_at": r.created_at.isoformat().replace("+00:00", "Z"),
        "finished_at": r.finished_at.isoformat().replace("+00:00", "Z") if r.finished_at else None,
        "duration_ms": r.duration_ms,
        "error": r.error,
    }


@router.get("/v1/runs")
def list_runs(
    request: Request,
    tenant: str = Depends(require_tenant),
    ladder: str | None = Query(None, max_length=256),
    status: Literal["running", "completed", "failed"] | None = Query(None),
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict[str, Any]:
    """The tenant's ladder runs, newest first: ``{runs, total}``."""
    runs, total = ladder_runtime(request).runs.list(
        tenant, ladder=ladder, status=status, limit=limit, offset=offset
    )
    return {"runs": [_summary(r) for r in runs], "total": total}


@router.get("/v1/runs/{run_id}")
def get_run(run_id: str, request: Request, tenant: str = Depends(require_tenant)) -> dict[str, Any]:
    """One run with its trace (steps, rendered messages, replies, slate reads and writes, hook
    results; secrets redacted) and the response it gave."""
    record = ladder_runtime(request).runs.get(tenant, run_id)
    if record is None:
        raise NotFound(f"no run {run_id!r}", code="run_not_found")
    return {
        **_summary(record),
        "effects": record.effects,
        "trace": record.trace,
        "response": record.response,
    }
