"""Ladders and runs: ``client.ladders`` (chat completions, models) and ``client.runs``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from cairn.client._base import Call, clean_params, path_segment
from cairn.client._errors import UnexpectedResponseError, error_class
from cairn.client._feature_models import ChatChunk, ChatCompletion, ModelList, Run, RunList

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn

RunStatus = Literal["running", "completed", "failed"]


def chat_call(
    ladder: str,
    messages: list[dict[str, Any]],
    model: str | None,
    user: str | None,
    idempotency_key: str | None,
    conversation_id: str | None,
    options: dict[str, Any],
) -> Call[ChatCompletion]:
    body: dict[str, Any] = {"messages": messages, "stream": False, **options}
    if model is not None:
        body["model"] = model
    if user is not None:
        body["user"] = user
    headers: dict[str, str] = {}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    if conversation_id and conversation_id.isascii():
        headers["X-Conversation-ID"] = conversation_id
    elif conversation_id:  # (httpx sends ASCII headers only: another script goes in the body)
        body["metadata"] = {**(body.get("metadata") or {}), "conversation_id": conversation_id}
    # The Idempotency-Key is the run id: a repeat replays the recorded run.
    return Call(
        "POST",
        f"/v1/local/{path_segment(ladder)}/chat/completions",
        ChatCompletion,
        json=body,
        headers=headers,
        idempotent=bool(idempotency_key),
    )


def stream_call(
    ladder: str,
    messages: list[dict[str, Any]],
    model: str | None,
    user: str | None,
    idempotency_key: str | None,
    conversation_id: str | None,
    options: dict[str, Any],
) -> Call[ChatChunk]:
    call = chat_call(ladder, messages, model, user, idempotency_key, conversation_id, options)
    return Call(
        call.method,
        call.path,
        ChatChunk,
        json={**call.json, "stream": True},
        headers=call.headers,
        idempotent=False,
    )


def parse_event(line: str) -> ChatChunk | None:
    """One server-sent event line: a chunk, ``None`` for anything that is not data.
    Raises ``StopIteration``-free markers: ``[DONE]`` gives an empty-id sentinel chunk."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return ChatChunk(id="")
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise UnexpectedResponseError(f"not a JSON event: {data[:200]!r}") from exc
    error = event.get("error") if isinstance(event, dict) else None
    if isinstance(error, dict):
        # The status line (200) was already sent when the run failed: the error is an event.
        code = str(error.get("code") or "internal_error")
        status = 500 if code == "internal_error" else 422
        raise error_class(status)(
            str(error.get("message") or code),
            code=code,
            status=status,
            details=error.get("details"),
            request_id=error.get("request_id"),
        )
    return ChatChunk.model_validate(event)


def chunks(lines: Iterable[str]) -> Iterator[ChatChunk]:
    for line in lines:
        chunk = parse_event(line)
        if chunk is None:
            continue
        if not chunk.id:
            return
        yield chunk


def models_call() -> Call[ModelList]:
    return Call("GET", "/v1/local/models", ModelList)


def runs_call(
    ladder: str | None, status: str | None, limit: int | None, offset: int | None
) -> Call[RunList]:
    return Call(
        "GET",
        "/v1/runs",
        RunList,
        params=clean_params({"ladder": ladder, "status": status, "limit": limit, "offset": offset}),
    )


def run_call(run_id: str) -> Call[Run]:
    return Call("GET", f"/v1/runs/{path_segment(run_id)}", Run)


class Ladders:
    """``client.ladders``: each ladder is an OpenAI-compatible chat model."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def chat(
        self,
        ladder: str,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        user: str | None = None,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
        **options: Any,
    ) -> ChatCompletion:
        """Run the ladder on ``messages`` (``POST /v1/local/{ladder}/chat/completions``).
        ``options`` are OpenAI sampling options (temperature, max_tokens, ...)."""
        return self._client._send(
            chat_call(ladder, messages, model, user, idempotency_key, conversation_id, options)
        )

    def stream(
        self,
        ladder: str,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        user: str | None = None,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
        **options: Any,
    ) -> Iterator[ChatChunk]:
        """Run the ladder and yield its answer as it is produced (``stream: true``); each
        chunk's ``text`` is the new content. An error before the first token raises like any
        call; one during the stream raises an ``APIError`` from the event. Never retried."""
        call = stream_call(ladder, messages, model, user, idempotency_key, conversation_id, options)
        yield from chunks(self._client._stream_lines(call))

    def models(self) -> ModelList:
        """Every ladder as an OpenAI model (``GET /v1/local/models``)."""
        return self._client._send(models_call())


class AsyncLadders:
    """``client.ladders`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def chat(
        self,
        ladder: str,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        user: str | None = None,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
        **options: Any,
    ) -> ChatCompletion:
        """Run the ladder on ``messages`` (see ``Ladders.chat``)."""
        return await self._client._send(
            chat_call(ladder, messages, model, user, idempotency_key, conversation_id, options)
        )

    async def stream(
        self,
        ladder: str,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        user: str | None = None,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
        **options: Any,
    ) -> AsyncIterator[ChatChunk]:
        """Run the ladder and yield its answer as it is produced (see ``Ladders.stream``)."""
        call = stream_call(ladder, messages, model, user, idempotency_key, conversation_id, options)
        async for line in self._client._stream_lines(call):
            chunk = parse_event(line)
            if chunk is None:
                continue
            if not chunk.id:
                return
            yield chunk

    async def models(self) -> ModelList:
        """Every ladder as an OpenAI model."""
        return await self._client._send(models_call())


class Runs:
    """``client.runs``: recorded ladder runs with their traces."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def list(
        self,
        *,
        ladder: str | None = None,
        status: RunStatus | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> RunList:
        """The tenant's runs, newest first."""
        return self._client._send(runs_call(ladder, status, limit, offset))

    def get(self, run_id: str) -> Run:
        """One run with its trace (``NotFoundError`` code ``run_not_found``)."""
        return self._client._send(run_call(run_id))


class AsyncRuns:
    """``client.runs`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def list(
        self,
        *,
        ladder: str | None = None,
        status: RunStatus | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> RunList:
        """The tenant's runs, newest first."""
        return await self._client._send(runs_call(ladder, status, limit, offset))

    async def get(self, run_id: str) -> Run:
        """One run with its trace."""
        return await self._client._send(run_call(run_id))
