"""Scaffold syntax and single-pass rendering, with Hypothesis over arbitrary values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.templates.scaffold import (
    Placeholder,
    ScaffoldSyntaxError,
    escape_literal,
    parse_scaffold,
    placeholder_names,
    render_pieces,
)

NAMES = ["a", "b", "field_2", "Other"]
names = st.sampled_from(NAMES)
# Values deliberately rich in braces and placeholder-looking text.
values_text = st.text(alphabet=st.sampled_from(list("{}ab_ 2\n—é")) | st.characters(), max_size=40)
values = st.dictionaries(names, values_text)
segments = st.lists(
    st.one_of(
        st.tuples(st.just("lit"), st.text(max_size=20)),
        st.tuples(st.just("ph"), names),
    ),
    max_size=8,
)


def test_placeholders_and_literal_braces() -> None:
    pieces = parse_scaffold('Hi {a}, use {{a}} for a literal; json: {{"k": 1}}.')
    assert pieces == ("Hi ", Placeholder("a"), ', use {a} for a literal; json: {"k": 1}.')
    assert placeholder_names(parse_scaffold("{b}{a}{b}")) == ["b", "a"]


def test_value_containing_a_placeholder_is_inserted_literally() -> None:
    pieces = parse_scaffold("{a} / {b}")
    assert render_pieces(pieces, {"a": "{b}", "b": "{a}"}) == "{b} / {a}"
    assert render_pieces(pieces, {"a": "{{x}}"}) == "{{x}} / "


def test_missing_value_renders_empty() -> None:
    assert render_pieces(parse_scaffold("[{a}]"), {}) == "[]"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("{", "line 1, column 1"),
        ("a }", "line 1, column 3"),
        ("ok\n  { a}", "line 2, column 3"),
        ("{a b}", "line 1, column 1"),
        ("{}", "line 1, column 1"),
        ("{a", "line 1, column 1"),
        ("{a-b}", "line 1, column 1"),
        ("{{a}", "line 1, column 4"),
    ],
)
def test_stray_braces_are_errors_with_position(text: str, where: str) -> None:
    with pytest.raises(ScaffoldSyntaxError, match=where):
        parse_scaffold(text)


@settings(max_examples=300)
@given(segments, values)
def test_render_is_single_pass_substitution(
    segs: list[tuple[str, str]], vals: dict[str, str]
) -> None:
    """A scaffold built from escaped literals and placeholders renders to exactly the literals
    joined with the values, whatever braces the values contain, and the same bytes twice."""
    scaffold = "".join(escape_literal(x) if kind == "lit" else "{" + x + "}" for kind, x in segs)
    expected = "".join(x if kind == "lit" else vals.get(x, "") for kind, x in segs)
    pieces = parse_scaffold(scaffold)
    first = render_pieces(pieces, vals)
    assert first == expected
    assert render_pieces(parse_scaffold(scaffold), dict(vals)) == first


@given(st.text())
def test_escape_round_trips(text: str) -> None:
    assert render_pieces(parse_scaffold(escape_literal(text)), {}) == text


@given(st.text(alphabet=st.sampled_from(list("{}ab_ ")), max_size=30))
def test_parse_either_fails_cleanly_or_round_trips(text: str) -> None:
    """Brace soup never crashes the parser; what parses re-serialises to the same pieces."""
    try:
        pieces = parse_scaffold(text)
    except ScaffoldSyntaxError:
        return
    again = "".join(
        "{" + p.name + "}" if isinstance(p, Placeholder) else escape_literal(p) for p in pieces
    )
    assert parse_scaffold(again) == pieces
