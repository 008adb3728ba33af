"""The pure parts of ``cairn.engine.items``: what is stored for an item, and filters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from cairn.engine.embedders import EmbedderError
from cairn.engine.items import check_filter, matches, plan_item, rank
from cairn.errors import InvalidInput
from cairn.store.items import StoredItem

NOW = datetime.now(UTC)


class Failing:
    name = "broken:1"
    dim = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbedderError("the embedding service is down")


class Fixed:
    name = "fixed:1"
    dim = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[3.0, 4.0] for _ in texts]


def plan(value: dict[str, Any], **kw: Any) -> Any:
    args: dict[str, Any] = {"index": None, "vectors": None, "ttl_seconds": None, "embedder": None}
    return plan_item(["ns"], "k", value, **{**args, **kw})


def test_the_text_is_every_string_or_the_given_one() -> None:
    assert plan({"a": "Жасмин", "b": [1, {"c": "茶"}], "d": None}).search_text.split() == [
        "жасмин",
        "茶",
    ]
    assert plan({"a": "x"}, index=["only this"]).search_text == "only this"
    assert plan({"a": "x"}, index=[]).search_text == ""


def test_vectors_are_stored_unit_length() -> None:
    item = plan({}, vectors=[[3.0, 4.0], [0.0, 0.0]])
    stored = np.frombuffer(item.embedding, dtype="<f4").reshape(-1, item.embedding_dims)
    assert stored.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)], [0.0, 0.0]]
    assert item.embedding_source == "client"
    assert plan({"t": "tea"}, embedder=Fixed()).embedding_source == "fixed:1"
    assert plan({"n": 1}, embedder=Fixed()).embedding is None  # no text, nothing to embed


def test_huge_numbers_do_not_overflow() -> None:
    item = plan({}, vectors=[[1e308, 1e308], [-1e308, 0.0]])
    stored = np.frombuffer(item.embedding, dtype="<f4").reshape(-1, 2)
    assert stored.tolist() == [
        [pytest.approx(0.7071, 1e-3), pytest.approx(0.7071, 1e-3)],
        [-1.0, 0.0],
    ]
    found = rank(
        [StoredItem(1, ("ns",), "k", {}, NOW, NOW, None, "", item.embedding, 2, "client")],
        query=None,
        query_vector=[1e308, -1e308],
        embedder=None,
    )
    assert found[0].score == pytest.approx(0.0, abs=1e-6)


def test_an_embedder_failure_stores_the_item_without_a_vector() -> None:
    item = plan({"t": "tea"}, embedder=Failing())
    assert item.embedding is None and item.search_text == "tea"


@pytest.mark.parametrize(
    ("value", "filter", "expected"),
    [
        ({"a": 1}, {"a": 1}, True),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"b": None}, True),  # a missing field is null
        ({"a": 1}, {"b": {"$ne": 1}}, True),
        ({"a": "5"}, {"a": {"$gt": 4}}, True),  # numbers compare as numbers
        ({"a": "x"}, {"a": {"$gt": 4}}, False),
        ({"a": None}, {"a": {"$lte": 4}}, False),
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, True),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1, 2]}, {"a": [2, 1]}, False),
        ({"a": 3}, {"a": {"$gte": 3, "$lt": 4}}, True),
        # true and false are not the numbers 1 and 0, however Python compares them.
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": True}, {"a": {"$eq": 1}}, False),
        ({"a": True}, {"a": {"$ne": 1}}, True),
        ({"a": True}, {"a": {"$gt": 0}}, False),
        ({"a": [1, False]}, {"a": [True, 0]}, False),
        ({"a": {"b": True}}, {"a": {"$eq": {"b": 1}}}, False),
        ({"a": True}, {"a": True}, True),
        ({"a": "nan"}, {"a": {"$lt": 4}}, False),
        ({"a": 10**400}, {"a": {"$gt": 4}}, False),  # overflows a float: not comparable
        ({"a": 5}, {"a": {"$lt": 10**400}}, False),
    ],
)
def test_filters(value: dict[str, Any], filter: dict[str, Any], expected: bool) -> None:
    check_filter(filter)
    assert matches(value, filter) is expected


def test_unknown_operators_are_refused_at_any_depth() -> None:
    for bad in ({"a": {"$in": [1]}}, {"a": {"b": {"$regex": "x"}}}, {"a": [{"$x": 1}]}):
        with pytest.raises(InvalidInput) as err:
            check_filter(bad)
        assert err.value.code == "invalid_filter"
