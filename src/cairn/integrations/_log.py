"""A session's history as an ordered log of JSON records in Cairn, shared by the adapters.

Each record is one episode of a subject that belongs to the session alone
(``<prefix>:<session_id>``, hashed when the id is not a valid subject id), so the timeline
returns the records in order (``occurred_at``, then insertion) and clearing the session is one
subject deletion. The functions here build requests and read pages; the adapters send them
with a sync or an async client.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from cairn.client import Episode, EpisodeCreate, Scope, Timeline
from cairn.core.scope import Scope as CoreScope
from cairn.core.scope import check_new_user
from cairn.core.subject_id import is_subject_id
from cairn.core.text import NUL

KEY_LIMIT = 256  # the longest conversation id / user id Cairn accepts

_SUBJECT_SAFE = re.compile(r"^[A-Za-z0-9_.\-:]{1,200}$")
BATCH = 100  # the episode batch endpoint's limit
PAGE = 1000  # the timeline's largest page


def log_subject(prefix: str, session_id: str) -> str:
    """The subject that holds a session's records. Readable ids are kept as they are; any
    other id (spaces, non-ASCII, too long) is hashed, under a prefix that cannot collide."""
    if _SUBJECT_SAFE.match(session_id):
        return f"{prefix}:{session_id}"
    return f"{prefix}-sha256:" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def conversation_key(session_id: str) -> str:
    """The session id as a turn's ``conversation_id`` (and default user id): kept when Cairn
    accepts it as it is, hashed when it is too long, blank-edged or holds a NUL."""
    usable = 0 < len(session_id) <= KEY_LIMIT and NUL not in session_id
    if usable and session_id.strip() == session_id:
        return session_id
    return "sha256:" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def default_user(key: str) -> str:
    """The user a session's turns go to when none is given: its conversation key when that
    is a subject id (the subject routes and erasure reach it), else that key hashed."""
    if is_subject_id(key):
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def turn_scope(scope: Scope | dict[str, str] | None, user_id: str | None, key: str) -> Scope:
    """The scope turns are committed to, checked now (a ``ValueError`` names the bad field)
    so that no history is written before the server would refuse the turn."""
    if scope is None:
        scope = Scope(runtime_id="default", user_id=user_id or default_user(key))
    checked = scope if isinstance(scope, Scope) else Scope.model_validate(scope)
    check_new_user(CoreScope.model_validate(checked.model_dump()))
    return checked


def record_batches(
    subject_id: str,
    records: list[dict[str, Any]],
    *,
    source: str,
    type: str,
    session_id: str,
    call: str,
) -> list[list[EpisodeCreate]]:
    """The episodes of ``records`` in batches the API accepts. Keys derived from ``call``
    make a retried batch a no-op."""
    episodes = [
        EpisodeCreate(
            subject_id=subject_id,
            source=source,
            type=type,
            payload=record,
            provenance={"session_id": session_id},
            idempotency_key=f"{call}:{index}",
        )
        for index, record in enumerate(records)
    ]
    return [episodes[start : start + BATCH] for start in range(0, len(episodes), BATCH)]


def page_params(subject_id: str, limit: int, offset: int, newest_first: bool) -> dict[str, Any]:
    """Query parameters of one ``GET /v1/timeline`` page."""
    return {
        "subject_id": subject_id,
        "limit": limit,
        "offset": offset,
        "newest_first": newest_first,
    }


class LogReader:
    """Collects a log's records page by page: all of them oldest first, or the latest
    ``limit`` (paging back from the newest end). Feed it pages until ``next_page`` is None."""

    def __init__(self, subject_id: str, type: str, limit: int | None) -> None:
        self.subject_id = subject_id
        self.type = type
        self.limit = limit
        self.episodes: list[Episode] = []
        self._offset = 0
        self._done = limit is not None and limit <= 0

    def next_page(self) -> dict[str, Any] | None:
        """The parameters of the next page to read, or None when the log is read."""
        if self._done:
            return None
        size = PAGE if self.limit is None else min(PAGE, self.limit - len(self.episodes))
        return page_params(self.subject_id, size, self._offset, self.limit is not None)

    def add(self, body: Any) -> None:
        """Take one timeline page (the JSON the endpoint returned)."""
        page = Timeline.model_validate(body)
        episodes = [e for e in page.episodes if e.type == self.type]
        if self.limit is None:
            self.episodes = self.episodes + episodes
        else:  # each older page goes in front
            self.episodes = episodes + self.episodes
        self._offset += len(page.episodes)
        full = self.limit is not None and len(self.episodes) >= self.limit
        self._done = full or not page.episodes_has_more


def read_log(reader: LogReader, fetch: Callable[[dict[str, Any]], Any]) -> list[Episode]:
    """Read a whole log with a sync ``fetch(params) -> page JSON``."""
    while (params := reader.next_page()) is not None:
        reader.add(fetch(params))
    return reader.episodes
