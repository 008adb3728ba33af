"""Small things a server process keeps for good (docs/benchmarks.md, "Server memory, session
7"): no syntax highlighter loaded by the migrations' template engine, and the compiler's word
memo sharing one string per word."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cairn.engine.compile import heuristic


def test_migrations_do_not_load_the_syntax_highlighter(tmp_path: Path) -> None:
    """Alembic's mako would import pygments' lexers (about 4 MB) to highlight error pages."""
    code = (
        "import sys\n"
        "from cairn.store import open_store\n"
        f"open_store('sqlite:///{tmp_path / 'cairn.db'}').close()\n"
        "print('mako.exceptions' in sys.modules, "
        "[m for m in sys.modules if m.startswith('pygments.lexers')])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split(maxsplit=1)
    assert out == ["True", "[]\n"]


def test_the_word_memo_shares_one_string_per_word() -> None:
    heuristic._content_words.cache_clear()
    first = heuristic._content_words("Caroline painted a lighthouse at sunrise")
    second = heuristic._content_words("the lighthouse again, painted by Caroline")
    assert "lighthouse" in first and "lighthouse" in second
    assert first[first.index("lighthouse")] is second[second.index("lighthouse")]


def test_a_server_process_loads_neither_the_sdk_nor_httpx(tmp_path: Path) -> None:
    """``cairn serve`` runs in the CLI's process: the CLI's client commands, the remote
    embedder, compiler and model provider import the SDK and httpx (about 8 MB) only when
    used. The app with the example ladders loaded imports neither."""
    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys\n"
        "from cairn.cli.main import app\n"
        "from cairn.app import create_app\n"
        "from cairn.config import Settings\n"
        "from cairn.services import Services\n"
        f"settings = Settings(data_dir={str(tmp_path)!r}, embedder='none', "
        f"ladders_dir={str(root / 'examples' / 'ladders')!r})\n"
        "services = Services.from_settings(settings)\n"
        "create_app(services=services)\n"
        "services.close()\n"
        "print(sorted(m for m in ('httpx', 'cairn.client') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out == "[]\n"
