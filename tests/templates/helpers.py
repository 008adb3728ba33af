"""Small builders shared by the template tests."""

from __future__ import annotations

from pathlib import Path

import yaml

SIXTH = {
    "id": "sales-call-note",
    "version": 2,
    "title": "Sales call note",
    "episode_type": "sales.call_note",
    "fields": [
        {"name": "account", "required": True},
        {"name": "summary", "type": "text", "required": True},
        {"name": "next_step"},
    ],
    "content_template": "Sales call with {account}: {summary}\nNext step: {next_step}\n{{draft}}",
}


def write_yaml(directory: Path, name: str, data: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def write_text(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
