"""Running one hook of a ladder run and describing its result for the run's trace."""

from __future__ import annotations

import time
from typing import Any

from cairn.core.analysis import cut_text
from cairn.core.memory import ContextResult, TurnCommit
from cairn.ladders.board import Board
from cairn.ladders.hooks import RequestContext


def run_hook(hook: Any, board: Board, ctx: RequestContext) -> dict[str, Any]:
    """Run one hook on the board's variables and describe its result for the trace."""
    t0 = time.perf_counter()
    result = hook(board.values, ctx)
    out: dict[str, Any] = {"type": getattr(hook, "type", type(hook).__name__)}
    if isinstance(result, ContextResult):
        settings = hook.settings
        out["output"] = settings.output
        # The partition read: deleting it deletes this run (``cairn.store.run_reads``).
        out["scope"] = {
            "runtime_id": settings.scope.runtime_id,
            "user_id": settings.scope.user_id,
            "agent_id": settings.scope.agent_id,
        }
        if settings.render is not None:
            out["render_output"] = settings.render.output
        out["items"] = [
            {
                "id": i.id,
                "kind": i.kind,
                "score": i.score,
                "source_class": i.source_class,
                "content": cut_text(i.content, 200),
            }
            for i in result.items
        ]
        out["token_count"] = result.token_count
        out["truncated"] = result.truncated
    elif isinstance(result, TurnCommit):
        out["episode_id"] = str(result.episode_id)
        out["conversation_id"] = result.conversation_id
        out["idempotency_key"] = result.idempotency_key
        out["created"] = result.created
    out["duration_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return out
