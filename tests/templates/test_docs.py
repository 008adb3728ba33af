"""docs/templates.md stays true: its examples work and every code and template is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient

from cairn.templates import (
    INVALID_VALUE,
    MISSING_FIELD,
    TEMPLATE_NOT_FOUND,
    UNKNOWN_FIELD,
    load_catalogue,
)
from tests.templates.helpers import write_text

DOC = (Path(__file__).parents[2] / "docs" / "templates.md").read_text(encoding="utf-8")


def test_every_error_code_and_bundled_template_is_documented() -> None:
    for code in (TEMPLATE_NOT_FOUND, UNKNOWN_FIELD, MISSING_FIELD, INVALID_VALUE):
        assert f"`{code}`" in DOC
    for template in load_catalogue():
        assert f"`{template.id}`" in DOC and f"`{template.episode_type}`" in DOC
        for f in template.fields:
            assert f"`{f.name}`" in DOC
    assert "`CAIRN_TEMPLATE_DIRS`" in DOC


def test_yaml_example_is_a_valid_template(tmp_path: Path) -> None:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC, re.S)
    write_text(tmp_path / "ops", "example.yaml", block)
    catalogue = load_catalogue([tmp_path / "ops"])
    assert len(catalogue) == 6 and "sales-call-note" in catalogue


def test_curl_example_body_and_documented_response(client: TestClient) -> None:
    body = json.loads(re.search(r"-d '(\{.*?\})'", DOC, re.S).group(1))  # type: ignore[union-attr]
    r = client.post("/v1/memory-templates/customer-support-handoff/apply", json=body)
    assert r.status_code == 201
    documented_content = re.search(r'"content": (".*?")\n', DOC).group(1)  # type: ignore[union-attr]
    assert r.json()["payload"]["content"] == json.loads(documented_content)
