"""What every repository shares: its database, and the transaction it may be bound to.

A repository of ``Store`` is unbound: each call opens its own transaction (a read snapshot or
a write). The same repository inside a unit of work (``Store.transaction()`` or
``Store.snapshot()``, see ``cairn.store.unit``) is bound to that unit's one transaction, so
several calls commit or roll back together. Methods that only make sense as a step of a larger
transaction (locking a partition, inserting a compiled memory) need a bound repository.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from sqlalchemy import Connection

from cairn.store.database import Database


class NotInTransaction(RuntimeError):
    """A repository method that is a step of a transaction was called outside one (or a write
    was attempted in a read-only snapshot): a programming error, never a user's."""


class Repository:
    """A repository over ``db``: unbound, or bound to one open transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._conn: Connection | None = None
        self._writable = False

    def bound(self, conn: Connection, *, writable: bool) -> Self:
        """This repository bound to ``conn`` (an open transaction of ``db``)."""
        clone = copy.copy(self)
        clone._conn = conn
        clone._writable = writable
        return clone

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """The bound transaction, or a read snapshot of its own."""
        if self._conn is not None:
            yield self._conn
            return
        with self.db.read() as conn:
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """The bound (writable) transaction, or a write transaction of its own."""
        if self._conn is not None:
            yield self._tx_write
            return
        with self.db.write() as conn:
            yield conn

    @property
    def _tx_read(self) -> Connection:
        """The bound transaction; calling outside a unit of work is an error."""
        if self._conn is None:
            raise NotInTransaction(
                f"{type(self).__name__}: call this inside store.snapshot() or store.transaction()"
            )
        return self._conn

    @property
    def _tx_write(self) -> Connection:
        """The bound write transaction; outside ``store.transaction()`` it is an error."""
        if self._conn is None or not self._writable:
            raise NotInTransaction(
                f"{type(self).__name__}: a write step: call it inside store.transaction()"
            )
        return self._conn


__all__ = ["NotInTransaction", "Repository"]
