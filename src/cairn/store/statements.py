"""Textual SQL statements, built once per distinct string.

``sqlalchemy.text`` parses its string for bind parameters with a regular expression and makes
one ``BindParameter`` per name on every call, and a new statement object computes its cache
key afresh on every execution. The search's statements are the same few strings request after
request (a few hundred bind names for the candidates' ``IN`` lists), so building them was a
tenth of a small partition's context request. ``TextClause`` objects are immutable: a process
may share them across threads and connections.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import TextClause, text


@lru_cache(maxsize=1024)
def statement(sql: str) -> TextClause:
    """``text(sql)``, remembered (the 1,024 most recently used strings)."""
    return text(sql)


__all__ = ["statement"]
