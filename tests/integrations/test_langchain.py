"""``CairnRetriever`` and ``CairnChatMessageHistory`` with the real langchain_core, embedded
and against a live server, on both backends."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.retrievers import BaseRetriever

from cairn.client import AsyncCairn, Cairn
from cairn.integrations.langchain import (
    CairnChatMessageHistory,
    CairnRetriever,
    turn_message,
)

MESSAGES: list[BaseMessage] = [
    SystemMessage("You are helpful."),
    HumanMessage("Bonjour, je m'appelle Zoë 🍵", id="h1"),
    AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "lookup", "args": {"q": "чай"}, "id": "call_1", "type": "tool_call"}],
    ),
    ToolMessage("green tea", tool_call_id="call_1", name="lookup"),
    AIMessage(
        [{"type": "text", "text": "你好 — مرحبا"}],
        response_metadata={"model": "m"},
        additional_kwargs={"k": [1, None]},
    ),
    HumanMessage("plain"),
]


def remember_tea(client: Cairn, session_id: str = "s1") -> CairnChatMessageHistory:
    history = CairnChatMessageHistory(session_id, client=client, user_id="ada")
    history.add_messages(
        [HumanMessage("I love jasmine tea."), AIMessage("Noted, jasmine tea it is.")]
    )
    history.add_user_message("My sister lives in Kraków.")
    client.memories.compile("ada")
    return history


def test_history_round_trips_every_message(connect_sync: Callable[[], Cairn]) -> None:
    client = connect_sync()
    history = CairnChatMessageHistory("chat-1", client=client)
    assert isinstance(history, BaseChatMessageHistory)
    assert history.messages == []
    history.add_messages(MESSAGES[:3])
    history.add_messages(MESSAGES[3:])
    history.add_messages([])
    assert history.messages == MESSAGES
    other = CairnChatMessageHistory("chat-2", client=client)
    assert other.messages == []
    history.clear()
    assert history.messages == []
    history.add_ai_message("again")
    assert [m.text for m in history.messages] == ["again"]


def test_history_async_variants(connect_sync: Callable[[], Cairn]) -> None:
    history = CairnChatMessageHistory("chat-async", client=connect_sync())

    async def main() -> tuple[list[BaseMessage], list[BaseMessage]]:
        await history.aadd_messages(MESSAGES[:2])
        kept = await history.aget_messages()
        await history.aclear()
        return kept, await history.aget_messages()

    kept, cleared = asyncio.run(main())
    assert kept == MESSAGES[:2]
    assert cleared == []


def test_history_becomes_memory_the_retriever_finds(connect_sync: Callable[[], Cairn]) -> None:
    client = connect_sync()
    remember_tea(client)
    retriever = CairnRetriever(subject_id="ada", client=client, k=2)
    docs = retriever.invoke("jasmine tea")
    assert docs and all(isinstance(d, Document) for d in docs)
    assert len(docs) <= 2
    top = docs[0]
    assert "jasmine" in top.page_content.lower()
    assert 0 < top.metadata["score"] <= 1
    assert top.id == top.metadata["memory_id"]
    assert top.metadata["subject_id"] == "ada"
    assert top.metadata["source_episode_ids"]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    assert retriever.invoke("Kraków")[0].page_content.count("Kraków") == 1
    assert CairnRetriever(subject_id="nobody", client=client).invoke("jasmine") == []


def test_retriever_async(
    connect_sync: Callable[[], Cairn], connect: Callable[[], AsyncCairn]
) -> None:
    client = connect_sync()
    remember_tea(client)

    async def native() -> list[Document]:
        async_client = connect()
        try:
            retriever = CairnRetriever(subject_id="ada", async_client=async_client)
            return await retriever.ainvoke("jasmine")
        finally:
            await async_client.aclose()

    threaded = asyncio.run(CairnRetriever(subject_id="ada", client=client).ainvoke("jasmine"))
    docs = asyncio.run(native())
    assert docs and "jasmine" in docs[0].page_content.lower()
    assert [d.id for d in docs] == [d.id for d in threaded]
    only_async = CairnRetriever(subject_id="ada", async_client=AsyncCairn("http://127.0.0.1:9"))
    with pytest.raises(ValueError, match="ainvoke"):
        only_async.invoke("jasmine")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["embedded"], indirect=True)
def test_retriever_options(connect_sync: Callable[[], Cairn]) -> None:
    client = connect_sync()
    remember_tea(client)
    retriever = CairnRetriever(subject_id="ada", client=client, k=1)
    assert isinstance(retriever, BaseRetriever)
    assert len(retriever.invoke("tea sister")) == 1
    kinds = {
        d.metadata["kind"] for d in CairnRetriever(subject_id="ada", client=client).invoke("tea")
    }
    assert kinds
    kind = sorted(kinds)[0]
    filtered = CairnRetriever(subject_id="ada", client=client, kinds=[kind]).invoke("tea")
    assert filtered and {d.metadata["kind"] for d in filtered} == {kind}
    with pytest.raises(ValueError):
        CairnRetriever(subject_id="ada", client=client, k=0)


def test_turn_message_takes_human_and_ai_text_only() -> None:
    assert turn_message(MESSAGES[1]) is not None
    assert [turn_message(m) for m in (MESSAGES[0], MESSAGES[2], MESSAGES[3])] == [None] * 3
    ai = turn_message(MESSAGES[4])
    assert ai is not None and ai.role == "assistant" and ai.content == "你好 — مرحبا"


def test_embedded_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAIRN_EMBEDDER", "none")
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAIRN_API_KEY", raising=False)
    history = CairnChatMessageHistory("kept", user_id="ada")
    history.add_user_message("I love jasmine tea.")
    history.client.memories.compile("ada")
    history.close()
    again = CairnChatMessageHistory("kept")
    assert [m.text for m in again.messages] == ["I love jasmine tea."]
    again.close()
    retriever = CairnRetriever(subject_id="ada")
    try:
        assert "jasmine" in retriever.invoke("jasmine tea")[0].page_content.lower()
    finally:
        retriever.close()


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "cairn.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install 'cairn\[langchain\]'"):
        importlib.import_module("cairn.integrations.langchain")


def test_a_session_id_that_is_no_subject_id_still_keeps_history(
    connect_sync: Callable[[], Cairn],
) -> None:
    """Without a ``user_id`` the session's conversation key is the user its turns go to;
    a key that is no subject id (``org/thread-1``) is hashed into one, since new data is
    written only under users the subject routes and erasure reach."""
    client = connect_sync()
    history = CairnChatMessageHistory("org/thread-1", client=client)
    history.add_messages([HumanMessage("I keep bees."), AIMessage("Bees it is.")])
    assert [m.text for m in history.messages] == ["I keep bees.", "Bees it is."]
    users = {s.subject_id for s in client.subjects.list().subjects}
    assert "org/thread-1" not in users
    assert any(u.startswith("sha256:") for u in users), users
