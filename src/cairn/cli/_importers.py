"""Readers that turn files into episodes for ``cairn ingest``.

- ``jsonl``: one episode object per line (the ``POST /v1/episodes`` body).
- ``locomo``: a LoCoMo JSON file; each conversation becomes a subject, each turn an episode.
- ``chat``: chat exports, JSON or JSONL; each record is a conversation, either
  ``{"id"?, "subject_id"?, "messages": [{"role", "content", "timestamp"?}]}`` (OpenAI-style
  message lists) or a ChatGPT export conversation (``conversations.json``: a ``mapping`` tree
  of message nodes, read along the thread that ends at ``current_node``); each message becomes
  an episode of the conversation's session.

Each reader yields ``(where, data)``: a location to name in errors (``line 7``,
``conv-26 D1:3``) and the episode body, which the caller validates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

Format = Literal["auto", "jsonl", "locomo", "chat"]
Item = tuple[str, dict[str, Any] | Exception]


def detect(path: Path) -> Literal["jsonl", "locomo", "chat"]:
    """Guess a file's format from its first record."""
    with path.open(encoding="utf-8") as f:
        head = f.read(65_536).lstrip()
    if head.startswith("["):
        return "locomo" if '"conversation"' in head and '"sample_id"' in head else "chat"
    first = head.splitlines()[0] if head else ""
    try:
        record = json.loads(first)
    except ValueError:
        return "jsonl"
    if (
        isinstance(record, dict)
        and ("messages" in record or "mapping" in record)
        and "payload" not in record
    ):
        return "chat"
    return "jsonl"


def read_jsonl(path: Path, subject_id: str | None, key_prefix: str | None) -> Iterator[Item]:
    """One episode per non-blank line; ``subject_id`` fills in a missing one. ``key_prefix``:
    a line without an idempotency key gets ``<prefix>:<digest of the record>:<n>`` (the n-th
    record of that content in the file), so importing the same records again writes nothing
    new — from this file or any other — while an edited line, or other records on the same
    lines of a same-named file or another stdin, are new data (a key of the file name and line
    number dropped those as duplicates)."""
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                yield f"line {n}", ValueError(f"not JSON: {exc}")
                continue
            if not isinstance(data, dict):
                yield f"line {n}", ValueError("not a JSON object")
                continue
            if subject_id and "subject_id" not in data:
                data["subject_id"] = subject_id
            if key_prefix and not data.get("idempotency_key"):
                canonical = json.dumps(data, sort_keys=True)  # (ASCII: a lone surrogate too)
                digest = hashlib.sha256(canonical.encode()).hexdigest()[:32]
                seen[digest] = seen.get(digest, 0) + 1
                data["idempotency_key"] = f"{key_prefix}:{digest}:{seen[digest]}"
            yield f"line {n}", data


def read_locomo(path: Path, subject_id: str | None) -> Iterator[Item]:
    """LoCoMo: subject ``subject_id`` or ``locomo:<sample_id>``; the session's date plus the
    turn's position as ``occurred_at`` (so the timeline keeps the spoken order); the turn's
    ``dia_id`` as idempotency key, so importing the file twice writes nothing new."""
    from cairn.bench.locomo import load

    try:
        conversations = load(path)
    except (KeyError, TypeError, ValueError) as exc:
        yield path.name, ValueError(f"not a LoCoMo file: {exc!r}")
        return
    for conv in conversations:
        subject = subject_id or f"locomo:{conv.sample_id}"
        position: dict[Any, int] = {}  # each session's turns count from its own date
        for turn in conv.turns:
            i = position[turn["session"]] = position.get(turn["session"], -1) + 1
            msg: dict[str, Any] = {"role": "user", "name": turn["speaker"], "content": turn["text"]}
            if turn.get("caption"):
                msg["caption"] = turn["caption"]
            yield (
                f"{conv.sample_id} {turn['dia_id']}",
                {
                    "subject_id": subject,
                    "source": "locomo",
                    "type": "conversation.turn",
                    "payload": {"messages": [msg]},
                    "session_id": f"session_{turn['session']}",
                    "idempotency_key": turn["dia_id"],
                    "occurred_at": (turn["at"] + timedelta(seconds=i)).isoformat(),
                    "metadata": {"dia_id": turn["dia_id"], "speaker": turn["speaker"]},
                },
            )


def _conversations(path: Path) -> Iterator[tuple[str, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except ValueError as exc:
            yield path.name, ValueError(f"not JSON: {exc}")
            return
        for n, record in enumerate(records):
            yield f"record {n}", record
        return
    if stripped.startswith("{") and "\n{" not in stripped:
        try:
            yield "record 0", json.loads(text)
        except ValueError as exc:
            yield path.name, ValueError(f"not JSON: {exc}")
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"line {n}", json.loads(line)
            except ValueError as exc:
                yield f"line {n}", ValueError(f"not JSON: {exc}")


def _thread_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A ChatGPT export conversation as a message list: follow ``parent`` links from
    ``current_node`` to the root, keep user/assistant text, oldest first."""
    mapping: dict[str, Any] = record["mapping"]
    node_id = record.get("current_node")
    if node_id not in mapping:  # no pointer: the last node in the file
        node_id = next(reversed(mapping), None)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id] or {}
        msg = node.get("message") or {}
        role = (msg.get("author") or {}).get("role")
        content = msg.get("content") or {}
        parts = [p for p in content.get("parts") or [] if isinstance(p, str) and p.strip()]
        if role in ("user", "assistant") and parts:
            out: dict[str, Any] = {"role": role, "content": "\n".join(parts)}
            if isinstance(msg.get("create_time"), int | float):
                out["timestamp"] = datetime.fromtimestamp(msg["create_time"], UTC).isoformat()
            chain.append(out)
        node_id = node.get("parent")
    return list(reversed(chain))


def read_chat(path: Path, subject_id: str | None) -> Iterator[Item]:
    """Chat exports: one episode per message, the conversation id as session."""
    stem = path.stem
    for where, record in _conversations(path):
        if isinstance(record, Exception):
            yield where, record
            continue
        if isinstance(record, dict) and isinstance(record.get("mapping"), dict):
            record = {**record, "messages": _thread_of(record)}
            if not record["messages"]:
                # Nothing to import is not success: an empty mapping, or no node with text.
                yield where, ValueError("a 'mapping' with no user or assistant message in it")
                continue
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            yield where, ValueError("expected an object with a 'messages' list or a 'mapping'")
            continue
        conv_id = str(record.get("id") or record.get("conversation_id") or f"{stem}-{where}")
        conv_id = conv_id.replace(" ", "-")
        subject = subject_id or record.get("subject_id") or record.get("user")
        if not subject:
            yield where, ValueError("no subject: give --subject or a 'subject_id' per record")
            continue
        last: tuple[int, str] | None = None  # the latest message with a time, and its time
        for i, msg in enumerate(record["messages"]):
            label = f"{where} message {i}"
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                yield label, ValueError("a message needs a string 'content'")
                continue
            body: dict[str, Any] = {
                "subject_id": subject,
                "source": "chat-export",
                "type": "conversation.turn",
                "payload": {
                    "messages": [
                        {"role": str(msg.get("role") or "user"), "content": msg["content"]}
                    ]
                },
                "session_id": conv_id,
                "idempotency_key": f"{conv_id}:{i}",
            }
            stamp = msg.get("timestamp") or msg.get("created_at")
            if stamp:
                body["occurred_at"] = stamp
                last = (i, str(stamp))
            elif last is not None:
                # A message without a time in a timed chat follows the one before it (it got
                # the time of the import: a reply a year after its question).
                later = _seconds_after(last[1], i - last[0])
                if later is not None:
                    body["occurred_at"] = later
            yield label, body


def _seconds_after(stamp: str, seconds: int) -> str | None:
    """``stamp`` (ISO 8601) plus ``seconds``, or None when it is not a time this can read."""
    try:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at + timedelta(seconds=seconds)).isoformat()


def read(
    path: Path, fmt: Format, subject_id: str | None, key_prefix: str | None
) -> tuple[str, Iterator[Item]]:
    """The resolved format and its items."""
    resolved = detect(path) if fmt == "auto" else fmt
    if resolved == "locomo":
        return resolved, read_locomo(path, subject_id)
    if resolved == "chat":
        return resolved, read_chat(path, subject_id)
    return resolved, read_jsonl(path, subject_id, key_prefix)
