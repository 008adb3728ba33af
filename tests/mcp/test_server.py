"""``cairn mcp`` as a real subprocess, driven by the official ``mcp`` client library."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from cairn.cli.main import app
from cairn.mcp import TOOL_NAMES
from mcp import ClientSession, StdioServerParameters, stdio_client
from tests.client.conftest import NOTES_LADDER, free_port


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    ladders = tmp_path / "ladders"
    ladders.mkdir(exist_ok=True)
    (ladders / "notes.yaml").write_text(NOTES_LADDER)
    env.update({"CAIRN_DATA_DIR": str(tmp_path / "data"), "CAIRN_LADDERS_DIR": str(ladders)})
    env.update(extra)
    return env


def data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def _correct_and_forget(session: ClientSession) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    for name in ("correct_memory", "forget_memory", "delete_subject"):
        assert tools[name].annotations.destructive_hint is True, name
    found = data(
        await session.call_tool("search_memories", {"subject_id": "user-1", "query": "jazz"})
    )
    old = next(m for m in found["memories"] if "jazz" in m["content"])
    new = data(
        await session.call_tool(
            "correct_memory",
            {"memory_id": old["id"], "content": "User prefers loud punk", "reason": "changed"},
        )
    )
    assert new["replaces"] == old["id"] and new["correction"]["note"] == "changed"
    again = await session.call_tool("correct_memory", {"memory_id": old["id"], "content": "x"})
    assert again.is_error and "memory_superseded (409)" in again.content[0].text
    punk = data(
        await session.call_tool("search_memories", {"subject_id": "user-1", "query": "punk"})
    )
    assert punk["memories"][0]["id"] == new["id"]
    # Without a query: the subject's memories of the kinds asked for, newest first, unscored.
    every = data(await session.call_tool("search_memories", {"subject_id": "user-1"}))
    assert every["memories"] and all("score" not in m for m in every["memories"])
    kind = every["memories"][0]["kind"]
    args = {"subject_id": "user-1", "kinds": [kind], "limit": 50}
    listed = data(await session.call_tool("search_memories", args))
    assert listed["memories"] and all(m["kind"] == kind for m in listed["memories"])
    gone = data(await session.call_tool("forget_memory", {"memory_id": new["id"]}))
    assert gone == {"memory_id": new["id"], "forgotten": True}
    missing = await session.call_tool("forget_memory", {"memory_id": new["id"]})
    assert missing.is_error and "memory_not_found (404)" in missing.content[0].text
    record = {"subject_id": "temp-1", "text": "to be deleted"}
    data(await session.call_tool("record_episode", record))
    deleted = data(await session.call_tool("delete_subject", {"subject_id": "temp-1"}))
    assert deleted["episodes_deleted"] == 1


async def drive_stdio(env: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cairn.cli.main", "mcp"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == set(TOOL_NAMES)
        for tool in tools.values():
            assert tool.description and tool.input_schema["type"] == "object"
        assert "subject_id" in tools["record_episode"].input_schema["required"]
        assert tools["get_context"].annotations.read_only_hint is True
        assert tools["write_slate"].annotations.read_only_hint is False

        episode = data(
            await session.call_tool(
                "record_episode",
                {
                    "subject_id": "user-1",
                    "text": "I prefer green tea in the morning",
                    "type": "message",
                    "session_id": "s1",
                },
            )
        )
        context = data(
            await session.call_tool(
                "get_context",
                {"subject_id": "user-1", "task": "what does the user drink?", "session_id": "s1"},
            )
        )
        assert "green tea" in context["context"]
        assert [e["id"] for e in context["episodes"]] == [episode["id"]]

        applied = data(
            await session.call_tool(
                "apply_template",
                {
                    "template_id": "user-preference",
                    "subject_id": "user-1",
                    "values": {"subject": "music", "preference": "quiet jazz"},
                },
            )
        )
        assert applied["type"] == "profile.preference"
        compiled = data(await session.call_tool("compile_memories", {"subject_id": "user-1"}))
        assert compiled["memories_created"] >= 1
        found = data(
            await session.call_tool("search_memories", {"subject_id": "user-1", "query": "jazz"})
        )
        assert any("jazz" in m["content"] for m in found["memories"])
        subjects = data(await session.call_tool("list_subjects", {}))
        assert subjects["subjects"][0]["subject_id"] == "user-1"
        assert data(await session.call_tool("list_templates", {}))["templates"]
        assert data(await session.call_tool("get_timeline", {"subject_id": "user-1"}))["episodes"]

        assert data(await session.call_tool("list_slates", {}))["slates"][0]["ladder"] == "notes"
        wrote = data(
            await session.call_tool(
                "write_slate",
                {
                    "ladder": "notes",
                    "slate": "Memory",
                    "folder": "facts",
                    "file": "core.md",
                    "content": "tea drinker",
                },
            )
        )
        assert wrote["written"] is True
        read = data(
            await session.call_tool(
                "read_slate",
                {"ladder": "notes", "slate": "Memory", "folder": "facts", "file": "core.md"},
            )
        )
        assert read["content"] == "tea drinker"
        index = data(
            await session.call_tool(
                "read_slate", {"ladder": "notes", "slate": "Memory", "folder": "facts"}
            )
        )
        assert index["index"][0]["name"] == "core.md"
        # mergeByKey takes the JSON text of an object (content is text: a tool argument that
        # looks like JSON is never parsed into something else).
        merged = data(
            await session.call_tool(
                "write_slate",
                {
                    "ladder": "notes",
                    "slate": "Memory",
                    "folder": "facts",
                    "file": "people.json",
                    "content": '{"name": "Ana"}',
                    "on": "mergeByKey",
                    "key": "name",
                },
            )
        )
        assert merged["written"] is True, merged
        people = data(
            await session.call_tool(
                "read_slate",
                {"ladder": "notes", "slate": "Memory", "folder": "facts", "file": "people.json"},
            )
        )
        assert json.loads(people["content"]) == [{"name": "Ana"}]
        # A file without its folder is refused (it read the whole tree).
        orphan = await session.call_tool(
            "read_slate", {"ladder": "notes", "slate": "Memory", "file": "core.md"}
        )
        assert orphan.is_error and "needs its folder" in orphan.content[0].text
        # A user named for a slate every user shares: refused, nothing written.
        shared = await session.call_tool(
            "write_slate",
            {
                "ladder": "notes",
                "slate": "Memory",
                "folder": "facts",
                "file": "core.md",
                "content": "private",
                "user_id": "alice",
            },
        )
        assert shared.is_error and "slate_not_per_user (422)" in shared.content[0].text

        await _correct_and_forget(session)

        missing = await session.call_tool(
            "apply_template", {"template_id": "no-such", "subject_id": "user-1", "values": {}}
        )
        assert missing.is_error and "template_not_found (404)" in missing.content[0].text
        invalid = await session.call_tool("record_episode", {"subject_id": "bad/id", "text": "x"})
        assert invalid.is_error
        message = invalid.content[0].text
        assert "subject_id: subject id must not contain '/'" in message, message
        assert "pydantic.dev" not in message and "Value error" not in message
        assert "input_value" not in message
        # A misspelt argument is refused, not dropped (the search would run without its limit).
        typo = await session.call_tool(
            "search_memories", {"subject_id": "user-1", "query": "jazz", "limt": 1}
        )
        assert typo.is_error
        assert "search_memories: invalid arguments: unknown limt" in typo.content[0].text
        assert "arguments are subject_id, query" in typo.content[0].text
        blank = await session.call_tool("record_episode", {"subject_id": "user-1", "text": "  "})
        said = blank.content[0].text
        assert blank.is_error and "record_episode: invalid arguments: text: blank" in said
        nothing = await session.call_tool("record_episode", {"subject_id": "user-1"})
        said = nothing.content[0].text
        assert nothing.is_error and "record_episode: invalid arguments: give text" in said, said
        # Answers are structured content; the text copy is compact JSON, not pretty-printed.
        listed = await session.call_tool("list_subjects", {})
        assert listed.structured_content == json.loads(listed.content[0].text)
        assert listed.structured_content["subjects"][0]["subject_id"] == "user-1"
        assert "\n" not in listed.content[0].text


@pytest.mark.slow
def test_stdio_server_lists_tools_records_and_recalls(tmp_path: Path) -> None:
    asyncio.run(drive_stdio(env_for(tmp_path)))


async def drive_http(url: str) -> list[str]:
    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            data(
                await session.call_tool(
                    "record_episode", {"subject_id": "u", "text": "hi", "session_id": "s"}
                )
            )
            ctx = data(
                await session.call_tool(
                    "get_context", {"subject_id": "u", "task": "hi", "session_id": "s"}
                )
            )
            assert "hi" in ctx["context"]
            return names


@pytest.mark.slow
def test_http_transport(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "mcp", "--transport", "http", "--port", str(port)],
        env=env_for(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the MCP server did not start"
                time.sleep(0.1)
        names = asyncio.run(drive_http(f"http://127.0.0.1:{port}/mcp"))
        assert set(names) == set(TOOL_NAMES)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_refuses_a_public_http_bind_and_an_unknown_transport(tmp_path: Path) -> None:
    runner = CliRunner()
    public = runner.invoke(
        app, ["mcp", "--transport", "http", "--host", "0.0.0.0"], env=env_for(tmp_path)
    )
    assert public.exit_code == 2 and "loopback" in public.stderr
    bogus = runner.invoke(app, ["mcp", "--transport", "smoke"], env=env_for(tmp_path))
    assert bogus.exit_code == 2


def test_an_unreachable_server_fails_at_start(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["mcp", "--url", f"http://127.0.0.1:{free_port()}"], env=env_for(tmp_path)
    )
    assert result.exit_code == 1 and "error" in result.stderr


def test_a_database_that_cannot_be_opened_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    url = "postgresql://postgres@127.0.0.1:5432/cairn_no_such_database_xyz"
    result = CliRunner().invoke(app, ["mcp", "--database-url", url], env=env_for(tmp_path))
    assert result.exit_code == 1
    assert "cairn_no_such_database_xyz" in result.stderr and "Traceback" not in result.stderr


def test_help_names_every_tool() -> None:
    shown = CliRunner().invoke(app, ["mcp", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    text = " ".join(shown.output.replace("│", " ").split())
    assert [name for name in TOOL_NAMES if name not in text] == []
