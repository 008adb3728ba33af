"""The memory.context and memory.turn hooks, and the seed-001 resources/agents YAML."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from cairn.engine.context import CairnAssembly, build_assembly
from cairn.engine.context.impls import register_assembly_impl, unregister_assembly_impl
from cairn.errors import ConfigError, InvalidInput
from cairn.ladders.hooks import (
    MAX_SETTINGS_FILE_BYTES,
    ContextHookSettings,
    MemoryContextHook,
    MemoryTurnHook,
    RequestContext,
)
from cairn.ladders.memory_stack import (
    build_agent_hooks,
    build_assemblies,
    load_memory_config,
    parse_memory_config,
    read_settings_file,
)
from cairn.services import Services
from cairn.store import Store
from tests.ladders import seed001

SCOPE = {"runtime_id": "memories", "user_id": "user-1", "agent_id": "assistant"}
REQ = RequestContext(context_id="conv-1", message="what do I grow?", run_id="run-1")


def seed_config() -> dict[str, Any]:
    """The seed's three YAML blocks, each parsed verbatim, joined into one file's worth."""
    resources = yaml.safe_load(seed001.RESOURCES)
    prepare = yaml.safe_load(seed001.PREPARE)
    commit = yaml.safe_load(seed001.COMMIT)
    agent = {**prepare["agents"]["assistant"], **commit["agents"]["assistant"]}
    return {**resources, "agents": {"assistant": agent}}


def test_each_seed_block_validates_verbatim() -> None:
    resources = yaml.safe_load(seed001.RESOURCES)
    for block in (seed001.PREPARE, seed001.COMMIT):
        parse_memory_config({**resources, **yaml.safe_load(block)}, "seed")
    cfg = parse_memory_config(seed_config(), "seed")
    res = cfg.resources["memories"]
    assert (res.kind, res.impl, res.settings.file) == (
        "memory.Assembly",
        "mymemory",
        "./memory.yaml",
    )
    assert res.deps == {"workspace": "ws/project", "inference": "infer"}
    hook = cfg.agents["assistant"].prepare[0]
    s = hook.settings
    assert (hook.type, hook.deps.memory, s.query.literal) == (
        "memory.context",
        "memories",
        "relevant prior conversation",
    )
    assert s.budget.max_tokens == 2000 and s.budget.max_items == 50 and s.budget.max_chars == 8000
    assert (s.min_score, s.output, s.dataset_ids) == (0.5, "memory_items", ["docs"])
    assert s.render is not None and s.render.output == "memory_text"
    assert s.render.gotmpl is not None and s.render.gotmpl.template == "\n"
    turn = cfg.agents["assistant"].commit[0]
    assert (turn.type, turn.settings.channel, turn.settings.conversation_id) == (
        "memory.turn",
        "__main_channel",
        "conv-1",
    )


def test_seed_config_builds_and_runs_with_an_app_registered_impl(
    tmp_path: Path, services: Services
) -> None:
    (tmp_path / "memory.yaml").write_text("chunk_tokens: 120\nchunk_overlap: 20\n")
    (tmp_path / "agents.yaml").write_text(yaml.safe_dump(seed_config()))
    seen: dict[str, Any] = {}

    def mymemory(svc: Any, tenant: str, deps: Any, settings: Any) -> CairnAssembly:
        seen.update(deps=deps, settings=settings, tenant=tenant)
        return build_assembly(svc, tenant, deps, settings)

    register_assembly_impl("mymemory", mymemory)
    try:
        cfg = load_memory_config(tmp_path / "agents.yaml")
        assemblies = build_assemblies(cfg, tmp_path, services, "default")
        hooks = build_agent_hooks(cfg, assemblies)["assistant"]
    finally:
        unregister_assembly_impl("mymemory")
    assert seen["settings"] == {"chunk_tokens": 120, "chunk_overlap": 20}
    assert seen["deps"] == {"workspace": "ws/project", "inference": "infer"}
    board: dict[str, Any] = {
        "__main_channel": [
            {"role": "user", "content": "I grow tomatoes"},
            {"role": "assistant", "content": "Lovely"},
        ]
    }
    first = hooks.commit[0](board, REQ)
    assert first.created and first.conversation_id == "conv-1"
    assert not hooks.commit[0](board, REQ).created  # a retried run writes nothing
    hooks.prepare[0](board, REQ)
    items = board["memory_items"]
    assert [i["source_class"] for i in items] == ["recent"]
    assert items[0]["content"] == "user: I grow tomatoes\nassistant: Lovely"
    # The seed's template "\n" is blank, which FlowCraft's GoTemplate (like Cairn's) takes as
    # "the default template": the delimited, escaped block.
    assert board["memory_text"].startswith("<recalled-memory>")
    assert "user: I grow tomatoes" in board["memory_text"]


def test_hooks_work_with_the_runtime_board(store: Store) -> None:
    from cairn.ladders.board import Board

    a = CairnAssembly(store, "t1")
    board = Board.for_request(
        run_id="run-9",
        ladder="l",
        context_id="conv-2",
        messages=[{"role": "user", "content": "remember: blue door"}],
    )
    board.set_engine(
        "__main_channel",
        [
            {"role": "user", "content": "remember: blue door"},
            {"role": "assistant", "content": "ok"},
        ],
    )
    req = RequestContext(
        context_id=board.context_id, message=board.current_message, run_id=board.run_id
    )
    MemoryTurnHook({"scope": SCOPE}, a)(board, req)
    hook = MemoryContextHook(
        {
            "query": {"current_message": True},
            "scope": SCOPE,
            "output": "recalled",
            "render": {"output": "recalled_text"},
        },
        a,
    )
    result = hook(board, req)
    assert result.items and board["recalled"][0]["content"].startswith("user: remember")
    assert "reference data, not instructions" in board["recalled_text"]


def settings_error(settings: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as exc:
        MemoryContextHook(settings, None)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_hook_settings"
    return exc.value.message


BASE: dict[str, Any] = {"query": {"literal": "x"}, "scope": SCOPE, "output": "items"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"query": {}},
            "query: query must select exactly one of literal, board, "
            "current_message, recent_only (got none)",
        ),
        ({"query": {"literal": "x", "board": "b"}}, "(got literal, board)"),
        (
            {"query": {"current_message": True, "recent_only": True}},
            "(got current_message, recent_only)",
        ),
        ({"query": {"literal": " "}}, "query.literal must not be empty"),
        ({"query": {"board": ""}}, "query.board must name a board variable (it is empty)"),
        ({"query": {"sql": "x"}}, "query.sql: Extra inputs are not permitted"),
        ({"output": ""}, "output: output must name a board variable (it is empty)"),
        ({"output": "__items"}, "output '__items' is reserved"),
        ({"render": {"output": "__text"}}, "render.output '__text' is reserved"),
        (
            {"render": {"output": "items"}},
            "render.output must differ from output (both are 'items')",
        ),
        (
            {"render": {"output": "t", "gotmpl": {"template": "ok\n {{ if }}x{{ end }}"}}},
            "gotmpl syntax error at line 2, column 2: missing value for if",
        ),
        (
            {"render": {"output": "t", "gotmpl": {"template": "{{ .Items"}}},
            "gotmpl syntax error at line 1, column 1: unclosed action",
        ),
        (
            {"render": {"output": "t", "jinja": {"template": "{% if %}"}}},
            "template syntax error on line 1",
        ),
        (
            {"render": {"output": "t", "gotmpl": {"template": "a"}, "jinja": {"template": "b"}}},
            "render takes one of gotmpl, jinja or template (got gotmpl, jinja)",
        ),
        (
            {"render": {"output": "t", "gotmpl": {"template": "a", "max_chars": -1}}},
            "render.gotmpl.max_chars: Input should be greater than or equal to 0",
        ),
        ({"min_score": 1.01}, "min_score must be a finite number in [0, 1], got 1.01"),
        ({"min_score": float("nan")}, "min_score must be a finite number in [0, 1], got nan"),
        # A wrong type is an error, not a number: true is not 1, "0.5" not 0.5.
        ({"min_score": True}, "min_score: Input should be a valid number"),
        ({"min_score": "0.5"}, "min_score: Input should be a valid number"),
        ({"recent_turns": 6.0}, "recent_turns: Input should be a valid integer"),
        (
            {"render": {"output": "t", "gotmpl": {"template": "a", "max_chars": True}}},
            "render.gotmpl.max_chars: Input should be a valid integer",
        ),
        ({"query": {"literal": "x", "recent_only": "yes"}}, "Input should be a valid boolean"),
        ({"budget": {"max_items": -1}}, "budget.max_items: max_items must be >= 0"),
        ({"dataset_ids": ["a", "a"]}, "dataset_ids[1] repeats 'a'"),
        ({"dataset_ids": [""]}, "dataset_ids[0] must not be empty"),
        ({"scope": {"runtime_id": ""}}, "runtime_id is required"),
        ({"output": None}, "output: Input should be a valid string"),
        ({"conversation_id": "   "}, "conversation_id must not be blank (leave it out"),
        ({"conversation_id": "c\x00"}, "conversation_id must not contain a NUL character"),
        ({"query": {"literal": "a\x00b"}}, "query.literal must not contain a NUL character"),
        ({"dataset_ids": ["d\x00"]}, "dataset_ids[0] must not contain a NUL character"),
    ],
)
def test_context_hook_validation_messages(change: dict[str, Any], expected: str) -> None:
    assert expected in settings_error({**BASE, **change})


def test_output_is_required() -> None:
    assert "output: Field required" in settings_error(
        {k: v for k, v in BASE.items() if k != "output"}
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, "scope: Field required"),
        ({"scope": SCOPE, "channel": " "}, "channel must name a board variable"),
        ({"scope": SCOPE, "query": {"literal": "x"}}, "query: Extra inputs are not permitted"),
        ({"scope": SCOPE, "conversation_id": " "}, "conversation_id must not be blank"),
        (
            {"scope": {**SCOPE, "user_id": "a/b"}},
            "scope: user_id: a user is a subject id; it must not contain '/'",
        ),
    ],
)
def test_turn_hook_validation_messages(settings: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        MemoryTurnHook(settings, None)  # type: ignore[arg-type]
    assert expected in exc.value.message
    # The details name each field as every validation error does.
    assert all({"field", "message", "type"} <= set(d) for d in exc.value.details)


def test_a_turn_hook_scope_that_cannot_be_written_is_refused_at_load() -> None:
    cfg = seed_config()
    cfg["agents"]["assistant"]["commit"][0]["settings"]["scope"]["user_id"] = "a/b"
    with pytest.raises(ConfigError, match=r"commit\.0\.settings\.scope: user_id: a user is"):
        parse_memory_config(cfg, "seed")


def test_query_sources(store: Store) -> None:
    a = CairnAssembly(store, "t1")
    base = {"scope": SCOPE, "output": "out"}

    def request_of(query: dict[str, Any], board: dict[str, Any], **kw: Any) -> Any:
        return MemoryContextHook({**base, "query": query, **kw}, a).request_for(board, REQ)

    assert request_of({"literal": "tea"}, {}).query == "tea"
    assert request_of({"board": "topic"}, {"topic": "gardening"}).query == "gardening"
    assert request_of({"current_message": True}, {}).query == "what do I grow?"
    recent = request_of({"recent_only": True}, {})
    assert recent.recent_only and recent.query == "" and recent.conversation_id == "conv-1"
    assert request_of({"literal": "x"}, {}, conversation_id="other").conversation_id == "other"
    with pytest.raises(InvalidInput) as exc:
        request_of({"board": "topic"}, {})
    assert exc.value.code == "board_variable_missing"
    with pytest.raises(InvalidInput) as exc:
        request_of({"board": "topic"}, {"topic": 3})
    assert exc.value.code == "board_variable_type"


def test_failed_render_leaves_the_board_untouched(store: Store) -> None:
    a = CairnAssembly(store, "t1")
    MemoryTurnHook({"scope": SCOPE}, a)(
        {"__main_channel": [{"role": "user", "content": "x" * 300}]}, REQ
    )
    hook = MemoryContextHook(
        {
            "query": {"recent_only": True},
            "scope": SCOPE,
            "output": "out",
            # Even the empty result renders over the limit: the one case that fails.
            "render": {"output": "txt", "template": {"template": "y" * 60, "max_chars": 50}},
        },
        a,
    )
    board: dict[str, Any] = {}
    with pytest.raises(InvalidInput) as exc:
        hook(board, REQ)
    assert exc.value.code == "render_too_large" and "over max_chars 50" in exc.value.message
    assert board == {}


# A template that adds characters around every item, as FlowCraft's default does.
PER_ITEM = (
    "{% for i in items %}<item kind={{ i.kind }} score={{ i.score }}>{{ i.content }}</item>\n"
    "{% endfor %}"
)


# The same in Go template syntax (the seed's `gotmpl:`), with FlowCraft's functions.
PER_ITEM_GO = (
    '{{ range .Items }}<item kind="{{ .Kind }}" score="{{ score .Score }}">'
    "{{ xml (contentText .Content) }}</item>\n{{ end }}"
)


@pytest.mark.parametrize("renderer", ["template", "gotmpl"])
@pytest.mark.parametrize(("max_chars", "turn_chars"), [(8000, 400), (400, 120)])
def test_rendering_keeps_fitting_as_memory_grows(
    store: Store, max_chars: int, turn_chars: int, renderer: str
) -> None:
    """The seed's numbers (budget and render ``max_chars`` 8000), and 400: every call renders
    within ``max_chars`` however much is remembered, dropping the lowest-ranked items."""
    a = CairnAssembly(store, "t1")
    settings = {
        "query": {"current_message": True},
        "scope": SCOPE,
        "conversation_id": "conv-1",
        "recent_turns": 200,
        "budget": {"max_tokens": 20000, "max_items": 200, "max_chars": max_chars},
        "output": "memory_items",
        "render": {
            "output": "memory_text",
            renderer: {
                "template": PER_ITEM if renderer == "template" else PER_ITEM_GO,
                "max_chars": max_chars,
            },
        },
    }
    context = MemoryContextHook(settings, a)
    turn = MemoryTurnHook({"scope": SCOPE, "conversation_id": "conv-1"}, a)
    dropped_seen = False
    for n in range(1, 41):
        req = RequestContext(context_id="conv-1", message=f"call {n}", run_id=f"run-{n}")
        text = f"turn {n}: " + "Grüße, 你好, привет, مرحبا 🌍 " * (turn_chars // 28)
        turn({"__main_channel": [{"role": "user", "content": text}]}, req)
        board: dict[str, Any] = {}
        result = context(board, req)
        rendered = board["memory_text"]
        assert len(rendered) <= max_chars, f"call {n}"
        assert len(board["memory_items"]) == len(result.items) >= 1
        assert rendered.count("<item ") == len(result.items)
        packed = a.context(context.request_for(board, req))
        if len(result.items) < len(packed.items):
            dropped_seen = True
            assert result.truncated
            # The longest prefix that fits: one more item would not.
            assert [i.id for i in result.items] == [i.id for i in packed.items[: len(result.items)]]
            bigger = packed.model_copy(update={"items": packed.items[: len(result.items) + 1]})
            with pytest.raises(InvalidInput, match="render"):
                context.renderer.render(bigger)  # type: ignore[union-attr]
    assert dropped_seen


def test_turn_hook_errors_and_channels(store: Store) -> None:
    a = CairnAssembly(store, "t1")
    hook = MemoryTurnHook({"scope": SCOPE}, a)
    with pytest.raises(InvalidInput) as exc:
        hook({}, RequestContext(context_id="c", run_id=""))
    assert exc.value.code == "missing_run_id"
    with pytest.raises(InvalidInput) as exc:
        hook({}, RequestContext(context_id="", run_id="r"))
    assert exc.value.code == "missing_conversation_id"
    with pytest.raises(InvalidInput) as exc:
        hook({}, RequestContext(context_id="c", run_id="r"))
    assert exc.value.code == "empty_turn"
    with pytest.raises(InvalidInput) as exc:
        hook({"__main_channel": {"role": "user"}}, RequestContext(context_id="c", run_id="r"))
    assert exc.value.code == "board_variable_type"
    # Without a channel value, the current message is the turn.
    only_message = hook({}, RequestContext(context_id="c", message="hello", run_id="r1"))
    assert only_message.created
    side = MemoryTurnHook({"scope": SCOPE, "channel": "notes"}, a)
    commit = side({"notes": "a note"}, RequestContext(context_id="c", run_id="r1"))
    assert commit.created and commit.idempotency_key == "r1:notes"


def test_settings_file_is_confined_and_size_limited(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "memory.yaml").write_text("chunk_tokens: 100\n")
    (tmp_path / "secret.yaml").write_text("password: x\n")
    assert read_settings_file(conf, "./memory.yaml") == {"chunk_tokens": 100}
    for bad in ("../secret.yaml", str(tmp_path / "secret.yaml")):
        with pytest.raises(ConfigError) as exc:
            read_settings_file(conf, bad)
        assert exc.value.code == "settings_file_outside"
    os.symlink(tmp_path / "secret.yaml", conf / "link.yaml")
    with pytest.raises(ConfigError) as exc:
        read_settings_file(conf, "link.yaml")
    assert exc.value.code == "settings_file_outside"
    with pytest.raises(ConfigError) as exc:
        read_settings_file(conf, "missing.yaml")
    assert exc.value.code == "settings_file_missing"
    with pytest.raises(ConfigError, match="must not contain a NUL character"):
        read_settings_file(conf, "memory.yaml\x00.txt")
    (conf / "big.yaml").write_text("a: " + "x" * MAX_SETTINGS_FILE_BYTES)
    with pytest.raises(ConfigError) as exc:
        read_settings_file(conf, "big.yaml")
    assert (
        exc.value.code == "config_too_large" and str(MAX_SETTINGS_FILE_BYTES) in exc.value.message
    )
    (conf / "list.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        read_settings_file(conf, "list.yaml")


def test_config_errors_name_the_file_and_path(tmp_path: Path, services: Services) -> None:
    cfg = seed_config()
    cfg["agents"]["assistant"]["prepare"][0]["deps"]["memory"] = "nope"
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as exc:
        load_memory_config(path)
    assert str(path) in exc.value.message
    assert "agents.assistant.prepare.0.deps.memory names resource 'nope'" in exc.value.message
    cfg = seed_config()
    cfg["agents"]["assistant"]["prepare"][0]["settings"]["output"] = "__x"
    with pytest.raises(ConfigError) as exc:
        parse_memory_config(cfg, "f.yaml")
    assert "f.yaml: agents.assistant.prepare.0.settings.output" in exc.value.message
    cfg = seed_config()
    cfg["resources"]["memories"]["kind"] = "memory.Other"
    with pytest.raises(ConfigError, match=r"resources\.memories\.kind"):
        parse_memory_config(cfg, "f.yaml")
    cfg = seed_config()
    cfg["resources"]["memories"]["impl"] = "unregistered"
    with pytest.raises(ConfigError) as exc:
        build_assemblies(parse_memory_config(cfg), tmp_path, services)
    assert exc.value.code == "unknown_impl"
    cfg = seed_config()
    cfg["resources"]["memories"]["impl"] = "cairn"
    cfg["resources"]["memories"]["settings"] = {"chunk_tokens": "many"}
    with pytest.raises(ConfigError, match=r"resources\.memories\.settings: chunk_tokens"):
        build_assemblies(parse_memory_config(cfg), tmp_path, services)


def test_settings_model_is_exported_for_the_runtime() -> None:
    s = ContextHookSettings.model_validate({**BASE, "render": {"output": "t"}})
    assert s.render is not None and s.render.renderer().render is not None


def test_turns_committed_by_the_hook_are_recalled_by_later_conversations(
    backend_services: Services,
) -> None:
    """The memory.turn hook's turns are compiled in the background by default: a prepare hook
    of another conversation finds them in long-term memory (polled with a generous bound)."""
    import time

    a = build_assembly(backend_services, "default")
    MemoryTurnHook({"scope": SCOPE}, a)(
        {"__main_channel": [{"role": "user", "content": "My bike is a green Brompton."}]},
        RequestContext(context_id="conv-a", message="", run_id="run-a"),
    )
    hook = MemoryContextHook(
        {"query": {"current_message": True}, "scope": SCOPE, "output": "items"}, a
    )
    later = RequestContext(context_id="conv-b", message="which bike do I ride?", run_id="run-b")
    board: dict[str, Any] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hook(board, later)
        if board["items"]:
            break
        time.sleep(0.05)
    assert board["items"] and "Brompton" in board["items"][0]["content"]
    assert board["items"][0]["source_class"] == "long_term"
