"""A ladder run whose trace quotes a slate file goes when the file is deleted, on both backends.

The ``keeper`` ladder's one step reads ``Notes/facts/core.md``, the index of ``Notes/listed``
and the caller's own ``Profile/prefs/likes.md``, and appends the fact its reply emits to
``core.md``. Its trace (the step's messages and reply) then quotes those files: deleting one
of them, or resetting its folder, deletes the runs that read or wrote it, whoever called them;
a run that touched none of it stays.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from cairn.engine.embedders import HashingEmbedder
from cairn.ladders import runtime as runtime_module
from cairn.services import Services
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.slate_reads import access_items, trace_slate_items
from tests.api.test_erasure import rows_text
from tests.conftest import database_url, make_settings

KEEPER = """
slates:
  - title: Notes
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
      - name: listed
        tokenLimit: 200
        evictionPolicy: FIFO
        files:
          - { name: a.md, init: blank }
      - name: spare
        tokenLimit: 200
        evictionPolicy: FIFO
        files:
          - { name: b.md, init: blank }
  - title: Profile
    partition: user
    folders:
      - name: prefs
        tokenLimit: 200
        evictionPolicy: LRU
        files:
          - { name: likes.md, init: blank }

steps:
  - id: answer
    fields:
      - { name: Question, type: text, from: input.context }
      - name: Known
        type: slateRead
        from: { slate: Notes, folder: facts, file: core.md }
        fallback: "(nothing known)"
      - { name: Listed, type: slateRead, from: { slate: Notes, folder: listed, metatag: index } }
      - name: Likes
        type: slateRead
        from: { slate: Profile, folder: prefs, file: likes.md }
        fallback: "(no likes)"
    systemPrompt: "Answer."
    slateWrite:
      to: { slate: Notes, folder: facts, file: core.md }
      field: fact
      on: append
      match: { type: object, required: [fact] }
    stripMatch: true

providers:
  offline:
    kind: scripted
    rules:
      - contains: "remember the code"
        reply: |-
          Remembered.
          ```json
          {"fact": "The vault code is %s."}
          ```
    default: "Noted."

models:
  "*": { provider: offline }

agents:
  quiet: {}
"""


def _writer(slate: str, folder: str, limit: int, files: list[str], code: str) -> str:
    """A ladder whose one step writes the code its reply emits to ``files[-1]`` of
    ``slate/folder`` (``limit`` tokens, FIFO), reading no slate."""
    listed = "".join(f"\n          - {{ name: {f}, init: blank }}" for f in files)
    return f"""
slates:
  - title: {slate}
    folders:
      - name: {folder}
        tokenLimit: {limit}
        evictionPolicy: FIFO
        files:{listed}

steps:
  - id: note
    fields:
      - {{ name: Question, type: text, from: input.context }}
    systemPrompt: "Note it."
    slateWrite:
      to: {{ slate: {slate}, folder: {folder}, file: {files[-1]} }}
      field: fact
      on: append
      match: {{ type: object, required: [fact] }}

providers:
  offline:
    kind: scripted
    default: |-
      Noted.
      ```json
      {{"fact": "The vault code is {code}."}}
      ```

models:
  "*": {{ provider: offline }}
"""


# ``gate`` writes its reply to yes.md when it says "yes", else to no.md: it may write either.
GATE = """
slates:
  - title: Gate
    folders:
      - name: box
        tokenLimit: 200
        evictionPolicy: FIFO
        files:
          - { name: yes.md, init: blank }
          - { name: no.md, init: blank }
      - name: other
        tokenLimit: 200
        evictionPolicy: FIFO
        files:
          - { name: c.md, init: blank }

steps:
  - id: decide
    fields:
      - { name: Question, type: text, from: input.context }
    systemPrompt: "Decide."
    if:
      contains: "yes"
      then: { write: { to: { slate: Gate, folder: box, file: yes.md } } }
      else: { write: { to: { slate: Gate, folder: box, file: no.md } } }

providers:
  offline:
    kind: scripted
    default: "yes, noted."

models:
  "*": { provider: offline }
"""


@pytest.fixture
def code() -> str:
    return "zv" + secrets.token_hex(6)


@contextmanager
def _server(url: str, tmp_path: Path, code: str) -> Iterator[tuple[TestClient, Services]]:
    from cairn.app import create_app

    ladders = tmp_path / "ladders"
    ladders.mkdir(exist_ok=True)
    (ladders / "keeper.yaml").write_text(KEEPER % code, encoding="utf-8")
    # ``scribe`` writes to a file it never reads; ``crowder`` to ``new.md`` of a folder too
    # small to keep ``old.md`` beside it (FIFO evicts old.md's entry; the trace previews it).
    scribe = _writer("Log", "days", 500, ["today.md"], code)
    (ladders / "scribe.yaml").write_text(scribe, encoding="utf-8")
    crowder = _writer("Tight", "box", 30, ["old.md", "new.md"], code)
    (ladders / "crowder.yaml").write_text(crowder, encoding="utf-8")
    (ladders / "gate.yaml").write_text(GATE, encoding="utf-8")
    settings = make_settings(tmp_path, database_url=url, ladders_dir=ladders)
    services = Services.from_settings(settings, embedder=HashingEmbedder())
    try:
        with TestClient(create_app(services=services)) as client:
            yield client, services
    finally:
        services.close()


@pytest.fixture
def db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return database_url(backend, tmp_path, request)


@pytest.fixture
def world(db: str, tmp_path: Path, code: str) -> Iterator[tuple[TestClient, Services]]:
    with _server(db, tmp_path, code) as served:
        yield served


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def _ask(client: TestClient, question: str, user: str = "hank", ladder: str = "keeper") -> str:
    r = client.post(
        f"/v1/local/{ladder}/chat/completions",
        json={"user": user, "messages": [{"role": "user", "content": question}]},
    )
    assert r.status_code == 200, r.text
    return r.headers["X-Cairn-Run-ID"]


def _gone(client: TestClient, run_id: str) -> bool:
    return client.get(f"/v1/runs/{run_id}").status_code == 404


def _slate(client: TestClient, path: str, user: str | None = None) -> str:
    return f"/v1/slates/keeper/{path}" + (f"?user_id={user}" if user else "")


def test_deleting_a_file_takes_the_runs_that_wrote_and_read_it(world: Any, code: str) -> None:
    """hank's run wrote the code to core.md, maya's and the ladder's agent's read it there:
    deleting core.md takes all three (and nothing of the code remains anywhere); a run after
    the deletion stays."""
    client, services = world
    wrote = _ask(client, "Please remember the code.")
    read = _ask(client, "What do you know?", user="maya")
    # An agent of the ladder (model id ``keeper:quiet``) reads the ladder's slates too.
    agent = _ask(client, "What do you know?", ladder="keeper:quiet")
    for run in (read, agent):
        assert code in json.dumps(_ok(client.get(f"/v1/runs/{run}")))
    deleted = _ok(client.delete(_slate(client, "Notes/facts/core.md")))
    assert deleted["ladder_runs_deleted"] == 3
    assert _gone(client, wrote) and _gone(client, read) and _gone(client, agent)
    assert code not in rows_text(services)
    later = _ask(client, "What do you know now?")
    _ok(client.delete(_slate(client, "Notes/spare/b.md")))
    assert not _gone(client, later)


def test_a_run_that_only_wrote_the_file_goes_with_it(world: Any, code: str) -> None:
    """scribe's run wrote the code to a file it never read: deleting the file takes it, and
    so does resetting the folder for the next one. A write through the API naming a run id
    that is no stored run records nothing."""
    client, services = world
    path = "/v1/slates/scribe/Log/days/today.md"
    wrote = _ask(client, "Anything.", ladder="scribe")
    _ok(client.post(path, json={"content": "by hand", "run_id": "no-such-run"}))
    assert _ok(client.delete(path))["ladder_runs_deleted"] == 1
    assert _gone(client, wrote)
    assert code not in rows_text(services)
    again = _ask(client, "Anything else.", ladder="scribe")
    reset = _ok(client.post("/v1/slates/scribe/Log/days/reset"))
    assert reset["ladder_runs_deleted"] == 1 and _gone(client, again)
    with services.store.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM ladder_run_reads")).scalar() == 0


def test_a_run_that_evicted_from_a_file_goes_with_it(world: Any) -> None:
    """crowder's write evicted old.md's entry, whose preview its trace keeps: deleting old.md
    takes the run (and nothing of the entry remains)."""
    client, services = world
    secret = "zo" + secrets.token_hex(6)
    old = "/v1/slates/crowder/Tight/box/old.md"
    _ok(
        client.post(
            old,
            json={
                "content": f"The old note says {secret}, and a few more words to fill the folder."
            },
        )
    )
    run = _ask(client, "Anything.", ladder="crowder")
    trace = json.dumps(_ok(client.get(f"/v1/runs/{run}")))
    assert '"evictions": [{' in trace and secret in trace
    assert _ok(client.delete(old))["ladder_runs_deleted"] == 1
    assert _gone(client, run)
    assert secret not in rows_text(services)


def test_a_retried_run_records_what_it_reads(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose first attempt failed is taken over by its retry (the same Idempotency-Key),
    which records the files it reads again (here: after they were lost): deleting core.md
    takes it."""
    client, services = world
    step = runtime_module.LadderRuntime._step

    def failing(self: Any, run: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the model is down")
        yield from step(self, run, *args, **kwargs)

    monkeypatch.setattr(runtime_module.LadderRuntime, "_step", failing)
    body = {"user": "hank", "messages": [{"role": "user", "content": "Hi?"}]}
    headers = {"Idempotency-Key": "retry-1"}
    with TestClient(client.app, raise_server_exceptions=False) as failing_client:
        r = failing_client.post("/v1/local/keeper/chat/completions", json=body, headers=headers)
    assert r.status_code == 500
    monkeypatch.undo()
    with services.store.db.write() as conn:
        conn.execute(text("DELETE FROM ladder_run_reads WHERE run_id = 'retry-1'"))
    r = client.post("/v1/local/keeper/chat/completions", json=body, headers=headers)
    assert r.status_code == 200, r.text
    assert _ok(client.delete(_slate(client, "Notes/facts/core.md")))["ladder_runs_deleted"] == 1
    assert _gone(client, "retry-1")


def test_a_gated_run_goes_with_either_file_it_may_write(world: Any) -> None:
    """A gate's two branches are recorded when the run is claimed (which one it takes is
    known only from the reply): the run wrote yes.md, and deleting no.md takes it too; a file
    of another folder does not."""
    client, _ = world
    runs = [_ask(client, "Shall we?", ladder="gate") for _ in range(2)]
    written = json.dumps(_ok(client.get(f"/v1/runs/{runs[0]}")))
    assert '"file": "yes.md"' in written and '"written": true' in written
    assert _ok(client.delete("/v1/slates/gate/Gate/other/c.md"))["ladder_runs_deleted"] == 0
    assert _ok(client.delete("/v1/slates/gate/Gate/box/no.md"))["ladder_runs_deleted"] == 2
    assert all(_gone(client, run) for run in runs)


def test_a_file_the_run_did_not_read_keeps_it(world: Any) -> None:
    """Deleting a file of a folder the run never touched, or resetting that folder, keeps
    the run; deleting a file of the folder whose index it read takes it."""
    client, _ = world
    run = _ask(client, "Hello?")
    assert _ok(client.delete(_slate(client, "Notes/spare/b.md")))["ladder_runs_deleted"] == 0
    assert _ok(client.post(_slate(client, "Notes/spare/reset")))["ladder_runs_deleted"] == 0
    assert not _gone(client, run)
    _ok(client.post(_slate(client, "Notes/listed/a.md"), json={"content": "a listed note"}))
    assert _ok(client.delete(_slate(client, "Notes/listed/a.md")))["ladder_runs_deleted"] == 1
    assert _gone(client, run)


def test_resetting_the_folder_takes_the_runs_that_touched_it(world: Any, code: str) -> None:
    client, services = world
    wrote = _ask(client, "Please remember the code.")
    assert _ok(client.post(_slate(client, "Notes/facts/reset")))["ladder_runs_deleted"] == 1
    assert _gone(client, wrote)
    assert code not in rows_text(services)


def test_a_users_own_file_takes_only_that_users_runs(world: Any) -> None:
    """Each caller reads their own likes.md: deleting maya's takes her run, not hank's."""
    client, services = world
    secret = "zl" + secrets.token_hex(6)
    _ok(
        client.post(
            _slate(client, "Profile/prefs/likes.md", "maya"), json={"content": f"likes {secret}"}
        )
    )
    mayas, hanks = _ask(client, "Hi?", user="maya"), _ask(client, "Hi?", user="hank")
    assert secret in json.dumps(_ok(client.get(f"/v1/runs/{mayas}")))
    gone = _ok(client.delete(_slate(client, "Profile/prefs/likes.md", "maya")))
    assert gone["ladder_runs_deleted"] == 1
    assert _gone(client, mayas) and not _gone(client, hanks)
    assert secret not in rows_text(services)


def test_a_file_deleted_while_the_model_answers_takes_the_run(
    world: Any, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """core.md is deleted after the step has read it and before the run's end is recorded:
    the read was recorded before it happened, so the deletion takes the run (its reply is
    still answered) and nothing of the code remains."""
    client, services = world
    _ask(client, "Please remember the code.")
    step = runtime_module.LadderRuntime._step

    def delete_then_step(self: Any, run: Any, *args: Any, **kwargs: Any) -> Any:
        out = yield from step(self, run, *args, **kwargs)
        assert code in json.dumps(run.trace)  # the step read the code
        services.slates.delete_file(run.request.tenant, "keeper", "Notes", "facts", "core.md")
        return out

    monkeypatch.setattr(runtime_module.LadderRuntime, "_step", delete_then_step)
    read = _ask(client, "What do you know?")
    monkeypatch.undo()
    assert _gone(client, read)
    assert code not in rows_text(services)


def test_an_imported_run_goes_with_the_file_its_trace_read(world: Any, code: str) -> None:
    """maya's export imported as ``maya2``: the copy of her run quotes core.md as the
    original does, and deleting core.md takes both."""
    client, services = world
    _ask(client, "Please remember the code.")
    read = _ask(client, "What do you know?", user="maya")
    agent = _ask(client, "What do you know?", user="maya", ladder="keeper:quiet")
    lines = [json.loads(x) for x in client.get("/v1/subjects/maya/export").text.splitlines()]
    for line in lines:
        if line["type"] == "run":
            line["row"]["id"] = "copy-" + line["row"]["id"]
    imported = _ok(client.post("/v1/subjects/maya2/import", json={"records": lines}))
    assert imported["imported"]["run"] == 2
    _ok(client.delete(_slate(client, "Notes/facts/core.md")))
    for run in (read, agent):
        assert _gone(client, run) and _gone(client, "copy-" + run)
    assert code not in rows_text(services)


def test_migration_0029_records_what_stored_runs_read(db: str, tmp_path: Path, code: str) -> None:
    """Runs stored before the revision: their slate reads and writes are found in their
    traces, so deleting the file takes them too."""
    with _server(db, tmp_path, code) as (client, _):
        wrote, read = _ask(client, "Please remember the code."), _ask(client, "What?", "maya")
        agent = _ask(client, "What?", "maya", ladder="keeper:quiet")
        crowded = _ask(client, "Anything.", ladder="crowder")
    engine = create_engine(normalize_url(db))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0028_run_reads")
            conn.commit()
            assert (
                conn.execute(
                    text("SELECT count(*) FROM ladder_run_reads WHERE item_id LIKE 'slate:%'")
                ).scalar()
                == 0
            )
            command.upgrade(_config(conn), "heads")
            conn.commit()
    finally:
        engine.dispose()
    with _server(db, tmp_path, code) as (client, services):
        deleted = _ok(client.delete(_slate(client, "Notes/facts/core.md")))
        assert deleted["ladder_runs_deleted"] == 3
        assert _gone(client, wrote) and _gone(client, read) and _gone(client, agent)
        crowd = _ok(client.delete("/v1/slates/crowder/Tight/box/new.md"))
        assert crowd["ladder_runs_deleted"] == 1 and _gone(client, crowded)
        assert code not in rows_text(services)


def test_the_migration_makes_the_ids_the_runtime_makes() -> None:
    """Stored ids depend on the format: the revision's copy of it gives the same ids as
    ``cairn.store.slate_reads`` for every kind of read and write, in any script."""
    from importlib import import_module

    revision = import_module("cairn.store.migrations.versions.0029_slate_reads")
    trace = {
        "steps": [
            {
                "slate_reads": [
                    {"field": "A", "slate": "Заметки", "folder": "事実", "file": "ядро.md"},
                    {"field": "B", "slate": "Notes", "folder": "listed", "metatag": "index"},
                    {"field": "C", "slate": "Notes", "metatag": "tree", "depth": 1},
                    {"field": "D", "slate": "Notes", "folder": "f", "file": "x", "metatag": "tags"},
                ],
                "writes": [
                    {
                        "kind": "slateWrite",
                        "to": {"slate": "Notes", "folder": "f", "file": "é"},
                        "evictions": [{"slate": "Notes", "folder": "f", "file": "ü", "id": 1}],
                    },
                    {"kind": "gated", "written": True, "slate": "N", "folder": "g", "file": "h"},
                ],
            }
        ]
    }
    ours = trace_slate_items(trace, "keeper", "mayá")
    assert ours == revision._items(trace, "keeper", "mayá")
    assert ours == trace_slate_items(trace, "keeper:quiet", "mayá")  # an agent's run
    assert len(ours) == len(set(ours)) > 8
    assert set(access_items("keeper", "", "Notes", "f", "ü")) <= set(ours)
    assert set(access_items("keeper", "", "Notes", "f", "é")) <= set(ours)
    assert set(access_items("keeper", "mayá", "Заметки", "事実", "ядро.md")) <= set(ours)
