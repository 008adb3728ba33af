"""Fit rendered context under a token limit: the wrapper of a renderer costs tokens too, so a
result packed under ``max_tokens`` may render a little over it. Keep the longest prefix of the
items (they are in priority order) whose rendering fits."""

from __future__ import annotations

from cairn.core.memory import ContextItem, ContextRenderer, ContextResult
from cairn.engine.tokens import Tokenizer


def fit_to_tokens(
    result: ContextResult, renderer: ContextRenderer, max_tokens: int, tokenizer: Tokenizer
) -> tuple[ContextResult, str, int]:
    """The longest prefix of ``result.items`` whose rendering is within ``max_tokens``;
    returns it, its text and the text's token count.

    Rendering fewer items never costs more tokens, so a binary search over the prefix length
    finds the exact longest prefix with about log2(n) renders (n is at most ``max_items``).
    """
    text = renderer.render(result)
    tokens = tokenizer.count(text)
    if tokens <= max_tokens or not result.items:
        return result, text, tokens

    items = list(result.items)

    def attempt(n: int) -> tuple[ContextResult, str, int]:
        kept: list[ContextItem] = items[:n]
        candidate = ContextResult(
            items=kept, token_count=sum(i.token_count for i in kept), truncated=True
        )
        rendered = renderer.render(candidate)
        return candidate, rendered, tokenizer.count(rendered)

    best = attempt(0)  # the empty rendering is the floor; returned even if over the limit
    lo, hi = 1, len(items) - 1  # the full list is known not to fit
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = attempt(mid)
        if candidate[2] <= max_tokens:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def fit_rendering(result: ContextResult, renderer: ContextRenderer) -> tuple[ContextResult, str]:
    """The longest prefix of ``result.items`` that ``renderer`` renders within its own
    ``max_chars``; returns it (``truncated`` when items were dropped) and its text.

    Packing bounds the items' own characters, not the renderer's markup around them, so a full
    budget can render over the limit; dropping the lowest-ranked items (the end of the list)
    until it fits keeps ``max_chars`` a hard limit without failing every call once memory has
    grown. Only when even the empty result renders too large is ``RenderTooLarge`` raised.
    Same binary search as ``fit_to_tokens``: rendering fewer items is never longer.
    """
    from cairn.engine.context.render import RenderTooLarge

    try:
        return result, renderer.render(result)
    except RenderTooLarge:
        if not result.items:
            raise
    items = list(result.items)

    def attempt(n: int) -> tuple[ContextResult, str] | None:
        kept: list[ContextItem] = items[:n]
        candidate = ContextResult(
            items=kept, token_count=sum(i.token_count for i in kept), truncated=True
        )
        try:
            return candidate, renderer.render(candidate)
        except RenderTooLarge:
            return None

    best = attempt(0)
    if best is None:  # not even the empty result fits: the renderer's own error says why
        renderer.render(ContextResult(items=[], token_count=0, truncated=True))
        raise AssertionError("unreachable: the empty rendering was too large")  # pragma: no cover
    lo, hi = 1, len(items) - 1  # the full list is known not to fit
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = attempt(mid)
        if candidate is not None:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best
