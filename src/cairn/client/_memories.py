"""Memories: ``client.memories`` (compile, compile jobs, search)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.client._base import Call, clean_params, path_segment
from cairn.client._errors import APITimeoutError
from cairn.client._feature_models import CompileJob, CompileJobQueued, CompileResult, SearchResult
from cairn.client._lifecycle import (
    UNSET,
    MemoryDeleted,
    MemoryDetail,
    MemoryItem,
    Unset,
    delete_memory_call,
    get_memory_call,
    update_memory_call,
)

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn


def compile_call(subject_id: str) -> Call[CompileResult]:
    # Compiling the same episodes twice creates no duplicate memory, so a retry is safe.
    return Call(
        "POST",
        "/v1/memories/compile",
        CompileResult,
        json={"subject_id": subject_id},
        idempotent=True,
    )


def compile_async_call(subject_id: str) -> Call[CompileJobQueued]:
    return Call(
        "POST",
        "/v1/memories/compile",
        CompileJobQueued,
        json={"subject_id": subject_id, "async": True},
        idempotent=False,
    )


def job_call(job_id: uuid.UUID | str) -> Call[CompileJob]:
    # (A malformed id is the server's 422, as for every other id.)
    return Call("GET", f"/v1/memories/compile/{path_segment(str(job_id))}", CompileJob)


def search_call(
    subject_id: str,
    q: str,
    kinds: list[str] | str | None,
    limit: int | None,
    semantic: bool,
    hybrid: bool,
    include_superseded: bool,
) -> Call[SearchResult]:
    params: dict[str, Any] = clean_params(
        {
            "subject_id": subject_id,
            "q": q or None,  # no query: a listing
            "limit": limit,
            "semantic": semantic or None,
            "hybrid": hybrid or None,
            "include_superseded": include_superseded or None,
        }
    )
    if isinstance(kinds, str):  # "fact" or "turn,note": the API's comma-separated form
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    if kinds:
        params["kind"] = list(kinds)
    return Call("GET", "/v1/memories/search", SearchResult, params=params)


class Memories:
    """``client.memories``: turn episodes into memories and search them."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def compile(self, subject_id: str) -> CompileResult:
        """Compile the subject's uncompiled episodes now (one batch; see ``has_more``)."""
        return self._client._send(compile_call(subject_id))

    def get(self, memory_id: uuid.UUID | str) -> MemoryDetail:
        """One memory with its supersession chain (``NotFoundError`` ``memory_not_found``)."""
        return self._client._send(get_memory_call(memory_id))

    def update(
        self,
        memory_id: uuid.UUID | str,
        *,
        content: str | None = None,
        kind: str | None = None,
        confidence: float | None = None,
        valid_from: datetime | str | None = None,
        valid_to: datetime | str | Unset | None = UNSET,
        editor: str | None = None,
        note: str | None = None,
    ) -> MemoryItem:
        """Correct a memory: a new version supersedes it (``ConflictError``
        ``memory_superseded`` naming the current version when it was already replaced).
        Dates are ``datetime``s or ISO 8601 strings; ``valid_to=None`` clears the end of
        validity (left out, it is kept)."""
        return self._client._send(
            update_memory_call(
                memory_id,
                content=content,
                kind=kind,
                confidence=confidence,
                valid_from=valid_from,
                valid_to=valid_to,
                editor=editor,
                note=note,
            )
        )

    def delete(self, memory_id: uuid.UUID | str) -> MemoryDeleted:
        """Forget one memory; compiling the same episodes again does not re-create it."""
        return self._client._send(delete_memory_call(memory_id))

    def compile_async(self, subject_id: str) -> CompileJobQueued:
        """Queue a compile job (202); follow it with ``job`` or ``wait``."""
        return self._client._send(compile_async_call(subject_id))

    def job(self, job_id: uuid.UUID | str) -> CompileJob:
        """A compile job of the caller's tenant (``NotFoundError`` ``job_not_found``)."""
        return self._client._send(job_call(job_id))

    def wait(
        self, job_id: uuid.UUID | str, *, timeout: float = 60.0, interval: float = 0.2
    ) -> CompileJob:
        """Poll the job until it has finished; ``APITimeoutError`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise APITimeoutError(f"compile job {job_id} still {job.status} after {timeout}s")
            time.sleep(interval)

    def search(
        self,
        subject_id: str,
        q: str = "",
        *,
        kinds: list[str] | str | None = None,
        limit: int | None = None,
        semantic: bool = False,
        hybrid: bool = False,
        include_superseded: bool = False,
    ) -> SearchResult:
        """Memories of the subject ranked by relevance (``score`` in [0, 1]); without ``q``,
        the subject's memories (of ``kinds``) newest first, unscored."""
        return self._client._send(
            search_call(subject_id, q, kinds, limit, semantic, hybrid, include_superseded)
        )


class AsyncMemories:
    """``client.memories`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def compile(self, subject_id: str) -> CompileResult:
        """Compile the subject's uncompiled episodes now (one batch; see ``has_more``)."""
        return await self._client._send(compile_call(subject_id))

    async def get(self, memory_id: uuid.UUID | str) -> MemoryDetail:
        """One memory with its supersession chain (``NotFoundError`` ``memory_not_found``)."""
        return await self._client._send(get_memory_call(memory_id))

    async def update(self, memory_id: uuid.UUID | str, **changes: Any) -> MemoryItem:
        """Correct a memory (the keyword arguments of ``Cairn.memories.update``)."""
        fields = ("content", "kind", "confidence", "valid_from", "valid_to", "editor", "note")
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"unknown argument(s): {', '.join(sorted(unknown))}")
        args: dict[str, Any] = {f: changes.get(f) for f in fields}
        args["valid_to"] = changes.get("valid_to", UNSET)
        return await self._client._send(update_memory_call(memory_id, **args))

    async def delete(self, memory_id: uuid.UUID | str) -> MemoryDeleted:
        """Forget one memory; compiling the same episodes again does not re-create it."""
        return await self._client._send(delete_memory_call(memory_id))

    async def compile_async(self, subject_id: str) -> CompileJobQueued:
        """Queue a compile job (202); follow it with ``job`` or ``wait``."""
        return await self._client._send(compile_async_call(subject_id))

    async def job(self, job_id: uuid.UUID | str) -> CompileJob:
        """A compile job of the caller's tenant."""
        return await self._client._send(job_call(job_id))

    async def wait(
        self, job_id: uuid.UUID | str, *, timeout: float = 60.0, interval: float = 0.2
    ) -> CompileJob:
        """Poll the job until it has finished; ``APITimeoutError`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            job = await self.job(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise APITimeoutError(f"compile job {job_id} still {job.status} after {timeout}s")
            await asyncio.sleep(interval)

    async def search(
        self,
        subject_id: str,
        q: str = "",
        *,
        kinds: list[str] | str | None = None,
        limit: int | None = None,
        semantic: bool = False,
        hybrid: bool = False,
        include_superseded: bool = False,
    ) -> SearchResult:
        """Memories of the subject ranked by relevance (``score`` in [0, 1]); without ``q``,
        the subject's memories (of ``kinds``) newest first, unscored."""
        return await self._client._send(
            search_call(subject_id, q, kinds, limit, semantic, hybrid, include_superseded)
        )
