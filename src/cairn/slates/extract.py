"""JSON extraction from model output, ``match`` validation and ``field`` selection.

``json_candidates`` lists every JSON object or array the output carries, in this order:
1. the whole output (trimmed), when it parses as a JSON object or array;
2. the body of each fenced code block (```` ``` ```` or ```` ```json ````) that parses, in order;
3. every other complete JSON object or array in the text, in order (a value nested inside an
   earlier one, or inside a fenced block already listed, is not listed again).
Scalars (a bare ``"text"`` or ``3``) are never extracted: a model's prose is not JSON.

``extract_value`` writes the first candidate that matches the schema (and has ``field``), so
``Thinking {"step": 1}. Result: {"fact": "…"}`` yields the fact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable

from cairn.core.slates import canonical_json
from cairn.slates.patterns import BoundedValidator, bounded_schema, pattern_budget

# A fenced block: its body on the lines after the opening fence, or on the same line when it
# starts with a JSON bracket (```` ```json {"a": 1} ``` ````, as models write it inline).
# (Possessive runs of blanks: backtracking through a long run of spaces was quadratic.)
_FENCE = re.compile(r"```[ \t]*+([A-Za-z0-9_+-]*)[ \t]*+(?:\r?\n|(?=[{\[]))(.*?)```", re.DOTALL)
_JSON_FENCES = ("", "json", "jsonc", "json5")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A JSON value found in the output, and the span of text that carries it (for a fenced
    block, the whole block with its fences)."""

    value: Any
    start: int
    end: int


# What the failed decodes of one output may cost in all, in characters: each bracket starts a
# decode that reads to where it fails, and each failure's error counts the lines before it
# (``JSONDecodeError`` reads the output from its start), so thousands of brackets made the scan
# quadratic — a 1 MB body took two minutes of CPU. This is a few tenths of a second at most; a
# model's reply spends a few thousandths of it.
SCAN_BUDGET = 200_000_000


def json_candidates(output: str) -> Iterator[Candidate]:
    """Every JSON object or array of ``output``, in the order described above."""
    text = output.strip()
    if text[:1] in "{[":
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):  # nested too deeply: no value
            pass
        else:
            if isinstance(value, (dict, list)):
                start = output.index(text[0])
                yield Candidate(value, start, start + len(text))
                return  # the whole output is one value: nothing else to find
    fenced: list[tuple[int, int]] = []
    for match in _FENCE.finditer(output):
        if match.group(1).lower() not in _JSON_FENCES:
            continue
        fenced.append((match.start(), match.end()))
        try:
            value = json.loads(match.group(2))
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, (dict, list)):
            yield Candidate(value, match.start(), match.end())
    decoder = json.JSONDecoder()
    i, n = 0, len(output)
    spent = 0  # what the decodes that failed cost (``SCAN_BUDGET``)
    while i < n:
        inside = next((end for start, end in fenced if start <= i < end), None)
        if inside is not None:
            i = inside
            continue
        if output[i] in "{[":
            try:
                value, end = decoder.raw_decode(output, i)
            except json.JSONDecodeError as exc:
                spent += exc.pos + 20 * (exc.pos - i) + 1  # (decoding costs more a character)
                if spent > SCAN_BUDGET:
                    return  # what is left would cost more than any real reply
            except RecursionError:
                # Nested too deeply to decode: no value starts in this run of brackets (each
                # of them would fail the same way, at the recursion limit's cost).
                while i < n and output[i] in "{[ \t\r\n":
                    i += 1
                continue
            else:
                if isinstance(value, (dict, list)):
                    yield Candidate(value, i, end)
                    i = end
                    continue
        i += 1


def extract_json(output: str) -> Any:
    """The first JSON object or array the output carries, or ``None`` when there is none."""
    return next((c.value for c in json_candidates(output)), None)


@dataclass(frozen=True, slots=True)
class Extraction:
    """The value to write, or why there is none (``reason`` is a stable code). ``span`` is
    where the chosen JSON sits in the output."""

    value: Any = None
    reason: str | None = None
    detail: str | None = None
    span: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def _refuse_retrieval(uri: str) -> Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # (attrs class)


def _check(candidate: Candidate, validator: Any, field: str | None) -> Extraction:
    value = candidate.value
    if validator is not None:
        try:
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        except (Unresolvable, RecursionError) as exc:
            detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            return Extraction(reason="schema_mismatch", detail=f"(root): {detail}"[:300])
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path) or "(root)"
            return Extraction(reason="schema_mismatch", detail=f"{where}: {first.message}")
    if field is not None:
        member = value.get(field, _MISSING) if isinstance(value, dict) else _MISSING
        if member is _MISSING:
            return Extraction(reason="field_missing", detail=f"the JSON has no member {field!r}")
        value = member
    if value is None or value == "":
        return Extraction(reason="empty_value", detail="the value to write is empty")
    return Extraction(value=value, span=(candidate.start, candidate.end))


def extract_value(output: str, *, match: Any = None, field: str | None = None) -> Extraction:
    """The first JSON value of the output that matches ``match`` (Draft 2020-12) and has
    ``field``; the value written is that member (or the whole value without ``field``).

    Reasons, when no candidate qualifies (the first candidate's, so the trace explains the
    most likely intended value): ``no_json``, ``schema_mismatch``, ``field_missing``,
    ``empty_value``.
    """
    # An empty registry that retrieves nothing: a reference outside the schema (a URL, a
    # file) is refused, never fetched (``config.check_schema`` refuses such schemas first).
    registry: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
    validator = (
        BoundedValidator(bounded_schema(match), registry=registry) if match is not None else None
    )
    first_failure: Extraction | None = None
    with pattern_budget():
        for candidate in json_candidates(output):
            found = _check(candidate, validator, field)
            if found.ok:
                return found
            first_failure = first_failure or found
    if first_failure is not None:
        return first_failure
    return Extraction(reason="no_json", detail="the output holds no JSON object or array")


def remove_span(output: str, span: tuple[int, int]) -> str:
    """``output`` without the text in ``span`` (the matched JSON), with the blank lines and
    trailing spaces the removal leaves tidied."""
    head, tail = output[: span[0]], output[span[1] :]
    before, after = head.rstrip(" \t"), tail.lstrip(" \t")
    if before.endswith("\n") and after.startswith("\n"):
        # A block removed between paragraphs leaves one blank line, between lines none.
        gap = "\n\n" if before.endswith("\n\n") or after.startswith("\n\n") else "\n"
        return (before.rstrip("\n") + gap + after.lstrip("\n")).strip()
    # Removed from the middle of a line between spaces: the words around it keep one
    # (``Ok noted. ```json {…}``` bye`` is ``Ok noted. bye``), unless punctuation follows.
    spaced = before != head and after != tail and before and after
    if spaced and before[-1] != "\n" and after[0] != "\n" and after[0] not in ".,;:!?)":
        return (before + " " + after).strip()
    return (before + after).strip()


def as_content(value: Any) -> str:
    """How an extracted value is written: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else canonical_json(value)
