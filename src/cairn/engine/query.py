"""Query processing for the lexical lane: words, stop words, entities and dates.

A question such as "When did Melanie paint a sunrise?" becomes the OR-ed terms
``melanie paint sunrise``; the backend stems them (FTS5 porter, PostgreSQL english). Dates the
question names ("in May 2023", "2022") become the same keywords the compiler indexes for a
memory's absolute date, so they match memories of that time.
"""

from __future__ import annotations

import re

from cairn.engine.compile.text import MONTHS, STOP_WORDS, words


def query_terms(query: str, *, max_terms: int = 32) -> list[str]:
    """The distinct search terms of ``query`` in order: stop words removed (unless nothing
    else is left), plain ``[a-z0-9]`` words, at most ``max_terms``."""
    raw = words(query)
    kept = [w for w in raw if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    if not kept:
        kept = [w for w in raw if len(w) > 1]
    out: list[str] = []
    for w in kept:
        for part in re.findall(r"[a-z0-9]+", w):
            if part not in out:
                out.append(part)
    for term in date_terms(query):
        if term not in out:
            out.append(term)
    return out[:max_terms]


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
