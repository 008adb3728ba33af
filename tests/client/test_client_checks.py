"""What the SDK checks before sending, and arguments it takes in more than one form: nothing a
server would refuse is sent half-converted, and nothing is lost on the way."""

from __future__ import annotations

import math
import uuid

import pytest
from pydantic import ValidationError

from cairn.client import Cairn, InvalidRequestError, NotFoundError

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("send", "field"),
    [
        (lambda c: c.episodes.create("u", source="s", type="t", payload={"x": NAN}), "payload.x"),
        (
            lambda c: c.episodes.create(
                "u", source="s", type="t", payload={}, metadata={"m": -INF}
            ),
            "metadata.m",
        ),
        (
            lambda c: c.items.put({"runtime_id": "app", "user_id": "u"}, ["n"], "k", {"s": NAN}),
            "value.s",
        ),
        (
            lambda c: c.scopes.commit_turn(
                {"runtime_id": "app", "user_id": "u"},
                "c",
                "k1",
                [{"role": "user", "content": "hi"}],
                metadata={"v": [1.0, INF]},
            ),
            "metadata.v.1",
        ),
    ],
)
def test_a_number_that_is_not_finite_is_refused_before_sending(
    local: Cairn, send: object, field: str
) -> None:
    """As the server answers such a body (422 ``non_finite_number``), and nothing is stored:
    the episode's NaN was written as null before."""
    with pytest.raises(InvalidRequestError) as info:
        send(local)  # type: ignore[operator]
    error = info.value
    assert (error.status, error.code) == (422, "validation_error")
    assert error.details == [
        {"field": field, "message": "must be a finite number", "type": "non_finite_number"}
    ]
    assert local.subjects.list().total == 0
    assert math.isnan(NAN)  # (the caller's values are untouched)


def test_a_lone_surrogate_is_refused_before_sending(local: Cairn) -> None:
    with pytest.raises(InvalidRequestError) as info:
        local.episodes.create("u", source="s", type="t", payload={"x": "a\ud800"})
    assert (info.value.status, info.value.code) == (422, "invalid_text")
    assert info.value.details[0]["field"] == "payload.x"
    with pytest.raises(InvalidRequestError) as query:
        local.memories.search("u", "a\ud800")
    assert (query.value.code, query.value.details[0]["field"]) == ("invalid_text", "query.q")
    with pytest.raises(InvalidRequestError) as path:
        local.subjects.delete("u\ud800")
    assert (path.value.code, path.value.details[0]["field"]) == ("invalid_text", "path")
    assert local.subjects.list().total == 0


def test_dates_as_strings_and_clearing_the_end_of_validity(local: Cairn) -> None:
    scope = {"runtime_id": "app", "user_id": "u"}
    turn = local.scopes.commit_turn(
        scope, "c", "k1", [{"role": "user", "content": "hello"}], occurred_at="2024-05-01T08:00:00Z"
    )
    assert turn.occurred_at.year == 2024
    values = {"customer": "Globex", "issue": "A duplicate charge"}
    applied = local.templates.apply(
        "customer-support-handoff", "g", values, occurred_at="2023-03-01T10:00:00Z"
    )
    assert applied.occurred_at.year == 2023
    local.remember("m", ["I moved to Porto last spring."])
    memory = local.memories.search("m", "Porto").memories[0]
    bounded = local.memories.update(memory.id, valid_to="2030-01-01T00:00:00Z")
    assert bounded.valid_to is not None and bounded.valid_to.year == 2030
    cleared = local.memories.update(bounded.id, valid_to=None)
    assert cleared.valid_to is None
    with pytest.raises(InvalidRequestError) as info:
        local.memories.update(
            cleared.id, valid_from="2025-01-01T00:00:00Z", valid_to="2024-01-01T00:00:00Z"
        )
    assert info.value.code == "invalid_validity"


def test_remember_checks_its_messages_before_sending(local: Cairn) -> None:
    for bad in ([{"role": "user", "contnet": "x"}], [{"role": "user"}]):
        with pytest.raises(ValidationError):
            local.remember("r", bad)
    assert local.subjects.list().total == 0
    named = local.remember("r", [{"role": "user", "name": "Maya", "content": "I work at Acme."}])
    assert named.memories_created >= 1
    # What a turn's message may carry (memories.md): a time, text parts, a caption.
    dated = {"role": "user", "content": "I moved to Porto.", "timestamp": "2024-05-01T08:00:00Z"}
    parts = {"role": "user", "content": [{"type": "text", "text": "I adopted a cat."}]}
    more = local.remember("r", [dated, parts, {"speaker": "Leo", "text": "I passed my test."}])
    assert more.memories_created >= 3
    texts = " ".join(m.content for m in local.memories.search("r", kinds="turn").memories)
    assert "Porto" in texts and "cat" in texts and "Leo: I passed" in texts


def test_kinds_as_a_string_and_render_as_the_apis_dict(local: Cairn) -> None:
    local.remember("k", ["I prefer green tea in the morning."])
    listed = local.memories.search("k", kinds="turn").memories
    assert listed and {m.kind for m in listed} == {"turn"}
    assert local.memories.search("k", kinds="turn,profile_fact").memories
    scope = {"runtime_id": "app", "user_id": "u"}
    local.scopes.commit_turn(
        scope, "c", "k1", [{"role": "user", "content": "My garden has roses."}]
    )
    short = local.scopes.context(scope, "garden", render={"max_chars": 200})
    assert short.rendered is not None and len(short.rendered) <= 200
    with pytest.raises(InvalidRequestError) as info:
        local.scopes.context(scope, "garden", render={"template": "{% for i in items %}"})
    assert info.value.code == "invalid_template"
    with pytest.raises(TypeError):
        local.scopes.context(scope, "garden", render={"maxchars": 10})


def test_a_malformed_job_id_is_the_servers_422(local: Cairn) -> None:
    with pytest.raises(InvalidRequestError) as info:
        local.memories.job("nope")
    assert info.value.status == 422
    with pytest.raises(NotFoundError) as missing:
        local.memories.job(uuid.uuid4())
    assert missing.value.code == "job_not_found"
