"""LangChain on Cairn: ``CairnRetriever`` and ``CairnChatMessageHistory``.

``CairnRetriever`` is a ``BaseRetriever`` over Cairn's memory search of one subject: each
``Document`` is a memory, with its ``score`` (in [0, 1], larger is better) and provenance (the
memory id, kind, the episodes it came from) in ``metadata``. ``CairnChatMessageHistory`` keeps
a conversation's messages verbatim, in order, as episodes of one subject per session
(``langchain-session:<session_id>``) and commits the human and AI messages as Cairn turns of the
user's scope, so they become memories the retriever finds in later conversations.

    history = CairnChatMessageHistory("conversation-1", user_id="ada")     # embedded
    retriever = CairnRetriever(subject_id="ada", client=history.client, k=3)
    history.add_messages([HumanMessage("I like jasmine tea"), AIMessage("Noted.")])
    docs = retriever.invoke("tea")

Both run Cairn in this process when no client is given (SQLite in the data directory), or
talk to a server through ``client=Cairn(url, api_key=...)`` (and ``async_client=AsyncCairn``
for the retriever's native async path).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cairn.integrations._extras import require_extra

require_extra("langchain_core", "langchain", "cairn.integrations.langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402

from cairn.client import AsyncCairn, Cairn, Memory, Message, Scope  # noqa: E402
from cairn.integrations._log import (  # noqa: E402
    LogReader,
    conversation_key,
    log_subject,
    read_log,
    record_batches,
    turn_scope,
)

if TYPE_CHECKING:
    from cairn.config import Settings

MESSAGE_TYPE = "langchain.message"
MESSAGE_SOURCE = "langchain"
SUBJECT_PREFIX = "langchain-session"
_TURN_ROLES: dict[type[BaseMessage], str] = {HumanMessage: "user", AIMessage: "assistant"}


def memory_document(memory: Memory) -> Document:
    """A memory as a LangChain ``Document``: its content, score and provenance."""
    metadata: dict[str, Any] = {
        "score": memory.score,
        "memory_id": str(memory.id),
        "kind": memory.kind,
        "subject_id": memory.subject_id,
        "source_episode_ids": [str(e) for e in memory.source_episode_ids],
        "session_id": memory.session_id,
        "confidence": memory.confidence,
        "status": memory.status,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
        "valid_from": memory.valid_from.isoformat() if memory.valid_from else None,
        "valid_to": memory.valid_to.isoformat() if memory.valid_to else None,
        "source": "cairn",
    }
    return Document(id=str(memory.id), page_content=memory.content, metadata=metadata)


class CairnRetriever(BaseRetriever):
    """Cairn memories of ``subject_id`` relevant to a query, best first (at most ``k``).

    ``hybrid=True`` blends lexical and semantic scores (``semantic=True``: semantic only),
    ``kinds`` keeps only those memory kinds. Without ``client`` and ``async_client`` the
    retriever runs Cairn in this process (``settings``' database); ``close()`` stops it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    subject_id: str
    k: int = Field(default=4, ge=1, le=100)
    kinds: list[str] | None = None
    hybrid: bool = False
    semantic: bool = False
    client: Cairn | None = None
    async_client: AsyncCairn | None = None
    settings: Any = None  # cairn.config.Settings of the embedded Cairn
    _owned: Cairn | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        if self.client is None and self.async_client is None:
            self._owned = self.client = Cairn.local(self.settings)

    def _search_args(self) -> dict[str, Any]:
        return {
            "kinds": self.kinds,
            "limit": self.k,
            "semantic": self.semantic,
            "hybrid": self.hybrid,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.client is None:
            raise ValueError("CairnRetriever has only an async_client: use ainvoke")
        found = self.client.memories.search(self.subject_id, query, **self._search_args())
        return [memory_document(m) for m in found.memories]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:  # the sync client, on a worker thread
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        found = await self.async_client.memories.search(
            self.subject_id, query, **self._search_args()
        )
        return [memory_document(m) for m in found.memories]

    def close(self) -> None:
        """Stop the in-process Cairn this retriever started (passed clients stay open)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def turn_message(message: BaseMessage) -> Message | None:
    """A human or AI message with text as a turn message; None for any other message."""
    role = next((r for t, r in _TURN_ROLES.items() if isinstance(message, t)), None)
    text = message.text if role else ""
    return Message(role=role, content=text) if role and text.strip() else None


class CairnChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history kept in Cairn (see the module docstring).

    Turns go to ``scope`` (default: the subject ``user_id``, or the session id when no user
    is given); ``record_turns=False`` keeps only the history. ``clear()`` deletes the messages;
    what the turns taught Cairn stays (erase a person with ``client.scopes.delete``).
    """

    def __init__(
        self,
        session_id: str,
        *,
        client: Cairn | None = None,
        user_id: str | None = None,
        scope: Scope | dict[str, str] | None = None,
        record_turns: bool = True,
        settings: Settings | None = None,
    ) -> None:
        if not session_id:
            raise ValueError("session_id must not be empty")
        self.session_id = session_id
        self.subject_id = log_subject(SUBJECT_PREFIX, session_id)
        self.conversation_id = conversation_key(session_id)
        self.scope = turn_scope(scope, user_id, self.conversation_id)
        self.record_turns = record_turns
        self._owns_client = client is None
        self.client = client if client is not None else Cairn.local(settings)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first."""
        reader = LogReader(self.subject_id, MESSAGE_TYPE, None)
        episodes = read_log(
            reader, lambda params: self.client.request("GET", "/v1/timeline", params=params)
        )
        return messages_from_dict([e.payload for e in episodes])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages and commit the human and AI ones as one Cairn turn."""
        if not messages:
            return
        call = uuid.uuid4().hex
        batches = record_batches(
            self.subject_id,
            [message_to_dict(m) for m in messages],
            source=MESSAGE_SOURCE,
            type=MESSAGE_TYPE,
            session_id=self.conversation_id,
            call=call,
        )
        for batch in batches:
            self.client.episodes.create_many(batch)
        turn = [m for m in map(turn_message, messages) if m is not None]
        if self.record_turns and turn:
            self.client.scopes.commit_turn(
                self.scope,
                self.conversation_id,
                call,
                list[Message | dict[str, str]](turn),
                metadata={"source": MESSAGE_SOURCE},
            )

    def clear(self) -> None:
        """Delete the session's messages."""
        self.client.subjects.delete(self.subject_id)

    def close(self) -> None:
        """Stop the in-process Cairn this history started (a passed client stays open)."""
        if self._owns_client:
            self.client.close()


__all__ = ["CairnChatMessageHistory", "CairnRetriever", "memory_document", "turn_message"]
