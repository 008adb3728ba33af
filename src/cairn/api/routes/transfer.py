"""Moving a subject between Cairns: ``GET /v1/subjects/{id}/export`` streams it as JSON
lines, ``POST /v1/subjects/{id}/import`` takes those lines back (in batches)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from cairn.core.scope import Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.core.transfer import EXPORT_FORMAT, EXPORT_VERSION
from cairn.engine.lifecycle import export_lines
from cairn.errors import InvalidInput
from cairn.http.auth import require_tenant, services_of
from cairn.http.headers import attachment

router = APIRouter(tags=["subjects"])

MAX_IMPORT_RECORDS = 1000


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, Any]] = Field(
        max_length=MAX_IMPORT_RECORDS,
        description="Lines of an export (the header line is skipped), at most 1000 per call.",
    )


class ImportPublic(BaseModel):
    subject_id: str
    imported: dict[str, int] = Field(description="Rows inserted per record type.")
    skipped: int = Field(description="Records already stored (by id or unique key).")


@router.get(
    "/v1/subjects/{subject_id}/export",
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def export_subject(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    tenant: str = Depends(require_tenant),
) -> StreamingResponse:
    """Everything of the subject as JSON lines: a header, then episodes, memories (every
    version, with their supersession links and provenance), documents, chunks, runs, items and
    per-user slates."""
    lines = export_lines(services_of(request).store, tenant, subject_id)
    return StreamingResponse(
        lines, media_type="application/x-ndjson", headers=attachment(f"cairn-{subject_id}.jsonl")
    )


@router.post("/v1/subjects/{subject_id}/import", response_model=ImportPublic)
def import_subject(
    body: ImportRequest,
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    tenant: str = Depends(require_tenant),
) -> ImportPublic:
    """Restore exported records into the subject, ids and provenance as they were; a record
    already stored is skipped, so a retried or repeated import changes nothing."""
    services = services_of(request)
    scope = Scope.for_subject(subject_id)
    for i, record in enumerate(body.records):
        if record.get("type") == "header" and (
            record.get("format") != EXPORT_FORMAT or record.get("version") != EXPORT_VERSION
        ):
            raise InvalidInput(
                f"record {i}: not a {EXPORT_FORMAT} version {EXPORT_VERSION} header "
                f"(format {record.get('format')!r}, version {record.get('version')!r})",
                code="invalid_import",
            )
    counts = services.store.transfer.import_records(tenant, scope, body.records)
    if services.embedding_backfill is not None and counts.get("memory"):
        # Their vectors follow in the background, as after a compile: an import of thousands
        # of memories is not embedded inside the request (the lexical lane finds them at once).
        services.embedding_backfill.notify(tenant, scope)
    return ImportPublic(
        subject_id=subject_id,
        imported=counts,
        skipped=sum(r.get("type") != "header" for r in body.records) - sum(counts.values()),
    )
