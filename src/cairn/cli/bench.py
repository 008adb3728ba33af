"""``cairn bench``: the benchmarks, one command each (results go in docs/benchmarks.md).

Each feature registers its command below with one ``app.command`` line pointing at its module in
``cairn.bench``.
"""

from __future__ import annotations

import typer

app = typer.Typer(help="Run benchmarks that print tables.", no_args_is_help=True)
