"""JSON columns read back through orjson, with the standard library where orjson refuses
what ``json.dumps`` writes; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from cairn.store import Store, jsoncodec
from tests.engine.context.helpers import SCOPE, add_memory

TENANT = "t1"


@pytest.mark.parametrize(
    "value",
    [
        {"speaker": "Maya", "dates": [], "n": 3, "x": 1.5, "ok": True, "none": None},
        {"text": "我住在北京 — Genève, München, Москва 🍵", "combining": "e\u0301"},
        ["01a240db-7f20-7608-b886-04c2401b556f"],
        {"big": 2**80, "neg": -(2**70)},
        {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")},
        [],
        {},
    ],
)
def test_reads_what_json_dumps_writes_as_json_loads_does(value: object) -> None:
    text = json.dumps(value)
    got, expected = jsoncodec.loads(text), json.loads(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert type(got) is type(expected)


def test_a_float_out_of_orjson_range_still_reads() -> None:
    got = jsoncodec.loads('{"x": NaN, "y": Infinity}')
    assert math.isnan(got["x"]) and got["y"] == math.inf


def test_invalid_json_still_raises() -> None:
    with pytest.raises(ValueError):
        jsoncodec.loads("{not json")


def test_metadata_round_trips_through_the_store(store: Store) -> None:
    mid = add_memory(store, TENANT, "Maya drinks green tea")
    metadata = {"big": 2**80, "script": "中文 русский العربية", "nested": {"list": [1, 2.5]}}
    with store.transaction() as tx:
        tx.memories.set_metadata(mid, metadata, datetime.now(UTC))
    got = store.memories.get(TENANT, mid)
    assert got is not None and got.scope == SCOPE
    assert got.metadata["big"] == 2**80
    assert got.metadata["script"] == metadata["script"]
    assert got.metadata["nested"] == {"list": [1, 2.5]}
