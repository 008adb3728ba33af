"""Metatags: what a slate says about itself.

- ``tags`` (file): the file's tags, a JSON array of strings in the order they were first set.
- ``index`` (folder): ``[{"name", "tokens", "bytes"}]``, one per file in declaration order
  (files of an open folder follow in creation order). ``bytes`` is the UTF-8 size of the text.
- ``tree`` (slate): ``{"slate", "partition", "tokens", "tokenLimit", "folders": [{"folder",
  "tokenLimit", "evictionPolicy", "tokens", "files": [{"file", "tokens", "bytes", "entries",
  "tags"}]}]}``. ``depth`` cuts it: 0 keeps the slate node only, 1 adds the folders, 2 (or no
  depth) adds the files. A cut node keeps its own usage but has no children key.
"""

from __future__ import annotations

from typing import Any

from cairn.core.slates import FileState, FolderState
from cairn.slates.config import SlateSpec


def file_index(state: FolderState) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "tokens": f.tokens, "bytes": len(f.text.encode("utf-8"))}
        for f in _ordered(state)
    ]


def _ordered(state: FolderState) -> list[FileState]:
    return sorted(state.files.values(), key=lambda f: (f.ordinal, f.id or 0))


def slate_tree(
    spec: SlateSpec, states: list[FolderState], *, depth: int | None = None, contents: bool = False
) -> dict[str, Any]:
    """The nested tree of one slate instance (see the module docstring)."""
    node: dict[str, Any] = {
        "slate": spec.title,
        "partition": spec.partition,
        "tokens": sum(s.usage for s in states),
        "tokenLimit": sum(s.token_limit for s in states),
    }
    if depth is not None and depth < 1:
        return node
    folders = []
    for state in states:
        folder: dict[str, Any] = {
            "folder": state.name,
            "tokenLimit": state.token_limit,
            "evictionPolicy": state.policy,
            "tokens": state.usage,
        }
        if depth is None or depth >= 2:
            files = []
            for f in _ordered(state):
                text = f.text
                item: dict[str, Any] = {
                    "file": f.name,
                    "tokens": f.tokens,
                    "bytes": len(text.encode("utf-8")),
                    "entries": len(f.entries),
                    "tags": list(f.tags),
                }
                if contents:
                    item["content"] = text
                    item["kind"] = f.kind
                    item["last_used"] = f.last_used
                files.append(item)
            folder["files"] = files
        folders.append(folder)
    node["folders"] = folders
    return node
