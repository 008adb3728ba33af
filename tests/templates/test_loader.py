"""Load-time rules: every malformed template file fails loudly, naming the file and problem."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import ConfigError
from cairn.services import Services
from cairn.templates import BUNDLED_DIR, MemoryTemplate, load_catalogue
from tests.conftest import make_settings
from tests.templates.helpers import SIXTH, write_text, write_yaml

# The bundled set as issue 3 specifies it: (episode_type, [(field, type, required), ...]).
BUNDLED_SPEC = {
    "customer-support-handoff": (
        "support.handoff_note",
        [
            ("customer", "string", True),
            ("issue", "text", True),
            ("steps_taken", "text", False),
            ("next_owner", "string", False),
        ],
    ),
    "user-preference": (
        "profile.preference",
        [
            ("subject", "string", True),
            ("preference", "text", True),
            ("rationale", "text", False),
        ],
    ),
    "project-decision": (
        "project.decision",
        [
            ("decision", "text", True),
            ("context", "text", True),
            ("alternatives", "text", False),
            ("decided_by", "string", False),
        ],
    ),
    "incident-summary": (
        "incident.summary",
        [
            ("title", "string", True),
            ("symptoms", "text", True),
            ("root_cause", "text", False),
            ("resolution", "text", False),
            ("follow_up", "text", False),
        ],
    ),
    "account-onboarding": (
        "account.onboarding",
        [
            ("account", "string", True),
            ("goals", "text", True),
            ("plan", "string", False),
            ("key_contacts", "text", False),
        ],
    ),
}


def test_bundled_set_matches_the_specification() -> None:
    catalogue = load_catalogue()
    assert sorted(t.id for t in catalogue) == sorted(BUNDLED_SPEC)
    for template in catalogue:
        episode_type, fields = BUNDLED_SPEC[template.id]
        assert template.episode_type == episode_type
        assert template.version == 1
        assert template.title and template.description
        assert [(f.name, f.type, f.required) for f in template.fields] == fields
        assert all(f.description for f in template.fields)
        # Every declared field appears in the scaffold.
        for f in template.fields:
            assert "{" + f.name + "}" in template.content_template
        assert catalogue.source_of(template.id).parent == BUNDLED_DIR


def test_bundled_files_ship_inside_the_package() -> None:
    import importlib.resources

    bundled = importlib.resources.files("cairn.templates") / "bundled"
    names = sorted(p.name for p in bundled.iterdir() if p.name.endswith(".yaml"))
    assert names == sorted(f"{i}.yaml" for i in BUNDLED_SPEC)


def test_operator_directory_adds_a_sixth_template(tmp_path: Path) -> None:
    write_yaml(tmp_path / "ops", "sales.yaml", SIXTH)
    write_text(tmp_path / "ops", "README.md", "not a template")
    write_text(tmp_path / "ops", ".draft.yaml", "{{{ broken")  # hidden: editor files skipped
    catalogue = load_catalogue([tmp_path / "ops"])
    assert len(catalogue) == 6
    sixth = catalogue.get("sales-call-note")
    assert sixth.version == 2
    assert [f.type for f in sixth.fields] == ["string", "text", "string"]
    assert sixth.render({"account": "Acme", "summary": "{next_step}"}) == (
        "Sales call with Acme: {next_step}\nNext step: \n{draft}"
    )


def test_yml_suffix_and_several_directories(tmp_path: Path) -> None:
    write_yaml(tmp_path / "one", "a.yml", SIXTH | {"id": "one"})
    write_yaml(tmp_path / "two", "b.yaml", SIXTH | {"id": "two"})
    catalogue = load_catalogue([tmp_path / "one", tmp_path / "two"])
    assert {"one", "two"} <= {t.id for t in catalogue}
    assert len(catalogue) == 7


def test_operator_file_reusing_a_bundled_id_is_a_duplicate(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "ops", "mine.yaml", SIXTH | {"id": "user-preference"})
    with pytest.raises(ConfigError) as err:
        load_catalogue([tmp_path / "ops"])
    message = str(err.value)
    assert str(path) in message
    assert "duplicate template id 'user-preference'" in message
    assert "user-preference.yaml" in message  # where it was defined first
    # Never advice to edit a file inside the installed package.
    assert "copy it under a new id" in message and "bump" not in message


def test_duplicate_id_across_operator_files(tmp_path: Path) -> None:
    write_yaml(tmp_path / "ops", "a.yaml", SIXTH)
    second = write_yaml(tmp_path / "ops", "b.yaml", SIXTH | {"version": 3})
    with pytest.raises(ConfigError, match="duplicate template id 'sales-call-note'") as err:
        load_catalogue([tmp_path / "ops"])
    assert str(second) in str(err.value) and "a.yaml" in str(err.value)
    assert "bump its 'version'" in str(err.value)


def _with(path: str, value: Any) -> dict[str, Any]:
    """SIXTH with one key replaced (``fields.0.name``) or removed (value ``...``)."""
    data = copy.deepcopy(SIXTH)
    *parents, last = path.split(".")
    target: Any = data
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    key: Any = int(last) if last.isdigit() else last
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return data


BAD_DOCUMENTS = {
    "unknown top-level key": (_with("owner", "me"), "owner: Extra inputs are not permitted"),
    "unknown field key": (_with("fields.0.default", "x"), "fields.0.default: Extra inputs"),
    "missing id": (_with("id", ...), "id: Field required"),
    "missing version": (_with("version", ...), "version: Field required"),
    "missing title": (_with("title", ...), "title: Field required"),
    "missing episode_type": (_with("episode_type", ...), "episode_type: Field required"),
    "missing fields": (_with("fields", ...), "fields: Field required"),
    "missing content_template": (_with("content_template", ...), "content_template: Field"),
    "missing field name": (_with("fields.0.name", ...), "fields.0.name: Field required"),
    "bad id (uppercase)": (_with("id", "Sales"), "id: String should match pattern"),
    "bad id (leading dash)": (_with("id", "-sales"), "id: String should match pattern"),
    "bad id (underscore)": (_with("id", "sales_note"), "id: String should match pattern"),
    "id that YAML reads as a number": (_with("id", 42), "id: Input should be a valid string"),
    "version zero": (_with("version", 0), "version: Input should be greater than or equal to 1"),
    "version as string": (_with("version", "1"), "version: Input should be a valid integer"),
    "version as bool": (_with("version", True), "version: Input should be a valid integer"),
    "version as float": (_with("version", 1.5), "version: Input should be a valid integer"),
    "empty title": (_with("title", ""), "title: String should have at least 1 character"),
    "title not a string": (_with("title", ["x"]), "title: Input should be a valid string"),
    "long episode_type": (_with("episode_type", "x" * 129), "episode_type: String should have"),
    "no fields": (_with("fields", []), "fields: List should have at least 1 item"),
    "fields not a list": (_with("fields", {"name": "a"}), "fields: Input should be a valid list"),
    "bad field name": (_with("fields.0.name", "account name"), "fields.0.name: String should"),
    "bad field type": (_with("fields.1.type", "number"), "fields.1.type: Input should be"),
    "required not a bool": (_with("fields.0.required", "true"), "fields.0.required: Input"),
    "duplicate field names": (_with("fields.2.name", "account"), "duplicate field name 'account'"),
    "placeholder naming no field": (
        _with("content_template", "Hi {acount}"),
        "placeholder(s) {acount} that name no declared field",
    ),
    "stray opening brace": (
        _with("content_template", "Hi {account"),
        "unmatched '{' at line 1, column 4",
    ),
    "stray closing brace": (
        _with("content_template", "Hi }\n{account}"),
        "unmatched '}' at line 1, column 4",
    ),
    "empty content_template": (_with("content_template", ""), "content_template: String should"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_invalid_template_fails_naming_file_and_problem(tmp_path: Path, case: str) -> None:
    data, problem = BAD_DOCUMENTS[case]
    path = write_yaml(tmp_path / "ops", "broken.yaml", data)
    with pytest.raises(ConfigError) as err:
        load_catalogue([tmp_path / "ops"])
    assert f"template file {path}:" in str(err.value)
    assert problem in str(err.value)


BAD_TEXT = {
    "invalid YAML": ("id: a\nfields: [\n", "invalid YAML: line 3"),
    "tab indentation": ("id: a\n\tversion: 1\n", "invalid YAML: line 2"),
    "repeated key": ("id: a\nid: b\n", "invalid YAML: line 2, column 1: duplicate key 'id'"),
    "a list as a key": ("? [a, b]\n: 1\n", "invalid YAML: line 1, column 3: unsupported"),
    "NUL in the scaffold": (
        "id: a\nversion: 1\ntitle: A\nepisode_type: a\nfields: [{name: x}]\n"
        'content_template: "{x}\\0"\n',
        "content_template must not contain a NUL character",
    ),
    "top-level list": ("- id: a\n", "must be a YAML mapping, found a list"),
    "empty file": ("", "must be a YAML mapping, found empty"),
    "a python object tag": ("id: !!python/object:os.system x\n", "invalid YAML"),
}


@pytest.mark.parametrize("case", list(BAD_TEXT))
def test_unreadable_yaml_fails_naming_file(tmp_path: Path, case: str) -> None:
    text, problem = BAD_TEXT[case]
    path = write_text(tmp_path / "ops", "broken.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_catalogue([tmp_path / "ops"])
    assert str(path) in str(err.value) and problem in str(err.value)


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_catalogue([tmp_path / "nowhere"])
    write_text(tmp_path, "file.yaml", "x: 1")
    with pytest.raises(ConfigError, match="is not a directory"):
        load_catalogue([tmp_path / "file.yaml"])


def test_optional_keys_have_documented_defaults() -> None:
    t = MemoryTemplate.model_validate(
        {
            "id": "x",
            "version": 1,
            "title": "X",
            "episode_type": "x.y",
            "fields": [{"name": "a"}],
            "content_template": "{a}",
        }
    )
    assert t.description is None
    f = t.fields[0]
    assert (f.type, f.required, f.description) == ("string", False, None)


def test_services_load_the_catalogue_and_refuse_a_bad_one(tmp_path: Path) -> None:
    write_yaml(tmp_path / "ops", "sales.yaml", SIXTH)
    services = Services.from_settings(make_settings(tmp_path, template_dirs=[tmp_path / "ops"]))
    try:
        assert len(services.templates) == 6 and "sales-call-note" in services.templates
    finally:
        services.close()
    bad = write_yaml(tmp_path / "bad", "x.yaml", _with("id", "Nope"))
    with pytest.raises(ConfigError, match=str(bad)):
        Services.from_settings(make_settings(tmp_path, template_dirs=[tmp_path / "bad"]))


def test_template_dirs_setting_reads_a_separated_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_yaml(tmp_path / "one", "a.yaml", SIXTH | {"id": "one"})
    write_yaml(tmp_path / "two", "b.yaml", SIXTH | {"id": "two"})
    monkeypatch.setenv("CAIRN_TEMPLATE_DIRS", f"{tmp_path / 'one'}:{tmp_path / 'two'}")
    settings = make_settings(tmp_path)
    assert {"one", "two"} <= {t.id for t in load_catalogue(settings.template_dirs)}


def test_server_templates_of_the_working_directory_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's way to add one: "drop a new *.yaml file into server/templates/"."""
    write_yaml(tmp_path / "server" / "templates", "sales.yaml", SIXTH)
    monkeypatch.chdir(tmp_path)
    settings = make_settings(tmp_path / "data")
    assert settings.resolved_template_dirs() == [Path("server") / "templates"]
    services = Services.from_settings(settings)
    try:
        assert services.templates.get("sales-call-note").version == 2
    finally:
        services.close()
    listed = make_settings(tmp_path / "data", template_dirs=[tmp_path / "server" / "templates"])
    assert len(listed.resolved_template_dirs()) == 1  # not read twice (a duplicate id)
