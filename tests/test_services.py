"""The composition root owns every thread Cairn starts: none survives ``Services.close()`` or
the end of the app's lifespan, on both backends, with the default embedder, the in-process
worker, the background compile of turns and the ladder watcher all running. And nothing sets
or reads parts of ``Services`` by name."""

from __future__ import annotations

import ast
import re
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.services import Services
from tests.conftest import make_settings
from tests.web.conftest import make_ladders_dir

SRC = Path(__file__).resolve().parents[1] / "src" / "cairn"

# The threads the exercise below must have started (the query-embedding pool's threads are
# ``cairn-query-embed_0``, ...): if one is missing the test proves nothing about it.
EXPECTED = (
    "cairn-compile-worker",
    "cairn-embedding",
    "cairn-turn-compiler",
    "cairn-ladder-watcher",
    "cairn-query-embed",
)


def _settings(db_url: str, tmp_path: Path) -> Settings:
    return make_settings(
        tmp_path,
        database_url=db_url,
        embedder="multilingual",  # the default embedder, loaded by Services on first use
        worker_in_process=True,  # on PostgreSQL too
        compile_turns=True,
        ladders_dir=make_ladders_dir(tmp_path / "ladders"),
        ladders_poll_s=0.05,
    )


def _exercise(client: TestClient, services: Services) -> set[str]:
    """Start every background part: a queued compile (the worker), committed turns (the turn
    compiler), their vectors (the embedding pass), a hybrid search once vectors exist (the
    query-embedding pool). Returns the names of the threads alive meanwhile."""
    scope = {"runtime_id": "default", "user_id": "maya", "agent_id": ""}
    for i, text in enumerate(["I prefer green tea over coffee.", "My sister lives in Oslo."]):
        r = client.post(
            "/v1/scopes/turns",
            json={
                "scope": scope,
                "conversation_id": "c1",
                "idempotency_key": f"t{i}",
                "messages": [{"role": "user", "content": text}],
            },
        )
        assert r.status_code == 201, r.text
    r = client.post("/v1/memories/compile", json={"subject_id": "maya", "async": True})
    assert r.status_code in (200, 202), r.text
    assert services.turn_compiler is not None and services.turn_compiler.wait_idle(30)
    assert services.embedding_backfill is not None
    deadline = time.monotonic() + 30
    while True:  # the vectors of the compiled turns (written in the background)
        assert services.embedding_backfill.wait_idle(30)
        with services.store.snapshot() as tx:
            missing = tx.memories.without_embedding("default", Scope.for_subject("maya"))
        if not missing:
            break
        assert time.monotonic() < deadline, "the vectors did not arrive"
        time.sleep(0.05)
    r = client.get("/v1/memories/search", params={"subject_id": "maya", "q": "green tea"})
    assert r.status_code == 200 and r.json()["memories"], r.text
    return {t.name for t in threading.enumerate() if t.is_alive()}


def _new_threads(before: set[threading.Thread], grace_s: float = 5.0) -> list[str]:
    """Threads alive now that were not before (a thread that is ending gets ``grace_s``)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            return sorted(t.name for t in left)
        time.sleep(0.02)


def _check_started(alive: set[str]) -> None:
    for prefix in EXPECTED:
        assert any(name.startswith(prefix) for name in alive), (prefix, sorted(alive))


def test_no_thread_survives_close(db_url: str, tmp_path: Path) -> None:
    """Services shared with the app (as tests and the in-process client do): the lifespan
    stops what it started, and ``close`` stops everything else and is safe to repeat."""
    before = set(threading.enumerate())
    services = Services.from_settings(_settings(db_url, tmp_path))
    try:
        with TestClient(create_app(services=services)) as client:
            alive = _exercise(client, services)
    finally:
        services.close()
    _check_started(alive)
    assert _new_threads(before) == []
    services.close()  # a second close is a no-op


def test_no_thread_survives_the_lifespan(db_url: str, tmp_path: Path) -> None:
    """An app that built its own Services closes them when its lifespan ends."""
    before = set(threading.enumerate())
    app = create_app(_settings(db_url, tmp_path))
    services: Services = app.state.services
    with TestClient(app) as client:
        alive = _exercise(client, services)
    _check_started(alive)
    assert _new_threads(before) == []


def test_close_without_start_stops_threads_started_by_use(db_url: str, tmp_path: Path) -> None:
    """Threads a part starts on first use (the turn compiler) end with ``close`` even when no
    lifespan ever ran."""
    before = set(threading.enumerate())
    services = Services.from_settings(_settings(db_url, tmp_path))
    try:
        assert services.turn_compiler is not None
        services.turn_compiler.submit("default", [Scope.for_subject("nobody")])
        assert any(t.name == "cairn-turn-compiler" for t in threading.enumerate())
    finally:
        services.close()
    assert _new_threads(before) == []


# ----------------------------------------------------------------------- no parts by name

# ``getattr(services, ...)``, ``setattr(self.services, ...)``, ``services.x = ...`` outside
# the composition root, and the like.
BY_NAME = re.compile(r"\b(?:get|set|has|del)attr\(\s*(?:self\.)?(?:services|svc)\w*\b")
ASSIGNED = re.compile(r"^\s*(?:self\.)?services\.[A-Za-z_]\w*\s*(?::[^=]+)?=(?!=)", re.M)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('x = getattr(services, "embedder", None)', BY_NAME),
        ("setattr(services, 'ladder_runtime', rt)", BY_NAME),
        ('getattr( self.services , "slates")', BY_NAME),
        ("hasattr(svc, 'compiler')", BY_NAME),
        ('getattr(services_or_store, "compiler", None)', BY_NAME),
        ("    services.embedder = LazyEmbedder(settings)", ASSIGNED),
        ("        self.services.compile_worker: Any = None", ASSIGNED),
    ],
)
def test_the_patterns_find_what_they_forbid(text: str, pattern: re.Pattern[str]) -> None:
    assert pattern.search(text)


def test_nothing_sets_or_reads_services_by_name() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100 and SRC / "services.py" in files  # the tree really was read
    found: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for pattern in (BY_NAME, ASSIGNED):
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(SRC)}:{line}: {m.group(0).strip()}")
    assert found == []


# ------------------------------------------------------------------ no hidden global state

# Module-level state that is allowed, each for the reason its module gives: the id clock
# (ids of one process must increase), pure memos of immutable values (an encoding, the
# bundled templates, the terms of a text), the impl registry (which code implements an impl
# name, like entry points).
ALLOWED = {
    "core/ids.py": {"global"},
    "engine/context/impls.py": {"_registry"},
    "core/scope.py": {"@_subject_scope"},
    "client/_base.py": {"@_adapter"},
    "client/_lifecycle.py": {"UNSET"},  # a sentinel ("not given"): it holds nothing
    "core/tokens.py": {"@get_tokenizer"},
    "core/analysis.py": {"@_scripts_kept"},  # a constant pattern of characters
    "cli/_common.py": {"console", "err_console"},  # the CLI process's two output streams
    "engine/query.py": {"@_name_terms"},
    "engine/compile/heuristic.py": {"@_content_words"},
    "templates/loader.py": {"@_bundled"},
    # Memos of constant data: a model class's field names; immutable SQL statements (their
    # text holds no tenant's data: names of FTS tables are hashes, values are bound).
    "core/construct.py": {"_FIELDS"},
    "store/statements.py": {"@statement"},
}
MUTABLE_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter"}
THREAD_CALLS = {"ThreadPoolExecutor", "ProcessPoolExecutor", "Thread", "Timer"}
MEMO_DECORATORS = {"lru_cache", "cache", "cached_property"}


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _frozen(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(d, ast.Call)
        and _name_of(d) == "dataclass"
        and any(k.arg == "frozen" and getattr(k.value, "value", False) for k in d.keywords)
        for d in cls.decorator_list
    )


def global_state(source: str) -> set[str]:
    """What a module keeps at module level that a process would share: empty mutable
    containers (filled later), pools and threads, instances of the module's own classes,
    memo decorators, ``global`` statements."""
    found: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.add("global")
    # An instance of a class of the module itself, made at import (a cache, an index), unless
    # the class is a frozen dataclass (a constant description).
    own = {n.name for n in tree.body if isinstance(n, ast.ClassDef) and not _frozen(n)}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_name_of(d) in MEMO_DECORATORS for d in node.decorator_list):
                found.add(f"@{node.name}")
            continue
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        value = node.value
        empty = isinstance(value, ast.Dict | ast.List | ast.Set) and not (
            value.keys if isinstance(value, ast.Dict) else value.elts
        )
        call = _name_of(value) if isinstance(value, ast.Call) else ""
        made = call in MUTABLE_CALLS and not (isinstance(value, ast.Call) and value.args)
        if empty or made or call in THREAD_CALLS or call in own:
            found.update(names)
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("_MESSAGES: dict[int, str] = {}", {"_MESSAGES"}),
        ("_SEEN = set()", {"_SEEN"}),
        ("_ITEMS = OrderedDict()", {"_ITEMS"}),
        ("_POOL = ThreadPoolExecutor(max_workers=2)", {"_POOL"}),
        ("class Index:\n    pass\n\n\nINDEX = Index(64)", {"INDEX"}),
        ("@dataclass(frozen=True)\nclass Spec:\n    a: int\n\n\nSPEC = Spec(a=1)", set()),
        ("@lru_cache(maxsize=8)\ndef f(x):\n    return x", {"@f"}),
        ("def f():\n    global _n\n    _n = 1", {"global"}),
        ("TABLE = {'a': 1}\nNAMES = frozenset({'x'})\nPAIRS = dict([('a', 1)])", set()),
    ],
)
def test_the_scan_finds_module_state(source: str, expected: set[str]) -> None:
    assert global_state(source) == expected


def test_no_module_keeps_hidden_state() -> None:
    """Caches, pools and memos that hold a process's data belong to ``Services`` (or the
    object that owns them) and are closed with it; only the listed exceptions stay."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("bench/"):  # benchmark scripts, not the server
            continue
        state = global_state(path.read_text(encoding="utf-8")) - ALLOWED.get(rel, set())
        if state:
            found[rel] = state
    assert found == {}
    for rel, allowed in ALLOWED.items():  # an exception that is gone must leave the list
        assert global_state((SRC / rel).read_text(encoding="utf-8")) == allowed, rel
