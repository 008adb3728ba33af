"""Write modes: how ``append``, ``overwrite`` and ``mergeByKey`` change one file's entries.

These functions only compute; ``eviction.plan_write`` calls them on a working copy of the
folder and the store commits the result.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cairn.core.slates import Entry, FileKind, FileState, canonical_json
from cairn.slates.errors import InvalidSlateWrite


@dataclass(slots=True)
class FileChange:
    """A file after a write mode was applied (before eviction)."""

    kind: FileKind
    entries: list[Entry]
    inserted: list[Entry] = field(default_factory=list)  # rows to store
    written: list[Entry] = field(default_factory=list)  # what this write wrote: never evicted
    replaced: list[Entry] = field(default_factory=list)  # stored rows it replaced
    clock: int = 0


def merge_items(content: str | Any, key: str) -> list[dict[str, Any]]:
    """The items a ``mergeByKey`` write carries: one object or an array of objects, each with
    ``key``. A string is parsed as JSON first."""
    value = content
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise InvalidSlateWrite(
                f"mergeByKey needs a JSON object or array of objects: {reason}",
                code="slate_merge_not_json",
            ) from None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InvalidSlateWrite("mergeByKey needs at least one item", code="slate_merge_not_json")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidSlateWrite(
                f"mergeByKey item {i} is not a JSON object", code="slate_merge_not_json"
            )
        if key not in item:
            raise InvalidSlateWrite(
                f"mergeByKey item {i} has no key field {key!r}",
                code="slate_merge_key_missing",
                details={"index": i, "key": key},
            )
    return items  # type: ignore[return-value]  # each item was checked to be a dict above


def _json_items(file: FileState) -> list[Any]:
    """The current items of a file about to be treated as a JSON array."""
    if file.kind == "json" or not file.entries:
        return [json.loads(e.content) for e in sorted(file.entries, key=lambda e: e.position)]
    try:
        value = json.loads(file.text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list):
        raise InvalidSlateWrite(
            f"file {file.name!r} holds text that is not a JSON array; mergeByKey needs one "
            "(overwrite it first)",
            code="slate_file_not_json",
        )
    return value


@dataclass(slots=True)
class _NewEntries:
    """Makes a write's new entries, numbered after the folder's ``clock``."""

    file: str
    clock: int
    now: datetime
    run_id: str | None
    count: Any

    def new(self, text: str, position: int | None = None) -> Entry:
        self.clock += 1
        return Entry(
            file=self.file,
            seq=self.clock,
            position=self.clock if position is None else position,
            content=text,
            tokens=self.count(text),
            written_at=self.now,
            run_id=self.run_id,
        )


def apply_mode(
    file: FileState,
    mode: str,
    content: Any,
    *,
    key: str | None,
    clock: int,
    now: datetime,
    run_id: str | None,
    count: Any,
) -> FileChange:
    """Apply one write mode to ``file``; new entries take seq numbers after ``clock``."""
    make = _NewEntries(file.name, clock, now, run_id, count)
    if mode == "overwrite":
        text = content if isinstance(content, str) else canonical_json(content)
        entry = make.new(text)
        return FileChange("text", [entry], [entry], [entry], list(file.entries), make.clock)
    if mode == "append":
        return _append(file, content, make)
    if mode == "mergeByKey":
        if not key:
            raise InvalidSlateWrite("mergeByKey needs 'key'", code="slate_merge_key_missing")
        return _merge(file, merge_items(content, key), key, make)
    raise InvalidSlateWrite(
        f"unknown write mode {mode!r}: use append, overwrite or mergeByKey",
        code="slate_invalid_write",
    )


def _append(file: FileState, content: Any, make: _NewEntries) -> FileChange:
    entries = list(file.entries)
    if file.kind == "json" and entries:
        # Keep the array valid: the content becomes one more item.
        if isinstance(content, str):
            with contextlib.suppress(json.JSONDecodeError):
                content = json.loads(content)
        text = canonical_json(content)
    else:
        text = content if isinstance(content, str) else canonical_json(content)
    entry = make.new(text)
    kind: FileKind = "json" if file.kind == "json" and entries else "text"
    return FileChange(kind, [*entries, entry], [entry], [entry], [], make.clock)


def _merge(
    file: FileState, incoming: list[dict[str, Any]], key: str, make: _NewEntries
) -> FileChange:
    entries = list(file.entries)
    replaced: list[Entry] = []
    if file.kind != "json" and entries:
        # Text that parses as a JSON array becomes one entry per item, kept in place.
        items = _json_items(file)
        replaced = entries
        base_seq = min(e.seq for e in entries)
        entries = []
        for item in items:
            make.clock += 1
            text = canonical_json(item)
            entries.append(
                Entry(
                    file.name, base_seq, make.clock, text, make.count(text), make.now, make.run_id
                )
            )
    written: list[Entry] = []
    for item in incoming:
        text = canonical_json(item)
        wanted = canonical_json(item[key])
        match = next((i for i, e in enumerate(entries) if _key_of(e.content, key) == wanted), None)
        if match is None:
            entry = make.new(text)
            entries.append(entry)
        else:
            old = entries[match]
            entry = make.new(text, position=old.position)
            entries[match] = entry
            if any(w is old for w in written):
                written = [w for w in written if w is not old]
            elif old.id is not None:
                replaced.append(old)
        written.append(entry)
    # Entries converted from text (no id yet) are stored too, but stay evictable.
    inserted = [e for e in entries if e.id is None]
    return FileChange("json", entries, inserted, written, replaced, make.clock)


def _key_of(content: str, key: str) -> str | None:
    """The item's key value as canonical JSON (so 1 and true never match), or None."""
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and key in value:
        return canonical_json(value[key])
    return None
