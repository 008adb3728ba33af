"""LoCoMo evidence recall (a thin wrapper of ``cairn bench locomo``).

Usage:
    python bench/locomo.py --data ../shared/data/locomo/locomo-dev.json [--embedder local] [--json]
"""

from __future__ import annotations

import typer

from cairn.cli.memories_bench import locomo_command

if __name__ == "__main__":
    typer.run(locomo_command)
