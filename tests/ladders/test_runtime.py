"""The runtime in process: steps in order, board variables, gated writes, run ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.errors import CairnError, InvalidInput
from cairn.ladders.board import Board, check_variable_name
from cairn.ladders.redact import redact
from cairn.ladders.runtime import LadderRuntime, RunInProgress, RunRequest
from cairn.services import Services
from tests.conftest import make_settings
from tests.ladders.conftest import write_ladder

CHAIN = """
slates:
  - title: Notes
    folders:
      - name: log
        tokenLimit: 40
        evictionPolicy: FIFO
        files:
          - { name: wins.md, init: blank }
          - { name: misses.md, init: blank }
providers:
  s:
    kind: scripted
    rules:
      - contains: "## Draft\\nDRAFT about"
        reply: "FINAL answer"
      - contains: "## Ask"
        reply: "DRAFT about it"
models: {"*": s}
steps:
  - id: draft
    systemPrompt: Draft it.
    fields:
      - { name: Ask, type: text, from: input.context }
      - { name: History, type: text, from: input.messages }
  - id: final
    fields:
      - { name: Draft, type: text, from: steps.draft }
      - { name: Missing, type: text, from: board.nothing, fallback: "n/a" }
    if:
      contains: "FINAL"
      then: { write: { to: { slate: Notes, folder: log, file: wins.md }, on: append } }
      else: { write: { to: { slate: Notes, folder: log, file: misses.md } } }
"""


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "chain", CHAIN)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    yield s
    s.close()


def request(text: str, **kw: object) -> RunRequest:
    return RunRequest(
        tenant="t",
        ladder="chain",
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": text}],
        **kw,
    )  # type: ignore[arg-type]


def test_steps_run_in_order_and_feed_each_other(services: Services) -> None:
    rt = LadderRuntime(services)
    out = rt.run(services.ladders.get("chain"), request("tell me"))
    assert out.content == "FINAL answer"
    draft, final = out.trace["steps"]
    assert draft["messages"] == [
        {"role": "system", "content": "Draft it."},
        {"role": "user", "content": "## Ask\ntell me\n\n## History\nsystem: sys\nuser: tell me"},
    ]
    assert final["messages"] == [
        {"role": "user", "content": "## Draft\nDRAFT about it\n\n## Missing\nn/a"}
    ]
    assert final["writes"][0]["kind"] == "gated" and final["writes"][0]["written"] is True
    assert out.usage["total_tokens"] == sum(
        s["usage"]["prompt_tokens"] + s["usage"]["completion_tokens"] for s in out.trace["steps"]
    )
    assert services.slates.read_file("t", "chain", "Notes", "log", "wins.md") == "FINAL answer"


def test_gated_writes_evict_and_the_trace_shows_it(services: Services) -> None:
    rt = LadderRuntime(services)
    ladder = services.ladders.get("chain")
    for i in range(30):
        out = rt.run(ladder, request(f"tell me {i}"))
    evicted = [e for s in out.trace["steps"] for w in s["writes"] for e in w.get("evictions", [])]
    assert evicted and evicted[0]["policy"] == "FIFO" and evicted[0]["run_id"] == out.run_id
    usage = out.trace["steps"][1]["writes"][0]["usage"]
    assert usage["tokens"] <= usage["tokenLimit"] == 40


def test_a_failed_run_is_taken_over_without_repeating_its_writes(services: Services) -> None:
    rt = LadderRuntime(services)
    ladder = services.ladders.get("chain")
    req = request("tell me", run_id="k-1")
    # Simulate an attempt that applied the gated write, then died before finishing.
    rt.runs.begin("t", "k-1", ladder="chain", request_hash=req.fingerprint(), model="")
    services.slates.write("t", "chain", "Notes", "log", "wins.md", "FINAL answer", run_id="k-1")
    rt.runs.add_effect("t", "k-1", ["final/if"])
    with pytest.raises(RunInProgress):
        rt.run(ladder, req)  # still "running" and not stale
    rt.runs.finish("t", "k-1", status="failed", duration_ms=1, trace={}, error="died")
    out = rt.run(ladder, req)
    assert out.content == "FINAL answer" and not out.replayed
    write = out.trace["steps"][1]["writes"][0]
    assert write["written"] is False and write["reason"] == "slate_write_already_applied"
    assert services.slates.read_file("t", "chain", "Notes", "log", "wins.md") == "FINAL answer"
    replay = rt.run(ladder, req)
    assert replay.replayed and replay.content == out.content
    assert rt.runs.get("t", "k-1").effects == ["final/if"]  # type: ignore[union-attr]


def test_board_reserves_engine_names() -> None:
    board = Board.for_request(
        run_id="r",
        ladder="l",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "part one"},
                    {"type": "image_url", "image_url": {"url": "x"}},
                ],
            },
        ],
    )
    assert board.current_message == "part one"
    with pytest.raises(CairnError) as err:
        board.set("__main_channel", [])
    assert err.value.code == "reserved_board_variable"
    with pytest.raises(CairnError):
        check_variable_name(" ")
    board.set("facts", "x")
    assert board.user_variables() == {"facts": "x"}


def test_redaction() -> None:
    data = {
        "api_key": "abc123456",
        "nested": [{"Authorization": "Bearer zzz"}],
        "text": "use sk-secret-1 and Bearer abcdefgh12345 and cairn_abcdefghijklmnopqrstu",
        "prompt_tokens": 12,
    }
    clean = redact(data, ["sk-secret-1"])
    assert clean == {
        "api_key": "[redacted]",
        "nested": [{"Authorization": "[redacted]"}],
        "text": "use [redacted] and Bearer [redacted] and [redacted]",
        "prompt_tokens": 12,
    }


METATAGS = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 100
        files:
          - { name: core.md, init: "seeded fact" }
providers:
  s: {kind: scripted, default: '{"fact": "a new fact"}'}
models: {"*": s}
steps:
  - id: look
    fields:
      - name: FileList
        type: slateRead
        from: { slate: Memory, folder: facts, metatag: index }
      - name: Tags
        type: slateRead
        from: { slate: Memory, folder: facts, file: core.md, metatag: tags }
        fallback: "no tags"
      - name: Core
        type: slateRead
        from: { slate: Memory, folder: facts, file: core.md }
      - name: Bare
        type: slateRead
        from: { slate: Memory, folder: facts, file: core.md, metatag: tags }
      - name: Tree
        type: slateRead
        from: { slate: Memory, metatag: tree, depth: 1 }
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: fact
      tags: [learnt]
"""


def test_metatag_reads_and_tags(tmp_path: Path) -> None:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "meta", METATAGS)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        rt = LadderRuntime(s)
        ladder = s.ladders.get("meta")
        first = rt.run(
            ladder,
            RunRequest(tenant="t", ladder="meta", messages=[{"role": "user", "content": "x"}]),
        )
        prompt = first.trace["steps"][0]["messages"][0]["content"]  # type: ignore[index]
        assert '## FileList\n[{"name": "core.md"' in prompt
        assert "## Tags\nno tags\n\n## Core\nseeded fact" in prompt
        # Seed 002: "Without a fallback, empty reads produce an empty string in the prompt".
        assert "## Bare\n\n" in prompt and "[]" not in prompt
        # The tree is the slate's: read without naming a folder.
        assert '## Tree\n{"slate": "Memory"' in prompt
        second = rt.run(
            ladder,
            RunRequest(tenant="t", ladder="meta", messages=[{"role": "user", "content": "y"}]),
        )
        prompt = second.trace["steps"][0]["messages"][0]["content"]  # type: ignore[index]
        assert '## Tags\n["learnt"]' in prompt
        assert "## Core\nseeded fact\na new fact" in prompt
    finally:
        s.close()


PER_USER = """
slates:
  - title: Prefs
    partition: user
    folders:
      - name: p
        tokenLimit: 100
        files:
          - { name: me.md, init: blank }
providers:
  s: {kind: scripted, rules: [{regex: "I like (\\\\w+)", reply: '{"v": "likes it"}'}], default: "?"}
models: {"*": s}
steps:
  - id: s
    fields:
      - name: Known
        type: slateRead
        from: { slate: Prefs, folder: p, file: me.md }
        fallback: "nothing"
      - { name: Msg, type: text, from: input.context }
    slateWrite: { to: { slate: Prefs, folder: p, file: me.md }, field: v }
"""


def test_per_user_slates_follow_the_request_user(tmp_path: Path) -> None:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "prefs", PER_USER)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        rt, ladder = LadderRuntime(s), s.ladders.get("prefs")

        def call(user: str, text: str) -> str:
            out = rt.run(
                ladder,
                RunRequest(
                    tenant="t",
                    ladder="prefs",
                    user=user,
                    messages=[{"role": "user", "content": text}],
                ),
            )
            return str(out.trace["steps"][0]["messages"][0]["content"])  # type: ignore[index]

        call("alice", "I like tea")
        assert call("alice", "hello").startswith("## Known\nlikes it")
        assert call("bob", "hello").startswith("## Known\nnothing")
        # Without a user the per-user slate cannot be read or written: traced, not a failure.
        out = rt.run(
            ladder,
            RunRequest(
                tenant="t", ladder="prefs", messages=[{"role": "user", "content": "I like x"}]
            ),
        )
        step = out.trace["steps"][0]  # type: ignore[index]
        assert step["fields"][0]["fallback_used"] is True
        assert step["writes"][0]["written"] is False and step["writes"][0]["reason"]
    finally:
        s.close()


class _Died(BaseException):
    """A process dying: not an ``Exception``, so no handler in the runtime records it."""


def test_a_write_whose_process_died_before_recording_it_is_not_repeated(
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last step's writes are recorded with the run's end. If the process dies after the
    slate write committed but before that, the retry must still not write again: the write's
    claim was committed with it."""
    rt = LadderRuntime(services)
    ladder = services.ladders.get("chain")
    req = request("tell me", run_id="k-2")
    finish = rt.runs.finish

    def die(*args: object, **kwargs: object) -> None:
        raise _Died()

    monkeypatch.setattr(rt.runs, "finish", die)
    with pytest.raises(_Died):
        rt.run(ladder, req)
    assert services.slates.read_file("t", "chain", "Notes", "log", "wins.md") == "FINAL answer"
    run = rt.runs.get("t", "k-2")
    assert run is not None and run.status == "running" and run.effects == []
    monkeypatch.setattr(rt.runs, "finish", finish)
    # The stale run is taken over (as after the 10-minute limit): marked failed, then re-run.
    rt.runs.finish("t", "k-2", status="failed", duration_ms=1, trace={}, error="died")
    out = rt.run(ladder, req)
    write = out.trace["steps"][1]["writes"][0]
    assert write["written"] is False and write["reason"] == "slate_write_already_applied"
    assert services.slates.read_file("t", "chain", "Notes", "log", "wins.md") == "FINAL answer"
    assert rt.runs.get("t", "k-2").effects == ["final/if"]  # type: ignore[union-attr]
    # Completed: its claims are dropped, and a replay answers from the stored response.
    with services.store.db.read() as conn:
        left = conn.exec_driver_sql(
            "SELECT count(*) FROM slate_applied_writes WHERE run_id = 'k-2'"
        ).scalar_one()
    assert left == 0
    replay = rt.run(ladder, req)
    assert replay.replayed and replay.content == "FINAL answer"
    assert services.slates.read_file("t", "chain", "Notes", "log", "wins.md") == "FINAL answer"


def test_claims_of_runs_never_retried_expire(services: Services) -> None:
    """A run that failed and was never retried leaves its claims; they are dropped (after the
    retention) when a later run of the tenant completes, and a fresh claim stays."""
    from datetime import timedelta

    from cairn.core.ids import utcnow
    from cairn.store.slate_tables import CLAIM_RETENTION

    with services.store.transaction() as tx:
        assert tx.slates.claim_write(
            "t", "gone-1", "final/if", utcnow() - CLAIM_RETENTION - timedelta(hours=1)
        )
        assert tx.slates.claim_write("t", "recent-1", "final/if", utcnow())
        assert tx.slates.claim_write(
            "other", "gone-2", "final/if", utcnow() - CLAIM_RETENTION - timedelta(hours=1)
        )
    LadderRuntime(services).run(services.ladders.get("chain"), request("tell me"))
    with services.store.db.read() as conn:
        left = {
            tuple(r)
            for r in conn.exec_driver_sql("SELECT tenant_id, run_id FROM slate_applied_writes")
        }
    assert left == {("t", "recent-1"), ("other", "gone-2")}  # other tenants are untouched


def test_an_unexpected_error_is_recorded_without_its_text(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's error and trace are shown to API callers: an internal error's text (which
    may carry a DSN, a path, a query) stays in the server log."""
    ladder = services.ladders.get("chain")
    provider, _ = ladder.router.resolve(None)

    def broken(request: object) -> object:
        raise RuntimeError("password=hunter2 at /srv/secret")

    monkeypatch.setattr(provider, "complete", broken)
    rt = LadderRuntime(services)
    with pytest.raises(RuntimeError):
        rt.run(ladder, request("tell me", run_id="k-internal"))
    record = rt.runs.get("t", "k-internal")
    assert record is not None and record.status == "failed"
    assert "hunter2" not in str(record.error) and "hunter2" not in str(record.trace)
    assert record.trace["error"]["code"] == "internal_error"


def test_a_user_that_is_no_subject_id_is_refused_before_the_run(tmp_path: Path) -> None:
    """The user's per-user state is erased with the subject of that id: a user that cannot
    be one is a 422 before anything runs (not a failure halfway)."""
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "prefs", PER_USER)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        with TestClient(create_app(services=s)) as client:
            url = "/v1/local/prefs/chat/completions"
            body = {"messages": [{"role": "user", "content": "I like tea"}]}
            for user in ("org/alice", " lead", "."):
                r = client.post(url, json={**body, "user": user})
                assert r.status_code == 422, r.text
                assert r.json()["error"]["code"] == "slate_user_required"
            assert client.get("/v1/runs").json()["total"] == 0
            assert client.post(url, json={**body, "user": "alice@example.com"}).status_code == 200
        # The same rule for every surface (the CLI and the inspector run through the runtime).
        run = RunRequest(tenant="default", ladder="prefs", messages=body["messages"], user="a/b")
        with pytest.raises(InvalidInput) as refused:
            s.ladder_runtime.run(s.ladders.get("prefs"), run)
        assert refused.value.code == "slate_user_required"
    finally:
        s.close()


def test_a_run_user_is_a_subject_id_on_any_ladder(tmp_path: Path) -> None:
    """A ladder without per-user slates kept runs under ``a/b`` or ``a\\nb``, users no
    subject route can name (so ``DELETE /v1/subjects/…`` could not erase those runs); the
    user of every run now follows the subject id rule, on every surface."""
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "chain", CHAIN)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        with TestClient(create_app(services=s)) as client:
            url = "/v1/local/chain/chat/completions"
            body = {"messages": [{"role": "user", "content": "hi"}]}
            for user in ("a/b", "a\nb", ".."):
                r = client.post(url, json={**body, "user": user})
                assert r.status_code == 422, r.text
                error = r.json()["error"]
                assert error["code"] == "validation_error"
                assert "'user'" in error["message"], error
            assert client.get("/v1/runs").json()["total"] == 0
            ok = client.post(url, json={**body, "user": "李雷@example.com"})
            assert ok.status_code == 200, ok.text
            assert client.get("/v1/runs").json()["total"] == 1
        with pytest.raises(InvalidInput) as refused:
            s.ladder_runtime.run(s.ladders.get("chain"), request("hi", user="x/y"))
        assert refused.value.code == "validation_error"
    finally:
        s.close()
