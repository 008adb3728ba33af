"""Apply semantics below the HTTP layer: validation order, determinism, provenance (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.core.scope import Scope
from cairn.engine.ingest import record_episode
from cairn.errors import InvalidInput
from cairn.store import Store
from cairn.templates import apply_template, load_catalogue

HANDOFF = load_catalogue().get("customer-support-handoff")
SCOPE = Scope.for_subject("customer:globex")
FIELDS = ["customer", "issue", "steps_taken", "next_owner"]

brace_text = st.text(
    alphabet=st.sampled_from(list("{}customerissue_ \n")) | st.characters(exclude_characters="\x00")
)
handoff_values = st.fixed_dictionaries(
    {"customer": brace_text, "issue": brace_text},
    optional={"steps_taken": brace_text, "next_owner": brace_text},
)
json_non_strings = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)


def expected_handoff(v: dict[str, str]) -> str:
    """An independent rendering of the bundled scaffold (one f-string: one pass by construction)."""
    return (
        f"Customer support handoff — {v['customer']}.\n\n"
        f"Active issue: {v['issue']}\n\n"
        f"Steps taken so far: {v.get('steps_taken', '')}\n\n"
        f"Next owner: {v.get('next_owner', '')}"
    )


@settings(max_examples=200)
@given(handoff_values)
def test_apply_is_deterministic_single_pass_and_records_provenance(values: dict[str, str]) -> None:
    first = apply_template(HANDOFF, SCOPE, values)
    second = apply_template(HANDOFF, SCOPE, dict(reversed(list(values.items()))))
    assert first.payload["content"] == second.payload["content"] == expected_handoff(values)
    assert first.payload["fields"] == values
    assert first.payload["template_id"] == "customer-support-handoff"
    assert first.payload["template_version"] == 1
    assert first.metadata == {"template": {"id": "customer-support-handoff", "version": 1}}
    assert first.type == "support.handoff_note"


@given(st.text(min_size=1).filter(lambda s: s not in FIELDS), st.text())
def test_any_undeclared_name_is_an_unknown_field(name: str, value: str) -> None:
    with pytest.raises(InvalidInput) as err:
        apply_template(HANDOFF, SCOPE, {"customer": "c", "issue": "i", name: value})
    assert err.value.code == "template_unknown_field"
    assert err.value.details["field"] == name


@given(st.sampled_from(FIELDS), json_non_strings)
def test_any_non_string_value_is_invalid(name: str, value: object) -> None:
    values: dict[str, object] = {"customer": "c", "issue": "i", name: value}
    with pytest.raises(InvalidInput) as err:
        apply_template(HANDOFF, SCOPE, values)
    assert err.value.code == "template_invalid_value"
    assert err.value.details["field"] == name


def test_every_bundled_template_applies_with_only_required_fields() -> None:
    for template in load_catalogue():
        values = {name: f"<{name}>" for name in template.required_fields}
        ep = apply_template(template, SCOPE, values)
        assert ep.type == template.episode_type
        for name in template.required_fields:
            assert f"<{name}>" in ep.payload["content"]
        with pytest.raises(InvalidInput) as err:
            apply_template(template, SCOPE, {})
        assert err.value.code == "template_missing_field"
        assert err.value.details["fields"] == template.required_fields


def test_apply_through_the_store_on_each_backend(store: Store) -> None:
    values = {"customer": "Globex Corp", "issue": "{next_owner}"}
    item = apply_template(HANDOFF, SCOPE, values, idempotency_key="k")
    ep, created = record_episode(store, "t1", item)
    again, created_again = record_episode(store, "t1", item)
    assert created and not created_again and again.id == ep.id
    (stored,) = store.episodes.list("t1", SCOPE)
    assert stored.payload == ep.payload and stored.metadata == ep.metadata
    assert "Active issue: {next_owner}\n" in stored.payload["content"]
    with pytest.raises(InvalidInput):
        record_episode(
            store, "t1", apply_template(HANDOFF, Scope.for_subject("other"), {"customer": "x"})
        )
    assert store.episodes.list("t1", Scope.for_subject("other")) == []


def test_listeners_hear_about_new_episodes_only(store: Store) -> None:
    heard: list[tuple[str, list[Scope]]] = []

    def listener(tenant: str, scopes: list[Scope]) -> None:
        heard.append((tenant, scopes))

    values = {"customer": "c", "issue": "i"}
    for _ in range(2):
        item = apply_template(HANDOFF, SCOPE, values, idempotency_key="once")
        record_episode(store, "t1", item, [listener])
    assert heard == [("t1", [SCOPE])]
