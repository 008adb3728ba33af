"""The ``Slates`` service: declare slates, then read, write, evict, inspect and reset them.

State belongs to a tenant and a ladder, and also to a user when the slate declares
``partition: user``. Every write runs read-plan-commit inside one write transaction that holds
the folder's lock, so a folder is never over its limit after a write commits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.core.ids import utcnow
from cairn.engine.tokens import get_tokenizer
from cairn.errors import CairnError, InvalidInput
from cairn.slates.config import (
    FolderSpec,
    SlateSpec,
    check_init_sizes,
    check_name,
    load_slate_declarations,
)
from cairn.slates.errors import (
    FileNotFound,
    FolderNotFound,
    InvalidSlateWrite,
    SlateNotFound,
    WriteAlreadyApplied,
)
from cairn.slates.eviction import WritePlan, plan_eviction, plan_write
from cairn.slates.metatags import file_index, slate_tree
from cairn.slates.model import (
    Entry,
    Eviction,
    FileState,
    FolderKey,
    FolderState,
    WriteResult,
    preview,
)
from cairn.store import Store
from cairn.store.slates import SlateRepository

if TYPE_CHECKING:
    from cairn.metrics import Metrics

WRITE_MODES = ("append", "overwrite", "mergeByKey")


class Slates:
    """Slate engine over the store. Declarations come from ladder files or ``declare``."""

    def __init__(
        self,
        store: Store,
        *,
        tokenizer: str = "cl100k_base",
        ladders_dir: Path | str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        # Counts evictions (cairn_slate_evictions_total) when given.
        self.metrics = metrics
        self.repo = SlateRepository(store.db)
        self.tokenizer = tokenizer
        self._count = get_tokenizer(tokenizer).count
        self._declared: dict[str, dict[str, SlateSpec]] = {}
        for ladder, specs in load_slate_declarations(ladders_dir, tokenizer=tokenizer).items():
            self.declare(ladder, specs)

    # --- declarations -----------------------------------------------------------------------

    def declare(self, ladder: str, specs: list[SlateSpec]) -> None:
        """Declare (or re-declare) the slates of ``ladder``; replaces its earlier declaration."""
        check_init_sizes(specs, f"ladder {ladder!r}", tokenizer=self.tokenizer)
        self._declared[ladder] = {s.title: s for s in specs}

    def undeclare(self, ladder: str) -> None:
        """Withdraw the slates of ``ladder`` (its file was removed); stored state stays."""
        self._declared.pop(ladder, None)

    def ladders(self) -> list[str]:
        return sorted(self._declared)

    def specs(self, ladder: str) -> list[SlateSpec]:
        return list(self._declared.get(ladder, {}).values())

    def spec(self, ladder: str, slate: str) -> SlateSpec:
        found = self._declared.get(ladder, {}).get(slate)
        if found is None:
            raise SlateNotFound(
                f"ladder {ladder!r} declares no slate {slate!r}",
                details={"ladder": ladder, "slate": slate},
            )
        return found

    def folder_spec(self, ladder: str, slate: str, folder: str) -> tuple[SlateSpec, FolderSpec]:
        sspec = self.spec(ladder, slate)
        fspec = sspec.folder(folder)
        if fspec is None:
            raise FolderNotFound(
                f"slate {slate!r} has no folder {folder!r}",
                details={"slate": slate, "folder": folder},
            )
        return sspec, fspec

    def _key(
        self, tenant: str, ladder: str, sspec: SlateSpec, folder: str, user_id: str | None
    ) -> FolderKey:
        if sspec.partition == "user":
            if not user_id:
                raise InvalidInput(
                    f"slate {sspec.title!r} is kept per user (partition: user): give a user id",
                    code="slate_user_required",
                )
            if len(user_id) > 256 or "\x00" in user_id:
                raise InvalidInput(
                    "a user id has at most 256 characters and no NUL", code="slate_user_required"
                )
            return FolderKey(tenant, ladder, user_id, sspec.title, folder)
        return FolderKey(tenant, ladder, "", sspec.title, folder)

    # --- state ------------------------------------------------------------------------------

    def _initial_file(self, fspec: FolderSpec, name: str, clock: int) -> tuple[FileState, int]:
        """A file as declared (its ``init`` as the first entry); returns it and the new clock."""
        declared = fspec.file(name)
        ordinal = fspec.files.index(declared) if declared else len(fspec.files)
        f = FileState(name=name, ordinal=ordinal)
        init = declared.initial_content if declared else ""
        if init:
            clock += 1
            f.entries.append(Entry(name, clock, clock, init, self._count(init), utcnow()))
            f.tokens = self._count(init)
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

    def _read_state(self, conn: Any, key: FolderKey, fspec: FolderSpec) -> FolderState:
        found = self.repo.find_folder(conn, key)
        if found is None:
            return self._state(fspec, key, None, 0, {})[0]
        return self._state(fspec, key, found[0], found[1], self.repo.load_files(conn, found[0]))[0]

    def _locked_state(
        self, conn: Any, key: FolderKey, fspec: FolderSpec, new_file: str | None = None
    ) -> FolderState:
        """Lock the folder and make sure its declared files (and ``new_file``) are stored."""
        now = utcnow()
        folder_id, clock, _ = self.repo.lock_folder(conn, key, now)
        state, missing = self._state(
            fspec, key, folder_id, clock, self.repo.load_files(conn, folder_id)
        )
        if new_file is not None and new_file not in state.files:
            f = FileState(name=new_file, ordinal=len(state.files))
            state.files[new_file] = f
            missing.append(f)
        for f in missing:
            f.id = self.repo.add_file(conn, folder_id, f, now)
            self.repo.insert_entries(conn, folder_id, f.entries)
        if missing:
            # Reload so the init entries carry their ids (they can be evicted later).
            state = self._state(
                fspec, key, folder_id, state.clock, self.repo.load_files(conn, folder_id)
            )[0]
            self.repo.save_folder(conn, folder_id, clock=state.clock, usage=state.usage, now=now)
        return state

    def _file(self, state: FolderState, name: str) -> FileState:
        f = state.files.get(name)
        if f is None:
            raise FileNotFound(
                f"folder {state.name!r} has no file {name!r}",
                details={"folder": state.name, "file": name},
            )
        return f

    # --- reads ------------------------------------------------------------------------------

    def read_file(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        *,
        user_id: str | None = None,
        peek: bool = False,
    ) -> str:
        """A file's text. Unless ``peek``, the read counts as a use of the file (for LRU)."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        key = self._key(tenant, ladder, sspec, folder, user_id)
        if peek or fspec.eviction_policy != "LRU":
            with self.store.db.read() as conn:
                return self._file(self._read_state(conn, key, fspec), file).text
        if fspec.file(file) is None and not fspec.open:
            raise FileNotFound(f"folder {folder!r} has no file {file!r}")
        with self.store.db.write() as conn:
            state = self._locked_state(conn, key, fspec)
            f = self._file(state, file)
            state.clock += 1
            assert f.id is not None and state.id is not None
            self.repo.touch_file(conn, f.id, state.clock)
            self.repo.save_folder(
                conn, state.id, clock=state.clock, usage=state.usage, now=utcnow()
            )
            return f.text

    def tags(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        *,
        user_id: str | None = None,
    ) -> list[str]:
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        key = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.db.read() as conn:
            return list(self._file(self._read_state(conn, key, fspec), file).tags)

    def index(
        self, tenant: str, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """``[{name, tokens, bytes}]`` for each file of the folder."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        key = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.db.read() as conn:
            return file_index(self._read_state(conn, key, fspec))

    def folder_states(
        self, tenant: str, ladder: str, slate: str, *, user_id: str | None = None
    ) -> list[FolderState]:
        sspec = self.spec(ladder, slate)
        with self.store.db.read() as conn:
            return [
                self._read_state(conn, self._key(tenant, ladder, sspec, f.name, user_id), f)
                for f in sspec.folders
            ]

    def tree(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        *,
        user_id: str | None = None,
        depth: int | None = None,
        contents: bool = False,
    ) -> dict[str, Any]:
        """slate → folders → files with usage, cut at ``depth`` (0 = the slate node only)."""
        states = self.folder_states(tenant, ladder, slate, user_id=user_id)
        return slate_tree(self.spec(ladder, slate), states, depth=depth, contents=contents)

    def inspect(
        self, tenant: str, ladder: str, slate: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """The whole slate with file contents, for the inspector (never counts as a use)."""
        return self.tree(tenant, ladder, slate, user_id=user_id, contents=True)

    def read(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str | None = None,
        *,
        user_id: str | None = None,
        metatag: str | None = None,
        depth: int | None = None,
        fallback: str | None = None,
        peek: bool = False,
        run_id: str | None = None,
    ) -> str:
        """What a ``slateRead`` field resolves to: a file's text or a metatag as JSON text.

        ``fallback`` replaces an empty result (empty text, or a metatag with no items) and a
        read that fails (unknown slate/folder/file, no user for a per-user slate, database
        unavailable)."""
        del run_id  # reads are not recorded; the parameter keeps step calls uniform
        try:
            if metatag is None:
                if file is None:
                    raise InvalidInput(
                        "a slate read needs 'file' or a metatag", code="slate_invalid_read"
                    )
                value = self.read_file(
                    tenant, ladder, slate, folder, file, user_id=user_id, peek=peek
                )
                return fallback if fallback is not None and value == "" else value
            result: Any
            if metatag == "tags":
                if file is None:
                    raise InvalidInput("metatag 'tags' needs 'file'", code="slate_invalid_read")
                result = self.tags(tenant, ladder, slate, folder, file, user_id=user_id)
            elif metatag == "index":
                result = self.index(tenant, ladder, slate, folder, user_id=user_id)
            elif metatag == "tree":
                result = self.tree(tenant, ladder, slate, user_id=user_id, depth=depth)
            else:
                raise InvalidInput(
                    f"unknown metatag {metatag!r}: use tags, index or tree",
                    code="slate_invalid_read",
                )
            if fallback is not None and result == []:
                return fallback
            return json.dumps(result, ensure_ascii=False)
        except CairnError:
            # Any failed read (unknown path, no user for a per-user slate, database down).
            if fallback is None:
                raise
            return fallback

    # --- writes -----------------------------------------------------------------------------

    def write(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        content: Any,
        *,
        on: str = "append",
        key: str | None = None,
        tags: list[str] | None = None,
        run_id: str | None = None,
        user_id: str | None = None,
        effect: str | None = None,
    ) -> WriteResult:
        """Write ``content`` (a string; other JSON values are written as JSON) to a file.

        With ``effect`` (a ladder run's name for this write, e.g. ``final/if``; needs
        ``run_id``) the write is applied at most once per run: the claim is recorded in the
        write's own transaction, and a second attempt raises ``WriteAlreadyApplied``."""
        if on not in WRITE_MODES:
            raise InvalidSlateWrite(f"unknown write mode {on!r}: use {', '.join(WRITE_MODES)}")
        if on == "mergeByKey" and not key:
            raise InvalidSlateWrite("on: mergeByKey needs 'key'", code="slate_merge_key_missing")
        if content is None or content == "":
            raise InvalidSlateWrite("nothing to write: content is empty", code="slate_empty_write")
        if isinstance(content, str) and "\x00" in content:
            # Neither backend stores NUL in text; refuse it instead of failing in the driver.
            raise InvalidSlateWrite("content must not contain a NUL character")
        for tag in tags or []:
            if not isinstance(tag, str) or not tag or len(tag) > 128 or "\x00" in tag:
                raise InvalidSlateWrite(
                    "tags must be non-empty strings of at most 128 characters, without NUL"
                )
        if run_id is not None and (len(run_id) > 256 or "\x00" in run_id):
            raise InvalidSlateWrite("run_id has at most 256 characters, without NUL")
        if key is not None and "\x00" in key:
            raise InvalidSlateWrite("key must not contain a NUL character")
        if effect is not None and (run_id is None or len(effect) > 512 or "\x00" in effect):
            raise InvalidSlateWrite("effect needs a run_id and has at most 512 characters")
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        new_file = None
        if fspec.file(file) is None:
            if not fspec.open:
                raise FileNotFound(
                    f"folder {folder!r} has no file {file!r}",
                    details={"folder": folder, "file": file},
                )
            try:
                check_name(file, "file")
            except ValueError as exc:
                raise InvalidSlateWrite(str(exc), code="slate_invalid_name") from None
            new_file = file
        now = utcnow()
        with self.store.db.write() as conn:
            if effect is not None and not self.repo.claim_write(
                conn, tenant, str(run_id), effect, now
            ):
                raise WriteAlreadyApplied(
                    "already applied by an earlier attempt of this run",
                    details={"run_id": run_id, "effect": effect},
                )
            state = self._locked_state(conn, fkey, fspec, new_file)
            plan = plan_write(
                state,
                file,
                on,
                content,
                key=key,
                tags=tags,
                now=now,
                run_id=run_id,
                count=self._count,
            )
            evictions = self._commit(conn, fkey, state, plan, run_id)
        if self.metrics is not None:
            self.metrics.count_evictions(state.policy, len(evictions))
        return WriteResult(
            slate=slate,
            folder=folder,
            file=file,
            usage=plan.usage,
            token_limit=fspec.token_limit,
            file_tokens=plan.files[file].tokens,
            entries_written=plan.written,
            entries_replaced=len(plan.removed),
            evictions=evictions,
        )

    def _commit(
        self, conn: Any, key: FolderKey, state: FolderState, plan: WritePlan, run_id: str | None
    ) -> list[Eviction]:
        now = utcnow()
        assert state.id is not None
        gone = [e.id for e in (*plan.removed, *plan.evicted) if e.id is not None]
        self.repo.delete_entries(conn, gone)
        self.repo.insert_entries(conn, state.id, plan.inserted)
        for name, fp in plan.files.items():
            file_id = state.files[name].id
            assert file_id is not None
            self.repo.save_file(
                conn,
                file_id,
                kind=fp.kind,
                tokens=fp.tokens,
                bytes_=fp.bytes,
                last_used=fp.last_used,
                tags=fp.tags,
                now=now,
            )
        self.repo.save_folder(conn, state.id, clock=plan.clock, usage=plan.usage, now=now)
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
        self.repo.record_evictions(conn, key, evictions)
        return evictions

    def forget_applied_writes(self, tenant: str, run_id: str) -> None:
        """Drop a completed run's write claims (its stored response answers any retry)."""
        self.repo.forget_writes(tenant, run_id, utcnow())

    def evict(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        *,
        until_tokens: int = 0,
        user_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Eviction]:
        """Evict entries in the folder's policy order until it holds ≤ ``until_tokens``."""
        if until_tokens < 0:
            raise InvalidInput("until_tokens must be ≥ 0")
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.db.write() as conn:
            state = self._locked_state(conn, fkey, fspec)
            plan = plan_eviction(state, until_tokens, self._count)
            evictions = self._commit(conn, fkey, state, plan, run_id)
        if self.metrics is not None:
            self.metrics.count_evictions(state.policy, len(evictions))
        return evictions

    def delete_file(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        *,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Empty a file (a declared file stays, empty; a file of an open folder is removed)."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.db.write() as conn:
            state = self._locked_state(conn, fkey, fspec)
            f = self._file(state, file)
            assert f.id is not None and state.id is not None
            now = utcnow()
            if fspec.file(file) is None:
                self.repo.drop_file(conn, state.id, f.id, file)
                removed = len(f.entries)
            else:
                removed = self.repo.delete_file_entries(conn, state.id, file)
                self.repo.save_file(
                    conn,
                    f.id,
                    kind="text",
                    tokens=0,
                    bytes_=0,
                    last_used=f.last_used,
                    tags=[],
                    now=now,
                )
            usage = state.usage - f.tokens
            self.repo.save_folder(conn, state.id, clock=state.clock, usage=usage, now=now)
        return {
            "slate": slate,
            "folder": folder,
            "file": file,
            "entries_deleted": removed,
            "usage": {"tokens": usage, "tokenLimit": fspec.token_limit},
        }

    def reset(
        self, tenant: str, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Put a folder back to its declared ``init`` contents (tags and use history cleared)."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.db.write() as conn:
            state = self._locked_state(conn, fkey, fspec)
            assert state.id is not None
            for f in state.files.values():
                assert f.id is not None
                self.repo.drop_file(conn, state.id, f.id, f.name)
            state = self._locked_state(conn, fkey, fspec)
        return {
            "slate": slate,
            "folder": folder,
            "reset": True,
            "usage": {"tokens": state.usage, "tokenLimit": fspec.token_limit},
        }

    # --- listings ---------------------------------------------------------------------------

    def evictions(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        *,
        user_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Eviction]:
        """Recorded evictions of a slate, newest first (one user's, for ``partition: user``)."""
        sspec = self.spec(ladder, slate)
        uid = self._key(tenant, ladder, sspec, "", user_id).user_id
        return self.repo.list_evictions(tenant, ladder, slate, uid, limit=limit, offset=offset)

    def record_skip(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        reason: str,
        detail: str = "",
        *,
        run_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Record a write that did nothing (no JSON, schema mismatch …) with its reason."""
        sspec = self.spec(ladder, slate)
        key = self._key(tenant, ladder, sspec, folder, user_id)
        self.repo.record_skip(key, file, reason, detail, run_id, utcnow())

    def skipped_writes(
        self, tenant: str, ladder: str, slate: str, *, user_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Recorded no-op ``slateWrite``s (schema mismatch, no JSON …), newest first."""
        sspec = self.spec(ladder, slate)
        uid = self._key(tenant, ladder, sspec, "", user_id).user_id
        return self.repo.list_skips(tenant, ladder, slate, uid, limit=limit)

    def instances(self, tenant: str, ladder: str | None = None) -> list[dict[str, Any]]:
        """Every slate instance of the tenant: one per declared slate, one per user for
        ``partition: user`` slates that hold state."""
        rows = self.repo.list_folders(tenant, ladder)
        usage: dict[tuple[str, str, str], int] = {}
        for r in rows:
            k = (r.ladder, r.slate, r.user_id)
            usage[k] = usage.get(k, 0) + r.usage
        out: list[dict[str, Any]] = []
        for lname in sorted(self._declared):
            if ladder is not None and lname != ladder:
                continue
            for spec in self._declared[lname].values():
                limit = sum(f.token_limit for f in spec.folders)
                users = (
                    [""]
                    if spec.partition == "ladder"
                    else sorted(
                        {u for (la, s, u) in usage if la == lname and s == spec.title and u}
                    )
                )
                for uid in users:
                    out.append(
                        {
                            "ladder": lname,
                            "slate": spec.title,
                            "partition": spec.partition,
                            "user_id": uid or None,
                            "folders": len(spec.folders),
                            "tokens": usage.get((lname, spec.title, uid), 0),
                            "tokenLimit": limit,
                        }
                    )
        return out

    def ensure_known(
        self, ladder: str, slate: str, folder: str | None = None, file: str | None = None
    ) -> None:
        """Raise the matching 404 error if the path is not declared."""
        if folder is None:
            self.spec(ladder, slate)
            return
        _, fspec = self.folder_spec(ladder, slate, folder)
        if file is not None and fspec.file(file) is None and not fspec.open:
            raise FileNotFound(f"folder {folder!r} has no file {file!r}")


__all__ = ["Slates"]
