"""Text analysis: the one definition of how text becomes a hash key and search terms.

Everything that hashes, indexes or searches text goes through here, for memories and for
document chunks, on both backends, so a query is cut into terms exactly as the stored text was.

- **Hash key** (``hash_key``): NFKC, then case folding, then runs of whitespace made one space.
  Nothing else is dropped: every script, digit, symbol, emoji and punctuation mark counts, so
  two texts share a key only if they read the same (full-width ``Tea`` and ``tea``,
  ``Straße`` and ``STRASSE``), never because a script was thrown away.
- **Search terms** (``index_text``, ``query_terms``): the text is NFKC-normalized and case
  folded, then accents are removed where they are optional (Latin, Greek, Cyrillic diacritics,
  Arabic vowel marks, Hebrew points — ``Genève`` is ``geneve``), while marks that make a
  different letter elsewhere (Devanagari vowel signs, Japanese voicing marks) stay. Then:

  - scripts written with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, …) give
    one term per word; an apostrophe joins a word only for the stop-word check (``don't``),
    the index holds its parts;
  - scripts written without spaces (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
    Myanmar) give overlapping character bigrams plus single characters — ``我住在北京``
    indexes ``北京``, so the query ``北京`` (one bigram) finds it;
  - symbols, emoji and punctuation separate terms and are not searchable.

  The backend then tokenizes the analysed text only at spaces (FTS5 ``unicode61`` with marks
  kept inside tokens; PostgreSQL's parser) and stems English words (FTS5 ``porter``,
  PostgreSQL ``english``). Queries drop English stop words (unless nothing else is left).
"""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import datetime

import regex

# Scripts written without spaces between words: indexed as character bigrams.
_UNSPACED = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\u30fc\u3005\u3006\u3007"  # Common-script marks used inside Japanese/Chinese words
)
# A run of unspaced-script characters, or a word of any other script (letters, marks, digits),
# apostrophes allowed between its parts.
_TOKEN = regex.compile(
    rf"(?P<cjk>[{_UNSPACED}]+)"
    rf"|(?P<word>[[\p{{L}}\p{{M}}\p{{N}}]--[{_UNSPACED}]]+"
    rf"(?:['\u2019][[\p{{L}}\p{{M}}\p{{N}}]--[{_UNSPACED}]]+)*)",
    regex.V1,
)
_APOSTROPHE = regex.compile(r"['\u2019]")
# Marks that only accent a letter: combining diacritics (Latin, Greek, Cyrillic), Arabic
# tashkeel, Hebrew points and cantillation. Removed for search; other scripts' marks are kept.
_OPTIONAL_MARKS = regex.compile(
    r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    r"\u0591-\u05c7\u064b-\u065f\u0670\u06d6-\u06ed]"
)
# Letters with a stroke or ligatures that NFKD does not decompose.
_LETTERS = str.maketrans(
    {"ø": "o", "ł": "l", "đ": "d", "ð": "d", "ħ": "h", "æ": "ae", "œ": "oe", "þ": "th"}
    | {"\u0131": "i"}  # dotless i
)

# Only the digest format's tag: a stored hash of the older, ASCII-only scheme can never equal
# one of this scheme, so re-hashing rows in place never trips the unique constraint.
_HASH_SCHEME = "text-v2"

ENGLISH_STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't d did didn't do
    does doesn't doing don't down during each ever few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself just kind let's likely ll m
    may me might more most must mustn't my myself no nor not of off on once only or other ought
    our ours ourselves out over own re really s same shall shan't she she'd she'll she's should
    shouldn't so some sort such t than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    ve very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves""".split()  # noqa: SIM905
)


def hash_key(text: str) -> str:
    """The form two texts must share to count as one: NFKC, case folded, whitespace runs as
    one space (ends trimmed). Every other character is kept."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def content_digest(content: str, starts: datetime | None = None) -> str:
    """SHA-256 hex of ``content``'s hash key; ``starts`` (a single-valued fact's start) is part
    of it when given, so a value that returns after another is a new memory."""
    basis = _HASH_SCHEME + "\x1f" + hash_key(content)
    if starts is not None:
        # U+001F is whitespace to ``str.split``, so no hash key contains it: unambiguous.
        basis += "\x1f" + starts.isoformat()
    return hashlib.sha256(basis.encode()).hexdigest()


def fold(text: str) -> str:
    """NFKC, case folded, optional accents removed (see the module docstring)."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _OPTIONAL_MARKS.sub("", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", text).translate(_LETTERS)


def _bigrams(run: str, unigrams: bool) -> list[str]:
    """Overlapping pairs of an unspaced-script run in order, each preceded by its first
    character when ``unigrams`` (a one-character run is always that character)."""
    if len(run) == 1:
        return [run]
    out: list[str] = []
    for i in range(len(run)):
        if unigrams:
            out.append(run[i])
        if i + 1 < len(run):
            out.append(run[i : i + 2])
    return out


def _tokens(text: str, *, unigrams: bool) -> list[tuple[str, bool]]:
    """``(token, unspaced)`` of folded ``text``: words keep their apostrophes here."""
    out: list[tuple[str, bool]] = []
    for m in _TOKEN.finditer(fold(text)):
        if m.group("cjk"):
            out.extend((t, True) for t in _bigrams(m.group("cjk"), unigrams))
        else:
            out.append((m.group("word"), False))
    return out


def index_terms(text: str) -> list[str]:
    """Every search term of ``text`` in order, repeats kept (what the index stores): single
    characters of unspaced scripts too, so a one-character query finds them."""
    out: list[str] = []
    for token, unspaced in _tokens(text, unigrams=True):
        if unspaced or ("'" not in token and "\u2019" not in token):
            out.append(token)
        else:
            out.extend(p for p in _APOSTROPHE.split(token) if p)
    return out


def index_text(text: str) -> str:
    """The analysed form of ``text`` that full-text indexes store: terms joined by spaces."""
    return " ".join(index_terms(text))


def content_terms(text: str, *, min_length: int = 3) -> list[str]:
    """Distinct terms of ``text`` that carry content: no stop words, no short words of spaced
    scripts (``min_length``); unspaced-script bigrams and single characters are kept."""
    out: dict[str, None] = {}
    for token, unspaced in _tokens(text, unigrams=False):
        if unspaced:
            out.setdefault(token)
            continue
        if token.replace("\u2019", "'") in ENGLISH_STOP_WORDS:
            continue
        for part in _APOSTROPHE.split(token):
            if len(part) >= min_length and part not in ENGLISH_STOP_WORDS:
                out.setdefault(part)
    return list(out)


def query_terms(query: str, *, max_terms: int = 32) -> list[str]:
    """The distinct search terms of ``query`` in order: English stop words and one-letter
    words removed, unless nothing else is left; digits and unspaced-script characters are
    always terms. An unspaced-script run of two or more characters gives only its bigrams:
    single characters would match far too much."""
    tokens = _tokens(query, unigrams=False)
    kept: dict[str, None] = {}
    for token, unspaced in tokens:
        if unspaced:
            kept.setdefault(token)
            continue
        if token.replace("\u2019", "'") in ENGLISH_STOP_WORDS:
            continue
        for part in _APOSTROPHE.split(token):
            if part and part not in ENGLISH_STOP_WORDS and (len(part) > 1 or part.isdigit()):
                kept.setdefault(part)
    if not kept:
        for term in index_terms(query):
            if len(term) > 1:
                kept.setdefault(term)
    return list(kept)[:max_terms]
