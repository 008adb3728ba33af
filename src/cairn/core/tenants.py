"""Tenants and API keys: the security boundary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """An API key as listed (the key itself is never stored, only its hash)."""

    id: str
    tenant_id: str
    prefix: str
    name: str
    created_at: datetime
    revoked_at: datetime | None
