# ruff: noqa: RUF001 -- messages in several scripts
"""Migration 0022 on both backends: turns compiled before it that only ask get the
confidence the compiler gives them now (times 0.75); statements, contentless and corrected
turns keep theirs, and going down restores what they had."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config, current_revisions
from tests.store.test_turn_confidence_migration import compile_turns, merge_metadata

SCOPE = Scope.for_subject("kerem")
SAID = [
    "iyi akşamlar! teslim tarihini atlattın mı?",
    "Galada cadının telsiz mikrofonu şarkının ortasında gitti, yedek mikrofonla kulise koştum.",
    "How was the trip to Denmark with your sister?",
    "We moved to Oslo in March. Want to visit?",
    "haha ok",
    "عملت محضر؟",
    "台湾好玩吗？",
    "How are you?",  # contentless: 0.2, never rescaled
    "你去过台湾吗？",  # a half-word size: 0.625 x 0.75, and back
    "Did you see the eclipse from the balcony last night?",  # an LLM compiler's, below
]


def _turns(db_url: str) -> dict[str, float]:
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT content, confidence FROM memories WHERE kind = 'turn'")
        ).all()
    engine.dispose()
    return {str(c).removeprefix("Kerem: "): float(v) for c, v in rows}


def test_0022_discounts_stored_questions_and_down_restores_them(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Kerem", SAID)
    finally:
        store.close()
    now = _turns(db_url)
    # Compiled now: questions at 0.75 of what their words give, the rest as before.
    assert now == {
        SAID[0]: 0.5625,  # 0.75 x 0.75
        SAID[1]: 1.0,
        SAID[2]: 0.4875,  # 0.65 x 0.75
        SAID[3]: 0.75,
        "haha ok": 0.2,
        SAID[5]: 0.45,  # 0.6 x 0.75
        SAID[6]: 0.45,
        SAID[7]: 0.2,
        SAID[8]: 0.4688,
        SAID[9]: 0.5625,  # 0.75 x 0.75
    }

    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0021_search_stems")
        conn.commit()
        assert "0022_question_turns" not in current_revisions(conn)
        # Someone corrected a question turn before the upgrade: its confidence stays.
        merge_metadata(conn, f"Kerem: {SAID[5]}", {"correction": {"editor": "ana"}})
        # A turn another compiler made keeps the confidence it gave.
        merge_metadata(conn, f"Kerem: {SAID[9]}", {"compiler": "llm"})
        conn.commit()
    engine.dispose()
    before = _turns(db_url)
    assert before == {
        **now,
        SAID[0]: 0.75,
        SAID[2]: 0.65,
        SAID[5]: 0.6,
        SAID[6]: 0.6,
        SAID[8]: 0.625,
        SAID[9]: 0.75,
    }

    open_store(db_url).close()  # migrates: 0022 runs over the stored rows
    assert _turns(db_url) == {**now, SAID[5]: 0.6, SAID[9]: 0.75}
