"""Query processing for lexical search: terms, plus the dates a query names.

The terms are those of ``cairn.core.analysis`` (the analysis the index was built with), so
"When did Melanie paint a sunrise?" becomes the OR-ed terms ``melanie paint sunrise`` and
"我住在哪里" its bigrams; the backend stems English words (FTS5 porter, PostgreSQL english).
Dates the question names ("in May 2023", "2022") become the same keywords the compiler indexes
for a memory's absolute date, so they match memories of that time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from cairn.core import analysis
from cairn.engine.compile.text import MONTHS

# Speaker labels of messages without a name ("User: …"): every turn of a role carries the word,
# so as a query term it matches everything and says nothing.
ROLE_WORDS = frozenset({"user", "assistant", "system"})


def query_terms(query: str, *, max_terms: int = 32) -> list[str]:
    """The distinct search terms of ``query`` in order (``cairn.core.analysis.query_terms``)
    and the keywords of the dates it names, at most ``max_terms``."""
    out = analysis.query_terms(query, max_terms=max_terms)
    for term in date_terms(query):
        if term not in out:
            out.append(term)
    return out[:max_terms]


def ranking_terms(query: str) -> list[str]:
    """The terms lexical search ranks by (memories and document chunks alike): the query's
    terms without role words, unless nothing else is left."""
    terms = query_terms(query)
    kept = [t for t in terms if t not in ROLE_WORDS]
    return kept or terms


def date_terms(query: str) -> list[str]:
    """Keywords for the dates a query names (years, months), matching memory keywords."""
    out: list[str] = []
    lower = query.lower()
    for m in re.finditer(r"\b(19|20)\d\d\b", lower):
        out.append(m.group(0))
    for name in MONTHS:
        if re.search(rf"\b{name}\b", lower):
            out.append(name)
    return out


# A memo of a pure function (a text's terms never change), bounded; keyed by queries and
# speakers' names of every tenant, so an erasure empties it (``forget_name_memo``).
@functools.lru_cache(maxsize=4096)
def _name_terms(text: str) -> frozenset[str]:
    return frozenset(analysis.index_terms(text))


def forget_name_memo() -> None:
    """Empty the memo of names' terms (after an erasure)."""
    _name_terms.cache_clear()


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """The ``speakers`` the query names: every search term of the name is among the query's
    (so ``Caroline's`` names Caroline, ``林晓住在哪里`` names 林晓 and an inflected Russian
    name its nominative). Role labels (``user``, ``assistant``) never count as names."""
    asked = _name_terms(query)
    out = set()
    for name in speakers:
        if not name or name.casefold() in ROLE_WORDS:
            continue
        terms = _name_terms(name)
        if terms and terms <= asked:
            out.add(name)
    return out
