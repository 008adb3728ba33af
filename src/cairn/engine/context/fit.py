"""Fit rendered context under a token limit: the wrapper of a renderer costs tokens too, so a
result packed under ``max_tokens`` may render a little over it. Drop the lowest-priority items
(the last ones) until the rendered text fits."""

from __future__ import annotations

from cairn.core.memory import ContextRenderer, ContextResult
from cairn.engine.tokens import Tokenizer


def fit_to_tokens(
    result: ContextResult, renderer: ContextRenderer, max_tokens: int, tokenizer: Tokenizer
) -> tuple[ContextResult, str, int]:
    """The longest prefix of ``result.items`` whose rendering is within ``max_tokens``;
    returns it, its text and the text's token count."""
    items = list(result.items)
    truncated = result.truncated
    current = result
    while True:
        text = renderer.render(current)
        tokens = tokenizer.count(text)
        if tokens <= max_tokens or not items:
            return current, text, tokens
        # Estimate how many items to drop from the overflow, then re-check.
        over = tokens - max_tokens
        drop, freed = 0, 0
        for item in reversed(items):
            drop += 1
            freed += item.token_count + 12  # the item's share of the wrapper, roughly
            if freed >= over:
                break
        items = items[: len(items) - drop]
        truncated = True
        current = ContextResult(
            items=items, token_count=sum(i.token_count for i in items), truncated=truncated
        )
