"""The HTTP recall harness (``cairn bench recall`` / ``locomo``): a tiny dataset through a real
server on both backends, the budget check, the evidence matcher and the JSON output."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from cairn.bench import recall as harness
from cairn.bench.evidence import (
    contains_turn,
    normalize_context,
    normalize_turn,
    shadowed_turns,
)
from cairn.bench.recall_data import (
    builtin_names,
    combined,
    dataset_specs,
    load_dataset,
    parse_dataset,
)
from cairn.bench.recall_report import (
    BackendReport,
    Outcome,
    RecallReport,
    format_report,
    format_summary,
)
from cairn.cli.main import app
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.errors import InvalidInput
from cairn.store import open_store
from cairn.store.database import normalize_url
from tests.conftest import PG_ADMIN_URL

TINY: dict[str, Any] = {
    "format": "cairn-recall/1",
    "name": "tiny",
    "language": "en",
    "conversations": [
        {
            "id": "tiny-1",
            "speakers": ["Maya", "Tom"],
            "sessions": [
                {
                    "id": "s1",
                    "date": "2024-03-02T18:30:00Z",
                    "turns": [
                        {"id": "s1:1", "speaker": "Maya", "text": "I started at Acme as a welder."},
                        {"id": "s1:2", "speaker": "Tom", "text": "haha nice"},
                        {
                            "id": "s1:3",
                            "speaker": "Maya",
                            "text": "We're adopting a greyhound called Biscuit & she's shy!",
                            "caption": "a grey dog on a sofa",
                        },
                    ],
                },
                {
                    "id": "s2",
                    "date": "2024-04-10T09:00:00Z",
                    "turns": [
                        {"id": "s2:1", "speaker": "Tom", "text": "My sister moved to Lisbon."},
                        {"id": "s2:2", "speaker": "Maya", "text": "ok thanks"},
                    ],
                },
            ],
            "questions": [
                {
                    "question": "What is the greyhound called?",
                    "evidence": ["s1:3"],
                    "category": "a",
                },
                {"question": "Where did Tom's sister move?", "evidence": ["s2:1"], "category": "b"},
                {"question": "Where does Maya work?", "evidence": ["s1:1"], "category": "b"},
            ],
        }
    ],
}


def test_matcher_unescapes_the_context_and_normalises_whitespace() -> None:
    context = normalize_context(
        "<item>Maya: We&#x27;re adopting a greyhound called\n  Biscuit &amp; she&#x27;s shy!</item>"
    )
    assert contains_turn(
        context, normalize_turn("We're adopting a greyhound called Biscuit & she's shy!")
    )
    # without unescaping the apostrophe and ampersand the text would not be found
    assert not contains_turn(
        normalize_turn("We&#x27;re adopting"), normalize_turn("We're adopting")
    )


def test_matcher_wants_the_whole_turn_not_a_fragment() -> None:
    context = normalize_context("Maya: I like teapots. Tom: I started at Acme")
    assert not contains_turn(context, normalize_turn("I like tea"))  # inside a longer word
    assert not contains_turn(context, normalize_turn("I started at Acme as a welder."))  # cut short
    assert contains_turn(context, normalize_turn("I started at  Acme"))
    composed, decomposed = "Genève", "Gene\u0300ve"
    assert contains_turn(normalize_context(f"x {decomposed} y"), normalize_turn(composed))
    zh = normalize_context("张伟\uff1a我住在北京。")  # a full-width colon before the turn
    assert contains_turn(zh, normalize_turn("我住在北京。"))
    assert not contains_turn(normalize_context("我住在北京市"), normalize_turn("我住在北京"))


def test_shadowed_turns_are_reported() -> None:
    assert shadowed_turns({"a": "haha", "b": "haha that is great", "c": "ok"}) == {"a"}


def test_dataset_validation_names_the_field() -> None:
    bad = json.loads(json.dumps(TINY))
    bad["conversations"][0]["questions"][0]["evidence"] = ["s9:9"]
    with pytest.raises(InvalidInput, match=r"questions\[0\].*s9:9"):
        parse_dataset(bad)


def test_builtin_datasets_load_and_their_evidence_is_unshadowed() -> None:
    names = builtin_names()
    assert "heldout-en" in names
    assert {
        f"multilingual-{lang}" for lang in ("en", "zh", "ja", "ru", "de", "ar", "es", "fr")
    } <= set(names)
    assert {f"multilingual2-{lang}" for lang in ("en", "de", "zh", "ja", "ru", "ar")} <= set(names)
    assert {
        f"multilingual3-{lang}" for lang in ("en", "zh", "ja", "ru", "ar", "de", "ko", "es")
    } <= set(names)
    fourth = {f"multilingual4-{lang}" for lang in ("en", "fr", "it", "pt", "nl", "pl", "tr")}
    assert fourth <= set(names)
    fifth = {f"multilingual5-{lang}" for lang in ("en", "ar", "fa", "he", "hi", "th", "uk")}
    assert fifth <= set(names)
    sixth = {f"multilingual6-{lang}" for lang in ("en", "he", "hi", "fa", "uk", "el")}
    assert sixth <= set(names)
    seventh = {f"multilingual7-{lang}" for lang in ("en", "el", "uk", "hi")}
    eighth = {f"multilingual8-{lang}" for lang in ("en", "th", "vi", "id")}
    assert seventh | eighth <= set(names)
    assert {"longform-en", "longform2-en", "longform-zh", "longform-ru"} <= set(names)
    for name in names:
        dataset = load_dataset(name)
        for conv in dataset.conversations:
            texts = {t.id: normalize_turn(t.text) for t in conv.turns}
            evidence = {e for q in conv.questions for e in q.evidence}
            assert conv.questions and not evidence & shadowed_turns(texts), (name, conv.id)


def test_every_shipped_question_is_scoreable_in_its_script() -> None:
    """A context that holds an evidence turn, escaped as the server escapes, is a hit; one that
    holds every other turn is not (the harness can score zh, ja, ar, ru … at all)."""
    for name in builtin_names():
        for conv in load_dataset(name).conversations:
            turns = {t.id: t for t in conv.turns}
            for q in conv.questions:
                evidence = turns[q.evidence[0]]
                shown = html.escape(f"{evidence.speaker}: {evidence.text}", quote=True)
                assert contains_turn(normalize_context(shown), normalize_turn(evidence.text))
                others = "\n".join(
                    html.escape(f"{t.speaker}: {t.text}")
                    for t in conv.turns
                    if t.id not in q.evidence
                )
                assert not any(
                    contains_turn(normalize_context(others), normalize_turn(turns[e].text))
                    for e in q.evidence
                ), (name, q.question)


def test_pooled_dataset_is_one_subject_with_prefixed_ids() -> None:
    two = json.loads(json.dumps(TINY))
    second = json.loads(json.dumps(TINY["conversations"][0]))
    second["id"] = "tiny-2"
    two["conversations"].append(second)
    pooled = parse_dataset(two).pooled()
    (pool,) = pooled.conversations
    assert pool.id == "tiny-pool" and len(pool.turns) == 10 and len(pool.questions) == 6
    assert pool.questions[3].evidence == ("tiny-2/s1:3",)
    assert {t.session for t in pool.turns} == {"tiny-1/s1", "tiny-1/s2", "tiny-2/s1", "tiny-2/s2"}
    assert [t.at for t in pool.turns] == sorted(t.at for t in pool.turns)


def test_several_datasets_name_their_sets_and_load_together() -> None:
    names = dataset_specs("heldout-en, multilingual3-*,heldout-en")
    assert names[0] == "heldout-en" and names.count("heldout-en") == 1
    assert names[1:] == sorted(n for n in builtin_names() if n.startswith("multilingual3-"))
    with pytest.raises(InvalidInput, match="matches"):
        dataset_specs("nothing-like-this-*")
    first = parse_dataset(TINY)
    other = json.loads(json.dumps(TINY))
    other["name"], other["conversations"][0]["id"] = "tiny2", "tiny-2"
    both = combined([first, parse_dataset(other)])
    assert [c.id for c in both.conversations] == ["tiny-1", "tiny-2"]
    with pytest.raises(InvalidInput, match="tiny-1"):
        combined([first, first])


def test_a_combined_run_is_reported_per_dataset() -> None:
    first = parse_dataset(TINY)
    other = json.loads(json.dumps(TINY))
    other["name"], other["conversations"][0]["id"] = "tiny2", "tiny-2"
    second = parse_dataset(other)

    def outcome(conv: str, hit: bool) -> Outcome:
        return Outcome(conv, "q", "a", ("s1:1",), {250: hit}, {250: hit}, {250: 200}, {250: 3})

    run = BackendReport("sqlite", (250,), [outcome("tiny-1", True), outcome("tiny-2", False)])
    run.shadowed_by_conversation = {"tiny-1": 0, "tiny-2": 2}
    parts = harness.split(RecallReport("tiny+tiny2", (250,), {"sqlite": run}), [first, second])
    assert [p.dataset for p in parts] == ["tiny", "tiny2"]
    assert [p.backends["sqlite"].recall(250) for p in parts] == [1.0, 0.0]
    assert [p.backends["sqlite"].shadowed_evidence for p in parts] == [0, 2]
    table = format_summary(parts)
    assert "| tiny | sqlite | 1 | 1.000 |" in table and "| tiny2 | sqlite | 1 | 0.000 |" in table


def _over_budget_client() -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        text = "My sister moved to Lisbon. " + "filler " * body["max_tokens"]
        return httpx.Response(200, json={"assembled_context": text, "provenance": {"items": []}})

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://bench")


def test_an_over_budget_context_is_flagged_and_never_counts() -> None:
    conv = parse_dataset(TINY).conversations[0]
    ids = {t.id: f"ep-{t.id}" for t in conv.turns}
    with _over_budget_client() as client:
        outcomes, _ = harness.ask(client, conv, harness.Scorer(conv, ids), (50, 100))
    report = BackendReport("sqlite", (50, 100), outcomes)
    assert outcomes[1].hits[50]  # the text is there ...
    assert report.over_budget() == {"50": 3, "100": 3}
    assert report.recall(50) == 0.0  # ... but the context broke its budget
    text = format_report(RecallReport("tiny", (50, 100), {"sqlite": report}))
    assert "3 OVER BUDGET" in text and "FAIL: 6 contexts" in text


def test_cli_exits_1_when_a_context_is_over_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = parse_dataset(TINY).conversations[0]
    outcome = Outcome(conv.id, "q", "a", ("s1:1",), {250: True}, {250: True}, {250: 251}, {250: 1})
    fake = RecallReport("tiny", (250,), {"sqlite": BackendReport("sqlite", (250,), [outcome])})
    monkeypatch.setattr(harness, "run", lambda *a, **k: fake)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    result = CliRunner().invoke(app, ["bench", "recall", "--dataset", str(path), "--json"])
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["over_budget"] == 1 and out["budget_recall"] == {"250": 0.0}


@pytest.mark.slow
@pytest.mark.postgres
def test_harness_through_real_servers_on_both_backends() -> None:
    dataset = parse_dataset(TINY)
    report = harness.run(
        dataset, backends=("sqlite", "postgres"), budgets=(60, 1000), pg_url=PG_ADMIN_URL
    )
    assert set(report.backends) == {"sqlite", "postgres"}
    for name, backend in report.backends.items():
        assert backend.questions == 3 and backend.memories > 0, name
        assert backend.over_budget() == {"60": 0, "1000": 0}, name
        assert backend.recall(1000) == 1.0, name  # the whole conversation fits
        assert all(o.tokens[60] <= 60 for o in backend.outcomes)
        assert backend.recall(60) <= backend.recall(1000)
        shares = [o.vectors for o in backend.outcomes]
        assert all(v is not None and 0.0 <= v <= 1.0 for v in shares), shares
    out = report.to_json()
    assert 0.0 <= out["backends"]["sqlite"]["vectors_when_asked"] <= 1.0
    assert out["backends"]["postgres"]["by_category"]["b"]["questions"] == 2


@pytest.mark.slow
def test_cli_json_keys_and_details(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    details = tmp_path / "details.jsonl"
    args = ["bench", "recall", "--dataset", str(path), "--backend", "sqlite", "--json"]
    result = CliRunner().invoke(app, [*args, "--questions", "2", "--details", str(details)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(out["budget_recall"]) == {"250", "500", "1000", "2000", "4000"}
    assert out["questions"] == 2 and out["over_budget"] == 0
    sqlite = out["backends"]["sqlite"]
    assert {"budget_recall", "by_category", "provenance_recall", "over_budget"} <= set(sqlite)
    lines = [json.loads(line) for line in details.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["backend"] == "sqlite"


def test_the_vector_probe_counts_the_subjects_memories_with_vectors(db_url: str) -> None:
    """What "vectors when asked" reports: of one subject's memories (no other subject's, no
    deleted one; a superseded one counts), the share whose vector is written."""
    store = open_store(db_url)
    try:
        store.episodes.append_many(
            "default",
            [
                NewEpisode(
                    scope=Scope.for_subject(subject),
                    source="test",
                    type="conversation.turn",
                    payload={"messages": [{"role": "user", "name": "Ana", "content": said}]},
                    session_id="s1",
                )
                for subject in ("ana", "bo")
                for said in (
                    "I moved to Lisbon in May.",
                    "My sister Rita plays cello.",
                    "We adopted a grey cat.",
                    "I work at the harbour office.",
                )
            ],
        )
        for subject in ("ana", "bo"):
            compile_scope(store, "default", Scope.for_subject(subject))
    finally:
        store.close()
    probe = harness.VectorProbe(db_url)
    try:
        assert probe.share("ana") == 0.0
        engine = create_engine(normalize_url(db_url))
        with engine.begin() as conn:
            seqs = (
                conn.execute(text("SELECT seq FROM memories WHERE user_id = 'ana' ORDER BY seq"))
                .scalars()
                .all()
            )
            assert len(seqs) >= 4
            marked = seqs[: len(seqs) // 2]
            conn.execute(
                text("INSERT INTO memory_embeddings (seq, embedding) VALUES (:s, :e)"),
                [{"s": seq, "e": bytes(8)} for seq in marked],
            )
            conn.execute(
                text("UPDATE memories SET status = 'superseded' WHERE seq = :s"),
                {"s": seqs[-1]},
            )
            # Forgetting a memory wipes its vector (``cairn.store.lifecycle``): it counts nowhere.
            conn.execute(
                text("UPDATE memories SET status = 'deleted' WHERE seq = :s"),
                {"s": seqs[-2]},
            )
        engine.dispose()
        assert seqs[-2] not in marked
        assert probe.share("ana") == len(marked) / (len(seqs) - 1)
        assert probe.share("bo") == 0.0
        assert probe.share("nobody") == 0.0
    finally:
        probe.close()
