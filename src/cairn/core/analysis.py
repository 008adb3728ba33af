# ruff: noqa: RUF003 -- examples in many scripts
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
  kept inside tokens; PostgreSQL's parser) and stems English words (FTS5 ``porter``, PostgreSQL
  ``english``); Cyrillic, Greek, Arabic, Hebrew and Devanagari words, which neither backend
  stems, are stemmed here, at index and query time alike: Cyrillic, Greek and Devanagari with
  Snowball's Russian, Greek and Hindi (PyStemmer), Arabic with a light stemmer
  (``cairn.core.arabic``), Hebrew by its particle letters (``cairn.core.hebrew``). Queries drop
  English, Russian, Ukrainian, Greek, Arabic, Persian, Hebrew and Hindi function words, and cut
  Chinese and Japanese question words and particles out of their character runs, whose content
  characters are terms of their own (``cairn.core.languages``), unless nothing else is left.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from datetime import datetime
from typing import Any

import regex
import Stemmer

from cairn.core import languages
from cairn.core.arabic import light_stem
from cairn.core.hebrew import prefix_stem

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
# The breve of Cyrillic й stays: й is a letter of its own (ё, by custom, is searched as е).
_OPTIONAL_MARKS = regex.compile(
    r"[\u0300-\u0305\u0307-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    r"\u0591-\u05c7\u064b-\u065f\u0670\u06d6-\u06ed]|(?<![\u0438\u0418])\u0306"
)


def _digits() -> dict[str, str]:
    """Every non-ASCII decimal digit of the Basic and Supplementary Multilingual Planes as its
    ASCII digit. Digits are encoded in runs of ten (0 to 9), so every tenth code point is
    looked at and each run found is taken whole (3 ms at import, where testing every code
    point took 19)."""
    out: dict[str, str] = {}
    for code in range(0x0660, 0x1FC00, 10):
        if unicodedata.category(chr(code)) == "Nd":
            zero = code - unicodedata.decimal(chr(code))
            out.update({chr(zero + i): str(i) for i in range(10)})
    return out


# Invisible characters inside a word that only hint where it may break or must not (Unicode's
# word-break property ``Format``): soft hyphen (text copied from web pages:
# ``Kaffee\u00admaschine``), word joiner, zero-width no-break space. A word holding one is the
# word without it (``kaffeemaschine`` finds it). A zero-width space is not one of them: it
# separates words, as a space does. The zero-width non-joiner and joiner are both
# (``JOINERS``, ``index_terms``).
INVISIBLE = "\u00ad\u2060\ufeff"
# Persian writes a plural or a verb's prefix after a zero-width non-joiner (*ketab* U+200C
# *ha*, "books"), Indic scripts choose a letter's shape with either (``कर्\u200dम``). A word
# holding one is indexed as its parts (found by ``کتاب``, "book", and by a query typed with the
# mark) and as the word without it (found as most keyboards type it).
JOINERS = "\u200c\u200d"
# Letters with a stroke or ligatures that NFKD does not decompose, and the decimal digits of
# every script (Arabic-Indic, Persian, Devanagari, Bengali, Thai, Brahmi, …) as ASCII digits:
# ``११००१`` is found by ``11001``.
_LETTERS = str.maketrans(
    {"ø": "o", "ł": "l", "đ": "d", "ð": "d", "ħ": "h", "æ": "ae", "œ": "oe", "þ": "th"}
    | {"\u0131": "i"}  # dotless i
    | _digits()
    | dict.fromkeys(INVISIBLE)
)
_MARK = regex.compile(r"\p{M}")
_NO_JOINERS = str.maketrans(dict.fromkeys(JOINERS))
_JOINED_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+(?:[\u200c\u200d][\p{L}\p{M}\p{N}]+)+")
# A word of Hebrew letters only: the particle stemmer would strip a mixed token's Hebrew away.
_HEBREW_WORD = regex.compile(r"[\u05d0-\u05ea]+")
_GRAPHEME = regex.compile(r"\X")

# Only the digest format's tag: a stored hash of the older, ASCII-only scheme can never equal
# one of this scheme, so re-hashing rows in place never trips the unique constraint.
_HASH_SCHEME = "text-v2"

ENGLISH_STOP_WORDS = languages.ENGLISH
STOP_WORDS = languages.STOP_WORDS


@functools.cache
def _scripts_kept() -> Any:
    """Superscripts and subscripts (Unicode's ``<super>`` and ``<sub>`` compatibility forms
    of the Basic and Supplementary Multilingual Planes, found once: some 70 ms), which
    ``hash_key`` keeps as they are: NFKC would make ``10⁶`` the text ``106``."""
    kept = "".join(
        chr(code)
        for code in range(0x80, 0x20000)
        if unicodedata.decomposition(chr(code)).startswith(("<super>", "<sub>"))
    )
    return regex.compile("([" + regex.escape(kept) + "])")


def holds_kept(text: str) -> bool:
    """Whether ``text`` holds a superscript or subscript (its hash changed with them)."""
    return not text.isascii() and _scripts_kept().search(text) is not None


def _nfkc_folded(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def hash_key(text: str) -> str:
    """The form two texts must share to count as one: NFKC, case folded, whitespace runs as
    one space (ends trimmed). Every other character is kept, superscripts and subscripts as
    they are (``10⁶ units`` is not ``106 units``, ``H₂O`` is not ``H2O``)."""
    if text.isascii():
        return " ".join(text.lower().split())
    # NFC first: the same text typed decomposed splits at the same places.
    parts = _scripts_kept().split(unicodedata.normalize("NFC", text))
    # Odd places hold the kept characters (the split's group).
    folded = [_nfkc_folded(p) if n % 2 == 0 else p for n, p in enumerate(parts)]
    return " ".join("".join(folded).split())


def legacy_digest(content: str, starts: datetime | None = None) -> str:
    """``content_digest`` as releases before session 38 took it (superscripts and subscripts
    made plain by NFKC): what a memory stored then holds (``cairn.engine.compile.legacy``)."""
    return _digest(" ".join(_nfkc_folded(content).split()), starts)


def content_digest(content: str, starts: datetime | None = None) -> str:
    """SHA-256 hex of ``content``'s hash key; ``starts`` (a single-valued fact's start) is part
    of it when given, so a value that returns after another is a new memory."""
    return _digest(hash_key(content), starts)


def _digest(key: str, starts: datetime | None) -> str:
    basis = _HASH_SCHEME + "\x1f" + key
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
    """Overlapping pairs of an unspaced-script run's characters in order, each preceded by its
    first character when ``unigrams`` (a one-character run is always that character). A
    character is a grapheme: a Thai, Lao, Khmer or Myanmar letter with its vowel and tone
    marks (``กุ้ง`` is ``กุ้`` + ``ง``), so no term is a lone mark and no pair splits one."""
    units: str | list[str] = _GRAPHEME.findall(run) if _MARK.search(run) else run
    if len(units) == 1:
        return [run]
    out: list[str] = []
    for i in range(len(units)):
        if unigrams:
            out.append(units[i])
        if i + 1 < len(units):
            out.append(units[i] + units[i + 1])
    return out


def _tokens(text: str, *, unigrams: bool) -> list[tuple[str, bool]]:
    """``(token, unspaced)`` of folded ``text``: words keep their apostrophes here."""
    out: list[tuple[str, bool]] = []
    for m in _TOKEN.finditer(fold(text)):
        token = m.group()  # one group call per match: this loop is the compile's hottest
        if m.lastgroup == "cjk":
            out.extend((t, True) for t in _bigrams(token, unigrams))
        else:
            out.append((token, False))
    return out


class _Stems:
    """Stemmers for the inflected scripts the backends do not stem: Snowball's Russian for
    Cyrillic, Hindi for Devanagari and Greek for Greek, made on first use by one analysis call
    (PyStemmer objects hold a cache and are not thread-safe, so none is shared between calls),
    the light stemmer for Arabic and the particle stemmer for Hebrew."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def _stemmer(self, language: str) -> Any:
        stemmer = self._made.get(language)
        if stemmer is None:
            stemmer = self._made[language] = Stemmer.Stemmer(language, 0)
        return stemmer

    def parts(self, word: str) -> list[str]:
        """The index terms of one word: its apostrophe-separated parts, stemmed where the
        script calls for it (English is left to the backend's own stemmer)."""
        out = []
        split = _APOSTROPHE.split(word) if ("'" in word or "\u2019" in word) else (word,)
        for part in split:
            if not part:
                continue
            # A stemmer may leave nothing (Snowball's Greek takes all of ``οταν``): the word
            # as it is then, or a query would hold an empty term.
            out.append(self._stem(part) or part)
        return out

    def _stem(self, part: str) -> str:
        """One word part stemmed by its script's stemmer, or as it is."""
        first = part[0]
        if "\u0400" <= first <= "\u052f":
            return str(self._stemmer("russian").stemWord(part))
        if "\u0600" <= first <= "\u06ff" or "\u0750" <= first <= "\u077f":
            return light_stem(part)
        if "\u05d0" <= first <= "\u05ea":
            return prefix_stem(part) if _HEBREW_WORD.fullmatch(part) else part
        if "\u0900" <= first <= "\u097f":
            return str(self._stemmer("hindi").stemWord(part))
        if "\u0370" <= first <= "\u03ff" or "\u1f00" <= first <= "\u1fff":
            return str(self._stemmer("greek").stemWord(part))
        return part


def index_terms(text: str) -> list[str]:
    """Every search term of ``text`` in order, repeats kept (what the index stores): single
    characters of unspaced scripts too, so a one-character query finds them."""
    stems = _Stems()
    out: list[str] = []
    for token, unspaced in _tokens(text, unigrams=True):
        if unspaced:
            out.append(token)
        else:
            out.extend(stems.parts(token))
    if "\u200c" in text or "\u200d" in text:
        # The words holding a joiner between two letters, also as typed without it
        # (``JOINERS``); an emoji sequence's joiners join no letters.
        joined = " ".join(_JOINED_WORD.findall(text))
        for token, unspaced in _tokens(joined.translate(_NO_JOINERS), unigrams=True):
            out.extend([token] if unspaced else stems.parts(token))
    return out


# The most analysed text a row indexes. PostgreSQL refuses a ``tsvector`` over 1 MB (a
# message of 90,000 distinct words makes one of 1.2 MB), so a longer text is indexed by its
# first terms on both backends (its content is stored and shown whole).
MAX_INDEXED_CHARS = 100_000


def index_text(text: str) -> str:
    """The analysed form of ``text`` that full-text indexes store: terms joined by spaces, at
    most ``MAX_INDEXED_CHARS`` of them (cut at a space)."""
    out = " ".join(index_terms(text))
    if len(out) > MAX_INDEXED_CHARS:
        cut = out[: MAX_INDEXED_CHARS + 1].rsplit(" ", 1)[0]
        out = cut if len(cut) <= MAX_INDEXED_CHARS else cut[:MAX_INDEXED_CHARS]
    return out


def content_terms(text: str, *, min_length: int = 3) -> list[str]:
    """Distinct terms of ``text`` that carry content: no stop words, no short words of spaced
    scripts (``min_length``, counted before stemming); unspaced-script bigrams are kept."""
    return list(_content_terms(text, min_length))


def content_size(text: str) -> float:
    """How much ``text`` says, in words: its distinct content terms (``content_terms``), an
    unspaced-script bigram counting half (a word of those scripts is about two characters,
    so ``我住在北京`` says about as much as ``I live in Beijing``: 2)."""
    return sum((0.5 if unspaced else 1.0 for unspaced in _content_terms(text, 3).values()), 0.0)


def _content_terms(text: str, min_length: int) -> dict[str, bool]:
    """``content_terms`` in order, each with whether it is an unspaced-script bigram."""
    stems = _Stems()
    out: dict[str, bool] = {}
    for token, unspaced in _tokens(text, unigrams=False):
        if unspaced:
            out.setdefault(token, True)
            continue
        if token.replace("\u2019", "'") in STOP_WORDS:
            continue
        for part in _APOSTROPHE.split(token):
            if len(part) >= min_length and part not in STOP_WORDS:
                for stem in stems.parts(part):
                    out.setdefault(stem, False)
    return out


def _query_runs(query: str) -> list[tuple[str, bool]]:
    """``(token, unspaced)`` of a query: words, and the bigrams (or single characters) of the
    content pieces of unspaced runs (``languages.cjk_pieces``; a run with no content piece
    keeps all of it), then the pieces' content characters (``languages.content_characters``),
    last so that a long query's limit drops them first."""
    japanese = languages.is_japanese(query)
    out: list[tuple[str, bool]] = []
    single: list[str] = []
    for m in _TOKEN.finditer(fold(query)):
        token = m.group()
        if m.lastgroup != "cjk":
            out.append((token, False))
            continue
        for piece in languages.cjk_pieces(token, japanese) or [token]:
            out.extend((t, True) for t in _bigrams(piece, unigrams=False))
            single.extend(languages.content_characters(piece) if len(piece) > 1 else [])
    return out + [(c, True) for c in single]


def query_terms(query: str, *, max_terms: int = 32) -> list[str]:
    """The distinct search terms of ``query`` in order: stop words (``cairn.core.languages``),
    Chinese and Japanese question words and particles (``cairn.core.languages``) and
    one-letter words removed, unless nothing else is left; digits and unspaced-script
    characters are always terms. An unspaced-script piece of two or more characters gives its
    bigrams, then its content characters (not every character: ``的``, ``是`` would match far
    too much)."""
    stems = _Stems()
    kept: dict[str, None] = {}
    runs = _query_runs(query)
    words = [t.replace("\u2019", "'") for t, unspaced in runs if not unspaced]
    stop = STOP_WORDS | languages.latin_stop_words(
        [p for w in words for p in _APOSTROPHE.split(w) if p]
    )
    for token, unspaced in runs:
        if unspaced:
            kept.setdefault(token)
            continue
        if token.replace("\u2019", "'") in stop:
            continue
        for part in _APOSTROPHE.split(token):
            if part and part not in stop and (len(part) > 1 or part.isdigit()):
                kept.update(dict.fromkeys(stems.parts(part)))
    if not kept:
        for term in index_terms(query):
            if len(term) > 1:
                kept.setdefault(term)
    return list(kept)[:max_terms]


def first_grapheme(text: str) -> str:
    """``text``'s first grapheme (a letter with its marks, a whole emoji sequence)."""
    m = _GRAPHEME.match(text)
    return m.group() if m else ""


def cut_text(text: str, limit: int) -> str:
    """``text``'s longest prefix of at most ``limit`` characters that ends between two
    graphemes: a cut never drops a combining accent from its letter (``e`` + U+0301) or splits
    an emoji sequence, whatever the script."""
    if len(text) <= limit:
        return text
    end = 0
    for m in _GRAPHEME.finditer(text, 0, limit + 64):
        if m.end() > limit:
            break
        end = m.end()
    return text[:end]
