"""What the revisions that bring stored turns to a newer compiler rule share (``0017``,
``0022``, ``0026``): a turn's own words, and moving a partition's vector version on."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa


def turn_text(content: str, metadata: dict[str, Any]) -> str:
    """What the speaker said: the turn's content without its ``Speaker: ``."""
    speaker = metadata.get("speaker")
    prefix = f"{speaker}: " if isinstance(speaker, str) and speaker else ""
    return content[len(prefix) :] if prefix and content.startswith(prefix) else content


def bump_vector_versions(bind: Any, partitions: set[tuple[str, str, str, str]]) -> None:
    """Move on the vector version of each partition whose vectors were cleared (a clock
    value, as ``cairn.store.memory_vectors`` writes it); a partition without one has no
    vectors anyone could have cached."""
    version = time.time_ns() // 1000
    for tenant, runtime, user, agent in sorted(partitions):
        bind.execute(
            sa.text(
                "UPDATE memory_vector_versions SET version = :v WHERE tenant_id = :t "
                "AND runtime_id = :r AND user_id = :u AND agent_id = :a"
            ),
            {"v": version, "t": tenant, "r": runtime, "u": user, "a": agent},
        )
