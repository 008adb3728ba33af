"""Context assembly over a real store, on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import threading

import pytest

from cairn.core.memory import Budget, ContextRequest, Turn
from cairn.core.scope import Scope
from cairn.engine.context import CairnAssembly
from cairn.engine.turns import TURN_EPISODE_TYPE
from cairn.store import Store
from tests.engine.context.helpers import SCOPE, add_document, add_memory, add_turn

TENANT = "t1"


@pytest.fixture
def assembly(store: Store) -> CairnAssembly:
    return CairnAssembly(store, TENANT)


def request(**kw: object) -> ContextRequest:
    data: dict[str, object] = {"scope": SCOPE}
    data.update(kw)
    return ContextRequest.model_validate(data)


def test_recent_lane_newest_first_with_score_one(assembly: CairnAssembly) -> None:
    for i in range(8):
        add_turn(assembly, f"turn number {i}", key=f"k{i}", minute=i)
    result = assembly.context(request(conversation_id="conv-1", recent_turns=5))
    assert [i.content for i in result.items] == [f"user: turn number {i}" for i in (7, 6, 5, 4, 3)]
    assert all(i.score == 1.0 and i.source_class == "recent" for i in result.items)
    assert all(i.provenance[0].type == "turn" for i in result.items)


def test_turn_is_stored_as_a_conversation_episode(assembly: CairnAssembly, store: Store) -> None:
    commit = add_turn(assembly, "I moved to Lisbon", key="run-1")
    eps = store.episodes.list(TENANT, SCOPE)
    assert len(eps) == 1 and eps[0].id == commit.episode_id
    assert eps[0].type == TURN_EPISODE_TYPE and eps[0].session_id == "conv-1"
    assert eps[0].payload["messages"] == [{"role": "user", "content": "I moved to Lisbon"}]


def test_same_key_returns_the_original_and_writes_nothing(
    assembly: CairnAssembly, store: Store
) -> None:
    first = add_turn(assembly, "original", key="run-1")
    again = add_turn(assembly, "different content", key="run-1", minute=5)
    assert first.created and not again.created
    assert again.episode_id == first.episode_id and again.occurred_at == first.occurred_at
    assert store.episodes.count(TENANT, SCOPE) == 1


def test_concurrent_retries_store_one_turn(assembly: CairnAssembly, store: Store) -> None:
    results: list[object] = []
    errors: list[BaseException] = []

    def retry(n: int) -> None:
        try:
            results.append(
                assembly.commit_turn(
                    Turn(
                        scope=SCOPE,
                        conversation_id="conv-1",
                        idempotency_key="run-42",
                        messages=[{"role": "user", "content": f"attempt {n}"}],
                    )
                )
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=retry, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.episode_id for r in results}) == 1  # type: ignore[attr-defined]
    assert sum(r.created for r in results) == 1  # type: ignore[attr-defined]
    assert store.episodes.count(TENANT, SCOPE) == 1


def test_recent_items_are_kept_under_min_score(assembly: CairnAssembly, store: Store) -> None:
    add_turn(assembly, "hello there", key="k1")
    add_memory(store, TENANT, "weekly summary of nothing", kind="episode_summary", session="conv-1")
    add_document(assembly, "Kubernetes clusters run pods.")
    low = assembly.context(
        request(
            conversation_id="conv-1", query="kubernetes pods", dataset_ids=["docs"], min_score=0.0
        )
    )
    assert {i.source_class for i in low.items} == {"recent", "summary", "long_term"}
    high = assembly.context(
        request(
            conversation_id="conv-1", query="kubernetes pods", dataset_ids=["docs"], min_score=1.0
        )
    )
    assert [i.source_class for i in high.items] == ["recent"]


def test_recent_only_skips_long_term_lanes(assembly: CairnAssembly, store: Store) -> None:
    add_turn(assembly, "hello", key="k1")
    add_memory(store, TENANT, "summary", kind="episode_summary", session="conv-1")
    result = assembly.context(request(conversation_id="conv-1", recent_only=True))
    assert [i.source_class for i in result.items] == ["recent"]


def test_a_summary_of_the_recent_turns_alone_is_left_out(
    assembly: CairnAssembly, store: Store
) -> None:
    """The recent lane shows the conversation's latest turns whole: a summary made only from
    them repeated them (word for word, the heuristic compiler's); one that also covers older
    turns says something they do not, and stays."""
    old = add_turn(assembly, "I grew up in Porto", key="k0", minute=0).episode_id
    new = [
        add_turn(assembly, f"we talk about {t}", key=f"k{i}", minute=i).episode_id
        for i, t in ((1, "tea"), (2, "coffee"))
    ]
    add_memory(
        store,
        TENANT,
        "we talked about tea",
        kind="episode_summary",
        session="conv-1",
        episode=new[0],
    )
    add_memory(
        store,
        TENANT,
        "grew up in Porto; tea",
        kind="episode_summary",
        session="conv-1",
        episode=old,
    )
    result = assembly.context(request(conversation_id="conv-1", recent_turns=2))
    summaries = [i.content for i in result.items if i.source_class == "summary"]
    assert summaries == ["grew up in Porto; tea"]
    everything = assembly.context(request(conversation_id="conv-1", recent_turns=3))
    assert [i for i in everything.items if i.source_class == "summary"] == []


def test_document_chunks_are_recalled_with_provenance(assembly: CairnAssembly) -> None:
    text = " ".join(f"Paragraph {i} talks about gardening and tomatoes." for i in range(60))
    text += " The launch code for the rocket is stored in the blue vault."
    commit = add_document(assembly, text)
    assert commit.created and commit.chunk_count > 1
    again = add_document(assembly, "other text entirely")
    assert not again.created and again.id == commit.id and again.chunk_count == commit.chunk_count
    result = assembly.context(
        request(query="where is the rocket launch code", dataset_ids=["docs"])
    )
    assert result.items, "the chunk holding the answer is found"
    top = result.items[0]
    assert "blue vault" in top.content and 0.0 < top.score <= 1.0
    ref = top.provenance[0]
    assert (ref.type, ref.document_id, ref.dataset_id) == ("chunk", "d1", "docs")
    # A dataset the request does not name is never searched.
    assert assembly.context(request(query="rocket launch code", dataset_ids=["other"])).items == []


def test_chunks_matching_every_document_of_a_small_dataset_keep_a_usable_score(
    assembly: CairnAssembly,
) -> None:
    """In a three-document dataset where every chunk holds both query words, BM25's IDF is
    near zero; the chunks still score 0.5 (best) rather than ~1e-6, so a seed-style
    ``min_score: 0.5`` keeps the best of them."""
    for i in range(3):
        add_document(assembly, f"Notes {i}: hiking in the Alps, day {i}.", doc=f"d{i}")
    result = assembly.context(request(query="hiking Alps", dataset_ids=["docs"]))
    scores = [item.score for item in result.items]
    assert len(scores) == 3 and max(scores) == 0.5 and min(scores) > 0.2
    kept = assembly.context(request(query="hiking Alps", dataset_ids=["docs"], min_score=0.5))
    assert kept.items and all(item.score >= 0.5 for item in kept.items)


def test_a_lane_cut_at_its_candidate_limit_marks_the_result_truncated(
    assembly: CairnAssembly,
    store: Store,
) -> None:
    """The budget would take 500 items, but a long-term lane gives at most 200 candidates: with
    250 relevant memories the result must say that something was left out."""
    for i in range(200):
        add_memory(store, TENANT, f"Note {i} about the orchard harvest.", kind="turn", minute=i)
    for i in range(50):  # weaker matches, ranked after the 200
        add_memory(store, TENANT, f"Note {i} about the orchard.", kind="turn", minute=200 + i)
    budget = Budget(max_items=500, max_tokens=100_000)
    result = assembly.context(request(query="orchard harvest", budget=budget))
    assert len(result.items) == 200 and result.truncated
    assert all("harvest" in item.content for item in result.items)
    # What the limit cut off does not pass min_score: nothing relevant was left out. (Scores
    # are absolute: the 200 full matches share one score, the weaker ones are below it.)
    best = min(item.score for item in result.items)
    assert 0 < best < 1
    top = assembly.context(request(query="orchard harvest", budget=budget, min_score=best))
    assert len(top.items) == 200 and not top.truncated
    # Fewer matches than the limit (another scope, 5 of them): nothing cut.
    small = Scope(runtime_id="memories", user_id="user-2", agent_id="assistant")
    for i in range(5):
        add_memory(
            store,
            TENANT,
            f"Note {i} about the orchard harvest.",
            kind="turn",
            scope=small,
            minute=i,
        )
    five = assembly.context(request(scope=small, query="orchard harvest", budget=budget))
    assert len(five.items) == 5 and not five.truncated


def test_chunks_keep_size_and_overlap(assembly: CairnAssembly, store: Store) -> None:
    text = " ".join(f"w{i}" for i in range(2000))
    commit = add_document(assembly, text)
    chunks = store.documents.chunks(TENANT, SCOPE, commit.id)
    assert all(c.token_count <= assembly.settings.chunk_tokens for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert a.content.split()[-1] in b.content.split()  # consecutive chunks overlap
    assert chunks[-1].content.endswith("w1999")


def test_unspaced_text_is_cut_into_chunks_that_fit_and_cover_it() -> None:
    """A Chinese or Japanese document is one long "word": it is cut by tokens into chunks
    that each fit and together cover every character (its long words are cut from a window,
    not recounted whole after each cut, which took 50 s for 840 KB)."""
    from cairn.core.tokens import get_tokenizer
    from cairn.engine.documents import ChunkSettings, chunk_text

    tokenizer = get_tokenizer("cl100k_base")
    for text in ("長い文章です。" * 4000, "a" * 50_000 + " end", "Ж" * 20_000):
        chunks = chunk_text(text, ChunkSettings(), tokenizer)
        assert all(0 < c.token_count <= 200 for c in chunks)
        assert all(c.content == text[c.char_start : c.char_end] for c in chunks)
        covered = chunks[0].char_start
        for c in chunks:
            assert c.char_start <= covered  # no gap between consecutive chunks
            covered = max(covered, c.char_end)
        assert chunks[0].char_start == 0 and covered == len(text.rstrip())


def test_a_chunk_starts_and_ends_between_graphemes_and_fits() -> None:
    """A token may end inside a character (an emoji's bytes) and a character inside a
    grapheme (a flag's two letters, a family joined by ZWJ, an accent, a conjunct): a cut
    there gave chunks starting with a dangling joiner or a lone regional indicator, and one
    token over the limit."""
    import regex

    from cairn.core.tokens import get_tokenizer
    from cairn.engine.documents import ChunkSettings, chunk_text

    tokenizer = get_tokenizer("cl100k_base")
    texts = (
        "".join(f"第{i}条：我们一家👨\u200d👩\u200d👧\u200d👦去了🇯🇵日本旅行。" for i in range(80)),  # noqa: RUF001
        "cafe\u0301" * 3000,
        "👨\u200d👩\u200d👧\u200d👦" * 500,
        "मिठाइयाँखरीदींक्षत्रिय" * 300,
    )
    for text in texts:
        ends = {0} | {m.end() for m in regex.finditer(r"\X", text)}
        chunks = chunk_text(text, ChunkSettings(chunk_tokens=200, chunk_overlap=20), tokenizer)
        assert len(chunks) > 5
        for c in chunks:
            assert c.char_start in ends and c.char_end in ends, c.content[:3]
            assert 0 < c.token_count <= 200 and c.token_count == tokenizer.count(c.content)
            assert c.content == text[c.char_start : c.char_end] and "\ufffd" not in c.content


def test_truncate_is_a_prefix_that_ends_between_graphemes() -> None:
    import regex

    from cairn.core.tokens import get_tokenizer

    tokenizer = get_tokenizer("cl100k_base")
    text = "🇯🇵🇫🇷 e\u0301té 家族👨\u200d👩\u200d👧 क्षत्रिय" * 3
    ends = {0} | {m.end() for m in regex.finditer(r"\X", text)}
    for n in range(1, tokenizer.count(text)):
        head = tokenizer.truncate(text, n)
        assert text.startswith(head) and tokenizer.count(head) <= n and len(head) in ends
    assert tokenizer.truncate("🇯🇵", 1) == ""  # the flag's first token holds part of it


@pytest.mark.parametrize(
    "other",
    [
        Scope(runtime_id="other-runtime", user_id="user-1", agent_id="assistant"),
        Scope(runtime_id="memories", user_id="user-2", agent_id="assistant"),
        Scope(runtime_id="memories", user_id="user-1", agent_id="other-agent"),
        Scope(runtime_id="memories", user_id="user-1", agent_id=""),
        Scope(runtime_id="memories", user_id="", agent_id="assistant"),
    ],
)
def test_no_item_crosses_a_scope_partition(store: Store, other: Scope) -> None:
    mine = CairnAssembly(store, TENANT)
    add_turn(mine, "mine: secret plan alpha", key="k1")
    add_document(mine, "mine: the secret plan alpha document")
    add_memory(
        store, TENANT, "mine: summary of plan alpha", kind="episode_summary", session="conv-1"
    )
    for tenant in (TENANT, "t2"):
        theirs = CairnAssembly(store, tenant)
        scope = other if tenant == TENANT else SCOPE
        add_turn(theirs, "theirs: secret plan alpha", key="k1", scope=scope)
        add_document(theirs, "theirs: the secret plan alpha document", scope=scope)
        add_memory(
            store,
            tenant,
            "theirs: summary of plan alpha",
            kind="episode_summary",
            scope=scope,
            session="conv-1",
        )
    for target_scope, tenant in ((SCOPE, TENANT), (other, TENANT), (SCOPE, "t2")):
        result = CairnAssembly(store, tenant).context(
            ContextRequest(
                scope=target_scope,
                conversation_id="conv-1",
                query="secret plan alpha",
                dataset_ids=["docs"],
                budget=Budget(max_items=50),
            )
        )
        expect = "mine:" if (target_scope, tenant) == (SCOPE, TENANT) else "theirs:"
        assert len(result.items) == 3
        assert all(
            i.content.split(" ", 1)[1].startswith(expect) or i.content.startswith(expect)
            for i in result.items
        ), [i.content for i in result.items]


def test_budget_limits_hold_together(assembly: CairnAssembly) -> None:
    for i in range(30):
        add_turn(assembly, f"turn {i} " + "word " * (i % 7), key=f"k{i}", minute=i)
    result = assembly.context(
        request(
            conversation_id="conv-1",
            recent_turns=30,
            budget=Budget(max_tokens=60, max_items=5, max_chars=150),
        )
    )
    assert result.truncated
    assert len(result.items) <= 5
    assert sum(i.token_count for i in result.items) == result.token_count <= 60
    assert sum(len(i.content) for i in result.items) <= 150


def test_same_request_same_bytes(assembly: CairnAssembly, store: Store) -> None:
    for i in range(5):
        add_turn(assembly, f"turn {i} about tomatoes", key=f"k{i}", minute=i)
        add_memory(
            store,
            TENANT,
            f"summary {i} of tomatoes",
            kind="episode_summary",
            session="conv-1",
            minute=i,
        )
    add_document(assembly, "Tomatoes need sun. " * 80)
    req = request(
        conversation_id="conv-1",
        query="tomatoes",
        dataset_ids=["docs"],
        recent_turns=3,
        budget=Budget(max_tokens=300),
    )
    first = assembly.context(req).model_dump_json()
    assert all(
        CairnAssembly(store, TENANT).context(req).model_dump_json() == first for _ in range(3)
    )


def test_deleting_a_scope_removes_documents_and_their_index(
    assembly: CairnAssembly, store: Store
) -> None:
    add_document(assembly, "The heron nests by the old mill.")
    req = request(query="heron mill", dataset_ids=["docs"])
    assert assembly.context(req).items
    counts = store.subjects.delete_scope(TENANT, SCOPE)
    assert counts["documents"] == 1 and counts["document_chunks"] == 1
    assert assembly.context(req).items == []
    # The key is free again: the same document can be stored anew.
    assert add_document(assembly, "The heron nests by the old mill.").created


def test_the_lanes_and_the_search_read_one_snapshot(
    assembly: CairnAssembly, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_memory(store, TENANT, "the lighthouse keeper painted the boat red")
    add_memory(store, TENANT, "a walk along the harbour", minute=1)
    opened: list[object] = []
    real = Store.snapshot

    def counting(self: Store):  # type: ignore[no-untyped-def]
        opened.append(self)
        return real(self)

    monkeypatch.setattr(Store, "snapshot", counting)
    result = assembly.context(request(query="what colour was the boat"))
    assert [i.content for i in result.items][:1] == ["the lighthouse keeper painted the boat red"]
    assert len(opened) == 1  # one pool checkout and one commit for the whole request


def test_chunks_are_coordinated_like_memories(assembly: CairnAssembly) -> None:
    """A chunk is scaled by the share of the query it holds, as a memory is: a brief chunk
    holding one of the words does not outrank a long one holding both."""
    long = (
        "The quarterly review covers the warehouse dashboards in detail: which figures the "
        "night shift reads first, how the loading bays are scheduled, and why the old "
        "spreadsheet export was retired after the audit in March."
    )
    add_document(assembly, "Warehouse.", doc="d0")
    add_document(assembly, long, doc="d1")
    for i in range(8):
        add_document(assembly, f"Minutes of meeting {i}: lunch order and parking.", doc=f"m{i}")
    result = assembly.context(request(query="warehouse dashboards", dataset_ids=["docs"]))
    assert result.items[0].content == long


def test_the_compilers_session_summaries_stay_out_of_the_searched_lane(store: Store) -> None:
    """The heuristic's session summary repeats its turns word for word: context packs the
    turns, not the summary as well; search still finds it, and a summary of another origin
    (here one written directly) still enters context."""
    from cairn.engine.compile import compile_scope
    from cairn.engine.search import search_memories
    from tests.engine.test_compile import ingest_conversation

    ingest_conversation(store, SCOPE)
    compiled = compile_scope(store, TENANT, SCOPE).memories
    summary = next(m for m in compiled if m.kind == "episode_summary")
    assert "Bright Futures" in summary.content
    found = search_memories(store, TENANT, SCOPE, "Where does Caroline work? Bright Futures")
    assert summary.id in {s.memory.id for s in found}

    result = CairnAssembly(store, TENANT).context(
        request(query="Where does Caroline work? Bright Futures", budget=Budget(max_tokens=4000))
    )
    kinds = [i.kind for i in result.items]
    assert "episode_summary" not in kinds and "turn" in kinds
    assert any("Bright Futures" in i.content for i in result.items)

    add_memory(store, TENANT, "Caroline works at Bright Futures", kind="episode_summary")
    again = CairnAssembly(store, TENANT).context(
        request(query="Where does Caroline work? Bright Futures", budget=Budget(max_tokens=4000))
    )
    assert [i.content for i in again.items if i.kind == "episode_summary"] == [
        "Caroline works at Bright Futures"
    ]
