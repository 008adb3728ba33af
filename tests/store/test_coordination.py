"""Lexical ranking is coordinated on both backends: a row's score is scaled by the share of the
query's IDF it holds, so a short row that holds one common term of a question (a speaker's
name, in every one of their turns) does not outrank a longer one holding the rare words the
question is about. Also for SQLite's big partitions, ranked by one ``bm25`` query."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.scope import Scope
from cairn.engine.query import ranking_terms
from cairn.store import Store, fts5_rank, memory_search, open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from tests.store.rows import memory_row

A = Scope.for_subject("maya")

# Maya's brief turns each hold her name once in a few words; one long turn is about work.
BRIEF = [f"Maya: ok {w}" for w in ("sure", "fine", "haha", "right", "later", "yes", "cool")]
LONG = (
    "Maya: Busy week, honestly. I still work at Acme Logistics, mostly building dashboards for "
    "the warehouse team, and since the office moved to the old harbour depot last month the "
    "commute takes forty minutes each way, so I listen to podcasts about shipping and sleep."
)
OTHERS = [f"Tom: the {w} was nice today {i}" for w in ("ferry", "walk", "lunch") for i in range(10)]


def _ranked(store: Store, query: str, coordinate: bool = True) -> list[str]:
    with store.snapshot() as tx:
        found = tx.memories.lexical(
            "acme", A, ranking_terms(query), limit=20, coordinate=coordinate
        )
        rows = tx.memories.by_seqs("acme", A, [seq for seq, _ in found])
    return [rows[seq].content for seq, _ in found]


def test_a_row_holding_the_question_outranks_brief_rows_holding_its_name(store: Store) -> None:
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, c) for c in [*BRIEF, LONG, *OTHERS]])
    ranked = _ranked(store, "Where does Maya work?")
    assert ranked[0] == LONG
    assert set(ranked[1:]) == set(BRIEF)  # the rest hold the name only


def test_rows_holding_more_of_the_query_rank_higher(store: Store) -> None:
    rows = ["harbour ferry oslo", "harbour ferry", "harbour"] + [f"walk {i}" for i in range(20)]
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, c) for c in rows])
    assert _ranked(store, "oslo harbour ferry") == rows[:3]


@pytest.mark.parametrize("big", [False, True], ids=["per-term", "one-query"])
def test_without_coordination_a_brief_row_wins(
    store: Store, monkeypatch: pytest.MonkeyPatch, big: bool
) -> None:
    """The long row holding both words leads because of coordination; asked without it
    (``coordinate=False``, as search asks when there is no vector lane), plain BM25 puts the
    brief row holding one of them first. On SQLite in a small partition (ranked term by
    term) and in a big one (one ``bm25`` query, coordinated from the rows' indexed text)."""
    if big:
        monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 10)
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, c) for c in ["Maya: acme", LONG, *OTHERS]])
    assert _ranked(store, "acme dashboards")[0] == LONG
    assert _ranked(store, "acme dashboards", coordinate=False)[0] == "Maya: acme"


def test_porter_terms_stem_as_fts5_does() -> None:
    stems = fts5_rank.porter_terms(["working", "works", "worked", "москв", "北京"])
    assert stems == {
        "working": "work",
        "works": "work",
        "worked": "work",
        "москв": "москв",  # the analysis stemmed it; FTS5's porter leaves non-ASCII alone
        "北京": "北京",
    }


def test_coordination_is_the_held_share() -> None:
    assert fts5_rank.coordination(2.0, 4.0) == 0.5
    assert fts5_rank.coordination(4.0, 4.0) == 1.0
    assert fts5_rank.coordination(0.0, 0.0) == 1.0
    assert fts5_rank.idf(100, 100) > 0  # never negative, even for a term in every row


def _share_by_row(terms: list[str], counts: dict[str, int], total: int, text: str) -> float:
    """The share a row holds, computed the plain way: every word of it stemmed."""
    stem = fts5_rank.porter_terms([*terms, *text.split()])
    held = {stem[w] for w in text.split()}
    weights = {t: fts5_rank.idf(total, counts.get(t, 0)) for t in dict.fromkeys(terms)}
    found = sum(w for t, w in weights.items() if stem[t] in held)
    return fts5_rank.coordination(found, sum(weights.values()))


def test_a_window_of_rows_is_coordinated_as_row_by_row() -> None:
    """``QueryShare.all`` (each distinct word of the window stemmed once, through the
    database's remembered stems) gives each row the share the row-by-row computation gives,
    for inflected English, other scripts and repeated words; also once the remembered stems
    start again (``size`` reached) between and within calls, never holding more than ``size``."""
    terms = ["work", "dashboards", "москв", "北京", "acme", "works", "acme"]  # one stem twice
    counts = {"work": 3, "dashboards": 1, "москв": 2, "北京": 1}
    texts = [
        "maya working dashboard acme",
        "tom worked москв москв",
        "北京 works",
        "",
        "nothing here at all",
        "dashboards dashboarding acmes acme",
    ]
    expected = [_share_by_row(terms, counts, 40, t) for t in texts]
    assert expected[3] == 0.0 and expected[0] > expected[4] == 0.0  # the check can fail
    for size in (50_000, 5, 1):
        stems = fts5_rank.PorterStems(size=size)
        for _ in range(2):  # remembered, then read back
            share = fts5_rank.QueryShare(terms, counts, 40, stems)
            assert share.all(texts) == pytest.approx(expected)
            assert [share.all([t])[0] for t in texts] == pytest.approx(expected)  # one by one
        assert len(stems._stems) <= size


def test_stored_stems_give_the_share_the_text_gives() -> None:
    """``QueryShare.of_stems`` over each row's stored stems (``indexed_stems``, as SQLite
    writes them with the row) gives the share ``all`` reads off the row's text."""
    terms = ["work", "dashboards", "москв", "北京", "acme", "works", "acme", "café"]
    counts = {"work": 3, "dashboards": 1, "москв": 2, "北京": 1, "café": 2}
    texts = [
        "maya working dashboard acme",
        "tom worked москв москв",
        "北京 works 🙂",
        "",
        "nothing here at all",
        "dashboards dashboarding acmes acme café",
        "a\tcafé\nworked",
    ]
    stems = fts5_rank.PorterStems()
    share = fts5_rank.QueryShare(terms, counts, 40, stems)
    stored = [fts5_rank.indexed_stems(t) for t in texts]
    assert stored[0] == " maya work dashboard acm " and stored[3] == " "
    assert share.of_stems(stored) == pytest.approx(share.all(texts))
    assert share.of_stems(stored)[0] > share.of_stems(stored)[4] == 0.0  # the check can fail
    assert [fts5_rank.indexed_stems(t, stems) for t in texts] == stored  # through the memo


def test_rows_keep_their_stems_and_rank_as_their_text_does(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite writes each memory's stems with it (``search_stems``) and rewrites them with its
    neighbour words; a big partition's window reads them, and rows without them (NULL, as a
    writer that does not know them leaves them) are read off their text with the same result.
    PostgreSQL keeps none (it weighs the share in SQL)."""
    monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 10)
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, c) for c in ["Maya: acme", LONG, *OTHERS]])
    with store.db.read() as conn:
        got = dict(conn.execute(text("SELECT content, search_stems FROM memories")).all())
    if not store.db.is_sqlite:
        assert set(got.values()) == {None}
        return
    assert got["Maya: acme"] == " maya acm "
    ranked = _ranked(store, "acme dashboards warehouse")
    assert ranked[0] == LONG
    with store.db.write() as conn:
        conn.execute(text("UPDATE memories SET search_stems = NULL"))
    assert _ranked(store, "acme dashboards warehouse") == ranked
    # The compiler refreshes a memory's neighbour words: its stems follow.
    row = memory_row(A, "Maya: acme")
    row["metadata"] = {"context_terms": "harbour depot"}
    with store.transaction() as tx:
        tx.memories.refresh_metadata(row)
    with store.db.read() as conn:
        stems = conn.execute(
            text("SELECT search_stems FROM memories WHERE content = 'Maya: acme'")
        ).scalar()
    assert stems == " maya acm harbour depot "


def test_0021_fills_the_stems_of_stored_rows(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new([memory_row(A, c) for c in ["Maya: acme", LONG, *OTHERS]])
        with store.db.read() as conn:
            written = dict(conn.execute(text("SELECT seq, search_stems FROM memories")).all())
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0020_memory_embeddings")
            conn.commit()
        open_store(db_url).close()  # migrates: 0021 fills the column again
        with engine.connect() as conn:
            filled = dict(conn.execute(text("SELECT seq, search_stems FROM memories")).all())
    finally:
        engine.dispose()
    assert filled == written and len(filled) == 32
    if engine.dialect.name == "sqlite":
        assert None not in filled.values()
