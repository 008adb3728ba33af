"""The MCP tools act as the one key they were built with: never another tenant's data."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cairn.cli.main import app
from cairn.client import AsyncCairn
from cairn.mcp import build_server
from cairn.services import Services
from mcp import Client
from tests.conftest import make_settings
from tests.mcp.test_server import env_for


def _json(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_each_server_sees_only_its_tenant(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path))
    key_a, _ = services.store.keys.create("tenant-a")
    key_b, _ = services.store.keys.create("tenant-b")

    async def main() -> None:
        a = AsyncCairn.local(services=services, api_key=key_a)
        b = AsyncCairn.local(services=services, api_key=key_b)
        async with a, b, Client(build_server(a)) as mcp_a, Client(build_server(b)) as mcp_b:
            _json(
                await mcp_a.call_tool(
                    "record_episode",
                    {"subject_id": "shared-name", "text": "secret of A", "session_id": "s"},
                )
            )
            assert _json(await mcp_b.call_tool("list_subjects", {}))["total"] == 0
            timeline = _json(await mcp_b.call_tool("get_timeline", {"subject_id": "shared-name"}))
            assert timeline["episodes"] == []
            ctx = _json(
                await mcp_b.call_tool(
                    "get_context",
                    {"subject_id": "shared-name", "task": "secret", "session_id": "s"},
                )
            )
            assert "secret of A" not in ctx["context"]
            ctx_a = _json(
                await mcp_a.call_tool(
                    "get_context",
                    {"subject_id": "shared-name", "task": "secret", "session_id": "s"},
                )
            )
            assert "secret of A" in ctx_a["context"]

    try:
        asyncio.run(main())
    finally:
        services.close()


def test_a_missing_key_fails_at_start(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    services = Services.from_settings(make_settings(tmp_path, data_dir=Path(env["CAIRN_DATA_DIR"])))
    services.store.keys.create("acme")
    services.close()
    result = CliRunner().invoke(app, ["mcp"], env=env)
    assert result.exit_code == 1 and "missing_api_key" in result.stderr
