"""A folder's state inside a unit of work: loaded, locked for a write, and committed.

Every write runs read-plan-commit in one write transaction (``Store.transaction()``) that
holds the folder's lock (``SlateRepository.lock_folder``), so a folder is never over its limit
after a write commits. Declared files not stored yet are stored (with their ``init`` entry)
the first time a write locks the folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cairn.core.ids import utcnow
from cairn.core.slates import Entry, Eviction, FileState, FolderKey, FolderState, preview
from cairn.slates.config import FolderSpec
from cairn.slates.errors import FileNotFound
from cairn.slates.eviction import WritePlan
from cairn.store import UnitOfWork


class Folders:
    """Folder state over units of work; ``count`` counts a text's tokens."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def _initial_file(self, fspec: FolderSpec, name: str, clock: int) -> tuple[FileState, int]:
        """A file as declared (its ``init`` as the first entry); returns it and the new clock."""
        declared = fspec.file(name)
        ordinal = fspec.files.index(declared) if declared else len(fspec.files)
        f = FileState(name=name, ordinal=ordinal)
        init = declared.initial_content if declared else ""
        if init:
            clock += 1
            f.entries.append(Entry(name, clock, clock, init, self.count(init), utcnow()))
            f.tokens = self.count(init)
        return f, clock

    def _state(
        self,
        fspec: FolderSpec,
        key: FolderKey,
        folder_id: int | None,
        clock: int,
        stored: dict[str, FileState],
    ) -> tuple[FolderState, list[FileState]]:
        """The folder as declared and stored; also the declared files not stored yet."""
        files: dict[str, FileState] = {}
        missing: list[FileState] = []
        for decl in fspec.files:
            if decl.name in stored:
                files[decl.name] = stored[decl.name]
            else:
                f, clock = self._initial_file(fspec, decl.name, clock)
                files[decl.name] = f
                missing.append(f)
        if fspec.open:
            files.update(stored)
        state = FolderState(
            key.slate, key.folder, fspec.token_limit, fspec.eviction_policy, clock, files, folder_id
        )
        return state, missing

    def read(self, tx: UnitOfWork, key: FolderKey, fspec: FolderSpec) -> FolderState:
        """The folder as stored (declared files not stored yet as declared); no lock."""
        found = tx.slates.find_folder(key)
        if found is None:
            return self._state(fspec, key, None, 0, {})[0]
        return self._state(fspec, key, found[0], found[1], tx.slates.load_files(found[0]))[0]

    def locked(
        self, tx: UnitOfWork, key: FolderKey, fspec: FolderSpec, new_file: str | None = None
    ) -> FolderState:
        """Lock the folder and make sure its declared files (and ``new_file``) are stored."""
        now = utcnow()
        folder_id, clock, _ = tx.slates.lock_folder(key, now)
        state, missing = self._state(fspec, key, folder_id, clock, tx.slates.load_files(folder_id))
        if new_file is not None and new_file not in state.files:
            f = FileState(name=new_file, ordinal=len(state.files))
            state.files[new_file] = f
            missing.append(f)
        for f in missing:
            f.id = tx.slates.add_file(folder_id, f, now)
            tx.slates.insert_entries(folder_id, f.entries)
        if missing:
            # Reload so the init entries carry their ids (they can be evicted later).
            state = self._state(
                fspec, key, folder_id, state.clock, tx.slates.load_files(folder_id)
            )[0]
            tx.slates.save_folder(folder_id, clock=state.clock, usage=state.usage, now=now)
        return state

    def commit(
        self,
        tx: UnitOfWork,
        key: FolderKey,
        state: FolderState,
        plan: WritePlan,
        run_id: str | None,
    ) -> list[Eviction]:
        """Store a planned write of the locked folder ``state``; returns its evictions (also
        recorded in the slate's history)."""
        now = utcnow()
        assert state.id is not None
        gone = [e.id for e in (*plan.removed, *plan.evicted) if e.id is not None]
        tx.slates.delete_entries(gone)
        tx.slates.insert_entries(state.id, plan.inserted)
        for name, fp in plan.files.items():
            file_id = state.files[name].id
            assert file_id is not None
            tx.slates.save_file(
                file_id,
                kind=fp.kind,
                tokens=fp.tokens,
                bytes_=fp.bytes,
                last_used=fp.last_used,
                tags=fp.tags,
                now=now,
            )
        tx.slates.save_folder(state.id, clock=plan.clock, usage=plan.usage, now=now)
        evictions = [
            Eviction(
                slate=key.slate,
                folder=key.folder,
                file=e.file,
                preview=preview(e.content),
                tokens=e.tokens,
                policy=state.policy,
                evicted_at=now,
                run_id=run_id,
                ladder=key.ladder,
                user_id=key.user_id,
            )
            for e in plan.evicted
        ]
        ids = tx.slate_history.record_evictions(key, evictions)
        # With their ids, as the slate's eviction history lists them.
        return [replace(ev, id=i) for ev, i in zip(evictions, ids, strict=True)]


def file_of(state: FolderState, name: str) -> FileState:
    """The folder's file ``name``; ``FileNotFound`` if it has none."""
    f = state.files.get(name)
    if f is None:
        raise FileNotFound(
            f"folder {state.name!r} has no file {name!r}",
            details={"folder": state.name, "file": name},
        )
    return f


__all__ = ["Folders", "file_of"]
