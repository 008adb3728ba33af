"""The examples of docs/integrations.md run as written, offline: the Agents SDK's model
provider hands out a scripted model, and Cairn runs embedded in the test's data directory."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import set_tracing_disabled
from agents.models.multi_provider import MultiProvider

from tests.integrations.agents_model import ScriptedModel

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def example(name: str) -> str:
    """The code block that follows ``<!-- example: name -->`` in the doc."""
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"no example {name!r} in {DOC.name}"
    return found.group(1)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAIRN_EMBEDDER", "none")
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAIRN_API_KEY", raising=False)
    return tmp_path / "data"


@pytest.fixture
def offline_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield None
    set_tracing_disabled(False)


def test_openai_agents_example(
    data_dir: Path,
    offline_tracing: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ScriptedModel("Noted: jasmine tea.", "You like jasmine tea.")
    asked: list[str | None] = []

    def get_model(self: MultiProvider, name: str | None) -> ScriptedModel:
        asked.append(name)
        return model

    monkeypatch.setattr(MultiProvider, "get_model", get_model)
    exec(compile(example("openai-agents"), str(DOC), "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert asked == ["gpt-4.1-mini", "gpt-4.1-mini"]
    assert out[:3] == ["Noted: jasmine tea.", "You like jasmine tea.", "4 items in the session"]
    assert "jasmine" in "\n".join(out[3:]).lower()
    turn_two = json.dumps(model.inputs[1])
    assert "I like jasmine tea." in turn_two and "Noted: jasmine tea." in turn_two
    assert any(data_dir.iterdir())


def test_langchain_example(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(example("langchain"), str(DOC), "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['I like jasmine tea.', 'Noted: jasmine tea.']"
    assert len(out) >= 2
    score, _, rest = out[1].partition(" ")
    assert 0 < float(score) <= 1
    assert "jasmine" in rest.lower() and "[UUID(" not in rest
    assert re.search(r"\['[0-9a-f-]{36}'", rest)


def test_langgraph_example(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(example("langgraph"), str(DOC), "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[]",
        "['I like jasmine tea.']",
        "['I like jasmine tea.', '我住在北京。']",
        "[('users', 'ada', 'memories')]",
        "{'text': '我住在北京。'}",
    ]
    assert any(data_dir.iterdir())
