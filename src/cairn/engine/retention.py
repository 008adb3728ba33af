"""Retention: expire each tenant's episodes and memories older than its time-to-live.

The compile worker sweeps every ``retention_interval_s`` (``cairn worker`` on PostgreSQL, the
in-process worker on SQLite); sweeps are idempotent, so several workers sweeping at once only
repeat a cheap query. Each sweep that deleted anything leaves an audit row, counted in
``/metrics``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from cairn.core.ids import utcnow
from cairn.engine.erasure_watch import announce, forget_locally
from cairn.errors import InvalidInput
from cairn.store import Store
from cairn.store.retention import RetentionPolicy

log = logging.getLogger("cairn.retention")

MAX_TTL_DAYS = 36_500


@dataclass(frozen=True)
class SweepResult:
    tenants: int = 0
    episodes_deleted: int = 0
    memories_deleted: int = 0


def set_policy(
    store: Store, tenant_id: str, episode_ttl_days: int | None, memory_ttl_days: int | None
) -> RetentionPolicy:
    for name, value in (
        ("episode_ttl_days", episode_ttl_days),
        ("memory_ttl_days", memory_ttl_days),
    ):
        if value is not None and not 1 <= value <= MAX_TTL_DAYS:
            raise InvalidInput(
                f"{name} must be between 1 and {MAX_TTL_DAYS} days (or null: keep forever)",
                code="invalid_retention",
            )
    policy = RetentionPolicy(tenant_id, episode_ttl_days, memory_ttl_days)
    store.retention.set(policy, utcnow())
    return policy


def sweep_retention(store: Store) -> SweepResult:
    """Expire what every tenant's policy says is too old; returns the totals."""
    now = utcnow()
    tenants = episodes = memories = 0
    for policy in store.retention.policies():
        gone_e = gone_m = 0
        if policy.episode_ttl_days:
            before = now - timedelta(days=policy.episode_ttl_days)
            gone_e = store.retention.expire(policy.tenant_id, "episodes", before)
        if policy.memory_ttl_days:
            before = now - timedelta(days=policy.memory_ttl_days)
            gone_m = store.retention.expire(policy.tenant_id, "memories", before)
        if gone_e or gone_m:
            store.retention.record(policy.tenant_id, now, gone_e, gone_m)
            _scrub(store, policy.tenant_id)
            log.info(
                "retention: tenant %s: %d episode(s), %d memory(ies) expired",
                policy.tenant_id,
                gone_e,
                gone_m,
            )
        tenants += 1
        episodes += gone_e
        memories += gone_m
    return SweepResult(tenants, episodes, memories)


def _scrub(store: Store, tenant_id: str) -> None:
    """What every deletion does after it: merge the tenant's full-text segments (SQLite keeps
    deleted terms in old ones until they merge), forget what the processes remember of the
    tenant's text (this one at once, the others through the erasure log) and checkpoint the
    write-ahead log, so no expired text stays in the database files."""
    with store.transaction() as tx:
        tx.lifecycle.purge_index(tenant_id)
        announce(tx, tenant_id)
    try:
        forget_locally(store, None, tenant_id)
    finally:
        store.lifecycle.checkpoint()


class RetentionClock:
    """Says when the next sweep is due (the first one at once)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        if self.interval_s <= 0:
            return False
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                return False
            self._next = now + self.interval_s
            return True

    def maybe_sweep(self, store: Store) -> None:
        if self.due():
            try:
                sweep_retention(store)
            except Exception:  # e.g. the database is briefly away: the next interval retries
                log.exception("retention sweep failed")
