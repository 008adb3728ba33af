"""The Slate Inspector (seed 002): each ladder's slates, their folders with usage and policy,
files with content and tags, the eviction log, and writing to a slate from the page.

Reads use ``Slates.inspect`` (never counts as a use for LRU, like ``?peek=true``); writes and
resets call ``Slates.write`` / ``Slates.reset`` with the arguments ``POST /v1/slates/...`` passes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from cairn.errors import CairnError
from cairn.http.auth import services_of
from cairn.slates.service import Slates
from cairn.web._render import WebRoute, render, see_other
from cairn.web._session import Viewer, check_csrf, current_viewer

router = APIRouter(route_class=WebRoute)

EVICTIONS_SHOWN = 50


def _slates(request: Request) -> Slates:
    return services_of(request).slates


def slate_url(ladder: str, slate: str, user_id: str | None = None, **params: Any) -> str:
    query = urlencode({k: v for k, v in {"user_id": user_id, **params}.items() if v})
    url = f"/ui/slates/{quote(ladder, safe='')}/{quote(slate, safe='')}"
    return f"{url}?{query}" if query else url


def usage_class(tokens: int, limit: int) -> str:
    """The bar's colour band: full at the limit, high from 80 %."""
    if limit and tokens >= limit:
        return "full"
    if limit and tokens * 5 >= limit * 4:
        return "high"
    return ""


@router.get("/ui/slates")
def slates_page(
    request: Request,
    ladder: str | None = Query(None, max_length=256),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """Every slate instance of the tenant, grouped by ladder."""
    slates = _slates(request)
    instances = slates.instances(viewer.tenant, ladder)
    by_ladder: dict[str, list[dict[str, Any]]] = {}
    for inst in instances:
        by_ladder.setdefault(inst["ladder"], []).append(inst)
    # A per-user slate has instances only once a user wrote to it; list it anyway, so it can be
    # opened for a user id.
    for lname in slates.ladders():
        if ladder is not None and lname != ladder:
            continue
        for spec in slates.specs(lname):
            if spec.partition == "user":
                by_ladder.setdefault(lname, []).append(
                    {
                        "ladder": lname,
                        "slate": spec.title,
                        "partition": "user",
                        "user_id": None,
                        "folders": len(spec.folders),
                        "any_user": True,
                        "tokenLimit": sum(f.token_limit for f in spec.folders),
                    }
                )
    for items in by_ladder.values():
        items.sort(key=lambda i: (i["slate"], i.get("user_id") or ""))
    return render(
        request,
        "slates.html",
        {
            "by_ladder": by_ladder,
            "ladder": ladder,
            "slate_url": slate_url,
            "usage_class": usage_class,
        },
    )


def _inspector(
    request: Request,
    viewer: Viewer,
    ladder: str,
    slate: str,
    user_id: str | None,
    ctx: dict[str, Any],
    status: int = 200,
) -> HTMLResponse:
    slates = _slates(request)
    spec = slates.spec(ladder, slate)
    needs_user = spec.partition == "user" and not user_id
    tree = None if needs_user else slates.inspect(viewer.tenant, ladder, slate, user_id=user_id)
    evictions = (
        []
        if needs_user
        else slates.evictions(viewer.tenant, ladder, slate, user_id=user_id, limit=EVICTIONS_SHOWN)
    )
    skipped = (
        []
        if needs_user
        else slates.skipped_writes(viewer.tenant, ladder, slate, user_id=user_id, limit=20)
    )
    folders = {f.name: f for f in spec.folders}
    return render(
        request,
        "slate.html",
        {
            "ladder": ladder,
            "slate": slate,
            "spec": spec,
            "user_id": user_id or "",
            "needs_user": needs_user,
            "tree": tree,
            "evictions": evictions,
            "skipped": skipped,
            "folders": folders,
            "slate_url": slate_url,
            "usage_class": usage_class,
            "error": None,
            "form": {},
            **ctx,
        },
        status=status,
    )


@router.get("/ui/slates/{ladder}/{slate}")
def slate_page(
    request: Request,
    ladder: str,
    slate: str,
    user_id: str | None = Query(None, max_length=4 * 256),  # a subject id: NFC checked later
    wrote: str | None = Query(None, max_length=512),
    reset: str | None = Query(None, max_length=256),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """The Slate Inspector of one slate instance."""
    return _inspector(request, viewer, ladder, slate, user_id, {"wrote": wrote, "reset": reset})


@router.post(
    "/ui/slates/{ladder}/{slate}/write", dependencies=[Depends(check_csrf)], response_model=None
)
def write_page(
    request: Request,
    ladder: str,
    slate: str,
    folder: str = Form(max_length=256),
    file: str = Form("", max_length=256),
    new_file: str = Form("", max_length=256),
    content: str = Form("", max_length=1_000_000),
    on: str = Form("append", max_length=16),
    key: str = Form("", max_length=256),
    tags: str = Form("", max_length=4096),
    user_id: str = Form("", max_length=256),
    viewer: Viewer = Depends(current_viewer),
) -> Response:
    """Write to a file as ``POST /v1/slates/{ladder}/{slate}/{folder}/{file}`` does; a refused
    write (``reject`` full, too large, bad JSON for mergeByKey …) is shown on the page."""
    target = new_file.strip() or file
    tag_list = [t.strip() for t in tags.split(",") if t.strip()] or None
    form = {
        "folder": folder,
        "file": file,
        "new_file": new_file,
        "content": content,
        "on": on,
        "key": key,
        "tags": tags,
    }
    try:
        _slates(request).check_user(ladder, slate, user_id or None)
        result = _slates(request).write(
            viewer.tenant,
            ladder,
            slate,
            folder,
            target,
            content,
            on=on,
            key=key or None,
            tags=tag_list,
            user_id=user_id or None,
        )
    except CairnError as exc:
        if exc.status == 404 and exc.code in ("slate_not_found",):
            raise
        return _inspector(
            request,
            viewer,
            ladder,
            slate,
            user_id or None,
            {"error": exc, "form": form},
            status=exc.status,
        )
    evicted = len(result.evictions)
    wrote = f"{folder}/{target}: usage {result.usage}/{result.token_limit} tokens" + (
        f", {evicted} entr{'y' if evicted == 1 else 'ies'} evicted" if evicted else ""
    )
    return see_other(slate_url(ladder, slate, user_id or None, wrote=wrote) + f"#folder-{folder}")


@router.post("/ui/slates/{ladder}/{slate}/reset", dependencies=[Depends(check_csrf)])
def reset_page(
    request: Request,
    ladder: str,
    slate: str,
    folder: str = Form(max_length=256),
    user_id: str = Form("", max_length=256),
    viewer: Viewer = Depends(current_viewer),
) -> Response:
    """Put a folder back to its declared ``init`` contents."""
    _slates(request).check_user(ladder, slate, user_id or None)
    _slates(request).reset(viewer.tenant, ladder, slate, folder, user_id=user_id or None)
    return see_other(slate_url(ladder, slate, user_id or None, reset=folder) + f"#folder-{folder}")
