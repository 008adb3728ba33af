"""``construct`` builds the same model as pydantic's ``model_construct``, and refuses a value
list that is not exactly the model's fields."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from cairn.core.construct import construct
from cairn.core.episodes import Episode, NewEpisode
from cairn.core.scope import Scope


def test_construct_equals_model_construct() -> None:
    now = datetime.now(UTC)
    scope = construct(Scope, {"runtime_id": "default", "user_id": "Анна 李", "agent_id": ""})
    assert scope == Scope.for_subject("Анна 李")
    assert hash(scope) == hash(Scope.for_subject("Анна 李"))
    values = {
        "id": uuid.uuid4(),
        "tenant_id": "t",
        "scope": scope,
        "source": "chat",
        "type": "conversation.turn",
        "payload": {"messages": [{"role": "user", "content": "مرحبا"}]},
        "metadata": {},
        "provenance": {"by": "test"},
        "session_id": "s1",
        "idempotency_key": None,
        "occurred_at": now,
        "created_at": now,
        "seq": 7,
    }
    built, reference = construct(Episode, dict(values)), Episode.model_construct(**values)
    assert built == reference
    assert built.model_dump() == reference.model_dump()
    assert built.model_fields_set == reference.model_fields_set
    assert built.model_dump_json() == reference.model_dump_json()
    new = {k: values[k] for k in NewEpisode.model_fields}
    assert construct(NewEpisode, dict(new)) == NewEpisode.model_construct(**new)


def test_construct_needs_every_field_and_no_other() -> None:
    with pytest.raises(TypeError, match=r"missing fields \['agent_id'\]"):
        construct(Scope, {"runtime_id": "r", "user_id": "u"})
    with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
        construct(Scope, {"runtime_id": "r", "user_id": "u", "colour": "x"})
