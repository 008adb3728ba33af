"""Content scaffolds: parsed once at load time, rendered by plain single-pass substitution.

Syntax:

- ``{name}`` is a placeholder; ``name`` matches ``^[a-zA-Z0-9_]+$`` and must be a declared field.
- ``{{`` is a literal ``{`` and ``}}`` a literal ``}``.
- Any other ``{`` or ``}`` is an error (reported with its line and column), so a typo never
  silently becomes literal text.

Rendering walks the parsed pieces once and joins literal text with the caller's values. A
value is never looked at again after it is inserted, so a value containing ``{other}`` stays
exactly that text: nothing is expanded twice, and the same values always give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FIELD_NAME_PATTERN = r"^[a-zA-Z0-9_]+$"
_NAME = re.compile(r"[a-zA-Z0-9_]+")


class ScaffoldSyntaxError(ValueError):
    """A scaffold has a brace that is neither ``{{``, ``}}`` nor part of ``{name}``."""


@dataclass(frozen=True)
class Placeholder:
    """A ``{name}`` in a scaffold."""

    name: str


Piece = str | Placeholder


def _where(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def parse_scaffold(text: str) -> tuple[Piece, ...]:
    """Split a scaffold into literal strings and placeholders (adjacent literals merged)."""
    pieces: list[Piece] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "{":
            if text.startswith("{{", i):
                literal.append("{")
                i += 2
                continue
            match = _NAME.match(text, i + 1)
            if match is None or not text.startswith("}", match.end()):
                raise ScaffoldSyntaxError(
                    f"unmatched '{{' at {_where(text, i)}: write '{{{{' for a literal brace, "
                    "or '{name}' with a name of letters, digits and '_'"
                )
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(Placeholder(match.group()))
            i = match.end() + 1
        elif ch == "}":
            if text.startswith("}}", i):
                literal.append("}")
                i += 2
                continue
            raise ScaffoldSyntaxError(
                f"unmatched '}}' at {_where(text, i)}: write '}}}}' for a literal brace"
            )
        else:
            # Copy the run of ordinary characters up to the next brace in one step.
            j = i
            while j < n and text[j] not in "{}":
                j += 1
            literal.append(text[i:j])
            i = j
    if literal:
        pieces.append("".join(literal))
    return tuple(pieces)


def placeholder_names(pieces: tuple[Piece, ...]) -> list[str]:
    """Names used by a parsed scaffold, in order of first use."""
    return list(dict.fromkeys(p.name for p in pieces if isinstance(p, Placeholder)))


def render_pieces(pieces: tuple[Piece, ...], values: Mapping[str, str]) -> str:
    """Substitute every placeholder in one pass; a name without a value renders as ``""``."""
    return "".join(values.get(p.name, "") if isinstance(p, Placeholder) else p for p in pieces)


def escape_literal(text: str) -> str:
    """Write ``text`` so that it renders as itself (doubles every brace)."""
    return text.replace("{", "{{").replace("}", "}}")
