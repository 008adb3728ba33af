"""The Go text/template interpreter (cairn.engine.gotemplate): syntax, semantics, errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cairn.engine.gotemplate import (
    GoStruct,
    GoTemplate,
    TemplateExecError,
    TemplateSyntaxError,
)

ITEM = GoStruct("memory.ContextItem", {"Kind": "fact", "Score": 0.875, "Tags": ["a", "b"]})
DATA: dict[str, Any] = {
    "Items": [
        GoStruct("memory.ContextItem", {"Kind": "fact", "Score": 0.875, "N": 1}),
        GoStruct("memory.ContextItem", {"Kind": "turn", "Score": 0.5, "N": 2}),
        GoStruct("memory.ContextItem", {"Kind": "fact", "Score": 0.25, "N": 3}),
    ],
    "Name": "Grüße 你好 🌍",
    "Empty": [],
    "Meta": {"b": "2", "a": "1"},
    "Zero": 0,
    "Nil": None,
    "When": datetime(2024, 5, 7, 9, 30, tzinfo=UTC),
    "Item": ITEM,
}


def render(source: str, data: Any = None) -> str:
    return GoTemplate(source).render(DATA if data is None else data)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("plain text, no actions", "plain text, no actions"),
        ("{{ .Name }}", "Grüße 你好 🌍"),
        ("{{.Item.Kind}}/{{ .Item.Score }}", "fact/0.875"),
        ("{{range .Items}}{{.Kind}}\n{{end}}", "fact\nturn\nfact\n"),
        ("{{ range $i, $e := .Items }}{{ $i }}={{ $e.N }} {{ end }}", "0=1 1=2 2=3 "),
        ("{{ range $e := .Items }}{{ $e.N }}{{ end }}", "123"),
        ("{{ range .Empty }}x{{ else }}none{{ end }}", "none"),
        ("{{ range $k, $v := .Meta }}{{ $k }}{{ $v }}{{ end }}", "a1b2"),
        ("{{ range 3 }}{{ . }}{{ end }}", "012"),
        ("{{ range .Items }}{{ if eq .N 2 }}{{ continue }}{{ end }}{{ .N }}{{ end }}", "13"),
        ("{{ range .Items }}{{ if eq .N 2 }}{{ break }}{{ end }}{{ .N }}{{ end }}", "1"),
        ("{{ if .Empty }}a{{ else if .Zero }}b{{ else if .Name }}c{{ else }}d{{ end }}", "c"),
        ("{{ if .Nil }}a{{ else }}b{{ end }}", "b"),
        ("{{ with .Item }}{{ .Kind }}{{ end }}", "fact"),
        ("{{ with .Empty }}x{{ else }}empty{{ end }}", "empty"),
        ("{{ with .Zero }}x{{ else with .Name }}{{ . }}{{ end }}", "Grüße 你好 🌍"),
        ("a  {{- .Zero -}}  b", "a0b"),
        ("a \n {{- /* a comment */ -}} \n b", "ab"),
        ("{{/* only a comment */}}x", "x"),
        ("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
        ("{{ $ := 1 }}", None),  # cannot declare $ (a syntax error, tested below)
        ("{{ .Items | len }}", "3"),
        ('{{ "abc" | printf "%s-%s" "x" }}', "x-abc"),
        ("{{ (index .Items 1).Kind }}", "turn"),
        ('{{ index .Meta "a" }}{{ index .Meta "zz" }}', "1<no value>"),
        ("{{ len .Name }}", str(len("Grüße 你好 🌍".encode()))),  # Go counts bytes
        ('{{ slice "abcdef" 1 3 }}', "bc"),
        ('{{ print 1 2 "a" "b" 3 }}', "1 2ab3"),
        ('{{ println 1 "a" }}', "1 a\n"),
        ('{{ and 1 0 2 }} {{ or 0 "" "x" }} {{ not .Zero }}', "0 x true"),
        ("{{ or .Name .Missing }}", "Grüße 你好 🌍"),  # short-circuit: .Missing never evaluated
        (
            '{{ eq .Zero 0 }} {{ ne "a" "b" }} {{ lt 1 2.5 }} {{ ge "b" "a" }}',
            "true true true true",
        ),
        ('{{ eq "x" "a" "x" }}', "true"),
        ('{{ html "<a href=\'x\'>&\\"</a>" }}', "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;"),
        ('{{ urlquery "a b&c" }}', "a+b%26c"),
        (
            "{{ \"tab\\there\" }} {{ `raw\\n` }} {{ 'x' }} {{ 0x1F }} {{ -3 }} {{ 1.5e3 }}",
            "tab\there raw\\n 120 31 -3 1500",
        ),
        ("{{ 1e6 }} {{ 0.000012 }} {{ 100000.0 }} {{ 2.0 }}", "1e+06 1.2e-05 100000 2"),
        (
            "{{ .Meta }} {{ .Empty }} {{ .Item.Tags }} {{ .Nil }}",
            "map[a:1 b:2] [] [a b] <no value>",
        ),
        ("{{ .When }}", "2024-05-07 09:30:00 +0000 UTC"),
        ("{{ true }} {{ nil | print }}", "true <nil>"),
    ],
)
def test_render(source: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(TemplateSyntaxError):
            GoTemplate(source)
        return
    assert render(source) == expected


@pytest.mark.parametrize(
    ("fmt", "args", "expected"),
    [
        ("%s|%v|%q", '"Grüße" "x" "a\\"b"', 'Grüße|x|"a\\"b"'),
        ("%d %5d %-5d| %05d %+d", "42 42 42 42 42", "42    42 42   | 00042 +42"),
        (
            "%.2f %.3f %f %e %g",
            "0.875 .Zero 1.5 1234.5678 0.5",
            "0.88 %!f(int=0) 1.500000 1.234568e+03 0.5",
        ),
        ("%x %X %o %b %c", "255 255 8 5 65", "ff FF 10 101 A"),
        ("%t %v %T %T", "true .Item .Name .Items", "true {fact 0.875 [a b]} string []interface {}"),
        ("%.3s|%6s|%-6s|", '"abcdef" "ab" "ab"', "abc|    ab|ab    |"),
        ("100%% %d", "7", "100% 7"),
        ("%d %s", '"x"', "%!d(string=x) %!s(MISSING)"),
        ("%d", "1 2", "1%!(EXTRA int=2)"),
        ("%s", ".Nil", "%!s(<nil>)"),
        ("tail %", "", "tail %!(NOVERB)"),
    ],
)
def test_printf(fmt: str, args: str, expected: str) -> None:
    assert render(f'{{{{ printf "{fmt}" {args} }}}}') == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ .Items", "line 1, column 1: unclosed action"),
        ("a\n  {{ if .Name }}x", "line 2, column 3: unexpected end of template: {{if}} has no"),
        ("{{ end }}", "line 1, column 1: unexpected {{end}}"),
        ("{{ else }}", "line 1, column 1: unexpected {{else}}"),
        ("{{ nope 1 }}", 'line 1, column 4: function "nope" not defined'),
        ("{{ $y }}", "line 1, column 4: undefined variable '$y'"),
        ("{{ if true }}{{ $v := 1 }}{{ end }}{{ $v }}", "undefined variable '$v'"),
        ("{{ break }}", "{{break}} outside {{range}}"),
        ('{{ define "x" }}{{ end }}', "{{define}} is not supported"),
        ('{{ template "x" }}', "{{template}} is not supported"),
        ('{{ "unterminated }}', "unterminated quoted string"),
        ("{{ 1 | }}", "missing command after |"),
        ("{{ | 1 }}", "missing command before |"),
        ("{{ ( .Name }}", "unclosed left paren"),
        ("{{ .Name ! }}", "unexpected '!' in action"),
        ("{{ if }}{{ end }}", "missing value for if"),
        ("{{ range .Items }}{{ else }}{{ else }}{{ end }}", "has no {{end}} after its {{else}}"),
        ("{{/* open", "unclosed comment"),
        ('{{ "\\q" }}', "unknown escape sequence \\q"),
        ("{{}}", "missing value for command"),
    ],
)
def test_syntax_errors_name_the_position(source: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError) as exc:
        GoTemplate(source)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ .Missing }}", 'line 1, column 4: map has no entry for key "Missing"'),
        (
            "x\n{{ range .Items }}{{ .Nope }}{{ end }}",
            "line 2, column 22: can't evaluate field Nope in type memory.ContextItem",
        ),
        ("{{ .Name.Length }}", "can't evaluate field Length in type string"),
        ("{{ .Nil.X }}", "nil pointer evaluating X"),
        ("{{ .Name 1 }}", "can't give argument to non-function .Name"),
        ("{{ 1 | .Name }}", "can't give argument to non-function .Name"),
        ("{{ len 3 }}", "error calling len: len of type int"),
        ("{{ index .Items 9 }}", "error calling index: index out of range: 9"),
        ('{{ lt 1 "a" }}', "error calling lt: lt: incompatible types for comparison"),
        ("{{ eq .Items 1 }}", "non-comparable type"),
        ("{{ range .Name }}{{ end }}", "range can't iterate over"),
        ("{{ not }}", "wrong number or type of args for not"),
        ("{{ printf 3 }}", "printf: format must be a string"),
        ('{{ printf "%.2000000000f" 1.0 }}', "printf: a width or precision over 999,999"),
        ('{{ printf "%1000000000d" 1 }}', "printf: a width or precision over 999,999"),
    ],
)
def test_execution_errors_name_the_position(source: str, message: str) -> None:
    with pytest.raises(TemplateExecError) as exc:
        render(source)
    assert message in str(exc.value)


def test_variables_are_scoped_to_their_block_and_range_restores_dot() -> None:
    src = (
        "{{ $outer := .Name }}{{ range .Items }}{{ $inner := .N }}{{ $inner }}{{ $outer | len }}"
        ",{{ end }}{{ $ | len }}"
    )
    n = len(DATA["Name"].encode())
    assert render(src) == f"1{n},2{n},3{n},{len(DATA)}"


def test_methods_without_arguments_and_text_of_structs() -> None:
    content = GoStruct("message.Content", {"Parts": []}, {"Text": lambda: "hi"}, text="shown")
    data = {"C": content}
    assert (
        GoTemplate('{{ .C.Text }}|{{ .C }}|{{ printf "%s" .C }}').render(data) == "hi|shown|shown"
    )


def test_functions_can_be_added_and_piped() -> None:
    t = GoTemplate('{{ .Name | shout | printf "<%s>" }}', {"shout": lambda s: s.upper() + "!"})
    assert t.render(DATA) == "<GRÜSSE 你好 🌍!>"
