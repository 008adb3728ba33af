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
from cairn.core.slates import Eviction, FolderKey, FolderState, WriteResult
from cairn.core.tokens import get_tokenizer
from cairn.errors import CairnError, InvalidInput
from cairn.slates.config import FolderSpec, SlateSpec, check_file_name
from cairn.slates.declarations import Declarations, folder_key
from cairn.slates.errors import FileNotFound, InvalidSlateWrite, WriteAlreadyApplied
from cairn.slates.eviction import plan_eviction, plan_write
from cairn.slates.folders import Folders, file_of
from cairn.slates.metatags import file_index, slate_tree
from cairn.slates.write_checks import check_write
from cairn.store import Store

if TYPE_CHECKING:
    from cairn.metrics import Metrics


class Slates:
    """Slate engine over the store. Declarations come from ladder files or ``declare``."""

    def __init__(
        self,
        store: Store,
        *,
        tokenizer: str = "cl100k_base",
        ladders_dir: Path | str | None = None,
        metrics: Metrics | None = None,
        problems: list[str] | None = None,
    ) -> None:
        """``problems``: skip ladder files that are invalid, adding their errors to it."""
        self.store = store
        # Counts evictions (cairn_slate_evictions_total) when given.
        self.metrics = metrics
        self.tokenizer = tokenizer
        self._count = get_tokenizer(tokenizer).count
        self.declarations = Declarations(tokenizer, ladders_dir, problems)
        self._folders = Folders(self._count)

    # --- declarations -----------------------------------------------------------------------

    def declare(self, ladder: str, specs: list[SlateSpec]) -> None:
        """Declare (or re-declare) the slates of ``ladder``; replaces its earlier declaration."""
        self.declarations.declare(ladder, specs)

    def undeclare(self, ladder: str) -> None:
        """Withdraw the slates of ``ladder`` (its file was removed); stored state stays."""
        self.declarations.undeclare(ladder)

    def ladders(self) -> list[str]:
        return self.declarations.ladders()

    def specs(self, ladder: str) -> list[SlateSpec]:
        return self.declarations.specs(ladder)

    def spec(self, ladder: str, slate: str) -> SlateSpec:
        return self.declarations.spec(ladder, slate)

    def folder_spec(self, ladder: str, slate: str, folder: str) -> tuple[SlateSpec, FolderSpec]:
        return self.declarations.folder_spec(ladder, slate, folder)

    def ensure_known(
        self, ladder: str, slate: str, folder: str | None = None, file: str | None = None
    ) -> None:
        """Raise the matching 404 error if the path is not declared."""
        self.declarations.ensure_known(ladder, slate, folder, file)

    def check_user(self, ladder: str, slate: str, user_id: str | None) -> None:
        """A caller that names a user for a slate shared by all users (``partition: ladder``)
        would write where every user reads: 422 ``slate_not_per_user``. (A ladder run passes
        its user for every slate; only the API and MCP callers are checked.)"""
        if user_id and self.spec(ladder, slate).partition != "user":
            raise InvalidInput(
                f"slate {slate!r} is shared by every user of ladder {ladder!r} (partition: "
                "ladder): a user id would not keep the write to that user; leave it out",
                code="slate_not_per_user",
            )

    def _key(
        self, tenant: str, ladder: str, sspec: SlateSpec, folder: str, user_id: str | None
    ) -> FolderKey:
        return folder_key(tenant, ladder, sspec, folder, user_id)

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
            with self.store.snapshot() as tx:
                return file_of(self._folders.read(tx, key, fspec), file).text
        if fspec.file(file) is None and not fspec.open:
            raise FileNotFound(f"folder {folder!r} has no file {file!r}")
        with self.store.transaction() as tx:
            state = self._folders.locked(tx, key, fspec)
            f = file_of(state, file)
            state.clock += 1
            assert f.id is not None and state.id is not None
            tx.slates.touch_file(f.id, state.clock)
            tx.slates.save_folder(state.id, clock=state.clock, usage=state.usage, now=utcnow())
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
        with self.store.snapshot() as tx:
            return list(file_of(self._folders.read(tx, key, fspec), file).tags)

    def index(
        self, tenant: str, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """``[{name, tokens, bytes}]`` for each file of the folder."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        key = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.snapshot() as tx:
            return file_index(self._folders.read(tx, key, fspec))

    def folder_states(
        self, tenant: str, ladder: str, slate: str, *, user_id: str | None = None
    ) -> list[FolderState]:
        sspec = self.spec(ladder, slate)
        with self.store.snapshot() as tx:
            return [
                self._folders.read(tx, self._key(tenant, ladder, sspec, f.name, user_id), f)
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
        check_write(content, on=on, key=key, tags=tags, run_id=run_id, effect=effect)
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
                check_file_name(file)
            except ValueError as exc:
                raise InvalidSlateWrite(str(exc), code="slate_invalid_name") from None
            new_file = file
        now = utcnow()
        with self.store.transaction() as tx:
            if effect is not None and not tx.slates.claim_write(tenant, str(run_id), effect, now):
                raise WriteAlreadyApplied(
                    "already applied by an earlier attempt of this run",
                    details={"run_id": run_id, "effect": effect},
                )
            state = self._folders.locked(tx, fkey, fspec, new_file)
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
            evictions = self._folders.commit(tx, fkey, state, plan, run_id)
            if effect is not None and (others := {e.file for e in evictions} - {file}):
                tx.slates.note_run_write(fkey, others, str(run_id))  # its trace previews them
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

    def forget_applied_writes(self, tenant: str, run_id: str) -> None:
        """Drop a completed run's write claims (its stored response answers any retry)."""
        self.store.slates.forget_writes(tenant, run_id, utcnow())

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
        with self.store.transaction() as tx:
            state = self._folders.locked(tx, fkey, fspec)
            plan = plan_eviction(state, until_tokens, self._count)
            evictions = self._folders.commit(tx, fkey, state, plan, run_id)
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
        """Empty a file (a declared file stays, empty; a file of an open folder is removed),
        with the recorded evictions of its entries and the ladder runs that quote it."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.transaction() as tx:
            state = self._folders.locked(tx, fkey, fspec)
            f = file_of(state, file)
            assert f.id is not None and state.id is not None
            now = utcnow()
            if fspec.file(file) is None:
                tx.slates.drop_file(state.id, f.id, file)
                removed = len(f.entries)
            else:
                removed = tx.slates.delete_file_entries(state.id, file)
                tx.slates.save_file(
                    f.id,
                    kind="text",
                    tokens=0,
                    bytes_=0,
                    last_used=f.last_used,
                    tags=[],
                    now=now,
                )
            usage = state.usage - f.tokens
            tx.slates.save_folder(state.id, clock=state.clock, usage=usage, now=now)
            tx.slate_history.forget_evictions(fkey, file)
            runs = tx.slates.drop_runs_reading(fkey, file)
        self.store.lifecycle.checkpoint()  # (SQLite: the log keeps no page of the text)
        return {
            "slate": slate,
            "folder": folder,
            "file": file,
            "entries_deleted": removed,
            "ladder_runs_deleted": runs,
            "usage": {"tokens": usage, "tokenLimit": fspec.token_limit},
        }

    def reset(
        self, tenant: str, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Put a folder back to its declared ``init`` contents (tags, use history, recorded
        evictions and the ladder runs that quote the folder cleared)."""
        sspec, fspec = self.folder_spec(ladder, slate, folder)
        fkey = self._key(tenant, ladder, sspec, folder, user_id)
        with self.store.transaction() as tx:
            state = self._folders.locked(tx, fkey, fspec)
            folder_id = state.id
            assert folder_id is not None
            for f in state.files.values():
                assert f.id is not None
                tx.slates.drop_file(folder_id, f.id, f.name)
            tx.slate_history.forget_evictions(fkey)
            runs = tx.slates.drop_runs_reading(fkey)
            state = self._folders.locked(tx, fkey, fspec)  # (an open folder: nothing re-made)
            tx.slates.save_folder(folder_id, clock=state.clock, usage=state.usage, now=utcnow())
        self.store.lifecycle.checkpoint()
        return {
            "slate": slate,
            "folder": folder,
            "reset": True,
            "ladder_runs_deleted": runs,
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
        return self.store.slate_history.list_evictions(
            tenant, ladder, slate, uid, limit=limit, offset=offset
        )

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
        self.store.slate_history.record_skip(key, file, reason, detail, run_id, utcnow())

    def skipped_writes(
        self, tenant: str, ladder: str, slate: str, *, user_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Recorded no-op ``slateWrite``s (schema mismatch, no JSON …), newest first."""
        sspec = self.spec(ladder, slate)
        uid = self._key(tenant, ladder, sspec, "", user_id).user_id
        return self.store.slate_history.list_skips(tenant, ladder, slate, uid, limit=limit)

    def instances(self, tenant: str, ladder: str | None = None) -> list[dict[str, Any]]:
        """Every slate instance of the tenant: one per declared slate, one per user for
        ``partition: user`` slates that hold state."""
        rows = self.store.slates.list_folders(tenant, ladder)
        stored = {(r.ladder, r.slate, r.user_id, r.folder): r.usage for r in rows}
        users_of = {(r.ladder, r.slate, r.user_id) for r in rows}

        def tokens(lname: str, spec: Any, uid: str) -> int:
            # A folder never written holds its files' ``init`` (as reading it shows).
            return sum(
                stored.get((lname, spec.title, uid, f.name), self._init_tokens(f))
                for f in spec.folders
            )

        out: list[dict[str, Any]] = []
        for lname in self.declarations.ladders():
            if ladder is not None and lname != ladder:
                continue
            for spec in self.declarations.specs(lname):
                limit = sum(f.token_limit for f in spec.folders)
                users = (
                    [""]
                    if spec.partition == "ladder"
                    else sorted(
                        {u for (la, s, u) in users_of if la == lname and s == spec.title and u}
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
                            "tokens": tokens(lname, spec, uid),
                            "tokenLimit": limit,
                        }
                    )
        return out

    def _init_tokens(self, folder: Any) -> int:
        return sum(self._count(f.initial_content) for f in folder.files if f.initial_content)


__all__ = ["Slates"]
