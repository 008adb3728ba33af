"""Documentation stays true: every setting is documented."""

from __future__ import annotations

from pathlib import Path

from cairn.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [f"CAIRN_{name.upper()}" for name in Settings.model_fields
               if f"`CAIRN_{name.upper()}`" not in text]
    assert missing == []
