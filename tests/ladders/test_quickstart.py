"""The README's quick-start tells the truth: after ``make run``'s demo (France, then Germany)
the README's ladder call about France answers Paris, and calling again on a re-run server
appends no duplicate fact. Through the real server and the ``openai`` package."""

from __future__ import annotations

from openai import OpenAI

from tests.ladders.conftest import Cairn

FRANCE = "What is the capital of France?"
GERMANY = "What is the capital of Germany?"


def _ask(cairn: Cairn, question: str) -> str:
    client = OpenAI(base_url=cairn.base("memory-ladder"), api_key=cairn.key, max_retries=0)
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}]
    )
    return reply.choices[0].message.content or ""


def _core(cairn: Cairn) -> list[str]:
    text = cairn.services.slates.read_file(
        "tenant-a", "memory-ladder", "Memory", "facts", "core.md", peek=True
    )
    return text.splitlines()


def test_demo_then_readme_call_then_rerun(cairn: Cairn) -> None:
    # scripts/demo.sh (make run): France, then Germany.
    assert _ask(cairn, FRANCE).startswith("Paris.")
    assert _ask(cairn, GERMANY).startswith("Berlin.")
    facts = ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    assert _core(cairn) == facts
    # The README's call, on the same server: the known fact about Germany is not the answer.
    again = _ask(cairn, FRANCE)
    assert again.startswith("Paris.") and "Berlin" not in again
    # A re-run of the demo on the same database: the answers stay right, no duplicate lines.
    assert _ask(cairn, FRANCE).startswith("Paris.")
    assert _ask(cairn, GERMANY).startswith("Berlin.")
    assert _core(cairn) == facts


def test_germany_first_then_france(cairn: Cairn) -> None:
    assert _ask(cairn, GERMANY).startswith("Berlin.")
    france = _ask(cairn, FRANCE)
    assert france.startswith("Paris.") and "Berlin is the capital of Germany" in france
    assert _core(cairn) == ["Berlin is the capital of Germany.", "Paris is the capital of France."]
