"""Context preview: "why did the agent see this?"

The page runs the assembly the API runs (``assembly_for`` of ``/v1/context``): lanes, then
``min_score``, then packing, then the default renderer fitted under ``max_tokens`` — the same
functions ``CairnAssembly.assemble`` and ``POST /v1/context`` call, taken one step at a time so
the page can also show what each step left out, and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from cairn.core.memory import Budget, ContextItem, ContextRequest, ContextResult
from cairn.core.scope import Scope
from cairn.core.subject_id import SUBJECT_ID_RULE, subject_id_problem
from cairn.engine.context import apply_min_score, pack_context, priority_order
from cairn.engine.context.fit import fit_to_tokens
from cairn.engine.context.packing import Overhead
from cairn.engine.context.render import DefaultRenderer, default_costs
from cairn.http.auth import services_of
from cairn.http.runtimes import assembly_for
from cairn.web._render import WebRoute, render
from cairn.web._session import Viewer, current_viewer

router = APIRouter(route_class=WebRoute)


@dataclass(frozen=True, slots=True)
class LeftOut:
    item: ContextItem
    reason: str


def lane_of(item: ContextItem) -> str:
    """Which lane proposed the item (the lanes of ``cairn.engine.context.lanes``)."""
    if item.source_class == "recent":
        return "recent turns"
    if item.kind == "document_chunk":
        return "documents"
    if item.source_class == "summary":
        return "summaries"
    return "memory search"


def explain_left_out(
    candidates: list[ContextItem],
    kept: list[ContextItem],
    packed: ContextResult,
    fitted: ContextResult,
    budget: Budget,
    min_score: float,
    reserved: int = 0,
    overhead: Overhead | None = None,
) -> list[LeftOut]:
    """Each candidate that did not reach the rendered context, with the step that dropped it.

    Packing takes items greedily in ``priority_order``, charging each item's markup
    (``overhead``) and the block's frame (``reserved``) as well as its text; replaying that
    order, with the same charges, against the packed result tells which limit stopped each
    item that was passed over.
    """
    limits = budget.resolved()
    kept_ids = {c.id for c in kept}
    out = [
        LeftOut(c, f"score {c.score:.3f} is below min_score {min_score:g}")
        for c in candidates
        if c.id not in kept_ids
    ]
    ordered = priority_order(kept)
    ordered_ids = {c.id for c in ordered}
    seen: set[str] = set()
    for c in kept:
        if c.id not in ordered_ids and c.id not in seen:
            out.append(LeftOut(c, "duplicate of a higher-ranked item with the same text"))
        seen.add(c.id)
    packed_ids = {i.id for i in packed.items}
    taken: list[ContextItem] = []
    tokens, chars = reserved, 0
    for c in ordered:
        markup = overhead(c, taken) if overhead is not None else 0
        if c.id in packed_ids:
            taken.append(c)
            tokens, chars = tokens + c.token_count + markup, chars + len(c.content)
            continue
        if len(taken) >= limits.max_items:
            reason = f"max_items {limits.max_items} already reached"
        elif tokens + c.token_count + markup > limits.max_tokens:
            reason = (
                f"its {c.token_count} tokens (and {markup} of markup) would exceed max_tokens "
                f"{limits.max_tokens} ({tokens} already used, the block's frame included)"
            )
        elif limits.max_chars and chars + len(c.content) > limits.max_chars:
            reason = (
                f"its {len(c.content)} characters would exceed max_chars "
                f"{limits.max_chars} ({chars} already used)"
            )
        else:
            reason = "not packed"
        out.append(LeftOut(c, reason))
    fitted_ids = {i.id for i in fitted.items}
    out += [
        LeftOut(
            c,
            f"dropped so the rendered text, with its wrapper, fits max_tokens {limits.max_tokens}",
        )
        for c in packed.items
        if c.id not in fitted_ids
    ]
    return out


def _number(form: dict[str, str], name: str, errors: list[str], *, real: bool = False) -> Any:
    raw = form.get(name, "").strip()
    if not raw:
        return 0
    try:
        return float(raw) if real else int(raw)
    except ValueError:
        errors.append(f"{name}: '{raw}' is not a {'number' if real else 'whole number'}")
        return 0


def _request_of(form: dict[str, str]) -> tuple[ContextRequest | None, list[str]]:
    """The ``ContextRequest`` the form describes, or the problems with it (field: message)."""
    errors: list[str] = []
    subject = form.get("subject_id", "").strip()
    problem = subject_id_problem(subject)
    if problem is not None:
        errors.append(f"subject_id: it {problem} ({SUBJECT_ID_RULE})")
    budget_values = {k: _number(form, k, errors) for k in ("max_tokens", "max_items", "max_chars")}
    min_score = _number(form, "min_score", errors, real=True)
    if errors:
        return None, errors
    try:
        req = ContextRequest.model_validate(
            {
                "scope": Scope.for_subject(subject),
                "query": form.get("query", ""),
                "conversation_id": form.get("session_id", ""),
                "budget": Budget(**budget_values),
                "min_score": min_score,
            }
        )
    except ValidationError as exc:
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"] if p != "budget")
            message = str(e["msg"]).removeprefix("Value error, ")
            errors.append(f"{where}: {message}" if where else message)
        return None, errors
    return req, []


@router.get("/ui/context")
def context_page(
    request: Request,
    # Only bounds on what is read: the values are checked as the API checks them, and a bad
    # one is shown next to the form, with what was typed kept (a subject id's 256 characters
    # are counted in NFC; a number of 20 digits is "too large", not a framework error page).
    subject_id: str = Query("", max_length=4 * 256),
    query: str = Query("", max_length=10_000),
    session_id: str = Query("", max_length=4 * 256),
    max_tokens: str = Query("", max_length=64),
    max_items: str = Query("", max_length=64),
    max_chars: str = Query("", max_length=64),
    min_score: str = Query("", max_length=64),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """The form; with a subject given, the preview of what the assembly returns."""
    form = {
        "subject_id": subject_id,
        "query": query,
        "session_id": session_id,
        "max_tokens": max_tokens,
        "max_items": max_items,
        "max_chars": max_chars,
        "min_score": min_score,
    }
    ctx: dict[str, Any] = {
        "form": form,
        "errors": [],
        "preview": None,
        "limits": Budget().resolved(),
    }
    if not (query.strip() or session_id.strip()):
        # A link from a subject's page: the form with the subject filled in, nothing to run.
        problem = subject_id_problem(subject_id.strip()) if subject_id else None
        if problem is not None:
            ctx["errors"] = [f"subject_id: it {problem} ({SUBJECT_ID_RULE})"]
    else:
        req, errors = _request_of(form)
        ctx["errors"] = errors
        if req is not None:
            ctx["preview"] = preview(request, viewer.tenant, req)
            ctx["limits"] = req.budget.resolved()
    return render(request, "context.html", ctx, status=422 if ctx["errors"] else 200)


def preview(request: Request, tenant: str, req: ContextRequest) -> dict[str, Any]:
    """Assemble ``req`` step by step: candidates → min_score → packing → fitted rendering."""
    assembly = assembly_for(services_of(request), tenant)
    found = assembly.candidates(req)
    candidates = list(found.result.items)
    kept = apply_min_score(candidates, req.min_score)
    reserved, overhead = default_costs(assembly.memory_counts)  # as POST /v1/context packs
    packed = pack_context(kept, req.budget, reserved=reserved, overhead=overhead)
    fitted, text, tokens = fit_to_tokens(
        packed, DefaultRenderer(), req.budget.resolved().max_tokens, assembly.tokenizer
    )
    return {
        "result": fitted,
        "rendered": text,
        "rendered_tokens": tokens,
        "candidates": len(candidates),
        "left_out": explain_left_out(
            candidates, kept, packed, fitted, req.budget, req.min_score, reserved, overhead
        ),
        "memories": found.memories,
        "episodes": found.episodes,
        "lane_of": lane_of,
        "subject_id": req.scope.user_id,
    }
