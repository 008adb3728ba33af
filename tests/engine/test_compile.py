# ruff: noqa: RUF001 -- sentences in many scripts
"""The heuristic compiler through ``compile_scope`` on both backends: units, determinism,
idempotency, supersession, dedup."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.compile.heuristic import HeuristicCompiler
from cairn.engine.compile.runner import PLAN_ATTEMPTS
from cairn.engine.compile.text import (
    first_clause,
    note_chunks,
    resolve_dates,
    sentences,
    text_weight,
)
from cairn.engine.lifecycle import delete_episode
from cairn.store import Store

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TENANT = "t1"


def turn(
    scope: Scope,
    text: str,
    *,
    name: str = "Caroline",
    minutes: int = 0,
    session: str | None = "s1",
    key: str | None = None,
) -> NewEpisode:
    return NewEpisode(
        scope=scope,
        source="test",
        type="conversation.turn",
        payload={"messages": [{"role": "user", "name": name, "content": text}]},
        session_id=session,
        idempotency_key=key,
        occurred_at=T0 + timedelta(minutes=minutes),
    )


CONVERSATION = [
    ("Caroline", "Hi Mel! I went to the LGBTQ support group yesterday and it was powerful."),
    ("Melanie", "That's great. What did you take away from it?"),
    ("Caroline", "The transgender stories were inspiring. I work at Bright Futures now."),
    ("Melanie", "I painted a lake sunrise last year. My favorite color is blue."),
    ("Caroline", "I'm researching adoption agencies in Boston."),
    ("Melanie", "Good luck! I love camping with my kids."),
]


def ingest_conversation(store: Store, scope: Scope, session: str = "s1") -> list[Any]:
    items = [
        turn(scope, text, name=name, minutes=i, session=session, key=f"{session}-{i}")
        for i, (name, text) in enumerate(CONVERSATION)
    ]
    episodes, _ = store.episodes.append_many(TENANT, items)
    return episodes


def snapshot(store: Store, scope: Scope) -> list[tuple[Any, ...]]:
    """Everything compiled about a memory, except when it was written."""
    return sorted(
        (
            str(m.id),
            m.kind,
            m.content,
            m.summary,
            m.confidence,
            m.valid_from,
            m.valid_to,
            m.status,
            [str(i) for i in m.source_episode_ids],
            m.metadata,
            m.session_id,
            str(m.superseded_by),
        )
        for m in store.memories.list(TENANT, scope, limit=10_000)
    )


def test_turns_facts_and_summary(store: Store) -> None:
    scope = Scope.for_subject("alice")
    episodes = ingest_conversation(store, scope)
    result = compile_scope(store, TENANT, scope)
    assert result.memories_created == len(result.memories) > 0
    assert not result.has_more and result.remaining_episodes == 0
    kinds = {m.kind for m in result.memories}
    assert {"turn", "profile_fact", "episode_summary"} <= kinds
    turns = [m for m in result.memories if m.kind == "turn"]
    assert len(turns) == len(CONVERSATION)
    first = turns[0]
    assert first.content.startswith("Caroline: Hi Mel!")
    assert first.metadata["speaker"] == "Caroline"
    assert first.metadata["date"] == "2023-05-08"
    assert "2023-05-07" in first.metadata["dates"]  # "yesterday", resolved
    assert "LGBTQ" in first.metadata["entities"]
    assert first.source_episode_ids == [episodes[0].id]
    facts = {m.content for m in result.memories if m.kind == "profile_fact"}
    assert "Caroline works at Bright Futures" in facts
    assert "Melanie's favorite color is blue" in facts
    assert all(m.source_episode_ids for m in result.memories)


def test_same_episodes_give_the_same_memories_byte_for_byte(tmp_path: Any) -> None:
    from cairn.store import open_store

    snaps = []
    for name in ("a", "b"):
        s = open_store(f"sqlite:///{tmp_path / name}.db")
        scope = Scope.for_subject("alice")
        ingest_conversation(s, scope)
        compile_scope(s, TENANT, scope)
        snaps.append([x[1:] for x in snapshot(s, scope)])  # ids include episode ids
        s.close()
    # Episode ids differ between databases; everything else is identical.
    strip = [[x[:7] + x[8:] for x in snap] for snap in snaps]
    assert strip[0] == strip[1]


def test_incremental_compile_equals_one_compile(store: Store) -> None:
    """Compiling turn by turn gives the same memories as compiling all at once."""
    whole, parts = Scope.for_subject("whole"), Scope.for_subject("parts")
    ingest_conversation(store, whole)
    compile_scope(store, TENANT, whole)
    for i, (name, text) in enumerate(CONVERSATION):
        store.episodes.append_many(TENANT, [turn(parts, text, name=name, minutes=i, key=f"s1-{i}")])
        compile_scope(store, TENANT, parts)

    def active(scope: Scope) -> list[tuple[Any, ...]]:
        return sorted(
            (m.kind, m.content, m.metadata)
            for m in store.memories.list(TENANT, scope, limit=1000, include_superseded=False)
        )

    assert active(whole) == active(parts)


def test_compile_is_idempotent(store: Store) -> None:
    scope = Scope.for_subject("alice")
    ingest_conversation(store, scope)
    first = compile_scope(store, TENANT, scope)
    before = snapshot(store, scope)
    again = compile_scope(store, TENANT, scope)
    assert first.memories_created > 0
    assert again.memories_created == 0 and again.memories == []
    assert snapshot(store, scope) == before


def test_batches_report_has_more(store: Store) -> None:
    scope = Scope.for_subject("alice")
    ingest_conversation(store, scope)
    r = compile_scope(store, TENANT, scope, max_episodes=4)
    assert r.has_more and r.remaining_episodes == 2
    r = compile_scope(store, TENANT, scope, max_episodes=4)
    assert not r.has_more and r.remaining_episodes == 0


def test_new_employer_supersedes_the_old_and_history_stays(store: Store) -> None:
    scope = Scope.for_subject("bob")
    store.episodes.append_many(
        TENANT,
        [
            turn(scope, "I work at Acme Corp.", name="Bob", minutes=0, session=None),
            turn(scope, "Big news: I work at Globex now.", name="Bob", minutes=60, session=None),
        ],
    )
    compile_scope(store, TENANT, scope)
    facts = [m for m in store.memories.list(TENANT, scope, kind="profile_fact")]
    old = next(m for m in facts if "Acme" in m.content)
    new = next(m for m in facts if "Globex" in m.content)
    assert old.status == "superseded" and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert new.status == "active" and new.valid_to is None
    active = store.memories.list(TENANT, scope, include_superseded=False, kind="profile_fact")
    assert [m.content for m in active] == ["Bob works at Globex"]

    # Back to Acme later: a new memory, not the resurrected old one.
    store.episodes.append_many(
        TENANT, [turn(scope, "I work at Acme Corp again.", name="Bob", minutes=120, session=None)]
    )
    compile_scope(store, TENANT, scope)
    history = store.memories.list(TENANT, scope, kind="profile_fact")
    assert [m.status for m in history] == ["superseded", "superseded", "active"]
    assert history[-1].content == "Bob works at Acme Corp"


def test_an_older_fact_arriving_late_is_history_not_the_current_value(store: Store) -> None:
    scope = Scope.for_subject("dora")
    store.episodes.append_many(
        TENANT, [turn(scope, "I work at Microsoft.", name="Dora", minutes=600, session=None)]
    )
    compile_scope(store, TENANT, scope)
    store.episodes.append_many(
        TENANT,
        [  # said earlier, recorded later
            turn(scope, "I work at Google.", name="Dora", minutes=0, session=None)
        ],
    )
    result = compile_scope(store, TENANT, scope)
    facts = {m.content: m for m in store.memories.list(TENANT, scope, kind="profile_fact")}
    current, late = facts["Dora works at Microsoft"], facts["Dora works at Google"]
    assert current.status == "active" and current.valid_to is None
    assert late.status == "superseded" and late.superseded_by == current.id
    assert late.valid_to == current.valid_from and late.valid_from < current.valid_from
    # The compile's response says the same as the store.
    (reported,) = [m for m in result.memories if m.id == late.id]
    assert reported.status == "superseded" and reported.superseded_by == current.id


def test_facts_whose_names_start_with_a_capital_of_any_script(store: Store) -> None:
    scope = Scope.for_subject("emilie")
    said = [
        "I live in Berlin.",
        "My name is Émilie.",
        "I work at Škoda.",
        "I live in Örebro now.",  # after Berlin: the current value
    ]
    store.episodes.append_many(
        TENANT, [turn(scope, t, minutes=60 * n, session=None) for n, t in enumerate(said)]
    )
    compile_scope(store, TENANT, scope)
    facts = {m.content: m for m in store.memories.list(TENANT, scope, kind="profile_fact")}
    assert facts["Émilie works at Škoda"].status == "active"
    assert facts["Émilie lives in Örebro"].status == "active"
    assert facts["Émilie lives in Berlin"].status == "superseded"
    other = Scope.for_subject("anna")
    store.episodes.append_many(TENANT, [turn(other, "My name is Анна.", session=None)])
    compile_scope(store, TENANT, other)
    names = [m.content for m in store.memories.list(TENANT, other, kind="profile_fact")]
    assert names == ["Caroline's name is Анна"]  # (the speaker's label, then the name)


def test_a_fact_superseded_within_one_compile_is_reported_as_stored(store: Store) -> None:
    scope = Scope.for_subject("erin")
    store.episodes.append_many(
        TENANT,
        [
            turn(scope, "I work at Google.", name="Erin", minutes=0, session=None),
            turn(scope, "I work at Microsoft.", name="Erin", minutes=60, session=None),
        ],
    )
    result = compile_scope(store, TENANT, scope)
    stored = {m.id: m for m in store.memories.list(TENANT, scope, kind="profile_fact")}
    for m in result.memories:
        if m.kind == "profile_fact":
            assert (m.status, m.valid_to, m.superseded_by) == (
                stored[m.id].status,
                stored[m.id].valid_to,
                stored[m.id].superseded_by,
            )
    assert sorted(m.status for m in stored.values()) == ["active", "superseded"]


def test_the_same_fact_twice_is_one_memory_with_both_sources(store: Store) -> None:
    scope = Scope.for_subject("carol")
    eps, _ = store.episodes.append_many(
        TENANT,
        [
            turn(scope, "I live in Paris.", name="Carol", minutes=0, session=None),
            turn(scope, "As I said, I live in Paris.", name="Carol", minutes=5, session=None),
            turn(scope, "Thanks!", name="Carol", minutes=6, session=None),
            turn(scope, "THANKS!  ", name="Carol", minutes=7, session=None),
        ],
    )
    compile_scope(store, TENANT, scope)
    facts = store.memories.list(TENANT, scope, kind="profile_fact")
    assert [f.content for f in facts] == ["Carol lives in Paris"]
    assert facts[0].source_episode_ids == [eps[0].id, eps[1].id]
    thanks = [m for m in store.memories.list(TENANT, scope, kind="turn") if "hanks" in m.content]
    assert len(thanks) == 1  # the same but for case and spacing: stored once
    assert thanks[0].source_episode_ids == [eps[2].id, eps[3].id]


def test_text_and_template_payloads_become_notes(store: Store) -> None:
    scope = Scope.for_subject("docs")
    long_text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(60))
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(
                scope=scope, source="t", type="note", payload={"text": "Deploy on Fridays."}
            ),
            NewEpisode(scope=scope, source="t", type="doc", payload={"text": long_text}),
            NewEpisode(
                scope=scope,
                source="t",
                type="project.decision",
                payload={"decision": "Use PostgreSQL", "owner": "Dana"},
            ),
        ],
    )
    compile_scope(store, TENANT, scope)
    notes = store.memories.list(TENANT, scope, kind="note")
    assert notes[0].content == "Deploy on Fridays."
    assert len([n for n in notes if "Sentence number" in n.content]) > 1  # chunked
    assert any(n.content == "decision: Use PostgreSQL\nowner: Dana" for n in notes)


def test_scopes_and_tenants_are_separate(store: Store) -> None:
    a, b = Scope.for_subject("a"), Scope(runtime_id="default", user_id="a", agent_id="bot")
    ingest_conversation(store, a)
    compile_scope(store, TENANT, b)
    compile_scope(store, "other-tenant", a)
    assert store.memories.count(TENANT, b) == 0
    assert store.memories.count("other-tenant", a) == 0
    assert compile_scope(store, TENANT, a).memories_created > 0


def test_relative_dates_resolve_against_the_episode_time() -> None:
    at = datetime(2023, 5, 8, tzinfo=UTC)
    assert resolve_dates("I went there yesterday", at) == ["2023-05-07"]
    assert resolve_dates("two years ago", at) == ["2021"]
    assert resolve_dates("last month", at) == ["2023-04"]
    assert resolve_dates("on 20 July 2022", at) == ["2022-07-20"]
    assert resolve_dates("I may go", at) == []


def test_a_turns_confidence_follows_how_much_it_says(store: Store) -> None:
    """A brief turn ranks below an equally relevant one that states something (search
    multiplies relevance by confidence): 0.5 for a turn of no content word, rising to 1 at ten,
    in every script; a contentless message keeps 0.2."""
    scope = Scope.for_subject("bob")
    said = {
        "go on": 0.5,
        "Bad news": 0.6,
        "ok 👍": 0.2,
        "I finally quit the bank. I'm teaching high school chemistry at Lincoln now, "
        "and the kids call me Mr. Beaker.": 1.0,
        "我住在北京": 0.6,
        "Я живу в Москве": 0.6,
    }
    items = [turn(scope, text, minutes=i, key=f"k{i}") for i, text in enumerate(said)]
    store.episodes.append_many(TENANT, items)
    compile_scope(store, TENANT, scope)
    turns = {
        m.content.removeprefix("Caroline: "): m.confidence
        for m in store.memories.list(TENANT, scope, kind="turn", limit=100)
    }
    assert turns == said


def test_sentences_end_in_every_script_and_not_after_an_abbreviation() -> None:
    assert sentences("I work as a nurse at St. Mary's hospital. It is hard.") == [
        "I work as a nurse at St. Mary's hospital.",
        "It is hard.",
    ]
    assert sentences("See Dr. Smith, e.g. tomorrow. Okay.") == [
        "See Dr. Smith, e.g. tomorrow.",
        "Okay.",
    ]
    assert sentences("我住在北京。我明天去上海！好吗？") == [
        "我住在北京。",
        "我明天去上海！",
        "好吗？",
    ]
    assert sentences("Привет. Я живу в Москве. Ты где?") == [
        "Привет.",
        "Я живу в Москве.",
        "Ты где?",
    ]
    assert sentences("هل تحب القهوة؟ نعم أحبها.") == ["هل تحب القهوة؟", "نعم أحبها."]
    assert sentences("Je suis là. À demain.") == ["Je suis là.", "À demain."]
    assert sentences("मैं ठीक हूँ। तुम कैसे हो?") == ["मैं ठीक हूँ।", "तुम कैसे हो?"]
    assert sentences("The answer is no. We left early.") == ["The answer is no.", "We left early."]
    assert sentences("Poszłam do domu. Łukasz był tam.") == ["Poszłam do domu.", "Łukasz był tam."]
    assert sentences("太好了！！我们走吧。") == ["太好了！！", "我们走吧。"]
    # Lower case after a full stop is no new sentence (as before).
    assert sentences("It costs 3 p.m. prices. Fine.") == ["It costs 3 p.m. prices.", "Fine."]


def test_a_liked_thing_ends_where_another_clause_begins(store: Store) -> None:
    assert first_clause("green tea and I live in Kyiv") == "green tea"
    assert first_clause("pizza but it's expensive") == "pizza"
    assert first_clause("hiking and biking") == "hiking and biking"
    assert first_clause("tea or coffee") == "tea or coffee"
    scope = Scope.for_subject("ana")
    store.episodes.append_many(
        TENANT, [turn(scope, "I prefer green tea and I live in Kyiv.", name="Ana", key="k")]
    )
    facts = [m for m in compile_scope(store, TENANT, scope).memories if m.kind == "profile_fact"]
    assert {m.content for m in facts} == {"Ana likes green tea", "Ana lives in Kyiv"}


def test_a_name_ends_with_its_sentence(store: Store) -> None:
    assert first_clause("Zorblax. I adore jazz") == "Zorblax"
    assert first_clause("J. R. Tolkien") == "J. R. Tolkien"
    assert first_clause("Dr. Ada Byron. We met") == "Dr. Ada Byron"
    assert first_clause("Mt. Pleasant") == "Mt. Pleasant"
    assert first_clause("Ft. Lauderdale. It is warm") == "Ft. Lauderdale"
    assert first_clause("Prof. Xavier") == "Prof. Xavier"
    scope = Scope.for_subject("zorblax")
    said = "My name is Zorblax. I work at Acme Robotics. I adore jazz."
    store.episodes.append_many(TENANT, [turn(scope, said, name="Zed", key="k")])
    facts = [m for m in compile_scope(store, TENANT, scope).memories if m.kind == "profile_fact"]
    assert {m.content for m in facts} == {
        "Zed's name is Zorblax",
        "Zorblax works at Acme Robotics",
        "Zorblax likes jazz",
    }


def test_a_job_named_before_the_employer_still_gives_the_employer(store: Store) -> None:
    scope = Scope.for_subject("nurse")
    said = "I work as a nurse at St. Mary's hospital. I work as a senior data scientist at Meta."
    store.episodes.append_many(TENANT, [turn(scope, said, name="Ana", key="k")])
    facts = [m for m in compile_scope(store, TENANT, scope).memories if m.kind == "profile_fact"]
    assert {m.content for m in facts} == {"Ana works at St. Mary's", "Ana works at Meta"}


def test_a_session_summary_holds_turns_of_every_script(store: Store) -> None:
    scope = Scope.for_subject("polyglot")
    said = [
        ("Li", "我住在北京，我很喜欢北京烤鸭。"),
        ("Olga", "Я живу в Москве и работаю врачом в больнице."),
        ("Omar", "أنا أعمل مهندسا في القاهرة وأحب القهوة."),
        ("Ana", "Trabajo como enfermera en el hospital de Sevilla."),
    ]
    store.episodes.append_many(
        TENANT,
        [turn(scope, text, name=n, minutes=i, key=f"p{i}") for i, (n, text) in enumerate(said)],
    )
    summary = next(
        m for m in compile_scope(store, TENANT, scope).memories if m.kind == "episode_summary"
    )
    for name, text in said:
        assert f"{name}: {text}" in summary.content


def test_a_sentence_said_again_is_summarised_once(store: Store) -> None:
    scope = Scope.for_subject("repeater")
    said = [
        "I prefer green tea in the morning.",
        "My sister Maya lives in Porto these days.",
        "I prefer green tea in the morning.",
        "We are planning a trip to Lisbon in May.",
    ]
    store.episodes.append_many(
        TENANT,
        [turn(scope, text, name="Ana", minutes=i, key=f"r{i}") for i, text in enumerate(said)],
    )
    summary = next(
        m for m in compile_scope(store, TENANT, scope).memories if m.kind == "episode_summary"
    )
    assert summary.content.count("green tea") == 1, summary.content


def test_relative_dates_past_the_calendars_ends_resolve_to_nothing() -> None:
    text = "yesterday, tomorrow, last week, next month, next year, 2 years ago, 3 months ago"
    first = resolve_dates(text, datetime(1, 1, 1, tzinfo=UTC))
    assert first == ["0001-01-02", "0001-02", "0002"]
    last = resolve_dates(text, datetime(9999, 12, 31, 12, tzinfo=UTC))
    assert "9999-12-30" in last and "9997" in last and not any(d.startswith("1") for d in last)
    assert resolve_dates("on February 30", datetime(2025, 3, 1, tzinfo=UTC)) == ["2025-02"]
    # A number past Python's digit limit for int() is no number of days.
    at = datetime(2025, 3, 1, tzinfo=UTC)
    assert resolve_dates("1" * 5000 + " days ago, 3 days ago", at) == ["2025-02-26"]


NOTES = {
    "zh": "".join(
        f"第{i}天我们去了杭州的一家老茶馆，喝了当地有名的茶，认识了一位老师傅。" for i in range(100)
    )
    + "最后一天，我把护照忘在了拉萨的布达拉宫门口。",
    "ja": "東京に住んでいます。毎朝コーヒーを飲みます。" * 60,
    "th": " ".join(["ผมชอบไปเที่ยวเชียงใหม่ตอนหน้าหนาว"] * 80),
    "th-unspaced": "ผมชอบไปเที่ยวเชียงใหม่ตอนหน้าหนาว" * 80,
    "en": "We hiked to the lake and back before lunch. " * 40,
}


def test_a_note_is_cut_into_chunks_in_every_script_keeping_its_text(store: Store) -> None:
    for lang, text in NOTES.items():
        text = text.strip()
        chunks = note_chunks(text, 120)
        assert len(chunks) > 1, lang
        assert all(text_weight(c) <= 130 for c in chunks), (lang, [text_weight(c) for c in chunks])
        # Each chunk is the text as written; together they are all of it, in order.
        position = 0
        for chunk in chunks:
            found = text.index(chunk, position)
            assert not text[position:found].strip(), lang
            position = found + len(chunk)
        assert not text[position:].strip()
        # A cut never separates a Thai vowel or tone mark from its letter.
        assert all(not unicodedata.combining(c[0]) for c in chunks)
    assert note_chunks("東京に住んでいます。毎朝コーヒーを飲みます。", 120) == [
        "東京に住んでいます。毎朝コーヒーを飲みます。"
    ]
    # Through the compiler: the passport sentence is in a memory of its own size.
    scope = Scope.for_subject("notes-zh")
    note = NewEpisode(scope=scope, source="test", type="note", payload={"text": NOTES["zh"]})
    store.episodes.append_many(TENANT, [note])
    made = [m for m in compile_scope(store, TENANT, scope).memories if m.kind == "note"]
    assert len(made) > 5
    assert any("护照" in m.content and len(m.content) < 400 for m in made)


def _race(store: Store, scope: Scope) -> list[Any]:
    """Five compiled notes with a secret each, then a sixth not compiled yet: the five."""
    said = [f"Note {i}: the locker code ZQSECRET{i} is written on the blue card." for i in range(5)]
    stored, _ = store.episodes.append_many(
        TENANT, [turn(scope, s, minutes=i, key=f"k{i}") for i, s in enumerate(said)]
    )
    compile_scope(store, TENANT, scope)
    store.episodes.append_many(
        TENANT, [turn(scope, "Also the bike lock code is on the red card.", minutes=9, key="k9")]
    )
    return list(stored)


def _texts(store: Store, scope: Scope) -> list[str]:
    """Each memory's content with the neighbour words it is indexed with."""
    with store.snapshot() as tx:
        return [
            f"{m.content} {m.metadata.get('context_terms', '')}"
            for m in tx.memories.list(TENANT, scope, limit=100)
        ]


class _DeletingDuringPlan(HeuristicCompiler):
    """Deletes an episode (as a concurrent request would) while its first plan is made."""

    def __init__(self, store: Store, victim: Any) -> None:
        super().__init__()
        self.store, self.victim, self.plans = store, victim, 0

    def compile(self, batch: Any) -> Any:
        self.plans += 1
        drafts = super().compile(batch)
        if self.plans == 1:
            delete_episode(self.store, TENANT, self.victim)
        return drafts


class _DeletingDuringEveryPlan(HeuristicCompiler):
    """Deletes one more episode while each plan made outside the write lock is made: the
    deletions outrun every attempt, as a run of ``DELETE /v1/episodes`` can."""

    def __init__(self, store: Store, victims: list[Any]) -> None:
        super().__init__()
        self.store, self.victims, self.plans = store, list(victims), 0

    def compile(self, batch: Any) -> Any:
        self.plans += 1
        drafts = super().compile(batch)
        if self.plans <= PLAN_ATTEMPTS:
            delete_episode(self.store, TENANT, self.victims[self.plans - 1])
        return drafts


def test_deletions_outrunning_every_plan_are_not_quoted(store: Store) -> None:
    """Each plan outside the lock finds an episode it read deleted by the write; the step then
    plans under the lock, and nothing of any deleted episode is stored."""
    scope = Scope.for_subject("race-every")
    stored = _race(store, scope)
    compiler = _DeletingDuringEveryPlan(store, [e.id for e in stored[:PLAN_ATTEMPTS]])
    compile_scope(store, TENANT, scope, compiler=compiler)
    assert compiler.plans == PLAN_ATTEMPTS + 1
    texts = _texts(store, scope)
    gone = [f"zqsecret{i}" for i in range(PLAN_ATTEMPTS)]
    assert texts and not any(g in t.lower() for t in texts for g in gone)
    assert any("red card" in t for t in texts)
    assert any("zqsecret4" in t.lower() for t in texts)


class _SlowDeletingDuringEveryPlan:
    """A compiler that is not the heuristic one (as a model-backed compiler is not), with
    deletions outrunning every plan it makes."""

    name, version = "slow-test", "1"

    def __init__(self, store: Store, victims: list[Any]) -> None:
        self.inner = _DeletingDuringEveryPlan(store, victims)

    def compile(self, batch: Any) -> Any:
        return self.inner.compile(batch)


def test_a_slow_compiler_outrun_by_deletions_writes_nothing_and_leaves_the_step(
    store: Store,
) -> None:
    """A compiler that may be slow never plans under the lock: the step writes nothing and
    says episodes remain; the next step, with no deletion racing it, compiles them."""
    scope = Scope.for_subject("race-slow")
    stored = _race(store, scope)
    slow = _SlowDeletingDuringEveryPlan(store, [e.id for e in stored[:PLAN_ATTEMPTS]])
    step = compile_scope(store, TENANT, scope, compiler=slow)  # type: ignore[arg-type]
    assert slow.inner.plans == PLAN_ATTEMPTS
    assert step.episodes_compiled == 0 and step.memories_created == 0 and step.has_more
    while compile_scope(store, TENANT, scope, compiler=slow).has_more:  # type: ignore[arg-type]
        pass
    texts = _texts(store, scope)
    gone = [f"zqsecret{i}" for i in range(PLAN_ATTEMPTS)]
    assert not any(g in t.lower() for t in texts for g in gone)
    assert any("red card" in t for t in texts)


def test_an_episode_deleted_while_a_compile_plans_is_not_quoted(store: Store) -> None:
    """The plan read the session with the episode in it; the write finds it gone and plans
    again: no summary or neighbour words quote what was deleted."""
    scope = Scope.for_subject("race")
    stored = _race(store, scope)
    compiler = _DeletingDuringPlan(store, stored[0].id)
    compile_scope(store, TENANT, scope, compiler=compiler)
    assert compiler.plans == 2
    texts = _texts(store, scope)
    assert texts and not any("zqsecret0" in t.lower() for t in texts)
    assert any("red card" in t for t in texts)
