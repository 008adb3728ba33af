"""``CairnSession`` and ``cairn_recall`` with the real OpenAI Agents SDK and an offline model,
embedded and against a live server, on both backends."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.memory import Session, SessionSettings
from openai.types.responses import ResponseFunctionToolCall

from cairn.client import AsyncCairn, Cairn, InvalidRequestError
from cairn.integrations.openai_agents import (
    CairnSession,
    cairn_recall,
    items_subject,
    message_of,
)
from tests.conftest import make_settings
from tests.integrations.agents_model import ScriptedModel

OFFLINE = RunConfig(tracing_disabled=True)

# One of every input item shape the SDK's TResponseInputItem union declares, as JSON.
ITEM_SHAPES: list[dict[str, Any]] = [
    {"role": "user", "content": "plain text, 你好, Привет, مرحبا, café 🍵"},
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "developer note"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look at this"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            {"type": "input_file", "file_id": "file_1", "filename": "notes.txt"},
        ],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Hello", "annotations": []},
            {"type": "refusal", "refusal": "no"},
        ],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "tea"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "green tea"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "encrypted_content": None,
    },
    {
        "type": "file_search_call",
        "id": "fs_1",
        "queries": ["tea"],
        "status": "completed",
        "results": None,
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "tea"},
    },
    {
        "type": "computer_call",
        "id": "cc_1",
        "call_id": "call_2",
        "action": {"type": "click", "button": "left", "x": 1, "y": 2},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "call_2",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"},
    },
    {"type": "item_reference", "id": "msg_0"},
    {
        "type": "image_generation_call",
        "id": "ig_1",
        "result": "aGVsbG8=",
        "status": "completed",
    },
    {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "call_3",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {"type": "local_shell_call_output", "id": "call_3", "output": "a.txt\n"},
    {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
        "output": "done",
        "error": None,
    },
    {"type": "mcp_list_tools", "id": "ml_1", "server_label": "s", "tools": []},
    {"type": "custom_tool_call", "call_id": "call_4", "name": "grammar", "input": "x"},
    {"type": "custom_tool_call_output", "call_id": "call_4", "output": "y"},
    {"role": "user", "content": "nested json", "extra": {"a": [1, 2.5, None, True, "ü"]}},
]


def run(coro_factory: Callable[[], Any]) -> Any:
    return asyncio.run(coro_factory())


def session_of(connect: Callable[[], AsyncCairn], session_id: str, **kw: Any) -> CairnSession:
    return CairnSession(session_id, client=connect(), **kw)


async def closing(session: CairnSession) -> None:
    await session.client.aclose()


def test_runner_sees_turn_one_in_turn_two(connect: Callable[[], AsyncCairn]) -> None:
    model = ScriptedModel("Noted: you like jasmine tea.", "You like jasmine tea.")
    agent = Agent(name="helper", instructions="Answer briefly.", model=model)

    async def main() -> tuple[list[Any], str, str]:
        session = session_of(connect, "chat-1", user_id="ada")
        first = await Runner.run(agent, "I like jasmine tea.", session=session, run_config=OFFLINE)
        second = await Runner.run(agent, "What tea do I like?", session=session, run_config=OFFLINE)
        items = await session.get_items()
        await session.compile_turns()
        recalled = await session.recall("jasmine tea")
        await closing(session)
        return items, f"{first.final_output}|{second.final_output}", recalled

    items, outputs, recalled = run(main)
    assert outputs == "Noted: you like jasmine tea.|You like jasmine tea."
    turn_two = json.dumps(model.inputs[1], ensure_ascii=False)
    assert "I like jasmine tea." in turn_two
    assert "Noted: you like jasmine tea." in turn_two
    assert "What tea do I like?" in turn_two
    assert "What tea do I like?" not in json.dumps(model.inputs[0])
    texts = [m["content"] for m in map(message_of, items) if m]
    assert texts == [
        "I like jasmine tea.",
        "Noted: you like jasmine tea.",
        "What tea do I like?",
        "You like jasmine tea.",
    ]
    # The messages were also committed as turns of the user's scope: long-term memory.
    assert "jasmine" in recalled


def test_every_item_shape_round_trips_in_order(connect: Callable[[], AsyncCairn]) -> None:
    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        session = session_of(connect, "shapes")
        await session.add_items(ITEM_SHAPES[:5])
        await session.add_items(ITEM_SHAPES[5:])
        await session.add_items([])
        everything = await session.get_items()
        latest = await session.get_items(limit=3)
        other = await session_of(connect, "other-session").get_items()
        await closing(session)
        return everything, latest, other

    everything, latest, other = run(main)
    assert everything == ITEM_SHAPES
    assert latest == ITEM_SHAPES[-3:]
    assert other == []


def test_limit_pop_and_clear(connect: Callable[[], AsyncCairn]) -> None:
    items = [{"role": "user", "content": f"message {i}"} for i in range(5)]

    async def main() -> dict[str, Any]:
        session = session_of(connect, "pops", session_settings=SessionSettings(limit=2))
        out: dict[str, Any] = {"empty_pop": await session.pop_item()}
        for item in items:
            await session.add_items([item])
        out["default_limit"] = await session.get_items()
        out["explicit"] = await session.get_items(limit=4)
        out["over"] = await session.get_items(limit=50)
        out["zero"] = await session.get_items(limit=0)
        out["popped"] = [await session.pop_item(), await session.pop_item()]
        out["after_pop"] = await session.get_items(limit=50)
        await session.clear_session()
        out["after_clear"] = await session.get_items(limit=50)
        out["pop_cleared"] = await session.pop_item()
        await session.add_items([items[0]])
        out["reused"] = await session.get_items(limit=50)
        await closing(session)
        return out

    out = run(main)
    assert out["empty_pop"] is None
    assert out["default_limit"] == items[-2:]
    assert out["explicit"] == items[-4:]
    assert out["over"] == items
    assert out["zero"] == []
    assert out["popped"] == [items[4], items[3]]
    assert out["after_pop"] == items[:3]
    assert out["after_clear"] == []
    assert out["pop_cleared"] is None
    assert out["reused"] == [items[0]]


def test_clear_session_leaves_nothing_of_the_session(connect: Callable[[], AsyncCairn]) -> None:
    """``clear_session`` ("clear all items for this session") removes the session's whole
    subject: its items, and anything compiled from them there, so no reader of the session,
    this object or a new one for the same id, sees any of it. What the turns taught the
    user's scope stays long-term memory (docs/integrations.md says why)."""
    items = [
        {"role": "user", "content": "My favourite tea is jasmine, 茉莉花茶."},
        {"role": "assistant", "content": "I will remember that."},
        {"type": "function_call_output", "call_id": "c1", "output": "tool said 秘密"},
    ]

    async def main() -> dict[str, Any]:
        session = session_of(connect, "to-clear", user_id="ada")
        await session.add_items(items)
        await session.compile_turns()
        await session.client.memories.compile(session.subject_id)  # the items' subject too
        before = await session.client.timeline(session.subject_id)
        await session.clear_session()
        after = await session.client.timeline(session.subject_id)
        again = session_of(connect, "to-clear", user_id="ada")
        out = {
            "before": len(before.episodes),
            "episodes": after.episodes,
            "memories": after.memories,
            "items": await session.get_items(),
            "latest": await session.get_items(limit=1),
            "pop": await session.pop_item(),
            "new_object": await again.get_items(),
            "recall": await session.recall("jasmine tea"),
        }
        await closing(again)
        await closing(session)
        return out

    out = run(main)
    assert out["before"] == len(items)
    assert out["episodes"] == [] and out["memories"] == []
    assert out["items"] == [] and out["latest"] == [] and out["pop"] is None
    assert out["new_object"] == []
    assert "jasmine" in out["recall"].lower()  # long-term memory of "ada" stays
    assert "秘密" not in out["recall"]  # tool output was never memory


def test_recall_tool_is_called_by_the_agent(connect: Callable[[], AsyncCairn]) -> None:
    call = ResponseFunctionToolCall(
        type="function_call",
        id="fc_1",
        call_id="call_1",
        name="cairn_recall",
        arguments='{"question": "Which tea does the user like?"}',
        status="completed",
    )

    class RecallingModel(ScriptedModel):
        async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any):  # type: ignore[no-untyped-def]
            response = await super().get_response(system_instructions, input, *a, **k)
            if len(self.inputs) == 1:
                response.output = [call]
            return response

    model = RecallingModel("-", "Jasmine.")

    async def main() -> str:
        earlier = session_of(connect, "earlier", user_id="ada")
        await earlier.add_items(
            [
                {"role": "user", "content": "My favourite tea is jasmine."},
                {"role": "assistant", "content": "I will remember that."},
            ]
        )
        await earlier.compile_turns()
        await closing(earlier)
        session = session_of(connect, "later", user_id="ada")
        tool = cairn_recall(session)
        agent = Agent(name="helper", model=model, tools=[tool])
        result = await Runner.run(agent, "Which tea?", session=session, run_config=OFFLINE)
        await closing(session)
        return str(result.final_output)

    assert run(main) == "Jasmine."
    outputs = [i for i in model.inputs[1] if i.get("type") == "function_call_output"]
    assert len(outputs) == 1
    assert "jasmine" in str(outputs[0]["output"]).lower()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["embedded"], indirect=True)
def test_recall_tool_declares_its_schema(connect: Callable[[], AsyncCairn]) -> None:
    async def main() -> Any:
        session = session_of(connect, "schema")
        tool = cairn_recall(session)
        empty = await session.recall("anything at all")
        await closing(session)
        return tool, empty

    tool, empty = run(main)
    assert tool.name == "cairn_recall"
    assert tool.params_json_schema["required"] == ["question"]
    assert "question" in tool.description.lower() or "recall" in tool.description.lower()
    assert empty == ""


def test_session_ids_in_any_script_stay_apart() -> None:
    ids = ["chat-1", "会话 1", "会話 1", "сессия", "جلسة", "x" * 300, "a/b", "a b"]
    subjects = [items_subject(i) for i in ids]
    assert len(set(subjects)) == len(ids)
    assert subjects[0] == "agents-session:chat-1"
    assert all(len(s) <= 256 for s in subjects)


def test_message_of_reads_only_conversation_text() -> None:
    assert message_of(ITEM_SHAPES[0]) == {"role": "user", "content": ITEM_SHAPES[0]["content"]}
    assert message_of(ITEM_SHAPES[3]) == {"role": "user", "content": "look at this"}
    assert message_of(ITEM_SHAPES[4]) == {"role": "assistant", "content": "Hello"}
    assert [message_of(i) for i in ITEM_SHAPES[5:-1]] == [None] * len(ITEM_SHAPES[5:-1])
    assert message_of({"role": "system", "content": "x"}) is None
    assert message_of({"role": "user", "content": "   "}) is None


def test_embedded_by_default_persists_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAIRN_EMBEDDER", "none")
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAIRN_API_KEY", raising=False)

    async def write() -> None:
        async with CairnSession("kept") as session:
            assert isinstance(session, Session)
            await session.add_items([{"role": "user", "content": "remember me"}])

    async def read() -> list[Any]:
        async with CairnSession("kept") as session:
            return await session.get_items()

    asyncio.run(write())
    assert asyncio.run(read()) == [{"role": "user", "content": "remember me"}]
    assert any((tmp_path / "data").iterdir())


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "cairn.integrations.openai_agents")
    with pytest.raises(ImportError, match=r"pip install 'cairn\[openai-agents\]'"):
        importlib.import_module("cairn.integrations.openai_agents")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["embedded"], indirect=True)
def test_history_longer_than_a_page(
    connect: Callable[[], AsyncCairn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cairn.integrations._log.PAGE", 2)
    items = [{"role": "user", "content": f"m{i}"} for i in range(7)]

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        session = session_of(connect, "long", record_turns=False)
        await session.add_items(items)
        result = (
            await session.get_items(),
            await session.get_items(limit=5),
            await session.get_items(limit=-1),
        )
        await closing(session)
        return result

    everything, latest, negative = run(main)
    assert everything == items
    assert latest == items[-5:]
    assert negative == items


def test_any_session_id_keeps_history_and_turns(connect: Callable[[], AsyncCairn]) -> None:
    ids = ["x" * 300, " padded ", "nul\x00id", "会话 — ü"]
    items = [{"role": "user", "content": f"I collect stamps, album{i}."} for i in range(len(ids))]

    async def main() -> tuple[list[Any], str]:
        found = []
        for session_id, item in zip(ids, items, strict=True):
            session = session_of(connect, session_id, user_id="bo")
            await session.add_items([item])
            found.append(await session.get_items())
            await closing(session)
        compiler = session_of(connect, "any", user_id="bo")
        await compiler.compile_turns()
        await closing(compiler)
        client = connect()
        scope = {"runtime_id": "default", "user_id": "bo"}
        recalled = await client.scopes.context(scope, "stamps", render=True)
        await client.aclose()
        return found, recalled.rendered or ""

    histories, recalled = run(main)
    assert histories == [[item] for item in items]
    for i in range(len(ids)):  # each session committed its turn to the user's scope
        assert f"album{i}" in recalled


def test_bad_scope_is_refused_before_anything_is_written() -> None:
    with pytest.raises(ValueError, match="runtime_id"):
        CairnSession("s", client=AsyncCairn("http://127.0.0.1:9"), scope={"runtime_id": " "})
    with pytest.raises(ValueError, match="NUL"):
        CairnSession("s", client=AsyncCairn("http://127.0.0.1:9"), user_id="a\x00b")
    with pytest.raises(ValueError, match="session_id"):
        CairnSession("", client=AsyncCairn("http://127.0.0.1:9"))
    agent_scope = {"runtime_id": "default", "user_id": "u", "agent_id": "a"}
    session = CairnSession("s", client=AsyncCairn("http://127.0.0.1:9"), scope=agent_scope)
    with pytest.raises(ValueError, match="subject scope"):
        asyncio.run(session.compile_turns())


@pytest.mark.parametrize("mode", ["embedded"], indirect=True)
def test_nul_text_is_refused_and_nothing_is_written(connect: Callable[[], AsyncCairn]) -> None:
    async def main() -> list[Any]:
        session = session_of(connect, "nul")
        try:
            with pytest.raises(InvalidRequestError, match="NUL"):
                await session.add_items(
                    [{"role": "user", "content": "fine"}, {"role": "user", "content": "a\x00b"}]
                )
            return await session.get_items()
        finally:
            await closing(session)

    assert run(main) == []


def test_embedded_session_serves_run_sync_across_event_loops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel("one", "two")
    agent = Agent(name="helper", model=model)
    with CairnSession("sync", settings=make_settings(tmp_path)) as session:
        first = Runner.run_sync(agent, "hello", session=session, run_config=OFFLINE)
        second = Runner.run_sync(agent, "again", session=session, run_config=OFFLINE)
    assert (first.final_output, second.final_output) == ("one", "two")
    assert [m["content"] for m in map(message_of, model.inputs[1]) if m] == [
        "hello",
        "one",
        "again",
    ]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_sync_client_of_a_server(server_url: str) -> None:
    items = ITEM_SHAPES[:4]

    async def main() -> tuple[list[Any], Any]:
        with Cairn(server_url, api_key="") as client:
            session = CairnSession("sync-client", client=client)
            await session.add_items(items)
            kept = await session.get_items()
            popped = await session.pop_item()
            session.close()  # a passed client stays open
            return kept, (popped, client.health().status)

    kept, (popped, status) = run(main)
    assert kept == items
    assert popped == items[-1]
    assert status == "ok"
