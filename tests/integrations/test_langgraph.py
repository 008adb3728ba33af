"""``CairnStore`` with the real langgraph: the behaviours LangGraph's ``BaseStore`` documents,
run against LangGraph's own ``InMemoryStore`` and against ``CairnStore`` (embedded and behind a
live server, on both backends) in the same parametrized tests, so each assertion holds for
both implementations."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    PutOp,
    SearchItem,
)
from langgraph.store.memory import InMemoryStore

from cairn.app import create_app
from cairn.client import Cairn
from cairn.integrations.langgraph import CairnStore
from cairn.services import Services
from tests.client.conftest import live_server
from tests.conftest import database_url, make_settings

KINDS = ["memory", "sqlite-embedded", "sqlite-server", "postgres-embedded", "postgres-server"]
CAIRN_KINDS = KINDS[1:]
DIMS = 64


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding of any script: character unigrams and bigrams hashed into
    64 dimensions (a user's own embedding function, as LangGraph's ``index`` takes)."""
    out = []
    for text in texts:
        vector = [0.0] * DIMS
        folded = text.casefold()
        for n in (1, 2):
            for i in range(len(folded) - n + 1):
                gram = folded[i : i + n]
                if gram.strip():
                    vector[zlib.crc32(gram.encode()) % DIMS] += 1.0
        out.append(vector)
    return out


StoreFactory = Callable[..., BaseStore]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """Makes a store of this test's kind (extra arguments: ``index``, ``ttl``, ``scope``)."""
    with ExitStack() as stack:
        if kind == "memory":
            yield lambda **kw: InMemoryStore(**{k: v for k, v in kw.items() if k == "index"})
            return
        backend, mode = kind.split("-")
        url = database_url(backend, tmp_path, request)
        settings = make_settings(tmp_path, database_url=url)
        server: str | None = None
        if mode == "server":
            services = Services.from_settings(settings)
            stack.callback(services.close)
            server = stack.enter_context(live_server(create_app(services=services)))

        def make(**kw: Any) -> BaseStore:
            if server is not None:
                store = CairnStore(url=server, api_key="", **kw)
            else:
                store = CairnStore(settings=settings, **kw)
            stack.callback(store.close)
            return store

        yield make


def keys(items: list[SearchItem]) -> list[str]:
    return [i.key for i in items]


# --------------------------------------------------------------------------- items


def test_put_get_update_delete(make_store: StoreFactory) -> None:
    store = make_store()
    value = {
        "text": "Zoë drinks 茶",
        "n": 1.5,
        "tags": ["a", None],
        "deep": {"x": [1, {"y": True}]},
    }
    assert store.get(("users", "ada"), "prefs") is None
    store.put(("users", "ada"), "prefs", value)
    item = store.get(("users", "ada"), "prefs")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (("users", "ada"), "prefs", value)
    assert item.created_at.tzinfo is not None and item.created_at <= item.updated_at
    store.put(("users", "ada"), "prefs", {"text": "changed"})
    again = store.get(("users", "ada"), "prefs")
    assert again is not None and again.value == {"text": "changed"}
    assert again.updated_at >= item.updated_at
    assert store.get(("users",), "prefs") is None  # a namespace is exact, not a prefix
    store.delete(("users", "ada"), "prefs")
    assert store.get(("users", "ada"), "prefs") is None
    store.delete(("users", "ada"), "prefs")  # deleting nothing is fine


def test_namespace_validation(make_store: StoreFactory, kind: str) -> None:
    store = make_store()
    for bad in [(), ("langgraph",), ("langgraph", "x"), ("a.b",), ("",), ("ok", "")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
    for bad in [("a.b",), ("",), ("ok", "x.y")]:
        with pytest.raises(InvalidNamespaceError):
            store.get(bad, "k")
        with pytest.raises(InvalidNamespaceError):
            store.delete(bad, "k")
        with pytest.raises(InvalidNamespaceError):
            store.search(bad)
        with pytest.raises(InvalidNamespaceError):
            store.list_namespaces(prefix=bad)
        with pytest.raises(InvalidNamespaceError):
            store.list_namespaces(suffix=bad)
    if kind != "memory":
        # Ops given to batch directly are checked too, as ``validate_op_namespace`` asks of
        # stores that keep namespaces as text (InMemoryStore keeps tuples and need not).
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp(("a.b",), "k")])
    assert store.search(()) == []  # the empty prefix is every namespace


def test_batch_reads_see_the_state_before_its_writes(make_store: StoreFactory) -> None:
    store = make_store()
    store.put(("docs",), "a", {"v": 0})
    results = store.batch(
        [
            PutOp(("docs",), "a", {"v": 1}),
            GetOp(("docs",), "a"),
            PutOp(("docs",), "b", {"v": 2}),
            PutOp(("docs",), "b", {"v": 3}),
            GetOp(("docs",), "b"),
        ]
    )
    assert results[0] is None and results[2] is None and results[4] is None
    assert isinstance(results[1], Item) and results[1].value == {"v": 0}
    got = [store.get(("docs",), k) for k in "ab"]
    assert [g.value if g else None for g in got] == [{"v": 1}, {"v": 3}]


# --------------------------------------------------------------------------- namespaces

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("users", "ada", "memories"),
    ("users", "bob", "memories"),
    ("users", "bob", "prefs"),
]


def test_list_namespaces(make_store: StoreFactory) -> None:
    store = make_store()
    for ns in reversed(NAMESPACES):
        store.put(ns, "k", {"v": 1})
    ls = store.list_namespaces
    assert ls() == sorted(NAMESPACES)
    # The example of BaseStore.list_namespaces' docstring.
    assert ls(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert ls(prefix=("a",), max_depth=1) == [("a",)]
    assert ls(max_depth=2) == [("a", "b"), ("a", "c"), ("users", "ada"), ("users", "bob")]
    assert ls(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert ls(prefix=("users", "*", "memories")) == [
        ("users", "ada", "memories"),
        ("users", "bob", "memories"),
    ]
    assert ls(prefix=("*", "b")) == [ns for ns in sorted(NAMESPACES) if ns[1] == "b"]
    assert ls(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert ls(prefix=("users",), suffix=("prefs",)) == [("users", "bob", "prefs")]
    assert ls(prefix=("a", "b", "c", "d")) == []
    assert ls(limit=3) == sorted(NAMESPACES)[:3]
    assert ls(limit=3, offset=3) == sorted(NAMESPACES)[3:6]
    assert ls(offset=100) == []


def test_a_namespace_emptied_by_deletes_is_not_listed(make_store: StoreFactory, kind: str) -> None:
    store = make_store()
    store.put(("gone",), "k", {"v": 1})
    store.put(("kept",), "k", {"v": 1})
    store.delete(("gone",), "k")
    listed = store.list_namespaces()
    assert ("kept",) in listed
    if kind != "memory":  # InMemoryStore keeps the empty namespace; the PostgreSQL store does not
        assert listed == [("kept",)]


# --------------------------------------------------------------------------- search

PEOPLE = [
    (("people", "eu"), "ada", {"name": "Ada", "age": 36, "city": "London", "bio": {"lang": "en"}}),
    (("people", "eu"), "zoe", {"name": "Zoë", "age": 29, "city": "Genève", "bio": {"lang": "fr"}}),
    (("people", "asia"), "mei", {"name": "美", "age": 41, "city": "北京", "bio": {"lang": "zh"}}),
    (("people", "asia"), "ken", {"name": "健", "age": 29, "city": "東京", "tags": ["a", "b"]}),
    (("pets",), "rex", {"name": "Rex", "age": 3, "city": "London"}),
]


def put_people(store: BaseStore) -> None:
    for ns, key, value in PEOPLE:
        store.put(ns, key, value)


def test_search_prefix_filter_limit_offset(make_store: StoreFactory) -> None:
    store = make_store()
    put_people(store)
    assert sorted(keys(store.search(("people",)))) == ["ada", "ken", "mei", "zoe"]
    assert keys(store.search(("people", "eu"))) == ["ada", "zoe"]
    assert sorted(keys(store.search(()))) == ["ada", "ken", "mei", "rex", "zoe"]
    assert keys(store.search(("people",), filter={"city": "北京"})) == ["mei"]
    assert sorted(keys(store.search(("people",), filter={"age": 29}))) == ["ken", "zoe"]
    f = store.search
    assert sorted(keys(f((), filter={"age": {"$gt": 29}}))) == ["ada", "mei"]
    assert sorted(keys(f((), filter={"age": {"$gte": 36, "$lt": 41}}))) == ["ada"]
    assert sorted(keys(f((), filter={"age": {"$lte": 3}}))) == ["rex"]
    assert sorted(keys(f((), filter={"city": {"$ne": "London"}}))) == ["ken", "mei", "zoe"]
    assert sorted(keys(f((), filter={"city": {"$eq": "Genève"}}))) == ["zoe"]
    assert keys(f((), filter={"bio": {"lang": "fr"}})) == ["zoe"]  # nested objects match
    assert keys(f((), filter={"tags": ["a", "b"]})) == ["ken"]
    assert sorted(keys(f((), filter={"tags": None}))) == ["ada", "mei", "rex", "zoe"]
    assert keys(f((), filter={"city": "London", "age": 3})) == ["rex"]
    assert f((), filter={"nope": 1}) == []
    everything = keys(f((), limit=100))
    assert len(everything) == 5
    assert keys(f((), limit=2)) == everything[:2]
    assert keys(f((), limit=2, offset=2)) == everything[2:4]
    assert keys(f((), offset=4)) == everything[4:]
    hit = f(("pets",))[0]
    assert isinstance(hit, SearchItem) and hit.score is None
    assert hit.namespace == ("pets",) and hit.value == PEOPLE[-1][2]


def test_search_order_without_a_query(make_store: StoreFactory) -> None:
    """Without a query the items come as they were first stored, namespace by namespace."""
    store = make_store()
    store.put(("n", "1"), "a", {"v": 1})
    store.put(("n", "2"), "b", {"v": 1})
    store.put(("n", "1"), "c", {"v": 1})
    store.put(("n", "1"), "a", {"v": 2})  # an update keeps its place
    assert keys(store.search(("n",))) == ["a", "c", "b"]


MULTILINGUAL = {
    "zh": "我最喜欢的茶是北京的茉莉花茶",
    "ja": "東京で抹茶のアイスクリームを食べました",
    "ko": "서울에서 김치찌개를 요리하는 것을 좋아해요",
    "ru": "Моя сестра живёт в Новосибирске и любит шахматы",
    "hi": "मेरी बहन दिल्ली में रहती है और शतरंज खेलती है",
    "en": "My brother lives in Lisbon and plays the violin",
}
QUERIES = {
    "zh": "茉莉花茶",
    "ja": "抹茶のアイスクリーム",
    "ko": "김치찌개",
    "ru": "Новосибирске шахматы",
    "hi": "दिल्ली शतरंज",
    "en": "violin Lisbon",
}


def test_semantic_search_with_an_index(make_store: StoreFactory) -> None:
    """With ``index``, both stores embed the same fields with the same function and rank by
    cosine similarity: the same order and the same scores; an item put with
    ``index=False`` follows, unscored."""
    store = make_store(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    for lang, text in MULTILINGUAL.items():
        store.put(("notes",), lang, {"text": text, "lang": lang})
    store.put(("notes",), "hidden", {"text": QUERIES["zh"]}, index=False)
    store.put(("notes",), "other", {"title": QUERIES["ko"], "text": "nothing"}, index=["title"])
    for lang, query in QUERIES.items():
        hits = store.search(("notes",), query=query, limit=10)
        assert hits[0].key in (lang, "other" if lang == "ko" else lang), (lang, keys(hits))
        scores = [h.score for h in hits if h.score is not None]
        assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
        assert hits[-1].key == "hidden" and hits[-1].score is None
    expected = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    for lang, text in MULTILINGUAL.items():
        expected.put(("notes",), lang, {"text": text, "lang": lang})
    expected.put(("notes",), "hidden", {"text": QUERIES["zh"]}, index=False)
    expected.put(("notes",), "other", {"title": QUERIES["ko"], "text": "nothing"}, index=["title"])
    for query in QUERIES.values():
        got = store.search(("notes",), query=query, filter={"lang": {"$ne": "en"}}, limit=4)
        want = expected.search(("notes",), query=query, filter={"lang": {"$ne": "en"}}, limit=4)
        assert keys(got) == keys(want)
        assert [g.score for g in got] == pytest.approx([w.score for w in want], abs=1e-5)
        ne_en = {"lang": {"$ne": "en"}}
        page = store.search(("notes",), query=query, filter=ne_en, limit=2, offset=1)
        assert keys(page) == keys(want)[1:3]


@pytest.mark.parametrize("kind", CAIRN_KINDS, indirect=True)
def test_cairn_search_without_an_index_finds_every_script(make_store: StoreFactory) -> None:
    """Without ``index`` (where InMemoryStore ignores the query) Cairn ranks with its own
    search: each value is found by words of its own language."""
    store = make_store()
    for lang, text in MULTILINGUAL.items():
        store.put(("notes", lang), "note", {"text": text, "lang": lang})
    for lang, query in QUERIES.items():
        hits = store.search(("notes",), query=query)
        assert hits[0].namespace == ("notes", lang), (lang, [h.namespace for h in hits])
        assert hits[0].score is not None and 0 < hits[0].score <= 1
        assert all((h.score or 0) < hits[0].score for h in hits[1:])


# --------------------------------------------------------------------------- async


def test_async_methods(make_store: StoreFactory) -> None:
    store = make_store(index={"dims": DIMS, "embed": embed, "fields": ["text"]})

    async def scenario() -> None:
        await store.aput(("a", "b"), "k1", {"text": "Новосибирск"})
        await store.aput(("a", "c"), "k2", {"text": "北京"})
        got = await store.aget(("a", "b"), "k1")
        assert got is not None and got.value == {"text": "Новосибирск"}
        assert await store.alist_namespaces(prefix=("a",)) == [("a", "b"), ("a", "c")]
        hits = await store.asearch(("a",), query="北京")
        assert keys(hits)[0] == "k2"
        with pytest.raises(InvalidNamespaceError):
            await store.aput(("langgraph",), "k", {})
        await store.adelete(("a", "b"), "k1")
        assert await store.aget(("a", "b"), "k1") is None

    asyncio.run(scenario())


def test_an_async_embedding_function(make_store: StoreFactory) -> None:
    """LangGraph's ``index`` takes an async function too (used by the async methods)."""

    async def aembed(texts: list[str]) -> list[list[float]]:
        return embed(texts)

    store = make_store(index={"dims": DIMS, "embed": aembed, "fields": ["text"]})

    async def scenario() -> list[str]:
        for lang, text in MULTILINGUAL.items():
            await store.aput(("notes",), lang, {"text": text})
        hits = await store.asearch(("notes",), query=QUERIES["ru"], limit=0)
        assert hits == []
        return keys(await store.asearch(("notes",), query=QUERIES["ru"], limit=2))

    assert asyncio.run(scenario())[0] == "ru"


# --------------------------------------------------------------------------- Cairn only


@pytest.mark.parametrize("kind", CAIRN_KINDS, indirect=True)
def test_ttl_expires_and_refreshes(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TTLs in minutes, as LangGraph gives them: an item is gone once its TTL passed since its
    last write (or read, with ``refresh_on_read``); the server's clock is moved, not waited for."""
    now = [datetime.now(UTC)]
    monkeypatch.setattr("cairn.engine.items.utcnow", lambda: now[0])
    store = make_store(ttl={"default_ttl": 10, "refresh_on_read": True})
    assert store.supports_ttl
    store.put(("t",), "default", {"v": 1})
    store.put(("t",), "short", {"v": 1}, ttl=1)
    store.put(("t",), "forever", {"v": 1}, ttl=None)
    now[0] += timedelta(seconds=50)
    assert store.get(("t",), "short") is not None  # refreshed: 1 minute from now again
    now[0] += timedelta(seconds=50)
    assert store.get(("t",), "short", refresh_ttl=False) is not None
    now[0] += timedelta(seconds=20)
    assert store.get(("t",), "short") is None
    assert keys(store.search(("t",))) == ["default", "forever"]
    now[0] += timedelta(minutes=10)
    assert keys(store.search(("t",))) == ["forever"]
    assert store.list_namespaces() == [("t",)]
    store.put(("u",), "new", {"v": 1}, ttl=None)  # a write deletes what expired
    client = store.client  # type: ignore[attr-defined]
    assert client.items.search(store.scope, ["t"]) and len(client.items.search(store.scope)) == 2


@pytest.mark.parametrize("kind", CAIRN_KINDS, indirect=True)
def test_cairn_namespace_limits_raise_invalid_namespace(make_store: StoreFactory) -> None:
    store = make_store()
    for bad in [("x" * 129,), ("x",) * 33, ("x" * 100,) * 6]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
        with pytest.raises(InvalidNamespaceError):
            store.search(bad)
    assert store.search(()) == []


@pytest.mark.parametrize("kind", CAIRN_KINDS, indirect=True)
def test_created_at_survives_an_update(make_store: StoreFactory) -> None:
    """As in LangGraph's PostgreSQL store (InMemoryStore resets it on every put)."""
    store = make_store()
    store.put(("d",), "k", {"v": 1})
    first = store.get(("d",), "k")
    store.put(("d",), "k", {"v": 2})
    second = store.get(("d",), "k")
    assert first is not None and second is not None
    assert second.created_at == first.created_at and second.updated_at > first.updated_at


@pytest.mark.parametrize("kind", CAIRN_KINDS, indirect=True)
def test_scopes_are_separate_stores(make_store: StoreFactory) -> None:
    ada = make_store(scope={"runtime_id": "langgraph", "user_id": "ada"})
    bob = make_store(scope={"runtime_id": "langgraph", "user_id": "bob"})
    ada.put(("memories",), "m", {"text": "ada's secret"})
    assert bob.get(("memories",), "m") is None
    assert bob.search(("memories",), query="secret") == [] and bob.list_namespaces() == []
    client = ada.client  # type: ignore[attr-defined]
    client.request("DELETE", "/v1/scopes", params={"user_id": "ada"})
    assert ada.get(("memories",), "m") is None and ada.list_namespaces() == []


def test_embedded_store_is_durable(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with CairnStore(settings=settings) as store:
        store.put(("users", "ada"), "prefs", {"tea": "jasmine"})
    with CairnStore(settings=settings) as store:
        got = store.get(("users", "ada"), "prefs")
        assert got is not None and got.value == {"tea": "jasmine"}


def test_store_over_a_passed_client_keeps_it_open(tmp_path: Path) -> None:
    client = Cairn.local(make_settings(tmp_path))
    try:
        store = CairnStore(client=client)
        store.put(("x",), "k", {"v": 1})
        store.close()
        assert client.items.get({"runtime_id": "langgraph"}, ["x"], "k") is not None
    finally:
        client.close()


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    monkeypatch.delitem(sys.modules, "cairn.integrations.langgraph")
    with pytest.raises(ImportError, match=r"pip install 'cairn\[langgraph\]'"):
        importlib.import_module("cairn.integrations.langgraph")


def test_an_unclosed_embedded_store_lets_the_process_exit(tmp_path: Path) -> None:
    """As with a module-level ``InMemoryStore``, a program that never closes its store ends."""
    program = (
        "from cairn.integrations.langgraph import CairnStore\n"
        "store = CairnStore()\n"
        "store.put(('users', 'ada'), 'prefs', {'tea': 'jasmine'})\n"
        "print(store.get(('users', 'ada'), 'prefs').value)\n"
    )
    env = {
        **os.environ,
        "CAIRN_DATA_DIR": str(tmp_path / "data"),
        "CAIRN_EMBEDDER": "none",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("CAIRN_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "{'tea': 'jasmine'}"
