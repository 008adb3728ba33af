"""One memory or episode at a time: read with history, correct, forget, delete.

A correction never edits a memory in place: it stores a new version that supersedes the old
one (history stays readable), with provenance naming the editor and the time, and it is
searchable (full text at once, in the same transaction; vectors before the call returns).
Forgetting leaves a tombstone so that compiling the same episodes again does not bring the
memory back (see ``cairn.store.lifecycle``).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.core.analysis import content_terms, cut_text
from cairn.core.episodes import Episode
from cairn.core.ids import iso, utcnow
from cairn.core.memories import SUMMARY_CHARS, Memory, validity_problem
from cairn.core.scope import Scope
from cairn.core.subject_id import canonical_id
from cairn.core.transfer import EXPORT_FORMAT, EXPORT_VERSION
from cairn.engine.compile.drafts import KINDS, memory_id
from cairn.engine.compile.heuristic import messages_of
from cairn.engine.compile.text import entities, normalize_for_hash
from cairn.engine.erasure_watch import announce, forget_locally
from cairn.engine.stated_names import removed_names, unname
from cairn.errors import Conflict, InvalidInput, NotFound
from cairn.store import Store
from cairn.store.partitions import PartitionSelector

if TYPE_CHECKING:
    from cairn.engine.backfill import EmbeddingBackfill
    from cairn.engine.embedders import Embedder
    from cairn.engine.search_caches import SearchCaches
    from cairn.store import UnitOfWork

# Metadata derived from the old text: a correction must not keep it (it would index the old
# words under the new version). When the text changes, so are the dates it resolved; its
# entities are found again in the new text, and a fact's ``value`` is kept only if the new
# text still says it (``_of_new_text``).
_DERIVED_FROM_TEXT = ("keywords",)
_DERIVED_FROM_CONTENT = ("dates",)


@dataclass(frozen=True)
class MemoryCorrection:
    """What a correction changes; ``None`` keeps the old value (``reopen`` clears the old
    ``valid_to``: the fact holds again with no end)."""

    content: str | None = None
    kind: str | None = None
    confidence: float | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    note: str | None = None
    reopen: bool = False


@dataclass
class MemoryHistory:
    memory: Memory
    replaces: list[Memory] = field(default_factory=list)  # newest first
    replaced_by: list[Memory] = field(default_factory=list)  # oldest first; last is current


def _missing(memory_id_: uuid.UUID) -> NotFound:
    return NotFound(f"no memory {memory_id_}", code="memory_not_found")


def get_episode(store: Store, tenant_id: str, episode_id: uuid.UUID) -> Episode:
    episode = store.episodes.get(tenant_id, episode_id)
    if episode is None:
        raise NotFound(f"no episode {episode_id}", code="episode_not_found")
    return episode


def memory_history(store: Store, tenant_id: str, memory_id_: uuid.UUID) -> MemoryHistory:
    """The memory with the versions it replaced and the versions that replaced it."""
    with store.snapshot() as tx:
        memory = tx.lifecycle.memory(tenant_id, memory_id_)
        if memory is None or memory.status == "deleted":
            raise _missing(memory_id_)
        return MemoryHistory(
            memory,
            tx.lifecycle.replaced(tenant_id, memory),
            tx.lifecycle.replaced_by(tenant_id, memory),
        )


def correct_memory(
    store: Store,
    tenant_id: str,
    memory_id_: uuid.UUID,
    change: MemoryCorrection,
    editor: str,
    *,
    embedder: Embedder | None = None,
    backfill: EmbeddingBackfill | None = None,
) -> Memory:
    """Store the corrected version of an active memory; the old one is superseded by it.
    With an ``embedder`` the new version has its vector before this returns (that one text
    only: the partition's other memories without a vector, thousands after a big compile,
    are the ``backfill``'s, told here, never the request's)."""
    _check(change)
    now = utcnow()
    with store.transaction() as tx:
        old = _locked(tx, tenant_id, memory_id_)
        if old.status != "active":
            chain = tx.lifecycle.replaced_by(tenant_id, old)
            current = chain[-1].id if chain else old.superseded_by
            raise Conflict(
                f"memory {memory_id_} was superseded; correct the current version {current}",
                code="memory_superseded",
                details={"current_id": str(current) if current else None},
            )
        row = _corrected_row(old, change, editor, now)
        _check_changes(old, row)
        _check_validity(row["valid_from"], row["valid_to"])
        created = tx.memories.insert_new([row])
        if not created:
            raise Conflict(
                f"memory {memory_id_} was already corrected to this content",
                code="memory_superseded",
                details={"current_id": str(row["id"])},
            )
        row["id"] = created[0].id  # (another partition may hold the derived id)
        tx.memories.supersede(old.id, row["id"], now, now)
    with store.snapshot() as tx:
        stored = tx.lifecycle.memory(tenant_id, row["id"])
    assert stored is not None
    if embedder is not None:
        from cairn.engine.search import embed_memory

        embed_memory(store, embedder, tenant_id, stored)
    if backfill is not None:
        backfill.notify(tenant_id, old.scope)
    return stored


def _check(change: MemoryCorrection) -> None:
    fields = (change.content, change.kind, change.confidence, change.valid_from, change.valid_to)
    if all(v is None for v in fields) and not change.reopen:
        raise InvalidInput(
            "nothing to correct: give content, kind, confidence, valid_from or valid_to",
            code="empty_correction",
        )
    if change.kind is not None and change.kind not in KINDS:
        raise InvalidInput(
            f"unknown kind {change.kind}; kinds are {', '.join(KINDS)}", code="unknown_kind"
        )
    if change.content is not None and not change.content.strip():
        detail = {"field": "content", "type": "value_error", "message": "must not be blank"}
        raise InvalidInput("invalid request at 'content': must not be blank", details=[detail])


def _check_changes(old: Memory, row: dict[str, Any]) -> None:
    """A correction whose new version would read exactly as the old one (content, kind,
    confidence, validity) changes nothing: no new version (``empty_correction``)."""
    fields = ("content", "kind", "confidence", "valid_from", "valid_to")
    if all(row[k] == getattr(old, k) for k in fields):
        raise InvalidInput(
            "nothing to correct: the corrected version would be the same as this one",
            code="empty_correction",
        )


def _of_new_text(metadata: dict[str, Any], content: str) -> dict[str, Any]:
    """A corrected text's metadata: what the old text alone said goes (``User works at
    Acme`` corrected to ``… at Initech`` kept ``value: Acme`` and the entity ``Acme``, served
    even once the old version was forgotten)."""
    out = {k: v for k, v in metadata.items() if k not in _DERIVED_FROM_CONTENT}
    if "entities" in out:
        out["entities"] = entities(content)
    if "value" in out and str(out["value"]).casefold() not in content.casefold():
        del out["value"]
    return out


def _check_validity(valid_from: datetime | None, valid_to: datetime | None) -> None:
    problem = validity_problem(valid_from, valid_to)
    if problem is not None:
        raise InvalidInput(problem, code="invalid_validity")


def _corrected_row(
    old: Memory, change: MemoryCorrection, editor: str, now: datetime
) -> dict[str, Any]:
    content = change.content if change.content is not None else old.content
    kind = change.kind or old.kind
    # The hash names this version of this memory: equal corrections of one version collide
    # (and the second is refused), and the old text's hash stays the old row's (its
    # tombstone role if it is ever forgotten).
    basis = normalize_for_hash(content) + "\x1fcorrects\x1f" + str(old.id)
    content_hash = hashlib.sha256(basis.encode()).hexdigest()
    metadata = {k: v for k, v in old.metadata.items() if k not in _DERIVED_FROM_TEXT}
    if content != old.content:
        metadata = _of_new_text(metadata, content)
    correction = {"editor": editor, "at": now.isoformat(), "replaces": str(old.id)}
    if change.note:
        correction["note"] = change.note
    metadata["correction"] = correction
    return {
        "id": memory_id(old.tenant_id, old.scope, kind, content_hash),
        "tenant_id": old.tenant_id,
        "runtime_id": old.scope.runtime_id,
        "user_id": old.scope.user_id,
        "agent_id": old.scope.agent_id,
        "session_id": old.session_id,
        "kind": kind,
        "content": content,
        "summary": old.summary if change.content is None else _summary_of(content, old),
        "confidence": old.confidence if change.confidence is None else change.confidence,
        "valid_from": change.valid_from or old.valid_from,
        "valid_to": None if change.reopen else change.valid_to or old.valid_to,
        "status": "active",
        "source_episode_ids": [str(i) for i in old.source_episode_ids],
        "metadata": metadata,
        "content_hash": content_hash,
        "superseded_by": None,
        "embedding": None,
        "created_at": now,
        "updated_at": now,
    }


def _summary_of(content: str, old: Memory) -> str:
    """A corrected text's short form, as the compiler makes one: its first 200 characters,
    without a turn's ``Speaker: `` (it was left blank)."""
    speaker = old.metadata.get("speaker")
    prefix = f"{speaker}: " if isinstance(speaker, str) and speaker else ""
    text = content[len(prefix) :] if prefix and content.startswith(prefix) else content
    return cut_text(text.strip(), SUMMARY_CHARS)


def _locked(tx: UnitOfWork, tenant_id: str, memory_id_: uuid.UUID) -> Memory:
    """The memory (not forgotten) read again once its partition's compile lock is held: a
    deletion that committed meanwhile may have rewritten it, given it another id (a deleted
    name) or merged it away (PostgreSQL reads what committed before each statement)."""
    memory = tx.lifecycle.memory(tenant_id, memory_id_)
    if memory is None or memory.status == "deleted":
        raise _missing(memory_id_)
    tx.compiling.lock_scope(tenant_id, memory.scope)
    memory = tx.lifecycle.memory(tenant_id, memory_id_)
    if memory is None or memory.status == "deleted":
        raise _missing(memory_id_)
    return memory


def forget_memory(
    store: Store,
    tenant_id: str,
    memory_id_: uuid.UUID,
    by: str,
    *,
    caches: SearchCaches | None = None,
) -> Memory:
    """Forget one memory (any version); the next compile will not re-create it. ``caches``
    (the process's) drop what they hold of it (``_after_erase``)."""
    now = utcnow()
    with store.transaction() as tx:
        memory = _locked(tx, tenant_id, memory_id_)
        tx.lifecycle.forget(memory, by, now)
        announce(tx, tenant_id)
    _after_erase(store, caches, tenant_id, [memory.scope])
    return memory


def delete_episode(
    store: Store, tenant_id: str, episode_id: uuid.UUID, *, caches: SearchCaches | None = None
) -> int:
    """Delete one episode and the memories derived from it alone; how many memories went."""
    episode = get_episode(store, tenant_id, episode_id)
    with store.transaction() as tx:
        tx.compiling.lock_scope(tenant_id, episode.scope)
        # Its words, as its neighbours' memories were indexed (and embedded) with them: those
        # the rest of its session does not say too (those stay, whoever's neighbour said them).
        words = _words_of([episode])
        others: list[Episode] = []
        if episode.session_id:
            session = tx.compiling.sessions(tenant_id, episode.scope, [episode])
            others = [e for e in session.get(episode.session_id, []) if e.id != episode.id]
            words -= _words_of(others)
        removed = tx.lifecycle.delete_episode(tenant_id, episode_id)
        renamed = unname(tx, tenant_id, episode.scope, removed_names(removed), utcnow())
        if others:
            # The session's summary went with the episode it quoted: the next compile of the
            # partition summarises what is left (through the session's latest episode).
            tx.compiling.mark_compiled([others[-1].id], compiled=False)
        changed = tx.memories.drop_context_words(
            tenant_id, episode.scope, episode.session_id, words, utcnow()
        )
        if changed or renamed:
            tx.lifecycle.bump_vectors(tenant_id, episode.scope)
        # Last, after every re-index above: merged segments keep no term of the deleted one.
        tx.lifecycle.purge_index(tenant_id)
        announce(tx, tenant_id)
    _after_erase(store, caches, tenant_id, [episode.scope])
    return len(removed)


def _words_of(episodes: list[Episode]) -> set[str]:
    return {w for ep in episodes for msg in messages_of(ep) for w in content_terms(msg.text)}


def erase_subject(
    store: Store, tenant_id: str, subject_id: str, *, caches: SearchCaches | None = None
) -> dict[str, int]:
    """Delete everything of the subject's partition ``("default", id, "")``."""
    scope = Scope.for_subject(subject_id)
    erased = erase_partitions(
        store, tenant_id, subject_id, scope.runtime_id, scope.agent_id, caches=caches
    )
    return dict(erased["deleted"])


def erase_partitions(
    store: Store,
    tenant_id: str,
    user_id: str,
    runtime_id: str | None = None,
    agent_id: str | None = None,
    *,
    caches: SearchCaches | None = None,
) -> dict[str, Any]:
    """Delete everything of the user's partitions (those of one runtime or agent when given),
    whichever API wrote it: rows, index entries, vectors, jobs, ladder runs and per-user
    slates; then cached vectors and SQLite's write-ahead log. Returns ``{"partitions":
    [scopes that held data], "deleted": {table: rows}}``."""
    if not user_id:
        raise InvalidInput("user_id must not be empty", code="validation_error")
    runtime, agent = (None if v is None else canonical_id(v) for v in (runtime_id, agent_id))
    # The user in NFC, and in NFD: a partition stored under the decomposed form that migration
    # 0025 could not rename (its NFC form held data too) is the same person.
    users = dict.fromkeys(unicodedata.normalize(f, user_id) for f in ("NFC", "NFD"))
    selectors = [PartitionSelector(tenant_id, u, runtime, agent) for u in users]
    scopes: list[Scope] = []
    counts: dict[str, int] = {}
    with store.transaction() as tx:
        # A compile of these partitions running now (a turn's background compile) finishes
        # first, and one starting later finds their episodes gone: none writes memories of
        # erased episodes after the erasure.
        for scope in sorted(
            {s for sel in selectors for s in tx.lifecycle.partitions(sel)},
            key=lambda s: (s.runtime_id, s.user_id, s.agent_id),
        ):
            tx.compiling.lock_scope(tenant_id, scope)
        for selector in selectors:
            found, deleted = tx.lifecycle.erase(selector)
            scopes += found
            for table, n in deleted.items():
                counts[table] = counts.get(table, 0) + n
        if scopes:
            announce(tx, tenant_id)
    if scopes:  # (nothing held: no cache has anything of it)
        _after_erase(store, caches, tenant_id, scopes)
    return {"partitions": scopes, "deleted": counts}


def export_lines(store: Store, tenant_id: str, subject_id: str) -> Iterator[bytes]:
    """The subject's export as JSON lines: a header, then one record per stored row."""
    header = {
        "type": "header",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "subject_id": subject_id,
        "exported_at": iso(utcnow()),
    }
    yield (json.dumps(header) + "\n").encode()
    for record in store.transfer.export(tenant_id, Scope.for_subject(subject_id), utcnow()):
        yield (json.dumps(record, ensure_ascii=False) + "\n").encode()


def _after_erase(
    store: Store, caches: SearchCaches | None, tenant_id: str, scopes: list[Scope]
) -> None:
    """After an erasure committed (and logged for the other processes, which drop their
    caches within about a second): drop what this process still holds of it
    (``forget_locally``: its caches, the memos of texts' words, the remembered stems of
    indexed words) and checkpoint SQLite's write-ahead log."""
    try:
        forget_locally(store, caches, tenant_id, scopes)
    finally:
        store.lifecycle.checkpoint()
