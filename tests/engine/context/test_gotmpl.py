"""The ``gotmpl`` renderer: Go templates over the ContextResult with FlowCraft's names and
functions (seed 001's GoTemplate renderer)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.core.memory import ContextItem, ContextResult, SourceRef
from cairn.engine.context.gotmpl import GoTemplateRenderer
from cairn.engine.context.render import DefaultRenderer
from cairn.errors import InvalidInput

AT = datetime(2024, 5, 7, 9, 30, tzinfo=UTC)
TEXTS = ['I grow tomatoes <daily> & "more"', "Привет, мир — 你好 🌍", "مرحبا"]


def result(truncated: bool = False) -> ContextResult:
    items = [
        ContextItem(
            id=f"i{n}",
            kind="fact" if n else "turn",
            content=text,
            score=[1.0, 0.875, 0.5][n],
            source_class="recent" if n == 0 else "long_term",
            token_count=3 + n,
            created_at=AT,
            occurred_at=AT if n == 1 else None,
            provenance=[SourceRef(type="episode", id=f"e{n}")],
            metadata={"lang": ["en", "ru", "ar"][n]},
        )
        for n, text in enumerate(TEXTS)
    ]
    return ContextResult(items=items, token_count=12, truncated=truncated)


def rendered(template: str, **kw: bool) -> str:
    return GoTemplateRenderer(template).render(result(**kw))


def test_the_issue_template_renders_each_items_content() -> None:
    assert rendered("{{range .Items}}{{.Content}}\n{{end}}") == "".join(t + "\n" for t in TEXTS)


def test_flowcrafts_own_template_and_functions() -> None:
    # The template of FlowCraft's hook test, with contentText and score.
    out = rendered("{{ range .Items }}{{ contentText .Content }}:{{ score .Score }}{{ end }}")
    assert out == f"{TEXTS[0]}:1.000{TEXTS[1]}:0.875{TEXTS[2]}:0.500"
    out = rendered(
        "{{ .TokenCount }}|{{ .Truncated }}|{{ .RecallEventID }}|"
        "{{ (index .Items 1).Content | contentJSON }}",
        truncated=True,
    )
    assert out == '12|true||{"parts":[{"type":"text","text":"Привет, мир — 你好 🌍"}]}'
    assert rendered("{{ (index .Items 0).Content | contentJSON }}") == (
        '{"parts":[{"type":"text","text":'
        '"I grow tomatoes \\u003cdaily\\u003e \\u0026 \\"more\\""}]}'
    )
    assert rendered("{{ xml (contentText (index .Items 0).Content) }}") == (
        "I grow tomatoes &lt;daily&gt; &amp; &#34;more&#34;"
    )


def test_item_fields_as_flowcraft_names_them() -> None:
    out = rendered(
        "{{ range .Items }}{{ .ID }} {{ .Kind }} {{ .SourceClass }} {{ .TokenCount }} "
        '{{ printf "%.2f" .Score }} {{ .Timestamp }} {{ (index .Sources 0).Kind }}:'
        "{{ (index .Sources 0).ID }} {{ .Metadata.lang }} [{{ .Title }}{{ .MessageRole }}]"
        "{{ if .OccurredAt }} occurred{{ end }}\n{{ end }}"
    )
    assert out.splitlines() == [
        "i0 turn recent 3 1.00 2024-05-07 09:30:00 +0000 UTC episode:e0 en []",
        "i1 fact long_term 4 0.88 2024-05-07 09:30:00 +0000 UTC episode:e1 ru [] occurred",
        "i2 fact long_term 5 0.50 2024-05-07 09:30:00 +0000 UTC episode:e2 ar []",
    ]
    assert rendered("{{ with index .Items 0 }}{{ .Content.Text }}{{ end }}") == TEXTS[0]
    assert rendered("{{ len .Items }} {{ if .Truncated }}cut{{ else }}all{{ end }}") == "3 all"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ .Itemz }}", "can't evaluate field Itemz in type memory.ContextResult"),
        ("{{ range .Items }}{{ .Metadata.nope }}{{ end }}", 'map has no entry for key "nope"'),
        ("{{ range .Items }}{{ xml .Content }}{{ end }}", "xml needs a string"),
        ('{{ score "x" }}', "score needs a number"),
        ("{{ contentText 3 }}", "contentText needs an item's .Content"),
    ],
)
def test_missing_keys_and_bad_calls_are_errors(template: str, message: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        rendered(template)
    assert exc.value.code == "template_error" and message in exc.value.message
    assert "line 1, column" in exc.value.message


def test_syntax_errors_are_invalid_template_with_position() -> None:
    with pytest.raises(InvalidInput) as exc:
        GoTemplateRenderer("ok\n{{ range .Items }}")
    assert exc.value.code == "invalid_template"
    assert "line 2, column 1" in exc.value.message


def test_blank_template_is_the_default_block_and_max_chars_is_a_hard_limit() -> None:
    assert GoTemplateRenderer("\n").render(result()) == DefaultRenderer().render(result())
    with pytest.raises(InvalidInput) as exc:
        GoTemplateRenderer("{{ range .Items }}{{ .Content }}{{ end }}", max_chars=10).render(
            result()
        )
    assert exc.value.code == "render_too_large" and "over max_chars 10" in exc.value.message
    with pytest.raises(InvalidInput):
        GoTemplateRenderer("x", max_chars=-1)


def test_the_docs_example_renders_every_script_escaped() -> None:
    template = (
        "{{- range .Items }}\n"
        '<item kind="{{ .Kind }}" score="{{ score .Score }}">'
        "{{ xml (contentText .Content) }}</item>\n"
        "{{- end }}\n"
    )
    out = GoTemplateRenderer(template, max_chars=8000).render(result())
    assert out.splitlines()[1:] == [
        '<item kind="turn" score="1.000">I grow tomatoes &lt;daily&gt; &amp; &#34;more&#34;</item>',
        '<item kind="fact" score="0.875">Привет, мир — 你好 🌍</item>',
        '<item kind="fact" score="0.500">مرحبا</item>',
    ]
