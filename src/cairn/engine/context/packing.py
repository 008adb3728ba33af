"""Packing: choose candidates under a budget, in a deterministic order.

Priority: recent items first (newest first, as the recent lane gives them), then every other
item by score (higher first), then source class, kind and id — so the same corpus, request and
budget always produce the same items in the same order. Items are taken greedily in that order;
one that would overflow ``max_tokens`` or ``max_chars`` is skipped (a smaller one after it may
still fit), and packing stops at ``max_items``. ``truncated`` is set when any candidate that
passed ``min_score`` was left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cairn.core.memory import Budget, ContextItem, ContextResult

_CLASS_ORDER = {"recent": 0, "summary": 1, "long_term": 2}

# A rendering's tokens for one item besides its text, given the items already taken (a
# renderer that shares a marker between items charges it once).
Overhead = Callable[[ContextItem, Sequence[ContextItem]], int]


def priority_order(candidates: Sequence[ContextItem]) -> list[ContextItem]:
    """Recent items in their given order, then the rest by descending score (ties: class,
    kind, id). Later duplicates (same id or same text) are dropped."""
    recent = [c for c in candidates if c.source_class == "recent"]
    rest = sorted(
        (c for c in candidates if c.source_class != "recent"),
        key=lambda c: (-c.score, _CLASS_ORDER[c.source_class], c.kind, c.id),
    )
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    out = []
    for c in [*recent, *rest]:
        text = c.content.strip()
        if c.id in seen_ids or text in seen_text:
            continue
        seen_ids.add(c.id)
        seen_text.add(text)
        out.append(c)
    return out


def apply_min_score(candidates: Sequence[ContextItem], min_score: float) -> list[ContextItem]:
    """Drop non-recent items scored below ``min_score``; recent items are always kept."""
    return [c for c in candidates if c.source_class == "recent" or c.score >= min_score]


def pack_context(
    candidates: Sequence[ContextItem],
    budget: Budget,
    *,
    reserved: int = 0,
    overhead: Overhead | None = None,
) -> ContextResult:
    """Pack ``candidates`` (already filtered by ``min_score``) under ``budget`` (defaults
    applied); every limit holds for the result together. When the packed items will be
    rendered, ``reserved`` tokens of ``max_tokens`` go to the rendering's frame and
    ``overhead(item, taken)`` is charged per item besides its own tokens (``token_count`` stays the
    items' own)."""
    return pack_with_cost(candidates, budget, reserved=reserved, overhead=overhead)[0]


def pack_with_cost(
    candidates: Sequence[ContextItem],
    budget: Budget,
    *,
    reserved: int = 0,
    overhead: Overhead | None = None,
) -> tuple[ContextResult, int]:
    """``pack_context``, and the tokens the packed result charges against ``max_tokens``
    (``reserved`` plus each item's tokens and overhead)."""
    limits = budget.resolved()
    items: list[ContextItem] = []
    tokens = chars = 0
    charged = reserved
    truncated = False
    for c in priority_order(candidates):
        if len(items) >= limits.max_items:
            truncated = True
            break
        cost = c.token_count + (overhead(c, items) if overhead is not None else 0)
        if charged + cost > limits.max_tokens:
            truncated = True
            continue
        if limits.max_chars and chars + len(c.content) > limits.max_chars:
            truncated = True
            continue
        items.append(c)
        charged += cost
        tokens += c.token_count
        chars += len(c.content)
    return ContextResult(items=items, token_count=tokens, truncated=truncated), charged
