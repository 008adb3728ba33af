"""Documentation stays true: every setting is documented."""

from __future__ import annotations

from pathlib import Path

from cairn.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"CAIRN_{name.upper()}"
        for name in Settings.model_fields
        if f"`CAIRN_{name.upper()}`" not in text
    ]
    assert missing == []


def _error_codes_in_source() -> set[str]:
    import re

    codes: set[str] = set()
    for path in (ROOT / "src" / "cairn").rglob("*.py"):
        text = path.read_text()
        codes.update(re.findall(r'^\s+code = "([a-z_]+)"', text, flags=re.M))
        codes.update(re.findall(r'\bcode="([a-z_]+)"', text))
    return codes


def test_every_error_code_is_documented() -> None:
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    missing = sorted(c for c in _error_codes_in_source() if f"`{c}`" not in docs)
    assert missing == []


def test_shell_examples_use_the_real_variables() -> None:
    """A ``$CAIRN_…`` in an example names a variable Cairn reads (a setting, or one of the
    CLI's own), so a copied command gets the key or URL the reader has set."""
    import re

    known = {f"CAIRN_{name.upper()}" for name in Settings.model_fields} | {"CAIRN_URL"}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    unknown = sorted(
        f"{page.name}: ${name}"
        for page in pages
        for name in re.findall(r"\$\{?(CAIRN_[A-Z0-9_]+)", page.read_text())
        if name not in known
    )
    assert unknown == []
