"""Episodes, the timeline and subjects: the foundation endpoints."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.client._base import Call, body_of, clean_params, path_segment
from cairn.client._lifecycle import (
    EpisodeDeleted,
    EpisodeItem,
    ImportResult,
    delete_episode_call,
    export_call,
    get_episode_call,
    import_calls,
    merge_imports,
    parse_lines,
)
from cairn.client._models import (
    Episode,
    EpisodeBatch,
    EpisodeCreate,
    SubjectDeleted,
    SubjectList,
    Timeline,
)

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn


def create_episode_call(episode: EpisodeCreate) -> Call[Episode]:
    # With an idempotency key a repeat returns the original episode, so retrying is safe.
    return Call(
        "POST",
        "/v1/episodes",
        Episode,
        json=body_of(episode),
        idempotent=episode.idempotency_key is not None,
    )


def create_batch_call(episodes: Iterable[EpisodeCreate | dict[str, Any]]) -> Call[EpisodeBatch]:
    items = [
        e if isinstance(e, EpisodeCreate) else EpisodeCreate.model_validate(e) for e in episodes
    ]
    return Call(
        "POST",
        "/v1/episodes/batch",
        EpisodeBatch,
        json={"episodes": body_of(items)},
        idempotent=bool(items) and all(e.idempotency_key for e in items),
    )


def timeline_call(
    subject_id: str, limit: int | None, offset: int | None, newest_first: bool = False
) -> Call[Timeline]:
    params = {
        "subject_id": subject_id,
        "limit": limit,
        "offset": offset,
        "newest_first": newest_first or None,
    }
    return Call("GET", "/v1/timeline", Timeline, params=clean_params(params))


def list_subjects_call(
    limit: int | None, offset: int | None, prefix: str | None
) -> Call[SubjectList]:
    return Call(
        "GET",
        "/v1/subjects",
        SubjectList,
        params=clean_params({"limit": limit, "offset": offset, "prefix": prefix}),
    )


def delete_subject_call(subject_id: str) -> Call[SubjectDeleted]:
    return Call("DELETE", f"/v1/subjects/{path_segment(subject_id)}", SubjectDeleted)


def _episode(
    subject_id: str,
    source: str,
    type: str,
    payload: dict[str, Any],
    metadata: dict[str, Any] | None,
    provenance: dict[str, Any] | None,
    session_id: str | None,
    idempotency_key: str | None,
    occurred_at: datetime | None,
) -> EpisodeCreate:
    return EpisodeCreate(
        subject_id=subject_id,
        source=source,
        type=type,
        payload=payload,
        metadata=metadata or {},
        provenance=provenance or {},
        session_id=session_id,
        idempotency_key=idempotency_key,
        occurred_at=occurred_at,
    )


class Episodes:
    """``client.episodes``: record episodes."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def create(
        self,
        subject_id: str,
        *,
        source: str,
        type: str,
        payload: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        provenance: dict[str, Any] | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        occurred_at: datetime | None = None,
    ) -> Episode:
        """Record one episode. A repeated ``idempotency_key`` returns the original."""
        ep = _episode(
            subject_id,
            source,
            type,
            payload,
            metadata,
            provenance,
            session_id,
            idempotency_key,
            occurred_at,
        )
        return self._client._send(create_episode_call(ep))

    def create_many(self, episodes: Iterable[EpisodeCreate | dict[str, Any]]) -> EpisodeBatch:
        """Record 1-100 episodes, all or nothing (``POST /v1/episodes/batch``)."""
        return self._client._send(create_batch_call(episodes))

    def get(self, episode_id: uuid.UUID | str) -> EpisodeItem:
        """One episode (``NotFoundError`` ``episode_not_found``)."""
        return self._client._send(get_episode_call(episode_id))

    def delete(self, episode_id: uuid.UUID | str) -> EpisodeDeleted:
        """Delete one episode and the memories derived from it alone."""
        return self._client._send(delete_episode_call(episode_id))


class AsyncEpisodes:
    """``client.episodes`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def create(
        self,
        subject_id: str,
        *,
        source: str,
        type: str,
        payload: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        provenance: dict[str, Any] | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        occurred_at: datetime | None = None,
    ) -> Episode:
        """Record one episode. A repeated ``idempotency_key`` returns the original."""
        ep = _episode(
            subject_id,
            source,
            type,
            payload,
            metadata,
            provenance,
            session_id,
            idempotency_key,
            occurred_at,
        )
        return await self._client._send(create_episode_call(ep))

    async def create_many(self, episodes: Iterable[EpisodeCreate | dict[str, Any]]) -> EpisodeBatch:
        """Record 1-100 episodes, all or nothing (``POST /v1/episodes/batch``)."""
        return await self._client._send(create_batch_call(episodes))

    async def get(self, episode_id: uuid.UUID | str) -> EpisodeItem:
        """One episode (``NotFoundError`` ``episode_not_found``)."""
        return await self._client._send(get_episode_call(episode_id))

    async def delete(self, episode_id: uuid.UUID | str) -> EpisodeDeleted:
        """Delete one episode and the memories derived from it alone."""
        return await self._client._send(delete_episode_call(episode_id))


class Subjects:
    """``client.subjects``: list and delete subjects."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def list(
        self, *, limit: int | None = None, offset: int | None = None, prefix: str | None = None
    ) -> SubjectList:
        """Subjects of the caller's tenant with their episode and memory counts."""
        return self._client._send(list_subjects_call(limit, offset, prefix))

    def delete(self, subject_id: str) -> SubjectDeleted:
        """Remove everything of the subject in the caller's tenant."""
        return self._client._send(delete_subject_call(subject_id))

    def export(self, subject_id: str) -> Iterator[dict[str, Any]]:
        """Everything of the subject as export records (the header first), streamed."""
        return parse_lines(self._client._stream_lines(export_call(subject_id)))

    def import_records(self, subject_id: str, records: Iterable[dict[str, Any]]) -> ImportResult:
        """Restore export records into the subject (in batches; stored rows are skipped)."""
        places: list[list[int]] = []
        calls = import_calls(subject_id, records, places)
        return merge_imports(subject_id, (self._client._send(c) for c in calls), places)


class AsyncSubjects:
    """``client.subjects`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def list(
        self, *, limit: int | None = None, offset: int | None = None, prefix: str | None = None
    ) -> SubjectList:
        """Subjects of the caller's tenant with their episode and memory counts."""
        return await self._client._send(list_subjects_call(limit, offset, prefix))

    async def delete(self, subject_id: str) -> SubjectDeleted:
        """Remove everything of the subject in the caller's tenant."""
        return await self._client._send(delete_subject_call(subject_id))

    async def export(self, subject_id: str) -> AsyncIterator[dict[str, Any]]:
        """Everything of the subject as export records (the header first), streamed."""
        async for line in self._client._stream_lines(export_call(subject_id)):
            if line.strip():
                yield json.loads(line)

    async def import_records(
        self, subject_id: str, records: Iterable[dict[str, Any]]
    ) -> ImportResult:
        """Restore export records into the subject (in batches; stored rows are skipped)."""
        places: list[list[int]] = []
        calls = import_calls(subject_id, records, places)
        results = [await self._client._send(c) for c in calls]
        return merge_imports(subject_id, results, places)
