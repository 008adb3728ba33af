"""fit_to_tokens keeps exactly the longest prefix whose rendering fits, never fewer."""

from __future__ import annotations

from cairn.core.tokens import get_tokenizer
from cairn.engine.context.fit import fit_to_tokens
from cairn.engine.context.render import DefaultRenderer
from tests.engine.context.test_render import result_of


def test_keeps_the_longest_fitting_prefix_for_every_limit() -> None:
    tok = get_tokenizer()
    renderer = DefaultRenderer()
    result = result_of(
        "Dana works at Globex as a data engineer.",
        "She lives in Lisbon and prefers short answers.",
        "Her dog is called Rex.",
        "The May invoice was charged twice; Tier 2 billing owns it.",
    )
    sizes = [
        tok.count(renderer.render(result.model_copy(update={"items": result.items[:n]})))
        for n in range(len(result.items) + 1)
    ]
    for limit in range(0, sizes[-1] + 5):
        fitted, text, tokens = fit_to_tokens(result, renderer, limit, tok)
        expected = max(n for n in range(len(sizes)) if sizes[n] <= limit or n == 0)
        assert len(fitted.items) == expected, (limit, sizes)
        assert tokens == tok.count(text)
        assert tokens <= limit or expected == 0
        assert fitted.truncated == (expected < len(result.items))
