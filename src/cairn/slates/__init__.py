"""Slates: size-limited working memory (folders with token limits and eviction) for ladders.

The public surface: ``Slates`` (the service), the config models (``SlateSpec`` …,
``load_slate_declarations``), and the step helpers ``apply_slate_write`` / ``apply_gated_write``.
The plain state models live in ``cairn.core.slates`` (the store reads and writes them).
Imported lazily: importing the package loads nothing else.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Slates": "cairn.slates.service",
    "SlateSpec": "cairn.slates.config",
    "FolderSpec": "cairn.slates.config",
    "FileSpec": "cairn.slates.config",
    "SlateReadSource": "cairn.slates.config",
    "SlateWriteSpec": "cairn.slates.config",
    "GateSpec": "cairn.slates.config",
    "Condition": "cairn.slates.config",
    "parse_slates": "cairn.slates.config",
    "load_slate_declarations": "cairn.slates.config",
    "WriteResult": "cairn.core.slates",
    "WriteOutcome": "cairn.core.slates",
    "Eviction": "cairn.core.slates",
    "apply_slate_write": "cairn.slates.steps",
    "apply_gated_write": "cairn.slates.steps",
    "extract_json": "cairn.slates.extract",
    "evaluate_condition": "cairn.slates.gates",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cairn.slates' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
