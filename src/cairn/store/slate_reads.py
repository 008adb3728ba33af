"""The slate files a ladder run read or wrote, so that deleting a file deletes those runs.

A run's trace quotes what its ``slateRead`` fields read (in the step's messages) and what its
writes wrote (the model's reply), and its stored response may too. Before a run reads or
writes a slate, that is recorded in ``ladder_run_reads`` under the item ids made here, in the
tenant's rows with empty partition columns (a slate is no memory partition): the files its
steps read and may write (``slateRead`` fields, ``slateWrite`` blocks, both branches of a
gate) when the run is claimed (``RunRepository.begin``, ``add_items``), and the other files a
write evicts entries of in the write's transaction (``SlateRepository.note_run_write``):

- a file's text or its tags, a write to a file, an eviction from it: the file, and its folder;
- a folder's index: the folder's index, and the folder;
- a slate's tree: the slate.

Deleting a file deletes the runs that read or wrote it, read its folder's index or read its
slate's tree; resetting a folder deletes those that touched anything of the folder or read the
tree. An id is ``slate:`` and the SHA-256 of the kind and the path (ladder, the per-user
slate's user or ``""``, slate, folder, file), so names of any length and script fit the column.
Stored ids depend on this format (migration ``0029_slate_reads`` computes the same): keep it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cairn.core.subject_id import canonical_id

_FILE, _FOLDER, _INDEX, _TREE = "file", "folder", "index", "tree"


def slate_item(
    kind: str, ladder: str, user_id: str, slate: str, folder: str = "", file: str = ""
) -> str:
    body = json.dumps([kind, ladder, user_id, slate, folder, file], ensure_ascii=False)
    return "slate:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def access_items(
    ladder: str,
    user_id: str,
    slate: str,
    folder: str | None,
    file: str | None,
    metatag: str | None = None,
) -> list[str]:
    """The items of a read (``metatag``: None for a file's text, ``tags``, ``index``,
    ``tree``) or a write (``metatag`` None) of a slate of ``ladder`` (``user_id``: the per-user
    slate's user, else ``""``)."""
    if metatag == "tree":
        return [slate_item(_TREE, ladder, user_id, slate)]
    where = (ladder, user_id, slate, folder or "")
    if metatag == "index":
        return [slate_item(_INDEX, *where), slate_item(_FOLDER, *where)]
    return [slate_item(_FILE, *where, file or ""), slate_item(_FOLDER, *where)]


def file_items(ladder: str, user_id: str, slate: str, folder: str, file: str) -> list[str]:
    """The items whose runs go when the file is deleted."""
    return [
        slate_item(_FILE, ladder, user_id, slate, folder, file),
        slate_item(_INDEX, ladder, user_id, slate, folder),
        slate_item(_TREE, ladder, user_id, slate),
    ]


def folder_items(ladder: str, user_id: str, slate: str, folder: str) -> list[str]:
    """The items whose runs go when the folder is reset."""
    return [
        slate_item(_FOLDER, ladder, user_id, slate, folder),
        slate_item(_TREE, ladder, user_id, slate),
    ]


def trace_slate_items(trace: Any, ladder: str, user_id: str) -> list[str]:
    """The items of every slate read, write and eviction a stored trace's steps name (an
    imported run; ``ladder``: the run's, ``LADDER`` or ``LADDER:AGENT``).

    The trace does not say whether a slate was shared by the ladder's users or kept per user,
    so each is recorded both ways: as the shared slate's and as the run's user's own. Only one
    of the two exists (a ladder's slate titles are unique), so no other file's deletion can
    take the run."""
    ladder = ladder.partition(":")[0]  # a run of ``LADDER:AGENT`` reads LADDER's slates
    steps = trace.get("steps") if isinstance(trace, dict) else None
    out: dict[str, None] = {}
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        reads = step.get("slate_reads")
        for read in reads if isinstance(reads, list) else []:
            _add(
                out, read, ladder, user_id, read.get("metatag") if isinstance(read, dict) else None
            )
        writes = step.get("writes")
        for write in writes if isinstance(writes, list) else []:
            if not isinstance(write, dict):
                continue
            target = write.get("to")
            _add(out, target if isinstance(target, dict) else write, ladder, user_id, None)
            evicted = write.get("evictions")
            for eviction in evicted if isinstance(evicted, list) else []:
                _add(out, eviction, ladder, user_id, None)
    return list(out)


def _add(out: dict[str, None], where: Any, ladder: str, user_id: str, metatag: Any) -> None:
    if not isinstance(where, dict) or not isinstance(where.get("slate"), str):
        return
    folder, file = where.get("folder"), where.get("file")
    for user in dict.fromkeys(("", canonical_id(user_id))):
        for item in access_items(
            ladder,
            user,
            where["slate"],
            folder if isinstance(folder, str) else None,
            file if isinstance(file, str) else None,
            metatag if isinstance(metatag, str) else None,
        ):
            out.setdefault(item)


def item_rows(items: list[str]) -> list[dict[str, str]]:
    """``items`` as ``ladder_run_reads`` rows (``record_reads``): no partition."""
    return [{"item_id": i, "runtime_id": "", "user_id": "", "agent_id": ""} for i in items]


__all__ = [
    "access_items",
    "file_items",
    "folder_items",
    "item_rows",
    "slate_item",
    "trace_slate_items",
]
