"""The seed-001 form in a ladder: the agent with ``memory.context`` and ``memory.turn`` recalls
what an earlier call committed (through the real HTTP endpoint, on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from cairn.engine.context.assembly import build_assembly
from cairn.engine.context.impls import register_assembly_impl, unregister_assembly_impl
from tests.ladders import seed001
from tests.ladders.conftest import Cairn, running_cairn, write_ladder

# The seed's three blocks, verbatim: the resource, the agent's prepare hook, and (under the
# same agent) its commit hook.
SEED_AGENT = seed001.RESOURCES + seed001.PREPARE + seed001.COMMIT.split("  assistant:\n", 1)[1]

PROVIDERS = """
providers:
  offline:
    kind: scripted
    rules:
      - contains: "What is my favourite colour?"
        regex: "favourite colour is teal"
        reply: "Your favourite colour is teal."
      - contains: "What is my favourite colour?"
        reply: "I do not know your favourite colour."
    default: "Noted."
models:
  "*": offline
"""


@pytest.fixture
def mymemory() -> Iterator[None]:
    """The seed's app-registered implementation name, bound to Cairn's own assembly."""
    register_assembly_impl("mymemory", build_assembly, replace=True)
    yield
    unregister_assembly_impl("mymemory")


@pytest.fixture(params=["sqlite", "postgres"])
def agent_cairn(request: pytest.FixtureRequest, tmp_path: Path, mymemory: None) -> Iterator[Cairn]:
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    # The seed's ./memory.yaml: the assembly's settings, beside the ladder (and not a ladder).
    (ladders / "memory.yaml").write_text("candidates: 50\n")
    write_ladder(ladders, "assistant", SEED_AGENT + PROVIDERS)
    overrides = {}
    if request.param == "postgres":
        from tests.conftest import database_url

        overrides["database_url"] = database_url("postgres", tmp_path, request)
    with running_cairn(tmp_path, ladders, **overrides) as c:
        yield c


def chat(c: Cairn, text: str, model: str = "assistant", **headers: str) -> httpx.Response:
    r = httpx.post(
        f"{c.base(model)}/chat/completions",
        headers={"Authorization": f"Bearer {c.key}", **headers},
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": text}]},
    )
    assert r.status_code == 200, r.text
    return r


def trace(c: Cairn, r: httpx.Response) -> dict:
    run_id = r.headers["x-cairn-run-id"]
    return httpx.get(f"{c.url}/v1/runs/{run_id}", headers={"X-API-Key": c.key}).json()["trace"]


def test_agent_recalls_a_fact_committed_by_an_earlier_call(agent_cairn: Cairn) -> None:
    c = agent_cairn
    first = chat(c, "My favourite colour is teal.", **{"Idempotency-Key": "turn-1"})
    assert first.json()["choices"][0]["message"]["content"] == "Noted."
    t1 = trace(c, first)
    assert t1["commit"][0]["type"] == "memory.turn" and t1["commit"][0]["created"] is True
    assert t1["commit"][0]["idempotency_key"] == "turn-1"

    # A retry of call 1 commits nothing new.
    again = chat(c, "My favourite colour is teal.", **{"Idempotency-Key": "turn-1"})
    assert again.json() == first.json()

    second = chat(c, "What is my favourite colour?")
    assert second.json()["choices"][0]["message"]["content"] == "Your favourite colour is teal."
    t2 = trace(c, second)
    prep = t2["prepare"][0]
    assert prep["type"] == "memory.context" and prep["output"] == "memory_items"
    recalled = [i for i in prep["items"] if "teal" in i["content"]]
    assert len(recalled) == 1  # the turn of call 1, once (its retry wrote nothing)
    assert recalled[0]["source_class"] == "recent"
    prompt = t2["steps"][0]["messages"][1]["content"]
    assert prompt.startswith("## Memory\n- ") and "favourite colour is teal" in prompt
    assert "## Conversation\nuser: What is my favourite colour?" in prompt
    assert t2["commit"][0]["created"] is True


def test_agent_is_also_served_by_its_qualified_name(agent_cairn: Cairn) -> None:
    models = OpenAI(base_url=f"{agent_cairn.url}/v1/local", api_key=agent_cairn.key).models.list()
    ids = {m.id for m in models}
    assert {"assistant", "assistant:assistant"} <= ids
    assert "memory" not in ids  # the settings file beside the ladder is not a ladder
    r = chat(agent_cairn, "What is my favourite colour?", model="assistant:assistant")
    assert r.json()["choices"][0]["message"]["content"] == "I do not know your favourite colour."


def test_agents_do_not_recall_across_tenants(agent_cairn: Cairn) -> None:
    c = agent_cairn
    chat(c, "My favourite colour is teal.")
    r = httpx.post(
        f"{c.base('assistant')}/chat/completions",
        headers={"Authorization": f"Bearer {c.other_key}"},
        json={"messages": [{"role": "user", "content": "What is my favourite colour?"}]},
    )
    assert r.json()["choices"][0]["message"]["content"] == "I do not know your favourite colour."


def test_settings_the_impl_rejects_are_the_files_error(tmp_path: Path, mymemory: None) -> None:
    from cairn.services import Services
    from tests.conftest import make_settings

    ladders = tmp_path / "ladders"
    ladders.mkdir()
    (ladders / "memory.yaml").write_text("no_such_setting: 1\n")
    write_ladder(ladders, "assistant", SEED_AGENT + PROVIDERS)
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=ladders))
    try:
        (problem,) = services.ladders.errors()
        assert problem["file"] == "assistant.yaml" and "no_such_setting" in problem["error"]
        assert services.ladders.names() == []
    finally:
        services.close()
