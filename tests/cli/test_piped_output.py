"""Output that is not a terminal (a pipe, a file; the tests' too) keeps every table column and
prints messages as they are, on one line (rich's default would lay it out 80 wide)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.table import Table

from cairn.cli._common import PIPED_WIDTH, _Console


def test_messages_are_printed_whole_and_tables_keep_their_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal, even under -s
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    console, err_console = _Console(stderr=False), _Console(stderr=True)
    message = "error (template_missing_field): " + "a long message word " * 20
    for out in (console, err_console):
        assert out.width == PIPED_WIDTH
        with out.capture() as captured:
            out.print(message)
        assert captured.get() == message + "\n"
    table = Table()
    for header in ("id", "tenant", "prefix", "name", "created", "revoked"):
        table.add_column(header)
    table.add_row("k" * 32, "acme", "cairn_ab12", "deploy key", "2026-12-07T13:00:00+00:00", "")
    with console.capture() as captured:
        console.print(table)
    text = captured.get()
    assert all(h in text for h in ("prefix", "name", "created", "revoked"))
    assert "k" * 32 in text and "2026-12-07T13:00:00+00:00" in text
