"""Eviction policies and write planning: make a write fit its folder's token limit.

``plan_write`` applies a write mode to a working copy of the folder, then, if the folder would
exceed ``tokenLimit``:

- ``FIFO`` removes whole entries oldest-written first (lowest ``seq``), across all the folder's
  files, until the folder fits;
- ``LRU`` removes entries from the least recently used file first (lowest ``last_used``; the
  file being written counts as used now), oldest entry first inside it, then the next file;
- ``reject`` raises ``SlateLimitExceeded`` and nothing changes.

What the write itself wrote is never evicted. A write whose own entries could not fit even in an
otherwise empty folder raises ``SlateEntryTooLarge`` under every policy. Token counts are exact:
after each removal the file's text is counted again, so ``usage`` is always the sum of the
files' real token counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cairn.core.slates import Entry, FileKind, FileState, FolderState, render
from cairn.slates.entries import FileChange, apply_mode
from cairn.slates.errors import SlateEntryTooLarge, SlateLimitExceeded

Counter = Callable[[str], int]


@dataclass(slots=True)
class FilePlan:
    """A file's state after the write: what the store must update."""

    name: str
    kind: FileKind
    tokens: int
    bytes: int
    last_used: int
    tags: list[str]


@dataclass(slots=True)
class WritePlan:
    inserted: list[Entry] = field(default_factory=list)
    removed: list[Entry] = field(default_factory=list)  # replaced by the write (not evictions)
    evicted: list[Entry] = field(default_factory=list)
    files: dict[str, FilePlan] = field(default_factory=dict)
    usage: int = 0
    clock: int = 0
    written: int = 0


def victims(
    state: FolderState, policy: str, work: dict[str, list[Entry]], protected: set[int]
) -> Iterator[Entry]:
    """Entries in the order the policy evicts them (a snapshot; protected ones skipped)."""
    if policy == "FIFO":
        pool = [e for entries in work.values() for e in entries if id(e) not in protected]
        yield from sorted(pool, key=lambda e: (e.seq, e.position))
        return
    files = sorted(state.files.values(), key=lambda f: (f.last_used, f.ordinal))
    for f in files:
        for e in sorted(work.get(f.name, []), key=lambda e: (e.seq, e.position)):
            if id(e) not in protected:
                yield e


def plan_write(
    state: FolderState,
    file: str,
    mode: str,
    content: Any,
    *,
    key: str | None,
    tags: list[str] | None,
    now: datetime,
    run_id: str | None,
    count: Counter,
) -> WritePlan:
    """Everything a write changes, or the error it raises; ``state`` is not modified."""
    target = state.files[file]
    change = apply_mode(
        target, mode, content, key=key, clock=state.clock, now=now, run_id=run_id, count=count
    )
    clock = change.clock
    _check_write_fits(state, change, count)
    work = {name: list(f.entries) for name, f in state.files.items()}
    work[file] = change.entries
    kinds = {name: f.kind for name, f in state.files.items()}
    kinds[file] = change.kind
    tokens = {name: f.tokens for name, f in state.files.items()}
    tokens[file] = count(render(change.kind, change.entries))
    usage = sum(tokens.values())
    last_used = {name: f.last_used for name, f in state.files.items()}
    last_used[file] = clock
    evicted: list[Entry] = []
    if usage > state.token_limit:
        evicted, usage = _evict(state, clock, change, work, kinds, tokens, last_used, count)
    assert usage <= state.token_limit, "eviction left the folder over its limit"
    plan = WritePlan(clock=clock, usage=usage, written=len(change.written))
    evicted_ids = {id(e) for e in evicted}
    plan.inserted = [e for e in change.inserted if id(e) not in evicted_ids]
    plan.removed = list(change.replaced)
    plan.evicted = [e for e in evicted if e.id is not None]
    # Converted entries (never stored) that got evicted are still reported as evictions.
    plan.evicted += [e for e in evicted if e.id is None]
    merged_tags = list(target.tags)
    for tag in tags or []:
        if tag not in merged_tags:
            merged_tags.append(tag)
    for name, f in state.files.items():
        if name == file or any(e.file == name for e in evicted):
            text = render(kinds[name], work[name])
            plan.files[name] = FilePlan(
                name,
                kinds[name],
                tokens[name],
                len(text.encode("utf-8")),
                last_used[name],
                merged_tags if name == file else list(f.tags),
            )
    return plan


def _check_write_fits(state: FolderState, change: FileChange, count: Counter) -> None:
    """What the write wrote must fit the folder on its own: nothing else can be evicted
    to make room for it."""
    if change.kind == "text" and len(change.written) == 1:
        minimal = change.written[0].tokens  # a one-entry text file is just the entry
    else:
        minimal = count(render(change.kind, change.written))
    if minimal > state.token_limit:
        raise SlateEntryTooLarge(
            f"the write needs {minimal} tokens on its own; folder {state.name!r} holds at most "
            f"{state.token_limit}",
            details={"tokens": minimal, "tokenLimit": state.token_limit},
        )


def _evict(
    state: FolderState,
    clock: int,
    change: FileChange,
    work: dict[str, list[Entry]],
    kinds: dict[str, FileKind],
    tokens: dict[str, int],
    last_used: dict[str, int],
    count: Counter,
) -> tuple[list[Entry], int]:
    """Evict entries by the folder's policy (never what this write wrote) until the folder
    fits; ``work`` and ``tokens`` are updated. Returns the evicted entries and the usage."""
    usage = sum(tokens.values())
    evicted: list[Entry] = []
    if state.policy == "reject":
        raise SlateLimitExceeded(
            f"folder {state.name!r} would hold {usage} tokens, over its limit of "
            f"{state.token_limit} (evictionPolicy: reject)",
            details={"tokens": usage, "tokenLimit": state.token_limit},
        )
    # LRU ranks the written file as the most recently used one.
    ranked = FolderState(
        state.slate,
        state.name,
        state.token_limit,
        state.policy,
        clock,
        {n: _with_last_used(f, last_used[n]) for n, f in state.files.items()},
    )
    protected = {id(e) for e in change.written}
    for victim in victims(ranked, state.policy, work, protected):
        if usage <= state.token_limit:
            break
        name = victim.file
        work[name] = [e for e in work[name] if e is not victim]
        new_tokens = count(render(kinds[name], work[name]))
        usage += new_tokens - tokens[name]
        tokens[name] = new_tokens
        evicted.append(victim)
    return evicted, usage


def plan_eviction(state: FolderState, until_tokens: int, count: Counter) -> WritePlan:
    """Evict entries in the folder's policy order (``reject`` folders: oldest first) until the
    folder holds at most ``until_tokens`` tokens."""
    policy = "FIFO" if state.policy == "reject" else state.policy
    work = {name: list(f.entries) for name, f in state.files.items()}
    tokens = {name: f.tokens for name, f in state.files.items()}
    usage = sum(tokens.values())
    evicted: list[Entry] = []
    for victim in victims(state, policy, work, set()):
        if usage <= until_tokens:
            break
        name = victim.file
        work[name] = [e for e in work[name] if e is not victim]
        new_tokens = count(render(state.files[name].kind, work[name]))
        usage += new_tokens - tokens[name]
        tokens[name] = new_tokens
        evicted.append(victim)
    plan = WritePlan(clock=state.clock, usage=usage, evicted=evicted)
    for name in {e.file for e in evicted}:
        f = state.files[name]
        text = render(f.kind, work[name])
        plan.files[name] = FilePlan(
            name, f.kind, tokens[name], len(text.encode("utf-8")), f.last_used, list(f.tags)
        )
    return plan


def _with_last_used(f: FileState, last_used: int) -> FileState:
    return FileState(f.name, f.kind, f.entries, f.tags, last_used, f.ordinal, f.tokens, f.id)
