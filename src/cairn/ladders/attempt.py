"""One attempt of a ladder run: the state it accumulates from the claim to the recorded end,
and the small pure pieces of running a step (its model options, a streamed reply)."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.ladders.board import Board
from cairn.ladders.providers import ChatReply
from cairn.ladders.registry import Ladder
from cairn.ladders.reply import stream_shown
from cairn.ladders.slate_io import SlateAccess

if TYPE_CHECKING:
    from cairn.ladders.host import LadderHost
    from cairn.ladders.runtime import RunRequest

# What a run's trace and record say of an unexpected error (its text stays in the server log).
INTERNAL_ERROR = "internal error: the server log has the details"


@dataclass
class Attempt:
    """What one attempt of a run accumulates: the board, the slates it reads and writes, the
    trace, the effects applied (the resumed ones first), the token usage and the writes."""

    ladder: Ladder
    request: RunRequest
    run_id: str
    done: set[str]
    attempt: datetime | None
    board: Board
    slates: SlateAccess
    trace: dict[str, Any]
    effects: list[str]
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    )
    writes: list[dict[str, Any]] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    created: int = field(default_factory=lambda: int(time.time()))

    @classmethod
    def begin(
        cls,
        ladder: Ladder,
        request: RunRequest,
        run_id: str,
        done: set[str],
        attempt: datetime | None,
        services: LadderHost,
    ) -> Attempt:
        board = Board.for_request(
            run_id=run_id,
            ladder=ladder.ladder,
            messages=request.messages,
            context_id=request.context_id or "default",
            user_id=request.user,
        )
        trace: dict[str, Any] = {
            "run_id": run_id,
            "ladder": ladder.name,
            "agent": ladder.agent,
            "requested_model": request.model,
            "user": request.user,
            "context_id": board.context_id,
            "resumed_effects": sorted(done),
            "prepare": [],
            "steps": [],
            "commit": [],
        }
        slates = SlateAccess(services.slates, request.tenant, ladder.ladder, request.user, run_id)
        return cls(ladder, request, run_id, done, attempt, board, slates, trace, list(done))


def step_options(step: Any, request: RunRequest) -> dict[str, Any]:
    """The request's model options with the step's own temperature and token limit."""
    options = dict(request.options)
    if step.temperature is not None:
        options["temperature"] = step.temperature
    if step.maxTokens is not None:
        options["max_tokens"] = step.maxTokens
    return options


def streamed(step: Any, chunks: Iterator[str | ChatReply]) -> Generator[str, None, ChatReply]:
    """Yield what the caller sees of a streamed reply; return the whole reply."""
    reply: ChatReply | None = None
    for item in stream_shown(step, chunks):
        if isinstance(item, ChatReply):
            reply = item
        else:
            yield item
    assert reply is not None
    return reply
