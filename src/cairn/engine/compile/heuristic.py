"""The default compiler: rules, no model, no network — the same episodes give the same drafts.

From each episode it makes the units recall needs:

- ``turn``: one per conversation message, ``"Speaker: text"`` with the speaker, role, absolute
  date, resolved relative dates and entities in metadata; its confidence follows how much it
  says (``turn_confidence``), and a contentless message ("Noted.", "haha", see ``filler``)
  gets a low one and none of its neighbours' words;
- ``note``: a text payload (template episodes included), chunked by sentences when long;
- ``profile_fact``: first-person statements matched by patterns (name, employer, location,
  age, favourites, likes), single-valued ones carrying a ``slot`` for supersession; the
  subject is the message's ``name``, else the name the speaker stated, else the role;
- ``episode_summary``: per session, the most central sentences (extractive), re-made as the
  session grows (the new one supersedes the old).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import regex

from cairn.core.analysis import content_size, content_terms, cut_text
from cairn.core.episodes import Episode
from cairn.core.filler import is_contentless, is_question
from cairn.core.ids import as_utc
from cairn.core.memories import SUMMARY_CHARS, Memory
from cairn.engine.compile.drafts import CompileInput, MemoryDraft
from cairn.engine.compile.text import (
    date_keywords,
    entities,
    first_clause,
    note_chunks,
    resolve_dates,
    sentences,
    words,
)
from cairn.engine.yielding import pause_point

NAME = "heuristic"
VERSION = 1
NOTE_CHUNK_WORDS = 120
SUMMARY_SENTENCES = 4
SUMMARY_MIN_MESSAGES = 4
# Neighbouring messages whose words are indexed with a turn.
CONTEXT_BEFORE = 2
CONTEXT_AFTER = 1
CONTEXT_WORDS = 40
# Confidence of a contentless turn ("Noted.", "haha"): search multiplies relevance by it.
CONTENTLESS_CONFIDENCE = 0.2
# A turn with content has confidence by how much it says (``turn_confidence``): full from
# this many content words, down to ``BRIEF_TURN_CONFIDENCE`` for one with none.
FULL_TURN_WORDS = 10
BRIEF_TURN_CONFIDENCE = 0.5
QUESTION_FACTOR = 0.75  # times the confidence of a turn that only asks (``turn_confidence``)


@dataclass(frozen=True)
class Message:
    """One utterance found in an episode."""

    episode: Episode
    index: int
    speaker: str
    role: str
    text: str
    at: datetime


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI-style content parts
        return " ".join(str(p.get("text", "")) for p in value if isinstance(p, dict))
    return ""


def _parse_time(value: Any, default: datetime) -> datetime:
    if isinstance(value, str):
        try:
            return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return default
    return default


class MessageMemo:
    """The messages of each episode of one compile, parsed once: a compile reads an episode's
    messages several times (names, neighbours, turns, summaries). One per ``compile`` call, so
    concurrent compiles share nothing."""

    def __init__(self) -> None:
        self._parsed: dict[Any, list[Message]] = {}

    def __call__(self, ep: Episode) -> list[Message]:
        got = self._parsed.get(ep.id)
        if got is None:
            got = self._parsed[ep.id] = messages_of(ep)
        return got


def messages_of(ep: Episode) -> list[Message]:
    """The messages of a conversation episode (``payload.messages`` or a single message)."""
    payload = ep.payload
    raw = payload.get("messages")
    if not isinstance(raw, list):
        if any(k in payload for k in ("role", "speaker")) and (
            "content" in payload or "text" in payload
        ):
            raw = [payload]
        else:
            return []
    out = []
    for i, msg in enumerate(raw):
        if not isinstance(msg, dict):
            continue
        text = _text_of(msg.get("content", msg.get("text"))).strip()
        caption = msg.get("caption") or msg.get("image_caption")
        if isinstance(caption, str) and caption.strip():
            text = f"{text} [image: {caption.strip()}]".strip()
        if not text:
            continue
        role = str(msg.get("role") or "user")
        speaker = str(msg.get("name") or msg.get("speaker") or role.capitalize())
        at = _parse_time(msg.get("timestamp"), ep.occurred_at)
        out.append(Message(ep, i, speaker, role, text, at))
    return out


def _note_text(ep: Episode) -> str:
    payload = ep.payload
    for key in ("text", "content", "body", "note", "summary"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    lines = [
        f"{k}: {v}"
        for k, v in sorted(payload.items())
        if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip()
    ]
    return "\n".join(lines)


# A bounded memo of a pure function of its argument (the same text always gives the same
# terms): process-wide by design, so it holds texts of every tenant; an erasure empties it
# (``forget_word_memo``).
@lru_cache(maxsize=8192)
def _content_words(text: str) -> tuple[str, ...]:
    # Search terms (any script, CJK as bigrams), as the index and queries cut them. Interned:
    # the memo's 8,192 texts share one string per word (6 MB less after a 10,000-turn compile).
    return tuple(map(sys.intern, content_terms(text)))


def forget_word_memo() -> None:
    """Empty the memo of texts' words (after an erasure: it is keyed by messages' text)."""
    _content_words.cache_clear()


def _context_words(neighbours: tuple[str, ...], limit: int = CONTEXT_WORDS) -> list[str]:
    """Content words of the neighbouring messages, indexed (not shown) with a turn."""
    out: dict[str, None] = {}
    for text in neighbours:
        for w in _content_words(text):
            out.setdefault(w)
            if len(out) >= limit:
                return list(out)
    return list(out)


def _metadata(
    text: str, at: datetime, extra: dict[str, Any], context: tuple[str, ...] = ()
) -> dict[str, Any]:
    dates = resolve_dates(text, at)
    keywords = date_keywords([at.date().isoformat(), *dates])
    meta: dict[str, Any] = {
        **extra,
        "date": at.date().isoformat(),
        "dates": dates,
        "entities": entities(text),
        "keywords": " ".join(keywords),
        "context_terms": " ".join(_context_words(context)) if context else "",
        "compiler": NAME,
        "compiler_version": VERSION,
    }
    return meta


# Patterns of first-person facts: (slot or None for multi-valued, regex, content template).
# A name's words start with a capital of any script (``Émilie``, ``Örebro``, ``Łódź``, ``Анна``).
_NAME_PART = r"([\p{Lu}\p{Lt}][\w'\u2019&.\-]*(?:\s+[\p{Lu}\p{Lt}][\w'\u2019&.\-]*){0,3})"
_FACTS: tuple[tuple[str | None, regex.Pattern[str], str], ...] = (
    ("name", regex.compile(r"\b[Mm]y name is " + _NAME_PART), "{s}'s name is {v}"),
    (
        "employer",
        regex.compile(
            r"\bI(?: now| currently)? (?:work|am working|'m working)"
            r"(?: as an? [a-z]+(?: [a-z]+){0,2})? (?:at|for) (?:the )?" + _NAME_PART
        ),
        "{s} works at {v}",
    ),
    (
        "employer",
        regex.compile(
            r"\bI (?:just )?(?:started|joined|got a job at|started working at|started a new job at)"
            r" (?:at |a new job at )?" + _NAME_PART
        ),
        "{s} works at {v}",
    ),
    (
        "location",
        regex.compile(r"\bI(?: now| currently)? (?:live|am living|'m living) in " + _NAME_PART),
        "{s} lives in {v}",
    ),
    (
        "location",
        regex.compile(r"\bI(?: just| recently)? moved to " + _NAME_PART),
        "{s} lives in {v}",
    ),
    ("age", regex.compile(r"\bI(?:'m| am) (\d{1,3}) years old\b"), "{s} is {v} years old"),
    (
        None,
        regex.compile(r"\bmy favou?rite ([a-z]+(?: [a-z]+)?) is ([^.,!?;]{2,60})", regex.I),
        "{s}'s favorite {k} is {v}",
    ),
    (
        None,
        regex.compile(
            r"\bI (?:really |absolutely )?(?:love|like|enjoy|prefer|adore) ([^.,!?;]{3,60})"
        ),
        "{s} likes {v}",
    ),
    (
        None,
        regex.compile(r"\bI (?:really )?(?:hate|dislike|don't like|can't stand) ([^.,!?;]{3,60})"),
        "{s} dislikes {v}",
    ),
)
_ANY_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}'\u2019]*")
_BAD_OBJECTS = frozenset({"it", "that", "this", "them", "you", "to", "the", "so", "a"})


def _stated_names(batch: CompileInput, messages: MessageMemo) -> dict[str, str]:
    """``speaker label (lowercase) → name`` the speaker stated ("my name is Maya"): earlier
    compiles' first, then this batch's sessions and episodes in order (the latest wins)."""
    names = dict(batch.names)
    name_pattern = _FACTS[0][1]
    seen: set[Any] = set()
    streams = [batch.sessions[k] for k in sorted(batch.sessions)] + [list(batch.episodes)]
    for ep in (ep for stream in streams for ep in stream):
        if ep.id in seen:
            continue
        seen.add(ep.id)
        for msg in messages(ep):
            if msg.role in ("assistant", "system", "tool"):
                continue
            for m in name_pattern.finditer(msg.text):
                value = first_clause(m.group(1).strip()).rstrip(".,!?;:'\u2019-").strip()
                if value and value.lower() != msg.speaker.lower():
                    names[msg.speaker.lower()] = value
    return names


def _facts(msg: Message, names: dict[str, str]) -> Iterator[MemoryDraft]:
    if msg.role in ("assistant", "system", "tool"):
        return  # facts are about the person speaking, not the assistant
    # A speaker known only by role ("User") is named by what they said their name is, so
    # "Where does Maya work?" finds the fact; the slot stays on the label, so a later value
    # supersedes an earlier one whether or not the name was known then.
    subject = names.get(msg.speaker.lower(), msg.speaker)
    for slot, pattern, template in _FACTS:
        for m in pattern.finditer(msg.text):
            groups = [
                first_clause(g.strip()).rstrip(".,!?;:'\u2019-").strip() for g in m.groups() if g
            ]
            if template.count("{") == 3 and len(groups) == 2:  # favourite <kind> is <value>
                kind_word, value = groups
                key: str | None = f"favorite {kind_word.lower()}"
                content = template.format(s=subject, k=kind_word.lower(), v=value)
            else:
                value = groups[-1]
                key = slot
                # "User's name is Maya" says who the user is; "Maya's name is Maya" would not.
                content = template.format(s=msg.speaker if slot == "name" else subject, v=value)
            first = [w.lower() for w in _ANY_WORD.findall(value)[:1]]  # a word of any script
            if not first or (slot != "name" and first[0] in _BAD_OBJECTS):  # ("So Yeon")
                continue
            yield MemoryDraft(
                kind="profile_fact",
                content=content,
                source_episode_ids=(msg.episode.id,),
                valid_from=msg.at,
                summary=content,
                confidence=0.7,
                session_id=msg.episode.session_id,
                slot=f"{msg.speaker.lower()}:{key}" if key else None,
                metadata=_metadata(
                    content,
                    msg.at,
                    {
                        "speaker": msg.speaker,
                        "subject": subject,
                        "attribute": key or "preference",
                        "value": value,
                    },
                ),
            )


def _summary(session_id: str, episodes: list[Episode], messages: MessageMemo) -> MemoryDraft | None:
    """The session's most central sentences, in their original order."""
    msgs = [m for ep in episodes for m in messages(ep)]
    if len(msgs) < SUMMARY_MIN_MESSAGES:
        return None
    units: list[tuple[int, Message, str]] = []
    said: set[tuple[str, str]] = set()  # a sentence said again is summarised once
    for m in msgs:
        for s in sentences(m.text):
            ascii_words = len(words(s))  # (other scripts: their content terms)
            enough = ascii_words >= 4 or (not ascii_words and content_size(s) >= 2)
            if enough and (m.speaker, s.casefold()) not in said:
                said.add((m.speaker, s.casefold()))
                units.append((len(units), m, s))
    if not units:
        return None
    bags = [set(content_terms(s)) for _, _, s in units]  # terms of any script
    freq: Counter[str] = Counter(w for bag in bags for w in bag)
    scored = sorted(
        ((sum(freq[w] for w in bag) / (1 + len(bag)) ** 0.5, -i) for i, bag in enumerate(bags)),
        reverse=True,
    )
    chosen = sorted(-neg for _, neg in scored[:SUMMARY_SENTENCES])
    parts = [f"{units[i][1].speaker}: {units[i][2]}" for i in chosen]
    speakers = sorted({m.speaker for m in msgs})
    start = msgs[0].at
    content = f"Session of {start.date().isoformat()} ({', '.join(speakers)}): " + " ".join(parts)
    sources = tuple(dict.fromkeys(units[i][1].episode.id for i in chosen))
    return MemoryDraft(
        kind="episode_summary",
        content=content,
        source_episode_ids=sources,
        valid_from=start,
        summary=cut_text(content, SUMMARY_CHARS),
        confidence=0.6,
        session_id=session_id,
        slot=f"session:{session_id}",
        metadata=_metadata(
            " ".join(parts),
            start,
            {
                "speakers": speakers,
                "messages": len(msgs),
                "session_id": session_id,
            },
        ),
    )


def restates_turns(memory: Memory) -> bool:
    """Whether ``memory`` is this compiler's session summary (``_summary``): each sentence is
    a turn's, word for word, and each of those turns is a memory ranked on its own (context
    leaves these out of its searched lane: ``cairn.engine.context.lanes``)."""
    return memory.kind == "episode_summary" and memory.metadata.get("compiler") == NAME


def _neighbours(
    batch: CompileInput, messages: MessageMemo
) -> tuple[dict[tuple[Any, int], tuple[str, ...]], list[tuple[Any, Any]]]:
    """The words around each message, and the already-compiled messages whose context the
    batch extends.

    A turn is indexed with the ``CONTEXT_BEFORE`` messages before it and the
    ``CONTEXT_AFTER`` after it in its session (outside sessions: in the batch), so a reply is
    found by the words of its question. Returns ``(episode id, index) → their texts`` and the
    ``(episode, message)`` pairs compiled earlier whose following messages arrived now.
    """
    new_ids = {ep.id for ep in batch.episodes}
    out: dict[tuple[Any, int], tuple[str, ...]] = {}
    stale: list[tuple[Any, Any]] = []
    streams = [batch.sessions[k] for k in sorted(batch.sessions)]
    streams.append([ep for ep in batch.episodes if not ep.session_id])
    for stream in streams:
        flat = [(ep, msg) for ep in stream for msg in messages(ep)]
        first_new = next((i for i, (ep, _) in enumerate(flat) if ep.id in new_ids), None)
        for i, (ep, msg) in enumerate(flat):
            ctx = [m.text for _, m in flat[max(0, i - CONTEXT_BEFORE) : i]]
            ctx += [m.text for _, m in flat[i + 1 : i + 1 + CONTEXT_AFTER]]
            ctx = [t for t in ctx if not is_contentless(t)]
            out[(ep.id, msg.index)] = tuple(ctx)
            if (
                first_new is not None
                and ep.id not in new_ids
                and first_new - CONTEXT_AFTER <= i < first_new
            ):
                stale.append((ep, msg))
    return out, stale


def _turn(
    ep: Episode,
    msg: Message,
    context: tuple[str, ...],
    names: dict[str, str],
    refresh: bool = False,
) -> MemoryDraft:
    # An acknowledgement or greeting is kept (it is what was said) but never indexed with its
    # neighbours' words, and ranks below any turn with content (search weighs by confidence).
    empty = is_contentless(msg.text)
    extra: dict[str, Any] = {
        "speaker": msg.speaker,
        "role": msg.role,
        "episode_type": ep.type,
        "message_index": msg.index,
    }
    if empty:
        extra["contentless"] = True
    metadata = _metadata(msg.text, msg.at, extra, context=() if empty else context)
    name = names.get(msg.speaker.lower())
    if name and not empty:  # "User: I work at Acme" is found by the name the user gave
        metadata["keywords"] = f"{metadata['keywords']} {name}".strip()
    return MemoryDraft(
        kind="turn",
        content=f"{msg.speaker}: {msg.text}",
        source_episode_ids=(ep.id,),
        valid_from=msg.at,
        summary=cut_text(msg.text, SUMMARY_CHARS),
        confidence=turn_confidence(msg.text),
        session_id=ep.session_id,
        refresh=refresh,
        metadata=metadata,
    )


def turn_confidence(text: str) -> float:
    """A turn's confidence: search multiplies its relevance by it. A contentless message
    ("Noted.", "haha") gets ``CONTENTLESS_CONFIDENCE``; any other rises with how much it says
    (``cairn.core.analysis.content_size``), from ``BRIEF_TURN_CONFIDENCE`` to 1 at
    ``FULL_TURN_WORDS`` content words. Both lanes favour brief turns otherwise: BM25's length
    normalisation lifts a short turn that holds a question's one common word (a name), and a
    turn embedded with its neighbours' words is mostly those words when it says little of
    its own ("go on", "Bad news"), so it sits near whatever they were about. A turn that only
    asks ("Hey! How was Denmark?") states nothing: times ``QUESTION_FACTOR``."""
    if is_contentless(text):
        return CONTENTLESS_CONFIDENCE
    size = min(1.0, content_size(text) / FULL_TURN_WORDS)
    confidence = BRIEF_TURN_CONFIDENCE + (1.0 - BRIEF_TURN_CONFIDENCE) * size
    return round(confidence * (QUESTION_FACTOR if is_question(text) else 1.0), 4)


class HeuristicCompiler:
    """The deterministic default compiler."""

    name = NAME
    version = VERSION

    def compile(self, batch: CompileInput) -> list[MemoryDraft]:
        messages = MessageMemo()
        drafts: list[MemoryDraft] = []
        context, stale = _neighbours(batch, messages)
        names = _stated_names(batch, messages)
        # Turns compiled earlier get the words of the messages that followed them.
        for ep, msg in stale:
            drafts.append(_turn(ep, msg, context.get((ep.id, msg.index), ()), names, True))
        for ep in batch.episodes:
            pause_point()  # a background compile lets requests in flight go first
            msgs = messages(ep)
            if msgs:
                for msg in msgs:
                    drafts.append(_turn(ep, msg, context.get((ep.id, msg.index), ()), names))
                    drafts.extend(_facts(msg, names))
                continue
            text = _note_text(ep)
            if not text:
                continue
            for i, chunk in enumerate(note_chunks(text, NOTE_CHUNK_WORDS)):
                drafts.append(
                    MemoryDraft(
                        kind="note",
                        content=chunk,
                        source_episode_ids=(ep.id,),
                        valid_from=ep.occurred_at,
                        summary=cut_text(chunk, SUMMARY_CHARS),
                        confidence=1.0,
                        session_id=ep.session_id,
                        metadata=_metadata(
                            chunk, ep.occurred_at, {"episode_type": ep.type, "chunk": i}
                        ),
                    )
                )
        for session_id in sorted(batch.sessions):
            summary = _summary(session_id, batch.sessions[session_id], messages)
            if summary is not None:
                drafts.append(summary)
        return drafts
