"""What every command shares: settings from options, the console, exit codes.

Exit codes: 0 success; 1 the operation failed (an error from Cairn or the server);
2 bad usage (Typer's own); 3 configuration error (e.g. a template or ladder file is invalid).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from cairn.config import Settings
from cairn.errors import CairnError, ConfigError

console = Console()
err_console = Console(stderr=True)

EXIT_FAILED = 1
EXIT_CONFIG = 3


def settings_with(**overrides: Any) -> Settings:
    """Settings from the environment, with the non-empty command-line overrides applied."""
    values = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**values)


def fail(error: Exception) -> typer.Exit:
    """Print an error the same way everywhere and return the exit to raise."""
    if isinstance(error, ConfigError):
        err_console.print(f"[bold red]configuration error:[/] {error}")
        return typer.Exit(EXIT_CONFIG)
    if isinstance(error, CairnError):
        err_console.print(f"[bold red]error[/] ({error.code}): {error.message}")
        return typer.Exit(EXIT_FAILED)
    err_console.print(f"[bold red]error:[/] {error}")
    return typer.Exit(EXIT_FAILED)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
