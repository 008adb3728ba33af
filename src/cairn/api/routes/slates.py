"""Slates over HTTP: list instances, read the tree, read/write/delete files, metatags, reset,
evictions. Slate state is addressed as ``{ladder}/{slate}``; ``user_id`` (query) selects the
user of a ``partition: user`` slate. Semantics: docs/slates.md."""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cairn.errors import InvalidInput
from cairn.http.auth import require_tenant, services_of
from cairn.slates.config import SlateWriteSpec, format_validation_error
from cairn.slates.service import Slates
from cairn.slates.steps import apply_slate_write

router = APIRouter(tags=["slates"])

# Only a bound on what is read: the user is a subject id, whose 256 characters are counted in
# NFC (``check_slate_user``); a decomposed spelling of one may be several times longer.
USER = Query(None, max_length=4 * 256, description="User of a `partition: user` slate.")
DEPTH = Query(None, ge=0, le=16, description="Cut the tree at this depth (0 = slate only).")


class SlateWriteBody(BaseModel):
    """``POST /v1/slates/{ladder}/{slate}/{folder}/{file}``."""

    model_config = ConfigDict(extra="forbid")

    content: str | dict[str, Any] | list[Any] = Field(
        description="Text to write; an object/array is written as JSON. With `match` or "
        "`field`, the text is treated as model output and JSON is extracted from it."
    )
    on: Literal["append", "overwrite", "mergeByKey"] = "append"
    key: str | None = Field(None, min_length=1, max_length=256)
    match: dict[str, Any] | bool | None = Field(None, description="JSON Schema (Draft 2020-12).")
    field: str | None = Field(None, min_length=1, max_length=256)
    tags: list[str] | None = Field(None, max_length=64)
    run_id: str | None = Field(None, max_length=256)


def _slates(request: Request) -> Slates:
    return services_of(request).slates


@router.get("/v1/slates")
def list_slates(
    request: Request,
    ladder: str | None = Query(None, max_length=256, description="Only this ladder's slates."),
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """Slate instances of the tenant: one per declared slate, one per user for per-user slates."""
    return {"slates": _slates(request).instances(tenant, ladder)}


@router.get("/v1/slates/{ladder}/{slate}")
def slate_tree(
    request: Request,
    ladder: str,
    slate: str,
    user_id: str | None = USER,
    depth: int | None = DEPTH,
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """The slate's tree: folders and files with their usage (see the `tree` metatag)."""
    tree = _slates(request).tree(tenant, ladder, slate, user_id=user_id, depth=depth)
    return {"ladder": ladder, "user_id": user_id, **tree}


@router.get("/v1/slates/{ladder}/{slate}/evictions")
def list_evictions(
    request: Request,
    ladder: str,
    slate: str,
    user_id: str | None = USER,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """Recorded evictions of the slate, newest first."""
    items = _slates(request).evictions(
        tenant, ladder, slate, user_id=user_id, limit=limit, offset=offset
    )
    return {"ladder": ladder, "slate": slate, "evictions": [e.to_dict() for e in items]}


@router.get("/v1/slates/{ladder}/{slate}/{folder}")
def folder_metatag(
    request: Request,
    ladder: str,
    slate: str,
    folder: str,
    metatag: Literal["index", "tree"] = Query("index"),
    depth: int | None = DEPTH,
    user_id: str | None = USER,
    tenant: str = Depends(require_tenant),
) -> Any:
    """Folder-level metatags: `index` (default) or `tree`."""
    slates = _slates(request)
    if metatag == "index":
        return slates.index(tenant, ladder, slate, folder, user_id=user_id)
    slates.ensure_known(ladder, slate, folder)
    return slates.tree(tenant, ladder, slate, user_id=user_id, depth=depth)


async def _a_write_body(request: Request) -> bool:
    """Whether the request's body is a slate write's (a JSON object with ``content``); any
    other body, or none, is ignored as it always was."""
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError):  # not JSON (a form, a text): no write
        return False
    return isinstance(body, dict) and "content" in body


@router.post("/v1/slates/{ladder}/{slate}/{folder}/reset")
def reset_folder(
    request: Request,
    ladder: str,
    slate: str,
    folder: str,
    user_id: str | None = USER,
    writes: bool = Depends(_a_write_body),
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """Put the folder back to its declared `init` contents. A body that writes (``content``)
    is refused: no file may be named ``reset``, and a write meant for one must not empty the
    folder."""
    if writes:
        raise InvalidInput(
            "'reset' names the folder's reset route, not a file: a file may not be named so",
            code="slate_invalid_name",
        )
    slates = _slates(request)
    slates.check_user(ladder, slate, user_id)
    return slates.reset(tenant, ladder, slate, folder, user_id=user_id)


@router.get("/v1/slates/{ladder}/{slate}/{folder}/{file}")
def read_file(
    request: Request,
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    metatag: Literal["tags", "index", "tree"] | None = Query(None),
    depth: int | None = DEPTH,
    peek: bool = Query(False, description="Do not count this read as a use (LRU)."),
    user_id: str | None = USER,
    tenant: str = Depends(require_tenant),
) -> Any:
    """`{content}` of the file, or the JSON of a metatag (`tags`, `index`, `tree`)."""
    slates = _slates(request)
    if metatag is None:
        return {
            "content": slates.read_file(
                tenant, ladder, slate, folder, file, user_id=user_id, peek=peek
            )
        }
    slates.ensure_known(ladder, slate, folder, file)
    if metatag == "tags":
        return slates.tags(tenant, ladder, slate, folder, file, user_id=user_id)
    if metatag == "index":
        return slates.index(tenant, ladder, slate, folder, user_id=user_id)
    return slates.tree(tenant, ladder, slate, user_id=user_id, depth=depth)


@router.post("/v1/slates/{ladder}/{slate}/{folder}/{file}")
def write_file(
    request: Request,
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    body: SlateWriteBody,
    user_id: str | None = USER,
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """Write to the file; returns the folder's new usage and any evictions. With `match` or
    `field`, a value that does not match is a no-op: `{"written": false, "reason": …}`."""
    slates = _slates(request)
    slates.check_user(ladder, slate, user_id)
    if body.match is None and body.field is None:
        result = slates.write(
            tenant,
            ladder,
            slate,
            folder,
            file,
            body.content,
            on=body.on,
            key=body.key,
            tags=body.tags,
            run_id=body.run_id,
            user_id=user_id,
        )
        return result.to_dict()
    try:
        spec = SlateWriteSpec.model_validate(
            {
                "to": {"slate": slate, "folder": folder, "file": file},
                "field": body.field,
                "on": body.on,
                "key": body.key,
                "match": body.match,
                "tags": body.tags or [],
            }
        )
    except ValidationError as exc:
        raise InvalidInput(format_validation_error(exc, "body"), code="invalid_schema") from None
    output = body.content if isinstance(body.content, str) else json.dumps(body.content)
    outcome = apply_slate_write(
        slates, tenant, ladder, spec, output, run_id=body.run_id, user_id=user_id
    )
    return outcome.to_dict()


@router.delete("/v1/slates/{ladder}/{slate}/{folder}/{file}")
def delete_file(
    request: Request,
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    user_id: str | None = USER,
    tenant: str = Depends(require_tenant),
) -> dict[str, Any]:
    """Empty the file (a file of a folder that declares no files is removed)."""
    slates = _slates(request)
    slates.check_user(ladder, slate, user_id)
    return slates.delete_file(tenant, ladder, slate, folder, file, user_id=user_id)


@router.api_route(
    "/v1/slates/{ladder}/{slate}/{folder}/{file}/{rest:path}",
    methods=["GET", "POST", "DELETE"],
    include_in_schema=False,
)
def file_name_with_a_slash(
    ladder: str,
    slate: str,
    folder: str,
    file: str,
    rest: str,
    tenant: str = Depends(require_tenant),
) -> None:
    """A file name with ``/`` in it (``a%2Fb``, which servers decode before routing): no file
    may be named so, and saying that beats a 404 that names no route."""
    raise InvalidInput(
        f"file name {f'{file}/{rest}'!r} has a '/': slate names are 1-128 characters without "
        "'/' or '\\'",
        code="slate_invalid_name",
    )
