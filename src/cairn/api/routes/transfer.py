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
from cairn.engine.items import MAX_KEY, MAX_TTL_SECONDS, check_namespace
from cairn.engine.lifecycle import export_lines
from cairn.errors import InvalidInput
from cairn.http.auth import require_tenant, services_of
from cairn.http.headers import attachment
from cairn.store.items import namespace_labels
from cairn.store.transfer_skips import SkipReason

router = APIRouter(tags=["subjects"])

MAX_IMPORT_RECORDS = 1000


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, Any]] = Field(
        max_length=MAX_IMPORT_RECORDS,
        description="Lines of an export (the header line is skipped), at most 1000 per call.",
    )


class SkippedRecordPublic(BaseModel):
    record: int = Field(description="Its place in `records` (the header line counts).")
    type: str
    reason: SkipReason = Field(
        description="`stored`: its row is stored (a repeated import); `same_key`: the subject "
        "holds another row under its unique key; `same_content`: the subject holds a memory of "
        "its kind and content under another id; `another_subject`: another subject of the "
        "tenant holds its id. The stored row is kept as it is."
    )


class ImportPublic(BaseModel):
    subject_id: str
    imported: dict[str, int] = Field(description="Rows inserted per record type.")
    skipped: int = Field(description="Records that added nothing (`skipped_records`).")
    skipped_records: list[SkippedRecordPublic] = Field(
        description="Each record that added nothing, and why."
    )


def write_limits(kind: str, row: dict[str, Any]) -> str | None:
    """What the API's own write paths refuse of a decoded record's row: an item's namespace,
    key and TTL as ``PUT /v1/items`` takes them. (A memory's text is bounded as a compiled
    one's, by the body limit: a compile keeps a long message whole in its turn, so PATCH's
    cap on a correction's new text would refuse exports Cairn made.)"""
    if kind != "item":
        return None
    try:
        check_namespace(namespace_labels(row["namespace"]), field="namespace")
    except InvalidInput as exc:
        return exc.message
    if len(row["key"]) > MAX_KEY:
        return f"key is longer than {MAX_KEY} characters"
    ttl = row.get("ttl_seconds")
    if ttl is not None and not 0 < ttl <= MAX_TTL_SECONDS:
        return "ttl_seconds must be > 0 and at most ten years"
    return None


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
    whose row (or a row under its unique key) is stored is skipped and told, so a retried or
    repeated import changes nothing. A bad record refuses the whole call."""
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
    outcome = services.store.transfer.import_records(
        tenant, scope, body.records, check=write_limits
    )
    if services.embedding_backfill is not None and outcome.imported.get("memory"):
        # Their vectors follow in the background, as after a compile: an import of thousands
        # of memories is not embedded inside the request (the lexical lane finds them at once).
        services.embedding_backfill.notify(tenant, scope)
    return ImportPublic(
        subject_id=subject_id,
        imported=outcome.imported,
        skipped=len(outcome.skipped),
        skipped_records=[
            SkippedRecordPublic(record=s.record, type=s.type, reason=s.reason)
            for s in outcome.skipped
        ],
    )
