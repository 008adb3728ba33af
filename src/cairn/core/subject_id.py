"""The one rule for subject ids, shared by every route, the SDK, the CLI, MCP and ladders.

A subject id is what users already have for the person or thing a memory is about: an e-mail
address (``user@example.com``), ``+`` tags, a name in any script (``José``, ``李雷``, ``Анна``),
``customer:globex``. The rule:

- 1 to 256 characters;
- printable text: letters, marks, digits, punctuation, symbols and inner spaces of any script,
  plus the invisible formatting characters emoji and right-to-left text need (ZWJ, LRM, …),
  but not the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
  U+2066-U+2069: they make one id display as another), and at least one visible character;
  no control characters, no line breaks, no other whitespace than the plain space;
- no ``/`` (subject ids are URL path segments: ``DELETE /v1/subjects/{subject_id}``);
- no leading or trailing space, and not ``.`` or ``..`` (URL clients rewrite those segments).

An id is kept in Unicode NFC (``canonical_id``): ``José`` typed with a combining accent
(NFD, as some systems write it) and with the composed ``é`` is one subject.

In a URL path, percent-encode it as any segment (``user%40example.com``, ``a%2Bb``).
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, Field

MAX_SUBJECT_ID = 256
SUBJECT_ID_RULE = (
    "1-256 printable characters of any script (e-mail addresses and + allowed), "
    "without '/', without leading or trailing spaces, not '.' or '..'"
)


def subject_id_problem(value: str) -> str | None:
    """Why ``value`` is not a subject id, or None when it is one."""
    # Counted as stored (NFC): ``é`` typed as ``e`` + U+0301 is one character, as composed.
    if not 1 <= len(canonical_id(value)) <= MAX_SUBJECT_ID:
        return f"must be 1-{MAX_SUBJECT_ID} characters"
    if "/" in value:
        return "must not contain '/'"
    if value in (".", ".."):
        return "must not be '.' or '..'"
    if value != value.strip():
        return "must not start or end with whitespace"
    problem = unprintable_problem(value)
    if problem is not None:
        return problem
    if all(ch == " " or unicodedata.category(ch) == "Cf" for ch in value):
        return "must have a visible character"
    return None


def unprintable_problem(value: str, *, spaces: bool = False) -> str | None:
    """Why ``value`` is not printable text of a name (a subject id, a slate file), or None:
    letters, marks, digits, punctuation, symbols and the plain space of any script, and the
    invisible formatting characters emoji and right-to-left text need; not a control (C0,
    DEL, C1), a line or paragraph separator, another space, an unassigned character or a
    noncharacter, a private-use or surrogate code point, or a bidirectional embedding,
    override or isolate (they make one name display as another: ``gnp.exe`` as ``exe.png``).
    ``spaces``: any space separator is printable too (a file name in Japanese may hold an
    ideographic space, U+3000)."""
    for ch in value:
        # Format characters (Cf) are not "printable" to Python, yet emoji sequences (ZWJ) and
        # right-to-left text (LRM/RLM) need them; the embeddings, overrides and isolates only
        # make one name display as another.
        if ch in _BIDI_CONTROLS:
            return f"must not contain a bidirectional control (U+{ord(ch):04X})"
        category = unicodedata.category(ch)
        if not (ch.isprintable() or category == "Cf" or (spaces and category == "Zs")):
            return f"must be printable text (U+{ord(ch):04X} is not)"
    return None


# LRE, RLE, PDF, LRO, RLO and LRI, RLI, FSI, PDI.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def canonical_id(value: str) -> str:
    """An id (subject, runtime, agent, per-user slate user) in the one form it is stored in:
    Unicode NFC, so the composed and decomposed spellings of one text are one id."""
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def check_subject_id(value: str) -> str:
    """``value`` in its canonical form (``canonical_id``) if it is a subject id; ValueError
    naming the rule otherwise."""
    problem = subject_id_problem(value)
    if problem is not None:
        raise ValueError(f"subject id {problem}: {SUBJECT_ID_RULE}")
    return canonical_id(value)


def is_subject_id(value: str) -> bool:
    return subject_id_problem(value) is None


SubjectIdStr = Annotated[
    str,
    Field(description=f"Subject id: {SUBJECT_ID_RULE}."),
    AfterValidator(check_subject_id),
]
