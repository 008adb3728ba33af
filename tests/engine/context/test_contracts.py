"""The memory contracts: every validation message, and the impl registry."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from cairn.core.memory import (
    Assembly,
    Budget,
    ContextRequest,
    Document,
    Turn,
)
from cairn.core.scope import Scope
from cairn.engine.context import impls
from cairn.engine.context.impls import (
    get_assembly_impl,
    register_assembly_impl,
    unregister_assembly_impl,
)
from cairn.errors import ConfigError

SCOPE = {"runtime_id": "memories", "user_id": "user-1", "agent_id": "assistant"}


def message_of(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.value.errors())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"runtime_id": "  "}, "runtime_id is required (empty after trimming)"),
        ({"runtime_id": "a\x00b"}, "must not contain a NUL character"),
        ({"runtime_id": "r", "user_id": "u\x00"}, "user_id: Value error, must not contain a NUL"),
        ({"runtime_id": "r", "agent_id": "\x00"}, "agent_id: Value error, must not contain a NUL"),
        ({"runtime_id": "r", "tenant": "x"}, "tenant: Extra inputs are not permitted"),
        ({"runtime_id": "r" * 257}, "runtime_id: Value error, at most 256 characters"),
        ({"runtime_id": "r", "agent_id": "a" * 257}, "agent_id: Value error, at most 256"),
    ],
)
def test_scope_validation(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Scope.model_validate(data)
    assert expected in message_of(exc)


def test_scope_trims_and_defaults() -> None:
    scope = Scope(runtime_id=" memories ", user_id=None, agent_id=" a ")  # type: ignore[arg-type]
    assert (scope.runtime_id, scope.user_id, scope.agent_id) == ("memories", "", "a")


@pytest.mark.parametrize("field", ["max_tokens", "max_items", "max_chars"])
def test_budget_rejects_negative(field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Budget.model_validate({field: -1})
    default = "no limit" if field == "max_chars" else "the default"
    assert f"{field} must be >= 0 (0 means {default}), got -1" in message_of(exc)


def test_budget_defaults() -> None:
    assert Budget().resolved() == Budget(max_tokens=4096, max_items=20, max_chars=0)
    assert Budget(max_tokens=7, max_items=3, max_chars=9).resolved() == Budget(
        max_tokens=7, max_items=3, max_chars=9
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            {"query": "", "conversation_id": ""},
            "a query or a conversation_id is required (both are empty)",
        ),
        ({"query": "   "}, "a query or a conversation_id is required"),
        ({"dataset_ids": ["docs", ""]}, "dataset_ids[1] must not be empty"),
        ({"dataset_ids": ["docs", "docs"]}, "dataset_ids[1] repeats 'docs'; ids must be unique"),
        ({"min_score": 1.5}, "min_score must be a finite number in [0, 1], got 1.5"),
        ({"min_score": -0.1}, "min_score must be a finite number in [0, 1], got -0.1"),
        ({"min_score": math.nan}, "min_score must be a finite number in [0, 1], got nan"),
        ({"min_score": math.inf}, "min_score must be a finite number in [0, 1], got inf"),
        ({"budget": {"max_tokens": -5}}, "budget.max_tokens: Value error, max_tokens must be >= 0"),
        ({"recent_turns": -1}, "recent_turns: Input should be greater than or equal to 0"),
        ({"recent_only": True, "conversation_id": ""}, "recent_only needs a conversation_id"),
        ({"query": "a\x00"}, "query must not contain a NUL character"),
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
    ],
)
def test_context_request_validation(extra: dict[str, Any], expected: str) -> None:
    data: dict[str, Any] = {"scope": SCOPE, "query": "tea"}
    data.update(extra)
    with pytest.raises(ValidationError) as exc:
        ContextRequest.model_validate(data)
    assert expected in message_of(exc)


def test_context_request_needs_only_one_of_query_or_conversation() -> None:
    assert ContextRequest.model_validate({"scope": SCOPE, "query": "tea"}).query == "tea"
    assert ContextRequest.model_validate({"scope": SCOPE, "conversation_id": "c"}).query == ""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"messages": []}, "messages: List should have at least 1 item"),
        (
            {"idempotency_key": "  "},
            "idempotency_key: Value error, idempotency_key must not be empty",
        ),
        ({"conversation_id": ""}, "conversation_id: String should have at least 1 character"),
        (
            {"messages": [{"role": "", "content": "x"}]},
            "messages.0.role: String should have at least",
        ),
        ({"messages": [{"role": "user"}]}, "messages.0.content: Field required"),
        # The stored key gains a "turn:" prefix in a 256-character column.
        ({"idempotency_key": "k" * 252}, "idempotency_key: String should have at most 251"),
    ],
)
def test_turn_validation(extra: dict[str, Any], expected: str) -> None:
    data: dict[str, Any] = {
        "scope": SCOPE,
        "conversation_id": "c1",
        "idempotency_key": "k1",
        "messages": [{"role": "user", "content": "hi"}],
    }
    data.update(extra)
    with pytest.raises(ValidationError) as exc:
        Turn.model_validate(data)
    assert expected in message_of(exc)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"content": "  "}, "content: Value error, content must not be empty"),
        ({"dataset_id": " "}, "dataset_id: Value error, dataset_id must not be empty"),
        ({"document_id": ""}, "document_id: String should have at least 1 character"),
        ({"title": "\x00"}, "title must not contain a NUL character"),
        (
            {"idempotency_key": "   "},
            "idempotency_key must not be empty (omit it to use document_id)",
        ),
    ],
)
def test_document_validation(extra: dict[str, Any], expected: str) -> None:
    data: dict[str, Any] = {
        "scope": SCOPE,
        "dataset_id": "docs",
        "document_id": "d1",
        "content": "text",
    }
    data.update(extra)
    with pytest.raises(ValidationError) as exc:
        Document.model_validate(data)
    assert expected in message_of(exc)


def test_document_key_defaults_to_document_id() -> None:
    doc = Document(scope=Scope(**SCOPE), dataset_id="docs", document_id="d1", content="x")
    assert doc.key == "d1"
    assert doc.model_copy(update={"idempotency_key": "v2"}).key == "v2"


class _Null:
    def context(self, request: Any) -> Any: ...
    def commit_turn(self, turn: Any) -> Any: ...
    def put_document(self, document: Any) -> Any: ...


def test_register_by_call_and_lookup() -> None:
    def factory(services: Any, tenant_id: str, deps: Any, settings: Any) -> Assembly:
        return _Null()

    register_assembly_impl("test-null", factory)
    try:
        assert get_assembly_impl("test-null") is factory
        with pytest.raises(ConfigError, match="already registered"):
            register_assembly_impl("test-null", factory)
        register_assembly_impl("test-null", factory, replace=True)
        assert isinstance(factory(None, "t", {}, {}), Assembly)
    finally:
        unregister_assembly_impl("test-null")


def test_builtin_impl_cannot_be_shadowed_and_unknown_is_an_error() -> None:
    from cairn.engine.context import build_assembly

    assert get_assembly_impl("cairn") is build_assembly
    with pytest.raises(ConfigError, match="already registered"):
        register_assembly_impl("cairn", build_assembly)
    with pytest.raises(ConfigError) as exc:
        get_assembly_impl("nope")
    assert exc.value.code == "unknown_impl"
    assert "unknown memory.Assembly impl 'nope'" in exc.value.message
    assert "cairn" in exc.value.message


def test_register_by_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeEntryPoint:
        name = "from-ep"

        def load(self) -> Any:
            return lambda *a: _Null()

    monkeypatch.setattr(impls, "entry_points", lambda group: [FakeEntryPoint()])
    try:
        factory = get_assembly_impl("from-ep")
        assert isinstance(factory(None, "t", {}, {}), Assembly)
        assert "from-ep" in impls.assembly_impl_names()
    finally:
        unregister_assembly_impl("from-ep")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"budget": {"max_tokens": True}}, "budget.max_tokens"),
        ({"budget": {"max_items": "100"}}, "budget.max_items"),
        ({"min_score": True}, "min_score"),
        ({"recent_turns": "3"}, "recent_turns"),
        ({"recent_only": "yes"}, "recent_only"),
    ],
)
def test_wrong_types_are_refused_not_coerced(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ContextRequest.model_validate({"scope": SCOPE, "query": "q", **data})
    assert message_of(exc).startswith(f"{field}: Input should be a valid")
