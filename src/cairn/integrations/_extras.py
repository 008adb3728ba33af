"""The import guard of the optional framework packages."""

from __future__ import annotations

import importlib


def require_extra(module: str, extra: str, adapter: str) -> None:
    """Import ``module`` or raise an ImportError that names the install command."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{adapter} needs the '{module}' package, which is not installed. "
            f"Install it with: pip install 'cairn[{extra}]'"
        ) from exc
