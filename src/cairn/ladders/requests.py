"""A ladder run's request and outcome: what a caller asks and what it gets back (the OpenAI
``chat.completion`` object with Cairn's part)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cairn.core.subject_id import canonical_id

if TYPE_CHECKING:
    from cairn.store.runs import RunRecord


@dataclass
class RunRequest:
    """One call: the tenant, the ladder (model id) and the OpenAI-style request."""

    tenant: str
    ladder: str
    messages: list[dict[str, Any]]
    model: str | None = None
    run_id: str | None = None
    user: str = ""
    context_id: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The OpenAI ``user`` names a subject (its per-user slates, its runs' erasure): kept
        # in the subject id's canonical form.
        self.user = canonical_id(self.user)

    def fingerprint(self) -> str:
        data = {
            "ladder": self.ladder,
            "messages": self.messages,
            "model": self.model,
            "user": self.user,
            "context_id": self.context_id,
            "options": self.options,
        }
        raw = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ReplayedReply(str):
    """A replayed run's stored reply, streamed as its one delta (a caller can tell a replay
    before the stream's end, to say so in its headers)."""

    __slots__ = ()


@dataclass
class RunOutcome:
    run_id: str
    ladder: str
    content: str
    model: str
    created: int
    usage: dict[str, int]
    replayed: bool = False
    trace: dict[str, Any] | None = None
    writes: list[dict[str, Any]] = field(default_factory=list)

    def cairn(self) -> dict[str, Any]:
        """Cairn's part of the response, beside ``choices`` (OpenAI clients ignore it): the
        run id and the outcome of each slate write (see ``ladders.outcomes``)."""
        return {"run_id": self.run_id, "ladder": self.ladder, "writes": self.writes}

    def completion(self) -> dict[str, Any]:
        """The OpenAI ``chat.completion`` object of this run, with the ``cairn`` object."""
        return {
            "id": f"chatcmpl-{self.run_id}",
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": self.usage,
            "system_fingerprint": None,
            "cairn": self.cairn(),
        }

    @classmethod
    def from_record(cls, record: RunRecord) -> RunOutcome:
        r = record.response or {}
        return cls(
            run_id=record.id,
            ladder=record.ladder,
            content=r["choices"][0]["message"]["content"],
            model=r["model"],
            created=r["created"],
            usage=r["usage"],
            replayed=True,
            writes=list((r.get("cairn") or {}).get("writes") or []),
        )


__all__ = ["ReplayedReply", "RunOutcome", "RunRequest"]
