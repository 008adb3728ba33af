"""Ladders: the list, validation, a try-it chat, and run traces step by step.

The chat runs a ladder through the same ``LadderRuntime`` the OpenAI-compatible endpoint uses
(the one the API keeps on ``Services``), so a chat from the page is an ordinary run: it writes
slates, records a trace, and shows up in ``GET /v1/runs``. Validation calls the loaders that
``cairn ladders validate`` and the server's start-up call.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse

from cairn.core.ids import uuid7
from cairn.core.memory import KEY_MAX_LENGTH
from cairn.core.text import has_nul
from cairn.errors import CairnError, ConfigError, InvalidInput, NotFound
from cairn.http.auth import services_of
from cairn.http.runtimes import ladder_runtime
from cairn.ladders.config import ladder_name, parse_ladder_file
from cairn.ladders.outcomes import SlateWriteRefused
from cairn.ladders.registry import Ladder, compile_ladder
from cairn.ladders.runtime import RunRequest
from cairn.web._render import WebRoute, render
from cairn.web._session import Viewer, check_csrf, current_viewer

router = APIRouter(route_class=WebRoute)

MAX_HISTORY = 40
RUNS_PAGE = 50


def _ladder(request: Request, name: str) -> Ladder:
    return services_of(request).ladders.get(name)


@router.get("/ui/ladders")
def ladders_page(request: Request, viewer: Viewer = Depends(current_viewer)) -> HTMLResponse:
    services = services_of(request)
    return render(
        request,
        "ladders.html",
        {
            "ladders": services.ladders.all(),
            "problems": services.ladders.errors(),
            "directory": services.settings.ladders_dir,
        },
    )


def _detail(
    request: Request, viewer: Viewer, name: str, ctx: dict[str, Any], status: int = 200
) -> HTMLResponse:
    ladder = _ladder(request, name)
    runs, total = ladder_runtime(request).runs.list(viewer.tenant, ladder=ladder.name, limit=10)
    values: dict[str, Any] = {
        "ladder": ladder,
        "runs": runs,
        "runs_total": total,
        "history": [],
        "validation": None,
        "chat_error": None,
        "conversation_id": "",
        "user": "",
        "last_run": None,
        # Set when the file is invalid now and this page shows its previous, serving version.
        "file_error": services_of(request).ladders.error_of(ladder.name),
    }
    values.update(ctx)
    values["history_json"] = json.dumps(values["history"], ensure_ascii=False)
    return render(request, "ladder.html", values, status=status)


@router.get("/ui/ladders/{name}")
def ladder_page(
    request: Request, name: str, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """One ladder: its steps and slates, validation, the try-it chat and its latest runs."""
    return _detail(request, viewer, name, {})


@router.post("/ui/ladders/{name}/validate", dependencies=[Depends(check_csrf)])
def validate_page(
    request: Request, name: str, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """Check the ladder's file as it is on disk now, as ``cairn ladders validate`` does."""
    ladder = _ladder(request, name)
    try:
        built = compile_ladder(ladder.path, services_of(request).settings)
        validation = {"ok": True, "message": _summary(built[0])}
    except CairnError as exc:
        validation = {"ok": False, "message": exc.message, "code": exc.code}
    return _detail(request, viewer, name, {"validation": validation})


def _summary(ladder: Ladder) -> str:
    spec = ladder.spec
    parts = [
        f"ladder {ladder.ladder}",
        f"{len(spec.slates)} slate(s)",
        "steps: " + (", ".join(s.id for s in ladder.steps) or "none"),
    ]
    if spec.agents:
        parts.append("agents: " + ", ".join(spec.agents))
    return "; ".join(parts)


def _parse_history(raw: str) -> list[dict[str, str]]:
    """The conversation so far, as the page sent it back (checked: roles and strings only)."""
    try:
        data = json.loads(raw or "[]")
    except (json.JSONDecodeError, RecursionError):
        raise InvalidInput("the conversation could not be read; start a new one") from None
    if not isinstance(data, list) or len(data) > MAX_HISTORY:
        raise InvalidInput(f"the conversation must be a list of at most {MAX_HISTORY} messages")
    out = []
    for m in data:
        if (
            not isinstance(m, dict)
            or m.get("role") not in ("user", "assistant")
            or not isinstance(m.get("content"), str)
        ):
            raise InvalidInput("the conversation holds a message that is not user/assistant text")
        entry = {"role": m["role"], "content": m["content"]}
        if isinstance(m.get("run_id"), str):
            entry["run_id"] = m["run_id"]
        out.append(entry)
    return out


@router.post("/ui/ladders/{name}/chat", dependencies=[Depends(check_csrf)])
def chat_page(
    request: Request,
    name: str,
    message: str = Form("", max_length=20_000),
    history: str = Form("[]", max_length=400_000),
    conversation_id: str = Form("", max_length=4 * 256),
    user: str = Form("", max_length=4 * 256),  # a subject id: NFC checked later
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """Send one message (with the conversation so far) to the ladder; show its reply."""
    ladder = _ladder(request, name)
    turns = _parse_history(history)
    ctx: dict[str, Any] = {"history": turns, "conversation_id": conversation_id, "user": user}
    if not message.strip():
        ctx["chat_error"] = {"code": "validation_error", "message": "Type a message first."}
        return _detail(request, viewer, name, ctx, status=422)
    if len(conversation_id.strip()) > KEY_MAX_LENGTH:
        # As on the API: a memory.turn hook stores it with the turn (before anything runs).
        ctx["chat_error"] = {
            "code": "validation_error",
            "message": f"The conversation id is over {KEY_MAX_LENGTH} characters.",
        }
        return _detail(request, viewer, name, {**ctx, "message": message}, status=422)
    if has_nul([message, conversation_id, user, turns]):
        # As on the API: NUL means nothing in a prompt and PostgreSQL cannot store it.
        ctx["chat_error"] = {
            "code": "validation_error",
            "message": "The message must not contain a NUL character.",
        }
        return _detail(request, viewer, name, ctx, status=422)
    asked = [*turns, {"role": "user", "content": message}]
    run_id = f"run-{uuid7().hex}"
    run = RunRequest(
        tenant=viewer.tenant,
        ladder=ladder.name,
        messages=[{"role": t["role"], "content": t["content"]} for t in asked],
        run_id=run_id,
        user=user.strip(),
        context_id=conversation_id.strip(),
    )
    metrics = request.app.state.metrics  # the chat's runs count as the API's do
    try:
        outcome = ladder_runtime(request).run(ladder, run)
    except CairnError as exc:
        if isinstance(exc, SlateWriteRefused):
            metrics.count_writes(ladder.name, exc.details["writes"])
        # The conversation stays as it was and the message in its box, to send again; the
        # trace is linked only when the run was recorded (a request refused before it ran,
        # a bad user say, has none).
        stored = ladder_runtime(request).runs.get(viewer.tenant, run_id) is not None
        error = {"code": exc.code, "message": exc.message}
        if stored:
            error["run_id"] = run_id
            ctx["last_run"] = run_id
        ctx.update(chat_error=error, message=message)
        return _detail(request, viewer, name, ctx, status=exc.status)
    if not outcome.replayed:
        metrics.count_writes(ladder.name, outcome.writes)
    turns = [*asked, {"role": "assistant", "content": outcome.content, "run_id": outcome.run_id}]
    ctx.update(history=turns, last_run=outcome.run_id)
    return _detail(request, viewer, name, ctx)


@router.get("/ui/validate-ladder")
def validate_text_page(request: Request, viewer: Viewer = Depends(current_viewer)) -> HTMLResponse:
    return render(request, "ladder_validate.html", {"text": "", "result": None})


@router.post("/ui/validate-ladder", dependencies=[Depends(check_csrf)])
def validate_text(
    request: Request,
    text: str = Form("", max_length=1_000_000),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """Check pasted ladder YAML: structure, slates and cross-references (files the ladder
    names, such as scripted replies, are checked when the ladder is loaded from its directory).
    Nothing is saved."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pasted.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            spec = parse_ladder_file(path)
            name = spec.name or "(named after its file)"
            if spec.name:
                ladder_name(path, spec)
            steps = [s.id for s in spec.steps]
            result = {
                "ok": True,
                "message": (
                    f"ladder {name}: {len(spec.slates)} slate(s), "
                    f"steps: {', '.join(steps) or 'none'}"
                    + (f", agents: {', '.join(spec.agents)}" if spec.agents else "")
                ),
            }
        except ConfigError as exc:
            result = {
                "ok": False,
                "code": exc.code,
                "message": exc.message.replace(str(path), "<pasted>"),
            }
    status = 200 if result["ok"] else 422
    return render(request, "ladder_validate.html", {"text": text, "result": result}, status=status)


@router.get("/ui/runs")
def runs_page(
    request: Request,
    ladder: str | None = Query(None, max_length=256),
    # "" is the form's "any" (its select sends the empty option).
    status: Literal["running", "completed", "failed", ""] | None = Query(None),
    page: int = Query(1, ge=1, le=100_000),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    status = status or None
    runs, total = ladder_runtime(request).runs.list(
        viewer.tenant,
        ladder=ladder or None,
        status=status,
        limit=RUNS_PAGE,
        offset=(page - 1) * RUNS_PAGE,
    )
    return render(
        request,
        "runs.html",
        {
            "runs": runs,
            "total": total,
            "ladder": ladder or "",
            "status": status or "",
            "page": page,
            "pages": max(1, -(-total // RUNS_PAGE)),
            "ladders": services_of(request).ladders.names(),
        },
    )


@router.get("/ui/runs/{run_id}")
def run_page(
    request: Request, run_id: str, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """One run's trace, step by step (what ``GET /v1/runs/{id}`` returns, secrets redacted)."""
    record = ladder_runtime(request).runs.get(viewer.tenant, run_id)
    if record is None:
        raise NotFound(f"No run {run_id!r} in this tenant.", code="run_not_found")
    return render(request, "run.html", {"run": record, "trace": record.trace or {}})
