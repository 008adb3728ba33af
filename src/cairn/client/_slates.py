"""Slates: ``client.slates`` (list, tree, read, write, delete, reset, evictions).

A slate is addressed as ``ladder/slate``; a file as ``ladder/slate/folder/file``; ``user_id``
selects the user of a ``partition: user`` slate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from cairn.client._base import Call, clean_params, path_segment
from cairn.client._feature_models import EvictionList, SlateList, SlateWriteResult

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn

WritePolicy = Literal["append", "overwrite", "mergeByKey"]
# Aliases keep annotations clear of the resources' own ``list`` methods.
Content = str | dict[str, Any] | list[Any]
Tags = list[str]


def _path(*parts: str) -> str:
    return "/v1/slates/" + "/".join(path_segment(p) for p in parts)


def list_call(ladder: str | None) -> Call[SlateList]:
    return Call("GET", "/v1/slates", SlateList, params=clean_params({"ladder": ladder}))


def tree_call(
    ladder: str, slate: str, user_id: str | None, depth: int | None
) -> Call[dict[str, Any]]:
    return Call(
        "GET",
        _path(ladder, slate),
        dict[str, Any],
        params=clean_params({"user_id": user_id, "depth": depth}),
    )


def read_call(
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    user_id: str | None,
    peek: bool,
    metatag: str | None,
) -> Call[Any]:
    params = clean_params({"user_id": user_id, "peek": peek or None, "metatag": metatag})
    return Call("GET", _path(ladder, slate, folder, file), Any, params=params)


def index_call(ladder: str, slate: str, folder: str, user_id: str | None) -> Call[Any]:
    return Call(
        "GET",
        _path(ladder, slate, folder),
        Any,
        params=clean_params({"metatag": "index", "user_id": user_id}),
    )


def write_call(
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    content: Content,
    on: WritePolicy,
    key: str | None,
    match: dict[str, Any] | bool | None,
    field: str | None,
    tags: Tags | None,
    run_id: str | None,
    user_id: str | None,
) -> Call[SlateWriteResult]:
    body: dict[str, Any] = {"content": content, "on": on}
    optional = {"key": key, "match": match, "field": field, "tags": tags, "run_id": run_id}
    body.update({k: v for k, v in optional.items() if v is not None})
    # An overwrite leaves the same state however often it runs; appends do not.
    return Call(
        "POST",
        _path(ladder, slate, folder, file),
        SlateWriteResult,
        json=body,
        params=clean_params({"user_id": user_id}),
        idempotent=on == "overwrite",
    )


def delete_call(
    ladder: str, slate: str, folder: str, file: str, user_id: str | None
) -> Call[dict[str, Any]]:
    return Call(
        "DELETE",
        _path(ladder, slate, folder, file),
        dict[str, Any],
        params=clean_params({"user_id": user_id}),
    )


def reset_call(ladder: str, slate: str, folder: str, user_id: str | None) -> Call[dict[str, Any]]:
    return Call(
        "POST",
        _path(ladder, slate, folder, "reset"),
        dict[str, Any],
        params=clean_params({"user_id": user_id}),
        idempotent=True,
    )


def evictions_call(
    ladder: str, slate: str, user_id: str | None, limit: int | None, offset: int | None
) -> Call[EvictionList]:
    return Call(
        "GET",
        _path(ladder, slate, "evictions"),
        EvictionList,
        params=clean_params({"user_id": user_id, "limit": limit, "offset": offset}),
    )


class Slates:
    """``client.slates``: working-memory slates of the caller's tenant."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def list(self, *, ladder: str | None = None) -> SlateList:
        """Slate instances (one per declared slate, one per user for per-user slates)."""
        return self._client._send(list_call(ladder))

    def tree(
        self, ladder: str, slate: str, *, user_id: str | None = None, depth: int | None = None
    ) -> dict[str, Any]:
        """Folders and files of a slate with their token usage."""
        return self._client._send(tree_call(ladder, slate, user_id, depth))

    def read(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        *,
        user_id: str | None = None,
        peek: bool = False,
    ) -> str:
        """The file's content (``peek=True``: do not count as a use for LRU)."""
        data = self._client._send(read_call(ladder, slate, folder, file, user_id, peek, None))
        return str(data["content"])

    def metatag(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        metatag: Literal["tags", "index", "tree"],
        *,
        user_id: str | None = None,
    ) -> Any:
        """A metatag of a file (``tags``) or its folder (``index``, ``tree``) as JSON."""
        return self._client._send(read_call(ladder, slate, folder, file, user_id, False, metatag))

    def index(self, ladder: str, slate: str, folder: str, *, user_id: str | None = None) -> Any:
        """A folder's index: its files with their sizes."""
        return self._client._send(index_call(ladder, slate, folder, user_id))

    def write(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        content: Content,
        *,
        on: WritePolicy = "append",
        key: str | None = None,
        match: dict[str, Any] | bool | None = None,
        field: str | None = None,
        tags: Tags | None = None,
        run_id: str | None = None,
        user_id: str | None = None,
    ) -> SlateWriteResult:
        """Write to a file under the folder's token limit and eviction policy."""
        return self._client._send(
            write_call(
                ladder, slate, folder, file, content, on, key, match, field, tags, run_id, user_id
            )
        )

    def delete(
        self, ladder: str, slate: str, folder: str, file: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Empty the file."""
        return self._client._send(delete_call(ladder, slate, folder, file, user_id))

    def reset(
        self, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Put a folder back to its declared ``init`` contents."""
        return self._client._send(reset_call(ladder, slate, folder, user_id))

    def evictions(
        self,
        ladder: str,
        slate: str,
        *,
        user_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> EvictionList:
        """Recorded evictions, newest first."""
        return self._client._send(evictions_call(ladder, slate, user_id, limit, offset))


class AsyncSlates:
    """``client.slates`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def list(self, *, ladder: str | None = None) -> SlateList:
        """Slate instances (one per declared slate, one per user for per-user slates)."""
        return await self._client._send(list_call(ladder))

    async def tree(
        self, ladder: str, slate: str, *, user_id: str | None = None, depth: int | None = None
    ) -> dict[str, Any]:
        """Folders and files of a slate with their token usage."""
        return await self._client._send(tree_call(ladder, slate, user_id, depth))

    async def read(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        *,
        user_id: str | None = None,
        peek: bool = False,
    ) -> str:
        """The file's content (``peek=True``: do not count as a use for LRU)."""
        data = await self._client._send(read_call(ladder, slate, folder, file, user_id, peek, None))
        return str(data["content"])

    async def metatag(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        metatag: Literal["tags", "index", "tree"],
        *,
        user_id: str | None = None,
    ) -> Any:
        """A metatag of a file (``tags``) or its folder (``index``, ``tree``) as JSON."""
        return await self._client._send(
            read_call(ladder, slate, folder, file, user_id, False, metatag)
        )

    async def index(
        self, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> Any:
        """A folder's index: its files with their sizes."""
        return await self._client._send(index_call(ladder, slate, folder, user_id))

    async def write(
        self,
        ladder: str,
        slate: str,
        folder: str,
        file: str,
        content: Content,
        *,
        on: WritePolicy = "append",
        key: str | None = None,
        match: dict[str, Any] | bool | None = None,
        field: str | None = None,
        tags: Tags | None = None,
        run_id: str | None = None,
        user_id: str | None = None,
    ) -> SlateWriteResult:
        """Write to a file under the folder's token limit and eviction policy."""
        return await self._client._send(
            write_call(
                ladder, slate, folder, file, content, on, key, match, field, tags, run_id, user_id
            )
        )

    async def delete(
        self, ladder: str, slate: str, folder: str, file: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Empty the file."""
        return await self._client._send(delete_call(ladder, slate, folder, file, user_id))

    async def reset(
        self, ladder: str, slate: str, folder: str, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Put a folder back to its declared ``init`` contents."""
        return await self._client._send(reset_call(ladder, slate, folder, user_id))

    async def evictions(
        self,
        ladder: str,
        slate: str,
        *,
        user_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> EvictionList:
        """Recorded evictions, newest first."""
        return await self._client._send(evictions_call(ladder, slate, user_id, limit, offset))
