"""The LoCoMo bench code path on a tiny synthetic file in LoCoMo's format (the real data
stays out of the unit tests)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cairn.bench.locomo import budget_hits, load, parse_date, run
from cairn.cli.main import app


def _write(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! What breed is he?"},
                {
                    "speaker": "Ann",
                    "dia_id": "D1:3",
                    "text": "A beagle.",
                    "blip_caption": "a photo of a small dog",
                },
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran my first marathon in Oslo."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Amazing, how long did it take?"},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ann's puppy?",
                "answer": "Rex",
                "evidence": ["D1:1"],
                "category": 1,
            },
            {
                "question": "Where did Ben run a marathon?",
                "answer": "Oslo",
                "evidence": ["D2:1"],
                "category": 2,
            },
            {
                "question": "What did Ann adopt in Oslo?",
                "adversarial_answer": "x",
                "evidence": ["D1:1"],
                "category": 5,
            },
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    return path


def test_load_and_dates(tmp_path: Path) -> None:
    convs = load(_write(tmp_path))
    assert len(convs) == 1 and len(convs[0].turns) == 5
    assert convs[0].questions[0]["evidence"] == ["D1:1"]
    assert parse_date("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"


def test_run_scores_only_non_adversarial_questions(tmp_path: Path) -> None:
    report = run(_write(tmp_path))
    assert report.questions == 2
    assert report.recall_at["10"] == 1.0
    values = list(report.budget_recall.values())
    assert values == sorted(values) and values[-1] == 1.0
    assert set(report.to_json()) == {"questions", "budget_recall", "recall_at", "p50_ms", "p95_ms"}


def test_budget_counts_whole_memories(tmp_path: Path) -> None:
    class R:
        def __init__(self, content: str, sources: list[int]) -> None:
            self.memory = type("M", (), {"content": content, "source_episode_ids": sources})

    results = [R("aaaa", [1]), R("bb", [2])]
    assert budget_hits(results, {2}, 6, len)
    assert not budget_hits(results, {2}, 5, len)  # the first fills the budget: stop there


def test_cli_json_in_process(tmp_path: Path) -> None:
    """The older in-process mode stays behind ``--through search``."""
    args = ["bench", "locomo", "--data", str(_write(tmp_path)), "--through", "search", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["questions"] == 2 and set(out["budget_recall"]) == {
        "250",
        "500",
        "1000",
        "2000",
        "4000",
    }
