"""Memory templates: ``client.templates`` (list, get, apply)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.client._base import Call, iso, path_segment
from cairn.client._feature_models import MemoryTemplate, MemoryTemplateList
from cairn.client._models import Episode

Templates_ = list[MemoryTemplate]  # an alias: the classes below define their own ``list``

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn


def apply_call(
    template_id: str,
    subject_id: str,
    values: dict[str, Any],
    session_id: str | None,
    idempotency_key: str | None,
    occurred_at: datetime | str | None,
) -> Call[Episode]:
    body: dict[str, Any] = {"subject_id": subject_id, "values": values}
    if session_id is not None:
        body["session_id"] = session_id
    if idempotency_key is not None:
        body["idempotency_key"] = idempotency_key
    if occurred_at is not None:
        body["occurred_at"] = iso(occurred_at)
    return Call(
        "POST",
        f"/v1/memory-templates/{path_segment(template_id)}/apply",
        Episode,
        json=body,
        idempotent=idempotency_key is not None,
    )


def _list() -> Call[MemoryTemplateList]:
    return Call("GET", "/v1/memory-templates", MemoryTemplateList)


def _get(template_id: str) -> Call[MemoryTemplate]:
    return Call("GET", f"/v1/memory-templates/{path_segment(template_id)}", MemoryTemplate)


class Templates:
    """``client.templates``: the memory-template catalogue and ``apply``."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def list(self) -> Templates_:
        """Every template with its full field schema, ordered by id."""
        return self._client._send(_list()).templates

    def get(self, template_id: str) -> MemoryTemplate:
        """One template (``NotFoundError`` code ``template_not_found`` if unknown)."""
        return self._client._send(_get(template_id))

    def apply(
        self,
        template_id: str,
        subject_id: str,
        values: dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        occurred_at: datetime | str | None = None,
    ) -> Episode:
        """Validate ``values`` against the template and record the episode it renders."""
        return self._client._send(
            apply_call(template_id, subject_id, values, session_id, idempotency_key, occurred_at)
        )


class AsyncTemplates:
    """``client.templates`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def list(self) -> Templates_:
        """Every template with its full field schema, ordered by id."""
        return (await self._client._send(_list())).templates

    async def get(self, template_id: str) -> MemoryTemplate:
        """One template (``NotFoundError`` code ``template_not_found`` if unknown)."""
        return await self._client._send(_get(template_id))

    async def apply(
        self,
        template_id: str,
        subject_id: str,
        values: dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        occurred_at: datetime | str | None = None,
    ) -> Episode:
        """Validate ``values`` against the template and record the episode it renders."""
        return await self._client._send(
            apply_call(template_id, subject_id, values, session_id, idempotency_key, occurred_at)
        )
