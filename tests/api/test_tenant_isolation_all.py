"""No request crosses a tenant boundary, on every route of the app, on both backends.

Tenant A fills every kind of state (episodes, compiled memories, an async compile job, a
template episode, scope-level turns and documents, slate files incl. a per-user slate and an
eviction, ladder runs incl. one whose memory hook commits a turn). Tenant B then calls every
route with A's identifiers. Each route has an entry in ``API_PROBES`` (or ``UI_PROBES``), and
a coverage test fails when the app gains a route that has no entry, so new routes must be
added here. The harness checks on every single call B makes:

- the call hit the route whose probe made it (the table cannot lie about its coverage);
- no secret of A (a content marker, or an id B did not send itself) is in the answer;
- the same call with ``X-Tenant-ID: tenant-a`` is a 403 ``tenant_mismatch`` (API routes).

After all of B's reads and writes, A re-reads its data: it must be exactly as before.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cairn.api.routes.unsupported import ROUTES as UNSUPPORTED_ROUTES
from cairn.app import create_app
from cairn.services import Services
from tests.web.conftest import make_ladders_dir

SUBJ_A = "a-only"  # a subject B never writes to: B's reads of it must be empty
SUBJ_SHARED = "shared"  # a subject both tenants write to: B sees only its own
SCOPE = {"runtime_id": "rt-iso", "user_id": "u-iso", "agent_id": "ag-iso"}
ITEM = {"scope": SCOPE, "namespace": ["notes", "a"], "key": "k"}  # an item of A's
ITEM_QUERY = {**SCOPE, "namespace": ["notes", "a"], "key": "k"}
TENANT_SCOPED_EXEMPT = {("GET", "/v1/version")}  # public: no tenant, no tenant data
Response = Any  # the TestClient's response (httpx's, or httpx2's with newer Starlette)


def route_table(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app serves, through included routers of any FastAPI version."""
    out: set[tuple[str, str]] = set()
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is None:
            items = [(getattr(route, "methods", None), getattr(route, "path", None))]
        else:
            items = [(c.methods, c.path) for c in (contexts() if callable(contexts) else contexts)]
        for methods, path in items:
            for method in methods or ():
                if path and method != "HEAD":
                    out.add((method, path))
    return out


def path_regex(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"\{[^}:]+:path\}", ".*", template)
    pattern = re.sub(r"\{[^}]+\}", "[^/]+", pattern)
    return re.compile(f"^{pattern}$")


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    """A's data and identifiers, and B's harnessed clients."""

    client: TestClient
    a: dict[str, str]
    b_key: str
    markers: list[str]  # content only A ever wrote
    ids: dict[str, str] = field(default_factory=dict)  # server-made ids of A's data
    route: tuple[str, str] = ("", "")
    hits: set[tuple[str, str]] = field(default_factory=set)
    strict: bool = True  # before B's own writes: B's reads of A's identifiers must be empty
    web: TestClient | None = None
    csrf: str = ""
    backend: str = ""

    def _check(self, method: str, url: str, sent: str, r: Response) -> None:
        path = urlsplit(url).path
        assert method == self.route[0] and path_regex(self.route[1]).match(path), (
            f"probe of {self.route} called {method} {path}"
        )
        self.hits.add(self.route)
        secrets_ = self.markers + [v for v in self.ids.values() if v not in sent]
        leaked = [s for s in secrets_ if s in r.text]
        assert not leaked, f"{method} {url} as B shows A's {leaked}: {r.text[:400]}"

    def b(self, method: str, url: str, **kw: Any) -> Response:
        """One API call as B, checked (see the module docstring)."""
        headers = {"X-API-Key": self.b_key, **kw.pop("headers", {})}
        sent = f"{url} {kw!r} {headers!r}"
        if self.route not in TENANT_SCOPED_EXEMPT:
            spoof = self.client.request(
                method, url, headers={**headers, "X-Tenant-ID": "tenant-a"}, **kw
            )
            assert spoof.status_code == 403, (method, url, spoof.text[:300])
            assert spoof.json()["error"]["code"] == "tenant_mismatch"
        r = self.client.request(method, url, headers=headers, **kw)
        self._check(method, url, sent, r)
        return r

    def ui(self, method: str, url: str, **kw: Any) -> Response:
        """One inspector request as B (signed in by cookie), checked."""
        assert self.web is not None
        if method == "POST":
            kw["data"] = {"csrf": self.csrf, **kw.get("data", {})}
        r = self.web.request(method, url, **kw)
        self._check(method, url, f"{url} {kw!r}", r)
        return r


def a_call(w: World, method: str, url: str, status: int = 200, **kw: Any) -> Any:
    r = w.client.request(method, url, headers=w.a, **kw)
    assert r.status_code == status, (method, url, r.text[:400])
    return r.json()


def code(r: Response) -> str:
    return str(r.json()["error"]["code"])


def seed(w: World, services: Services) -> None:
    """Tenant A writes one of everything; ids of what it made go to ``w.ids``."""
    m = w.markers
    ep = a_call(
        w,
        "POST",
        "/v1/episodes",
        201,
        json={
            "subject_id": SUBJ_A,
            "source": "chat",
            "type": "note",
            "idempotency_key": "idem-1",
            "session_id": "sess-a",
            "payload": {"text": f"episode {m[0]}"},
        },
    )
    w.ids["episode"] = ep["id"]
    turns = [f"Hi, my name is {m[1]} Quill.", f"I work at {m[2]} in Oslo."]
    for subject in (SUBJ_A, SUBJ_SHARED):
        batch = a_call(
            w,
            "POST",
            "/v1/episodes/batch",
            201,
            json={
                "episodes": [
                    {
                        "subject_id": subject,
                        "source": "chat",
                        "type": "conversation.turn",
                        "session_id": "sess-a",
                        "idempotency_key": f"batch-{i}",
                        "payload": {"messages": [{"role": "user", "content": t}]},
                    }
                    for i, t in enumerate(turns)
                ]
            },
        )
        for i, e in enumerate(batch["episodes"]):
            w.ids[f"batch-{subject}-{i}"] = e["id"]
        compiled = a_call(w, "POST", "/v1/memories/compile", json={"subject_id": subject})
        assert compiled["memories_created"] > 0
        for i, mem in enumerate(compiled["memories"]):
            w.ids[f"memory-{subject}-{i}"] = mem["id"]
    applied = a_call(
        w,
        "POST",
        "/v1/memory-templates/user-preference/apply",
        201,
        json={
            "subject_id": SUBJ_A,
            "idempotency_key": "tpl-1",
            "values": {"subject": "drinks", "preference": f"A prefers {m[3]} tea."},
        },
    )
    w.ids["template_episode"] = applied["id"]
    a_call(
        w,
        "POST",
        "/v1/episodes",
        201,
        json={"subject_id": SUBJ_A, "source": "chat", "type": "note", "payload": {"text": "later"}},
    )
    job = a_call(w, "POST", "/v1/memories/compile", 202, json={"subject_id": SUBJ_A, "async": True})
    w.ids["job"] = job["job_id"]
    deadline = time.monotonic() + 10  # finish it now, so A's snapshot cannot change later
    while a_call(w, "GET", f"/v1/memories/compile/{job['job_id']}")["status"] not in (
        "succeeded",
        "failed",
        "done",
        "completed",
    ):
        assert time.monotonic() < deadline, "the compile job did not finish"
        if not services.job_runner.work_once():
            time.sleep(0.02)
    turn = a_call(
        w,
        "POST",
        "/v1/scopes/turns",
        201,
        json={
            "scope": SCOPE,
            "conversation_id": "conv-a",
            "idempotency_key": "turn-1",
            "messages": [{"role": "user", "content": f"turn {m[4]}"}],
        },
    )
    w.ids["turn_episode"] = turn["episode_id"]
    # The turn is recallable as a memory too: compiled by this call or, just before it, by
    # the background compile of committed turns; either way nothing is left to change later.
    compiled = a_call(w, "POST", "/v1/scopes/compile", json={"scope": SCOPE})
    assert compiled["remaining_episodes"] == 0
    doc = a_call(
        w,
        "POST",
        "/v1/scopes/documents",
        201,
        json={
            "scope": SCOPE,
            "dataset_id": "ds-a",
            "document_id": "doc-1",
            "content": f"Handbook: the vault code is {m[5]}.",
        },
    )
    w.ids["document"] = doc["id"]
    a_call(
        w, "POST", "/v1/slates/memory-ladder/Memory/facts/core.md", json={"content": f"fact {m[6]}"}
    )
    a_call(
        w,
        "POST",
        "/v1/slates/web-notes/Profile/prefs/likes.md",
        params={"user_id": "ana"},
        json={"content": f"likes {m[7]}"},
    )
    for i in range(3):  # tokenLimit 30, FIFO: the first notes are evicted (recorded)
        a_call(
            w,
            "POST",
            "/v1/slates/web-notes/Notes/inbox/notes.md",
            json={"content": f"note {i} {m[8]} " + "word " * 8},
        )
    r = w.client.post(
        "/v1/local/memory-ladder/chat/completions",
        headers={**w.a, "Idempotency-Key": "run-a-1"},
        json={"messages": [{"role": "user", "content": f"What is the capital of France? {m[9]}"}]},
    )
    assert r.status_code == 200, r.text
    r = w.client.post(
        "/v1/local/assistant/chat/completions",
        headers={**w.a, "Idempotency-Key": "run-a-teal", "X-Conversation-ID": "demo"},
        json={"messages": [{"role": "user", "content": f"My favourite colour is teal. {m[10]}"}]},
    )
    assert r.status_code == 200, r.text
    r = w.client.post(
        "/v1/local/assistant/chat/completions",
        headers={**w.a, "X-Conversation-ID": "demo"},
        json={"messages": [{"role": "user", "content": "What is my favourite colour?"}]},
    )
    assert "teal" in r.json()["choices"][0]["message"]["content"]  # A's memory works for A
    a_call(w, "PUT", "/v1/items", json={**ITEM, "value": {"text": f"item {m[11]}"}})
    # The ladder runs' turns are compiled in the background; a compile landing between A's
    # two snapshots would change A's scores (BM25 normalises by the tenant's index), so A's
    # store is settled before the test reads it.
    assert services.turn_compiler is None or services.turn_compiler.wait_idle(30)


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Where ``after`` differs from ``before``: each differing leaf's path and both values."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = [f"{path}/{k}: only before" for k in before.keys() - after.keys()]
        out += [f"{path}/{k}: only after" for k in after.keys() - before.keys()]
        for k in before.keys() & after.keys():
            out += differences(before[k], after[k], f"{path}/{k}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            d
            for i, (x, y) in enumerate(zip(before, after, strict=True))
            for d in differences(x, y, f"{path}/{i}")
        ]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


def snapshot(w: World) -> dict[str, Any]:
    """Everything A can read of its data (reads that never count as a slate use)."""
    s: dict[str, Any] = {}
    for subject in (SUBJ_A, SUBJ_SHARED):
        s[f"timeline-{subject}"] = a_call(
            w, "GET", "/v1/timeline", params={"subject_id": subject, "limit": 1000}
        )
        s[f"search-{subject}"] = a_call(
            w,
            "GET",
            "/v1/memories/search",
            params={"subject_id": subject, "q": w.markers[1], "include_superseded": True},
        )
        s[f"context-{subject}"] = a_call(
            w,
            "POST",
            "/v1/context",
            json={"subject_id": subject, "task": f"Who is {w.markers[1]}?"},
        )
    s["subjects"] = a_call(w, "GET", "/v1/subjects")
    s["job"] = a_call(w, "GET", f"/v1/memories/compile/{w.ids['job']}")
    s["scope"] = a_call(
        w,
        "POST",
        "/v1/scopes/context",
        json={
            "scope": SCOPE,
            "conversation_id": "conv-a",
            "query": "vault code",
            "dataset_ids": ["ds-a"],
        },
    )
    s["slates"] = a_call(w, "GET", "/v1/slates")
    for ladder, slate, folder, file, user in [
        ("memory-ladder", "Memory", "facts", "core.md", None),
        ("web-notes", "Notes", "inbox", "notes.md", None),
        ("web-notes", "Profile", "prefs", "likes.md", "ana"),
    ]:
        params = {"user_id": user} if user else {}
        base = f"/v1/slates/{ladder}/{slate}"
        s[f"{base}/{folder}/{file}"] = a_call(
            w, "GET", f"{base}/{folder}/{file}", params={**params, "peek": True}
        )
        s[f"{base}/tree"] = a_call(w, "GET", base, params=params)
        s[f"{base}/evictions"] = a_call(w, "GET", f"{base}/evictions", params=params)
    s["item"] = a_call(w, "GET", "/v1/items", params=ITEM_QUERY)
    s["items"] = a_call(
        w, "POST", "/v1/items/search", json={"scope": SCOPE, "query": w.markers[11]}
    )
    s["namespaces"] = a_call(w, "POST", "/v1/items/namespaces", json={"scope": SCOPE})
    s["runs"] = a_call(w, "GET", "/v1/runs")
    for run in ("run-a-1", "run-a-teal"):
        s[run] = a_call(w, "GET", f"/v1/runs/{run}")
    return s


def _not_found(r: Response, error: str) -> None:
    assert r.status_code == 404 and code(r) == error, r.text[:300]


def p_episode(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/episodes",
        json={
            "subject_id": SUBJ_SHARED,
            "source": "chat",
            "type": "note",
            "idempotency_key": "idem-1",
            "session_id": "sess-a",
            "payload": {"text": "b's own"},
        },
    )
    assert r.status_code == 201 and r.json()["payload"] == {"text": "b's own"}


def p_batch(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/episodes/batch",
        json={
            "episodes": [
                {
                    "subject_id": SUBJ_SHARED,
                    "source": "chat",
                    "type": "conversation.turn",
                    "idempotency_key": "batch-0",
                    "session_id": "sess-a",
                    "payload": {"messages": [{"role": "user", "content": "I am B."}]},
                }
            ]
        },
    )
    assert r.status_code == 201 and r.json()["episodes_created"] == 1


def p_timeline(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        r = w.b("GET", "/v1/timeline", params={"subject_id": subject, "newest_first": True})
        assert r.status_code == 200
        if w.strict or subject == SUBJ_A:
            assert r.json()["episodes"] == [] and r.json()["memories"] == []


def p_subjects(w: World) -> None:
    r = w.b("GET", "/v1/subjects")
    assert r.status_code == 200
    assert SUBJ_A not in {s["subject_id"] for s in r.json()["subjects"]}
    if w.strict:
        assert r.json() == {"subjects": [], "total": 0}
    assert w.b("GET", "/v1/subjects", params={"prefix": "a-"}).json()["total"] == 0


def p_delete_subject(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        r = w.b("DELETE", f"/v1/subjects/{subject}")
        assert r.status_code == 200
    assert r.json()["episodes_deleted"] >= 0  # B's own only: A's are re-read at the end


def p_templates(w: World) -> None:
    assert w.b("GET", "/v1/memory-templates").status_code == 200


def p_template(w: World) -> None:
    assert w.b("GET", "/v1/memory-templates/user-preference").status_code == 200


def p_template_apply(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/memory-templates/user-preference/apply",
        json={
            "subject_id": SUBJ_A,
            "idempotency_key": "tpl-1",
            "values": {"subject": "drinks", "preference": "B prefers coffee."},
        },
    )
    assert r.status_code == 201 and "B prefers coffee." in r.text


def p_slates(w: World) -> None:
    r = w.b("GET", "/v1/slates")
    assert r.status_code == 200
    if w.strict:
        assert all(i.get("user_id") in (None, "") for i in r.json()["slates"]), r.text
    assert w.b("GET", "/v1/slates", params={"ladder": "web-notes"}).status_code == 200


A_FOLDERS = ("facts", "prefs", "inbox")  # the folders A wrote to (all start blank)


def _usage(tree: Any, inside: bool = False) -> list[int]:
    """The ``tokens`` of A's folders and their files in a tree (all 0 for B)."""
    if isinstance(tree, dict):
        inside = inside or tree.get("folder") in A_FOLDERS
        own = [tree["tokens"]] if inside and isinstance(tree.get("tokens"), int) else []
        return own + [n for v in tree.values() for n in _usage(v, inside)]
    if isinstance(tree, list):
        return [n for v in tree for n in _usage(v, inside)]
    return []


def p_slate_tree(w: World) -> None:
    for url, params in [
        ("/v1/slates/memory-ladder/Memory", {}),
        ("/v1/slates/web-notes/Profile", {"user_id": "ana"}),
        ("/v1/slates/web-notes/Notes", {"depth": 2}),
    ]:
        r = w.b("GET", url, params=params)
        assert r.status_code == 200, r.text
        if w.strict:
            assert not any(_usage(r.json())), r.text


def p_evictions(w: World) -> None:
    r = w.b("GET", "/v1/slates/web-notes/Notes/evictions")
    assert r.status_code == 200 and r.json()["evictions"] == []


def p_folder(w: World) -> None:
    for params in ({}, {"metatag": "tree"}):
        r = w.b("GET", "/v1/slates/web-notes/Notes/inbox", params=params)
        assert r.status_code == 200
        if w.strict:
            assert not any(_usage(r.json())), r.text
    assert (
        w.b("GET", "/v1/slates/web-notes/Profile/prefs", params={"user_id": "ana"}).status_code
        == 200
    )


def p_reset(w: World) -> None:
    for url, params in [
        ("/v1/slates/memory-ladder/Memory/facts/reset", {}),
        ("/v1/slates/web-notes/Profile/prefs/reset", {"user_id": "ana"}),
    ]:
        assert w.b("POST", url, params=params).status_code == 200


def p_read_file(w: World) -> None:
    for url, params in [
        ("/v1/slates/memory-ladder/Memory/facts/core.md", {}),
        ("/v1/slates/web-notes/Notes/inbox/notes.md", {}),
        ("/v1/slates/web-notes/Profile/prefs/likes.md", {"user_id": "ana"}),
    ]:
        r = w.b("GET", url, params=params)
        assert r.status_code == 200
        if w.strict:
            assert r.json()["content"].strip() == ""
        for tag in ("tags", "index", "tree"):
            assert w.b("GET", url, params={**params, "metatag": tag}).status_code == 200


def p_write_file(w: World) -> None:
    for url, params in [
        ("/v1/slates/memory-ladder/Memory/facts/core.md", {}),
        ("/v1/slates/web-notes/Profile/prefs/likes.md", {"user_id": "ana"}),
    ]:
        r = w.b("POST", url, params=params, json={"content": "b writes", "on": "overwrite"})
        assert r.status_code == 200, r.text
    r = w.b(
        "POST",
        "/v1/slates/memory-ladder/Memory/facts/core.md",
        json={"content": '{"fact": "B learnt this."}', "field": "fact"},
    )
    assert r.status_code == 200, r.text


def p_delete_file(w: World) -> None:
    for url, params in [
        ("/v1/slates/web-notes/Notes/inbox/notes.md", {}),
        ("/v1/slates/web-notes/Profile/prefs/likes.md", {"user_id": "ana"}),
    ]:
        assert w.b("DELETE", url, params=params).status_code == 200


def p_file_name_with_a_slash(method: str) -> Callable[[World], None]:
    """``a%2Fb`` as a file name: refused by name, whoever asks, without reading anything."""

    def probe(w: World) -> None:
        url = "/v1/slates/memory-ladder/Memory/facts/core.md/more"  # (a%2Fb, once decoded)
        r = w.b(method, url, json={"content": "x"} if method == "POST" else None)
        assert r.status_code == 422 and r.json()["error"]["code"] == "slate_invalid_name"

    return probe


def p_context(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        r = w.b(
            "POST", "/v1/context", json={"subject_id": subject, "task": "What is the user's name?"}
        )
        assert r.status_code == 200
        if w.strict or subject == SUBJ_A:
            body = r.json()
            assert body["facts"] == body["episodes"] == body["procedures"] == []


def p_scope_context(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/scopes/context",
        json={
            "scope": SCOPE,
            "conversation_id": "conv-a",
            "query": "vault code",
            "dataset_ids": ["ds-a"],
            "render": {},
        },
    )
    assert r.status_code == 200
    if w.strict:
        assert r.json()["items"] == []


def p_turns(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/scopes/turns",
        json={
            "scope": SCOPE,
            "conversation_id": "conv-a",
            "idempotency_key": "turn-1",
            "messages": [{"role": "user", "content": "b's turn"}],
        },
    )
    assert r.status_code in (200, 201)
    assert r.json()["episode_id"] != w.ids["turn_episode"]


def p_documents(w: World) -> None:
    r = w.b(
        "POST",
        "/v1/scopes/documents",
        json={"scope": SCOPE, "dataset_id": "ds-a", "document_id": "doc-1", "content": "b's doc"},
    )
    assert r.status_code in (200, 201) and r.json()["id"] != w.ids["document"]


def p_delete_document(w: World) -> None:
    """B deletes A's document by its scope and ids: B's own copy (if B stored one) at most,
    never A's (A re-reads all of its data at the end)."""
    params = {**SCOPE, "dataset_id": "ds-a", "document_id": "doc-1"}
    r = w.b("DELETE", "/v1/scopes/documents", params=params)
    assert r.status_code in (200, 404), r.text
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "document_not_found"
    r = w.b("DELETE", "/v1/scopes/documents", params=params)
    assert r.status_code == 404, r.text  # nothing of A's was there to delete


def p_chat(w: World) -> None:
    # A's run id as B's Idempotency-Key: a new run of B's, never a replay of A's.
    r = w.b(
        "POST",
        "/v1/local/memory-ladder/chat/completions",
        headers={"Idempotency-Key": "run-a-1"},
        json={"messages": [{"role": "user", "content": "What is the capital of France?"}]},
    )
    assert r.status_code == 200, r.text
    # A's memory hook stored "teal" for this scope and conversation; B must not recall it.
    r = w.b(
        "POST",
        "/v1/local/assistant/chat/completions",
        headers={"X-Conversation-ID": "demo"},
        json={"messages": [{"role": "user", "content": "What is my favourite colour?"}]},
    )
    assert r.status_code == 200 and "teal" not in r.text, r.text


def p_models(w: World) -> None:
    assert w.b("GET", "/v1/local/models").status_code == 200


def p_ladder_files(w: World) -> None:
    # Ladder files are server configuration, the same for every tenant: no tenant data in them.
    r = w.b("GET", "/v1/ladders")
    assert r.status_code == 200 and "teal" not in r.text and SUBJ_A not in r.text, r.text


def p_ladder_file(w: World) -> None:
    for name in ("memory-ladder", "assistant:assistant"):
        r = w.b("GET", f"/v1/ladders/{name}")
        assert r.status_code == 200 and "teal" not in r.text and SUBJ_A not in r.text, r.text


def p_ladder_reload(w: World) -> None:
    r = w.b("POST", "/v1/ladders/reload")
    assert r.status_code == 200 and "teal" not in r.text, r.text
    assert "memory-ladder" in r.json()["serving"]


# Ladders are the server's configuration: the same models for every tenant.
def p_model(w: World) -> None:
    assert w.b("GET", "/v1/local/models/assistant").json()["id"] == "assistant"


def p_ladder_models(w: World) -> None:
    assert w.b("GET", "/v1/local/assistant/models").json()["data"][0]["id"] == "assistant"


def p_ladder_model(w: World) -> None:
    assert w.b("GET", "/v1/local/assistant/models/assistant").json()["id"] == "assistant"


def p_chat_by_model(w: World) -> None:
    # The shared base URL runs the same ladder in B's tenant: A's recalled colour stays A's.
    r = w.b(
        "POST",
        "/v1/local/chat/completions",
        headers={"X-Conversation-ID": "demo"},
        json={
            "model": "assistant",
            "messages": [{"role": "user", "content": "What is my favourite colour?"}],
        },
    )
    assert r.status_code == 200 and "teal" not in r.text, r.text


def p_runs(w: World) -> None:
    r = w.b("GET", "/v1/runs")
    assert r.status_code == 200 and "run-a-teal" not in r.text
    if w.strict:
        assert r.json() == {"runs": [], "total": 0}


def p_run(w: World) -> None:
    _not_found(w.b("GET", "/v1/runs/run-a-teal"), "run_not_found")
    r = w.b("GET", "/v1/runs/run-a-1")  # after p_chat, B's own run of that id
    if w.strict:
        _not_found(r, "run_not_found")


def p_compile(w: World) -> None:
    # B's own episodes only (B's template episode is in SUBJ_A by now): checked by the harness.
    r = w.b("POST", "/v1/memories/compile", json={"subject_id": SUBJ_A})
    assert r.status_code == 200
    r = w.b("POST", "/v1/memories/compile", json={"subject_id": SUBJ_A, "async": True})
    assert r.status_code == 202


def p_scope_compile(w: World) -> None:
    # A's scope identity, B's tenant: only B's own turns (if any yet) are compiled.
    r = w.b("POST", "/v1/scopes/compile", json={"scope": SCOPE})
    assert r.status_code == 200
    sources = {e for m in r.json()["memories"] for e in m["source_episode_ids"]}
    assert w.ids["turn_episode"] not in sources
    r = w.b("POST", "/v1/scopes/compile", json={"scope": SCOPE, "async": True})
    assert r.status_code == 202


def p_job(w: World) -> None:
    _not_found(w.b("GET", f"/v1/memories/compile/{w.ids['job']}"), "job_not_found")


def p_search(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        r = w.b(
            "GET",
            "/v1/memories/search",
            params={"subject_id": subject, "q": "Quill", "include_superseded": True},
        )
        assert r.status_code == 200 and r.json()["memories"] == []


def _a_memory_ids(w: World) -> list[str]:
    return [v for k, v in w.ids.items() if k.startswith("memory-")]


def p_get_episode(w: World) -> None:
    for key in ("episode", "turn_episode", "template_episode"):
        _not_found(w.b("GET", f"/v1/episodes/{w.ids[key]}"), "episode_not_found")


def p_delete_episode(w: World) -> None:
    for key in ("episode", "turn_episode"):
        _not_found(w.b("DELETE", f"/v1/episodes/{w.ids[key]}"), "episode_not_found")


def p_get_memory(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        _not_found(w.b("GET", f"/v1/memories/{memory_id}"), "memory_not_found")


def p_patch_memory(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        r = w.b("PATCH", f"/v1/memories/{memory_id}", json={"content": "B was here"})
        _not_found(r, "memory_not_found")


def p_delete_memory(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        _not_found(w.b("DELETE", f"/v1/memories/{memory_id}"), "memory_not_found")


def p_delete_scopes(w: World) -> None:
    """B erases A's users by name: only B's own partitions go (A re-reads all of its data at
    the end); a user only A ever wrote is nothing to B."""
    r = w.b("DELETE", "/v1/scopes", params={"user_id": SUBJ_A})
    assert r.status_code == 200 and r.json()["partitions"] == [], r.text
    assert set(r.json()["deleted"].values()) == {0}
    for user in (SCOPE["user_id"], SUBJ_SHARED, "ana"):
        assert w.b("DELETE", "/v1/scopes", params={"user_id": user}).status_code == 200
    assert w.b("DELETE", "/v1/scopes", params={**SCOPE}).status_code == 200


def p_export(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        r = w.b("GET", f"/v1/subjects/{subject}/export")
        assert r.status_code == 200
        lines = r.text.splitlines()
        if w.strict or subject == SUBJ_A:
            assert len(lines) == 1 and '"header"' in lines[0], r.text[:300]


def p_import(w: World) -> None:
    """B imports records carrying A's ids: refused without naming whose they are."""
    now = "2026-01-01T00:00:00+00:00"
    episode = {
        "id": w.ids["episode"],
        "session_id": None,
        "source": "chat",
        "type": "note",
        "payload": {"text": "B's import"},
        "metadata": {},
        "provenance": {},
        "idempotency_key": None,
        "occurred_at": now,
        "created_at": now,
        "compiled": False,
    }
    r = w.b(
        "POST",
        f"/v1/subjects/{SUBJ_A}/import",
        json={"records": [{"type": "episode", "row": episode}]},
    )
    assert r.status_code == 409 and code(r) == "import_id_conflict", r.text
    own = {**episode, "id": "00000000-0000-7000-8000-00000000b0b0"}
    r = w.b(
        "POST",
        "/v1/subjects/b-import/import",
        json={"records": [{"type": "episode", "row": own}]},
    )
    assert r.status_code == 200, r.text


def p_get_retention(w: World) -> None:
    r = w.b("GET", "/v1/retention")
    assert r.status_code == 200
    if w.strict:
        assert r.json() == {"episode_ttl_days": None, "memory_ttl_days": None}


def p_put_retention(w: World) -> None:
    """B's policy is B's: A's data (re-read at the end) never expires by it."""
    r = w.b("PUT", "/v1/retention", json={"episode_ttl_days": 1, "memory_ttl_days": 1})
    assert r.status_code == 200


def p_item_get(w: World) -> None:
    r = w.b("GET", "/v1/items", params=ITEM_QUERY)
    if w.strict:
        _not_found(r, "item_not_found")
    else:  # B's own item at the same address, if B's probes left one
        assert r.status_code == 404 or r.json()["value"] == {"text": "b's own"}, r.text


def p_item_put(w: World) -> None:
    r = w.b("PUT", "/v1/items", json={**ITEM, "value": {"text": "b's own"}})
    assert r.status_code == 200 and r.json()["value"] == {"text": "b's own"}


def p_item_delete(w: World) -> None:
    r = w.b("DELETE", "/v1/items", params=ITEM_QUERY)
    assert r.status_code == 200
    if w.strict:
        assert r.json() == {"deleted": False}


def p_item_search(w: World) -> None:
    r = w.b("POST", "/v1/items/search", json={"scope": SCOPE, "query": w.markers[11]})
    assert r.status_code == 200
    assert all(i["value"] == {"text": "b's own"} for i in r.json()["items"]), r.text
    if w.strict:
        assert r.json() == {"items": []}


def p_item_namespaces(w: World) -> None:
    r = w.b("POST", "/v1/items/namespaces", json={"scope": SCOPE})
    assert r.status_code == 200
    if w.strict:
        assert r.json() == {"namespaces": []}


def p_version(w: World) -> None:
    assert w.b("GET", "/v1/version").status_code == 200


API_PROBES: dict[tuple[str, str], Callable[[World], None]] = {
    ("GET", "/v1/version"): p_version,
    ("GET", "/v1/timeline"): p_timeline,
    ("GET", "/v1/subjects"): p_subjects,
    ("GET", "/v1/memory-templates"): p_templates,
    ("GET", "/v1/memory-templates/{template_id}"): p_template,
    ("GET", "/v1/slates"): p_slates,
    ("GET", "/v1/slates/{ladder}/{slate}"): p_slate_tree,
    ("GET", "/v1/slates/{ladder}/{slate}/evictions"): p_evictions,
    ("GET", "/v1/slates/{ladder}/{slate}/{folder}"): p_folder,
    ("GET", "/v1/slates/{ladder}/{slate}/{folder}/{file}"): p_read_file,
    ("POST", "/v1/context"): p_context,
    ("POST", "/v1/scopes/context"): p_scope_context,
    ("GET", "/v1/local/models"): p_models,
    ("GET", "/v1/ladders"): p_ladder_files,
    ("GET", "/v1/ladders/{name}"): p_ladder_file,
    ("GET", "/v1/local/models/{model_id}"): p_model,
    ("GET", "/v1/local/{ladder}/models"): p_ladder_models,
    ("GET", "/v1/local/{ladder}/models/{model_id}"): p_ladder_model,
    ("GET", "/v1/runs"): p_runs,
    ("GET", "/v1/runs/{run_id}"): p_run,
    ("GET", "/v1/memories/compile/{job_id}"): p_job,
    ("GET", "/v1/memories/search"): p_search,
    ("GET", "/v1/episodes/{episode_id}"): p_get_episode,
    ("GET", "/v1/memories/{memory_id}"): p_get_memory,
    ("GET", "/v1/subjects/{subject_id}/export"): p_export,
    ("GET", "/v1/retention"): p_get_retention,
    ("GET", "/v1/items"): p_item_get,
    ("POST", "/v1/items/search"): p_item_search,
    ("POST", "/v1/items/namespaces"): p_item_namespaces,
    # Writes: after them B's reads are run again, no longer expecting emptiness.
    ("POST", "/v1/episodes"): p_episode,
    ("POST", "/v1/episodes/batch"): p_batch,
    ("POST", "/v1/memory-templates/{template_id}/apply"): p_template_apply,
    ("POST", "/v1/slates/{ladder}/{slate}/{folder}/reset"): p_reset,
    ("POST", "/v1/slates/{ladder}/{slate}/{folder}/{file}"): p_write_file,
    ("DELETE", "/v1/slates/{ladder}/{slate}/{folder}/{file}"): p_delete_file,
    **{
        (method, "/v1/slates/{ladder}/{slate}/{folder}/{file}/{rest:path}"): (
            p_file_name_with_a_slash(method)
        )
        for method in ("GET", "POST", "DELETE")
    },
    ("POST", "/v1/scopes/turns"): p_turns,
    ("POST", "/v1/scopes/documents"): p_documents,
    ("DELETE", "/v1/scopes/documents"): p_delete_document,
    ("POST", "/v1/local/{ladder}/chat/completions"): p_chat,
    ("POST", "/v1/ladders/reload"): p_ladder_reload,
    ("POST", "/v1/local/chat/completions"): p_chat_by_model,
    ("POST", "/v1/memories/compile"): p_compile,
    ("POST", "/v1/scopes/compile"): p_scope_compile,
    ("DELETE", "/v1/subjects/{subject_id}"): p_delete_subject,
    ("PATCH", "/v1/memories/{memory_id}"): p_patch_memory,
    ("DELETE", "/v1/memories/{memory_id}"): p_delete_memory,
    ("DELETE", "/v1/episodes/{episode_id}"): p_delete_episode,
    ("DELETE", "/v1/scopes"): p_delete_scopes,
    ("POST", "/v1/subjects/{subject_id}/import"): p_import,
    ("PUT", "/v1/retention"): p_put_retention,
    ("PUT", "/v1/items"): p_item_put,
    ("DELETE", "/v1/items"): p_item_delete,
}


def p_not_supported(feature: str) -> Callable[[World], None]:
    """Statewave extras Cairn lacks: 404 naming the feature, whatever A's ids B sends."""

    def probe(w: World) -> None:
        memory = next(v for k, v in w.ids.items() if k.startswith("memory-"))
        url = w.route[1].replace("{memory_id}", memory).replace("{receipt_id}", w.ids["job"])
        url = url.replace("{subject_id}", SUBJ_A)
        r = w.b(w.route[0], url, **({} if w.route[0] == "GET" else {"json": {}}))
        assert r.status_code == 404 and code(r) == f"{feature}_not_supported", r.text

    return probe


API_PROBES.update({(m, path): p_not_supported(f) for m, path, f in UNSUPPORTED_ROUTES})
READS = [
    k
    for k in API_PROBES
    if k[0] == "GET" or k[1].endswith(("context", "/items/search", "/items/namespaces"))
]


# --------------------------------------------------------------------------- inspector probes


def _page(w: World, url: str, status: int = 200, **kw: Any) -> Response:
    r = w.ui("GET", url, **kw)
    assert r.status_code == status, (url, r.text[:300])
    return r


def u_home(w: World) -> None:
    assert _page(w, w.route[1], 303).headers["location"] == "/ui/subjects"


def u_login_page(w: World) -> None:
    _page(w, "/ui/login")


def u_login(w: World) -> None:
    r = w.ui("POST", "/ui/login", data={"api_key": w.b_key, "next": "/ui/subjects"})
    assert r.status_code == 303


def u_logout(w: World) -> None:
    assert w.ui("POST", "/ui/logout").status_code == 303
    assert w.web is not None
    assert w.web.get("/ui/subjects").status_code == 303  # signed out now
    sign_in(w)


def u_subjects(w: World) -> None:
    r = _page(w, "/ui/subjects", params={"prefix": "a-"})
    assert f'href="/ui/subjects/{SUBJ_A}"' not in r.text


def u_timeline(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):  # B deleted its own data of both through the API
        assert "subject_not_found" in _page(w, f"/ui/subjects/{subject}", 404).text


def u_episode(w: World) -> None:
    for name in ("episode", "template_episode", "turn_episode"):
        assert "episode_not_found" in _page(w, f"/ui/episodes/{w.ids[name]}", 404).text


def u_confirm_delete(w: World) -> None:
    _page(w, f"/ui/subjects/{SUBJ_A}/delete", 404)


def u_delete(w: World) -> None:
    r = w.ui("POST", f"/ui/subjects/{SUBJ_A}/delete")
    assert r.status_code == 303 and "episodes_deleted=0" in r.headers["location"]


def u_memory(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        assert "memory_not_found" in _page(w, f"/ui/memories/{memory_id}", 404).text


def u_confirm_forget(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        _page(w, f"/ui/memories/{memory_id}/delete", 404)


def u_edit_memory(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        r = w.ui("POST", f"/ui/memories/{memory_id}/edit", data={"content": "B was here"})
        assert r.status_code == 404 and "memory_not_found" in r.text


def u_forget(w: World) -> None:
    for memory_id in _a_memory_ids(w):
        r = w.ui("POST", f"/ui/memories/{memory_id}/delete")
        assert r.status_code == 404 and "memory_not_found" in r.text


def u_export(w: World) -> None:
    r = w.ui("GET", f"/ui/subjects/{SUBJ_A}/export")
    assert r.status_code == 200 and len(r.text.splitlines()) == 1


def u_context(w: World) -> None:
    for subject in (SUBJ_A, SUBJ_SHARED):
        _page(w, "/ui/context", params={"subject_id": subject, "query": "Quill name"})


def u_templates(w: World) -> None:
    _page(w, "/ui/templates")


def u_template(w: World) -> None:
    _page(w, "/ui/templates/user-preference")


def u_template_apply(w: World) -> None:
    r = w.ui(
        "POST",
        "/ui/templates/user-preference",
        data={"subject_id": SUBJ_A, "field.subject": "drinks", "field.preference": "B likes milk."},
    )
    assert r.status_code == 201, r.text[:300]


def u_slates(w: World) -> None:
    _page(w, "/ui/slates")


def u_slate(w: World) -> None:
    _page(w, "/ui/slates/memory-ladder/Memory")
    _page(w, "/ui/slates/web-notes/Notes")
    _page(w, "/ui/slates/web-notes/Profile", params={"user_id": "ana"})


def u_slate_write(w: World) -> None:
    r = w.ui(
        "POST",
        "/ui/slates/web-notes/Profile/write",
        data={"folder": "prefs", "file": "likes.md", "content": "B's like", "user_id": "ana"},
    )
    assert r.status_code == 303, r.text[:300]


def u_slate_reset(w: World) -> None:
    r = w.ui("POST", "/ui/slates/web-notes/Notes/reset", data={"folder": "inbox"})
    assert r.status_code == 303, r.text[:300]


def u_ladders(w: World) -> None:
    _page(w, "/ui/ladders")


def u_ladder(w: World) -> None:
    _page(w, "/ui/ladders/assistant")


def u_validate(w: World) -> None:
    assert w.ui("POST", "/ui/ladders/memory-ladder/validate").status_code == 200


def u_chat(w: World) -> None:
    r = w.ui(
        "POST",
        "/ui/ladders/assistant/chat",
        data={
            "message": "What is my favourite colour?",
            "history": "[]",
            "conversation_id": "demo",
        },
    )
    assert r.status_code == 200 and "teal" not in r.text


def u_validate_page(w: World) -> None:
    _page(w, "/ui/validate-ladder")


def u_validate_post(w: World) -> None:
    r = w.ui("POST", "/ui/validate-ladder", data={"text": "steps: []"})
    assert r.status_code < 500


def u_runs(w: World) -> None:
    assert "run-a-teal" not in _page(w, "/ui/runs").text


def u_run(w: World) -> None:
    assert "run_not_found" in _page(w, "/ui/runs/run-a-teal", 404).text


def u_catch_all(w: World) -> None:
    r = w.ui(w.route[0], "/ui/nowhere")
    assert r.status_code == 404 and "There is no page at /ui/nowhere" in r.text


UI_PROBES: dict[tuple[str, str], Callable[[World], None]] = {
    ("GET", "/ui"): u_home,
    ("GET", "/ui/"): u_home,
    ("GET", "/ui/login"): u_login_page,
    ("POST", "/ui/login"): u_login,
    ("GET", "/ui/subjects"): u_subjects,
    ("GET", "/ui/subjects/{subject_id}"): u_timeline,
    ("GET", "/ui/episodes/{episode_id}"): u_episode,
    ("GET", "/ui/subjects/{subject_id}/delete"): u_confirm_delete,
    ("GET", "/ui/subjects/{subject_id}/export"): u_export,
    ("GET", "/ui/memories/{memory_id}"): u_memory,
    ("GET", "/ui/memories/{memory_id}/delete"): u_confirm_forget,
    ("POST", "/ui/memories/{memory_id}/edit"): u_edit_memory,
    ("POST", "/ui/memories/{memory_id}/delete"): u_forget,
    ("GET", "/ui/context"): u_context,
    ("GET", "/ui/templates"): u_templates,
    ("GET", "/ui/templates/{template_id}"): u_template,
    ("GET", "/ui/slates"): u_slates,
    ("GET", "/ui/slates/{ladder}/{slate}"): u_slate,
    ("GET", "/ui/ladders"): u_ladders,
    ("GET", "/ui/ladders/{name}"): u_ladder,
    ("GET", "/ui/validate-ladder"): u_validate_page,
    ("GET", "/ui/runs"): u_runs,
    ("GET", "/ui/runs/{run_id}"): u_run,
    ("POST", "/ui/subjects/{subject_id}/delete"): u_delete,
    ("POST", "/ui/templates/{template_id}"): u_template_apply,
    ("POST", "/ui/slates/{ladder}/{slate}/write"): u_slate_write,
    ("POST", "/ui/slates/{ladder}/{slate}/reset"): u_slate_reset,
    ("POST", "/ui/ladders/{name}/validate"): u_validate,
    ("POST", "/ui/ladders/{name}/chat"): u_chat,
    ("POST", "/ui/validate-ladder"): u_validate_post,
    ("GET", "/ui/{rest:path}"): u_catch_all,
    ("POST", "/ui/{rest:path}"): u_catch_all,
    ("POST", "/ui/logout"): u_logout,
}


def sign_in(w: World) -> None:
    assert w.web is not None
    page = w.web.get("/ui/login").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    w.csrf = found.group(1)
    r = w.web.post("/ui/login", data={"csrf": w.csrf, "api_key": w.b_key, "next": "/ui/subjects"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/subjects"


# --------------------------------------------------------------------------- tests


@pytest.fixture(autouse=True)
def ladders_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example ladders plus the inspector's ``web-notes`` (a per-user slate and a small
    FIFO folder), all on the offline scripted provider; read when the services are built."""
    monkeypatch.setenv("CAIRN_LADDERS_DIR", str(make_ladders_dir(tmp_path / "ladders")))


@pytest.fixture
def world(backend: str, backend_services: Services, backend_client: TestClient) -> Iterator[World]:
    key_a, _ = backend_services.store.keys.create("tenant-a")
    key_b, _ = backend_services.store.keys.create("tenant-b")
    markers = [f"mk{i}x{secrets.token_hex(5)}" for i in range(12)]
    w = World(backend_client, {"X-API-Key": key_a}, key_b, markers, backend=backend)
    seed(w, backend_services)
    yield w


def test_every_route_has_an_isolation_probe(backend_services: Services) -> None:
    """A route added without an entry in API_PROBES / UI_PROBES fails here."""
    routes = route_table(create_app(services=backend_services))
    api = {r for r in routes if r[1].startswith(("/v1", "/admin"))}
    ui = {r for r in routes if r[1] == "/ui" or r[1].startswith("/ui/")}
    assert api == set(API_PROBES), {
        "missing": api - set(API_PROBES),
        "stale": set(API_PROBES) - api,
    }
    assert ui == set(UI_PROBES), {"missing": ui - set(UI_PROBES), "stale": set(UI_PROBES) - ui}


def test_tenant_b_never_sees_or_changes_tenant_a(world: World) -> None:
    w = world
    before = snapshot(w)
    assert any(w.markers[1] in str(v) for v in before.values())  # A's data is really there
    for route in READS:
        w.route = route
        API_PROBES[route](w)
    w.strict = False
    for route in [*API_PROBES, *READS]:  # B's writes, then B's reads over B's own data
        w.route = route
        API_PROBES[route](w)
    assert w.hits == set(API_PROBES)
    after = snapshot(w)
    assert after == before, differences(before, after)

    w.web = TestClient(w.client.app, follow_redirects=False)
    sign_in(w)
    w.hits.clear()
    for route, probe in UI_PROBES.items():
        w.route = route
        probe(w)
    assert w.hits == set(UI_PROBES)
    after = snapshot(w)
    assert after == before, differences(before, after)


def _score(client: TestClient, key: str) -> float:
    r = client.get(
        "/v1/memories/search",
        headers={"X-API-Key": key},
        params={"subject_id": "scored", "q": "Globex"},
    )
    assert r.status_code == 200 and r.json()["memories"], r.text
    return float(r.json()["memories"][0]["score"])


def _learn(client: TestClient, key: str, texts: list[str]) -> None:
    episodes = [
        {
            "subject_id": "scored",
            "source": "chat",
            "type": "conversation.turn",
            "payload": {"messages": [{"role": "user", "content": t}]},
        }
        for t in texts
    ]
    h = {"X-API-Key": key}
    assert (
        client.post("/v1/episodes/batch", headers=h, json={"episodes": episodes}).status_code == 201
    )
    assert (
        client.post("/v1/memories/compile", headers=h, json={"subject_id": "scored"}).status_code
        == 200
    )


def test_other_tenants_writes_do_not_move_search_scores(
    backend_client: TestClient,
    two_tenants: dict[str, str],
) -> None:
    """Another tenant's writes must not move a tenant's search scores (else B's own scores
    tell B whether a word occurs in A's data). PostgreSQL's ``ts_rank`` reads no corpus
    statistics; SQLite keeps one FTS5 index per tenant (``cairn.store.fts``) because FTS5's
    BM25 takes them from the whole table."""
    _learn(backend_client, two_tenants["a"], ["I work at Globex in Oslo."])
    before = _score(backend_client, two_tenants["a"])
    _learn(
        backend_client,
        two_tenants["b"],
        [f"Globex note {i}: I work at Globex in Bergen." for i in range(8)],
    )
    assert _score(backend_client, two_tenants["a"]) == before


def _chunk_score(client: TestClient, key: str) -> float:
    r = client.post(
        "/v1/scopes/context",
        headers={"X-API-Key": key},
        json={"scope": {"runtime_id": "rt"}, "query": "Globex offices", "dataset_ids": ["kb"]},
    )
    assert r.status_code == 200, r.text
    (item,) = [i for i in r.json()["items"] if i["provenance"][0]["type"] == "chunk"]
    return float(item["score"])


def _document(client: TestClient, key: str, document_id: str, content: str) -> None:
    r = client.post(
        "/v1/scopes/documents",
        headers={"X-API-Key": key},
        json={
            "scope": {"runtime_id": "rt"},
            "dataset_id": "kb",
            "document_id": document_id,
            "content": content,
        },
    )
    assert r.status_code == 201, r.text


def test_other_tenants_documents_do_not_move_chunk_scores(
    backend_client: TestClient,
    two_tenants: dict[str, str],
) -> None:
    """The same for document chunks in the context's chunk lane."""
    _document(backend_client, two_tenants["a"], "d1", "Globex has offices in Oslo and Rome.")
    before = _chunk_score(backend_client, two_tenants["a"])
    for i in range(8):
        _document(
            backend_client,
            two_tenants["b"],
            f"d{i}",
            f"Globex memo {i}: Globex offices, Globex staff, Globex plans.",
        )
    assert _chunk_score(backend_client, two_tenants["a"]) == before
