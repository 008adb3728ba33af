"""The ``slates:`` block: the seed loads verbatim; mistakes are config errors naming file + path."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import ConfigError
from cairn.slates.config import GateSpec, SlateReadSource, SlateWriteSpec, load_slate_declarations
from tests.slates.conftest import SEED_YAML


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_seed_yaml_loads_verbatim(tmp_path: Path) -> None:
    decl = load_slate_declarations(write(tmp_path, "memory-ladder.yaml", SEED_YAML))
    (memory,) = decl["memory-ladder"]
    assert memory.title == "Memory" and memory.partition == "ladder"
    facts, lessons = memory.folders
    assert (facts.name, facts.token_limit, facts.eviction_policy) == ("facts", 500, "FIFO")
    assert [(f.name, f.initial_content) for f in facts.files] == [("core.md", "")]
    assert (lessons.token_limit, lessons.eviction_policy) == (300, "LRU")
    assert [f.name for f in lessons.files] == ["failures.md", "wins.md"]


def test_other_top_level_keys_are_ignored_and_name_wins(tmp_path: Path) -> None:
    text = (
        "name: renamed\nsteps:\n  - id: answer\n    anything: [1, 2]\nmodels: {x: 1}\n" + SEED_YAML
    )
    decl = load_slate_declarations(write(tmp_path, "file.yml", text))
    assert list(decl) == ["renamed"]


def test_literal_init(tmp_path: Path) -> None:
    text = SEED_YAML.replace("{ name: core.md, init: blank }", "{ name: core.md, init: 'hello' }")
    (memory,) = load_slate_declarations(write(tmp_path, "l.yaml", text))["l"]
    assert memory.folders[0].files[0].initial_content == "hello"


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("tokenLimit: 500", "tokenLimit: 500\n        colour: red", "slates[0].folders[0].colour"),
        ("tokenLimit: 300", "tokenLimit: 0", "slates[0].folders[1].tokenLimit"),
        # A wrong type is an error, not a number: true is not 1, "500" not 500.
        ("tokenLimit: 300", "tokenLimit: true", "slates[0].folders[1].tokenLimit"),
        ("tokenLimit: 300", 'tokenLimit: "300"', "slates[0].folders[1].tokenLimit"),
        ("tokenLimit: 300", "tokenLimit: 300.0", "slates[0].folders[1].tokenLimit"),
        ("evictionPolicy: LRU", "evictionPolicy: LIFO", "slates[0].folders[1].evictionPolicy"),
        (
            "{ name: wins.md, init: blank }",
            "{ name: failures.md, init: blank }",
            "slates[0].folders[1].files",
        ),
        ("- name: lessons", "- name: facts", "slates[0].folders"),
        (
            "{ name: core.md, init: blank }",
            "{ name: core.md, init: blank, size: 3 }",
            "slates[0].folders[0].files[0].size",
        ),
        (
            "{ name: core.md, init: blank }",
            "{ name: a/b, init: blank }",
            "slates[0].folders[0].files[0].name",
        ),
        ("- name: facts", "- name: evictions", "slates[0].folders[0].name"),
    ],
)
def test_config_errors_name_file_and_path(tmp_path: Path, old: str, new: str, path: str) -> None:
    assert old in SEED_YAML
    write(tmp_path, "bad.yaml", SEED_YAML.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_slate_declarations(tmp_path)
    assert "bad.yaml" in str(info.value) and path in str(info.value)


def test_duplicate_slate_titles(tmp_path: Path) -> None:
    body = SEED_YAML.split("\n", 1)[1]
    write(tmp_path, "dup.yaml", SEED_YAML + body)
    with pytest.raises(ConfigError, match=r"dup\.yaml: slates: duplicate slate name 'Memory'"):
        load_slate_declarations(tmp_path)


def test_init_larger_than_folder_is_a_config_error(tmp_path: Path) -> None:
    text = SEED_YAML.replace("tokenLimit: 300", "tokenLimit: 3").replace(
        "{ name: wins.md, init: blank }", "{ name: wins.md, init: 'one two three four five' }"
    )
    write(tmp_path, "big.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_slate_declarations(tmp_path)
    assert "big.yaml: slates[0].folders[1].files[1].init" in str(info.value)


def test_files_without_slates_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "settings.yaml", "- a list, e.g. a hook's settings file\n")
    write(tmp_path, "plain.yaml", "name: memory-ladder\nsteps: []\n")
    write(tmp_path, "memory-ladder.yaml", SEED_YAML)
    assert list(load_slate_declarations(tmp_path)) == ["memory-ladder"]


def test_duplicate_ladder_names_and_bad_yaml(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: same\n" + SEED_YAML)
    write(tmp_path, "b.yaml", "name: same\n" + SEED_YAML)
    with pytest.raises(ConfigError, match="already used"):
        load_slate_declarations(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    write(other, "x.yaml", "slates: [\n")
    with pytest.raises(ConfigError, match=r"x\.yaml: cannot read YAML"):
        load_slate_declarations(other)
    with pytest.raises(ConfigError, match="does not exist"):
        load_slate_declarations(tmp_path / "missing")


def test_step_blocks_of_the_seed_validate() -> None:
    read = SlateReadSource.model_validate(
        {"slate": "Memory", "folder": "facts", "metatag": "index"}
    )
    assert read.file is None
    with pytest.raises(ValueError, match="metatag"):
        SlateReadSource.model_validate({"slate": "Memory", "folder": "facts"})
    write_spec = SlateWriteSpec.model_validate(
        {
            "to": {"slate": "Memory", "folder": "facts", "file": "core.md"},
            "field": "fact",
            "on": "append",
            "match": {
                "type": "object",
                "required": ["fact"],
                "properties": {"fact": {"type": "string", "minLength": 5}},
            },
        }
    )
    assert write_spec.field == "fact"
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        SlateWriteSpec.model_validate(
            {"to": {"slate": "M", "folder": "f", "file": "x"}, "match": {"type": "nonsense"}}
        )
    with pytest.raises(ValueError, match="needs 'key'"):
        SlateWriteSpec.model_validate(
            {"to": {"slate": "M", "folder": "f", "file": "x"}, "on": "mergeByKey"}
        )
    gate = GateSpec.model_validate(
        {
            "contains": "lesson",
            "not": {"regex": "^ERROR"},
            "then": {"write": {"to": {"slate": "Memory", "folder": "lessons", "file": "wins.md"}}},
            "else": {"write": {"slate": "Memory", "folder": "lessons", "file": "failures.md"}},
        }
    )
    assert gate.else_ is not None and gate.else_.write.to.file == "failures.md"
    with pytest.raises(ValueError, match="invalid regex"):
        GateSpec.model_validate(
            {"regex": "(", "then": {"write": {"to": {"slate": "M", "folder": "f", "file": "x"}}}}
        )
    # The seed's `if: { then: { write: … } }`: no condition is a gate that always passes.
    always = GateSpec.model_validate(
        {"then": {"write": {"to": {"slate": "M", "folder": "f", "file": "x"}}}}
    )
    assert always.always
