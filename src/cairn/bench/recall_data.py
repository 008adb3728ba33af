"""Recall datasets: conversations with dated turns and questions whose answers are known turns.

One format of our own (``cairn-recall/1``, documented in docs/benchmarks.md) serves every
dataset; LoCoMo files are converted to it when read. A dataset is::

    {"format": "cairn-recall/1", "name": "...", "language": "en", "description": "...",
     "conversations": [
       {"id": "en-1", "speakers": ["Maya", "Tom"],
        "sessions": [{"id": "s1", "date": "2024-03-02T18:30:00Z",
                      "turns": [{"id": "s1:1", "speaker": "Maya", "text": "...",
                                 "caption": "optional image caption"}]}],
        "questions": [{"question": "...", "answer": "...", "evidence": ["s1:1"],
                       "category": "paraphrase"}]}]}

Turn ids are unique within a conversation; every evidence id names a turn of it. Conversation
ids are subject ids (``[A-Za-z0-9_.-:]``). Datasets shipped with Cairn live in
``cairn/bench/data`` and are named by their file name without ``.json``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cairn.errors import InvalidInput

FORMAT = "cairn-recall/1"
DATA_DIR = Path(__file__).parent / "data"
_SUBJECT = re.compile(r"^[A-Za-z0-9_.\-:]{1,256}$")
_DIA = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str
    session: str
    at: datetime
    caption: str | None = None


@dataclass(frozen=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: str
    answer: str = ""


@dataclass
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question]
    speakers: list[str] = field(default_factory=list)


@dataclass
class Dataset:
    name: str
    conversations: list[Conversation]
    language: str = ""
    description: str = ""

    def limited(self, conversations: int | None, questions: int | None) -> Dataset:
        """The first ``conversations`` conversations, each with its first ``questions``."""
        convs = self.conversations[:conversations] if conversations else self.conversations
        if questions:
            convs = [
                Conversation(c.id, c.turns, c.questions[:questions], c.speakers) for c in convs
            ]
        return Dataset(self.name, list(convs), self.language, self.description)

    def pooled(self) -> Dataset:
        """Every conversation in one subject (ids prefixed ``conversation/``), turns by date.

        One subject then holds several casts, as a user's memory of many chats would, so a
        question must also find the right conversation; budgets meet a bigger corpus.
        """
        subject = re.sub(r"[^A-Za-z0-9_.\-:]", "-", f"{self.name}-pool")[:256]
        turns = [
            Turn(f"{c.id}/{t.id}", t.speaker, t.text, f"{c.id}/{t.session}", t.at, t.caption)
            for c in self.conversations
            for t in c.turns
        ]
        turns.sort(key=lambda t: t.at)  # stable: a conversation's turns keep their order
        questions = [
            Question(q.question, tuple(f"{c.id}/{e}" for e in q.evidence), q.category, q.answer)
            for c in self.conversations
            for q in c.questions
        ]
        speakers = sorted({s for c in self.conversations for s in c.speakers})
        pool = Conversation(subject, turns, questions, speakers)
        return Dataset(self.name, [pool], self.language, self.description)


def builtin_names() -> list[str]:
    """Names of the datasets shipped in ``cairn/bench/data``."""
    return sorted(p.stem for p in DATA_DIR.glob("*.json"))


def resolve(spec: str) -> Path:
    """A dataset path, or the file of a built-in dataset named ``spec``."""
    path = Path(spec)
    if path.is_file():
        return path
    builtin = DATA_DIR / f"{spec}.json"
    if builtin.is_file():
        return builtin
    raise InvalidInput(
        f"no dataset file {spec!r} and no built-in dataset of that name "
        f"(built-in: {', '.join(builtin_names()) or 'none'})"
    )


def dataset_specs(spec: str) -> list[str]:
    """The datasets one ``--dataset`` value names: comma-separated paths or built-in names,
    a name with ``*`` or ``?`` standing for every built-in dataset it matches
    (``multilingual3-*``), in the order given, each once."""
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if any(c in part for c in "*?[") and not Path(part).is_file():
            matched = fnmatch.filter(builtin_names(), part)
            if not matched:
                raise InvalidInput(f"no built-in dataset matches {part!r}")
            out += matched
        else:
            out.append(part)
    if not out:
        raise InvalidInput("no dataset named")
    return list(dict.fromkeys(out))


def combined(datasets: list[Dataset]) -> Dataset:
    """One dataset holding every conversation of ``datasets`` (each still its own subject),
    to load them all into one server; conversation ids must not repeat."""
    if len(datasets) == 1:
        return datasets[0]
    seen: dict[str, str] = {}
    for d in datasets:
        for c in d.conversations:
            if c.id in seen:
                raise InvalidInput(
                    f"conversation {c.id!r} is in both {seen[c.id]!r} and {d.name!r}: "
                    "run them one at a time"
                )
            seen[c.id] = d.name
    name = "+".join(d.name for d in datasets)
    return Dataset(name, [c for d in datasets for c in d.conversations])


def load_dataset(spec: str) -> Dataset:
    """Read a ``cairn-recall/1`` file (a path or a built-in name); LoCoMo files are converted."""
    path = resolve(spec)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path}: not a readable JSON file ({exc})") from exc
    if isinstance(raw, list):  # LoCoMo's own layout is a list of samples
        return load_locomo(path)
    return parse_dataset(raw, source=str(path), default_name=path.stem)


def _fail(source: str, where: str, problem: str) -> InvalidInput:
    return InvalidInput(f"{source}: {where}: {problem}")


def _date(value: Any, source: str, where: str) -> datetime:
    try:
        at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise _fail(source, where, f"date {value!r} is not ISO 8601") from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _parse_turns(conv: dict[str, Any], source: str, where: str) -> list[Turn]:
    turns: list[Turn] = []
    for s, session in enumerate(conv.get("sessions") or []):
        swhere = f"{where}.sessions[{s}]"
        at = _date(session.get("date"), source, swhere)
        sid = str(session.get("id") or f"s{s + 1}")
        for t, turn in enumerate(session.get("turns") or []):
            twhere = f"{swhere}.turns[{t}]"
            text, speaker, tid = turn.get("text"), turn.get("speaker"), turn.get("id")
            if not (isinstance(text, str) and text.strip()):
                raise _fail(source, twhere, "text must be a non-empty string")
            if not (isinstance(speaker, str) and speaker.strip()):
                raise _fail(source, twhere, "speaker must be a non-empty string")
            if not isinstance(tid, str) or not tid:
                raise _fail(source, twhere, "id must be a non-empty string")
            turns.append(Turn(tid, speaker, text, sid, at, turn.get("caption") or None))
    return turns


def parse_dataset(raw: Any, *, source: str = "dataset", default_name: str = "dataset") -> Dataset:
    """Validate a ``cairn-recall/1`` document; errors name the source and the field path."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise _fail(source, "format", f"expected an object with format {FORMAT!r}")
    convs: list[Conversation] = []
    seen: set[str] = set()
    for c, conv in enumerate(raw.get("conversations") or []):
        where = f"conversations[{c}]"
        cid = conv.get("id")
        if not isinstance(cid, str) or not _SUBJECT.match(cid) or cid in seen:
            raise _fail(source, f"{where}.id", f"{cid!r} is not a unique subject id")
        seen.add(cid)
        turns = _parse_turns(conv, source, where)
        ids = [t.id for t in turns]
        if len(set(ids)) != len(ids):
            raise _fail(source, where, "turn ids repeat")
        questions = []
        for q, item in enumerate(conv.get("questions") or []):
            evidence = tuple(str(e) for e in item.get("evidence") or [])
            missing = [e for e in evidence if e not in set(ids)]
            if not isinstance(item.get("question"), str) or not evidence or missing:
                raise _fail(
                    source,
                    f"{where}.questions[{q}]",
                    f"needs a question and evidence turn ids of this conversation "
                    f"(unknown: {missing})",
                )
            questions.append(
                Question(
                    item["question"],
                    evidence,
                    str(item.get("category", "")),
                    str(item.get("answer", "")),
                )
            )
        convs.append(Conversation(cid, turns, questions, list(conv.get("speakers") or [])))
    if not convs:
        raise _fail(source, "conversations", "no conversations")
    return Dataset(
        str(raw.get("name") or default_name),
        convs,
        str(raw.get("language") or ""),
        str(raw.get("description") or ""),
    )


def load_locomo(path: Path) -> Dataset:
    """A LoCoMo file as a dataset. Category 5 (adversarial, no answer) is left out."""
    from cairn.bench.locomo import parse_date

    convs = []
    for sample in json.loads(Path(path).read_text(encoding="utf-8")):
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            at = parse_date(conv[f"session_{n}_date_time"])
            for turn in conv[f"session_{n}"]:
                turns.append(
                    Turn(
                        turn["dia_id"],
                        turn["speaker"],
                        turn["text"],
                        f"session_{n}",
                        at,
                        turn.get("blip_caption") or None,
                    )
                )
            n += 1
        known = {t.id for t in turns}
        questions = []
        for q in sample.get("qa", []):
            evidence = tuple(
                e for e in _DIA.findall(" ".join(map(str, q.get("evidence", [])))) if e in known
            )
            if q.get("category") == 5 or not evidence:
                continue
            questions.append(
                Question(q["question"], evidence, str(q.get("category")), str(q.get("answer", "")))
            )
        speakers = [conv.get("speaker_a", ""), conv.get("speaker_b", "")]
        convs.append(Conversation(sample["sample_id"], turns, questions, speakers))
    return Dataset(Path(path).stem, convs, "en", "LoCoMo (Maharana et al., ACL 2024)")
