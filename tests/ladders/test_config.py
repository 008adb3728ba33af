"""Ladder files: the seed's ladder loads verbatim; every error names the file and the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.config import Settings
from cairn.errors import ConfigError
from cairn.ladders.config import SlateReadField, TextField, parse_ladder_file
from cairn.ladders.registry import LadderRegistry, compile_ladder
from tests.ladders.conftest import EXAMPLES, write_ladder

SLATES = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
"""

# The seed's step-3 form, verbatim (KnownFacts without a fallback).
SEED_STEP_3 = """
steps:
- id: answer
  fields:
    - { name: Question, type: text, from: input.context }
    - { name: KnownFacts, type: slateRead, from: { slate: Memory, folder: facts, file: core.md } }
  systemPrompt: 'Answer. If you discover a durable fact, emit JSON {"fact": "..."}.'
  slateWrite:
    to: { slate: Memory, folder: facts, file: core.md }
    field: fact
    on: append
    match:
      type: object
      required: [fact]
      properties:
        fact: { type: string, minLength: 5 }
"""


def test_the_shipped_example_is_the_seed_ladder() -> None:
    spec = parse_ladder_file(EXAMPLES / "memory-ladder.yaml")
    step = spec.steps[0]
    assert step.id == "answer"
    q, known = step.fields
    assert isinstance(q, TextField) and q.source == "input.context"
    assert isinstance(known, SlateReadField) and known.fallback == "No prior facts available."
    assert known.source.file == "core.md"
    assert step.slateWrite is not None and step.slateWrite.on == "append"  # not YAML 1.1 `True`
    assert step.slateWrite.field == "fact"
    assert [s.title for s in spec.slates] == ["Memory"]


def test_seed_step_forms_and_metatag_reads_load(tmp_path: Path) -> None:
    path = write_ladder(
        tmp_path,
        "l",
        SLATES
        + SEED_STEP_3
        + """
- id: tags
  fields:
    - name: Tags
      type: slateRead
      from: { slate: Memory, folder: facts, file: core.md, metatag: tags }
    - name: FileList
      type: slateRead
      from: { slate: Memory, folder: facts, metatag: index }
    - { name: Prior, type: text, from: steps.answer }
  if:
    contains: "Paris"
    then: { write: { to: { slate: Memory, folder: facts, file: core.md }, on: append } }
""",
    )
    spec = parse_ladder_file(path)
    assert [s.id for s in spec.steps] == ["answer", "tags"]
    assert spec.steps[1].gate is not None


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("steps:\n  - id: a\n    colour: red\n", "steps[0].colour: Extra inputs are not permitted"),
        (
            "steps:\n  - id: a\n    fields:\n      - {name: Q, type: text, from: input.nope}\n",
            "steps[0].fields[0].from: unknown text source 'input.nope'",
        ),
        (
            "steps:\n  - id: a\n    fields:\n      - {name: Q, type: text, from: steps.b}\n"
            "  - id: b\n",
            "steps[0].fields[0].from: 'steps.b' must name an earlier step",
        ),
        ("steps:\n  - id: a\n  - id: a\n", "steps[1].id: step id 'a' is used twice"),
        (
            "steps:\n  - id: a\n    fields:\n      - {name: K, type: slateRead, "
            "from: {slate: Nope, folder: facts, file: core.md}}\n",
            "steps[0].fields[0].from: slate 'Nope' is not declared in slates (declared: Memory)",
        ),
        (
            "steps:\n  - id: a\n    slateWrite: {to: {slate: Memory, folder: facts, file: x.md}}\n",
            "steps[0].slateWrite.to: folder 'facts' declares no file 'x.md'",
        ),
        (
            "models:\n  gpt-4o: {provider: ghost}\n",
            "models.gpt-4o: provider 'ghost' is not declared",
        ),
        (
            "providers:\n  p: {kind: scripted}\n",
            "providers.p: a scripted provider needs rules, a file or a default",
        ),
        ("providers:\n  p: {kind: openai}\n", "providers.p: an openai provider needs baseUrl"),
        ("bogus: 1\n", "bogus: Extra inputs are not permitted"),
        (
            "steps:\n  - id: a\n    fields:\n      - {name: K, type: mystery, from: x}\n",
            "steps[0].fields[0]",
        ),
    ],
)
def test_errors_name_file_and_path(tmp_path: Path, text: str, where: str) -> None:
    path = write_ladder(tmp_path, "bad", SLATES + text)
    with pytest.raises(ConfigError) as err:
        parse_ladder_file(path)
    assert str(path) in err.value.message
    assert where in err.value.message, err.value.message


def test_yaml_and_slate_errors_name_the_file(tmp_path: Path) -> None:
    path = write_ladder(tmp_path, "broken", "steps: [\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        parse_ladder_file(path)
    path = write_ladder(tmp_path, "dup", SLATES + SLATES.replace("slates:\n", ""))
    with pytest.raises(ConfigError, match=r"dup.yaml.*duplicate slate name 'Memory'"):
        parse_ladder_file(path)


def test_seed_001_blocks_validate_in_a_ladder(tmp_path: Path) -> None:
    from tests.ladders.test_agents import SEED_AGENT

    path = write_ladder(tmp_path, "agent", SEED_AGENT)
    spec = parse_ladder_file(path)
    assert list(spec.agents) == ["assistant"]
    assert spec.agents["assistant"].prepare[0].settings.output == "memory_items"
    bad = write_ladder(tmp_path, "bad-agent", SEED_AGENT.replace("memory: memories", "memory: x"))
    with pytest.raises(ConfigError, match=r"names resource 'x', which is not declared"):
        parse_ladder_file(bad)
    reserved = write_ladder(
        tmp_path, "reserved", SEED_AGENT.replace("output: memory_items", "output: __items")
    )
    with pytest.raises(ConfigError, match="reserved"):
        parse_ladder_file(reserved)


def test_registry_loads_a_directory_and_rejects_bad_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "one", "steps:\n  - id: a\n")
    write_ladder(d, "two", "name: one\n")
    clash = LadderRegistry.load(Settings(ladders_dir=d))
    assert clash.names() == ["one"] and clash.get("one").path.name == "one.yaml"
    (problem,) = clash.errors()
    assert "'one' is already used by one.yaml" in problem["error"]
    # Reported like any invalid file: logged, and never loaded.
    two = next(state for state in clash.states() if state.path.name == "two.yaml")
    assert problem["status"] == "invalid" and two.loaded_at is None
    assert any("two.yaml is invalid" in r.getMessage() for r in caplog.records)
    (d / "two.yaml").unlink()
    registry = LadderRegistry.load(Settings(ladders_dir=d))
    assert registry.names() == ["one"]
    assert LadderRegistry.load(Settings()).names() == []
    with pytest.raises(ConfigError, match="does not exist"):
        LadderRegistry.load(Settings(ladders_dir=tmp_path / "missing"))


def test_a_replies_file_must_stay_in_the_ladder_directory(tmp_path: Path) -> None:
    d = tmp_path / "ladders"
    d.mkdir()
    (tmp_path / "outside.yaml").write_text("default: hi\n")
    path = write_ladder(d, "l", "providers:\n  p: {kind: scripted, file: ../outside.yaml}\n")
    with pytest.raises(ConfigError, match="outside the ladder's directory"):
        compile_ladder(path, Settings())
    path = write_ladder(d, "l", "providers:\n  p: {kind: scripted, file: nope.yaml}\n")
    with pytest.raises(ConfigError, match="does not exist"):
        compile_ladder(path, Settings())


def test_services_start_with_an_invalid_ladder_and_report_it(tmp_path: Path) -> None:
    from cairn.services import Services

    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "bad", "steps:\n  - id: a\n    nope: 1\n")
    write_ladder(d, "good", "steps:\n  - id: a\n")
    services = Services.from_settings(Settings(data_dir=tmp_path / "data", ladders_dir=d))
    try:
        assert services.ladders.names() == ["good"]
        (problem,) = services.ladders.errors()
        assert problem["status"] == "invalid"
        assert problem["error"].startswith("bad.yaml: steps[0].nope")
    finally:
        services.close()


def test_a_name_two_files_claim_goes_to_the_file_named_after_it_on_every_start(
    tmp_path: Path,
) -> None:
    """A fresh registry took files in name order, so ``bad8.yaml`` (``name: memory-ladder``)
    took the name from ``memory-ladder.yaml`` at every restart while a running server kept the
    other; and ``GET /v1/ladders/{name}`` could describe the file that did not serve."""
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "memory-ladder", "steps:\n  - id: a\n")
    write_ladder(d, "bad8", "name: memory-ladder\nsteps:\n  - id: b\n")
    for _ in range(2):  # a start, then another
        registry = LadderRegistry.load(Settings(ladders_dir=d))
        assert registry.get("memory-ladder").path.name == "memory-ladder.yaml"
        assert registry.state("memory-ladder").path.name == "memory-ladder.yaml"
        (problem,) = registry.errors()
        assert (
            problem["file"] == "bad8.yaml"
            and "already used by memory-ladder.yaml" in (problem["error"])
        )
        registry.reload()  # a reload keeps the serving file
        assert registry.get("memory-ladder").path.name == "memory-ladder.yaml"
        registry.close()


def test_a_whole_file_check_names_its_own_place(tmp_path: Path) -> None:
    """A check of the whole file (step ids, model routes) names the place in its message; it
    was prefixed "(top level): " as well."""
    twice = write_ladder(tmp_path, "twice", "steps:\n  - id: a\n  - id: a\n")
    with pytest.raises(ConfigError) as refused:
        parse_ladder_file(twice)
    assert refused.value.message == f"{twice}: steps[1].id: step id 'a' is used twice"
