"""The OpenAI Agents SDK on Cairn: ``CairnSession`` and the ``cairn_recall`` tool.

``CairnSession`` implements the SDK's ``Session`` protocol. Its items are kept verbatim, in
order, as episodes of one Cairn subject per session (``agents-session:<session_id>``; ids that
are not valid subject ids are hashed), so every item shape the SDK produces round-trips and
``clear_session`` is one subject deletion. The user and assistant messages among the items are
also committed as Cairn turns of the session's scope (``conversation_id`` = the session id):
that is what becomes long-term memory, searchable by ``cairn_recall`` in later sessions.

    session = CairnSession("conversation-1", user_id="ada")      # embedded, like SQLiteSession
    session = CairnSession("conversation-1", client=AsyncCairn(url, api_key=key))  # a server
    agent = Agent(name="helper", tools=[cairn_recall(session)])
    await Runner.run(agent, "What tea do I like?", session=session)
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import TYPE_CHECKING, Any, cast

from cairn.integrations._extras import require_extra

require_extra("agents", "openai-agents", "cairn.integrations.openai_agents")

from agents import FunctionTool, function_tool  # noqa: E402
from agents.memory import SessionSettings  # noqa: E402
from agents.memory.session_settings import resolve_session_limit  # noqa: E402

from cairn.client import AsyncCairn, Cairn, Episode, Message, NotFoundError, Scope  # noqa: E402
from cairn.integrations._log import (  # noqa: E402
    LogReader,
    conversation_key,
    log_subject,
    record_batches,
    turn_scope,
)

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from cairn.config import Settings

ITEM_TYPE = "openai_agents.item"
ITEM_SOURCE = "openai-agents"
SUBJECT_PREFIX = "agents-session"
TIMELINE = "/v1/timeline"
_TEXT_PARTS = ("input_text", "output_text")


def items_subject(session_id: str) -> str:
    """The Cairn subject that holds a session's items (``agents-session:<id>``; ids that are
    not valid subject ids are hashed)."""
    return log_subject(SUBJECT_PREFIX, session_id)


def message_of(item: dict[str, Any]) -> dict[str, str] | None:
    """The ``{role, content}`` of a user or assistant message item, ``None`` for any other
    item (tool calls, their outputs, reasoning, system/developer messages) or one without text."""
    if item.get("type", "message") != "message" or item.get("role") not in ("user", "assistant"):
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
        )
    else:
        return None
    return {"role": str(item["role"]), "content": text} if text.strip() else None


class CairnSession:
    """The OpenAI Agents SDK ``Session`` on Cairn.

    ``client`` is an ``AsyncCairn`` or a ``Cairn`` of a server (the session never closes it);
    without one the session runs Cairn in this process on ``settings``' database (by default
    SQLite in the data directory) and ``close()`` stops it. Turns are recorded in ``scope``
    (default: the subject ``user_id``, or the session id when no user is given);
    ``record_turns=False`` keeps only the history.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        client: AsyncCairn | Cairn | None = None,
        user_id: str | None = None,
        scope: Scope | dict[str, str] | None = None,
        session_settings: SessionSettings | None = None,
        record_turns: bool = True,
        settings: Settings | None = None,
    ) -> None:
        if not session_id:
            raise ValueError("session_id must not be empty")
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.subject_id = items_subject(session_id)
        self.conversation_id = conversation_key(session_id)
        self.scope = turn_scope(scope, user_id, self.conversation_id)
        self.record_turns = record_turns
        self._owns_client = client is None
        # Embedded, the sync client runs the app on its own loop thread, so the session
        # works from any event loop (each ``Runner.run_sync`` starts a new one).
        self.client: AsyncCairn | Cairn = client if client is not None else Cairn.local(settings)

    async def _send(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a client method (``"episodes.create_many"``): awaited with an ``AsyncCairn``,
        on a worker thread with a ``Cairn`` (as the SDK's SQLiteSession runs its queries)."""
        call = operator.attrgetter(method)(self.client)
        if isinstance(self.client, AsyncCairn):
            return await call(*args, **kwargs)
        return await asyncio.to_thread(call, *args, **kwargs)

    async def _episodes(self, limit: int | None) -> list[Episode]:
        """The session's item episodes, oldest first: all of them, or the latest ``limit``."""
        reader = LogReader(self.subject_id, ITEM_TYPE, limit)
        while (params := reader.next_page()) is not None:
            reader.add(await self._send("request", "GET", TIMELINE, params=params))
        return reader.episodes

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history in chronological order: all items, or the latest ``limit``."""
        resolved = resolve_session_limit(limit, self.session_settings)
        if resolved is not None and resolved == 0:
            return []
        episodes = await self._episodes(resolved if resolved is None or resolved > 0 else None)
        return [cast("TResponseInputItem", e.payload) for e in episodes]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items (verbatim) and commit their user/assistant messages as one turn."""
        if not items:
            return
        call = uuid.uuid4().hex  # keys make a retried batch a no-op
        records = [dict(cast("dict[str, Any]", item)) for item in items]
        batches = record_batches(
            self.subject_id,
            records,
            source=ITEM_SOURCE,
            type=ITEM_TYPE,
            session_id=self.conversation_id,
            call=call,
        )
        for batch in batches:
            await self._send("episodes.create_many", batch)
        messages: list[Message | dict[str, str]] = [
            m for m in map(message_of, records) if m is not None
        ]
        if self.record_turns and messages:
            metadata = {"source": ITEM_SOURCE}
            await self._send(
                "scopes.commit_turn",
                self.scope,
                self.conversation_id,
                call,
                messages,
                metadata=metadata,
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (``None`` when the session is empty)."""
        while True:
            latest = await self._episodes(1)
            if not latest:
                return None
            try:
                await self._send("episodes.delete", latest[0].id)
            except NotFoundError:
                continue  # a concurrent pop took it: take the next one
            return cast("TResponseInputItem", latest[0].payload)

    async def clear_session(self) -> None:
        """Delete the session's items: its whole subject, with anything compiled from it there,
        so no reader of the session sees any of it again. The turns committed to the user's
        scope stay: they are that user's long-term memory (and the provenance of what was
        learnt from them), not items of this session; erase a person with
        ``client.scopes.delete(user_id)``."""
        await self._send("subjects.delete", self.subject_id)

    async def compile_turns(self) -> None:
        """Turn the committed turns into memories now, rather than when the server's background
        compile gets to them (only a subject scope, ``("default", user_id, "")``, has one)."""
        if self.scope.runtime_id != "default" or self.scope.agent_id or not self.scope.user_id:
            raise ValueError("compile_turns needs a subject scope: runtime 'default', no agent")
        while (await self._send("memories.compile", self.scope.user_id)).has_more:
            pass

    async def recall(self, query: str, *, max_tokens: int | None = None) -> str:
        """Cairn's rendered context of the session's scope for ``query`` ('' if none)."""
        budget = {"max_tokens": max_tokens} if max_tokens else None
        context = await self._send("scopes.context", self.scope, query, budget=budget, render=True)
        return context.rendered or ""

    def close(self) -> None:
        """Stop the in-process Cairn this session started (a passed client stays open)."""
        if self._owns_client and isinstance(self.client, Cairn):
            self.client.close()

    def __enter__(self) -> CairnSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> CairnSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)


def cairn_recall(session: CairnSession, *, max_tokens: int | None = None) -> FunctionTool:
    """A function tool named ``cairn_recall`` that returns what Cairn remembers of the
    session's scope that is relevant to the agent's current question."""

    async def cairn_recall(question: str) -> str:
        """Recall what is known about the user that is relevant to a question: preferences,
        facts and earlier conversations. Returns the relevant memory as text.

        Args:
            question: The user's current question, or what to look up.
        """
        text = await session.recall(question, max_tokens=max_tokens)
        return text or "Nothing relevant is remembered."

    return function_tool(cairn_recall)


__all__ = ["CairnSession", "cairn_recall", "items_subject", "message_of"]
