"""The one YAML reader: YAML 1.2 scalars, duplicate keys refused, a size limit; every
configuration file (ladders, the slates they declare, templates, hook settings) reads alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.yamlfiles import YAMLError, load_yaml, read_yaml_text, yaml_problem
from cairn.errors import ConfigError
from cairn.ladders.config import parse_ladder_file, read_yaml
from cairn.slates.config import load_slate_declarations
from tests.slates.conftest import SEED_YAML

YES_NO_STEP = """
steps:
  - id: answer
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: answer
      on: append
      match:
        type: object
        properties:
          answer: { enum: [yes, no, on, off, y, n] }
"""


def test_yaml_1_2_booleans_only_true_and_false() -> None:
    assert load_yaml("a: [yes, no, on, off, y, n, true, false, True, FALSE]") == {
        "a": ["yes", "no", "on", "off", "y", "n", True, False, True, False]
    }
    assert load_yaml("on: append") == {"on": "append"}


def test_enum_yes_no_reads_the_same_in_the_ladder_and_in_its_slates(tmp_path: Path) -> None:
    path = tmp_path / "memory-ladder.yaml"
    path.write_text(SEED_YAML + YES_NO_STEP, encoding="utf-8")
    spec = parse_ladder_file(path)
    write = spec.steps[0].slateWrite
    assert write is not None and isinstance(write.match, dict)
    assert write.match["properties"]["answer"]["enum"] == ["yes", "no", "on", "off", "y", "n"]
    assert write.on == "append"
    # The slates service reads the same file with the same reader: the same document.
    (memory,) = load_slate_declarations(tmp_path)["memory-ladder"]
    assert memory.title == spec.slates[0].title == "Memory"
    assert read_yaml(path)["steps"][0]["slateWrite"]["match"] == write.match


def test_duplicate_and_unsupported_keys_are_refused() -> None:
    with pytest.raises(YAMLError) as exc:
        load_yaml("id: a\nid: b\n")
    assert yaml_problem(exc.value) == "line 2, column 1: duplicate key 'id'"
    with pytest.raises(YAMLError, match="unsupported mapping key"):
        load_yaml("? [a, b]\n: 1\n")
    with pytest.raises(YAMLError):
        load_yaml("x: !!python/object:os.system y\n")


def test_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 100, encoding="utf-8")
    assert read_yaml_text(path, 200).startswith("a: x")
    with pytest.raises(ConfigError) as exc:
        read_yaml_text(path, 50)
    assert exc.value.code == "config_too_large" and "over the limit of 50" in exc.value.message
    with pytest.raises(ConfigError, match="over the limit"):
        parse_ladder_file(_big_ladder(tmp_path))


def _big_ladder(tmp_path: Path) -> Path:
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * 1_048_576 + "\nsteps: []\n", encoding="utf-8")
    return path
