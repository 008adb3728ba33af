"""Fit rendered context under a limit: the wrapper of a renderer costs tokens and characters
too, so a result packed under the budget may render a little over it. Keep the longest prefix
of the items (they are in priority order) whose rendering fits — by tokens for ``/v1/context``
(``fit_to_tokens``), by the renderer's own ``max_chars`` for hooks and scope rendering
(``fit_rendering``). Both use the same binary search (``longest_fitting_prefix``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cairn.core.memory import ContextItem, ContextRenderer, ContextResult
from cairn.core.tokens import Tokenizer

T = TypeVar("T")


def prefix_result(items: list[ContextItem], n: int) -> ContextResult:
    """The first ``n`` items as a (truncated) result."""
    kept = items[:n]
    return ContextResult(items=kept, token_count=sum(i.token_count for i in kept), truncated=True)


def longest_fitting_prefix(count: int, attempt: Callable[[int], T | None]) -> T | None:
    """The result of ``attempt(n)`` for the largest ``n`` in ``[1, count - 1]`` where it is
    not None (the full list is known not to fit), or None. Rendering fewer items is never
    larger, so a binary search finds it with about log2(count) renders."""
    best: T | None = None
    lo, hi = 1, count - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = attempt(mid)
        if candidate is not None:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def fit_to_tokens(
    result: ContextResult, renderer: ContextRenderer, max_tokens: int, tokenizer: Tokenizer
) -> tuple[ContextResult, str, int]:
    """The longest prefix of ``result.items`` whose rendering is within ``max_tokens``;
    returns it, its text and the text's token count (the empty rendering is the floor,
    returned even if over the limit)."""
    text = renderer.render(result)
    tokens = tokenizer.count(text)
    if tokens <= max_tokens or not result.items:
        return result, text, tokens
    items = list(result.items)

    def render(n: int) -> tuple[ContextResult, str, int]:
        candidate = prefix_result(items, n)
        rendered = renderer.render(candidate)
        return candidate, rendered, tokenizer.count(rendered)

    def attempt(n: int) -> tuple[ContextResult, str, int] | None:
        found = render(n)
        return found if found[2] <= max_tokens else None

    return longest_fitting_prefix(len(items), attempt) or render(0)


def fit_rendering(result: ContextResult, renderer: ContextRenderer) -> tuple[ContextResult, str]:
    """The longest prefix of ``result.items`` that ``renderer`` renders within its own
    ``max_chars``; returns it (``truncated`` when items were dropped) and its text.

    Packing bounds the items' own characters, not the renderer's markup around them, so a full
    budget can render over the limit; dropping the lowest-ranked items (the end of the list)
    until it fits keeps ``max_chars`` a hard limit without failing every call once memory has
    grown. Only when even the empty result renders too large is ``RenderTooLarge`` raised.
    """
    from cairn.engine.context.render import RenderTooLarge

    try:
        return result, renderer.render(result)
    except RenderTooLarge:
        if not result.items:
            raise
    items = list(result.items)

    def attempt(n: int) -> tuple[ContextResult, str] | None:
        candidate = prefix_result(items, n)
        try:
            return candidate, renderer.render(candidate)
        except RenderTooLarge:
            return None

    found = longest_fitting_prefix(len(items), attempt)
    if found is not None:
        return found
    empty = prefix_result(items, 0)
    return empty, renderer.render(empty)  # raises RenderTooLarge when even this is too large
