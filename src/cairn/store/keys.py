"""Tenants and API keys. Keys are random, so a SHA-256 digest is a safe stored form."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import func, select, update

from cairn.core.ids import utcnow, uuid7
from cairn.core.tenants import ApiKeyInfo, tenant_id_problem
from cairn.errors import InvalidInput
from cairn.store.database import Database
from cairn.store.repository import Repository
from cairn.store.schema import api_keys, tenants

KEY_PREFIX = "cairn_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRepository(Repository):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        # Bumped whenever this process stores a key, so cached "no key exists" answers
        # are dropped at once (see Services.auth_required).
        self.generation = 0

    def ensure_tenant(self, tenant_id: str) -> None:
        with self._writing() as conn:
            conn.execute(
                self.db.insert(tenants)
                .values(id=tenant_id, created_at=utcnow())
                .on_conflict_do_nothing(index_elements=["id"])
            )

    def create(
        self, tenant_id: str, name: str = "", key: str | None = None
    ) -> tuple[str, ApiKeyInfo]:
        """Create a key for ``tenant_id`` (made if new); returns the key, shown only now."""
        problem = tenant_id_problem(tenant_id)
        if problem is not None:
            raise InvalidInput(f"tenant id {problem}", code="invalid_tenant")
        key = key or new_key()
        info = ApiKeyInfo(
            id=str(uuid7()),
            tenant_id=tenant_id,
            prefix=key[:12],
            name=name,
            created_at=utcnow(),
            revoked_at=None,
        )
        self.ensure_tenant(tenant_id)
        with self._writing() as conn:
            conn.execute(
                api_keys.insert().values(
                    id=info.id,
                    tenant_id=tenant_id,
                    key_hash=hash_key(key),
                    prefix=info.prefix,
                    name=name,
                    created_at=info.created_at,
                )
            )
        self.generation += 1
        return key, info

    def ensure_key(self, tenant_id: str, key: str, name: str = "settings") -> None:
        """Register a configured key (``CAIRN_API_KEY``) if it is not stored yet."""
        self.ensure_tenant(tenant_id)
        with self._writing() as conn:
            conn.execute(
                self.db.insert(api_keys)
                .values(
                    id=str(uuid7()),
                    tenant_id=tenant_id,
                    key_hash=hash_key(key),
                    prefix=key[:12],
                    name=name,
                    created_at=utcnow(),
                )
                .on_conflict_do_nothing(index_elements=["key_hash"])
            )
        self.generation += 1

    def tenant_for(self, key: str) -> str | None:
        """The tenant of an active key, or None. The digest is compared in constant time."""
        digest = hash_key(key)
        with self._reading() as conn:
            row = conn.execute(
                select(api_keys.c.key_hash, api_keys.c.tenant_id).where(
                    api_keys.c.key_hash == digest, api_keys.c.revoked_at.is_(None)
                )
            ).first()
        if row is None or not hmac.compare_digest(row.key_hash, digest):
            return None
        return str(row.tenant_id)

    def list(self, tenant_id: str | None = None) -> list[ApiKeyInfo]:
        stmt = select(api_keys).order_by(api_keys.c.created_at)
        if tenant_id is not None:
            stmt = stmt.where(api_keys.c.tenant_id == tenant_id)
        with self._reading() as conn:
            return [
                ApiKeyInfo(
                    id=r.id,
                    tenant_id=r.tenant_id,
                    prefix=r.prefix,
                    name=r.name,
                    created_at=r.created_at,
                    revoked_at=r.revoked_at,
                )
                for r in conn.execute(stmt)
            ]

    def revoke(self, key_id_or_prefix: str) -> int:
        """Revoke by id or by the printed prefix; returns how many keys were revoked."""
        with self._writing() as conn:
            res = conn.execute(
                update(api_keys)
                .where(
                    (api_keys.c.id == key_id_or_prefix) | (api_keys.c.prefix == key_id_or_prefix),
                    api_keys.c.revoked_at.is_(None),
                )
                .values(revoked_at=utcnow())
            )
            return int(res.rowcount or 0)

    def any_key_exists(self) -> bool:
        """Whether a key was ever created (revoked ones count: revoking the last key must
        not turn authentication off)."""
        with self._reading() as conn:
            return conn.execute(select(func.count()).select_from(api_keys)).scalar_one() > 0
