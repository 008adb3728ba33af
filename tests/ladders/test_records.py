"""``recordTemplate``: a step records a memory-template episode (seed 000), once per run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.core.scope import Scope
from cairn.ladders.runtime import LadderRuntime, RunOutcome, RunRequest
from cairn.services import Services
from cairn.templates import TEMPLATE_SOURCE
from tests.conftest import make_settings
from tests.ladders.conftest import write_ladder

LADDER = """
providers:
  s:
    kind: scripted
    rules:
      - contains: "French"
        reply: 'Noted. {"about": "reply language", "pref": "French, always"}'
    default: "Nothing to note."
models: {"*": s}
steps:
  - id: note
    fields:
      - { name: Message, type: text, from: input.context }
    recordTemplate:
      template: user-preference
      subject_id: user-42
      values:
        subject: { from: steps.note, field: about }
        preference: { from: steps.note, field: pref }
        rationale: { from: input.context }
"""


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "notes", LADDER)
    s = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    yield s
    s.close()


def ask(services: Services, text: str, run_id: str | None = None) -> RunOutcome:
    return LadderRuntime(services).run(
        services.ladders.get("notes"),
        RunRequest(
            tenant="t", ladder="notes", run_id=run_id, messages=[{"role": "user", "content": text}]
        ),
    )


def run(services: Services, text: str, run_id: str | None = None) -> dict:
    return ask(services, text, run_id).trace["steps"][0]["writes"][0]  # type: ignore[index]


def test_a_step_records_a_template_episode_once_per_run(services: Services) -> None:
    write = run(services, "Please always answer me in French.", "pref-1")
    assert write["written"] is True and write["created"] is True
    assert write["subject_id"] == "user-42"
    episodes = services.store.episodes.list("t", Scope.for_subject("user-42"))
    assert len(episodes) == 1
    ep = episodes[0]
    assert ep.source == TEMPLATE_SOURCE and ep.payload["template_id"] == "user-preference"
    assert ep.payload["fields"] == {
        "subject": "reply language",
        "preference": "French, always",
        "rationale": "Please always answer me in French.",
    }
    assert ep.idempotency_key == "pref-1:note"
    # A replay of the run records nothing; so does a take-over that already recorded it.
    again = ask(services, "Please always answer me in French.", "pref-1")
    assert again.replayed
    assert len(services.store.episodes.list("t", Scope.for_subject("user-42"))) == 1


def test_missing_values_record_nothing_and_say_why(services: Services) -> None:
    write = run(services, "Hello there.")
    assert write["written"] is False and write["reason"] == "value_missing"
    assert "no member 'about'" in write["detail"]
    assert services.store.episodes.list("t", Scope.for_subject("user-42")) == []


def test_unknown_template_is_a_config_error(tmp_path: Path) -> None:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "notes", LADDER.replace("user-preference", "no-such-template"))
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        assert (
            "recordTemplate.template: no memory template" in services.ladders.errors()[0]["error"]
        )
        write_ladder(d, "notes", LADDER.replace("subject_id: user-42", "subject_id: 'bad/id'"))
        services.ladders.reload()
        assert "subject_id 'bad/id' must not contain" in services.ladders.errors()[0]["error"]
        # A value the template has no field for: every run would have recorded nothing.
        extra = LADDER.replace(
            "rationale: { from: input.context }",
            'rationale: { from: input.context }\n        source: "chat"',
        )
        write_ladder(d, "notes", extra)
        services.ladders.reload()
        error = services.ladders.errors()[0]["error"]
        assert "recordTemplate.values: 'source' not a field of template 'user-preference'" in error
        assert "its fields: subject, preference, rationale" in error
        # A required field left out, likewise.
        write_ladder(
            d, "notes", LADDER.replace("preference: { from: steps.note, field: pref }", "")
        )
        services.ladders.reload()
        error = services.ladders.errors()[0]["error"]
        assert "required field(s) 'preference' of 'user-preference' not given" in error
    finally:
        services.close()


def test_a_step_that_strips_its_json_still_records_from_it(tmp_path: Path) -> None:
    # stripMatch hides the JSON from the caller; the template's values are read from it.
    d = tmp_path / "ladders"
    d.mkdir()
    stripped = LADDER.replace(
        "    recordTemplate:",
        "    slateWrite:\n"
        "      to: { slate: Notes, folder: prefs, file: p.md }\n"
        "      field: pref\n"
        "      match: { type: object, required: [pref] }\n"
        "    stripMatch: true\n"
        "    recordTemplate:",
    ) + (
        "slates:\n  - title: Notes\n    folders:\n      - name: prefs\n        tokenLimit: 200\n"
        "        evictionPolicy: FIFO\n        files:\n          - { name: p.md, init: blank }\n"
    )
    write_ladder(d, "notes", stripped)
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=d))
    try:
        assert services.ladders.errors() == []
        out = ask(services, "Please always answer me in French.", "strip-1")
        assert out.content == "Noted."  # the caller sees no JSON
        record = next(w for w in out.trace["steps"][0]["writes"] if "subject_id" in w)  # type: ignore[index]
        assert record["written"] is True, record
        (ep,) = services.store.episodes.list("t", Scope.for_subject("user-42"))
        assert ep.payload["fields"]["preference"] == "French, always"
    finally:
        services.close()
