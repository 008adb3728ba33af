"""Whether an evidence turn's text is really in an assembled context.

The rule (documented in docs/benchmarks.md):

1. The context is HTML-unescaped once (``&amp;`` → ``&``, ``&#x27;`` → ``'``), as a model
   reading it would; the turn's text is taken as the dataset has it, not unescaped.
2. Both are put in Unicode NFC (canonically equal text is equal), and every run of whitespace
   becomes one space, trimmed at the ends. Nothing else is changed: case, punctuation, accents
   and width all count.
3. The turn's whole normalised text must occur in the normalised context, and the occurrence
   must not be part of a longer word: when the turn's text starts (ends) with a letter or digit,
   the character before (after) the occurrence must not be one. A turn "I like tea" is not found
   in "I like teapots", and a turn cut short by packing is not found at all.

The speaker's name and the image caption are not required (renderings differ in how they show
them); the words the speaker said are.
"""

from __future__ import annotations

import html
import re
import unicodedata

_WS = re.compile(r"\s+")


def normalize_turn(text: str) -> str:
    """A dataset turn's text as it is matched (NFC, whitespace collapsed)."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def normalize_context(text: str) -> str:
    """An assembled context as it is searched (unescaped once, NFC, whitespace collapsed)."""
    return normalize_turn(html.unescape(text))


def contains_turn(context: str, turn: str) -> bool:
    """True when the normalised ``turn`` occurs whole in the normalised ``context``.

    Both arguments must already be normalised (``normalize_context`` / ``normalize_turn``).
    """
    if not turn:
        return False
    check_start, check_end = turn[0].isalnum(), turn[-1].isalnum()
    start = context.find(turn)
    while start >= 0:
        end = start + len(turn)
        before_ok = not check_start or start == 0 or not context[start - 1].isalnum()
        after_ok = not check_end or end == len(context) or not context[end].isalnum()
        if before_ok and after_ok:
            return True
        start = context.find(turn, start + 1)
    return False


def shadowed_turns(turns: dict[str, str]) -> set[str]:
    """Ids of turns whose normalised text occurs whole inside another turn's (or repeats it).

    A context holding the other turn would count as holding these, so the harness reports how
    many evidence turns are shadowed (none in the shipped datasets).
    """
    out = set()
    for tid, text in turns.items():
        for other, other_text in turns.items():
            if other != tid and len(other_text) >= len(text) and contains_turn(other_text, text):
                out.add(tid)
                break
    return out
