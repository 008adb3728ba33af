"""Tenants and API keys: the security boundary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cairn.core.subject_id import subject_id_problem

DEFAULT_TENANT = "default"
MAX_TENANT_ID = 128


def tenant_id_problem(value: str) -> str | None:
    """Why ``value`` cannot name a tenant, or None: 1-128 printable characters of any script,
    no ``/``, no leading or trailing whitespace (the rule of subject ids, at the column's
    length)."""
    if not 1 <= len(value) <= MAX_TENANT_ID:
        return f"must be 1-{MAX_TENANT_ID} characters"
    return subject_id_problem(value)


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """An API key as listed (the key itself is never stored, only its hash)."""

    id: str
    tenant_id: str
    prefix: str
    name: str
    created_at: datetime
    revoked_at: datetime | None
