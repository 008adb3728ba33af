"""A stated name leaves with the episode that stated it.

The heuristic compiler names a speaker known only by role ("User") by what they said their
name is ("my name is Maya"): their later facts read "Maya works at Initech" and their turns
are indexed with the name among their keywords (``cairn.engine.compile.heuristic``). When the
episode that stated the name is deleted, those copies go too: each such memory is rewritten in
place (no new version keeps the old text) to the name the speaker still has on record, or to
their label when none is left.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cairn.core.analysis import content_digest, cut_text
from cairn.core.memories import SUMMARY_CHARS, Memory
from cairn.core.scope import Scope
from cairn.engine.compile.runner import stated_names
from cairn.engine.compile.text import date_keywords, entities
from cairn.store import UnitOfWork


def removed_names(removed: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """``(speaker, name)`` of the name facts among deleted memories' ``(kind, metadata)``."""
    out: list[tuple[str, str]] = []
    for kind, metadata in removed:
        slot = str(metadata.get("slot") or "")
        speaker, name = metadata.get("speaker"), metadata.get("value")
        if kind == "profile_fact" and slot.endswith(":name") and speaker and name:
            out.append((str(speaker), str(name)))
    return out


def unname(
    tx: UnitOfWork,
    tenant_id: str,
    scope: Scope,
    removed: list[tuple[str, str]],
    now: datetime,
) -> int:
    """Take each removed ``(speaker, name)`` out of the partition's memories (``tx`` is a
    write unit holding the partition's lock); returns how many memories changed."""
    if not removed:
        return 0
    left = stated_names(tx, tenant_id, scope)  # after the deletion (an older name may be back)
    changed = 0
    for speaker, name in removed:
        label = speaker.lower()
        instead = left.get(label)
        if instead == name:
            continue  # still stated elsewhere
        for memory in tx.lifecycle.naming(tenant_id, scope, name):
            if str(memory.metadata.get("speaker") or "").lower() != label:
                continue
            if _rewrite(tx, memory, name, instead, speaker, now):
                changed += 1
    return changed


def _rewrite(
    tx: UnitOfWork, memory: Memory, name: str, instead: str | None, speaker: str, now: datetime
) -> bool:
    meta = dict(memory.metadata)
    if memory.kind == "turn":
        # The compiler appends the name to the date keywords: exactly that name, not the end of
        # another ("Mary Ann" when "Ann" is removed).
        dates = " ".join(date_keywords([str(meta.get("date") or ""), *meta.get("dates", [])]))
        if str(meta.get("keywords") or "").removeprefix(dates).strip() != name:
            return False
        meta["keywords"] = f"{dates} {instead or ''}".strip()
        text = (memory.content, memory.summary, meta)
        tx.lifecycle.rewrite(memory, text, None, now)
        return True
    subject = instead or speaker
    meta["subject"] = subject
    if not memory.content.startswith(name):  # (a name fact: "User's name is …")
        tx.lifecycle.rewrite(memory, (memory.content, memory.summary, meta), None, now)
        return True
    content = subject + memory.content[len(name) :]
    meta["entities"] = entities(content)
    slot_start = memory.valid_from if meta.get("slot") else None
    summary = cut_text(content, SUMMARY_CHARS)
    tx.lifecycle.rewrite(memory, (content, summary, meta), content_digest(content, slot_start), now)
    return True
