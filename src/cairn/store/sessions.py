"""Inspector sessions: an opaque random token per sign-in, never the API key itself.

Only the token's SHA-256 digest is stored (a token is random, like a key, so a digest is a
safe stored form). A session is valid while it is unexpired, not signed out, and its key is
still active: resolving joins the key, so revoking a key ends its sessions at once.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update

from cairn.core.ids import utcnow
from cairn.store.keys import hash_key
from cairn.store.repository import Repository
from cairn.store.schema import api_keys, ui_sessions

# Expired sessions are deleted once a day past their end, when a new sign-in happens.
_KEEP_EXPIRED = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Session:
    tenant_id: str
    key_prefix: str


class SessionRepository(Repository):
    def create(self, key: str, ttl_seconds: int) -> tuple[str, Session] | None:
        """A new session for an active ``key``: (cookie token, session), or None."""
        digest = hash_key(key)
        now = utcnow()
        token = secrets.token_urlsafe(32)
        with self._writing() as conn:
            row = conn.execute(
                select(
                    api_keys.c.id, api_keys.c.key_hash, api_keys.c.tenant_id, api_keys.c.prefix
                ).where(api_keys.c.key_hash == digest, api_keys.c.revoked_at.is_(None))
            ).first()
            if row is None or not hmac.compare_digest(row.key_hash, digest):
                return None
            conn.execute(delete(ui_sessions).where(ui_sessions.c.expires_at < now - _KEEP_EXPIRED))
            conn.execute(
                ui_sessions.insert().values(
                    id=hash_key(token),
                    tenant_id=row.tenant_id,
                    key_id=row.id,
                    created_at=now,
                    expires_at=now + timedelta(seconds=ttl_seconds),
                )
            )
        return token, Session(str(row.tenant_id), str(row.prefix))

    def resolve(self, token: str) -> Session | None:
        """The live session of ``token``, or None (unknown, expired, signed out, key revoked)."""
        digest = hash_key(token)
        stmt = (
            select(ui_sessions.c.id, ui_sessions.c.tenant_id, api_keys.c.prefix)
            .join(api_keys, api_keys.c.id == ui_sessions.c.key_id)
            .where(
                ui_sessions.c.id == digest,
                ui_sessions.c.revoked_at.is_(None),
                ui_sessions.c.expires_at > utcnow(),
                api_keys.c.revoked_at.is_(None),
            )
        )
        with self._reading() as conn:
            row = conn.execute(stmt).first()
        if row is None or not hmac.compare_digest(row.id, digest):
            return None
        return Session(str(row.tenant_id), str(row.prefix))

    def revoke(self, token: str) -> bool:
        """Sign a session out; True when a live one was ended."""
        with self._writing() as conn:
            result = conn.execute(
                update(ui_sessions)
                .where(ui_sessions.c.id == hash_key(token), ui_sessions.c.revoked_at.is_(None))
                .values(revoked_at=utcnow())
            )
        return bool(result.rowcount)
