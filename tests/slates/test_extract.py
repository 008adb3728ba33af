"""JSON extraction and gate conditions (pure functions)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cairn.slates.config import Condition, GateSpec
from cairn.slates.extract import extract_json, extract_value, json_candidates, remove_span
from cairn.slates.gates import evaluate_condition
from tests.slates.conftest import SecretSchemas


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]\n", [1, 2]),
        ('Here:\n```json\n{"a": 2}\n```\nand ```\n{"a": 3}\n```', {"a": 2}),
        ('```python\n{"a": 9}\n```\n```\n{"a": 4}\n```', {"a": 4}),
        ("```json\nnot json\n```\n```json\n[5]\n```", [5]),
        ('I found {"fact": "x"} and {"fact": "y"}', {"fact": "x"}),
        ('text {"a": 1} then ```json\n{"b": 2}\n```', {"b": 2}),
        ('broken { "a": and then [1, 2]', [1, 2]),
        ('inline ```json {"a": 6} ``` and ```[7]```', {"a": 6}),  # a fence on one line
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


FACT = {
    "type": "object",
    "required": ["fact"],
    "properties": {"fact": {"type": "string", "minLength": 5}},
}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('Thinking {"step": 1}. Result: {"fact": "Rome is the capital of Italy."}', "Rome is"),
        ('{"fact": "no"} then {"fact": "Oslo is in Norway"}', "Oslo is"),
        ('```json\n{"step": 2}\n```\n```json\n{"fact": "Lima is in Peru"}\n```', "Lima is"),
        # fenced blocks come before the rest of the text
        ('{"fact": "Bern is Swiss"} ```json\n{"fact": "Kyiv 是 Ukraine\u2019s"}\n```', "Kyiv"),
        # a value nested in an earlier one is not a candidate of its own
        ('{"outer": {"fact": "nested fact"}}', None),
        ('[1, 2] {"fact": "Cairo is in Egypt"} {"fact": "later one"}', "Cairo"),
    ],
)
def test_the_first_value_that_matches_is_written(output: str, expected: str | None) -> None:
    found = extract_value(output, match=FACT, field="fact")
    if expected is None:
        assert found.reason == "schema_mismatch"
    else:
        assert found.ok and str(found.value).startswith(expected)
        assert found.span is not None
        assert '"fact"' in output[found.span[0] : found.span[1]]


def test_candidates_list_every_value_once() -> None:
    out = 'a {"x": [1, {"y": 2}]} b ```json\n{"z": 3}\n``` c [4] d {"w": "} not json {"'
    assert [c.value for c in json_candidates(out)] == [{"z": 3}, {"x": [1, {"y": 2}]}, [4]]


def test_no_candidate_qualifies_reports_the_first_reason() -> None:
    found = extract_value('{"step": 1} {"fact": "abc"}', match=FACT, field="fact")
    assert found.reason == "schema_mismatch" and "fact" in (found.detail or "")


def test_gate_without_condition_always_passes() -> None:
    gate = GateSpec.model_validate(
        {"then": {"write": {"to": {"slate": "M", "folder": "f", "file": "a.md"}}}}
    )
    assert gate.always and evaluate_condition(gate, "") and evaluate_condition(gate, "anything")
    with pytest.raises(ValidationError, match="else' never runs"):
        GateSpec.model_validate(
            {
                "then": {"write": {"slate": "M", "folder": "f", "file": "a.md"}},
                "else": {"write": {"slate": "M", "folder": "f", "file": "b.md"}},
            }
        )
    with pytest.raises(ValidationError, match="a condition needs one of"):
        Condition.model_validate({})


def test_extraction_never_fetches_a_reference_and_survives_deep_nesting(
    secret_schemas: SecretSchemas,
) -> None:
    """The validator's registry retrieves nothing, even for a schema that reached it without
    ``check_schema`` (the served schema would refuse "x")."""
    for ref in (secret_schemas.url, secret_schemas.file_uri):
        for match in ({"$ref": ref}, {"allOf": [{"$ref": ref}]}):
            got = extract_value('{"fact": "x"}', match=match, field="fact")
            assert got.reason == "schema_mismatch" and "Unresolvable" in (got.detail or "")
            assert "SECRET" not in (got.detail or "")
    assert secret_schemas.hits == []
    # JSON nested past the parser's limit is no value; what follows it still is.
    deep = "[" * 400_000 + "]" * 400_000
    assert extract_value(deep, match={"type": "array"}).reason == "no_json"
    found = extract_value("x " + "[" * 5000 + "]" * 5000 + ' {"fact": "ok"}', field="fact")
    assert found.value == "ok"


def test_the_scan_spends_a_bounded_effort_on_brackets_that_never_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each bracket starts a decode, and each failure's error counts the lines before it: an
    output of thousands of brackets made the scan quadratic (a 1 MB body, two minutes). Past
    ``SCAN_BUDGET`` the scan gives up."""
    from cairn.slates import extract

    noise = "{ not json } " * 2000
    output = noise + '{"fact": "ok"}'
    assert extract_value(output, field="fact").value == "ok"  # within the default budget
    monkeypatch.setattr(extract, "SCAN_BUDGET", 10_000)
    assert extract_value(output, field="fact").reason == "no_json"  # given up before it
    assert extract_value('{"fact": "ok"}', field="fact").value == "ok"  # a plain reply


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        ('Ok noted. ```json {"fact": "x y z"} ``` bye', "Ok noted. bye"),
        ('Paris.\n```json\n{"fact": "a"}\n```', "Paris."),
        ('Paris.\n\n```json\n{"fact": "a"}\n```\n\nMore.', "Paris.\n\nMore."),
        ('I see {"fact": "b"} now', "I see now"),
        ('Result: {"fact": "c"}. Done', "Result:. Done"),
    ],
)
def test_removing_the_match_leaves_no_fence_and_one_space(output: str, shown: str) -> None:
    found = extract_value(output, match={"type": "object"})
    assert found.span is not None
    assert remove_span(output, found.span) == shown
