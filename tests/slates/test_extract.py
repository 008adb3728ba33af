"""JSON extraction and gate conditions (pure functions)."""

from __future__ import annotations

import pytest

from cairn.slates.config import Condition
from cairn.slates.extract import extract_json, extract_value
from cairn.slates.gates import evaluate_condition


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]\n", [1, 2]),
        ('Here:\n```json\n{"a": 2}\n```\nand ```\n{"a": 3}\n```', {"a": 2}),
        ('```python\n{"a": 9}\n```\n```\n{"a": 4}\n```', {"a": 4}),
        ("```json\nnot json\n```\n```json\n[5]\n```", [5]),
        ('I found {"fact": "x"} and {"fact": "y"}', {"fact": "x"}),
        ('broken { "a": and then [1, 2]', [1, 2]),
        ('"just a string"', None),
        ("42", None),
        ("no json at all", None),
        ("", None),
    ],
)
def test_extract_json(output: str, expected: object) -> None:
    assert extract_json(output) == expected


def test_extract_value_reasons() -> None:
    assert extract_value("nothing").reason == "no_json"
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    mismatch = extract_value('{"n": "x"}', match=schema)
    assert mismatch.reason == "schema_mismatch" and mismatch.detail is not None
    assert mismatch.detail.startswith("n: ")
    assert extract_value('{"n": 1}', match=schema, field="n").value == 1
    assert extract_value('[{"n": 1}]', field="n").reason == "field_missing"
    assert extract_value('{"n": ""}', field="n").reason == "empty_value"
    # Draft 2020-12 keywords work (prefixItems).
    tuple_schema = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}
    assert extract_value('["a", 1]', match=tuple_schema).ok
    assert not extract_value('[1, "a"]', match=tuple_schema).ok


@pytest.mark.parametrize(
    ("condition", "output", "holds"),
    [
        ({"contains": "ok"}, "it is ok", True),
        ({"contains": "OK"}, "it is ok", False),
        ({"regex": r"^\d+$"}, "123", True),
        ({"regex": r"^\d+$"}, "12a", False),
        ({"equals": "yes"}, "  yes\n", True),
        ({"equals": "yes"}, "yes!", False),
        ({"minLength": 3}, "abc", True),
        ({"minLength": 4}, "abc", False),
        ({"maxLength": 3}, "abc", True),
        ({"maxLength": 2}, "abc", False),
        ({"contains": "a", "maxLength": 2}, "abc", False),
        ({"all": [{"contains": "a"}, {"contains": "b"}]}, "ab", True),
        ({"all": [{"contains": "a"}, {"contains": "z"}]}, "ab", False),
        ({"all": []}, "x", True),
        ({"any": [{"contains": "z"}, {"contains": "b"}]}, "ab", True),
        ({"any": []}, "x", False),
        ({"not": {"contains": "z"}}, "ab", True),
        ({"not": {"any": [{"equals": "ab"}]}}, "ab", False),
    ],
)
def test_conditions(condition: dict[str, object], output: str, holds: bool) -> None:
    assert evaluate_condition(Condition.model_validate(condition), output) is holds
