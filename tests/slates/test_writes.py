"""mergeByKey, JSON extraction with ``match``/``field``, gated writes, tags — on both backends."""

from __future__ import annotations

import json

import pytest

from cairn.slates.config import parse_slates
from cairn.slates.errors import InvalidSlateWrite
from cairn.slates.service import Slates
from cairn.slates.steps import apply_gated_write, apply_slate_write
from tests.slates.conftest import folder_slate, fresh_ladder

T = "tenant"
SEED_WRITE = {
    "to": {"slate": "Memory", "folder": "facts", "file": "core.md"},
    "field": "fact",
    "on": "append",
    "match": {
        "type": "object",
        "required": ["fact"],
        "properties": {"fact": {"type": "string", "minLength": 5}},
    },
}


def test_merge_by_key_updates_and_appends(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 200, ["people.json"]))

    def merge(value: object) -> None:
        slates.write(T, ladder, "S", "f", "people.json", value, on="mergeByKey", key="id")

    def items() -> list[dict[str, object]]:
        return json.loads(slates.read_file(T, ladder, "S", "f", "people.json"))

    merge({"id": 1, "name": "Ann"})
    merge('[{"id": 2, "name": "Bob"}, {"id": 1, "name": "Ann B."}]')
    assert items() == [{"id": 1, "name": "Ann B."}, {"id": 2, "name": "Bob"}]
    merge([{"id": "1", "name": "string key"}, {"id": 2, "age": 40}])
    assert items() == [
        {"id": 1, "name": "Ann B."},
        {"id": 2, "age": 40},
        {"id": "1", "name": "string key"},
    ]
    with pytest.raises(InvalidSlateWrite) as info:
        merge([{"id": 3}, {"name": "no key"}])
    assert info.value.code == "slate_merge_key_missing"
    assert len(items()) == 3  # the invalid write changed nothing
    # Appending to a JSON file keeps it a valid array.
    slates.write(T, ladder, "S", "f", "people.json", "plain text")
    assert items()[-1] == "plain text"


def test_merge_converts_a_json_array_text_and_refuses_prose(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 200, ["a", "b"]))
    slates.write(T, ladder, "S", "f", "a", '[{"k": "x", "v": 1}]', on="overwrite")
    slates.write(T, ladder, "S", "f", "a", {"k": "x", "v": 2}, on="mergeByKey", key="k")
    assert json.loads(slates.read_file(T, ladder, "S", "f", "a")) == [{"k": "x", "v": 2}]
    slates.write(T, ladder, "S", "f", "b", "prose")
    with pytest.raises(InvalidSlateWrite) as info:
        slates.write(T, ladder, "S", "f", "b", {"k": 1}, on="mergeByKey", key="k")
    assert info.value.code == "slate_file_not_json"


def test_merged_item_counts_as_newly_written_for_fifo(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 30, ["a"]))
    for i in (1, 2, 3):
        slates.write(T, ladder, "S", "f", "a", {"id": i}, on="mergeByKey", key="id")
    slates.write(T, ladder, "S", "f", "a", {"id": 1, "v": "again"}, on="mergeByKey", key="id")
    result = slates.write(
        T, ladder, "S", "f", "a", {"id": 4, "v": "x y z"}, on="mergeByKey", key="id"
    )
    # id 1 was rewritten after 2 and 3, so 2 and 3 are the oldest-written items.
    assert [e.preview for e in result.evictions] == ['{"id": 2}', '{"id": 3}']
    assert json.loads(slates.read_file(T, ladder, "S", "f", "a"))[0] == {"id": 1, "v": "again"}


def test_slate_write_of_the_seed(slates: Slates) -> None:
    out = 'Paris.\n```json\n{"fact": "Paris is the capital of France"}\n```'
    outcome = apply_slate_write(slates, T, "memory-ladder", SEED_WRITE, out, run_id="r1")
    assert outcome.written and outcome.value == "Paris is the capital of France"
    assert slates.read(T, "memory-ladder", "Memory", "facts", "core.md") == (
        "Paris is the capital of France"
    )
    assert outcome.result is not None and outcome.result.usage == 6


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("No durable fact here.", "no_json"),
        ('{"fact": "abc"}', "schema_mismatch"),
        ('{"other": "something long"}', "schema_mismatch"),
        ('["a list", "not an object"]', "schema_mismatch"),
    ],
)
def test_slate_write_no_match_is_a_recorded_noop(slates: Slates, output: str, reason: str) -> None:
    outcome = apply_slate_write(slates, T, "memory-ladder", SEED_WRITE, output, run_id="r2")
    assert not outcome.written and outcome.reason == reason
    assert slates.read(T, "memory-ladder", "Memory", "facts", "core.md") == ""
    (skip,) = slates.skipped_writes(T, "memory-ladder", "Memory")
    assert skip["reason"] == reason and skip["run_id"] == "r2" and skip["file"] == "core.md"


def test_slate_write_without_field_writes_json_and_field_non_string(slates: Slates) -> None:
    spec = {
        "to": {"slate": "Memory", "folder": "facts", "file": "core.md"},
        "match": {"type": "object"},
    }
    apply_slate_write(slates, T, "memory-ladder", spec, 'ok {"a": [1, 2]} trailing')
    spec2 = {**spec, "field": "a"}
    apply_slate_write(slates, T, "memory-ladder", spec2, '{"a": [1, 2]}')
    missing = apply_slate_write(slates, T, "memory-ladder", {**spec, "field": "zzz"}, '{"a": 1}')
    assert missing.reason == "field_missing"
    assert slates.read(T, "memory-ladder", "Memory", "facts", "core.md") == '{"a": [1, 2]}\n[1, 2]'


def test_gated_writes(slates: Slates) -> None:
    to_wins = {"to": {"slate": "Memory", "folder": "lessons", "file": "wins.md"}}
    gate = {
        "all": [{"contains": "lesson"}, {"minLength": 10}, {"not": {"regex": "^ERROR"}}],
        "then": {"write": to_wins},
        "else": {"write": {"slate": "Memory", "folder": "lessons", "file": "failures.md"}},
    }
    assert apply_gated_write(slates, T, "memory-ladder", gate, "a lesson learned").written
    assert apply_gated_write(slates, T, "memory-ladder", gate, "ERROR: lesson lost").written
    text = '{"not": "parsed"}'
    assert apply_gated_write(
        slates,
        T,
        "memory-ladder",
        {"any": [{"equals": text}, {"maxLength": 2}], "then": {"write": to_wins}},
        f"  {text}\n",
    ).written
    closed = apply_gated_write(
        slates, T, "memory-ladder", {"contains": "zzz", "then": {"write": to_wins}}, "no"
    )
    assert not closed.written and closed.reason == "gate_closed"
    read = slates.read
    assert read(T, "memory-ladder", "Memory", "lessons", "wins.md", peek=True) == (
        f"a lesson learned\n  {text}\n"
    )
    assert read(T, "memory-ladder", "Memory", "lessons", "failures.md") == "ERROR: lesson lost"


def test_read_metatags_as_text_and_fallbacks(slates: Slates) -> None:
    ladder = fresh_ladder(
        slates,
        *parse_slates(
            [
                {
                    "title": "S",
                    "folders": [
                        {
                            "name": "f",
                            "tokenLimit": 50,
                            "files": [{"name": "a"}, {"name": "b", "init": "héllo"}],
                        },
                        {"name": "g", "tokenLimit": 5, "evictionPolicy": "reject"},
                    ],
                }
            ],
            "t",
        ),
    )
    slates.write(T, ladder, "S", "f", "a", "one", tags=["x", "y"])
    slates.write(T, ladder, "S", "f", "a", "two", tags=["y", "z"])
    assert slates.read(T, ladder, "S", "f", "a", metatag="tags") == '["x", "y", "z"]'
    assert json.loads(slates.read(T, ladder, "S", "f", metatag="index")) == [
        {"name": "a", "tokens": 3, "bytes": 7},
        {"name": "b", "tokens": 3, "bytes": 6},
    ]
    assert slates.read(T, ladder, "S", "g", metatag="index", fallback="none") == "none"
    assert slates.read(T, ladder, "S", "f", "b", metatag="tags", fallback="no tags") == "no tags"
    tree = json.loads(slates.read(T, ladder, "S", "f", metatag="tree"))
    assert tree == {
        "slate": "S",
        "partition": "ladder",
        "tokens": 6,
        "tokenLimit": 55,
        "folders": [
            {
                "folder": "f",
                "tokenLimit": 50,
                "evictionPolicy": "FIFO",
                "tokens": 6,
                "files": [
                    {"file": "a", "tokens": 3, "bytes": 7, "entries": 2, "tags": ["x", "y", "z"]},
                    {"file": "b", "tokens": 3, "bytes": 6, "entries": 1, "tags": []},
                ],
            },
            {"folder": "g", "tokenLimit": 5, "evictionPolicy": "reject", "tokens": 0, "files": []},
        ],
    }
    assert json.loads(slates.read(T, ladder, "S", "f", metatag="tree", depth=0)) == {
        "slate": "S",
        "partition": "ladder",
        "tokens": 6,
        "tokenLimit": 55,
    }
