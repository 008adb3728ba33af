"""TurnSink: a completed conversation turn is stored as one episode, idempotent per key.

The episode has ``type`` ``conversation.turn``, ``session_id`` = the conversation id and
``payload.messages`` = ``[{role, content}, …]``, so the compiler turns it into memories like any
other conversation episode. Committing a key again — with the same or different content —
returns the original commit and writes nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.core.episodes import Episode, NewEpisode
from cairn.core.memory import TURN_KEY_PREFIX, TURN_SOURCE, Turn, TurnCommit
from cairn.engine.ingest import IngestListener, record_episodes
from cairn.store import Store

TURN_EPISODE_TYPE = "conversation.turn"
# Turn keys live beside application episode keys in the same partition; the prefix
# (``core.memory.TURN_KEY_PREFIX``) keeps a turn's key from ever matching an episode the
# application stored under the same string.


def turn_episode(turn: Turn) -> NewEpisode:
    """The episode a turn is stored as."""
    return NewEpisode(
        scope=turn.scope,
        source=TURN_SOURCE,
        type=TURN_EPISODE_TYPE,
        payload={
            "conversation_id": turn.conversation_id,
            "messages": [{"role": m.role, "content": m.content} for m in turn.messages],
        },
        metadata=dict(turn.metadata),
        provenance={"turn_key": turn.idempotency_key},
        session_id=turn.conversation_id,
        idempotency_key=TURN_KEY_PREFIX + turn.idempotency_key,
        occurred_at=turn.occurred_at,
    )


def commit_turn(
    store: Store, tenant_id: str, turn: Turn, listeners: Sequence[IngestListener] = ()
) -> TurnCommit:
    """Store ``turn`` once; a repeated key returns the original (``created`` False)."""
    (episode,), created = record_episodes(store, tenant_id, [turn_episode(turn)], listeners)
    return TurnCommit(
        episode_id=episode.id,
        conversation_id=episode.session_id or turn.conversation_id,
        idempotency_key=turn.idempotency_key,
        created=created == 1,
        occurred_at=episode.occurred_at,
    )


def episode_text(episode: Episode) -> str:
    """The readable text of an episode: ``role: content`` lines for conversation payloads,
    the ``content``/``text`` field otherwise, and compact JSON as a last resort."""
    payload: dict[str, Any] = episode.payload or {}
    messages = payload.get("messages")
    if isinstance(messages, list) and messages:
        lines = []
        for m in messages:
            if isinstance(m, dict):
                role = str(m.get("role") or m.get("speaker") or "message")
                lines.append(f"{role}: {m.get('content', m.get('text', ''))}")
            else:
                lines.append(str(m))
        return "\n".join(lines)
    for key in ("content", "text", "message"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            speaker = payload.get("speaker") or payload.get("role")
            return f"{speaker}: {value}" if isinstance(speaker, str) and speaker else value
    import json

    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
