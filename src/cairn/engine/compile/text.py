"""Text helpers shared by the compiler and query processing: words, sentences, entities, dates.

Everything here is a pure function of its input (and of the reference time given), so the
compiler built on it is deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from datetime import MAXYEAR, MINYEAR, date, datetime, timedelta

from cairn.core.analysis import ENGLISH_STOP_WORDS, hash_key

# English stop words: one list, shared with search (``cairn.core.analysis``).
STOP_WORDS = ENGLISH_STOP_WORDS

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\u2019]*")
# A sentence ends at ``.``, ``!`` or ``?`` followed by a space and a capital, a digit or a
# letter of a script without case (Arabic, Hebrew, Devanagari, CJK…); at the Arabic question
# mark, the Devanagari danda or the Urdu full stop followed by a space; and at the ideographic
# full stop and the full-width ``!`` and ``?``, spaced or not.
_SENTENCE = re.compile(
    r"(?<=[.!?])\s+(?=[\"'(\[\u00ab\u201c]?[A-Z0-9\u00c0-\u00de\u0100-\u024f\u0391-\u03a9\u0400-\u042f"
    r"\u0590-\u08ff\u0900-\u0dff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])"
    r"|(?<=[\u061f\u0964\u06d4])\s+|(?<=[\u3002\uff01\uff1f])(?![\u3002\uff01\uff1f\u300d\u300f\uff09])\s*"
)
# Abbreviations whose full stop ends no sentence ("a nurse at St. Mary's hospital").
# (Not "no", "etc.", "Inc.": they end sentences as often as not.)
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "prof", "sr", "jr", "mt", "ft", "vs", "e.g", "i.e", "approx"}
)
# Where a liked thing's clause ends and another begins: "green tea and I live in Kyiv".
_NEXT_CLAUSE = re.compile(
    r"\s+(?:and|but|because|so|since|while|when|though|although|or|as)\s+"
    r"(?:I|I'm|I've|I'd|I'll|we|we're|he|she|they|it's|you)\b.*",
    re.I,
)
_FULL_STOP = re.compile(r"(\S*)\.\s")
# A run of capitalized words, e.g. "New York", "Dr Seuss", "LGBTQ".
_ENTITY = re.compile(
    r"\b([A-Z][a-zA-Z0-9'\u2019\-]*(?:\s+(?:of\s+|the\s+)?[A-Z][a-zA-Z0-9'\u2019\-]*)*)"
)
_NOT_ENTITIES = frozenset(
    {
        "i",
        "i'm",
        "i've",
        "i'll",
        "i'd",
        "oh",
        "hey",
        "hi",
        "hello",
        "yes",
        "yeah",
        "no",
        "ok",
        "okay",
        "wow",
        "thanks",
        "thank",
        "sure",
        "well",
        "so",
        "and",
        "but",
        "the",
        "a",
        "it",
        "that",
        "this",
        "what",
        "how",
        "my",
        "we",
        "you",
        "they",
        "he",
        "she",
        "haha",
        "lol",
        "awesome",
        "great",
        "cool",
        "nice",
        "definitely",
        "absolutely",
        "sounds",
        "good",
        "glad",
        "congrats",
        "congratulations",
        "aw",
        "aww",
        "omg",
        "totally",
        "sorry",
        "love",
        "also",
        "just",
        "really",
        "for",
        "in",
        "on",
        "at",
        "when",
        "where",
        "why",
        "there",
        "these",
        "those",
        "its",
        "it's",
        "our",
        "your",
        "his",
        "her",
        "their",
        "me",
        "us",
        "him",
        "them",
        "all",
        "any",
        "if",
        "as",
        "not",
        "do",
        "did",
        "have",
        "is",
        "are",
        "was",
        *MONTHS,
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    }
)


def words(text: str) -> list[str]:
    """Lowercase words (apostrophes kept inside words, curly ones made straight)."""
    return [w.lower().replace("\u2019", "'").strip("'") for w in _WORD.findall(text)]


def normalize_for_hash(text: str) -> str:
    """The form two contents share when they are one memory (``cairn.core.analysis``)."""
    return hash_key(text)


def sentences(text: str) -> list[str]:
    """Split prose into sentences (a simple, deterministic rule: end mark + capital, in any
    script; not after an abbreviation such as ``Dr.``)."""
    out: list[str] = []
    for part in (p.strip() for p in _SENTENCE.split(text.strip())):
        if part and out and _ends_with_abbreviation(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        elif part:
            out.append(part)
    return out


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rsplit(None, 1)[-1]
    return last.endswith(".") and last[:-1].lstrip("(\"'").lower() in _ABBREVIATIONS


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, kana, CJK): their
# characters weigh half a word each when a note is cut into chunks.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]"
)
_RUN = re.compile(r"\S+")


def text_weight(text: str) -> int:
    """About how many words ``text`` holds, in any script (two unspaced characters a word)."""
    return len(text.split()) + len(_UNSPACED.findall(text)) // 2


def note_chunks(text: str, limit: int) -> list[str]:
    """``text`` cut into chunks of about ``limit`` words (``text_weight``) at sentence ends,
    inside a longer sentence at spaces, and inside a longer unspaced run between characters
    (never before a combining mark). Each chunk is the text exactly as written, from its first
    character to its last."""
    pieces: list[tuple[int, int]] = []
    for a, b in _sentence_spans(text):
        if text_weight(text[a:b]) <= limit:
            pieces.append((a, b))
            continue
        for run in _RUN.finditer(text, a, b):
            pieces.extend(_cut_run(text, run.start(), run.end(), limit))
    out: list[str] = []
    start = end = size = 0
    for a, b in pieces:
        n = text_weight(text[a:b])
        if size and size + n > limit:
            out.append(text[start:end])
            size = 0
        if not size:
            start = a
        end, size = b, size + max(n, 1)
    if size:
        out.append(text[start:end])
    return out


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` (as ``sentences`` cuts it)."""
    bounds = [0] + [x for m in _SENTENCE.finditer(text) for x in (m.start(), m.end())]
    bounds.append(len(text))
    out: list[tuple[int, int]] = []
    for a, b in zip(bounds[::2], bounds[1::2], strict=True):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a >= b:
            continue
        if out and _ends_with_abbreviation(text[out[-1][0] : out[-1][1]]):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _cut_run(text: str, a: int, b: int, limit: int) -> list[tuple[int, int]]:
    """A run without spaces, cut where it weighs ``limit`` words (``2 * limit`` unspaced
    characters), between characters that are not a combining mark; one pass."""
    out: list[tuple[int, int]] = []
    i = start = a
    count = 0
    while i < b:
        if _UNSPACED.match(text, i):
            count += 1
        i += 1
        if count >= 2 * limit:
            while i < b and unicodedata.category(text[i]) in ("Mn", "Mc", "Me"):
                i += 1
            out.append((start, i))
            start, count = i, 0
    if start < b:
        out.append((start, b))
    return out


def first_clause(value: str) -> str:
    """``value`` up to where another clause with its own subject begins (``I like green tea
    and I live in Kyiv`` likes ``green tea``) or its sentence ends (``Zorblax. I adore…`` is
    named ``Zorblax``; not after an initial or an abbreviation: ``J. R. Tolkien``, ``St.
    Mary's``, ``Mt. Pleasant``)."""
    value = _NEXT_CLAUSE.sub("", value)
    for m in _FULL_STOP.finditer(value):
        word = m.group(1).lstrip("(\"'")
        if len(word) > 1 and word.lower() not in _ABBREVIATIONS and "." not in word:
            return value[: m.start() + len(m.group(1))]
    return value


def entities(text: str) -> list[str]:
    """Capitalized names in order of first appearance (a heuristic, no model)."""
    out: list[str] = []
    for match in _ENTITY.finditer(text):
        name = match.group(1).strip(" '\u2019-")
        tokens = name.split()
        while tokens and tokens[0].lower() in _NOT_ENTITIES:
            tokens = tokens[1:]
        if not tokens:
            continue
        name = " ".join(tokens)
        if name.lower() in _NOT_ENTITIES or len(name) < 2:
            continue
        if name not in out:
            out.append(name)
    return out


_REL_DAYS = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1}
_REL_UNIT = re.compile(
    r"\b(last|next|this|past)\s+(week|weekend|month|year|summer|winter|spring|fall|autumn)\b"
)
_AGO = re.compile(
    r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d{1,6}|a few|a couple of)\s+"
    r"(day|week|month|year)s?\s+ago\b"
)
_NUM = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a few": 3,
    "a couple of": 2,
}
_ABS = re.compile(
    r"\b(\d{1,2})?\s*("
    + "|".join(MONTHS)
    + r")\s*(\d{1,2})?(?:st|nd|rd|th)?,?\s*((?:19|20)\d\d)?\b"
)
_YEAR = re.compile(r"\b(?:in|since|of|from)\s+((?:19|20)\d\d)\b")


def _shift_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    return date(d.year + y, m + 1, 1)


def _year(year: int) -> str:
    if not MINYEAR <= year <= MAXYEAR:
        raise ValueError(f"year {year} is out of range")
    return f"{year:04d}"


def _month(d: date) -> str:
    return f"{d.year:04d}-{d.month:02d}"


def _calendar_date(year: int, month: int, day: str) -> str:
    """``YYYY-MM-DD``, or ``YYYY-MM`` without a day or for a day the month does not have."""
    if day:
        try:
            return date(year, month, int(day)).isoformat()
        except ValueError:
            pass
    return f"{_year(year)}-{month:02d}"


def resolve_dates(text: str, at: datetime) -> list[str]:
    """Absolute dates (ISO ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``) of the time expressions in
    ``text``, relative ones resolved against ``at`` ("yesterday", "last week", "2 years ago").
    A date past the calendar's ends (an episode of year 1 or 9999 said "yesterday") resolves
    to nothing rather than failing the compile."""
    ref = at.date()
    out: list[str] = []
    for spec in _date_specs(text.lower(), ref):
        try:
            got = _resolved(ref, spec)
        except (OverflowError, ValueError):
            continue
        if got not in out:
            out.append(got)
    return out


# What a time expression says, before it meets the calendar: days, weeks, months or years from
# the reference (``("days", -1)``), a calendar date ``("date", year, month, day or "")``, or a
# year as written (``("year", "2020")``).
_Spec = tuple[str, int] | tuple[str, int, int, str] | tuple[str, str]


def _date_specs(lower: str, ref: date) -> Iterator[_Spec]:
    for word, delta in _REL_DAYS.items():
        if re.search(rf"\b{word}\b", lower):
            yield ("days", delta)
    for m in _REL_UNIT.finditer(lower):
        which, unit = m.group(1), m.group(2)
        sign = {"last": -1, "past": -1, "next": 1, "this": 0}[which]
        if unit in ("week", "weekend"):
            yield ("weeks", sign)
        elif unit == "month":
            yield ("months", sign)
        else:
            yield ("years", sign if unit == "year" or sign else 0)
    for m in _AGO.finditer(lower):
        count = m.group(1)
        n = int(count) if count.isdigit() else _NUM[count]
        yield (f"{m.group(2)}s_ago", n)
    for m in _ABS.finditer(lower):
        day_before, month_name, day_after, year = m.groups()
        if month_name == "may" and not (day_before or day_after or year):
            continue  # "may" is mostly the verb
        month = MONTHS.index(month_name) + 1
        yield ("date", int(year) if year else ref.year, month, day_before or day_after or "")
    for m in _YEAR.finditer(lower):
        yield ("year", m.group(1))


def _resolved(ref: date, spec: _Spec) -> str:
    """``spec`` as an ISO date against ``ref``; OverflowError or ValueError off the calendar."""
    kind = spec[0]
    if kind == "date":
        _, year, month, day = spec  # type: ignore[misc]
        return _calendar_date(year, month, day)
    if kind == "year":
        return str(spec[1])
    n = int(spec[1])
    if kind == "days":
        return (ref + timedelta(days=n)).isoformat()
    if kind == "weeks":  # the week's Monday
        return (ref - timedelta(days=ref.weekday()) + timedelta(weeks=n)).isoformat()
    if kind == "months":
        return _month(_shift_months(ref, n))
    if kind == "years":
        return _year(ref.year + n)
    if kind == "days_ago":
        return (ref - timedelta(days=n)).isoformat()
    if kind == "weeks_ago":
        return (ref - timedelta(weeks=n)).isoformat()
    if kind == "months_ago":
        return _month(_shift_months(ref, -n))
    return _year(ref.year - n)  # years ago


def date_keywords(values: list[str]) -> list[str]:
    """Searchable words for ISO dates: the year and the month's name."""
    out: list[str] = []
    for value in values:
        parts = value.split("-")
        if parts[0] not in out:
            out.append(parts[0])
        if len(parts) > 1:
            name = MONTHS[int(parts[1]) - 1]
            if name not in out:
                out.append(name)
    return out
