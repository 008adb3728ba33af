"""The text checks every edge uses: NUL (a field type, a value check, a search of nested
data) and lone surrogates (a search of nested data)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from cairn.core.text import (
    NoNul,
    check_no_nul,
    has_lone_surrogate,
    has_nul,
    lone_surrogate_path,
    nul_path,
)


class _Form(BaseModel):
    name: NoNul
    note: NoNul | None = None


def test_no_nul_field_names_the_field() -> None:
    assert _Form(name="Мария 李").name == "Мария 李"
    with pytest.raises(ValidationError) as exc:
        _Form(name="ok", note="a\x00b")
    (error,) = exc.value.errors()
    assert error["loc"] == ("note",) and "must not contain a NUL character" in error["msg"]


def test_check_no_nul_says_what() -> None:
    assert check_no_nul("ضوء") == "ضوء"
    with pytest.raises(ValueError, match=r"^query\.board must not contain a NUL character$"):
        check_no_nul("x\x00", "query.board")


def test_nested_data() -> None:
    data = {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "\x00"}]}
    assert nul_path(data) == "messages.1.content" and has_nul(data)
    assert has_nul({"k\x00": 1}) and not has_nul({"k": ["v", 1, None]})


def test_lone_surrogates_in_nested_data() -> None:
    """The rule the API applies to a body and ``cairn ingest`` to a record: a surrogate with
    no partner (which JSON may escape) anywhere, keys included; a real pair is one character."""
    data = json.loads('{"payload": {"items": ["ok", {"note": "a\\ud800"}]}}')
    assert lone_surrogate_path(data) == "payload.items.1.note" and has_lone_surrogate(data)
    assert lone_surrogate_path(json.loads('{"\\udfff": 1}')) == "\udfff"
    assert lone_surrogate_path("\udcff") == ""
    assert not has_lone_surrogate(json.loads('{"emoji": "\\ud83d\\ude00", "n": [1, null]}'))
    assert not has_lone_surrogate({"k": "Мария 李 \x00"})
